"""Checkers for chapter 08 (EAGLE-2). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import math

import torch

from specdec_course.checks._core import Answers, as_float, as_int_list, expect, seed, verdict

_expected = Answers("ch08")


# --------------------------------------------------------------- exercise 1: the rerank, by hand
def _recorded_trees():
    """(parents, log-probabilities) of recorded candidates, in recording order (parents first)."""
    ln = math.log
    out = [
        ([-1, -1, 0, 0, 1, 1], [ln(0.6), ln(0.3), ln(0.9), ln(0.05), ln(0.5), ln(0.4)]),
        ([-1, -1, -1, 0, 0, 2, 3], [ln(0.5), ln(0.3), ln(0.1), ln(0.2), ln(0.7), ln(0.9), ln(0.8)]),
    ]
    g = torch.Generator().manual_seed(seed(0))
    for n in (8, 12, 20):
        parents = [-1, -1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(2, n)]
        p = torch.rand(n, generator=g) * 0.9 + 0.05
        out.append((parents, p.log().tolist()))
    return out


def _colleague_rerank(parents, logp, total):
    """The notebook's `colleague_rerank`, bug included (it is shown to the learner)."""
    score = []
    for i, parent in enumerate(parents):
        score.append(logp[i] * (score[parent] if parent >= 0 else 1.0))
    return sorted(sorted(range(len(parents)), key=lambda i: (-score[i], i))[:total])


def check_rerank(fn) -> str:
    """fn(parents, logp, total) -> the indices of the `total` recorded nodes EAGLE-2 keeps, in recording
    order. parents[i]: node i's parent (-1: the root), recorded before i; logp[i]: the drafter's
    log-probability of node i's token given its parent. A node's score is the sum of logp along its path."""

    def cases(fn):
        for parents, logp in _recorded_trees():
            for total in (1, 2, 3, len(parents) // 2, len(parents)):
                want = _expected.rerank(parents, logp, total)
                got = as_int_list(fn(list(parents), list(logp), total), "the chosen indices")
                context = f"parents {parents}, total {total}"
                expect(len(got) == total, f"{context}: keep exactly {total} nodes, you kept {len(got)}")
                by_local = sorted(sorted(range(len(logp)), key=lambda i: (-logp[i], i))[:total])
                expect(
                    sorted(got) == want or sorted(got) != by_local,
                    f"{context}: rank by the CUMULATIVE score (the sum of log-probabilities from the root), "
                    "not by each node's own confidence: a confident child of an unlikely parent is unlikely",
                )
                expect(
                    sorted(got) == want or sorted(got) != _colleague_rerank(parents, logp, total),
                    f"{context}: that is the colleague's answer: log-probabilities ADD along a path (their "
                    "product is positive, so deep nodes would outscore their own parents)",
                )
                expect(
                    all(parents[i] < 0 or parents[i] in got for i in got),
                    f"{context}: your choice {sorted(got)} has a node without its parent; the tree would "
                    "not be connected",
                )
                expect(sorted(got) == want, f"{context}: expected {want}, got {sorted(got)}")
                expect(
                    got == want, f"{context}: return them in recording order (sorted), so parents come first"
                )

    return verdict("EAGLE-2 rerank", fn, cases)


# ------------------------------------------------------------- exercise 2: the next frontier
def _frontier_cases():
    g = torch.Generator().manual_seed(seed(2))
    out = []
    for k in (2, 3, 4):
        scores = (-torch.rand(k, generator=g) * 3).tolist()
        child = torch.log_softmax(torch.randn(k, k, generator=g) * 2, -1).sort(-1, descending=True).values
        out.append((scores, child.tolist(), k))
    out.append(([-0.1, -3.0], [[-0.2, -0.3], [-0.01, -0.02]], 2))  # both winners under the first parent
    return out


def check_next_frontier(fn) -> str:
    """fn(scores [k], child_logp [k, k], k) -> the k flat indices (row * k + column, sorted) of the children
    that become the next frontier: scores[r] is frontier node r's cumulative score, child_logp[r][c] the
    log-probability of its c-th best child."""

    def cases(fn):
        for scores, child, k in _frontier_cases():
            want = _expected.next_frontier(scores, child, k)
            got = sorted(as_int_list(fn(list(scores), [list(r) for r in child], k), "the frontier"))
            context = f"scores {[round(s, 2) for s in scores]}, k = {k}"
            expect(len(got) == k, f"{context}: the frontier keeps exactly k = {k} nodes")
            per_parent = sorted(r * k for r in range(k))
            expect(
                got == want or got != per_parent,
                f"{context}: not the best child of EVERY node: the k best of all k^2 children, globally",
            )
            local = sorted(torch.as_tensor(child).flatten().topk(k).indices.tolist())
            expect(
                got == want or got != local,
                f"{context}: add each parent's cumulative score: a child's score is the whole path's",
            )
            expect(got == want, f"{context}: expected {want}, got {got}")

    return verdict("EAGLE-2 next frontier", fn, cases)


# ------------------------------------------- exercise 3: what a calibrated tree is worth per round
def _value_cases():
    g = torch.Generator().manual_seed(seed(3))
    out = [([-1], [0.5]), ([-1, 0, 1], [0.9, 0.8, 0.5]), ([-1, -1, 0, 0, 1], [0.6, 0.3, 0.5, 0.2, 0.9])]
    for n in (6, 11, 17):
        parents = [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)]
        out.append((parents, (torch.rand(n, generator=g) * 0.9 + 0.05).tolist()))
    return out


def check_tree_value(fn) -> str:
    """fn(parents, conf) -> the expected number of tokens a round commits if the drafter is calibrated:
    node i (parent parents[i], -1 = the root; parents come first) is accepted given its parent was with
    probability conf[i], and the target always adds one token of its own."""

    def cases(fn):
        for parents, conf in _value_cases():
            want = _expected.tree_value(parents, conf)
            got = as_float(fn(list(parents), list(conf)), "the expected tokens per round")
            context = f"parents {parents}"
            expect(
                abs(got - (want - 1)) > 1e-9 or abs(want - 1) < 1e-12,
                f"{context}: add the target's own token (the bonus or correction): every round commits it",
            )
            expect(
                abs(got - want) < 1e-6 or abs(got - (1 + sum(conf))) > 1e-9,
                f"{context}: a node is accepted only if its whole path is: multiply the confidences along the "
                "path, then add over the nodes",
            )
            expect(abs(got - want) < 1e-6, f"{context}: expected {want:.6f}, got {got:.6f}")

    return verdict("value of a calibrated tree", fn, cases)
