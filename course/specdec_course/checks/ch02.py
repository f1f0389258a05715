"""Checkers for chapter 02 · Draft and verify (greedy speculative decoding).

Each `check_*` takes the learner's function and returns "correct", "incorrect" or "not attempted"
(printed too); it never raises. The expected values come from the teacher's reference solutions through
`_expected` (see `_core`); the references and plausible mistakes are in the teacher's package.
"""

from __future__ import annotations

import math
import operator
import random

from specdec_course.checks._core import Answers, Incorrect, expect, hidden, seed, verdict

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


def _random_alpha_k(rng):
    """A hidden case of the naive-alpha exercise: (alpha, k)."""
    return round(rng.uniform(0.05, 0.98), 3), rng.randint(1, 16)


def _random_model(rng):
    """Hidden cases of the break-even exercise: (alpha, k, V)."""
    return round(rng.uniform(0, 1), 3), rng.randint(1, 12), round(rng.uniform(0, 0.6), 3)


def _random_costs(rng):
    return (
        round(rng.uniform(0.3, 0.99), 3),
        round(rng.uniform(0.005, 0.6), 3),
        round(rng.choice([0, rng.uniform(0, 0.6)]), 3),
    )


# ----------------------------------------------------------------------------------------- checkers

_TAU_CASES = [(3.3616, 4), (1.0, 3), (2.0, 1), (5.0, 4), (2.5, 16), (1.5, 2), (3.0, 4), (4.0, 8), (1.01, 6)]


def check_alpha_for_tau(fn) -> str:
    """fn(tau, k) -> the alpha in [0, 1] at which a chain of k drafts reaches tau tokens per round under
    the i.i.d. assumption, for 1 <= tau <= k + 1 (the inverse of tau(alpha, k) = 1 + alpha + ... + alpha**k)."""

    def cases(f):
        for tau, k in _TAU_CASES + hidden(8, lambda r: (round(r.uniform(1.05, 6.0), 3), r.randint(6, 12)), 1):
            want = _expected.alpha_for_tau(tau, k)
            got = _number(f(tau, k), f"alpha_for_tau({tau}, {k})")
            expect(
                0 <= got <= 1 + 1e-9,
                f"alpha_for_tau({tau}, {k}) = {got:.4f}: an acceptance rate lies in [0, 1]",
            )
            expect(
                abs(got - want) <= 1e-4,
                f"alpha_for_tau({tau}, {k}) should be {want:.4f}, got {got:.4f} (hint: check your answer by "
                "putting it back into tau(alpha, k); tau grows with alpha, so you can home in on the alpha that "
                "gives the wanted tau)",
            )

    return verdict("the α a τ needs", fn, cases)


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


_NAIVE_CASES = [(0.8, 4), (0.5, 1), (0.9, 8), (0.0, 3), (1.0, 5), (0.6, 16), (0.3, 2)]


def check_naive_alpha(fn) -> str:
    """fn(alpha, k) -> what sum(accepted) / sum(drafted) converges to when every round drafts k tokens and
    each is accepted with probability alpha, independently, given that the ones before it were."""

    def cases(f):
        for alpha, k in _NAIVE_CASES + hidden(6, _random_alpha_k, 3):
            want = _expected.naive_alpha(alpha, k)
            got = _number(f(alpha, k), f"naive_alpha({alpha}, {k})")
            if _close(got, alpha) and not _close(got, want):
                raise Incorrect(
                    f"naive_alpha({alpha}, {k}) = {got:.4f} is alpha itself: that is what the pooled estimate "
                    "over TESTED positions measures; drafted also counts the drafts after the first mismatch"
                )
            expect(
                not (_close(got, want * k) and not _close(got, want)),
                f"naive_alpha({alpha}, {k}) = {got:.4f} is the expected accepted count per round; divide by "
                "what a round drafts",
            )
            expect(
                _close(got, want),
                f"naive_alpha({alpha}, {k}) should be {want:.4f}, got {got:.4f} (the expected accepted count "
                "of one round, over the k drafts it made)",
            )

    return verdict("what accepted/drafted measures", fn, cases)


_BREAK_EVEN_CASES = [
    (0.8, 4, 0.0),
    (0.6, 1, 0.0),
    (0.6, 3, 0.15),
    (0.9, 8, 0.4),
    (0.0, 2, 0.1),  # no draft pays: the answer is negative
    (1.0, 4, 0.1),
    (0.7, 16, 1.0),
]


def check_break_even_c(fn) -> str:
    """fn(alpha, k, V) -> the draft cost c (in target steps per draft pass) at which the predicted speedup
    tau(alpha, k) / (1 + k c + V) is exactly 1; negative when no draft, however cheap, pays."""

    def cases(f):
        for alpha, k, V in _BREAK_EVEN_CASES + hidden(8, _random_model, 4):
            want = _expected.break_even_c(alpha, k, V)
            got = _number(f(alpha, k, V), f"break_even_c({alpha}, {k}, {V})")
            expect(
                _close(got, want),
                f"break_even_c(alpha={alpha}, k={k}, V={V}) should be {want:.4f}, got {got:.4f} (hint: set "
                "S = tau / (1 + k c + V) to 1 and solve for c; check by putting it back)",
            )

    return verdict("break-even draft cost", fn, cases)


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
