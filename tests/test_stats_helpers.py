"""The statistics the sampling tests rely on (conftest.distribution_pvalue, conftest.chi_square_power):
impossible tokens fail, samples from the distribution pass, the stated power is real -- and the power
of every statistical test of the suite against a 1% total-variation bias, stated in a comment above
that test, is recomputed here from its real target distribution and sample size."""

import numpy as np
import pytest
import torch
from conftest import (
    chi_square_power,
    continuation_logits,
    distribution_pvalue,
    pooled_cells,
    split_tables,
    tiny_model,
)

from specdec_lib.autoregressive import SamplingParams, process_logits

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


# ---------------------------------------------------------------------- the stated power of the suite
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


def two_token_target(vocab, sampling, fp64_renormalised=False):
    """The target's processed two-token distribution after [1, 2, 3], as the tests build it."""
    target = tiny_model(vocab=vocab, seed=0, scale=3.0)
    p = process_logits(continuation_logits(target, [1, 2, 3], vocab), sampling)
    if fp64_renormalised:  # test_trees.distributions
        p = p.double() / p.double().sum(-1, keepdim=True)
    p1, p2, _ = split_tables(p, 3, vocab)
    return (p1[:, None] * p2).double().numpy()


def sibling_pairs():
    q = [0.4, 0.3, 0.2, 0.1, 0.0]
    return np.array([[q[a] * q[b] / (1 - q[a]) if a != b else 0.0 for b in range(5)] for a in range(5)])


def next_token_target():
    with torch.no_grad():
        logits = tiny_model(seed=0, scale=3.0)(input_ids=torch.tensor([[1, 2, 3, 4, 5]])).logits[0, -1]
    return process_logits(logits, SamplingParams(1.0)).double().numpy()


# test -> (target distribution, N); the comment above each test quotes its row of STATED_POWER
SUITE = {
    "test_engine::test_chain_verification_is_statistically_lossless_and_the_test_has_teeth[T=1]": (
        lambda: two_token_target(8, SamplingParams(1.0)),
        20_000,
    ),
    "test_engine::test_chain_verification_is_statistically_lossless_and_the_test_has_teeth[T=0.7,p=0.9]": (
        lambda: two_token_target(8, SamplingParams(0.7, top_p=0.9)),
        20_000,
    ),
    "test_engine::test_the_whole_engine_samples_the_target_distribution": (
        lambda: two_token_target(8, SamplingParams(0.7, top_p=0.9)),
        20_000,
    ),
    "test_trees::test_draw_children_modes": (sibling_pairs, 4_000),
    "test_trees::test_tree_verification_is_statistically_lossless_and_the_test_has_teeth": (
        lambda: two_token_target(6, SamplingParams(1.0), fp64_renormalised=True),
        20_000,
    ),
    "test_medusa_mtp::test_sampling_is_lossless_statistically": (
        lambda: two_token_target(16, SamplingParams(0.8, top_k=12)),
        20_000,
    ),
    "test_medusa_mtp::test_sampling_through_the_whole_engine_smoke": (
        lambda: two_token_target(16, SamplingParams(0.8, top_k=12)),
        2_000,
    ),
    "test_medusa_mtp::test_typical_acceptance_is_lossy_and_the_lossless_rule_is_not": (
        next_token_target,
        20_000,
    ),
}

# test -> (N, cells, power vs 1% TV between the two top cells, power vs 1% TV spread over all cells,
#          N for 0.8 power concentrated, N for 0.8 power spread), at threshold 1e-3
STATED_POWER = {
    "test_engine::test_chain_verification_is_statistically_lossless_and_the_test_has_teeth[T=1]": (
        20_000, 64, 1.000, 0.010, 9_160, 141_440,
    ),
    "test_engine::test_chain_verification_is_statistically_lossless_and_the_test_has_teeth[T=0.7,p=0.9]": (
        20_000, 49, 0.993, 0.013, 12_360, 127_040,
    ),
    "test_engine::test_the_whole_engine_samples_the_target_distribution": (
        20_000, 49, 0.993, 0.013, 12_360, 127_040,
    ),
    "test_trees::test_draw_children_modes": (4_000, 12, 0.017, 0.004, 28_240, 76_480),
    "test_trees::test_tree_verification_is_statistically_lossless_and_the_test_has_teeth": (
        20_000, 36, 0.942, 0.018, 15_760, 112_960,
    ),
    "test_medusa_mtp::test_sampling_is_lossless_statistically": (
        20_000, 144, 1.000, 0.005, 7_880, 197_760,
    ),
    "test_medusa_mtp::test_sampling_through_the_whole_engine_smoke": (
        2_000, 144, 0.030, 0.001, 7_880, 197_760,
    ),
    "test_medusa_mtp::test_typical_acceptance_is_lossy_and_the_lossless_rule_is_not": (
        20_000, 16, 0.904, 0.046, 16_960, 84_480,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SUITE))
def test_stated_power_of_the_suites_statistical_tests(name):
    make, n = SUITE[name]
    p = make()
    p = p / p.sum()
    cells = pooled_cells(p, n)[2]
    conc, spr = concentrated(p), spread(p)
    assert 0.5 * np.abs(conc - p.reshape(-1)).sum() == pytest.approx(TV)
    assert 0.5 * np.abs(spr - p.reshape(-1)).sum() == pytest.approx(TV)
    got = (
        n,
        cells,
        chi_square_power(p, conc, n, ALPHA),
        chi_square_power(p, spr, n, ALPHA),
        n_for_power(p, conc),
        n_for_power(p, spr),
    )
    want = STATED_POWER[name]
    assert got[:2] == want[:2], got
    assert got[2:4] == pytest.approx(want[2:4], abs=6e-4), got
    assert got[4:] == pytest.approx(want[4:], rel=0.01), got
