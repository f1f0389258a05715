"""DFlash (chapter 10): the pieces the proposer contract test does not see -- the taps, the training mask
(the one-pass training computation must equal what inference computes, block by block), the loss, the
proposer's one pass per round, the errors and the zoo's drafter."""

import math
import types

import pytest
import torch
from conftest import gqa_model, randomised, tiny_model

import specdec_lib as sd
from specdec_lib import dflash, hf
from specdec_lib.autoregressive import generate_ar
from specdec_lib.dflash import (
    DFlashDrafter,
    DFlashProposer,
    dflash_feature_layers,
    dflash_loss,
    dflash_outputs,
    dflash_training_mask,
    sample_anchors,
    target_inputs,
)
from specdec_lib.layers import KVCache


def layers_only(L):
    return types.SimpleNamespace(config=types.SimpleNamespace(num_hidden_layers=L))


# ------------------------------------------------------------------------------------------ the taps
@pytest.mark.parametrize("L", [6, 28, 30, 32, 36, 40])
@pytest.mark.parametrize("n", [1, 3, 5])
def test_taps_are_the_official_layers(L, n):
    """The official rule (layer ids 1 .. L - 3 evenly spaced, rounded; one tap: layer L // 2), shifted by
    one into our numbering, where hidden state i is the output of layer i - 1."""
    official = [L // 2] if n == 1 else [int(round(1 + i * (L - 4) / (n - 1))) for i in range(n)]
    if L == 6:  # ours keeps the official fractions of the depth instead of squeezing to the middle
        assert dflash_feature_layers(layers_only(6), 3) == (1, 3, 5)
    else:
        assert dflash_feature_layers(layers_only(L), n) == tuple(i + 1 for i in official)


def test_taps_refuse_a_shallow_target_and_bad_counts():
    with pytest.raises(ValueError, match="deeper target"):
        dflash_feature_layers(layers_only(2), 3)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="positive integer"):
            dflash_feature_layers(layers_only(36), bad)


