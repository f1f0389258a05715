"""Fresh references for the proposer contract (hand-written support code, used by the tests).

The contract (`Proposer`'s docstring, chapter 02) asks that at T = 0 every drafted node be exactly what
the method's drafter computes from a FRESH, teacher-forced pass over the committed text: no cache, the
target's features recomputed, the tree's own ancestors as context. A caching slip (a stale key, a
feature one position off) can be lossless, so greedy equality alone cannot see it; this can.

Each reference has the signature `fresh(proposer, target, tokens, tree) -> [(logits, rank), ...]`, one
pair per node of `tree` in order: node i's token must be the rank-`rank` choice of `logits` (its rank
among its siblings, 0 for a chain). Each method names its reference in its registry entry
(`methods.register(..., fresh_draft=...)`), and `tests/test_contract.py` checks every round of every
registered method with `check_draft_is_fresh`.
"""

from __future__ import annotations

import torch

from specdec_lib import hf


def last_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """A causal LM's logits after `ids`, from scratch (no cache)."""
    return hf.forward(model, ids).logits[-1]


def fresh_chain(prop, target, tokens, tree):
    """A draft model's chain: node i is the argmax after the committed text and nodes 0 .. i - 1."""
    ext = torch.cat([tokens, tree.tokens])
    return [(last_logits(prop.draft, ext[: len(tokens) + i]), 0) for i in range(len(tree))]


def fresh_tree(prop, target, tokens, tree):
    """A draft model's tree: node i is its parent's rank-r child after the committed text and its path."""
    kids, out = tree.children(), []
    for i, parent in enumerate(tree.parents.tolist()):
        context = torch.cat([tokens, tree.tokens[tree.path_to(parent)]])
        out.append((last_logits(prop.draft, context), kids[parent].index(i)))
    return out


def fresh_medusa(prop, target, tokens, tree):
    """Medusa: head d's logits from the target's last hidden state at the position that chose the
    pending token; a node (r_1 .. r_d) is head d's rank-r_d token."""
    h = hf.hidden_states(target, tokens[None, :-1], (-1,))[-1][0, -1]
    logits = prop.heads(h).float()
    choices = [c for c in prop.choices if len(c) <= int(tree.depth().max())]
    return [(logits[len(c) - 1], c[-1]) for c in choices]


def fresh_mtp(prop, target, tokens, tree):
    """MTP: the target's features over positions 0 .. n - 1 (n: the pending token), then every block run
    over all of them, teacher-forced along the proposer's own drafts."""
    mtp, n = prop.mtp, len(tokens) - 1
    h = hf.hidden_states(target, tokens[None, :-1], (mtp.feature_layer,))[mtp.feature_layer][0]
    positions, out = torch.arange(n), []
    ext = torch.cat([tokens, tree.tokens])
    for k in range(1, len(tree) + 1):
        if prop.sequential:  # module k at position j reads h^{k-1}_j and the token at j + k
            h = mtp.mtp[k - 1](h, mtp.embed(ext[k : k + n]), positions)
            out.append((mtp.logits(k, h[-1]), 0))
        else:  # head k reads the trunk features only
            out.append((mtp.logits(k, mtp.heads[k - 1](h, positions)[-1]), 0))
    return out


def fresh_eagle_logits(drafter, target, tokens, path):
    """An EAGLE (or EAGLE-3) drafter's logits after the committed `tokens` (last one pending) and a draft
    `path` of token ids, from scratch: the target's features over the committed text (position j reads
    [e(t_{j+1}) ; f_j]), then each drafted token paired with the drafter's own previous guess; no cache."""
    n = len(tokens) - 1
    hidden = hf.hidden_states(target, tokens[None, :-1], drafter.feature_layers)
    feats, ahead = drafter.fuse(hidden)[0], tokens[1:]  # EAGLE: the last layer; EAGLE-3: three, fused
    guess = drafter(feats, ahead, torch.arange(n))[-1]  # f^_n, the root's guessed feature
    for t in path:
        feats, ahead = torch.cat([feats, guess[None]]), torch.cat([ahead, ahead.new_tensor([int(t)])])
        guess = drafter(feats, ahead, torch.arange(len(ahead)))[-1]
    return drafter.logits(guess)


