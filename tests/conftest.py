"""Shared fixtures: tiny random models (any architecture) so engine tests run in seconds on a CPU."""

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

# The tests are the teacher's side: they import the reference solutions from the teacher's package, which
# is not installed with specdec_lib (teacher/specdec_teacher); and the course kit from the clone
# (course/specdec_course, which `make venv` also installs in editable mode).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "teacher"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "course"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
torch.set_num_threads(1)  # tiny models: threading only adds overhead

# torch.compile on a CPU (issue 50's compiled runner) writes C++ and needs a compiler to build it.
needs_compiler = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("g++", "c++", "clang++")),
    reason="torch.compile on a CPU needs a C++ compiler",
)


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


def gqa_model(arch="llama", layers=4, vocab=24, seed=0):
    """A random target with grouped-query attention (4 query heads, 2 key/value heads), or Qwen3's
    QK-norm: the paths a 2-head tiny model would not exercise."""
    import transformers as tf

    cfg_cls, model_cls = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM),
    }[arch]
    torch.manual_seed(seed)
    cfg = cfg_cls(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    return model_cls(cfg).eval()


def randomised(drafter, seed=0):
    """Untrained layers start near the identity; random weights make every path count."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in drafter.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.15 + (1.0 if p.dim() == 1 else 0.0))
    return drafter


@pytest.fixture(scope="session")
def tiny_pair():
    """(target, draft): same vocabulary, different weights, peaky enough that drafts are often right."""
    return tiny_model(seed=0, scale=20.0), tiny_model(seed=1, layers=1, scale=20.0)


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


# ------------------------------------------------ exact laws: enumerate every random draw of a run
class _Uniform:
    """What the patched torch.rand returns: n uniforms u ~ U(0, 1), never materialised. The verifiers
    only ever scale u and compare it, `u * a < b`, so the comparison is a choice point: element i is
    below with probability clamp(b_i / a_i, 0, 1). Any other use raises (the search would be wrong)."""

    def __init__(self, explorer, scale):
        self.explorer, self.scale = explorer, scale

    def __mul__(self, a):
        return _Uniform(self.explorer, self.scale * torch.as_tensor(a, dtype=torch.float64))

    __rmul__ = __mul__

    def _below(self, b):
        a = self.scale.reshape(-1)
        b = torch.as_tensor(b, dtype=torch.float64).reshape(-1).expand(len(a))
        if (a < 0).any():
            raise NotImplementedError("the explorer handles u * a with a >= 0 only")
        chance = torch.where(a > 0, (b / a.clamp(min=1e-300)).clamp(0, 1), (b > 0).double())
        below = [self.explorer.choose([(True, t), (False, 1 - t)]) for t in chance.tolist()]
        return torch.tensor(below).reshape(self.scale.shape)

    def __lt__(self, b):
        return self._below(b)

    def __gt__(self, b):
        return ~self._below(b)

    def __getattr__(self, name):
        raise NotImplementedError(f"the explorer cannot follow `u.{name}` on torch.rand's output")


class ExactLaw:
    """Runs a function again and again, every random draw a choice point, until every combination of
    outcomes has been visited; `run(fn)` returns {fn's result: its exact probability}.

    torch.multinomial (1-D, with or without replacement) branches over its support with the exact
    probabilities; torch.rand returns a symbolic uniform (`_Uniform`), and torch.searchsorted of a scaled
    uniform in a cumulative sum (chapter 01's inverse-CDF `sample_token`) branches over the intervals it
    can land in; every other source of randomness raises, so nothing random escapes the enumeration."""

    def __init__(self, monkeypatch):
        monkeypatch.setattr(torch, "multinomial", self._multinomial)
        monkeypatch.setattr(torch, "rand", self._rand)
        monkeypatch.setattr(torch, "searchsorted", self._searchsorted(torch.searchsorted))
        for name in ("randn", "randint", "randperm", "bernoulli", "rand_like", "randn_like", "normal"):
            monkeypatch.setattr(torch, name, self._forbidden)
        for name in ("multinomial", "uniform_", "exponential_", "bernoulli_", "random_", "normal_"):
            monkeypatch.setattr(torch.Tensor, name, self._forbidden)

    def choose(self, outcomes):
        outcomes = [(o, w) for o, w in outcomes if w > 0]
        i = self.replay[len(self.trace)] if len(self.trace) < len(self.replay) else 0
        self.trace.append((i, len(outcomes)))
        self.weight *= outcomes[i][1]
        return outcomes[i][0]

    def _multinomial(self, probs, num_samples, replacement=False, *, generator=None, out=None):
        if probs.dim() != 1 or out is not None:
            raise NotImplementedError("the explorer handles draws from one 1-D distribution")
        p, picks = probs.double() / probs.double().sum(), []
        for _ in range(num_samples):
            left = p.clone()
            if picks and not replacement:
                left[picks] = 0
                left = left / left.sum()
            picks.append(self.choose(list(enumerate(left.tolist()))))
        return torch.tensor(picks, device=probs.device)

    def _searchsorted(self, real):
        def searchsorted(sorted_sequence, values, *args, right=False, **kwargs):
            if not isinstance(values, _Uniform):
                return real(sorted_sequence, values, *args, right=right, **kwargs)
            if args or kwargs or not right or sorted_sequence.dim() != 1 or values.scale.numel() != 1:
                raise NotImplementedError("the explorer handles searchsorted(cdf [V], u * a, right=True)")
            # the first i with cdf[i] > u * a: u * a ~ U(0, a) lands in [cdf[i-1], cdf[i]) with
            # probability (cdf[i] - cdf[i-1]) / a, clipped to [0, a)
            a, cdf = float(values.scale), sorted_sequence.double().clamp(max=float(values.scale))
            width = torch.diff(cdf, prepend=cdf.new_zeros(1)) / a
            return torch.tensor([self.choose(list(enumerate(width.tolist())))], device=sorted_sequence.device)

        return searchsorted

    def _rand(self, *size, generator=None, dtype=None, device=None, **kwargs):
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
        return _Uniform(self, torch.ones(shape, dtype=torch.float64))

    @staticmethod
    def _forbidden(*args, **kwargs):
        raise NotImplementedError("a source of randomness the explorer does not enumerate")

    def run(self, fn):
        law, self.replay = {}, []
        while True:
            self.weight, self.trace = 1.0, []
            result = fn()
            law[result] = law.get(result, 0.0) + self.weight
            while self.trace and self.trace[-1][0] + 1 >= self.trace[-1][1]:
                self.trace.pop()  # this choice point has no outcome left to visit: back up
            if not self.trace:
                return law
            self.replay = [i for i, _ in self.trace[:-1]] + [self.trace[-1][0] + 1]


def record_drafts(prop, drafted: list):
    """Wrap `prop.propose` so that the token ids of every drafted tree are appended to `drafted`."""
    propose = prop.propose

    def recorded(tokens, max_depth):
        tree = propose(tokens, max_depth)
        drafted.extend(tree.tokens.tolist() if tree is not None else [])
        return tree

    prop.propose = recorded
    return prop


# --------------------------------------------- the greedy contract's checks (test_contract, test_real_model)
def spy(name, prop, target):
    """Wrap `prop.propose` so that every greedy draft is checked against the proposer's fresh reference
    (its `fresh_draft` method)."""
    from specdec_lib.contract import check_draft_is_fresh

    propose = prop.propose

    def checked(tokens, max_depth):
        tree = propose(tokens, max_depth)
        if tree is not None and len(tree):
            assert int(tree.depth().max()) <= max_depth
            check_draft_is_fresh(prop, target, tokens, tree, name=name)
        return tree

    prop.propose = checked
    return prop


def check_target_cache(target, tol=1e-4):
    """An on_round hook: after every round the target's cache must equal a fresh prefill. `target` is a
    model or an hf.Runner (the cache is then that runner's)."""
    import copy

    from specdec_lib import hf

    runner = hf.runner(target)

    def on_round(tokens, verdict, cache):
        assert runner.length(cache) == len(tokens) - 1  # the pending token is not cached yet
        fresh = hf.forward(runner.model, tokens).logits[-1]
        cached = runner.forward(tokens[-1:], copy.deepcopy(cache)).logits[-1]
        assert (cached - fresh).abs().max() <= tol, "the target's cache differs from a fresh prefill"

    return on_round
