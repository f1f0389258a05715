"""The chapter 04 checkers: correct for the references, incorrect for plausible mistakes, not attempted
for untouched stubs; and they never raise."""

import pytest

from specdec_lib.checks import ch04

FUNCTION_CHECKERS = ["check_ancestor_mask", "check_positions", "check_kept_slots", "check_greedy_walk"]


def _stub(*args):
    raise NotImplementedError


def test_every_checker_has_a_reference_and_wrong_answers():
    checkers = {name for name in dir(ch04) if name.startswith("check_")}
    assert checkers == set(ch04.REFERENCE) == set(ch04.WRONG)
    assert all(ch04.WRONG[name] for name in checkers)


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_reference_is_correct(name):
    assert getattr(ch04, name)(ch04.REFERENCE[name]) == "correct"


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_wrong_answers_are_incorrect(name):
    for wrong in ch04.WRONG[name]:
        assert getattr(ch04, name)(wrong) == "incorrect", wrong


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_stub_is_not_attempted(name):
    assert getattr(ch04, name)(_stub) == "not attempted"
    assert getattr(ch04, name)(None) == "not attempted"


def test_answers_in_other_types_are_accepted():
    import torch

    ref_mask, ref_positions = ch04.REFERENCE["check_ancestor_mask"], ch04.REFERENCE["check_positions"]
    assert ch04.check_ancestor_mask(lambda parents: ref_mask(parents).tolist()) == "correct"
    assert ch04.check_positions(lambda parents, L: torch.tensor(ref_positions(parents, L))) == "correct"
    assert ch04.check_greedy_walk(lambda *a: tuple(ch04.REFERENCE["check_greedy_walk"](*a))) == "correct"
    assert ch04.check_ancestor_mask(lambda parents: "mask") == "incorrect"  # bad output: no crash
    assert ch04.check_greedy_walk(lambda *a: 3) == "incorrect"


def test_mss_example():
    assert ch04.check_mss_example(*ch04.REFERENCE["check_mss_example"]) == "correct"
    assert ch04.check_mss_example(0.4, 0.3, [0, 0, 0.6667, 0.3333]) == "correct"  # rounded, a list
    for answer in ch04.WRONG["check_mss_example"]:
        assert ch04.check_mss_example(*answer) == "incorrect", answer
    assert ch04.check_mss_example() == "not attempted"
    assert ch04.check_mss_example(accept_a=0.4) == "not attempted"
    assert ch04.check_mss_example(0.4, 0.3, "none") == "incorrect"
