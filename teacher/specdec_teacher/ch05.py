"""Chapter 05's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch05.py)."""

from __future__ import annotations

import math

import torch

from specdec_course.checks.ch05 import _colleague_accepted


def entropy(p: torch.Tensor) -> float:
    return float(-(p * p.clamp_min(1e-30).log()).sum())


def threshold(p: torch.Tensor, epsilon: float, delta: float) -> float:
    return min(epsilon, delta * math.exp(-entropy(p)))


def head_labels(tokens, k):
    return {t: tokens[t + 1 + k] for t in range(len(tokens) - 1 - k)}


def expected_accepted(acc, choices):
    return sum(math.prod(float(acc[j, r]) for j, r in enumerate(c)) for c in choices)


def typical_accept(p, x, epsilon=0.09, delta=0.3):
    return bool(float(p[x]) > threshold(p, epsilon, delta))


def typical_law(p, children, epsilon=0.09, delta=0.3):
    bar = threshold(p, epsilon, delta)
    accepted = [x for x in children if float(p[x]) > bar]
    if not accepted:
        return p.clone()
    law = torch.zeros_like(p)
    law[max(accepted, key=lambda x: float(p[x]))] = 1.0
    return law


REFERENCE = {
    "check_head_labels": head_labels,
    "check_expected_accepted": expected_accepted,
    "check_typical_accept": typical_accept,
    "check_typical_law": typical_law,
}


def _typical_bits(p, x, epsilon=0.09, delta=0.3):
    entropy = float(-(p * p.clamp_min(1e-30).log2()).sum())  # bits instead of nats
    return bool(float(p[x]) > min(epsilon, delta * math.exp(-entropy)))


def _first_accepted_law(p, children, epsilon=0.09, delta=0.3):  # ignores the tie-break
    law = torch.zeros_like(p)
    for x in children:
        if typical_accept(p, x, epsilon, delta):
            law[x] = 1.0
            return law
    return p.clone()


WRONG = {
    "check_head_labels": [
        lambda tokens, k: {t: tokens[t + k] for t in range(len(tokens) - k)},  # one too close
        lambda tokens, k: {t: tokens[t + 2 + k] for t in range(len(tokens) - 2 - k)},  # one too far
        lambda tokens, k: {t: tokens[t + 1 + k] for t in range(len(tokens) - 2 - k)},  # drops the last one
        lambda tokens, k: {t: tokens[min(t + 1 + k, len(tokens) - 1)] for t in range(len(tokens))},  # pads
        lambda tokens, k: {t: tokens[t - 1 - k] for t in range(1 + k, len(tokens))},  # backwards
    ],
    "check_expected_accepted": [
        lambda acc, choices: 1 + expected_accepted(acc, choices),  # tau, not accepted drafts
        lambda acc, choices: sum(float(acc[len(c) - 1, c[-1]]) for c in choices),  # no product
        lambda acc, choices: max(expected_accepted(acc, [c]) for c in choices),  # best node only
        _colleague_accepted,  # the notebook's colleague: the best node of each depth, not their sum
        lambda acc, choices: sum(  # top-n (cumulative) accuracy instead of per-rank
            math.prod(float(acc[j, : r + 1].sum()) for j, r in enumerate(c)) for c in choices
        ),
        lambda acc, choices: sum(  # every guess judged by head 1
            math.prod(float(acc[0, r]) for r in c) for c in choices
        ),
    ],
    "check_typical_accept": [
        lambda p, x, e=0.09, d=0.3: bool(float(p[x]) > max(e, d * math.exp(-entropy(p)))),  # max
        lambda p, x, e=0.09, d=0.3: bool(float(p[x]) > min(e, d * math.exp(entropy(p)))),  # exp(+H)
        lambda p, x, e=0.09, d=0.3: bool(float(p[x]) > e),  # no entropy term
        lambda p, x, e=0.09, d=0.3: bool(float(p[x]) > d * math.exp(-entropy(p))),  # no cap
        _typical_bits,
    ],
    "check_typical_law": [
        lambda p, children, e=0.09, d=0.3: p.clone(),  # as if it were lossless
        _first_accepted_law,
        lambda p, children, e=0.09, d=0.3: typical_law(p, children, e, d) * 0.5 + p * 0.5,  # a mix
        lambda p, children, e=0.09, d=0.3: typical_law(p, children, 0.3, 0.3),  # wrong bar
    ],
}
