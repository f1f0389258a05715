"""The proposer contract's check of fresh drafts (hand-written support code, used by the tests).

The contract (`Proposer`'s docstring, chapter 02) asks that at T = 0 every drafted node be exactly what
the method's drafter computes from a FRESH, teacher-forced pass over the committed text: no cache, the
target's features recomputed, the tree's own ancestors as context. A caching slip (a stale key, a
feature one position off) can be lossless, so greedy equality alone cannot see it; this can.

Each proposer class computes that reference itself, beside its drafting code: its method
`fresh_draft(target, tokens, tree) -> [(logits, rank), ...]`, one pair per node of `tree` in order: node
i's token must be the rank-`rank` choice of `logits` (its rank among its siblings, 0 for a chain).
`tests/test_contract.py` checks every round of every registered method with `check_draft_is_fresh`, which
reads nothing of the proposer but that method.
"""

from __future__ import annotations


def check_draft_is_fresh(prop, target, tokens, tree, tol: float = 1e-4, name: str = "") -> None:
    """Every node's token has exactly the logit of its rank-r choice in the proposer's fresh recomputation
    (`prop.fresh_draft`; by value, so near-ties cannot fool the check), and the proposer drafted as many
    nodes as the reference."""
    name = name or type(prop).__name__
    fresh = getattr(prop, "fresh_draft", None)
    if not callable(fresh):
        raise TypeError(
            f"{name}: {type(prop).__name__} has no fresh_draft(target, tokens, tree) method, the reference "
            "the proposer contract test needs (see the Proposer docstring, chapter 02)"
        )
    want = fresh(target, tokens, tree)
    assert len(want) == len(tree), f"{name}: drafted {len(tree)} nodes, the fresh reference {len(want)}"
    for i, (logits, rank) in enumerate(want):
        kth = logits.topk(rank + 1).values[-1]
        got = logits[int(tree.tokens[i])]
        assert abs(float(got - kth)) <= tol, (
            f"{name}: node {i} is not the rank-{rank} choice of a fresh teacher-forced pass "
            f"(logit {float(got):.5f} vs {float(kth):.5f}): stale cache or features from the wrong position"
        )
