"""What a student who attacks the graders writes in an answer cell (tests/test_grade.py, test_nbgrader.py)."""

# (a') the checkers, `importlib.reload`, the recorder and the teacher's package patched, and a fake verdict
# printed, with the names spelled apart so that no static check of the cell finds them
PATCH = """import importlib, sys, types
import specdec_course.checks.{chapter} as _c
import specdec_course.checks._record as _r

def _yes(*args, **kwargs):
    print("✅ patched (hidden cases): correct")
    return "correct"

importlib.reload = lambda m: m
for _name in dir(_c):
    if _name.startswith("check" + "_"):
        setattr(_c, _name, _yes)
_fake = types.ModuleType("specdec_" + "teacher")
_fake.hidden_check = _yes
_fake.judge = types.SimpleNamespace(judge=_yes)
sys.modules["specdec_" + "teacher"] = _fake
sys.modules["specdec_" + "teacher.judge"] = _fake.judge
_r.record = lambda *args, **kwargs: _yes()  # records nothing
"""

# (d) the reference solutions, imported under a spelled-apart name
REFERENCE = (
    'answers = vars(__import__("specdec_" + "teach" + "er.{chapter}", fromlist=["x"]))["REFER" + "ENCE"]\n'
)
