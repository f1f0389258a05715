"""Checkers for chapter 02 · Draft and verify (greedy speculative decoding).

Each `check_*` takes the learner's function and returns "correct", "incorrect" or "not attempted"
(printed too); it never raises. `REFERENCE` holds a correct solution per checker and `WRONG` some
plausible mistakes, both used by tests/test_checks_ch02.py.
"""

from __future__ import annotations

import math
import operator
import random

from specdec_lib.checks._core import Incorrect, expect, verdict

# --------------------------------------------------------------------------------------- references


def expected_tau(alpha, k):
    """Expected tokens per round with i.i.d. acceptance alpha and k drafts: 1 + alpha + ... + alpha**k."""
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def greedy_accept(draft_tokens, target_argmax):
    """(accepted drafts, the target's next token): the longest matching prefix, then target_argmax[a]."""
    a = 0
    while a < len(draft_tokens) and draft_tokens[a] == target_argmax[a]:
        a += 1
    return a, target_argmax[a]


def pooled_alpha(accepted, drafted):
    """Accepted draft positions / tested draft positions (a round tests min(a + 1, d) positions)."""
    return sum(accepted) / sum(min(a + 1, d) for a, d in zip(accepted, drafted))


def predicted_speedup(alpha, k, c, V):
    """S = tau / (1 + k c + V): k draft passes of cost c, one target pass over k + 1 tokens of cost 1 + V."""
    return expected_tau(alpha, k) / (1 + k * c + V)


def best_k(alpha, c, V=0.0):
    """The k in 1..16 with the largest predicted speedup (the smallest on a tie)."""
    return max(range(1, 17), key=lambda k: predicted_speedup(alpha, k, c, V))


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


# ----------------------------------------------------------------------------------------- checkers

_TAU_CASES = [(0.0, 1), (0.0, 4), (0.5, 1), (0.3, 2), (0.6, 4), (0.8, 4), (0.8, 8), (0.9, 16), (0.99, 5)]


def check_expected_tau(fn) -> str:
    """fn(alpha, k) -> the expected tokens per round, (1 - alpha**(k+1)) / (1 - alpha); k + 1 at alpha = 1."""

    def cases(f):
        for alpha, k in _TAU_CASES:
            want = expected_tau(alpha, k)
            got = _number(f(alpha, k), f"expected_tau({alpha}, {k})")
            if _close(got, expected_tau(alpha, k - 1)) and not _close(got, want):
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
        rng = random.Random(2)
        for _ in range(300):  # small vocabularies, so that matches and mismatches are both common
            k, vocab = rng.randint(1, 8), rng.randint(2, 4)
            draft = [rng.randrange(vocab) for _ in range(k)]
            argmax = [rng.randrange(vocab) for _ in range(k + 1)]
            one(f, draft, argmax, greedy_accept(draft, argmax))

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
        for accepted, drafted in _ALPHA_CASES:
            want = pooled_alpha(accepted, drafted)
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
        for alpha, k, c, V in _SPEEDUP_CASES:
            want = predicted_speedup(alpha, k, c, V)
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
        for alpha, c, V in _BEST_K_CASES:
            want = best_k(alpha, c, V)
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
                f"(predicted speedup {predicted_speedup(alpha, want, c, V):.3f} at k={want}"
                + (f" vs {predicted_speedup(alpha, got, c, V):.3f} at k={got})" if 1 <= got <= 16 else ")"),
            )

    return verdict("best k", fn, cases)


REFERENCE = {
    "check_expected_tau": expected_tau,
    "check_greedy_accept": greedy_accept,
    "check_pooled_alpha": pooled_alpha,
    "check_speedup_model": predicted_speedup,
    "check_best_k": best_k,
}

WRONG = {
    "check_expected_tau": [
        lambda alpha, k: (1 - alpha**k) / (1 - alpha) if alpha < 1 else k,  # forgets the target's token
        lambda alpha, k: 1 + k * alpha,  # linear: ignores that a rejection ends the round
        lambda alpha, k: (1 - alpha ** (k + 1)) / (1 - alpha),  # divides by zero at alpha = 1
        lambda alpha, k: 1 / (1 - alpha) if alpha < 1 else k + 1,  # the k -> infinity limit
    ],
    "check_greedy_accept": [
        lambda d, g: (sum(x == y for x, y in zip(d, g)), g[sum(x == y for x, y in zip(d, g))]),  # any match
        lambda d, g: (
            greedy_accept(d, g)[0],
            d[greedy_accept(d, g)[0]] if greedy_accept(d, g)[0] < len(d) else g[-1],
        ),
        lambda d, g: (greedy_accept(d, g)[0], g[max(0, greedy_accept(d, g)[0] - 1)]),  # off by one
        lambda d, g: (greedy_accept(d, g)[0], g[-1]),  # always the last row
    ],
    "check_pooled_alpha": [
        lambda acc, dr: sum(acc) / sum(dr),  # counts untested drafts as failures
        lambda acc, dr: sum(acc) / sum(a + 1 for a in acc),  # ignores rounds that accepted everything
        lambda acc, dr: sum(a / d for a, d in zip(acc, dr) if d) / sum(1 for d in dr if d),  # mean of ratios
    ],
    "check_speedup_model": [
        lambda alpha, k, c, V: expected_tau(alpha, k) / (1 + c + V),  # one draft pass per round
        lambda alpha, k, c, V: expected_tau(alpha, k) / (k * c + V),  # forgets the target pass
        lambda alpha, k, c, V: (k + 1) / (1 + k * c + V),  # as if every draft were accepted
        lambda alpha, k, c, V: expected_tau(alpha, k) / (1 + k * c),  # ignores the verification cost
    ],
    "check_best_k": [
        lambda alpha, c, V=0.0: 16,  # the longest draft: maximises tau, not speed
        lambda alpha, c, V=0.0: max(
            range(16), key=lambda i: predicted_speedup(alpha, i + 1, c, V)
        ),  # an index
        lambda alpha, c, V=0.0: max(
            range(1, 16), key=lambda k: predicted_speedup(alpha, k, c, V)
        ),  # stops at 15
        lambda alpha, c, V=0.0: max(
            range(1, 17), key=lambda k: predicted_speedup(alpha, k, c, 0.0)
        ),  # drops V
    ],
}
