"""Chapter 08's checkers beyond the shared contract in tests/test_checks_common.py: the references agree
with the library's EAGLE-2 and with the worked examples the notebook gives."""

import math

import pytest

from specdec_course.checks import ch08
from specdec_lib.eagle2 import rerank
from specdec_teacher import ch08 as teacher


@pytest.mark.parametrize("case", range(len(ch08._recorded_trees())))
def test_rerank_reference_is_the_librarys_rerank(case):
    parents, logp = ch08._recorded_trees()[case]
    scores = teacher.cumulative(parents, logp)
    for total in range(1, len(parents) + 1):
        assert teacher.REFERENCE["check_rerank"](parents, logp, total) == rerank(scores, parents, total)


def test_the_worked_rerank_example():
    """Exercise 1's example on paper: path probabilities 0.6, 0.3, 0.54, 0.03, 0.15, 0.12 keep 0, 1, 2."""
    parents, probs = [-1, -1, 0, 0, 1, 1], [0.6, 0.3, 0.9, 0.05, 0.5, 0.4]
    assert teacher.REFERENCE["check_rerank"](parents, [math.log(p) for p in probs], 3) == [0, 1, 2]


def test_next_frontier_can_give_every_slot_to_one_parent():
    """The note's point: the frontier is the global top-k, so a sure parent can take all k slots."""
    assert teacher.REFERENCE["check_next_frontier"]([-0.1, -3.0], [[-0.2, -0.3], [-0.01, -0.02]], 2) == [0, 1]


def test_tree_value_of_a_chain_and_of_a_tree():
    value = teacher.REFERENCE["check_tree_value"]
    assert value([-1, 0, 1], [0.9, 0.8, 0.5]) == pytest.approx(1 + 0.9 + 0.72 + 0.36)
    assert value([-1, -1, 0], [0.6, 0.3, 0.5]) == pytest.approx(1 + 0.6 + 0.3 + 0.3)
    assert value([-1], [0.0]) == 1.0  # the target's own token, always


def test_a_stub_is_not_attempted_for_each_exercise():
    def stub(*args):
        raise NotImplementedError

    for name in teacher.REFERENCE:
        assert getattr(ch08, name)(stub) == "not attempted"
