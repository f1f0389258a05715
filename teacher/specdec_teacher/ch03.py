"""Chapter 03's reference solutions and planted mistakes (the teacher's side of specdec_lib/checks/ch03.py)."""

from __future__ import annotations

import torch


def acceptance(p, q):
    return torch.minimum(p, q).sum()


def residual(p, q):
    r = (p - q).clamp(min=0)
    return r / r.sum()


def verify_one(p, q, x, u):
    return x if u * q[x] < p[x] else None  # accept with probability min(1, p(x)/q(x))


REFERENCE = {
    "check_acceptance_probability": acceptance,
    "check_residual": residual,
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
    "check_acceptance_probability": [
        lambda p, q: 0.5 * (p - q).abs().sum(),  # the total variation distance: the rejection chance
        lambda p, q: (p * q).sum(),  # the chance that two independent draws agree
        lambda p, q: torch.maximum(p, q).sum(),  # max instead of min
        lambda p, q: torch.minimum(p, q).mean(),  # mean instead of sum
    ],
    "check_residual": [
        lambda p, q: (p - q).clamp(min=0),  # not normalised
        lambda p, q: residual(q, p),  # the tokens the draft over-proposes
        lambda p, q: (p - q).abs() / (p - q).abs().sum(),  # |p - q|
        lambda p, q: p,  # resample from the target itself
        lambda p, q: (p - q) / (p - q).sum(),  # no clamp: divides by zero
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
