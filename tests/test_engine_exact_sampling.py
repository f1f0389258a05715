"""The engine's sampled path, end to end and EXACTLY: the joint distribution of the first three tokens
of the public `specdec_lib.generate` (draft model, k = 2, temperature + top-k + top-p) is computed by
enumerating every random choice the engine makes, and must equal the target's own
p(y1) p(y2 | y1) p(y3 | y1, y2) under the same sampling controls.

Three tokens with a 2-token draft and max_new_tokens = 4 cover: bonus tokens (all accepted in round 1),
corrections, a second round drafted after the draft cache was rolled back, a depth-1 round near the
token budget, and a bonus token in round two.

No engine-internal names are used: randomness is intercepted at the torch level. torch.multinomial
(one draw from a 1-D distribution) branches over every token of its support, with its probability;
torch.rand returns a symbolic uniform u that can only be scaled and compared: `u * a < b` branches on
both outcomes with their exact probabilities clamp(b / a, 0, 1). Any other use of u, and any other
source of randomness, raises. A depth-first search over all branches gives every outcome's exact
probability."""

import pytest
import torch
from conftest import continuation_logits, split_tables, tiny_model

import specdec_lib as sd

VOCAB, PROMPT, NEW = 8, [1, 2, 3], 4
SAMPLING = {"temperature": 0.9, "top_k": 3, "top_p": 0.7}  # both filters cut (checked below)


class _Stop(Exception):
    """Raised from on_round once three tokens are out: later choices cannot change them."""


class SymbolicUniform(torch.Tensor):
    """What the patched torch.rand returns: u ~ U(0, 1) elementwise, never materialised (its data is
    NaN). `u * a` records the scale a; comparing `u * a` with b asks `choose` to branch on the
    outcome of each element, with probability P(u * a < b) = clamp(b / a, 0, 1)."""

    @staticmethod
    def __new__(cls, scale, choose):
        with torch._C.DisableTorchFunctionSubclass():
            data = torch.full(scale.shape, float("nan"))
        return torch.Tensor._make_subclass(cls, data)

    def __init__(self, scale, choose):
        self.scale, self.choose = scale, choose

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("__len__", "dim", "size", "numel") or (
            name == "__get__"
            and getattr(func.__self__, "__name__", "") in ("shape", "device", "dtype", "ndim")
        ):
            return super().__torch_function__(func, types, args, kwargs or {})
        u = next(a for a in args if isinstance(a, SymbolicUniform))
        other = [a for a in args if a is not u]
        b = torch.as_tensor(other[0], dtype=torch.float64) if len(other) == 1 else None
        if name in ("mul", "__mul__", "__rmul__") and b is not None:
            return SymbolicUniform(u.scale * b, u.choose)
        if name in ("to", "float", "contiguous") and not kwargs:
            return u
        if name in ("lt", "le", "gt", "ge", "__lt__", "__le__", "__gt__", "__ge__") and b is not None:
            if (u.scale < 0).any():
                raise NotImplementedError("the explorer handles u * a with a >= 0 only")
            a, b = u.scale.expand(torch.broadcast_shapes(u.scale.shape, b.shape)), b.expand_as(u.scale)
            below = torch.where(a > 0, (b / a.clamp(min=1e-300)).clamp(0, 1), (b > 0).double())
            result = torch.tensor([u.choose([pb, 1 - pb]) == 0 for pb in below.reshape(-1).tolist()])
            asks_below = name.strip("_") in ("lt", "le") if args[0] is u else name.strip("_") in ("gt", "ge")
            return result.reshape(a.shape) if asks_below else ~result.reshape(a.shape)
        raise NotImplementedError(f"the explorer cannot follow this use of torch.rand's output: {func}")


def explore(run):
    """{outcome: probability} of `run(choose)`, where `choose(weights)` is every random choice run makes
    (returns the index of the option taken): a depth-first search that replays each branch's prefix."""
    outcomes, todo = {}, [()]
    while todo:
        prefix, made, weight = todo.pop(), [], [1.0]

        def choose(weights, prefix=prefix, made=made, weight=weight):
            options = [i for i, w in enumerate(weights) if w > 0]
            if len(made) < len(prefix):
                i = prefix[len(made)]
            else:
                i = options[0]
                todo.extend(tuple(made) + (j,) for j in options[1:])
            made.append(i)
            weight[0] *= weights[i]
            return i

        key = run(choose)
        outcomes[key] = outcomes.get(key, 0.0) + weight[0]
    return outcomes


