"""Chapter 12's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch12.py)."""

from __future__ import annotations

import torch

from specdec_course.checks._core import letter_of
from specdec_course.checks.ch12 import FAMILY, LOSSLESS_OPTIONS


def levers(tau, draft_ms, verify_ms, t1_ms):
    kc = draft_ms / t1_ms  # drafting, in units of one plain decoding step
    V = verify_ms / t1_ms - 1  # what verifying the tree costs beyond one plain step
    return tau / (1 + kc + V), tau / (1 + V), tau / (1 + kc)


def two_acceptances(p, q):
    p, q = torch.as_tensor(p).double(), torch.as_tensor(q).double()
    return float(torch.minimum(p, q).sum()), float(p[q.argmax()])


def tau_needed(kc, V, speedup):
    return speedup * (1 + kc + V)  # S = tau / (1 + kc + V), solved for tau


def free_budget(tokens_per_pass, ms, tolerance):
    base, best = ms[0], tokens_per_pass[0]
    for n, t in zip(tokens_per_pass, ms, strict=True):
        if t > (1 + tolerance) * base:
            break
        best = n
    return best


# exercise 5
_PASSES = {
    "chain": "depth",  # a draft model: one pass per drafted token
    "tree": "depth",  # one pass per level, all nodes of the level at once
    "medusa": "1",  # its heads run once per round, together, on the hidden state verification computed
    "mtp-sequential": "depth",  # module k reads module k - 1's output
    "eagle2": "depth",  # one drafter pass per tree level
    "dflash": "1",  # the whole block in one pass
    "dflash2": "1",  # still one pass; the walk over precomputed scores runs no network
    "ngram": "0",  # a copy: no model at all
}

# exercise 6: each option's text -> (lossless?, why)
_LOSSLESS_WHY = {  # option text -> (lossless?, why)
    "EAGLE-2's deterministic top-k children, verified by chapter 04's tree rule (q = None)": (
        True,
        "a point mass is a distribution too: accepted with p(x), removed from the residual (chapter 04)",
    ),
    "Medusa's heads, verified with typical acceptance instead of chapter 03's rule": (
        False,
        "typical acceptance accepts tokens by a threshold on the target's probability: the course's one "
        "opt-in lossy rule (chapter 05)",
    ),
    "DFlash rows, each drawn from its own q_t, with that q_t handed to verification": (
        True,
        "each row is judged with the q it was drawn from, conditioned on the rows before (chapter 10)",
    ),
    "a drafter sampling at T = 1 that hands verification its q reshaped to T = 0.7": (
        False,
        "the rule needs the q the token was actually drawn from, not a reshaped one (chapter 03; chapter 11, "
        "section 3)",
    ),
    "prompt lookup's copied tokens, verified as deterministic picks (q = None)": (
        True,
        "copies are deterministic picks, like EAGLE-2's children",
    ),
    "a chain kept while a fresh draw from the target equals it; that draw emitted at a miss": (
        True,
        "what is emitted at each position is always a draw from the target itself: the draft only decides "
        "how many such draws one pass can confirm",
    ),
    "top-p 0.9 applied to the drafter's q only, the target's p verified unfiltered": (
        False,
        "the sampling controls are applied to the TARGET before verification; what law does an "
        "unfiltered p produce? (chapters 01 and 03)",
    ),
}
_LOSSLESS = {letter_of(LOSSLESS_OPTIONS, t) for t, (lossless, _) in _LOSSLESS_WHY.items() if lossless}
_TEXTS = list(_LOSSLESS_WHY)

# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
VALUES = {
    **{f"passes.{m}": (_PASSES[m], None, []) for m in FAMILY},
    **{
        f"lossless.{letter_of(LOSSLESS_OPTIONS, text)}": (lossless, None, [(not lossless, why)])
        for text, (lossless, why) in _LOSSLESS_WHY.items()
    },
}


REFERENCE = {
    "check_levers": levers,
    "check_two_acceptances": two_acceptances,
    "check_tau_needed": tau_needed,
    "check_free_budget": free_budget,
    "check_draft_passes": dict(_PASSES),
    "check_lossless": set(_LOSSLESS),
}


WRONG = {
    "check_levers": [
        lambda tau, d, v, t1: (
            tau * t1 / (d + v),
            tau * t1 / v,
            tau * t1 / d if d else tau,
        ),  # free verify: no pass
        lambda tau, d, v, t1: (
            tau * t1 / (d + v),
            tau * t1 / v,
            tau * t1 / (d + v),
        ),  # free verification changes nothing
        lambda tau, d, v, t1: (
            tau / (d / t1 + v / t1),
            tau / (v / t1),
            tau / (d / t1),
        ),  # forgets the plain step
        lambda tau, d, v, t1: (
            tau * t1 / (d + v),
            tau * t1 / (t1 + d),
            tau * t1 / v,
        ),  # the two levers swapped
    ],
    "check_two_acceptances": [
        lambda p, q: (float((p * q).sum()), float(p[q.argmax()])),
        lambda p, q: (float(torch.minimum(p, q).sum()), float(q.max())),
        lambda p, q: (float(torch.minimum(p, q).sum()), float(min(1.0, p[q.argmax()] / q.max()))),
    ],
    "check_tau_needed": [
        lambda kc, V, s: s * (kc + V),  # forgot the plain step
        lambda kc, V, s: s * (1 + V),  # drafting taken as free
        lambda kc, V, s: s / (1 + kc + V),  # the model applied forwards, not solved for tau
        lambda kc, V, s: 1 + kc + V,  # break-even whatever the speedup asked for
    ],
    "check_free_budget": [
        lambda sizes, ms, tol: max(n for n, t in zip(sizes, ms, strict=True) if t <= (1 + tol) * ms[0]),
        lambda sizes, ms, tol: next(  # compares each pass with the one before it
            (sizes[i - 1] for i in range(1, len(ms)) if ms[i] > (1 + tol) * ms[i - 1]), sizes[-1]
        ),
        lambda sizes, ms, tol: next(  # strict: a pass exactly at the tolerance is already "too costly"
            (sizes[i - 1] for i in range(1, len(ms)) if ms[i] >= (1 + tol) * ms[0]), sizes[-1]
        ),
    ],
    "check_draft_passes": [
        {**_PASSES, "medusa": "depth"},
        {**_PASSES, "medusa": "0"},  # "no extra target pass" is not "no drafter pass"
        {**_PASSES, "dflash": "depth", "dflash2": "depth"},
        {**_PASSES, "dflash2": "depth"},
        {**_PASSES, "ngram": "1"},
        {**_PASSES, "eagle2": "1"},
        {m: v for m, v in _PASSES.items() if m != "tree"},
    ],
    "check_lossless": [
        *(_LOSSLESS | {letter} for letter in sorted(set(LOSSLESS_OPTIONS) - _LOSSLESS)),  # one lossy too many
        *(_LOSSLESS - {letter} for letter in sorted(_LOSSLESS)),  # one lossless missed
        {letter_of(LOSSLESS_OPTIONS, _TEXTS[2])},
    ],
}
