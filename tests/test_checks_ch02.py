"""The chapter 02 checkers: right for the reference, wrong for plausible mistakes, quiet for stubs."""

import pytest

from specdec_lib.checks import ch02
from specdec_lib.checks._core import CORRECT, INCORRECT, NOT_ATTEMPTED

CHECKERS = sorted(name for name in vars(ch02) if name.startswith("check_"))
WRONG_CASES = [(name, i) for name in CHECKERS for i in range(len(ch02.WRONG.get(name, [])))]


def _stub(*args, **kwargs):
    raise NotImplementedError


def test_every_checker_has_a_reference_and_wrong_answers():
    assert len(CHECKERS) >= 3
    assert set(ch02.REFERENCE) == set(CHECKERS)
    assert set(ch02.WRONG) == set(CHECKERS) and all(ch02.WRONG[name] for name in CHECKERS)


@pytest.mark.parametrize("name", CHECKERS)
def test_reference_is_correct(name):
    assert getattr(ch02, name)(ch02.REFERENCE[name]) == CORRECT


@pytest.mark.parametrize(("name", "i"), WRONG_CASES)
def test_wrong_answer_is_incorrect(name, i):
    assert getattr(ch02, name)(ch02.WRONG[name][i]) == INCORRECT


@pytest.mark.parametrize("name", CHECKERS)
def test_stub_is_not_attempted(name):
    assert getattr(ch02, name)(_stub) == NOT_ATTEMPTED
    assert getattr(ch02, name)(None) == NOT_ATTEMPTED


@pytest.mark.parametrize("name", CHECKERS)
def test_a_crash_is_incorrect_not_an_error(name):
    def broken(*args, **kwargs):
        raise KeyError("oops")

    assert getattr(ch02, name)(broken) == INCORRECT


def test_best_k_cases_have_no_near_ties():
    """A learner's float rounding must not flip the answer: the best k wins by a clear margin."""
    for alpha, c, V in ch02._BEST_K_CASES:
        scores = sorted((ch02.predicted_speedup(alpha, k, c, V) for k in range(1, 17)), reverse=True)
        assert scores[0] - scores[1] > 1e-4, (alpha, c, V)


def test_reference_values_match_the_chapter():
    assert round(ch02.expected_tau(0.8, 4), 2) == 3.36
    assert ch02.best_k(0.8, 0.02) == 11 and ch02.best_k(0.8, 0.3) == 3
    assert ch02.predicted_speedup(0.6, 1, 0.6, 0.0) == pytest.approx(1.0)
    assert ch02.pooled_alpha([2, 0, 4, 1], [4, 4, 4, 4]) == pytest.approx(7 / 10)
