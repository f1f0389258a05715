"""Self-check exercise checkers (hand-written support code, one file per chapter).

Every checker takes the learner's function and reports one of three verdicts, printed and returned:
"correct", "incorrect" (with a hint of what went wrong) or "not attempted" (the stub still raises
NotImplementedError). Checkers never raise, so a notebook with untouched stubs still runs under nbval.
They hold no solutions: the expected values of their cases, and digests of the value answers, are in
`answers.json`, written from the reference solutions of the teacher's package (`teacher/specdec_teacher`
in the repository, not installed with `specdec_lib`; see `_core`).
"""

from specdec_course.checks._core import CORRECT, INCORRECT, NOT_ATTEMPTED, verdict  # noqa: F401
