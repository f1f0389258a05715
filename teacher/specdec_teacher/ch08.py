"""Chapter 08's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch08.py)."""

from __future__ import annotations

import math

import torch

from specdec_course.checks.ch08 import _colleague_rerank


def cumulative(parents, logp):
    score = []
    for i, parent in enumerate(parents):
        score.append(logp[i] + (score[parent] if parent >= 0 else 0.0))
    return score


def rerank(parents, logp, total):
    score = cumulative(parents, logp)
    order = sorted(range(len(parents)), key=lambda i: (-score[i], i))
    return sorted(order[:total])


def next_frontier(scores, child_logp, k):
    cumulative = torch.as_tensor(scores, dtype=torch.float64)[:, None] + torch.as_tensor(
        child_logp, dtype=torch.float64
    )
    return sorted(cumulative.flatten().topk(k).indices.tolist())


def tree_value(parents, conf):
    reach = []
    for i, parent in enumerate(parents):
        reach.append(conf[i] * (reach[parent] if parent >= 0 else 1.0))
    return 1.0 + sum(reach)


REFERENCE = {
    "check_rerank": rerank,
    "check_next_frontier": next_frontier,
    "check_tree_value": tree_value,
}


WRONG = {
    "check_rerank": [
        _colleague_rerank,  # the notebook's colleague: multiplies log-probabilities along a path
        lambda parents, logp, total: sorted(
            sorted(range(len(logp)), key=lambda i: -logp[i])[:total]
        ),  # local
        lambda parents, logp, total: list(range(total)),  # first recorded
        lambda parents, logp, total: rerank(parents, logp, total)[::-1],  # children first
        lambda parents, logp, total: rerank(parents, [-x for x in logp], total),  # least likely
        lambda parents, logp, total: rerank(parents, logp, total + 1)[: total + 1],  # one too many
    ],
    "check_next_frontier": [
        lambda scores, child, k: [r * k for r in range(k)],  # best child of each node
        lambda scores, child, k: sorted(
            torch.as_tensor(child).flatten().topk(k).indices.tolist()
        ),  # no scores
        lambda scores, child, k: sorted(
            (torch.as_tensor(scores)[:, None] + torch.as_tensor(child))
            .flatten()
            .topk(k, largest=False)
            .indices.tolist()
        ),  # the worst
        lambda scores, child, k: list(range(k)),  # the first node's children
        lambda scores, child, k: next_frontier(scores, child, k)[:-1],  # one too few
    ],
    "check_tree_value": [
        lambda parents, conf: 1 + sum(conf),  # treats every node as tried
        lambda parents, conf: tree_value(parents, conf) - 1,  # forgets the target's token
        lambda parents, conf: 1 + math.prod(conf),  # all nodes at once
        lambda parents, conf: sum(conf) / len(conf) + 1,  # the mean confidence
        lambda parents, conf: 1 + max(tree_value(parents, conf) - 1, 0) / len(conf),  # per node
    ],
}
