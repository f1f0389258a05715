"""Shared fixtures: tiny random models (any architecture) so engine tests run in seconds on a CPU."""

import os

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

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


def chi_square_pvalue(counts, probs):
    """Chi-square goodness of fit of observed `counts` to `probs` (same shape), rare cells pooled."""
    expected = np.asarray(probs, dtype=float).reshape(-1) * counts.sum()
    observed = np.asarray(counts, dtype=float).reshape(-1)
    big = expected >= 5  # pool the rare cells so the chi-square approximation holds
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    return chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


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
