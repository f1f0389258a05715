"""Chapter 03's checkers beyond the shared contract in tests/test_checks_common.py: specific answers
and edge cases."""

from specdec_course.checks import ch03
from specdec_teacher import ch03 as teacher


def test_seed_question():
    assert ch03.check_seed_question(*teacher.REFERENCE["check_seed_question"]) == "correct"
    assert ch03.check_seed_question(beta=0.70, residual=[1, 0, 0]) == "correct"  # any number types
    for beta, residual in teacher.WRONG["check_seed_question"]:
        assert ch03.check_seed_question(beta, residual) == "incorrect", (beta, residual)
    assert ch03.check_seed_question() == "not attempted"
    assert ch03.check_seed_question(beta=0.7) == "not attempted"
    assert ch03.check_seed_question(beta=None, residual=None) == "not attempted"
    assert ch03.check_seed_question(beta=0.7, residual="one") == "incorrect"  # bad input: no crash
