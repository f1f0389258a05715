"""EAGLE (chapter 07) and EAGLE-2 (chapter 08): the pieces the proposer contract test does not see."""

import itertools
import math

import pytest
import torch
from conftest import tiny_model

from specdec_lib import hf
from specdec_lib.autoregressive import SamplingParams, process_logits
from specdec_lib.eagle import (
    EagleDrafter,
    EagleProposer,
    eagle_choices,
    eagle_loss,
    fresh_eagle_logits,
    load_eagle,
)
from specdec_lib.eagle2 import Eagle2Proposer, rerank
from specdec_lib.speculative import DraftTree


@pytest.fixture(scope="module")
def target():
    return tiny_model(vocab=16, hidden=32, layers=2, seed=0, scale=3.0)


def test_drafter_layout_and_shared_weights(target):
    dr = EagleDrafter(target)
    d = target.config.hidden_size
    assert dr.fc.in_features == 2 * d and EagleDrafter(target, use_token=False).fc.in_features == d
    assert isinstance(dr.block.input_layernorm, torch.nn.Identity)
    own = {p.data_ptr() for p in dr.parameters()}
    assert (
        hf.lm_head(target).weight.data_ptr() not in own and hf.embeddings(target).weight.data_ptr() not in own
    )
    assert not any(k.startswith("target_parts") for k in dr.state_dict())
    f = torch.randn(5, d)
    out = dr(f, torch.arange(5), torch.arange(5))
    assert out.shape == (5, d) and dr.logits(out).dtype == torch.float32


def test_the_token_changes_the_guess_only_with_use_token(target):
    d = target.config.hidden_size
    f = torch.randn(4, d)
    a, b = torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 3, 9])
    for use_token, differs in ((True, True), (False, False)):
        dr = EagleDrafter(target, use_token=use_token)
        torch.nn.init.normal_(dr.fc.weight, std=0.1)
        assert (not torch.allclose(dr(f, a, torch.arange(4))[-1], dr(f, b, torch.arange(4))[-1])) == differs


def test_loss_aligns_feature_i_with_token_i_plus_1_and_targets_feature_i_plus_1(target):
    torch.manual_seed(0)
    dr = EagleDrafter(target)
    torch.nn.init.normal_(dr.fc.weight, std=0.1)
    ids = torch.randint(0, 16, (2, 7))
    f = hf.hidden_states(target, ids, (-1,))[-1].detach()
    loss, (reg, ce) = eagle_loss(dr, f, ids, w_cls=0.1, noise=0.0)
    guess = dr(f[:, :-1], ids[:, 1:], torch.arange(6))
    want_reg = torch.nn.functional.smooth_l1_loss(guess, f[:, 1:])
    p = torch.softmax(dr.logits(f[:, 1:]), -1)
    want_ce = -(p * torch.log_softmax(dr.logits(guess), -1)).sum(-1).mean()
    assert torch.allclose(reg, want_reg) and torch.allclose(ce, want_ce)
    assert torch.allclose(loss, want_reg + 0.1 * want_ce)
    assert torch.allclose(eagle_loss(dr, f, ids, w_cls=0.0, noise=0.0)[0], want_reg)
    shifted = dr(f[:, :-1], ids[:, :-1], torch.arange(6))  # the classic slip: the token f_i READ
    assert not torch.allclose(torch.nn.functional.smooth_l1_loss(shifted, f[:, 1:]), reg)


def _value(choices, acc):
    return sum(math.prod(float(acc[j, r]) for j, r in enumerate(c)) for c in choices)


def _valid(tree):
    s = set(tree)
    return all((len(c) == 1 or c[:-1] in s) and (c[-1] == 0 or c[:-1] + (c[-1] - 1,) in s) for c in tree)


