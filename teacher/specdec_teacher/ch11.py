"""Chapter 11's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch11.py)."""

from __future__ import annotations

import torch

from specdec_course.checks._core import letter_of
from specdec_course.checks.ch11 import DFLASH2_OPTIONS, SELECTOR_EXAMPLE

# exercise 1: the right option, and each near miss with the hint that names why it misses
DFLASH2_RIGHT = "neighbouring rows do not coordinate, and the far rows' top guesses get worse"
# Each near miss pairs one real problem with a claim the chapters disproved; the hint names which.
_DFLASH2_WHY = {
    "neighbouring rows do not coordinate, and verifying a 16-token block costs too much": "DFlash 2 leaves "
    "verification untouched; the second problem is in the drafter's far rows (chapter 10's recall table)",
    "the far rows' top guesses get worse, and each row needs its own drafter pass": "DFlash already fills the "
    "whole block in ONE pass (chapter 10); the other problem is that the rows never see each other's picks",
    "neighbouring rows do not coordinate, and sampled blocks are not exactly lossless": "DFlash is already "
    "exactly lossless (each row is judged with the q it was drawn from); the other problem is the far rows' "
    "weak guesses (section 1)",
    "the far rows' top guesses get worse, and their top-16 lists rarely hold the right token": "the right "
    "token is among a row's 16 candidates far more often than it is the top guess (section 1): that is why "
    "choosing among them pays; the other problem is that neighbours do not coordinate",
}


def walk(example=SELECTOR_EXAMPLE):
    path, a = [], example["anchor"]
    for cand, unary in zip(example["candidates"], example["unary"], strict=True):
        scores = [u + example["compat"][a][b] for b, u in zip(cand, unary, strict=True)]
        a = cand[max(range(len(cand)), key=scores.__getitem__)]
        path.append(a)
    return path


def two_tap(x, k0, k1, block_size):
    x, k0, k1 = (torch.as_tensor(t).float() for t in (x, k0, k1))
    previous = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
    previous[torch.arange(len(x)) % block_size == 0] = 0  # never across a block start
    return k0 * x + k1 * previous


_FIXES = {"path selector": "coordination", "local mixing": "decay"}
_WALK = walk()
# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
VALUES = {
    "dflash2.choice": (DFLASH2_RIGHT, None, list(_DFLASH2_WHY.items())),
    "fixes.path selector": (
        "coordination",
        None,
        [
            (
                "decay",
                "the selector cannot invent a token that is not among a row's candidates, so it cannot cure the "
                "far rows' weak predictions; what it adds is the previous pick (section 3)",
            )
        ],
    ),
    "fixes.local mixing": (
        "decay",
        None,
        [
            (
                "coordination",
                "the mixers change the backbone's predictions themselves: which rows needed better "
                "predictions? (sections 1 and 2)",
            )
        ],
    ),
    "walk.path": (
        tuple(_WALK),
        None,
        [
            (
                ("(", "(", ")"),
                "that is each row's own favourite (the largest U): add the compatibility with the token chosen "
                "just before (the anchor for row 1)",
            ),
            (
                ("(", "(", ":"),
                "every row scored against the anchor: the predecessor of row t is the token the walk picked "
                "for row t - 1",
            ),
        ],
    ),
    **{f"walk.{t + 1}": (tok, None, []) for t, tok in enumerate(_WALK)},
}

REFERENCE = {
    "check_dflash2_problems": (letter_of(DFLASH2_OPTIONS, DFLASH2_RIGHT), _FIXES),
    "check_selector_walk": walk(),
    "check_two_tap": two_tap,
}


def _tap_variant(cross=False, ahead=False, no_k0=False):
    def fn(x, k0, k1, block_size):
        x, k0, k1 = (torch.as_tensor(t).float() for t in (x, k0, k1))
        if ahead:
            other = torch.cat([x[1:], torch.zeros_like(x[:1])])
        else:
            other = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
            if not cross:
                other[torch.arange(len(x)) % block_size == 0] = 0
        return (x if no_k0 else k0 * x) + k1 * other

    return fn


WRONG = {
    "check_dflash2_problems": [
        *((letter_of(DFLASH2_OPTIONS, text), _FIXES) for text in _DFLASH2_WHY),  # each near miss
        (
            letter_of(DFLASH2_OPTIONS, DFLASH2_RIGHT),
            {"path selector": "decay", "local mixing": "coordination"},
        ),
        (
            letter_of(DFLASH2_OPTIONS, DFLASH2_RIGHT),
            {"path selector": "coordination", "local mixing": "coordination"},
        ),
        (letter_of(DFLASH2_OPTIONS, DFLASH2_RIGHT), {"selector": "coordination", "mixing": "decay"}),
        ("z", _FIXES),
    ],
    "check_selector_walk": [
        ["(", "(", ")"],  # each row's own top-1
        ["(", "(", ":"],  # scored against the anchor
        ["self", "(", ")"],
        ["(", "self"],
    ],
    "check_two_tap": [_tap_variant(cross=True), _tap_variant(ahead=True), _tap_variant(no_k0=True)],
}
