"""Checkers for chapter 02 · Draft and verify (greedy speculative decoding).

Each `check_*` takes the learner's function and returns "correct", "incorrect" or "not attempted"
(printed too); it never raises. The expected values come from the teacher's reference solutions through
`_expected` (see `_core`); the references and plausible mistakes are in the teacher's package.
"""

from __future__ import annotations

import math
import operator
import random

from specdec_lib.checks._core import Answers, Incorrect, expect, hidden, seed, verdict

_expected = Answers("ch02")

# ------------------------------------------------------------------------------------------ helpers


def _number(x, what: str) -> float:
    try:
        value = float(x)
    except (TypeError, ValueError):
        raise Incorrect(f"{what} should be a number, got {x!r}") from None
    expect(math.isfinite(value), f"{what} should be a finite number, got {x!r}")
    return value


def _close(got: float, want: float, tol: float = 1e-6) -> bool:
    return abs(got - want) <= tol * max(1.0, abs(want))


def _random_rounds(rng):
    """Hidden rounds of the pooled-alpha exercise: (accepted, drafted)."""
    drafted = [rng.randint(0, 8) for _ in range(rng.randint(2, 7))]
    drafted[0] = max(drafted[0], 1)
    return [rng.randint(0, d) for d in drafted], drafted


def _random_model(rng):
    return (
        round(rng.uniform(0, 1), 3),
        rng.randint(1, 12),
        round(rng.uniform(0.01, 0.8), 3),
        round(rng.uniform(0, 0.6), 3),
    )


def _random_costs(rng):
    return (
        round(rng.uniform(0.3, 0.99), 3),
        round(rng.uniform(0.005, 0.6), 3),
        round(rng.choice([0, rng.uniform(0, 0.6)]), 3),
    )


# ----------------------------------------------------------------------------------------- checkers

_TAU_CASES = [(0.0, 1), (0.0, 4), (0.5, 1), (0.3, 2), (0.6, 4), (0.8, 4), (0.8, 8), (0.9, 16), (0.99, 5)]


def check_expected_tau(fn) -> str:
    """fn(alpha, k) -> the expected tokens per round, (1 - alpha**(k+1)) / (1 - alpha); k + 1 at alpha = 1."""

    def cases(f):
        for alpha, k in _TAU_CASES + hidden(
            8, lambda r: (round(r.uniform(0.05, 0.97), 3), r.randint(1, 12)), 1
        ):
            want, short = _expected.expected_tau(alpha, k), _expected.expected_tau(alpha, k - 1)
            got = _number(f(alpha, k), f"expected_tau({alpha}, {k})")
            if _close(got, short) and not _close(got, want):
                raise Incorrect(
                    f"expected_tau({alpha}, {k}) = {got:.4f}, but it is {want:.4f}: count the target's own "
                    "token too (a round commits the accepted drafts plus one), so the sum runs to alpha**k"
                )
            expect(
                _close(got, want),
                f"expected_tau({alpha}, {k}) should be {want:.4f}, got {got:.4f} (hint: 1 + alpha + ... + alpha**k)",
            )
        hint = "every draft is accepted and the target adds one token (the formula is 0/0 there: treat alpha = 1 separately)"
        for k in (1, 4, 7):
            try:
                got = f(1.0, k)
            except ZeroDivisionError:
                raise Incorrect(
                    f"expected_tau(1.0, {k}) divided by zero; it should be {k + 1}: {hint}"
                ) from None
            got = _number(got, f"expected_tau(1.0, {k})")
            expect(_close(got, k + 1), f"expected_tau(1.0, {k}) should be {k + 1}, got {got}: {hint}")

    return verdict("expected τ", fn, cases)


_ACCEPT_CASES = [
    ([5, 6, 7, 8], [5, 6, 7, 8, 9], (4, 9)),  # all accepted: the bonus token
    ([5, 6, 7, 8], [5, 6, 1, 8, 9], (2, 1)),  # a later match after the mismatch does not count
    ([5, 6, 7, 8], [2, 6, 7, 8, 9], (0, 2)),  # first draft wrong: the target's own token only
    ([3], [3, 4], (1, 4)),
    ([3], [0, 4], (0, 0)),
    ([1, 1, 1], [1, 1, 1, 1], (3, 1)),
]


def check_greedy_accept(fn) -> str:
    """fn(draft_tokens, target_argmax) -> (number accepted, next token) under greedy verification."""

    def one(f, draft, argmax, want):
        d, g = list(draft), list(argmax)
        got = f(d, g)
        expect(d == list(draft) and g == list(argmax), "do not modify the input lists")
        expect(
            isinstance(got, (tuple, list)) and len(got) == 2,
            f"return a pair (number accepted, next token), got {got!r}",
        )
        try:
            got = (int(got[0]), int(got[1]))
        except (TypeError, ValueError):
            raise Incorrect(f"both entries of the pair should be integers, got {got!r}") from None
        expect(
            got == want,
            f"draft {list(draft)}, target argmax {list(argmax)}: expected {want}, got {got} "
            "(accept up to the first mismatch, then add the target's token at that position)",
        )

    def cases(f):
        for draft, argmax, want in _ACCEPT_CASES:
            one(f, draft, argmax, want)
        rng = random.Random(seed(2))
        for _ in range(300):  # small vocabularies, so that matches and mismatches are both common
            k, vocab = rng.randint(1, 8), rng.randint(2, 4)
            draft = [rng.randrange(vocab) for _ in range(k)]
            argmax = [rng.randrange(vocab) for _ in range(k + 1)]
            one(f, draft, argmax, _expected.greedy_accept(draft, argmax))

    return verdict("greedy acceptance", fn, cases)


