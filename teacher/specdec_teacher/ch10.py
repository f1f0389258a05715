"""Chapter 10's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch10.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from specdec_course.checks._core import letter_of
from specdec_course.checks.ch10 import DFLASH_OPTIONS, WHY_OPTIONS

BENCH = Path(__file__).resolve().parents[2] / "book" / "data" / "bench.json"

# exercise 1: the right option, and each near miss with the hint that names why it misses
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


def rounds(k, block_size):
    return math.ceil(k / (block_size - 1))


# exercise 2
def block_tau(alphas, block_size):
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


def bench_rows():
    results = json.loads(BENCH.read_text())["results"]["0"]
    return results["dflash:4"], results["eagle3:16"]  # DFlash's shortest chain (3 tokens) against EAGLE-3


def needed_c():
    dflash, eagle3 = bench_rows()
    # chapter 02's model, S = tau / (1 + c + V) with one drafter pass per round, solved for c
    return dflash["tau"] / eagle3["predicted_speedup"] - 1 - dflash["V"]


_dflash, _eagle3 = bench_rows()
_PER_PASS = (
    "DFlash drafts the whole block in ONE pass, so c is the cost of that pass, not of each drafted token"
)
_TODAY = "that is what DFlash's pass costs today; the question is what it WOULD have to cost"
# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
VALUES = {
    "dflash.choice": (DFLASH_RIGHT, None, list(DFLASH_WRONG.items())),
    "why.choice": (WHY_RIGHT, None, list(WHY_WRONG.items())),
    "needed_c": (
        needed_c(),
        2,
        [
            (
                _dflash["tau"] / _eagle3["predicted_speedup"] - 1,
                "verification costs 1 + V target steps, not 1: keep DFlash's V in the denominator, 1 + c + V",
            ),
            (
                _dflash["tau"] / _eagle3["speedup"] - 1 - _dflash["V"],
                "compare like with like: the model predicts decoding with no engine overhead, so match "
                "EAGLE-3's PREDICTED speedup, not its measured one",
            ),
            (_dflash["kc"], _TODAY),
            (_dflash["c_per_draft_pass"], _TODAY),
            (needed_c() / 3, _PER_PASS),
            (needed_c() / 4, _PER_PASS),
        ],
    ),
}

REFERENCE = {
    "check_what_dflash_changes": (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT), rounds),
    "check_block_tau": (block_tau, letter_of(WHY_OPTIONS, WHY_RIGHT)),
    "check_needed_c": (needed_c(),),
}


def _tau_variant(kind):
    def tau(alphas, B):
        rows = list(alphas)[: B - 1]
        if kind == "sum":
            return 1 + sum(rows)
        if kind == "no-bonus":
            return block_tau(alphas, B) - 1
        if kind == "anchor":
            return block_tau(alphas, B + 1)
        if kind == "all-rows":
            return block_tau(alphas, len(alphas) + 1)
        raise ValueError(kind)

    return tau


_RIGHT_WHY = letter_of(WHY_OPTIONS, WHY_RIGHT)
WRONG = {
    "check_what_dflash_changes": [
        *[(letter_of(DFLASH_OPTIONS, text), rounds) for text in DFLASH_WRONG],
        (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT), lambda k, B: k),  # one pass per token
        (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT), lambda k, B: math.ceil(k / B)),  # forgets the anchor row
        (letter_of(DFLASH_OPTIONS, DFLASH_RIGHT).upper() + " ", lambda k, B: 1),  # one pass whatever k
    ],
    "check_block_tau": [
        *[(_tau_variant(kind), _RIGHT_WHY) for kind in ("sum", "no-bonus", "anchor", "all-rows")],
        *[(block_tau, letter_of(WHY_OPTIONS, text)) for text in WHY_WRONG],
    ],
    "check_needed_c": [
        (_dflash["tau"] / _eagle3["predicted_speedup"] - 1,),  # V forgotten
        (_dflash["tau"] / _eagle3["speedup"] - 1 - _dflash["V"],),  # the measured speedup
        (_dflash["kc"],),  # today's cost
        (needed_c() / 3,),  # per drafted token
    ],
}
