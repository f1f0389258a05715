"""Shared fixtures: tiny random models (any architecture) so engine tests run in seconds on a CPU."""

import os

import numpy as np
import pytest
import torch
from scipy.stats import chi2, chisquare, ncx2

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
torch.set_num_threads(1)  # tiny models: threading only adds overhead


def tiny_model(vocab=16, hidden=32, layers=2, seed=0, arch="llama", ctx=128, scale=1.0):
    """A random causal LM. `scale` multiplies the output embeddings: larger = peakier distributions."""
    import transformers as tf

    cls = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM),
    }[arch]
    torch.manual_seed(seed)
    cfg = cls[0](
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=ctx,
        tie_word_embeddings=False,
        head_dim=hidden // 2,
    )
    model = cls[1](cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


@pytest.fixture(scope="session")
def tiny_pair():
    """(target, draft): same vocabulary, different weights, peaky enough that drafts are often right."""
    return tiny_model(seed=0, scale=20.0), tiny_model(seed=1, layers=1, scale=20.0)


IMPOSSIBLE = 1e-12  # a cell with probability <= this is impossible: one sample in it fails the test


def pooled_cells(probs, n):
    """The cells of `distribution_pvalue` for `n` samples: (possible cell index [C], group of each
    possible cell [C], number of groups). Cells expected at least 5 times are their own group; the
    rare possible cells are pooled into one extra group (merged into the smallest group if they are
    expected fewer than 5 times together)."""
    p = np.asarray(probs, dtype=float).reshape(-1)
    possible = np.flatnonzero(p > IMPOSSIBLE)
    expected = p[possible] / p[possible].sum() * n
    big = expected >= 5
    group = np.cumsum(big) - 1
    n_big = int(big.sum())
    if (~big).any():
        if expected[~big].sum() >= 5 or n_big == 0:
            group[~big], n_big = n_big, n_big + 1
        else:
            group[~big] = group[big][np.argmin(expected[big])]
    return possible, group, n_big


def distribution_pvalue(counts, probs):
    """Goodness of fit of observed `counts` to `probs` (same shape, any normalisation): 0.0 when any
    sample fell on an impossible cell (probability <= 1e-12, e.g. a token top-k / top-p forbid),
    otherwise the chi-square p-value over the possible cells, the rare ones pooled (`pooled_cells`)."""
    observed = np.asarray(counts, dtype=float).reshape(-1)
    p = np.asarray(probs, dtype=float).reshape(-1)
    if observed[p <= IMPOSSIBLE].sum() > 0:
        return 0.0
    possible, group, cells = pooled_cells(p, observed.sum())
    if cells < 2:
        return 1.0  # one possible cell and no sample outside it: nothing to test
    obs = np.bincount(group, observed[possible], cells)
    exp = np.bincount(group, p[possible], cells)
    return float(chisquare(obs, exp / exp.sum() * obs.sum()).pvalue)


def chi_square_power(probs, alternative, n, alpha=1e-3):
    """Power of `distribution_pvalue(counts, probs) < alpha` for `n` samples drawn from `alternative`
    (same shape as `probs`), in the noncentral chi-square approximation: noncentrality
    n * sum_c (alt_c - p_c)^2 / p_c over the test's cells, cells - 1 degrees of freedom. Mass the
    alternative puts on impossible cells counts as caught (1 - (1 - m)^n)."""
    p = np.asarray(probs, dtype=float).reshape(-1)
    alt = np.asarray(alternative, dtype=float).reshape(-1)
    p, alt = p / p.sum(), alt / alt.sum()
    possible, group, cells = pooled_cells(p, n)
    pc, ac = np.bincount(group, p[possible], cells), np.bincount(group, alt[possible], cells)
    outside = 1.0 - alt[possible].sum()
    caught = 1.0 - (1.0 - outside) ** n
    if cells < 2:
        return caught
    lam = n * ((ac / ac.sum() - pc) ** 2 / pc).sum()
    power = float(ncx2.sf(chi2.isf(alpha, cells - 1), cells - 1, lam))
    return caught + (1.0 - caught) * power


def continuation_logits(model, context, vocab):
    """Logits [V * V, len(context) + 2, V] of `model` after `context` followed by every 2-token
    continuation (row x1 * V + x2), in one batched forward: exact tables for sampling tests."""
    x1, x2 = torch.meshgrid(torch.arange(vocab), torch.arange(vocab), indexing="ij")
    seqs = torch.cat(
        [torch.as_tensor(context).expand(vocab * vocab, -1), x1.reshape(-1, 1), x2.reshape(-1, 1)], 1
    )
    with torch.no_grad():
        return model(input_ids=seqs).logits.float()


def split_tables(t, n, vocab):
    """From [V * V, n + 2, V] continuation rows (context length n): after the context [V], after x1
    [V, V], after x1 x2 [V, V, V]."""
    return t[0, n - 1], t[::vocab, n], t[:, n + 1].reshape(vocab, vocab, vocab)
