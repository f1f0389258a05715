"""Checkers for chapter 11 (DFlash 2). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import torch

from specdec_course.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    Answers,
    Incorrect,
    expect,
    expect_choice,
    options_of,
    seed,
    verdict,
)

_expected = Answers("ch11")

# ---------------------------------------------- exercise 1: the two problems DFlash 2 addresses
# The options, in the order of their letters (`options_of` orders them by a hash); which one is right, and
# the hint of each near miss, are in the teacher's package (answers.json has their digests).
DFLASH2_OPTIONS = options_of(
    "ch11-ex1",
    [
        "the far rows' top guesses get worse, and each row needs its own drafter pass",
        "neighbouring rows do not coordinate, and the far rows' top guesses get worse",
        "neighbouring rows do not coordinate, and sampled blocks are not exactly lossless",
        "the far rows' top guesses get worse, and their top-16 lists rarely hold the right token",
        "neighbouring rows do not coordinate, and verifying a 16-token block costs too much",
    ],
)
PROBLEMS = ("coordination", "decay")  # the names the `fixes` dictionary uses


def check_dflash2_problems(answer=..., fixes=None) -> str:
    """answer: the letter of DFLASH2_OPTIONS naming the two problems DFlash 2 addresses. fixes: which
    problem each part mainly targets, {"path selector": ..., "local mixing": ...}, values in PROBLEMS."""
    name = "what DFlash 2 addresses"
    if answer is ... or answer is None or fixes is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — choose a letter and fill in `fixes`")
        return NOT_ATTEMPTED

    def cases(fixes):
        expect_choice(answer, DFLASH2_OPTIONS, _expected, "dflash2.choice", "reread section 1")
        expect(isinstance(fixes, dict), 'fixes is a dictionary {"path selector": ..., "local mixing": ...}')
        keys = {str(k).strip().lower() for k in fixes}
        expect(
            keys == {"path selector", "local mixing"},
            'use exactly the keys "path selector" and "local mixing"',
        )
        got = {str(k).strip().lower(): str(v).strip().lower() for k, v in fixes.items()}
        for part, problem in got.items():
            expect(problem in PROBLEMS, f"{part}: choose one of {PROBLEMS}")
        for part in ("path selector", "local mixing"):
            key = f"fixes.{part}"
            expect(_expected.right(key, got[part]), _expected.hint(key, got[part]) or f"{part}: not that one")

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
        hint = _expected.hint("walk.path", tuple(got))
        expect(hint is None, hint)
        for t, tok in enumerate(got):
            candidates = SELECTOR_EXAMPLE["candidates"][t]
            expect(tok in candidates, f"row {t + 1}: {tok!r} is not among its candidates {candidates}")
        for t in range(3):  # rows before t are right when row t is checked: its predecessor is got[t - 1]
            expect(
                _expected.right(f"walk.{t + 1}", got[t]),
                f"row {t + 1}: recompute U + compat[{(['__init__'] + got)[t]!r}][b] for its three candidates",
            )

    return verdict(name, path, cases)


# ------------------------------------------------------------ exercise 3: two-tap mixing
def _tap_cases():
    g = torch.Generator().manual_seed(seed(11))
    return [
        (torch.randn(n, d, generator=g), torch.randn(n, d, generator=g), torch.randn(n, d, generator=g), B)
        for n, d, B in ((4, 3, 4), (8, 5, 4), (9, 2, 3), (6, 4, 1), (10, 3, 5))
    ]


def check_two_tap(fn) -> str:
    """fn(x [n, d], k0 [n, d], k1 [n, d], block_size) -> y [n, d]: rows are consecutive blocks of
    block_size; y_t = k0_t * x_t + k1_t * x_{t-1}, with x_{t-1} read as zero at the first row of a block."""

    def cases(fn):
        for x, k0, k1, B in _tap_cases():
            want = _expected.two_tap(x, k0, k1, B)
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
