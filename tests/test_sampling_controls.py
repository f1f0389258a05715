"""Sampling controls on realistic logits: `process_logits` must be transformers' own
TemperatureLogitsWarper -> TopKLogitsWarper -> TopPLogitsWarper, then softmax.

FLAT logits (standard normal, as from a model that is unsure), so top-k and top-p both bite and their
order matters: on peaked logits top-p keeps a handful of tokens that top-k keeps anyway, and a library
that computed top-p on the distribution before top-k (a mutant that passed the older test in
test_engine.py) gives the same answer. Here that mutant differs by up to ~0.5 in probability."""

import pytest
import torch

from specdec_lib.autoregressive import SamplingParams, process_logits

TOP_K = (None, 5, 50, 400)
TOP_P = (None, 0.5, 0.8, 0.95)


def transformers_reference(logits, t, k, p):
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    warpers = LogitsProcessorList([TemperatureLogitsWarper(t)])
    if k is not None:
        warpers.append(TopKLogitsWarper(k))
    if p is not None:
        warpers.append(TopPLogitsWarper(p))
    return warpers(None, logits.clone()).softmax(-1)


@pytest.mark.parametrize("vocab", [4096, 64])
@pytest.mark.parametrize("t", [0.5, 0.7, 1.0, 1.5])
def test_process_logits_matches_transformers_on_flat_logits(vocab, t):
    for seed in range(3):
        logits = torch.randn(8, vocab, generator=torch.Generator().manual_seed(seed))  # 8 rows, batched
        for k in TOP_K:
            for p in TOP_P:
                ref = transformers_reference(logits, t, k, p)
                ours = process_logits(logits, SamplingParams(t, k, p))
                where = f"vocab={vocab} T={t} k={k} p={p} seed={seed}"
                assert ours.shape == ref.shape and ours.dtype == torch.float32, where
                assert torch.equal(ours > 0, ref > 0), f"support differs: {where}"
                torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0, msg=where)
                if k is not None and p is not None and k < vocab:  # both filters really cut
                    kept = (ref > 0).sum(-1)
                    assert (kept <= k).all() and (kept >= 1).all(), where


def test_top_k_and_top_p_both_cut_on_these_logits():
    """The cases above are not vacuous: with flat logits top-p (after top-k) removes tokens top-k kept,
    and top-p on the unfiltered distribution would keep far more than top-k allows."""
    logits = torch.randn(8, 4096, generator=torch.Generator().manual_seed(0))
    for k in (50, 400):
        for p in (0.5, 0.8):
            both = (process_logits(logits, SamplingParams(1.0, k, p)) > 0).sum(-1)
            only_p = (process_logits(logits, SamplingParams(1.0, None, p)) > 0).sum(-1)
            assert (both < k).all() and (only_p > k).all(), (k, p, both, only_p)