@pytest.mark.parametrize("seed", range(4))
def test_eagle_choices_is_the_best_valid_tree(seed):
    g = torch.Generator().manual_seed(seed)
    acc = torch.rand(2, 3, generator=g) * 0.5
    acc = acc.sort(-1, descending=bool(seed % 2)).values  # also ranks that do NOT decrease
    mono = acc.cummin(-1).values  # what eagle_choices optimises: rates non-increasing in rank
    universe = [(r,) for r in range(3)] + [(a, b) for a in range(3) for b in range(3)]
    for n in (1, 3, 5):
        got = eagle_choices(acc, n)
        assert len(got) == n and _valid(got)
        assert got == sorted(got, key=lambda c: (len(c), c))
        best = max(_value(t, mono) for t in itertools.combinations(universe, n) if _valid(t))
        assert _value(got, mono) == pytest.approx(best)


def test_eagle_proposer_refuses_trees_it_cannot_draw(target):
    dr = EagleDrafter(target)
    for bad in ([], [(0,), (0, 1)], [(1,)], [(0,), (-1,)], [(0,), (0, 0, 0)], [()]):
        with pytest.raises(ValueError):
            EagleProposer(dr, bad)
    with pytest.raises(ValueError, match="variant"):
        load_eagle(target, "eagle-xl")


def test_rerank_keeps_parents_and_the_best_scores():
    g = torch.Generator().manual_seed(0)
    for n in (5, 12, 30):
        parents = [-1, -1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(2, n)]
        logp = (torch.rand(n, generator=g) * 0.95 + 0.05).log().tolist()
        logp[3] = 0.0  # a certain child: it ties with its parent
        score = []
        for i, p in enumerate(parents):
            score.append(logp[i] + (score[p] if p >= 0 else 0.0))
        for total in range(1, n + 1):
            chosen = rerank(score, parents, total)
            assert chosen == sorted(chosen) and len(chosen) == total
            assert all(parents[i] < 0 or parents[i] in chosen for i in chosen)
            worst_in = min(score[i] for i in chosen)
            assert all(score[i] <= worst_in for i in range(n) if i not in chosen)
    with pytest.raises(AssertionError, match="parent"):
        rerank([-1.0, -0.5], [-1, 0], 1)  # a child scoring above its parent


def test_eagle2_tree_shape_and_arguments(target):
    dr = EagleDrafter(target)
    torch.nn.init.normal_(dr.fc.weight, std=0.3)
    for bad in ({"total_tokens": 0}, {"depth": 0}, {"top_k": 17}, {"top_k": True}, {"total_tokens": 2.5}):
        with pytest.raises(ValueError):
            Eagle2Proposer(dr, **bad)
    tokens = torch.tensor([1, 5, 2, 7, 3])
    feats = {-1: hf.hidden_states(target, tokens[None, :-1], (-1,))[-1][0]}
    for total, depth, k, max_depth in (
        (8, 4, 3, 9),
        (40, 3, 4, 9),
        (16, 5, 2, 2),
        (3, 6, 4, 9),
        (1, 6, 4, 9),
    ):
        prop = Eagle2Proposer(dr, total_tokens=total, depth=depth, top_k=k)
        prop.start(target, tokens, SamplingParams(0.0), None, dict(feats))
        tree = prop.propose(tokens, max_depth)
        recorded = k + (min(depth, max_depth) - 1) * k * k
        assert len(tree) == min(total, recorded) and tree.q is None
        assert int(tree.depth().max()) <= min(depth, max_depth)
        assert (tree.parents < torch.arange(len(tree))).all()
        for kids in tree.children().values():
            assert len(set(tree.tokens[kids].tolist())) == len(kids) <= k
        passes = prop.forwards  # catch-up + one pass per expanded depth
        assert 1 <= passes <= min(depth, max_depth) and len(prop.cache) == len(tokens) - 1 + k * (passes - 1)
        # Stopping early (no deeper node can make the cut) must give the tree a full expansion gives:
        # expand everything (a budget no tree reaches), then keep the `total` best with the same rerank.
        full = Eagle2Proposer(dr, total_tokens=10**6, depth=depth, top_k=k)
        full.start(target, tokens, SamplingParams(0.0), None, dict(feats))
        everything = full.propose(tokens, max_depth)
        assert full.forwards == min(depth, max_depth) and len(everything) == recorded
        keep = rerank(full.scores.tolist(), everything.parents.tolist(), total)
        assert tree.tokens.tolist() == everything.tokens[keep].tolist()
        assert tree.parents.tolist() == DraftTree.renumber(everything.parents.tolist(), keep).tolist()
        if total == 1:
            assert passes == 1  # the root's best slot is the tree: nothing below it can outscore it


