"""The chapter 03 checkers: correct for the references, incorrect for plausible mistakes, not attempted
for untouched stubs; and they never raise."""

import pytest

from specdec_lib.checks import ch03

FUNCTION_CHECKERS = ["check_acceptance_probability", "check_residual", "check_verify_one"]


def _stub(*args):
    raise NotImplementedError


def test_every_checker_has_a_reference_and_wrong_answers():
    checkers = {name for name in dir(ch03) if name.startswith("check_")}
    assert checkers == set(ch03.REFERENCE) == set(ch03.WRONG)
    assert all(ch03.WRONG[name] for name in checkers)


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_reference_is_correct(name):
    assert getattr(ch03, name)(ch03.REFERENCE[name]) == "correct"


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_wrong_answers_are_incorrect(name):
    for wrong in ch03.WRONG[name]:
        assert getattr(ch03, name)(wrong) == "incorrect", wrong


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_stub_is_not_attempted(name):
    assert getattr(ch03, name)(_stub) == "not attempted"
    assert getattr(ch03, name)(None) == "not attempted"


def test_seed_question():
    assert ch03.check_seed_question(*ch03.REFERENCE["check_seed_question"]) == "correct"
    assert ch03.check_seed_question(beta=0.70, residual=[1, 0, 0]) == "correct"  # any number types
    for beta, residual in ch03.WRONG["check_seed_question"]:
        assert ch03.check_seed_question(beta, residual) == "incorrect", (beta, residual)
    assert ch03.check_seed_question() == "not attempted"
    assert ch03.check_seed_question(beta=0.7) == "not attempted"
    assert ch03.check_seed_question(beta=None, residual=None) == "not attempted"
    assert ch03.check_seed_question(beta=0.7, residual="one") == "incorrect"  # bad input: no crash
