"""Chapter 02's checkers beyond the shared contract in tests/test_checks_common.py: specific answers
and edge cases."""

import pytest

from specdec_course.checks import ch02
from specdec_teacher import ch02 as teacher


def test_best_k_cases_have_no_near_ties():
    """A learner's float rounding must not flip the answer: the best k wins by a clear margin."""
    for alpha, c, V in ch02._BEST_K_CASES:
        scores = sorted((teacher.predicted_speedup(alpha, k, c, V) for k in range(1, 17)), reverse=True)
        assert scores[0] - scores[1] > 1e-4, (alpha, c, V)


def test_reference_values_match_the_chapter():
    assert round(teacher.expected_tau(0.8, 4), 2) == 3.36
    assert teacher.best_k(0.8, 0.02) == 11 and teacher.best_k(0.8, 0.3) == 3
    assert teacher.predicted_speedup(0.6, 1, 0.6, 0.0) == pytest.approx(1.0)
    assert teacher.break_even_c(0.6, 1, 0.0) == pytest.approx(0.6)  # Leviathan et al.'s alpha > c
    assert teacher.alpha_for_tau(3.3616, 4) == pytest.approx(0.8, abs=1e-9)
    assert teacher.naive_alpha(0.8, 4) == pytest.approx((0.8 + 0.64 + 0.512 + 0.4096) / 4)