def test_eagle_runs_in_bfloat16():
    import specdec_lib as sd

    target = tiny_model(vocab=16, hidden=32, layers=2, seed=0).to(torch.bfloat16)
    for prop in (
        EagleProposer(EagleDrafter(target), [(0,), (1,), (0, 0)]),
        Eagle2Proposer(EagleDrafter(target), 6),
    ):
        assert next(prop.drafter.parameters()).dtype == torch.bfloat16
        out = sd.generate(target, torch.tensor([1, 2, 3]), 6, prop, temperature=1.0, seed=0)
        assert len(out.tokens) == 6


def _eagle2_reference(dr, target, tokens, total, depth, k):
    """EAGLE-2's tree as token paths, by the paper's recipe, every score recomputed from scratch."""
    top = torch.log_softmax(fresh_eagle_logits(dr, target, tokens, []), -1).topk(k)
    frontier = [((int(t),), float(v)) for v, t in zip(top.values, top.indices, strict=True)]
    recorded = list(frontier)
    for _ in range(2, depth + 1):
        grown = []
        for path, score in frontier:
            top = torch.log_softmax(fresh_eagle_logits(dr, target, tokens, path), -1).topk(k)
            grown += [
                (path + (int(t),), score + float(v)) for v, t in zip(top.values, top.indices, strict=True)
            ]
        recorded += grown
        frontier = sorted(grown, key=lambda x: -x[1])[:k]  # global top-k by CUMULATIVE score
    return {path for path, _ in sorted(recorded, key=lambda x: -x[1])[:total]}


@pytest.mark.parametrize(("total", "depth", "k"), [(6, 3, 2), (10, 4, 3), (25, 4, 3)])
def test_eagle2_tree_is_the_papers_tree(target, total, depth, k):
    torch.manual_seed(1)
    dr = EagleDrafter(target).eval()
    torch.nn.init.normal_(dr.fc.weight, std=0.3)
    tokens = torch.tensor([1, 5, 2, 7, 3, 3, 9])
    feats = {-1: hf.hidden_states(target, tokens[None, :-1], (-1,))[-1][0]}
    prop = Eagle2Proposer(dr, total_tokens=total, depth=depth, top_k=k)
    prop.start(target, tokens, SamplingParams(0.0), None, feats)
    with torch.no_grad():
        tree = prop.propose(tokens, depth)
        want = _eagle2_reference(dr, target, tokens, total, depth, k)
    got = {tuple(tree.tokens[tree.path_to(i)].tolist()) for i in range(len(tree))}
    assert got == want


def test_the_tree_proposers_name_what_they_need_of_a_drafter():
    """FeatureDrafter (chapter 07) is what EAGLE-1/2/3's proposers read; anything else is refused clearly."""
    from specdec_lib.dflash import DFlashDrafter
    from specdec_lib.eagle import EagleDrafter, FeatureDrafter, FeatureTreeProposer
    from specdec_lib.eagle2 import Eagle2Proposer
    from specdec_lib.eagle3 import Eagle3Drafter, Eagle3Proposer

    target = tiny_model(vocab=8, seed=0, layers=4)
    assert isinstance(EagleDrafter(target), FeatureDrafter) and isinstance(
        Eagle3Drafter(target), FeatureDrafter
    )
    for make in (lambda d: EagleProposer(d, [(0,)]), lambda d: Eagle2Proposer(d)):
        with pytest.raises(ValueError, match="not a feature drafter"):
            make(DFlashDrafter(target))  # DFlash fills a block: it has no fuse or per-position forward
    assert isinstance(Eagle3Proposer(Eagle3Drafter(target)), FeatureTreeProposer)
    with pytest.raises(ValueError, match="Eagle3Drafter"):
        Eagle3Proposer(EagleDrafter(target))


