"""Checkers for chapter 09 (EAGLE-3). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
`REFERENCE` holds the reference solutions and `WRONG` plausible mistakes; tests/test_checks_common.py runs
every checker on both.
"""

from __future__ import annotations

import torch

from specdec_lib.checks._core import Incorrect, as_float, as_int_list, expect, verdict


# ---------------------------------------------------------- exercise 1: the reduced vocabulary's map
def _ref_draft_vocab(counts, size):
    order = sorted(range(len(counts)), key=lambda v: (-counts[v], v))
    used = sorted(order[:size])
    return [u - i for i, u in enumerate(used)], [v in used for v in range(len(counts))]


def _vocab_cases():
    g = torch.Generator().manual_seed(9)
    out = [([5, 0, 9, 9, 1, 7], 3), ([1, 1, 1, 1], 2), ([0, 3, 0, 2, 8], 5), ([4, 2], 1)]
    for V, N in ((12, 5), (30, 9), (30, 29)):
        out.append((torch.randint(0, 8, (V,), generator=g).tolist(), N))
    return out


def check_draft_vocab(fn) -> str:
    """fn(counts, size) -> (d2t, t2d): the `size` most frequent ids (ties: the lower id) in increasing
    order are the draft vocabulary; d2t[i] = (target id of draft id i) - i, t2d[v] = is v in it."""

    def cases(fn):
        for counts, size in _vocab_cases():
            d2t_want, t2d_want = _ref_draft_vocab(counts, size)
            try:
                d2t, t2d = fn(list(counts), size)
            except (TypeError, ValueError) as e:
                raise Incorrect("return a pair (d2t, t2d)") from e
            d2t = as_int_list(d2t, "d2t")
            t2d = [bool(x) for x in as_int_list(t2d, "t2d")]
            context = f"counts {counts}, size {size}"
            expect(len(d2t) == size, f"{context}: d2t has one entry per DRAFT id ({size}), got {len(d2t)}")
            expect(len(t2d) == len(counts), f"{context}: t2d has one entry per TARGET id ({len(counts)})")
            used = [i + o for i, o in enumerate(d2t)]
            used_want = [i + o for i, o in enumerate(d2t_want)]
            expect(
                d2t == d2t_want or d2t != used_want,
                f"{context}: d2t holds OFFSETS (target id - draft id), not the target ids themselves",
            )
            expect(
                t2d == t2d_want, f"{context}: t2d should mark the {size} most frequent ids (ties: lower id)"
            )
            expect(
                used == sorted(used),
                f"{context}: keep the chosen ids in increasing order, so draft id i + d2t[i] is monotone",
            )
            expect(d2t == d2t_want, f"{context}: expected d2t {d2t_want}, got {d2t}")

    return verdict("reduced draft vocabulary", fn, cases)


# ---------------------------------------------------------- exercise 2: the training-time-test mask
def _ref_ttt_mask(T, s):
    mask = torch.zeros(T, (s + 1) * T, dtype=torch.bool)
    mask[:, :T] = torch.ones(T, T, dtype=torch.bool).tril()  # step 0: the true context, causal
    for t in range(1, s + 1):
        mask[torch.arange(T), t * T + torch.arange(T)] = True  # steps 1..s: only its own position
    return mask


def check_ttt_mask(fn) -> str:
    """fn(T, s) -> a bool mask [T, (s + 1) * T]: which keys the step-s query at position j may attend to.
    Keys are laid out step by step: key t * T + i is step t's key at position i (t = 0 .. s)."""

    def cases(fn):
        for T, s in ((1, 0), (3, 0), (3, 1), (4, 2), (6, 3), (5, 5)):
            want = _ref_ttt_mask(T, s)
            got = torch.as_tensor(fn(T, s)).bool()
            context = f"T = {T}, s = {s}"
            expect(
                tuple(got.shape) == tuple(want.shape),
                f"{context}: shape {tuple(want.shape)}, got {tuple(got.shape)}",
            )
            expect(
                torch.equal(got[:, :T], want[:, :T]),
                f"{context}: the step-0 keys (the true context) are seen causally: position j sees 0 .. j",
            )
            if s:
                wide = torch.zeros_like(want)
                for t in range(s + 1):
                    wide[:, t * T : (t + 1) * T] = torch.ones(T, T, dtype=torch.bool).tril()
                expect(
                    T == 1 or not torch.equal(got, wide),
                    f"{context}: a drafted step's key at position i < j belongs to ANOTHER context's chain: "
                    "position j sees only its own chain (the diagonal)",
                )
            expect(torch.equal(got, want), f"{context}: expected\n{want.int()}")

    return verdict("training-time-test attention", fn, cases)


# ---------------------------------------------------------------- exercise 3: the per-step loss
def _ref_step_loss(draft_logits, target_logits, used):
    draft_logits, target_logits = torch.as_tensor(draft_logits), torch.as_tensor(target_logits)
    used = torch.as_tensor(used)
    p = torch.softmax(target_logits[:, used], -1)
    inside = torch.zeros(target_logits.shape[-1], dtype=torch.bool)
    inside[used] = True
    keep = inside[target_logits.argmax(-1)].float()
    return float((-(p * torch.log_softmax(draft_logits, -1)).sum(-1) * keep).mean())