@pytest.fixture
def scripted_randomness(monkeypatch):
    """Routes torch.multinomial and torch.rand to the explorer's current `choose`; forbids other sources."""
    current = {}

    def multinomial(probs, num_samples, replacement=False, *, generator=None, out=None):
        if probs.dim() != 1 or num_samples != 1 or out is not None:
            raise NotImplementedError("the explorer handles one draw from a 1-D distribution")
        w = probs.double() / probs.double().sum()
        return torch.tensor([current["choose"](w.tolist())], device=probs.device)

    def rand(*size, generator=None, dtype=None, device=None, **kwargs):
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return SymbolicUniform(torch.ones(shape, dtype=torch.float64), current["choose"])

    def forbidden(*args, **kwargs):
        raise NotImplementedError("a source of randomness the explorer does not enumerate")

    monkeypatch.setattr(torch, "multinomial", multinomial)
    monkeypatch.setattr(torch, "rand", rand)
    for name in ("randn", "randint", "randperm", "bernoulli", "rand_like", "randn_like", "normal"):
        monkeypatch.setattr(torch, name, forbidden)
    for name in ("multinomial", "uniform_", "exponential_", "bernoulli_", "random_", "normal_"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    return current


def first_three(target, make_proposer, current, want, seen=None):
    """run(choose) for `explore`: the first three tokens of one sd.generate call. `seen` collects what
    the rounds did: (round, drafted, accepted). A token `want` forbids fails at once (an engine that
    ignores top-k / top-p would otherwise make the search explode)."""

    def run(choose):
        current["choose"], out, rounds = choose, [], []

        def stop(tokens, tree, path, cache):
            rounds.append((len(rounds) + 1, 0 if tree is None else len(tree), len(path)))
            new = tuple(tokens[len(PROMPT) : len(PROMPT) + 3].tolist())
            assert want[new].sum() > 0, f"the engine emitted {new}, which the sampling controls forbid"
            if len(tokens) >= len(PROMPT) + 3:
                out.extend(tokens[len(PROMPT) : len(PROMPT) + 3].tolist())
                raise _Stop

        try:
            sd.generate(target, PROMPT, NEW, make_proposer(), **SAMPLING, seed=0, on_round=stop)
        except _Stop:
            pass
        if seen is not None:
            seen.update(rounds)
        return tuple(out)

    return run


def target_tables(target, top_k, top_p):
    sampling = sd.SamplingParams(SAMPLING["temperature"], top_k, top_p)
    probs = sd.process_logits(continuation_logits(target, PROMPT, VOCAB), sampling).double()
    return split_tables(probs, len(PROMPT), VOCAB)


@pytest.fixture(scope="module")
def models():
    target = tiny_model(vocab=VOCAB, seed=0, scale=3.0)
    draft = tiny_model(vocab=VOCAB, seed=0, scale=3.0)  # the target's weights plus noise: often right
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for w in draft.parameters():
            w.add_(0.3 * w.std() * torch.randn(w.shape, generator=g) if w.numel() > 1 else 0.0)
    p1, p2, p3 = target_tables(target, SAMPLING["top_k"], SAMPLING["top_p"])
    want = p1[:, None, None] * p2[:, :, None] * p3
    return target, draft, want / want.sum()


def test_top_k_and_top_p_both_cut_in_this_case(models):
    """Of the target rows the three tokens are drawn from, top-k removes tokens top-p alone would keep
    in some, and top-p removes tokens top-k alone would keep in others."""
    target, _, want = models
    reached = {(): 1.0, **{(a,): want[a].sum() for a in range(VOCAB)}}
    reached |= {(a, b): want[a, b].sum() for a in range(VOCAB) for b in range(VOCAB)}

    def supports(top_k, top_p):
        p1, p2, p3 = target_tables(target, top_k, top_p)
        rows = {(): p1, **{(a,): p2[a] for a in range(VOCAB)}}
        rows |= {(a, b): p3[a, b] for a in range(VOCAB) for b in range(VOCAB)}
        return torch.tensor([int((rows[c] > 0).sum()) for c, w in reached.items() if w > 0])

    both = supports(SAMPLING["top_k"], SAMPLING["top_p"])
    assert (supports(None, SAMPLING["top_p"]) > both).any()
    assert (supports(SAMPLING["top_k"], None) > both).any()
    assert (both >= 2).all() and len(both) > 8


def as_table(outcomes):
    got = torch.zeros(VOCAB, VOCAB, VOCAB, dtype=torch.float64)
    for (y1, y2, y3), w in outcomes.items():
        got[y1, y2, y3] += w
    return got


class ReportsWrongQ(sd.DraftModelProposer):
    """A plausible proposer bug: it samples from q but reports q at another temperature."""

    def propose(self, tokens, max_depth):
        tree = super().propose(tokens, max_depth)
        if tree is not None and tree.q is not None:
            tree.q = (tree.q.clamp_min(1e-30).log() * 0.8).softmax(-1)
        return tree


def test_the_engine_samples_three_tokens_exactly_like_the_target(models, scripted_randomness):
    target, draft, want = models
    seen = set()
    run = first_three(target, lambda: sd.DraftModelProposer(draft, 2), scripted_randomness, want, seen)
    outcomes = explore(run)
    got = as_table(outcomes)
    assert abs(got.sum() - 1) < 1e-9  # the search covered every branch
    assert (got[want == 0] == 0).all(), "the engine emits tokens the sampling controls forbid"
    assert (got - want).abs().max() < 1e-6, float((got - want).abs().max())
    assert len(outcomes) == int((want > 0).sum()) > 10
    # what the branches exercised, as (round, drafted, accepted): in round 1 a bonus token and corrections
    # at both depths; second rounds (after a rollback of the draft cache) fully accepted and not
    assert {(1, 2, 2), (1, 2, 1), (1, 2, 0)} <= seen, seen
    assert any(r == 2 and a == d > 0 for r, d, a in seen) and any(r == 2 and a < d for r, d, a in seen)


def test_the_exact_engine_test_has_teeth(models, scripted_randomness):
    """A proposer whose reported q is not the one it sampled from is caught (max error ~6e-3). Engine
    mutants, tried by hand on a scratch copy of the library, fail the exact test too: the bonus token
    drawn from the wrong row, top-k / top-p ignored for the target, residual = p (max error 0.12), the
    target cache not rolled back, the draft cache not rolled back (an error)."""
    target, draft, want = models
    got = as_table(explore(first_three(target, lambda: ReportsWrongQ(draft, 2), scripted_randomness, want)))
    assert abs(got.sum() - 1) < 1e-9
    assert (got - want).abs().max() > 1e-3