_ALPHA_CASES = [
    ([2, 0, 4, 1], [4, 4, 4, 4]),
    ([0, 0, 1], [1, 1, 1]),
    ([3, 3, 0, 2, 1], [3, 5, 2, 2, 4]),
    ([4, 4], [4, 4]),
    ([0, 1, 0, 0], [8, 8, 8, 0]),  # a round that drafted nothing tested nothing
]


def check_pooled_alpha(fn) -> str:
    """fn(accepted, drafted) -> sum(accepted) / sum(min(a + 1, d)) over the rounds."""

    def cases(f):
        for accepted, drafted in _ALPHA_CASES + hidden(6, _random_rounds, 3):
            want = _expected.pooled_alpha(accepted, drafted)
            got = _number(f(list(accepted), list(drafted)), f"pooled_alpha({accepted}, {drafted})")
            if _close(got, sum(accepted) / sum(drafted)) and not _close(got, want):
                raise Incorrect(
                    f"pooled_alpha({accepted}, {drafted}) = {got:.4f} is accepted/drafted; count only tested "
                    "positions: a round with a accepted out of d tested min(a + 1, d) of them"
                )
            expect(
                _close(got, want),
                f"pooled_alpha({accepted}, {drafted}) should be {want:.4f}, got {got:.4f}",
            )

    return verdict("pooled α", fn, cases)


_SPEEDUP_CASES = [
    (0.8, 4, 0.1, 0.0),
    (0.6, 1, 0.3, 0.0),
    (0.6, 3, 0.2, 0.15),
    (0.9, 8, 0.05, 0.4),
    (0.0, 2, 0.2, 0.1),
    (1.0, 4, 1.0, 0.1),  # the target as its own draft
    (1.0, 2, 0.1, 0.0),
]


def check_speedup_model(fn) -> str:
    """fn(alpha, k, c, V) -> tau(alpha, k) / (1 + k c + V)."""

    def cases(f):
        for alpha, k, c, V in _SPEEDUP_CASES + hidden(8, _random_model, 4):
            want = _expected.predicted_speedup(alpha, k, c, V)
            got = _number(f(alpha, k, c, V), f"predicted_speedup({alpha}, {k}, {c}, {V})")
            expect(
                _close(got, want),
                f"predicted_speedup(alpha={alpha}, k={k}, c={c}, V={V}) should be {want:.4f}, got {got:.4f} "
                "(hint: tau tokens for k draft passes of cost c plus one target pass of cost 1 + V)",
            )

    return verdict("speedup model", fn, cases)


_BEST_K_CASES = [
    (0.6, 0.02, 0.0),
    (0.8, 0.02, 0.0),
    (0.8, 0.1, 0.0),
    (0.8, 0.3, 0.0),
    (0.6, 0.3, 0.0),
    (0.9, 0.6, 0.0),
    (0.7, 0.1, 0.2),
    (0.8, 0.3, 0.5),  # a costlier verification pass favours a longer draft
    (0.6, 0.3, 0.5),
    (0.99, 0.001, 0.0),  # the best k is the largest allowed
    (0.3, 0.5, 0.0),  # drafting never pays; the least bad is k = 1
]


def check_best_k(fn) -> str:
    """fn(alpha, c, V=0.0) -> the k in 1..16 that maximises the predicted speedup."""

    def cases(f):
        for alpha, c, V in _BEST_K_CASES + hidden(8, _random_costs, 5):
            speedups = _expected.speedup_table(alpha, c, V)  # k = 1 .. 16
            want = 1 + max(range(16), key=lambda i: (speedups[i], -i))
            if sorted(speedups)[-1] - sorted(speedups)[-2] < 1e-4:
                continue  # a near tie (only among the hidden cases): rounding could decide
            got = f(alpha, c) if V == 0 else f(alpha, c, V)
            try:
                got = operator.index(got)  # int or numpy integer; a float like 3.0 is not a k
            except TypeError:
                raise Incorrect(
                    f"best_k({alpha}, {c}, {V}) should return an integer k, got {got!r}"
                ) from None
            expect(
                got == want,
                f"best_k(alpha={alpha}, c={c}, V={V}) should be {want}, got {got} "
                f"(predicted speedup {speedups[want - 1]:.3f} at k={want}"
                + (f" vs {speedups[got - 1]:.3f} at k={got})" if 1 <= got <= 16 else ")"),
            )

    return verdict("best k", fn, cases)