# ------------------------------------------------------------------------------ the training mask
def test_training_mask_by_its_rules():
    anchors, length, B = torch.tensor([2, 5]), 9, 3
    mask = dflash_training_mask(anchors, length, B)
    assert mask.shape == (6, 9 + 6)
    for r in range(6):
        a = int(anchors[r // B])
        for key in range(length):  # context: strictly before the row's anchor
            assert bool(mask[r, key]) == (key < a), (r, key)
        for c in range(6):  # block rows: its own block, in both directions; never the other block
            assert bool(mask[r, length + c]) == (r // B == c // B), (r, c)
    batched = dflash_training_mask(torch.tensor([[2, 5], [0, 6]]), length, B)
    assert torch.equal(batched[0], mask) and not batched[1, :B, :length].any()


def inference_block(dr, target, ids, a, B, split=None):
    """What the proposer computes for the block anchored at a: the context of positions 0 .. a - 1 from a
    FRESH target pass over ids[:a] only, written into the caches in two appends (as rounds do), then the
    block [ids[a], MASK, ...] at positions a .. a + B - 1 in one pass."""
    caches = [KVCache() for _ in dr.layers]
    if a:
        ctx = dr.context(hf.hidden_states(target, ids[None, :a], dr.feature_layers))[0]
        split = a // 2 if split is None else split
        if split:  # an earlier round's append: it must persist in the caches
            dr(dr.block_ids(ids[split : split + 1], B)[0], torch.arange(split, split + B), caches,
               ctx[:split], torch.arange(split))  # fmt: skip
        ctx, ctx_pos = ctx[split:], torch.arange(split, a)
    else:
        ctx, ctx_pos = None, None
    return dr(dr.block_ids(ids[a : a + 1], B)[0], torch.arange(a, a + B), caches, ctx, ctx_pos)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_training_pass_equals_inference_block_by_block(arch):
    """Many blocks of a batch in ONE training pass (dflash_outputs, under dflash_training_mask) must give
    every block exactly what inference gives it alone (GQA, and Qwen3's QK-norm)."""
    torch.manual_seed(0)
    target = gqa_model(arch)
    dr = randomised(DFlashDrafter(target, mask_token_id=5))
    ids, B = torch.randint(0, 24, (2, 20)), 4
    anchors = sample_anchors(20, B, 6, 2, torch.Generator().manual_seed(0))
    anchors[0, 0] = 0  # a block with no context at all
    anchors = anchors.sort(-1).values
    with torch.no_grad():
        hidden, _ = target_inputs(target, dr, ids)
        outs = dflash_outputs(dr, dr.context(hidden), ids, anchors, B)
        assert outs.shape == (2, 6, B, 32)
        for b in range(2):
            for j, a in enumerate(anchors[b].tolist()):
                want = inference_block(dr, target, ids[b], a, B)
                assert torch.allclose(outs[b, j], want, rtol=1e-4, atol=1e-4), (b, a)


@pytest.mark.parametrize(
    "slip",
    [
        "causal inside the block",  # rows see only earlier rows of their block
        "the anchor's own feature",  # context up to and including the anchor
        "other blocks visible",  # rows also see the other blocks of the sequence
    ],
)
def test_the_equality_test_has_teeth(slip, monkeypatch):
    target = gqa_model()
    dr = randomised(DFlashDrafter(target))
    ids, B = torch.randint(0, 24, (1, 16)), 4
    anchors = torch.tensor([[3, 9]])
    right = dflash_training_mask

    def wrong(anchors, length, block_size):
        m = right(anchors, length, block_size).clone()
        rows = m.shape[-2]
        if slip == "causal inside the block":
            m[..., length:] &= torch.ones(rows, rows, dtype=torch.bool).tril()
        elif slip == "the anchor's own feature":
            m[..., torch.arange(rows), anchors.repeat_interleave(block_size, -1)] = True
        else:
            m[..., length:] = True
        return m

    monkeypatch.setattr(dflash, "dflash_training_mask", wrong)
    with torch.no_grad():
        outs = dflash_outputs(dr, dr.context(target_inputs(target, dr, ids)[0]), ids, anchors, B)
        gaps = [float((outs[0, j] - inference_block(dr, target, ids[0], a, B)).abs().max()) for j, a in
                enumerate(anchors[0].tolist())]  # fmt: skip
    assert max(gaps) > 1e-3, f"the block-by-block equality would miss '{slip}'"


# ------------------------------------------------------------------------------------------ the loss
def test_loss_is_position_decayed_soft_ce_and_trains_only_the_drafter():
    torch.manual_seed(0)
    target = gqa_model()
    dr = randomised(DFlashDrafter(target))
    ids, B, gamma = torch.randint(0, 24, (2, 18)), 5, 2.0
    anchors = torch.tensor([[0, 7, 11], [2, 3, 13]])
    hidden, logits = target_inputs(target, dr, ids)
    loss, per = dflash_loss(dr, hidden, logits, ids, anchors, B, gamma)
    assert per.shape == (B - 1,)
    outs = dflash_outputs(dr, dr.context(hidden), ids, anchors, B)
    for k in range(1, B):  # row k against the target's distribution of the token at anchor + k
        ce = [
            -(torch.softmax(logits[b, a + k - 1], -1) * torch.log_softmax(dr.logits(outs[b, j, k]), -1)).sum()
            for b in range(2)
            for j, a in enumerate(anchors[b].tolist())
        ]
        assert torch.allclose(per[k - 1], torch.stack(ce).mean(), atol=1e-5), k
    w = torch.tensor([math.exp(-(k - 1) / gamma) for k in range(1, B)])
    assert torch.allclose(loss, (w * per).sum() / w.sum(), atol=1e-5)
    loss.backward()
    assert all(p.grad is not None for p in dr.parameters())  # every own weight learns
    own = {p.data_ptr() for p in dr.parameters()}  # the embedding and LM head are the target's, frozen
    assert (
        hf.embeddings(target).weight.data_ptr() not in own and hf.lm_head(target).weight.data_ptr() not in own
    )
    assert set(dr.state_dict()) == {k for k, _ in dr.named_parameters()}


def test_anchors_fit_their_blocks_and_are_distinct():
    a = sample_anchors(30, 8, 10, 64, torch.Generator().manual_seed(0))
    assert a.shape == (64, 10) and int(a.min()) >= 0 and int(a.max()) <= 30 - 8
    assert (a.diff(dim=-1) > 0).all()  # sorted, without repeats
    assert set(a.flatten().tolist()) == set(range(23))  # every fitting position gets drawn
    with pytest.raises(ValueError, match="do not fit"):
        sample_anchors(10, 8, 4, 1)


# ------------------------------------------------------------------------------------ the proposer
def test_one_drafter_pass_per_round_and_a_chain_of_block_minus_one():
    target = tiny_model(vocab=16, layers=4, seed=3, scale=4.0)
    dr = randomised(DFlashDrafter(target), seed=2).eval()
    prompt = torch.tensor([1, 2, 3, 4, 5])
    for B in (2, 5):
        drafted = []
        prop = DFlashProposer(dr, B)
        propose = prop.propose

        def watch(tokens, max_depth, propose=propose, drafted=drafted):
            tree = propose(tokens, max_depth)
            drafted.append((len(tree), max_depth))
            assert tree.parents.tolist() == list(range(-1, len(tree) - 1))  # a chain
            return tree

        prop.propose = watch
        out = sd.generate(target, prompt, 23, prop)
        assert out.tokens == generate_ar(target, prompt, 23)
        rounds = sum(1 for d in out.stats.drafted if d)  # rounds that drafted (the last may not: no room)
        assert prop.forwards == len(drafted) == rounds >= out.stats.target_forwards - 1  # ONE pass a round
        assert all(n == min(B - 1, d) for n, d in drafted) and drafted[0][0] == B - 1


def test_a_shorter_chain_runs_the_trained_block_and_keeps_its_first_rows():
    """dflash:B below the drafter's block: the pass still runs the trained block (the only block shape
    it has seen), so the chain is built from the first B - 1 rows of the full-block pass; and
    pass_rows = B (a short block) is a different computation."""
    target = tiny_model(vocab=16, layers=4, seed=3, scale=4.0)
    dr = randomised(DFlashDrafter(target, block_size=8), seed=2).eval()
    prompt = torch.tensor([1, 2, 3, 4, 5])
    cache, features = sd.speculative.prefill(target, prompt, dr.feature_layers)

    def rows(B, pass_rows=None, temperature=0.0):
        prop = DFlashProposer(dr, B, pass_rows)
        sampling = sd.SamplingParams(temperature)
        prop.start(target, prompt, sampling, torch.Generator().manual_seed(0), features)
        h = []
        prop.choose = lambda states, anchor: h.append(states)  # the rows the proposer keeps
        prop.propose(prompt, max_depth=20)  # prefill leaves the last prompt token pending
        return prop, h[0]

    full, h8 = rows(None)
    assert full.block_size == full.pass_rows == 8 and len(h8) == 7
    for B in (2, 3, 5):
        prop, h = rows(B)
        assert prop.pass_rows == 8 and len(h) == B - 1
        assert torch.allclose(h, h8[: B - 1], atol=1e-6)
    short, h_short = rows(3, pass_rows=3)
    assert short.pass_rows == 3 and not torch.allclose(h_short, h8[:2], atol=1e-4)
    assert rows(12)[0].pass_rows == 12  # a longer chain than trained: the longer block
    with pytest.raises(ValueError, match="pass_rows"):
        DFlashProposer(dr, 5, pass_rows=4)
    with pytest.raises(ValueError, match="built for blocks of 8"):
        dflash.train_dflash(dr, target, [], 1.0, block_size=16)


def test_errors():
    target = gqa_model()
    dr = DFlashDrafter(target)
    assert dr.mask_token_id == 23  # untrained default: the last id
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="block_size"):
            DFlashProposer(dr, bad)
        with pytest.raises(ValueError, match="block_size"):
            DFlashDrafter(target, block_size=bad)
    with pytest.raises(ValueError, match="layers"):
        DFlashDrafter(target, layers=0)
    with pytest.raises(ValueError, match="mask_token_id"):
        DFlashDrafter(target, mask_token_id=24)
    with pytest.raises(ValueError, match="dflash:BLOCK"):
        sd.make_proposer("dflash:x", target, weights="random")
    with pytest.raises(ValueError, match="block_size"):
        sd.make_proposer("dflash:1", target, weights="random")
    other = gqa_model(vocab=30)
    with pytest.raises(ValueError, match="vocab"):
        sd.generate(other, torch.tensor([1, 2, 3]), 4, DFlashProposer(dr, 4))


# ------------------------------------------------------------------------------------------ the zoo
def test_zoo_drafter_is_greedy_exact_and_its_card_holds_the_recall():
    target, _, tok = sd.load_pair("tiny-code", device="cpu")
    for B in (4, 16):
        prop = sd.make_proposer(f"dflash:{B}", target)
        assert prop.block_size == B and prop.drafter.feature_layers == (1, 3, 5)
    for text in sd.heldout_prompts(2):
        ids = torch.tensor(tok.encode(text))[-40:]
        out = sd.generate(target, ids, 24, sd.make_proposer("dflash:8", target))
        assert out.tokens == generate_ar(target, ids, 24)
    card = dflash.load_dflash(target)[1]
    runs = [card["ablation"][kind] for kind in ("corpus", "regenerated")]  # the data ablation's two rows
    for run in (card, *runs):
        for text in ("corpus", "greedy"):
            top1, top16 = run["recall"][text]["top1"], run["recall"][text]["top16"]
            assert len(top1) == len(top16) == card["block_size"] - 1
            assert all(0 <= a <= b <= 1 for a, b in zip(top1, top16, strict=True))
    assert card["ablation"]["regenerated"]["tau_greedy"] == {
        k: v for k, v in card["tau_greedy"].items() if k != "how"
    }
    assert card["data"]["windows"] * 256 > card["data"]["generated_tokens"] > 0
    assert card["config"]["mask_token_id"] not in tok.all_special_ids
