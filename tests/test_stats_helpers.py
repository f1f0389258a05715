"""The statistics a sampling test may rely on (conftest.distribution_pvalue, conftest.chi_square_power):
impossible tokens fail, samples from the distribution pass, the stated power is real.

Every sampling test of the suite is EXACT today (conftest.ExactLaw enumerates every random draw): the
chi-square tests they replaced had 0.001-0.05 power against a 1% total-variation bias spread over many
cells at 20,000 samples (0.8 power would have needed 85,000-200,000 samples, by chi_square_power). These
helpers stay for a case too big to enumerate; such a test must state its power, computed with them."""

import numpy as np
import pytest
import torch
from conftest import (
    chi_square_power,
    distribution_pvalue,
    pooled_cells,
)

ALPHA = 1e-3  # the suite's threshold: a statistical test passes when its p-value is above it
TV = 0.01  # the bias the stated power is against: 1% total variation


# --------------------------------------------------------------------------------- the p-value
def test_a_single_sample_on_an_impossible_cell_fails():
    probs = np.array([0.5, 0.3, 0.2, 0.0])
    counts = np.array([5000.0, 3000.0, 2000.0, 0.0])
    assert distribution_pvalue(counts, probs) > 0.5  # a perfect fit ...
    counts[3] = 1
    assert distribution_pvalue(counts, probs) == 0.0  # ... but one impossible sample: rejected
    tiny = torch.tensor([[0.5, 1e-13], [0.3, 0.2 - 1e-13]])  # <= 1e-12 counts as impossible
    assert distribution_pvalue(np.array([[500.0, 1.0], [300.0, 200.0]]), tiny) == 0.0
    # an impossible cell is never pooled away: the old pooled chi-square passed this
    rare = np.array([0.25] * 4 + [0.0] * 60)
    counts = np.array([2500.0] * 4 + [0.0] * 60)
    counts[10] = 3
    assert distribution_pvalue(counts, rare) == 0.0


def test_samples_from_the_distribution_pass():
    """Calibration: at the 5% level the test rejects about 5% of honest samples, including with many
    rare cells (pooled) and impossible ones; at the suite's 1e-3 level, none of 300."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(64, 0.3))
    p[rng.random(64) < 0.2] = 0.0  # some impossible cells, as after top-k / top-p
    p /= p.sum()
    for n in (500, 20_000):
        pvalues = np.array([distribution_pvalue(rng.multinomial(n, p), p) for _ in range(300)])
        assert (pvalues < ALPHA).mean() < 0.01
        assert 0.02 < (pvalues < 0.05).mean() < 0.09, (n, (pvalues < 0.05).mean())


def test_the_power_is_what_chi_square_power_says():
    """Monte Carlo check of the noncentral approximation, 400 biased samples per case, at sample sizes
    where the claimed power is 0.3 and 0.8."""
    rng = np.random.default_rng(1)
    for cells in (16, 64, 144):
        p = rng.dirichlet(np.full(cells, 1.0))
        for alt in (concentrated(p), spread(p)):
            for power in (0.3, 0.8):
                n = n_for_power(p, alt, power)
                claimed = chi_square_power(p, alt, n, ALPHA)
                seen = np.mean([distribution_pvalue(rng.multinomial(n, alt), p) < ALPHA for _ in range(400)])
                assert abs(seen - claimed) < 0.08, (cells, n, claimed, seen)


def test_power_helper_edge_cases():
    p = np.array([0.6, 0.4, 0.0])
    assert chi_square_power(p, p, 1000) == pytest.approx(ALPHA, rel=0.05)  # no bias: the false alarm rate
    assert chi_square_power(p, [0.6, 0.39, 0.01], 1000) > 0.99  # 1% on an impossible cell: caught
    assert pooled_cells(np.array([0.5, 0.5 - 1e-4, 1e-4, 0.0]), 1000)[2] == 2  # the rare cell is merged


# ------------------------------------------------------------------ the alternatives power is stated for
def concentrated(p, tv=TV):
    """`tv` of mass moved from the most probable cell to the second: the hardest two-cell bias to see."""
    alt = np.asarray(p, dtype=float).reshape(-1).copy()
    order = np.argsort(-alt)
    alt[order[0]] -= tv
    alt[order[1]] += tv
    return alt


def spread(p, tv=TV):
    """`tv` spread thinly over every possible cell: the cells split into two halves of (nearly) equal
    mass, one scaled up by 1 + tv / P(A), the other down. The least favourable bias of a given TV
    (noncentrality ~ 4 N tv^2, the minimum of N sum (alt - p)^2 / p)."""
    p = np.asarray(p, dtype=float).reshape(-1)
    up, mass = np.zeros(len(p), dtype=bool), [0.0, 0.0]
    for i in np.argsort(-p):
        if p[i] > 1e-12:
            side = int(mass[1] < mass[0])
            up[i] = side == 1
            mass[side] += p[i]
    down = ~up & (p > 1e-12)
    return np.where(up, p * (1 + tv / p[up].sum()), np.where(down, p * (1 - tv / p[down].sum()), p))


def n_for_power(p, alt, power=0.8):
    """The smallest sample size (to 0.5%) at which the test reaches `power` against `alt`."""
    lo, hi = 10, 10
    while chi_square_power(p, alt, hi) < power:
        lo, hi = hi, 2 * hi
    while hi - lo > max(1, lo // 200):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if chi_square_power(p, alt, mid) < power else (lo, mid)
    return hi


def test_pooled_stats_add_every_count_and_time():
    from specdec_lib.speculative import Stats

    a, b = Stats(), Stats()
    a.accepted, a.drafted, a.tree_sizes, a.target_forwards, a.new_tokens = [2, 0], [3, 3], [4, 4], 2, 4
    b.accepted, b.drafted, b.tree_sizes, b.target_forwards, b.new_tokens = [3], [3], [4], 1, 4
    a.time_draft, b.time_verify, b.draft_forwards, a.prefill_forwards = 0.5, 0.25, 6, 1
    pooled = Stats.pool([a, b])
    assert pooled.accepted == [2, 0, 3] and pooled.drafted == [3, 3, 3] and pooled.tree_sizes == [4, 4, 4]
    assert (pooled.target_forwards, pooled.new_tokens, pooled.draft_forwards, pooled.prefill_forwards) == (
        3,
        8,
        6,
        1,
    )
    assert pooled.tau == 8 / 3 and pooled.time_total == 0.75
    assert pooled.acceptance_by_position() == [2 / 3, 1.0, 1 / 2]
    assert a.accepted == [2, 0]  # the runs themselves are left alone
