"""Chapter 04's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch04.py)."""

from __future__ import annotations

import torch

from specdec_course.checks.ch04 import MSS_P, _colleague_walk


def _depths(parents: list[int]) -> list[int]:
    depth = []
    for parent in parents:
        depth.append(1 if parent < 0 else depth[parent] + 1)
    return depth


def _path(parents: list[int], node: int) -> list[int]:
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


def ancestor_mask(parents):
    mask = torch.eye(len(parents), dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]  # the parent's row is complete: parents come first
    return mask


def misplaced_nodes(parents):
    """Node i sits at index prefix + 1 + i but belongs at prefix + depth(i)."""
    return [i for i, d in enumerate(_depths(parents)) if d != i + 1]


def crop_is_right(parents, accepted_node):
    """A crop keeps slots of nodes 0..m-1; the path's indices increase from the root down and end at the
    accepted node, so they are 0..m-1 exactly when the accepted node is m - 1."""
    return accepted_node == len(_path(parents, accepted_node)) - 1


def greedy_walk(tokens, parents, argmax):
    path, node = [], -1
    while True:
        want = argmax[node + 1]
        nxt = next((c for c, par in enumerate(parents) if par == node and tokens[c] == want), None)
        if nxt is None:
            return path, want
        path.append(nxt)
        node = nxt


REFERENCE = {
    "check_ancestor_mask": ancestor_mask,
    "check_misplaced_nodes": misplaced_nodes,
    "check_crop_is_right": crop_is_right,
    "check_greedy_walk": greedy_walk,
    "check_mss_example": (0.4, 0.3, (0.0, 0.0, 2 / 3, 1 / 3)),  # values: check_mss_example(*answer)
    "check_sibling_acceptance": (
        0.6,
        0.8 + 0.1 * 0.2 + 0.1 * (0.1 / 0.7),
    ),  # picks A, C; samples: see the note
}

# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
VALUES = {
    "mss.a": (0.4, 3, []),
    "mss.b": (
        0.3,
        3,
        [
            (
                0.5,
                "0.5 is the chance B is accepted once A has been rejected; multiply by the chance of that rejection",
            ),
            (
                0.18,
                "after rejecting A, P is updated to the residual norm(max(0, P - point mass on A)) before B is tried",
            ),
        ],
    ),
    "mss.correction": (
        (0.0, 0.0, 2 / 3, 1 / 3),
        3,
        [(MSS_P, "the correction is drawn from the updated P, not from the original p")],
    ),
    "siblings.picks": (
        0.6,
        3,
        [
            (0.8, "a pick x is accepted with the TARGET's probability P(x), not with the draft's q(x)"),
            (
                0.52,
                "after the first pick is rejected P is renormalised: the second is accepted with "
                "P(x2) / (1 - P(x1)), not P(x2)",
            ),
            (0.7, "the picks are the draft's top 2, by q (A and C), not the target's"),
        ],
    ),
    "siblings.samples": (
        0.8 + 0.1 * 0.2 + 0.1 * (0.1 / 0.7),
        3,
        [
            (
                0.8,
                "that is the first sample alone: add the chance that it is rejected and the second accepted",
            ),
            (
                0.82,
                "the second sample is drawn from q with the first token removed AND renormalised "
                "(q / (1 - q(x1))), not from q itself",
            ),
            (
                0.8 + 0.1 * 0.5 + 0.1 * (0.5 + 1 / 7),
                "after a rejection the second sample is verified against the residual norm(max(0, P - q)), "
                "not against p",
            ),
            (
                0.96,
                "the two tries are not independent with 0.8 each: after a rejection only the residual is "
                "left to accept",
            ),
        ],
    ),
}


def _parent_only_mask(parents):
    mask = torch.eye(len(parents), dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i, parent] = True
    return mask


def _first_child_walk(tokens, parents, argmax):
    path, node = [], -1
    while True:
        kids = [c for c, par in enumerate(parents) if par == node]
        if not kids or tokens[kids[0]] != argmax[node + 1]:
            return path, argmax[node + 1]
        path.append(kids[0])
        node = kids[0]


def _flat_index_walk(tokens, parents, argmax):  # chain thinking: compare node i with row i
    a = 0
    while a < len(tokens) and tokens[a] == argmax[a]:
        a += 1
    return list(range(a)), argmax[a]


def _root_row_walk(tokens, parents, argmax):  # always compares with the root's argmax
    path, node = [], -1
    while True:
        nxt = next((c for c, par in enumerate(parents) if par == node and tokens[c] == argmax[0]), None)
        if nxt is None:
            return path, argmax[node + 1]
        path.append(nxt)
        node = nxt


WRONG = {
    "check_ancestor_mask": [
        _parent_only_mask,  # only the parent, not the grandparents
        lambda parents: ancestor_mask(parents).T,  # descendants instead of ancestors
        lambda parents: torch.ones(len(parents), len(parents)).tril().bool(),  # plain causal
        lambda parents: ancestor_mask(parents) & ~torch.eye(len(parents), dtype=torch.bool),  # no self
        lambda parents: ancestor_mask(parents) | ancestor_mask(parents).T,  # symmetric
    ],
    "check_misplaced_nodes": [
        lambda parents: list(range(len(parents))),  # every node
        lambda parents: [
            i for i, p in enumerate(parents) if p != i - 1
        ],  # misses those below a misplaced one
        lambda parents: [
            i for i, d in enumerate(_depths(parents)) if d > 1
        ],  # every node below the first level
        lambda parents: [i for i, d in enumerate(_depths(parents)) if d == i + 1],  # the well-placed ones
    ],
    "check_crop_is_right": [
        lambda parents, node: True,  # a crop is always enough
        lambda parents, node: node == -1,  # only when nothing is accepted
        lambda parents, node: node < 0 or parents[node] == node - 1,  # checks the last step only
        lambda parents, node: all(p == i - 1 for i, p in enumerate(parents)),  # only in a chain
    ],
    "check_greedy_walk": [
        _first_child_walk,
        _flat_index_walk,
        _colleague_walk,  # the notebook's colleague: compares child c with the row AFTER c
        _root_row_walk,
        lambda tokens, parents, argmax: ([], argmax[0]),  # never accepts
    ],
    "check_mss_example": [
        (0.4, 0.5, (0.0, 0.0, 2 / 3, 1 / 3)),  # conditional instead of joint
        (0.4, 0.18, (0.0, 0.0, 2 / 3, 1 / 3)),  # no residual update
        (0.4, 0.3, (0.0, 0.0, 0.2, 0.1)),  # correction not normalised
        (0.4, 0.3, MSS_P),  # correction from the original p
        (0.6, 0.3, (0.0, 0.0, 2 / 3, 1 / 3)),  # rejection probability for A
        ("0.4?", 0.3, (0.0, 0.0, 2 / 3, 1 / 3)),  # not a number
    ],
    "check_sibling_acceptance": [
        (0.8, 0.8342857),  # the picks' draft probabilities q(A) + q(C) instead of p
        (0.52, 0.8342857),  # the second pick without renormalising P
        (0.7, 0.8342857),  # the target's top 2 instead of the draft's
        (0.6, 0.8),  # only the first sample
        (0.6, 0.82),  # the second sample from q itself (or q not renormalised)
        (
            0.6,
            0.8 + 0.1 * 0.5 + 0.1 * (0.5 + 1 / 7),
        ),  # the second sample verified against p, not the residual
        (0.6, 0.96),  # two independent tries at 0.8
        (0.6, 0.6),  # the picks' answer twice
        ("0.6?", 0.8342857),  # not a number
    ],
}