def _loss_cases():
    g = torch.Generator().manual_seed(4)
    out = []
    for n, V, used in ((3, 5, [0, 2, 3]), (6, 8, [1, 2, 5, 7]), (10, 12, [0, 1, 2, 3, 4, 5, 6, 7, 9])):
        target = torch.randn(n, V, generator=g) * 2
        target[0, used[0]] += 10  # one position surely inside
        outside = [v for v in range(V) if v not in used][0]
        target[1, outside] += 10  # and one surely outside the draft vocabulary
        out.append((torch.randn(n, len(used), generator=g), target, used))
    return out


def check_step_loss(fn) -> str:
    """fn(draft_logits [n, N], target_logits [n, V], used [N]) -> the loss of one step: the mean over the
    n positions of the soft cross-entropy between the target's distribution restricted to the draft ids
    `used` (renormalised there) and the drafter's, counting only positions whose target argmax is in
    `used`."""

    def cases(fn):
        for draft, target, used in _loss_cases():
            want = _ref_step_loss(draft, target, used)
            got = as_float(fn(draft.clone(), target.clone(), list(used)), "the loss")
            context = f"{draft.shape[0]} positions, draft ids {used}"
            p_full = torch.softmax(target, -1)[:, used]
            unnormalised = float(-(p_full * torch.log_softmax(draft, -1)).sum(-1).mean())
            no_mask = float(
                (-(torch.softmax(target[:, used], -1) * torch.log_softmax(draft, -1)).sum(-1)).mean()
            )
            expect(
                abs(got - want) < 1e-4 or abs(got - no_mask) > 1e-6,
                f"{context}: drop the positions whose target argmax has no draft id (the drafter could "
                "never propose it): multiply by that mask before averaging over ALL positions",
            )
            expect(
                abs(got - want) < 1e-4 or abs(got - unnormalised) > 1e-6,
                f"{context}: renormalise the target's distribution over the draft ids (softmax of the "
                "restricted logits)",
            )
            expect(abs(got - want) < 1e-4, f"{context}: expected {want:.5f}, got {got:.5f}")

    return verdict("EAGLE-3 step loss", fn, cases)


REFERENCE = {
    "check_draft_vocab": _ref_draft_vocab,
    "check_ttt_mask": _ref_ttt_mask,
    "check_step_loss": _ref_step_loss,
}


def _mask_all_causal(T, s):
    mask = torch.zeros(T, (s + 1) * T, dtype=torch.bool)
    for t in range(s + 1):
        mask[:, t * T : (t + 1) * T] = torch.ones(T, T, dtype=torch.bool).tril()
    return mask


def _loss_variant(mask: bool, renormalise: bool, hard: bool = False):
    def loss(draft_logits, target_logits, used):
        draft_logits, target_logits = torch.as_tensor(draft_logits), torch.as_tensor(target_logits)
        used = torch.as_tensor(used)
        if hard:
            p = torch.nn.functional.one_hot(target_logits[:, used].argmax(-1), len(used)).float()
        elif renormalise:
            p = torch.softmax(target_logits[:, used], -1)
        else:
            p = torch.softmax(target_logits, -1)[:, used]
        ce = -(p * torch.log_softmax(draft_logits, -1)).sum(-1)
        if mask:
            inside = torch.zeros(target_logits.shape[-1], dtype=torch.bool)
            inside[used] = True
            ce = ce * inside[target_logits.argmax(-1)].float()
        return float(ce.mean())

    return loss


WRONG = {
    "check_draft_vocab": [
        lambda counts, size: _ref_draft_vocab(counts, size)[::-1],  # the pair swapped
        lambda counts, size: (  # the ids themselves instead of offsets
            [i + o for i, o in enumerate(_ref_draft_vocab(counts, size)[0])],
            _ref_draft_vocab(counts, size)[1],
        ),
        lambda counts, size: _ref_draft_vocab([-c for c in counts], size),  # the rarest
        lambda counts, size: _ref_draft_vocab(list(range(len(counts), 0, -1)), size),  # the first ids
        lambda counts, size: _ref_draft_vocab(counts, max(size - 1, 1)),  # one short
    ],
    "check_ttt_mask": [
        _mask_all_causal,  # every step causal over everything
        lambda T, s: _ref_ttt_mask(T, 0).repeat(1, s + 1),  # the context mask copied to every step
        lambda T, s: torch.cat(
            [torch.ones(T, T, dtype=torch.bool)] + [torch.eye(T, dtype=torch.bool)] * s, 1
        ),
        lambda T, s: torch.cat([torch.eye(T, dtype=torch.bool)] * (s + 1), 1),  # no context
        lambda T, s: _ref_ttt_mask(T, s)[:, :T],  # step 0 only
    ],
    "check_step_loss": [
        _loss_variant(mask=False, renormalise=True),
        _loss_variant(mask=True, renormalise=False),
        _loss_variant(mask=True, renormalise=True, hard=True),
        lambda d, t, u: -_ref_step_loss(d, t, u),
        lambda d, t, u: _loss_variant(mask=False, renormalise=False)(d, t, u),
    ],
}
