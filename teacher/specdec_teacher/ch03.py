"""Chapter 03's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch03.py)."""

from __future__ import annotations

import torch


def round_length_law(betas):
    """P(a round emits n tokens), n = 1 .. k + 1: drafts 1..n-1 accepted, draft n rejected (or all k kept)."""
    law, alive = [], 1.0
    for b in betas:
        law.append(alive * (1 - b))
        alive *= b
    return torch.tensor([*law, alive], dtype=torch.float64)


def colleague_law(p, q):
    """The colleague's 'residual' |p - q| sums to 2 TV = 2 (1 - beta), so a rejection (probability 1 - beta)
    hands each token |p - q| / 2: min(p, q) + |p - q| / 2 = (p + q) / 2, the average of target and draft."""
    return (p + q) / 2


def verify_one(p, q, x, u):
    return x if u * q[x] < p[x] else None  # accept with probability min(1, p(x)/q(x))


REFERENCE = {
    "check_round_length_law": round_length_law,
    "check_colleague_law": colleague_law,
    "check_seed_question": (0.7, (1.0, 0.0, 0.0)),  # values, not a function: check_seed_question(*answer)
    "check_verify_one": verify_one,
}

# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
VALUES = {
    "seed.beta": (0.7, 3, [(0.3, "that is the total variation distance, the chance of a rejection")]),
    "seed.residual": (
        (1.0, 0.0, 0.0),
        3,
        [
            (
                (0.3, 0.0, 0.0),
                "that is max(0, p - q) before normalising: divide by its sum so the residual sums to 1",
            )
        ],
    ),
}

WRONG = {
    "check_round_length_law": [
        lambda betas: [1 - b for b in betas] + [1.0],  # forgets that depth n needs depths 1..n-1 first
        lambda betas: round_length_law(betas)[:-1].tolist() + [0.0],  # forgets the round that keeps all k
        lambda betas: round_length_law(betas).flip(0),  # counts from the wrong end
        lambda betas: (
            round_length_law([*betas[1:], betas[0]]) if len(betas) > 1 else [0.5, 0.5]
        ),  # misaligned
        lambda betas: (
            torch.cumprod(torch.tensor([1.0, *betas]), 0)
            / torch.cumprod(torch.tensor([1.0, *betas]), 0).sum()
        ),  # the survival curve, normalised
    ],
    "check_colleague_law": [
        lambda p, q: p,  # assumes the rule is still exact
        lambda p, q: q,  # the draft's own law
        lambda p, q: (p - q).abs() / (p - q).abs().sum(),  # the 'residual' alone
        lambda p, q: torch.minimum(p, q) + (p - q).abs(),  # forgets the rejection's probability
        lambda p, q: torch.maximum(p, q) / torch.maximum(p, q).sum(),  # max(p, q), normalised
    ],
    "check_seed_question": [
        (0.3, (1.0, 0.0, 0.0)),  # beta confused with the rejection chance
        (0.7, (0.3, 0.0, 0.0)),  # residual not normalised
        (0.7, (0.0, 0.0, 1.0)),  # the over-proposed token
        (0.7, (0.6, 0.3, 0.1)),  # the target itself
        ("0.7?", (1.0, 0.0, 0.0)),  # not a number
    ],
    "check_verify_one": [
        lambda p, q, x, u: x if u < p[x] else None,  # ignores q
        lambda p, q, x, u: x if u < q[x] / p[x] else None,  # ratio upside down
        lambda p, q, x, u: x if u > p[x] / q[x] else None,  # comparison flipped
        lambda p, q, x, u: x if p[x] >= q[x] else None,  # ignores the coin
        lambda p, q, x, u: int(p.argmax()) if u * q[x] >= p[x] else x,  # never reports a rejection
    ],
}
