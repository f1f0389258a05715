"""DFlash 2 (chapter 11): identity at initialisation, local mixing that never crosses a block (the one-pass
training computation still equals inference block by block), the selector's walk and its q, the
selector's loss, the errors and the zoo's weights. Sampling exactness is the proposer contract test's."""

import pytest
import torch
from conftest import gqa_model, randomised, record_drafts
from test_dflash import inference_block

import specdec_lib as sd
from specdec_lib.autoregressive import SamplingParams, generate_ar, process_logits
from specdec_lib.dflash import (
    DFlashDrafter,
    DFlashProposer,
    dflash_outputs,
    dflash_training_mask,
    sample_anchors,
    target_inputs,
)
from specdec_lib.dflash2 import (
    DFlash2Drafter,
    DFlash2Proposer,
    MixedBlock,
    PathSelector,
    TwoTapMixer,
    dflash2_loss,
    previous_in_block,
    selector_loss,
)


def backbone(target, seed=0):
    return randomised(DFlashDrafter(target, mask_token_id=5), seed).eval()


def perturb_new_parts(dr, seed=1, scale=0.2):
    """Move the mixers and the selector away from their identity start (as training would)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in dr.named_parameters():
            if dr.is_new_part(name):
                p.add_(torch.randn(p.shape, generator=g) * scale)
    return dr


# ------------------------------------------------------------------------- identity at initialisation
def test_a_fresh_dflash2_is_exactly_its_dflash_backbone():
    """Mixers at identity, successor codebook at zero: the same hidden states on both paths, the same
    drafted tokens and the same greedy output."""
    torch.manual_seed(0)
    target = gqa_model()
    dr = backbone(target)
    dr2 = DFlash2Drafter.from_dflash(target, dr).eval()
    assert all(isinstance(layer, MixedBlock) for layer in dr2.layers)
    ids, B = torch.randint(0, 24, (2, 20)), 4
    anchors = sample_anchors(20, B, 5, 2, torch.Generator().manual_seed(0))
    with torch.no_grad():
        hidden, _ = target_inputs(target, dr, ids)
        a = dflash_outputs(dr, dr.context(hidden), ids, anchors, B)
        b = dflash_outputs(dr2, dr2.context(hidden), ids, anchors, B)
        assert torch.equal(a, b)
    prompt = torch.randint(0, 24, (9,))
    ref, got = [], []
    out1 = sd.generate(target, prompt, 24, record_drafts(DFlashProposer(dr, 5), ref))
    out2 = sd.generate(target, prompt, 24, record_drafts(DFlash2Proposer(dr2, 5), got))
    assert out1.tokens == out2.tokens == generate_ar(target, prompt, 24)
    assert ref == got and len(got) >= 10
    # ... and the identity is not vacuous: once the new parts move, the drafts change
    moved = []
    sd.generate(target, prompt, 24, record_drafts(DFlash2Proposer(perturb_new_parts(dr2), 5), moved))
    assert moved != ref


# --------------------------------------------------------------------------------------- local mixing
def test_previous_in_block_follows_the_block_starts():
    anchors, length, B = torch.tensor([[1, 7], [0, 3]]), 12, 3
    mask = dflash_training_mask(anchors, length, B)[:, None]
    keep = previous_in_block(mask, 2 * B, length).reshape(2, 2 * B)
    assert keep.tolist() == [[False, True, True, False, True, True]] * 2  # rows 0 and 3 start a block
    assert previous_in_block(None, 4, 9).tolist() == [False, True, True, True]
    assert previous_in_block(torch.ones(4, 13, dtype=torch.bool), 4, 9).tolist() == [False, True, True, True]


def test_two_tap_mixer_by_its_formula():
    torch.manual_seed(0)
    mix = TwoTapMixer(32, group_size=16)
    with torch.no_grad():
        mix.base.normal_()
        mix.kernel_projection.weight.normal_()
    x, keep = torch.randn(2, 5, 32), torch.tensor([[False, True, True, False, True]] * 2)
    y, dyn_out = mix.prepare(x, keep)
    dyn = mix.kernel_projection(x).unflatten(-1, (2, 2, 2))  # side, tap, group
    for b in range(2):
        for t in range(5):
            k0 = mix.base[0, 0] + dyn[b, t, 0, 0].repeat_interleave(16)
            k1 = mix.base[0, 1] + dyn[b, t, 0, 1].repeat_interleave(16)
            want = k0 * x[b, t] + (k1 * x[b, t - 1] if keep[b, t] else 0)
            assert torch.allclose(y[b, t], want, atol=1e-5), (b, t)
    assert torch.equal(dyn_out, dyn[..., 1, :, :])
    fresh = TwoTapMixer(32)
    assert torch.equal(fresh.finish(*fresh.prepare(x, keep), keep), x)  # the identity at initialisation


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_training_pass_equals_inference_block_by_block_with_mixing(arch):
    """With random mixers, many blocks in one training pass still give every block exactly what inference
    gives it alone: a tap that crossed into the previous block (adjacent anchors included) would differ."""
    torch.manual_seed(0)
    target = gqa_model(arch)
    dr = perturb_new_parts(DFlash2Drafter.from_dflash(target, backbone(target))).eval()
    ids, B = torch.randint(0, 24, (2, 20)), 4
    anchors = torch.tensor([[0, 4, 8, 13], [2, 3, 9, 16]])  # back-to-back blocks, overlapping blocks
    with torch.no_grad():
        hidden, _ = target_inputs(target, dr, ids)
        outs = dflash_outputs(dr, dr.context(hidden), ids, anchors, B)
        for b in range(2):
            for j, a in enumerate(anchors[b].tolist()):
                want = inference_block(dr, target, ids[b], a, B)
                assert torch.allclose(outs[b, j], want, rtol=1e-4, atol=1e-4), (b, a)


def test_the_mixing_equality_has_teeth(monkeypatch):
    """A mixer that reads across block starts (row 0 reading the previous block's last row) is caught."""
    from specdec_lib import dflash2

    torch.manual_seed(0)
    target = gqa_model()
    dr = perturb_new_parts(DFlash2Drafter.from_dflash(target, backbone(target))).eval()
    ids, B = torch.randint(0, 24, (1, 16)), 4
    anchors = torch.tensor([[3, 7]])
    right = dflash2.previous_in_block
    monkeypatch.setattr(dflash2, "previous_in_block", lambda m, n, past: torch.ones_like(right(m, n, past)))
    with torch.no_grad():
        hidden, _ = target_inputs(target, dr, ids)
        outs = dflash_outputs(dr, dr.context(hidden), ids, anchors, B)
        monkeypatch.setattr(dflash2, "previous_in_block", right)
        want = inference_block(dr, target, ids[0], 7, B)
    assert not torch.allclose(outs[0, 1], want, atol=1e-3)


# ------------------------------------------------------------------------------------ the path selector
@torch.no_grad()
def test_greedy_walk_maximises_each_step_given_the_previous_pick():
    torch.manual_seed(0)
    sel = PathSelector(12, 8, rank=4, top_k=3)
    with torch.no_grad():
        sel.successor.weight.normal_()
    logits, h = torch.randn(4, 12), torch.randn(4, 8)
    tokens, q = sel.walk(logits, h, anchor=7)
    assert q is None
    unary, cand = logits.topk(3, -1)
    a = 7
    for t in range(4):
        s = [float(unary[t, j] + (sel.predecessor.weight[a] * sel.gate(h[t])) @ sel.successor.weight[cand[t, j]])
             for j in range(3)]  # fmt: skip
        assert int(tokens[t]) == int(cand[t, max(range(3), key=s.__getitem__)])
        a = int(tokens[t])
    fresh = PathSelector(12, 8, rank=4, top_k=3)  # successor at zero: the drafter's own argmax per row
    assert fresh.walk(logits, h, anchor=7)[0].tolist() == logits.argmax(-1).tolist()


@torch.no_grad()
def test_sampled_walk_reports_the_distribution_each_token_was_drawn_from():
    """q_t: the drafter's processed distribution for row t with its candidates' logits replaced by S_t
    given the token actually drawn before it. Recomputed from the drawn path, for many draws."""
    torch.manual_seed(0)
    sel = PathSelector(10, 8, rank=4, top_k=4)
    with torch.no_grad():
        sel.successor.weight.normal_()
    logits, h = torch.randn(3, 10), torch.randn(3, 8)
    unary, cand = logits.topk(4, -1)
    g = torch.Generator().manual_seed(0)
    sampling = SamplingParams(0.7, top_k=6)
    paths = set()
    for _ in range(30):
        tokens, q = sel.walk(logits, h, anchor=2, sampling=sampling, generator=g)
        paths.add(tuple(tokens.tolist()))
        a = 2
        for t in range(3):
            s = sel.scores(unary[t], cand[t], torch.tensor(a), h[t])
            want = process_logits(logits[t].scatter(-1, cand[t], s), sampling)
            assert torch.allclose(q[t], want, atol=1e-6) and q[t, tokens[t]] > 0
            a = int(tokens[t])
    assert len(paths) > 3  # really sampled, and q changed with the predecessor
    # the centring: the bilinear term sums to zero over each row's candidates
    assert torch.allclose(
        sel.scores(unary, cand, torch.tensor([2, 2, 2]), h).sum(-1), unary.sum(-1), atol=1e-5
    )


def test_a_fresh_dflash2_samples_exactly_like_dflash():
    """Identity at initialisation under sampling too: same draws from the same seed, same tokens."""
    torch.manual_seed(0)
    target = gqa_model()
    dr = backbone(target)
    dr2 = DFlash2Drafter.from_dflash(target, dr).eval()
    prompt = torch.randint(0, 24, (9,))
    for T, top_p in ((1.0, None), (0.7, 0.9)):
        ref, got = [], []
        a = sd.generate(target, prompt, 24, record_drafts(DFlashProposer(dr, 5), ref), T, top_p=top_p, seed=3)
        b = sd.generate(
            target, prompt, 24, record_drafts(DFlash2Proposer(dr2, 5), got), T, top_p=top_p, seed=3
        )
        assert a.tokens == b.tokens and ref == got and len(got) >= 10


def test_selector_loss_masks_missing_rows_and_trains_only_the_selector():
    torch.manual_seed(0)
    sel = PathSelector(16, 8, rank=4, top_k=3)
    draft_logits = torch.randn(2, 5, 16, requires_grad=True)
    target_logits, h = torch.randn(2, 5, 16), torch.randn(2, 5, 8, requires_grad=True)
    before = torch.randint(0, 16, (2, 5))
    loss, per_row, recall = selector_loss(sel, draft_logits, h, before, target_logits, gamma=7.0)
    cand = draft_logits.topk(3, -1).indices
    hit = (cand == target_logits.argmax(-1, keepdim=True)).any(-1)
    assert torch.equal(recall, hit.float().mean(0))
    # by hand: rows without the target's top token are excluded; soft CE on the candidates
    s = sel.scores(draft_logits.topk(3, -1).values, cand, before, h)
    p = torch.softmax(target_logits.gather(-1, cand), -1)
    ce = -(p * torch.log_softmax(s, -1)).sum(-1)
    want = torch.stack(
        [ce[:, r][hit[:, r]].mean() if hit[:, r].any() else torch.tensor(0.0) for r in range(5)]
    )
    assert torch.allclose(per_row, want, atol=1e-5)
    loss.backward()
    assert draft_logits.grad is None and h.grad is None  # a head on its backbone: nothing flows back
    assert sel.successor.weight.grad.abs().sum() > 0


def test_dflash2_loss_is_dflash_loss_plus_the_selector_term():
    from specdec_lib.dflash import dflash_loss

    torch.manual_seed(0)
    target = gqa_model()
    dr = backbone(target)
    ids, B = torch.randint(0, 24, (2, 16)), 4
    anchors = sample_anchors(16, B, 3, 2, torch.Generator().manual_seed(0))
    inputs = target_inputs(target, dr, ids)
    base, base_rows = dflash_loss(dr, *inputs, ids, anchors, B, 7.0)
    no_selector = DFlash2Drafter.from_dflash(target, dr, selector=False)
    loss, rows = dflash2_loss(no_selector, *inputs, ids, anchors, B, 7.0)
    assert torch.allclose(loss, base) and torch.allclose(rows, base_rows)  # fresh mixers: identity
    both = DFlash2Drafter.from_dflash(target, dr)
    loss2, rows2 = dflash2_loss(both, *inputs, ids, anchors, B, 7.0, selector_weight=0.5)
    assert rows2.shape == (2 * (B - 1),) and torch.allclose(rows2[: B - 1], base_rows)
    w = torch.exp(-torch.arange(B - 1) / 7.0)
    sel = (w * rows2[B - 1 :]).sum() / w.sum()
    assert torch.allclose(loss2, base + 0.5 * sel, atol=1e-5) and sel > 0


# ------------------------------------------------------------------------------------------- the errors
def test_errors():
    target = gqa_model()
    with pytest.raises(ValueError, match="top_k"):
        PathSelector(16, 8, top_k=17)
    with pytest.raises(ValueError, match="multiple of the group size"):
        TwoTapMixer(24, group_size=16)
    with pytest.raises(ValueError, match="block_size"):
        DFlash2Proposer(DFlash2Drafter(target), block_size=1)
    with pytest.raises(ValueError, match=r"\+selector or \+mixing"):
        sd.make_proposer("dflash2:4+both", target, weights="random")
    for spec, mixing, selector in (("dflash2:4", True, True), ("dflash2:4+selector", False, True),
                                   ("dflash2:4+mixing", True, False)):  # fmt: skip
        dr = sd.make_proposer(spec, target, weights="random").drafter
        assert isinstance(dr.layers[0], MixedBlock) == mixing and (dr.selector is not None) == selector
    wrong = DFlash2Proposer(DFlash2Drafter(gqa_model(vocab=20)), 4)
    with pytest.raises(ValueError, match="vocabularies differ"):
        sd.generate(target, torch.tensor([1, 2, 3]), 4, wrong)


# ------------------------------------------------------------------------------------------ the zoo
def test_zoo_dflash2_variants_are_greedy_exact_and_the_card_holds_the_ablation():
    from specdec_lib.dflash2 import load_dflash2

    target, _, tok = sd.load_pair("tiny-code", device="cpu")
    prompt = torch.tensor(tok.encode(sd.heldout_prompts(1)[0]))[-64:]
    want = generate_ar(target, prompt, 24)
    for mixing, selector in ((True, True), (True, False), (False, True)):
        dr, card = load_dflash2(target, mixing=mixing, selector=selector)
        assert (dr.selector is not None) == selector and isinstance(dr.layers[0], MixedBlock) == mixing
        assert sd.generate(target, prompt, 24, DFlash2Proposer(dr, 8)).tokens == want
    # the trained parts moved away from the identity, and the backbone is chapter 10's, untouched
    from specdec_lib.dflash import load_dflash

    both, _ = load_dflash2(target)
    assert all(
        float(layer.mlp_conv.kernel_projection.weight.detach().abs().max()) > 0 for layer in both.layers
    )
    assert float(both.selector.successor.weight.detach().abs().max()) > 0
    plain, _ = load_dflash(target)
    mine = dict(both.named_parameters())
    for name, p in plain.named_parameters():
        assert torch.equal(mine[name], p), name
    for variant in ("dflash", "selector", "mixing", "both"):
        assert variant in card["ablation"]
    assert card["ablation"]["oracle"]["tau"] >= card["ablation"]["dflash"]["tau"]
