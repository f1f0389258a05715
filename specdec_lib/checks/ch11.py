"""Checkers for chapter 11 (DFlash 2). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
`REFERENCE` holds the reference solutions and `WRONG` plausible mistakes; tests/test_checks_common.py and
tests/test_checks_ch11.py run every checker on both.
"""

from __future__ import annotations

import torch

from specdec_lib.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    Incorrect,
    expect,
    expect_choice,
    letter_of,
    lettered,
    verdict,
)

# ---------------------------------------------- exercise 1: the two problems DFlash 2 addresses
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
DFLASH2_OPTIONS = lettered("ch11-ex1", DFLASH2_RIGHT, list(_DFLASH2_WHY))
PROBLEMS = ("coordination", "decay")  # the names the `fixes` dictionary uses


def check_dflash2_problems(answer=..., fixes=None) -> str:
    """answer: the letter of DFLASH2_OPTIONS naming the two problems DFlash 2 addresses. fixes: which
    problem each part mainly targets, {"path selector": ..., "local mixing": ...}, values in PROBLEMS."""
    name = "what DFlash 2 addresses"
    if answer is ... or answer is None or fixes is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — choose a letter and fill in `fixes`")
        return NOT_ATTEMPTED

    def cases(fixes):
        letter = answer.strip().lower().strip("()") if isinstance(answer, str) else None
        why = _DFLASH2_WHY.get(DFLASH2_OPTIONS.get(letter), "")
        expect_choice(answer, DFLASH2_OPTIONS, DFLASH2_RIGHT, why)
        expect(isinstance(fixes, dict), 'fixes is a dictionary {"path selector": ..., "local mixing": ...}')
        keys = {str(k).strip().lower() for k in fixes}
        expect(
            keys == {"path selector", "local mixing"},
            'use exactly the keys "path selector" and "local mixing"',
        )
        got = {str(k).strip().lower(): str(v).strip().lower() for k, v in fixes.items()}
        for part, problem in got.items():
            expect(problem in PROBLEMS, f"{part}: choose one of {PROBLEMS}")
        expect(
            got["path selector"] == "coordination",
            "the selector cannot invent a token that is not among a row's candidates, so it cannot cure the "
            "far rows' weak predictions; what it adds is the previous pick (section 3)",
        )
        expect(
            got["local mixing"] == "decay",
            "the mixers change the backbone's predictions themselves: which rows needed better predictions? "
            "(sections 1 and 2)",
        )

    return verdict(name, fixes, cases)


# ---------------------------------------------------- exercise 2: a selector walk, by hand
SELECTOR_EXAMPLE = {
    "anchor": "__init__",
    "candidates": [["(", "self", ")"], ["(", "self", ")"], [")", ":", "self"]],
    "unary": [[2.0, 1.7, 0.5], [1.6, 1.5, 1.0], [1.4, 1.3, 0.2]],
    # compat[a][b] = <A(a) * H(h_t), B(b)>: how well candidate b follows the token a chosen before it
    "compat": {
        "__init__": {"(": 0.5, "self": -1.0, ")": 0.0, ":": 0.0},
        "(": {"(": -1.5, "self": 0.8, ")": 0.6},
        "self": {"(": 0.3, "self": -1.0, ")": 0.6, ":": -0.5},
        ")": {"(": -0.5, "self": -0.8, ")": -1.2, ":": 1.0},
    },
}


def _ref_walk(example=SELECTOR_EXAMPLE):
    path, a = [], example["anchor"]
    for cand, unary in zip(example["candidates"], example["unary"], strict=True):
        scores = [u + example["compat"][a][b] for b, u in zip(cand, unary, strict=True)]
        a = cand[max(range(len(cand)), key=scores.__getitem__)]
        path.append(a)
    return path


