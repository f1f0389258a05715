"""Checkers for chapter 03 (rejection sampling). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import torch

from specdec_lib.checks._core import _ICON, NOT_ATTEMPTED, Answers, as_float, expect, seed, verdict

_expected = Answers("ch03")


# ------------------------------------------------------------------------------------------ helpers
def _pairs(vocab: int = 8, n: int = 6, s: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Test pairs (p, q): random ones, sparse ones (zeros, as after top-k/top-p), and two extremes."""
    g = torch.Generator().manual_seed(seed(s))
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


# ---------------------------------------------------------------- exercise 1: acceptance probability
def check_acceptance_probability(fn) -> str:
    """fn(p, q) -> beta = sum_x min(p(x), q(x)), for 1-D distributions p (target) and q (draft)."""

    def cases(fn):
        for p, q in _pairs():
            want = float(_expected.acceptance(p, q))
            got = as_float(fn(p.clone(), q.clone()), "the acceptance probability")
            expect(0 <= got <= 1 + 1e-6, f"an acceptance probability lies in [0, 1]; you returned {got:.4f}")
            expect(
                abs(got - want) < 1e-5,
                f"for p = {_fmt(p)} and q = {_fmt(q)} beta should be {want:.4f}, you returned {got:.4f} "
                "(hint: a token is kept with probability q(x)·min(1, p(x)/q(x)); add that up over x)",
            )
        p, _ = _pairs()[0]
        got = as_float(fn(p.clone(), p.clone()), "the acceptance probability")
        expect(
            abs(got - 1) < 1e-5,
            f"a draft identical to the target is always accepted (beta = 1); got {got:.4f}",
        )

    return verdict("acceptance probability", fn, cases)


# ------------------------------------------------------------------------------ exercise 2: residual
def check_residual(fn) -> str:
    """fn(p, q) -> norm(max(0, p - q)), the distribution to sample from after a rejection (p != q)."""

    def cases(fn):
        for p, q in _pairs():
            want = _expected.residual(p, q)
            got = torch.as_tensor(fn(p.clone(), q.clone()), dtype=torch.float32)
            expect(
                got.shape == want.shape,
                f"return a distribution of shape {tuple(want.shape)}, not {tuple(got.shape)}",
            )
            expect(bool(torch.isfinite(got).all()), "your residual contains NaN or inf")
            expect(
                bool((got >= -1e-7).all()), "a residual is a distribution: no negative entries (clamp at 0)"
            )
            expect(
                abs(float(got.sum()) - 1) < 1e-5,
                f"the residual should sum to 1, yours sums to {float(got.sum()):.4f}",
            )
            expect(
                torch.allclose(got, want, atol=1e-5),
                f"for p = {_fmt(p)} and q = {_fmt(q)} the residual is {_fmt(want)}, you returned {_fmt(got)} "
                "(hint: keep only the tokens the draft under-proposes, p(x) > q(x))",
            )

    return verdict("residual", fn, cases)


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
