"""Checkers for chapter 10 (DFlash). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
`REFERENCE` holds the reference solutions and `WRONG` plausible mistakes; tests/test_checks_common.py and
tests/test_checks_ch10.py run every checker on both.
"""

from __future__ import annotations

import math

import torch

from specdec_lib.checks._core import _ICON, NOT_ATTEMPTED, Incorrect, as_float, expect, verdict

# ------------------------------------------------------- exercise 1: what DFlash changes (the seeds' question)
DFLASH_OPTIONS = {
    "a": "it verifies the block with a cheaper rule than rejection sampling",
    "b": "it drafts a whole block in ONE forward pass of a light bidirectional drafter (reading the target's "
    "features through its keys and values), instead of one drafter pass per drafted token",
    "c": "it makes the target skip layers while drafting",
    "d": "it drafts a tree of candidates instead of a chain",
}


def _ref_rounds(k, block_size):
    return math.ceil(k / (block_size - 1))


def check_what_dflash_changes(answer=..., fn=None) -> str:
    """answer: the letter of the option in DFLASH_OPTIONS that says what DFlash changes about drafting.
    fn(k, block_size) -> the number of DFlash drafter passes needed to draft k tokens in total, if every
    drafted token is accepted (an EAGLE-style chain drafter would need k)."""
    name = "what DFlash changes"
    if answer is ... or fn is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — choose a letter and write the function")
        return NOT_ATTEMPTED

    def cases(fn):
        expect(isinstance(answer, str), f"answer with a letter among {sorted(DFLASH_OPTIONS)}")
        letter = answer.strip().lower().strip("()")
        expect(letter in DFLASH_OPTIONS, f"answer with a letter among {sorted(DFLASH_OPTIONS)}")
        expect(
            letter == "b",
            f"option {letter!r} is not it: verification is untouched, so what is left to change? (section 1)",
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


# ------------------------------------------------------------------ exercise 2: the training mask
def _ref_training_mask(anchors, length, block_size):
    A, B = len(anchors), block_size
    mask = torch.zeros(A * B, length + A * B, dtype=torch.bool)
    for a, anchor in enumerate(anchors):
        rows = slice(a * B, (a + 1) * B)
        mask[rows, :anchor] = True  # the context strictly before the anchor
        mask[rows, length + a * B : length + (a + 1) * B] = True  # its own block, both directions
    return mask


def check_training_mask(fn) -> str:
    """fn(anchors, length, block_size) -> a bool mask [A * B, length + A * B] for one training sequence of
    `length` positions with A blocks of B rows anchored at `anchors`. Keys are laid out [context | block 1
    | block 2 | ...]; row r belongs to block r // B."""

    def cases(fn):
        for anchors, length, B in (
            ([0], 4, 2),
            ([3], 8, 4),
            ([1, 5], 10, 3),
            ([0, 2, 6, 9], 14, 4),
            ([4, 7], 12, 5),
        ):
            want = _ref_training_mask(anchors, length, B)
            answer = fn(list(anchors), length, B)
            try:
                got = torch.as_tensor(answer).bool()
            except (TypeError, ValueError, RuntimeError) as e:
                raise Incorrect("return a boolean mask (tensor or nested lists)") from e
            context = f"anchors {anchors}, length {length}, block size {B}"
            expect(
                tuple(got.shape) == tuple(want.shape),
                f"{context}: shape {tuple(want.shape)}, got {tuple(got.shape)}",
            )
            ctx, blocks = got[:, :length], got[:, length:]
            for a, anchor in enumerate(anchors):
                row = ctx[a * B]
                expect(
                    anchor >= length or not bool(row[anchor]),
                    f"{context}: block {a} sees the context key AT its anchor {anchor}: at inference the anchor "
                    "is the pending token, and the target has not produced its feature yet",
                )
            expect(
                torch.equal(ctx, want[:, :length]),
                f"{context}: each block sees exactly the context before its anchor",
            )
            own = want[:, length:]
            expect(
                not (blocks & ~own).any(),
                f"{context}: a row sees another block's rows; at inference each block is alone with the context",
            )
            expect(
                torch.equal(blocks, own),
                f"{context}: inside its block a row sees EVERY row of the block (bidirectional), not only the "
                "earlier ones",
            )

    return verdict("DFlash training mask", fn, cases)


# ------------------------------------------------------------ exercise 3: the position-decayed loss
def _ref_block_loss(draft_logits, target_logits, gamma):
    draft_logits, target_logits = (
        torch.as_tensor(draft_logits).float(),
        torch.as_tensor(target_logits).float(),
    )
    ce = -(torch.softmax(target_logits, -1) * torch.log_softmax(draft_logits, -1)).sum(-1)  # [B - 1]
    w = torch.exp(-torch.arange(len(ce), dtype=torch.float32) / gamma)  # k = 1 .. B - 1: exp(-(k - 1)/gamma)
    return float((w * ce).sum() / w.sum())


def _loss_cases():
    g = torch.Generator().manual_seed(10)
    return [
        (torch.randn(rows, V, generator=g) * 2, torch.randn(rows, V, generator=g) * 3, gamma)
        for rows, V, gamma in ((3, 5, 7.0), (7, 6, 2.0), (15, 9, 7.0), (4, 4, 0.5))
    ]


def check_block_loss(fn) -> str:
    """fn(draft_logits [B - 1, V], target_logits [B - 1, V], gamma) -> DFlash's loss of one block: the soft
    cross-entropy of row k (k = 1 .. B - 1) against the target's distribution of its token, weighted by
    w_k = exp(-(k - 1) / gamma) and divided by the sum of the weights."""

    def cases(fn):
        for draft, target, gamma in _loss_cases():
            want = _ref_block_loss(draft, target, gamma)
            got = as_float(fn(draft.clone(), target.clone(), gamma), "the loss")
            context = f"{draft.shape[0]} rows, gamma {gamma}"
            ce = -(torch.softmax(target, -1) * torch.log_softmax(draft, -1)).sum(-1)
            w = torch.exp(-torch.arange(len(ce), dtype=torch.float32) / gamma)
            expect(
                abs(got - float(ce.mean())) > 1e-6 or abs(want - float(ce.mean())) < 1e-6,
                f"{context}: that is the plain mean; weight row k by exp(-(k - 1) / gamma)",
            )
            expect(
                abs(got - float((w * ce).sum())) > 1e-6,
                f"{context}: divide by the sum of the weights, so gamma changes the emphasis, not the scale",
            )
            expect(
                abs(got - float((w.flip(0) * ce).sum() / w.sum())) > 1e-6,
                f"{context}: the EARLY rows weigh most: a later row only counts if every earlier one is accepted",
            )
            expect(abs(got - want) < 1e-4, f"{context}: expected {want:.5f}, got {got:.5f}")

    return verdict("position-decayed block loss", fn, cases)


REFERENCE = {
    "check_what_dflash_changes": ("b", _ref_rounds),  # values: check_what_dflash_changes(*answer)
    "check_training_mask": _ref_training_mask,
    "check_block_loss": _ref_block_loss,
}


def _mask_variant(causal=False, inclusive=False, all_blocks=False):
    def mask(anchors, length, block_size):
        m = _ref_training_mask(anchors, length, block_size)
        B, n = block_size, len(anchors) * block_size
        for a, anchor in enumerate(anchors):
            if inclusive and anchor < length:
                m[a * B : (a + 1) * B, anchor] = True
        if causal:
            m[:, length:] &= torch.ones(n, n, dtype=torch.bool).tril()
        if all_blocks:
            m[:, length:] = True
        return m

    return mask


def _loss_variant(weights):
    def loss(draft_logits, target_logits, gamma):
        ce = -(
            torch.softmax(torch.as_tensor(target_logits), -1)
            * torch.log_softmax(torch.as_tensor(draft_logits), -1)
        ).sum(-1)
        return float(weights(ce, gamma))

    return loss


_W = lambda n, gamma: torch.exp(-torch.arange(n, dtype=torch.float32) / gamma)  # noqa: E731

WRONG = {
    "check_what_dflash_changes": [
        ("a", _ref_rounds),
        ("d", _ref_rounds),
        ("b", lambda k, B: k),  # one pass per token
        ("b", lambda k, B: math.ceil(k / B)),  # forgets the anchor row
        ("B ", lambda k, B: 1),  # one pass whatever k
    ],
    "check_training_mask": [
        _mask_variant(causal=True),
        _mask_variant(inclusive=True),
        _mask_variant(all_blocks=True),
        lambda anchors, length, B: _ref_training_mask([0] * len(anchors), length, B),  # no context
    ],
    "check_block_loss": [
        _loss_variant(lambda ce, g: ce.mean()),
        _loss_variant(lambda ce, g: (_W(len(ce), g) * ce).sum()),
        _loss_variant(lambda ce, g: (_W(len(ce), g).flip(0) * ce).sum() / _W(len(ce), g).sum()),
        _loss_variant(
            lambda ce, g: (_W(len(ce), 1 / g) * ce).sum() / _W(len(ce), 1 / g).sum()
        ),  # exp(-k gamma)
    ],
}