def test_slot_acceptance_first_slot_is_one_minus_tv(target):
    """A sampled first slot is accepted with probability 1 - TV(p, q): the table's first column (one bin)
    must match that mean over the same positions, and no row can accept more than once in total."""
    from specdec_lib.eagle import drafting_steps
    from specdec_lib.eagle2 import slot_acceptance

    dr = EagleDrafter(target)
    torch.nn.init.normal_(dr.fc.weight, std=0.3)
    seqs, starts, s = [torch.tensor([1, 5, 2, 7, 3, 9, 4, 6, 8])], [3], SamplingParams(1.0)
    gen = torch.Generator().manual_seed(0)
    acc = slot_acceptance(dr, target, seqs, starts, s, depth=2, slots=4, bins=1, draws=400, generator=gen)
    head = hf.lm_head(target)
    overlap = [
        float(torch.minimum(process_logits(head(f[n + d - 1]), s), process_logits(lg, s)).sum())
        for _, f, n, d, lg in drafting_steps(dr, target, seqs, starts, 2)
    ]
    assert abs(float(acc[0, 0]) - sum(overlap) / len(overlap)) < 0.03
    assert acc.shape == (1, 4) and bool((acc >= 0).all()) and float(acc.sum()) <= 1 + 1e-6
    by_bin = slot_acceptance(dr, target, seqs, starts, s, depth=2, slots=4, bins=10, draws=4, generator=gen)
    assert by_bin.shape == (10, 4) and float(by_bin.sum(1).max()) <= 1 + 1e-6  # empty bins: the pooled row
    for bad in ([[0.5, 0.2]], [[1.5, 0.1, 0.1, 0.1]], [0.9, 0.1, 0.0, 0.0]):  # too few slots, > 1, not 2-D
        with pytest.raises(ValueError, match="slot_acceptance"):
            Eagle2Proposer(dr, top_k=4, slot_acceptance=bad)
    prop = Eagle2Proposer(dr, top_k=3, slot_acceptance=[[0.6, 0.05, 0.1, 0.0]])
    assert prop.slot_worth.exp()[0, :3].tolist() == pytest.approx([0.6, 0.05, 0.05])  # never rising


def test_eagle2_ties_go_to_the_earlier_recorded_node(target):
    """With every slot worth the same (a drafter whose logits are constant), the frontier and the re-rank
    both keep the earliest-recorded nodes, so the tree does not depend on topk's unspecified tie order."""
    dr = EagleDrafter(target).eval()
    V = hf.vocab_size(target)
    dr.logits = lambda h: torch.zeros(*h.shape[:-1], V)
    tokens = torch.tensor([1, 5, 2, 7, 3])
    feats = {-1: hf.hidden_states(target, tokens[None, :-1], (-1,))[-1][0]}
    prop = Eagle2Proposer(dr, total_tokens=8, depth=3, top_k=2)
    prop.start(target, tokens, SamplingParams(0.0), None, feats)
    with torch.no_grad():
        tree = prop.propose(tokens, 3)
    # recorded: the root's slots 0, 1; their children 2, 3 (of 0) and 4, 5 (of 1); the frontier is the
    # first two of those, 2 and 3, whose children are 6, 7 (of 2) and 8, 9 (of 3); the re-rank keeps the
    # 8 best, which are 0 .. 7: the tie at depth 3 goes to 2's children
    assert tree.parents.tolist() == [-1, -1, 0, 0, 1, 1, 2, 2]