def check_selector_walk(path=None) -> str:
    """path: the three tokens of the greedy walk through SELECTOR_EXAMPLE, computed by hand."""
    name = "selector walk by hand"
    if path is None or path is ...:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — write the three tokens of the walk")
        return NOT_ATTEMPTED

    def cases(path):
        try:
            got = [str(t) for t in path]
        except TypeError as e:
            raise Incorrect("answer with a list of three tokens, e.g. ['(', ')', ':']") from e
        expect(len(got) == 3, f"the block has 3 drafted rows, so the path has 3 tokens (got {len(got)})")
        own = [c[max(range(3), key=u.__getitem__)] for c, u in zip(SELECTOR_EXAMPLE["candidates"],
                                                                   SELECTOR_EXAMPLE["unary"], strict=True)]  # fmt: skip
        expect(got != own, "that is each row's own favourite (the largest U): add the compatibility with the "
               "token chosen just before (the anchor for row 1)")  # fmt: skip
        from_anchor = [
            c[max(range(3), key=lambda j, c=c, u=u: u[j] + SELECTOR_EXAMPLE["compat"]["__init__"][c[j]])]
            for c, u in zip(SELECTOR_EXAMPLE["candidates"], SELECTOR_EXAMPLE["unary"], strict=True)
        ]
        expect(got != from_anchor, "every row scored against the anchor: the predecessor of row t is the "
               "token the walk picked for row t - 1")  # fmt: skip
        for t, tok in enumerate(got):
            expect(tok in SELECTOR_EXAMPLE["candidates"][t],
                   f"row {t + 1}: {tok!r} is not among its candidates {SELECTOR_EXAMPLE['candidates'][t]}")  # fmt: skip
        want = _ref_walk()
        for t in range(3):
            expect(got[t] == want[t], f"row {t + 1}: recompute U + compat[{(['__init__'] + want)[t]!r}][b] for "
                   "its three candidates")  # fmt: skip

    return verdict(name, path, cases)


# ------------------------------------------------------------ exercise 3: two-tap mixing
def _ref_two_tap(x, k0, k1, block_size):
    x, k0, k1 = (torch.as_tensor(t).float() for t in (x, k0, k1))
    previous = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
    previous[torch.arange(len(x)) % block_size == 0] = 0  # never across a block start
    return k0 * x + k1 * previous


def _tap_cases():
    g = torch.Generator().manual_seed(11)
    return [
        (torch.randn(n, d, generator=g), torch.randn(n, d, generator=g), torch.randn(n, d, generator=g), B)
        for n, d, B in ((4, 3, 4), (8, 5, 4), (9, 2, 3), (6, 4, 1), (10, 3, 5))
    ]


def check_two_tap(fn) -> str:
    """fn(x [n, d], k0 [n, d], k1 [n, d], block_size) -> y [n, d]: rows are consecutive blocks of
    block_size; y_t = k0_t * x_t + k1_t * x_{t-1}, with x_{t-1} read as zero at the first row of a block."""

    def cases(fn):
        for x, k0, k1, B in _tap_cases():
            want = _ref_two_tap(x, k0, k1, B)
            try:
                got = torch.as_tensor(fn(x.clone(), k0.clone(), k1.clone(), B)).float()
            except (TypeError, ValueError) as e:
                raise Incorrect("return a tensor [n, d]") from e
            context = f"{len(x)} rows in blocks of {B}"
            expect(
                tuple(got.shape) == tuple(want.shape),
                f"{context}: shape {tuple(want.shape)}, got {tuple(got.shape)}",
            )
            crossed = k0 * x + k1 * torch.cat([torch.zeros_like(x[:1]), x[:-1]])
            expect(
                B >= len(x) or not torch.allclose(got, crossed, atol=1e-5),
                f"{context}: the first row of a block read the previous block's last row; a block is alone at "
                "inference, so its first row must read zeros",
            )
            ahead = k0 * x + k1 * torch.cat([x[1:], torch.zeros_like(x[:1])])
            expect(
                not torch.allclose(got, ahead, atol=1e-5), f"{context}: tap 1 reads the row BEFORE, x_(t-1)"
            )
            expect(torch.allclose(got, want, atol=1e-5), f"{context}: y_t = k0_t * x_t + k1_t * x_(t-1)")

    return verdict("two-tap mixing", fn, cases)


_FIXES = {"path selector": "coordination", "local mixing": "decay"}
REFERENCE = {
    "check_dflash2_problems": (letter_of(DFLASH2_OPTIONS, DFLASH2_RIGHT), _FIXES),
    "check_selector_walk": _ref_walk(),
    "check_two_tap": _ref_two_tap,
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