def fresh_eagle(prop, target, tokens, tree):
    """EAGLE-1/2/3: node i is its parent's rank-r child of the drafter run from scratch along its path;
    a static tree (EAGLE-1) must also be exactly its rank paths that fit in the tree's depth."""
    kids = tree.children()
    if hasattr(prop, "choices"):
        ranks = []
        for i, parent in enumerate(tree.parents.tolist()):
            ranks.append((ranks[parent] if parent >= 0 else ()) + (kids[parent].index(i),))
        want = [c for c in prop.choices if len(c) <= int(tree.depth().max())]
        assert sorted(ranks) == sorted(want), f"eagle drafted the rank paths {ranks}, not its tree {want}"
    return [
        (
            fresh_eagle_logits(prop.drafter, target, tokens, tree.tokens[tree.path_to(parent)]),
            kids[parent].index(i),
        )
        for i, parent in enumerate(tree.parents.tolist())
    ]


def fresh_ngram(prop, target, tokens, tree):
    """Prompt lookup in plain Python: the latest earlier occurrence of the longest suffix (max_ngram
    tokens, then fewer) that occurred before, and what followed it."""
    seq, want = tokens.tolist(), None
    for n in range(min(prop.max_ngram, len(seq) - 1), 0, -1):
        starts = [i for i in range(len(seq) - n) if seq[i : i + n] == seq[-n:]]
        if starts:
            want = torch.tensor(seq[starts[-1] + n :][: len(tree)])
            break
    assert want is not None and want.tolist() == tree.tokens.tolist(), f"ngram drafted {tree.tokens.tolist()}"
    one_hot = torch.nn.functional.one_hot(want, hf.vocab_size(target)).float()
    return [(one_hot[i], 0) for i in range(len(tree))]


def fresh_block(prop, target, tokens):
    """A DFlash block from scratch: the context of positions 0 .. n - 1 from a fresh target pass, fresh
    caches, the whole block the proposer runs [pending, MASK, ...] at n .. n + R - 1 (R = its pass_rows,
    the trained block even when the chain is shorter) -> its rows' states [R, d]."""
    from specdec_lib.layers import KVCache

    dr, R, n = prop.drafter, prop.pass_rows, len(tokens) - 1
    ctx = dr.context(hf.hidden_states(target, tokens[None, :-1], dr.feature_layers))[0]
    caches = [KVCache() for _ in dr.layers]
    return dr(dr.block_ids(tokens[-1:], R)[0], torch.arange(n, n + R), caches, ctx, torch.arange(n))


def fresh_dflash(prop, target, tokens, tree):
    """DFlash: row i + 1 of the fresh block drafts node i, its own argmax (a chain)."""
    logits = prop.drafter.logits(fresh_block(prop, target, tokens))
    assert tree.parents.tolist() == list(range(-1, len(tree) - 1)), "dflash drafts a chain"
    return [(logits[i + 1], 0) for i in range(len(tree))]


def fresh_dflash2(prop, target, tokens, tree):
    """DFlash 2 with a selector: node i is the best-scoring candidate of fresh row i + 1 given the node
    before it (the anchor for node 0), scores S(a, b) on the candidates and -inf elsewhere."""
    sel = prop.drafter.selector
    if sel is None:
        return fresh_dflash(prop, target, tokens, tree)
    h = fresh_block(prop, target, tokens)[1 : len(tree) + 1]
    unary, cand = sel.candidates(prop.drafter.logits(h))
    before = torch.cat([tokens[-1:], tree.tokens[:-1]])  # the tree's own ancestors as context
    s = sel.scores(unary, cand, before, h)
    full = torch.full((len(tree), hf.vocab_size(target)), float("-inf")).scatter(-1, cand, s)
    return [(full[i], 0) for i in range(len(tree))]


def check_draft_is_fresh(fresh, prop, target, tokens, tree, tol: float = 1e-4, name: str = "") -> None:
    """Every node's token has exactly the logit of its rank-r choice in the fresh recomputation (by
    value, so near-ties cannot fool the check), and the proposer drafted as many nodes as the reference."""
    want = fresh(prop, target, tokens, tree)
    assert len(want) == len(tree), f"{name}: drafted {len(tree)} nodes, the fresh reference {len(want)}"
    for i, (logits, rank) in enumerate(want):
        kth = logits.topk(rank + 1).values[-1]
        got = logits[int(tree.tokens[i])]
        assert abs(float(got - kth)) <= tol, (
            f"{name}: node {i} is not the rank-{rank} choice of a fresh teacher-forced pass "
            f"(logit {float(got):.5f} vs {float(kth):.5f}): stale cache or features from the wrong position"
        )
