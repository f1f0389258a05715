"""Checkers for chapter 10 (DFlash). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
`REFERENCE` holds the reference answers and `WRONG` plausible mistakes; tests/test_checks_ch10.py runs
every checker on both (all three take values, or a value with a function).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from specdec_lib.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    as_float,
    expect,
    expect_choice,
    letter_of,
    lettered,
    verdict,
)

BENCH = Path(__file__).resolve().parents[2] / "book" / "data" / "bench.json"


def _choice_hint(options, wrong: dict, choice) -> str:
    letter = str(choice).strip().lower().strip("()")
    return wrong.get(options.get(letter, ""), "")


def _not_attempted(name: str, *answers) -> bool:
    if any(a is ... or a is None for a in answers):
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — fill in every answer")
        return True
    return False


# ------------------------------------------------------- exercise 1: what DFlash changes about drafting
DFLASH_RIGHT = (
    "one pass of a small bidirectional drafter fills a whole block of guesses, not one pass per guess"
)
DFLASH_WRONG = {
    "it verifies the drafted block with a cheaper rule than rejection sampling, so each round costs less": (
        "verification is untouched, which is why DFlash stays lossless (section 1); what changes is how the "
        "guesses are made"
    ),
    "one pass drafts the whole block, and each row reads the tokens sampled for the rows before it": (
        "the rows never see each other's sampled tokens: they are filled at once, from mask tokens, which is "
        "exactly the weakness section 6 measures and chapter 11 attacks"
    ),
    "its drafter reads only the target's last hidden state, like Medusa's heads, so drafting costs nothing": (
        "DFlash's drafter reads three target layers at every prefix position through its keys and values, and "
        "its pass is far from free (section 7 times it)"
    ),
    "it drafts a tree of candidates for every row, and the target's verification pass picks a path": (
        "DFlash hands the engine a CHAIN, one guess per row; choosing a path among each row's candidates is "
        "chapter 11's idea"
    ),
}
DFLASH_OPTIONS = lettered("ch10-what-dflash-changes", DFLASH_RIGHT, list(DFLASH_WRONG))


def _ref_rounds(k, block_size):
    return math.ceil(k / (block_size - 1))


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
            answer, DFLASH_OPTIONS, DFLASH_RIGHT, _choice_hint(DFLASH_OPTIONS, DFLASH_WRONG, answer)
        )
        for B in (2, 4, 8, 16):
            for k in (1, 3, B - 1, B, 2 * B + 1, 40):
                want = _ref_rounds(k, B)
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
def _ref_block_tau(alphas, block_size):
    tau, survive = 1.0, 1.0  # the target's own token comes with every round
    for a in list(alphas)[: block_size - 1]:  # rows 1 .. B - 1 (row 0 is the anchor)
        survive *= float(a)  # row k counts only if rows 1 .. k were all accepted
        tau += survive
    return tau


WHY_RIGHT = "row k's token counts only if rows 1 .. k-1 were all accepted, and by row 8 that product is tiny"
WHY_WRONG = {
    "a block of 16 rows costs twice the drafting time of a block of 8, which cancels the extra tokens": (
        "the question is about tau, tokens per round, not time; and section 7's table shows the drafting "
        "time per round nearly flat in B"
    ),
    "the verifier accepts at most 8 drafted tokens per round, so rows 9 to 15 are always cut off": (
        "chain verification walks the whole chain until the first rejection; nothing caps it at 8"
    ),
    "the loss gives rows 9 to 15 zero weight, so the drafter never learned to fill those rows": (
        "w_k = exp(-(k - 1) / gamma) is positive for every row: they are trained, less than the first ones, and "
        "section 6 shows their recall is low but far from zero. Look at your function instead: what multiplies "
        "row 9's contribution?"
    ),
}
WHY_OPTIONS = lettered("ch10-why-b16", WHY_RIGHT, list(WHY_WRONG))


def _alpha_cases():
    g = torch.Generator().manual_seed(10)
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
            want = _ref_block_tau(alphas, B)
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
                len(alphas) < B or abs(got - _ref_block_tau(alphas, B + 1)) > 1e-6 or abs(want - got) < 1e-6,
                f"{context}: row 0 of the block is the anchor, so a block of {B} rows drafts only {B - 1} of them",
            )
            expect(
                abs(got - _ref_block_tau(alphas, len(alphas) + 1)) > 1e-6 or abs(want - got) < 1e-6,
                f"{context}: use only the first block_size - 1 alphas: a smaller block drafts fewer rows",
            )
            expect(abs(got - want) < 1e-6, f"{context}: expected {want:.4f}, got {got:.4f}")
        expect_choice(choice, WHY_OPTIONS, WHY_RIGHT, _choice_hint(WHY_OPTIONS, WHY_WRONG, choice))

    return verdict(name, fn, cases)


# ----------------------------------------- exercise 3: how cheap would the drafter have to be?
def _bench_rows():
    results = json.loads(BENCH.read_text())["results"]["0"]
    return results["dflash:8"], results["eagle3:16"]


def _ref_needed_c():
    dflash, eagle3 = _bench_rows()
    # chapter 02's model, S = tau / (1 + c + V) with one drafter pass per round, solved for c
    return dflash["tau"] / eagle3["predicted_speedup"] - 1 - dflash["V"]


def check_needed_c(c=...) -> str:
    """c: the cost of one DFlash drafter pass, in target steps, at which chapter 02's model would predict
    DFlash (keeping its tau and V from the committed benchmark, T = 0, dflash:8) as fast as EAGLE-3's
    predicted speedup there (eagle3:16)."""
    name = "how cheap DFlash's pass would have to be"
    if _not_attempted(name, c):
        return NOT_ATTEMPTED

    def cases(_):
        got = as_float(c, "c")
        dflash, eagle3 = _bench_rows()
        want = _ref_needed_c()
        close = lambda x: abs(got - x) < 0.01  # noqa: E731
        if close(want):
            return
        expect(
            not close(dflash["tau"] / eagle3["predicted_speedup"] - 1),
            "verification costs 1 + V target steps, not 1: keep DFlash's V in the denominator, 1 + c + V",
        )
        expect(
            not close(dflash["tau"] / eagle3["speedup"] - 1 - dflash["V"]),
            "compare like with like: the model predicts decoding with no engine overhead, so match EAGLE-3's "
            "PREDICTED speedup, not its measured one",
        )
        expect(
            not close(dflash["kc"]) and not close(dflash["c_per_draft_pass"]),
            "that is what DFlash's pass costs today; the question is what it WOULD have to cost",
        )
        expect(
            not close(want / 7) and not close(want / 8),
            "DFlash drafts the whole block in ONE pass, so c is the cost of that pass, not of each drafted token",
        )
        expect(
            got > 0,
            "a cost is positive; solve tau / (1 + c + V) = S for c",
        )
        expect(
            False,
            f"solve tau / (1 + c + V) = S for c with DFlash's tau and V and EAGLE-3's predicted S "
            f"(expected about {want:.2f})",
        )

    return verdict(name, True, cases)


REFERENCE = {
    "check_what_dflash_changes": (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT), _ref_rounds),
    "check_block_tau": (_ref_block_tau, letter_of(WHY_OPTIONS, WHY_RIGHT)),
    "check_needed_c": (_ref_needed_c(),),
}


def _tau_variant(kind):
    def tau(alphas, B):
        rows = list(alphas)[: B - 1]
        if kind == "sum":
            return 1 + sum(rows)
        if kind == "no-bonus":
            return _ref_block_tau(alphas, B) - 1
        if kind == "anchor":
            return _ref_block_tau(alphas, B + 1)
        if kind == "all-rows":
            return _ref_block_tau(alphas, len(alphas) + 1)
        raise ValueError(kind)

    return tau


_RIGHT_WHY = letter_of(WHY_OPTIONS, WHY_RIGHT)
_dflash, _eagle3 = _bench_rows()
WRONG = {
    "check_what_dflash_changes": [
        *[(letter_of(DFLASH_OPTIONS, text), _ref_rounds) for text in DFLASH_WRONG],
        (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT), lambda k, B: k),  # one pass per token
        (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT), lambda k, B: math.ceil(k / B)),  # forgets the anchor row
        (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT).upper() + " ", lambda k, B: 1),  # one pass whatever k
    ],
    "check_block_tau": [
        *[(_tau_variant(kind), _RIGHT_WHY) for kind in ("sum", "no-bonus", "anchor", "all-rows")],
        *[(_ref_block_tau, letter_of(WHY_OPTIONS, text)) for text in WHY_WRONG],
    ],
    "check_needed_c": [
        (_dflash["tau"] / _eagle3["predicted_speedup"] - 1,),  # V forgotten
        (_dflash["tau"] / _eagle3["speedup"] - 1 - _dflash["V"],),  # the measured speedup
        (_dflash["kc"],),  # today's cost
        (_ref_needed_c() / 7,),  # per drafted token
    ],
}
