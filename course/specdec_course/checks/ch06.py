"""Checkers for chapter 06 (multi-token prediction). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import math

import torch

from specdec_course.checks._core import (
    NOT_ATTEMPTED,
    Answers,
    Incorrect,
    as_float,
    as_int_list_pair,
    expect,
    hidden,
    seed,
    unanswered,
    verdict,
)

_expected = Answers("ch06")


# ------------------------------------------------------------- exercise 1: sequential module labels
def _windows() -> list[list[int]]:
    """Token windows with distinct tokens (so an off-by-one shows), and a few short ones."""
    g = torch.Generator().manual_seed(seed(0))
    out = [list(range(10, 10 + T)) for T in (3, 4, 6, 9)]
    out += [torch.randperm(50, generator=g)[:T].tolist() for T in (5, 8, 12)]
    return out


def check_module_pairs(fn) -> str:
    """fn(ids, k) -> (tokens module k reads, its labels), over the positions j that have a label: module k
    at position j reads the embedding of ids[j + k] and is trained to predict ids[j + k + 1]."""

    def cases(fn):
        for ids in _windows():
            for k in (1, 2, 3):
                if len(ids) < k + 2:
                    continue
                want_reads, want_labels = _expected.module_pairs(ids, k)
                answer = fn(list(ids), k)
                reads, labels = as_int_list_pair(
                    answer, ("the tokens read", "the labels"), "return a pair: (tokens read, labels)"
                )
                context = f"ids {ids}, k = {k}"
                expect(
                    len(reads) == len(labels),
                    f"{context}: one label per read token; you returned {len(reads)} and {len(labels)} "
                    "(the last position a module runs at has no label inside the window)",
                )
                expect(
                    reads != labels,
                    f"{context}: a module must not read the token it is asked to predict",
                )
                expect(
                    labels == want_labels or labels != ids[k:][: len(labels)],
                    f"{context}: module k predicts the token k + 1 ahead of its position (the target's own "
                    "head already predicts 1 ahead), not k ahead",
                )
                expect(
                    labels == want_labels,
                    f"{context}: labels should be {want_labels}, got {labels}",
                )
                expect(
                    reads == want_reads,
                    f"{context}: module k reads the token just before its label, x_(j+k): expected {want_reads}, "
                    f"got {reads}",
                )

    return verdict("sequential module labels", fn, cases)


# ------------------------------------------------------------- exercise 2: cache entries kept
def check_kept_positions(fn) -> str:
    """fn(k, n, n_new) -> how many leading cache positions sequential module k keeps after a round: it had
    positions 0..n-1 (n: the old pending token's index), entry j read the token at index j + k, and the round
    committed n_new tokens (accepted drafts, then the target's own token, the new pending one)."""

    def cases(fn):
        grid = [(k, n, n_new) for k in (1, 2, 3, 4) for n in (0, 1, 2, 5, 9) for n_new in range(1, 6)]
        for k, n, n_new in grid + hidden(
            20, lambda r: (r.randint(1, 6), r.randint(0, 40), r.randint(1, 9)), 1
        ):
            want = _expected.kept_positions(k, n, n_new)
            try:
                got = int(fn(k, n, n_new))
            except (TypeError, ValueError) as e:
                raise Incorrect("return one integer: the number of positions kept") from e
            context = f"k = {k}, n = {n}, n_new = {n_new}"
            expect(got >= 0, f"{context}: a count cannot be negative")
            expect(got <= n, f"{context}: the module only had {n} positions cached")
            expect(
                got == want or got != n,
                f"{context}: not every entry survives: entry j read the token at index j + k, which "
                "may be a rejected draft or the new pending token (only independent heads keep all)",
            )
            expect(
                got != want + 1,
                f"{context}: you keep one entry too many: the entry that read the NEW pending token's "
                "index read a draft (or nothing), not the target's token",
            )
            expect(got == want, f"{context}: expected {want}, got {got}")

    return verdict("kept cache positions", fn, cases)


# ------------------------------------------------------------- exercise 3: expected tau of a chain
def _alpha_lists() -> list[list[float]]:
    g = torch.Generator().manual_seed(seed(0))
    out = [[0.5], [0.9, 0.8], [1.0, 1.0, 1.0], [0.0, 0.7], [0.7, 0.6, 0.65]]
    out += [torch.rand(D, generator=g).tolist() for D in (1, 3, 4, 6)]
    return out


def _colleague_tau(alphas) -> float:
    """The notebook's `colleague_expected_tau`, bug included (it is shown to the learner)."""
    tau, reach = 1.0, 1.0
    for alpha in alphas:
        tau += reach
        reach *= alpha
    return tau


def check_expected_tau(fn) -> str:
    """fn(alphas) -> expected tokens per round of a chain: 1 + a1 + a1 a2 + a1 a2 a3 + ..., where alphas[d - 1]
    is the probability that draft d is accepted given that drafts 1..d-1 were."""

    def cases(fn):
        for alphas in _alpha_lists():
            want = _expected.expected_tau(alphas)
            got = as_float(fn(list(alphas)), "tau")
            context = f"alphas {[round(a, 3) for a in alphas]}"
            if math.isclose(got, want, abs_tol=1e-6):
                continue
            expect(
                not math.isclose(got, want - 1, abs_tol=1e-6),
                f"{context}: count the target's own token too: every round produces at least one token",
            )
            expect(
                not math.isclose(got, _colleague_tau(alphas), abs_tol=1e-6),
                f"{context}: that is the colleague's answer: the first draft counts only with probability "
                "alpha_1, so multiply the reach by alpha before adding it",
            )
            expect(
                not math.isclose(got, 1 + sum(alphas), abs_tol=1e-6),
                f"{context}: draft d counts only if drafts 1..d-1 were accepted too: multiply the alphas",
            )
            raise Incorrect(f"{context}: expected {want:.4f}, got {got:.4f}")

    return verdict("expected tau", fn, cases)


# ------------------------------------------------------------- exercise 4: DeepSeek-V3's numbers
DEEPSEEK_ALPHA, DEEPSEEK_SPEEDUP = 0.85, 1.8


def check_deepseek_numbers(tau=..., round_overhead=...) -> str:
    """Your numbers for one drafted token accepted with probability 0.85 and a 1.8x speedup: tau, and how much
    more one round costs than a plain decoding step (a fraction). Leave either as `...` while not attempted."""
    answers = (tau, round_overhead)
    if unanswered("DeepSeek-V3's numbers", answers, "set the two answers"):
        return NOT_ATTEMPTED

    def cases(answer):
        t, overhead = (as_float(a, what) for a, what in zip(answer, ("tau", "the round overhead")))
        expect(
            _expected.right("deepseek.tau", t),
            _expected.hint("deepseek.tau", t) or f"tau = {t} is not right: 1 + alpha",
        )
        expect(
            _expected.right("deepseek.overhead", overhead),
            _expected.hint("deepseek.overhead", overhead) or f"round overhead {overhead:.4f} is not right",
        )

    return verdict("DeepSeek-V3's numbers", answers, cases)
