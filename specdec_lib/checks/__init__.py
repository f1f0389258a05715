"""Self-check exercise checkers (hand-written support code, one file per chapter).

Every checker takes the learner's function and reports one of three verdicts, printed and returned:
"correct", "incorrect" (with a hint of what went wrong) or "not attempted" (the stub still raises
NotImplementedError). Checkers never raise, so a notebook with untouched stubs still runs under nbval.
Each chapter file also holds the reference solutions (`REFERENCE`), used by tests/test_checks.py.
"""

from specdec_lib.checks._core import CORRECT, INCORRECT, NOT_ATTEMPTED, verdict  # noqa: F401
