"""Checkers for chapter 10 (DFlash). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import math

import torch

from specdec_course.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    Answers,
    as_float,
    expect,
    expect_choice,
    hidden,
    options_of,
    seed,
    unanswered,
    verdict,
)

_expected = Answers("ch10")


# ------------------------------------------------------- exercise 1: what DFlash changes about drafting
# The options, in the order of their letters (`options_of` orders them by a hash); which one is right, and
# the hint of each near miss, are in the teacher's package (answers.json has their digests).
DFLASH_OPTIONS = options_of(
    "ch10-what-dflash-changes",
    [
        "one pass drafts the whole block, and each row reads the tokens sampled for the rows before it",
        "one pass of a small bidirectional drafter fills a whole block of guesses, not one pass per guess",
        "its drafter reads only the target's last hidden state, like Medusa's heads, so drafting costs nothing",
        "it drafts a tree of candidates for every row, and the target's verification pass picks a path",
        "it verifies the drafted block with a cheaper rule than rejection sampling, so each round costs less",
    ],
)


def check_what_dflash_changes(answer=..., fn=None) -> str:
    """answer: the letter of the option in DFLASH_OPTIONS that says what DFlash changes about drafting.
    fn(k, block_size) -> the number of DFlash drafter passes needed to draft k tokens in total, if every
    drafted token is accepted (an EAGLE-style chain drafter would need k)."""
    name = "what DFlash changes"
    if answer is ... or answer is None or fn is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — choose a letter and write the function")
        return NOT_ATTEMPTED

    def cases(fn):
        expect_choice(
            answer, DFLASH_OPTIONS, _expected, "dflash.choice", "how are a block's guesses made? (section 1)"
        )
        grid = [(k, B) for B in (2, 4, 8, 16) for k in (1, 3, B - 1, B, 2 * B + 1, 40)]
        for k, B in grid + hidden(10, lambda r: (r.randint(1, 100), r.randint(2, 32)), 1):
            want = _expected.rounds(k, B)
            got = as_float(fn(k, B), "the number of passes")
            context = f"k = {k}, block size {B}"
            expect(got != k or want == k, f"{context}: {k} passes is the autoregressive drafter's cost")
            expect(
                got != math.ceil(k / B) or want == math.ceil(k / B),
                f"{context}: row 0 of the block holds the anchor (the pending token), so one pass drafts "
                "block_size - 1 tokens, not block_size",
            )
            expect(got == want, f"{context}: expected {want}, got {got:g}")

    return verdict(name, fn, cases)


# -------------------------------------------- exercise 2: tau from the acceptance per row, and why B = 16
WHY_OPTIONS = options_of(
    "ch10-why-b16",
    [
        "the verifier accepts at most 8 drafted tokens per round, so rows 9 to 15 are always cut off",
        "a block of 16 rows costs twice the drafting time of a block of 8, which cancels the extra tokens",
        "row k's token counts only if rows 1 .. k-1 were all accepted, and by row 8 that product is tiny",
        "the loss gives rows 9 to 15 zero weight, so the drafter never learned to fill those rows",
    ],
)


def _alpha_cases():
    g = torch.Generator().manual_seed(seed(10))
    out = [([0.9, 0.7, 0.5], 4), ([1.0, 1.0, 1.0, 1.0], 5), ([0.5, 0.0, 0.9], 4), ([0.8] * 15, 2)]
    for n, B in ((15, 16), (15, 8), (15, 4), (7, 8), (10, 6)):
        out.append(((torch.rand(n, generator=g) * 0.6 + 0.4).tolist(), B))
    return out


def check_block_tau(fn=None, choice=...) -> str:
    """fn(alphas, block_size) -> the tau a chain of block_size - 1 drafted rows yields when row k is
    accepted with conditional probability alphas[k - 1] (given rows 1 .. k - 1 were); choice: the letter
    of the option in WHY_OPTIONS that says why B = 16 buys almost nothing over B = 8 here."""
    name = "tau from the acceptance per row"
    if fn is None or choice is ... or choice is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — write the function and choose a letter")
        return NOT_ATTEMPTED

    def cases(fn):
        for alphas, B in _alpha_cases():
            want = _expected.block_tau(alphas, B)
            with_anchor = _expected.block_tau(alphas, B + 1)
            all_rows = _expected.block_tau(alphas, len(alphas) + 1)
            got = as_float(fn(list(alphas), B), "tau")
            context = f"alphas {[round(a, 2) for a in alphas]}, block size {B}"
            rows = alphas[: B - 1]
            plain_sum = 1 + sum(rows)
            expect(
                abs(got - plain_sum) > 1e-6 or abs(want - plain_sum) < 1e-6,
                f"{context}: row k's token only counts if rows 1 .. k - 1 were ALL accepted: multiply the "
                "alphas along the chain instead of adding them",
            )
            expect(
                abs(got - (want - 1)) > 1e-6,
                f"{context}: every round also yields one token from the target itself (the correction or the "
                "bonus), so tau starts at 1",
            )
            expect(
                len(alphas) < B or abs(got - with_anchor) > 1e-6 or abs(want - got) < 1e-6,
                f"{context}: row 0 of the block is the anchor, so a block of {B} rows drafts only {B - 1} of them",
            )
            expect(
                abs(got - all_rows) > 1e-6 or abs(want - got) < 1e-6,
                f"{context}: use only the first block_size - 1 alphas: a smaller block drafts fewer rows",
            )
            expect(abs(got - want) < 1e-6, f"{context}: expected {want:.4f}, got {got:.4f}")
        expect_choice(choice, WHY_OPTIONS, _expected, "why.choice", "look at what multiplies row 9's term")

    return verdict(name, fn, cases)


# ----------------------------------------- exercise 3: how cheap would the drafter have to be?
def check_needed_c(c=...) -> str:
    """c: the cost of one DFlash drafter pass, in target steps, at which chapter 02's model would predict
    DFlash (keeping its tau and V from the committed benchmark, T = 0, dflash:4) as fast as EAGLE-3's
    predicted speedup there (eagle3:16)."""
    name = "how cheap DFlash's pass would have to be"
    if unanswered(name, (c,), "set c, a fraction of a target pass"):
        return NOT_ATTEMPTED

    def cases(_):
        got = as_float(c, "c")
        if _expected.right("needed_c", got):
            return
        hint = _expected.hint("needed_c", got)
        expect(hint is None, hint)
        expect(got > 0, "a cost is positive; solve tau / (1 + c + V) = S for c")
        expect(
            False,
            "solve tau / (1 + c + V) = S for c with DFlash's tau and V and EAGLE-3's predicted S (to 0.01)",
        )

    return verdict(name, True, cases)
