"""Checkers for chapter 03 (rejection sampling). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import torch

from specdec_course.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    Answers,
    Incorrect,
    as_float,
    expect,
    hidden,
    seed,
    verdict,
)

_expected = Answers("ch03")


# ------------------------------------------------------------------------------------------ helpers
def _pairs(vocab: int = 8, n: int = 6, s: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Test pairs (p, q): random ones, sparse ones (zeros, as after top-k/top-p), and two extremes."""
    g = torch.Generator(device="cpu").manual_seed(seed(s))
    out = []
    for i in range(n):
        p = torch.rand(vocab, generator=g) ** 3
        q = torch.rand(vocab, generator=g) ** 3
        if i % 2:  # sparse: cut a few tokens from each, like a top-k filter would
            p[torch.randperm(vocab, generator=g)[: vocab // 3]] = 0
            q[torch.randperm(vocab, generator=g)[: vocab // 3]] = 0
        out.append((p / p.sum(), q / q.sum()))
    half = vocab // 2
    disjoint_p = torch.zeros(vocab)
    disjoint_p[:half] = 1 / half
    out.append((disjoint_p, disjoint_p.flip(0)))  # no overlap at all: beta = 0
    peaked = torch.full((vocab,), 0.02)
    peaked[3] = 1 - 0.02 * (vocab - 1)
    out.append((peaked, torch.full((vocab,), 1 / vocab)))  # a confident target, a clueless draft
    return out


def _fmt(t: torch.Tensor) -> str:
    return "(" + ", ".join(f"{v:.3f}" for v in t.tolist()) + ")"


# ------------------------------------------------- exercise 1: how many tokens a round emits (derive)
def _beta_lists(s: int = 0) -> list[list[float]]:
    """Per-position acceptance probabilities of a chain: fixed corner cases, then random chains."""
    g = torch.Generator(device="cpu").manual_seed(seed(s))
    out = [[0.7], [1.0, 1.0, 1.0], [0.0, 0.9], [0.5, 0.5, 0.5, 0.5], [0.9, 0.2, 1.0]]
    for k in (2, 3, 5, 8):
        out.append([round(v, 3) for v in torch.rand(k, generator=g).tolist()])
    out += hidden(4, lambda rng: [round(rng.random(), 3) for _ in range(rng.randint(1, 7))])
    return out


def _as_law(value, n: int, what: str) -> torch.Tensor:
    try:
        got = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError, RuntimeError) as e:
        raise Incorrect(f"return {what} as {n} numbers (a list or a 1-D tensor)") from e
    expect(got.numel() == n, f"return {n} numbers, one per outcome, not {got.numel()}")
    expect(bool(torch.isfinite(got).all()), "your probabilities contain NaN or inf")
    return got


def check_round_length_law(fn) -> str:
    """fn(betas) -> [P(1 token), P(2 tokens), ..., P(k + 1 tokens)]: how many tokens one round of a chain
    of k = len(betas) drafts emits, when draft i is accepted with probability betas[i - 1] once every draft
    before it was (a round emits its accepted drafts plus one token of the target's)."""

    def cases(fn):
        for betas in _beta_lists():
            want = torch.as_tensor(_expected.round_length_law(list(betas)), dtype=torch.float64)
            got = _as_law(fn(list(betas)), len(betas) + 1, "the law")
            expect(
                abs(float(got.sum()) - 1) < 1e-6,
                f"for betas = {betas} your probabilities sum to {float(got.sum()):.4f}: a round always emits "
                "between 1 and k + 1 tokens, so they sum to 1",
            )
            expect(
                torch.allclose(got, want, atol=1e-6),
                f"for betas = {betas} the law is {_fmt(want)}, you returned {_fmt(got)} (hint: a round emits n "
                "tokens when drafts 1..n-1 are accepted and draft n is rejected; all k accepted gives k + 1)",
            )

    return verdict("how many tokens a round emits", fn, cases)


# --------------------------------------------------------- exercise 2: a colleague's verifier (debug)
def check_colleague_law(fn) -> str:
    """fn(p, q) -> the exact distribution of the token that `colleague_verify_one` emits when its draft x is
    drawn from q and its coins are fair (the chapter's cell shows the colleague's code)."""

    def cases(fn):
        for p, q in _pairs():
            if torch.equal(p, q):
                continue
            want = _expected.colleague_law(p, q).double()
            got = _as_law(fn(p.clone(), q.clone()), len(p), "the distribution")
            if torch.allclose(got, p.double(), atol=1e-6) and not torch.allclose(want, p.double(), atol=1e-6):
                raise Incorrect(
                    f"for p = {_fmt(p)} and q = {_fmt(q)} you returned p itself: that is what the correct rule "
                    "emits. Run the colleague's rule many times, or follow its two branches, and compare"
                )
            expect(
                torch.allclose(got, want, atol=1e-5),
                f"for p = {_fmt(p)} and q = {_fmt(q)} the colleague's rule emits {_fmt(want)}, you returned "
                f"{_fmt(got)} (hint: add the two ways a token is emitted: drafted and kept, min(p, q); or "
                "rejected, then drawn from the colleague's 'residual', whose sum is not 1 - beta)",
            )

    return verdict("the colleague's verifier", fn, cases)


# ---------------------------------------------------------------------- exercise 3: the seed question
SEED_P = (0.6, 0.3, 0.1)
SEED_Q = (0.3, 0.3, 0.4)


def check_seed_question(beta=..., residual=...) -> str:
    """Your numbers for p = (0.6, 0.3, 0.1), q = (0.3, 0.3, 0.4): the acceptance probability `beta` (a
    number) and the `residual` distribution (three numbers). Leave either as `...` while not attempted."""
    if beta is ... or residual is ... or beta is None or residual is None:
        status = NOT_ATTEMPTED
        print(f"{_ICON[status]} seed question: {status} — set my_beta and my_residual_dist to your answers")
        return status

    def cases(answer):
        b, r = answer
        b = as_float(b, "beta")
        try:
            r = torch.as_tensor(r, dtype=torch.float64).reshape(-1)
        except (TypeError, ValueError, RuntimeError):
            expect(False, "residual should be three numbers, e.g. (0.2, 0.3, 0.5)")
        expect(
            _expected.right("seed.beta", b),
            _expected.hint("seed.beta", b)
            or f"beta = {b:.3f} is not right (hint: beta = sum over tokens of min(p, q))",
        )
        expect(r.numel() == 3, f"residual should have 3 entries, one per token, not {r.numel()}")
        r = tuple(r.tolist())
        expect(
            _expected.right("seed.residual", r),
            _expected.hint("seed.residual", r)
            or f"residual {_fmt(torch.tensor(r))} is not right (hint: which tokens does the draft propose less "
            "often than the target wants them?)",
        )

    return verdict("seed question", (beta, residual), cases)


# ------------------------------------------------------------------ exercise 4: verify one drafted token
def _verify_one_cases(s: int = 0) -> list[tuple[torch.Tensor, torch.Tensor, int, float]]:
    g = torch.Generator().manual_seed(seed(s))
    out = []
    for p, q in _pairs(s=s):
        xs = torch.multinomial(q, 12, replacement=True, generator=g).tolist()  # drafts come from q
        us = torch.rand(12, generator=g).tolist()
        for x, u in zip(xs, us, strict=True):
            ratio = float(p[x] / q[x])
            if abs(u - ratio) > 1e-4:  # stay clear of the boundary, where rounding could decide
                out.append((p, q, x, u))
    return out


def check_verify_one(fn) -> str:
    """fn(p, q, x, u) -> x if the drafted token x is accepted, None if it is rejected.

    x was drawn from q; u is a uniform number in [0, 1) (the coin). Accept when u < p(x) / q(x).
    """

    def cases(fn):
        for p, q, x, u in _verify_one_cases():
            want = _expected.verify_one(p, q, x, u)
            got = fn(p.clone(), q.clone(), x, u)
            ratio = float(p[x] / q[x])
            if want is None:
                expect(
                    got is None,
                    f"p(x) = {float(p[x]):.3f}, q(x) = {float(q[x]):.3f}, u = {u:.3f}: p(x)/q(x) = {ratio:.3f} "
                    f"<= u, so the token must be rejected (return None); you returned {got!r}",
                )
            else:
                expect(
                    got is not None,
                    f"p(x) = {float(p[x]):.3f}, q(x) = {float(q[x]):.3f}, u = {u:.3f}: u < p(x)/q(x) = "
                    f"{ratio:.3f}, so the token must be accepted (return x); you returned None",
                )
                expect(
                    int(got) == x, f"an accepted draft emits the drafted token x = {x}; you returned {got!r}"
                )

    return verdict("verify one token", fn, cases)
