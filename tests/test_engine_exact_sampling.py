"""The engine's sampled path, end to end and EXACTLY: the joint distribution of the first three tokens
of the public `specdec_lib.generate` (draft model, k = 2, temperature + top-k + top-p) is computed by
enumerating every random choice the engine makes, and must equal the target's own
p(y1) p(y2 | y1) p(y3 | y1, y2) under the same sampling controls.

Three tokens with a 2-token draft and max_new_tokens = 4 cover: bonus tokens (all accepted in round 1),
corrections, a second round drafted after the draft cache was rolled back, a depth-1 round near the
token budget, and a bonus token in round two.

No engine-internal names are used: randomness is intercepted at the torch level by conftest.ExactLaw
(torch.multinomial branches over its support; torch.rand gives a symbolic uniform whose comparisons
`u * a < b` branch with their exact probabilities; any other source of randomness raises), and a
search over all branches gives every outcome's exact probability."""

import pytest
import torch
from conftest import ExactLaw, continuation_logits, split_tables, tiny_model

import specdec_lib as sd

VOCAB, PROMPT, NEW = 8, [1, 2, 3], 4
SAMPLING = {"temperature": 0.9, "top_k": 3, "top_p": 0.7}  # both filters cut (checked below)


class _Stop(Exception):
    """Raised from on_round once three tokens are out: later choices cannot change them."""


def first_three(target, make_proposer, want, seen=None):
    """The function ExactLaw runs: the first three tokens of one sd.generate call. `seen` collects what
    the rounds did: (round, drafted, accepted). A token `want` forbids fails at once (an engine that
    ignores top-k / top-p would otherwise make the search explode)."""

    def run():
        out, rounds = [], []

        def stop(tokens, verdict, cache):
            tree = verdict.tree
            rounds.append((len(rounds) + 1, 0 if tree is None else len(tree), len(verdict.path)))
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


def test_the_engine_samples_three_tokens_exactly_like_the_target(models, monkeypatch):
    target, draft, want = models
    seen = set()
    outcomes = ExactLaw(monkeypatch).run(
        first_three(target, lambda: sd.DraftModelProposer(draft, 2), want, seen)
    )
    got = as_table(outcomes)
    assert abs(got.sum() - 1) < 1e-9  # the search covered every branch
    assert (got[want == 0] == 0).all(), "the engine emits tokens the sampling controls forbid"
    assert (got - want).abs().max() < 1e-6, float((got - want).abs().max())
    assert len(outcomes) == int((want > 0).sum()) > 10
    # what the branches exercised, as (round, drafted, accepted): in round 1 a bonus token and corrections
    # at both depths; second rounds (after a rollback of the draft cache) fully accepted and not
    assert {(1, 2, 2), (1, 2, 1), (1, 2, 0)} <= seen, seen
    assert any(r == 2 and a == d > 0 for r, d, a in seen) and any(r == 2 and a < d for r, d, a in seen)


def test_the_exact_engine_test_has_teeth(models, monkeypatch):
    """A proposer whose reported q is not the one it sampled from is caught (max error ~6e-3). Engine
    mutants, tried by hand on a scratch copy of the library, fail the exact test too: the bonus token
    drawn from the wrong row, top-k / top-p ignored for the target, residual = p (max error 0.12), the
    target cache not rolled back, the draft cache not rolled back (an error)."""
    target, draft, want = models
    got = as_table(ExactLaw(monkeypatch).run(first_three(target, lambda: ReportsWrongQ(draft, 2), want)))
    assert abs(got.sum() - 1) < 1e-9
    assert (got - want).abs().max() > 1e-3
