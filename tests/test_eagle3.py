"""EAGLE-3 (chapter 09): the pieces the proposer contract test does not see -- the taps, the reduced
vocabulary, the training-time-test attention (it must equal what inference computes, position by
position) and the loss."""

import types

import pytest
import torch
from conftest import gqa_model, randomised, record_drafts, tiny_model

import specdec_lib as sd
from specdec_lib import hf
from specdec_lib.autoregressive import generate_ar
from specdec_lib.eagle2 import Eagle2Proposer
from specdec_lib.eagle3 import (
    Eagle3Drafter,
    draft_vocabulary,
    eagle3_feature_layers,
    eagle3_loss,
    target_inputs,
    ttt_outputs,
)
from specdec_lib.layers import KVCache


# ------------------------------------------------------------------------------------------ the taps
@pytest.mark.parametrize(
    ("L", "taps"), [(4, (1, 2, 3)), (6, (1, 3, 5)), (28, (2, 14, 25)), (32, (2, 16, 29))]
)
def test_fusion_layers(L, taps):
    model = types.SimpleNamespace(config=types.SimpleNamespace(num_hidden_layers=L))
    assert eagle3_feature_layers(model) == taps
    if L >= 28:  # the official rule: the inputs of layers 2, L // 2 and L - 3
        assert taps == (2, L // 2, L - 3)


def test_fusion_layers_refuses_a_shallow_target():
    with pytest.raises(ValueError, match="at least 4 layers"):
        eagle3_feature_layers(types.SimpleNamespace(config=types.SimpleNamespace(num_hidden_layers=3)))


def test_fused_features_are_the_taps_concatenated():
    target = gqa_model()
    dr = randomised(Eagle3Drafter(target))
    ids = torch.randint(0, 24, (1, 9))
    out = target(input_ids=ids, output_hidden_states=True)
    hidden, _ = target_inputs(target, dr, ids)
    for i in dr.feature_layers:  # hf numbering = transformers' output_hidden_states
        assert torch.equal(hidden[i], out.hidden_states[i])
    want = torch.cat([out.hidden_states[i] for i in (1, 2, 3)], -1) @ dr.fc.weight.T
    assert torch.allclose(dr.fuse(hidden), want, atol=1e-5)


# --------------------------------------------------------------------------- the reduced vocabulary
def test_draft_vocabulary_is_the_most_frequent_ids_with_offsets():
    g = torch.Generator().manual_seed(0)
    for V, N in ((10, 1), (10, 4), (50, 17), (50, 50)):
        counts = torch.randint(0, 6, (V,), generator=g)  # many ties
        d2t, t2d = draft_vocabulary(counts, N)
        used = torch.arange(N) + d2t
        assert used.tolist() == sorted(used.tolist()) and len(set(used.tolist())) == N
        assert t2d.tolist() == [v in used.tolist() for v in range(V)]
        kept, dropped = counts[t2d], counts[~t2d]
        if len(dropped):
            assert kept.min() >= dropped.max()  # nothing dropped is more frequent than anything kept
            ties = (counts == kept.min()).nonzero().flatten().tolist()
            assert [v for v in ties if t2d[v]] == ties[: len([v for v in ties if t2d[v]])]  # ties: low ids
    d2t, _ = draft_vocabulary(torch.tensor([5, 0, 9, 9, 1, 7]), 3)
    assert d2t.tolist() == [2, 2, 3]  # used = 2, 3, 5 (counts 9, 9, 7) -> offsets 2 - 0, 3 - 1, 5 - 2
    for bad in (0, 7, 2.0, True):
        with pytest.raises(ValueError):
            draft_vocabulary(torch.ones(6), bad)


def test_logits_live_on_target_ids_and_nothing_else_is_proposable():
    target = gqa_model()
    d2t, t2d = draft_vocabulary(torch.arange(24) % 5, 7)
    dr = randomised(Eagle3Drafter(target, d2t))
    h = torch.randn(3, 32)
    small, full = dr.draft_logits(h), dr.logits(h)
    assert small.shape == (3, 7) and full.shape == (3, 24)
    assert torch.isinf(full[:, ~t2d]).all() and torch.equal(full[:, t2d], small)
    with pytest.raises(ValueError, match="increasing target ids"):
        Eagle3Drafter(target, torch.tensor([0, -1]))  # ids 0, 0: not increasing
    with pytest.raises(ValueError, match="increasing target ids"):
        Eagle3Drafter(target, torch.tensor([0, 30]))  # id 31 does not exist


def test_out_of_vocabulary_tokens_are_never_drafted_and_greedy_stays_exact():
    target = tiny_model(vocab=16, layers=4, seed=3, scale=4.0)
    d2t, t2d = draft_vocabulary(torch.arange(16) % 4, 6)
    dr = randomised(Eagle3Drafter(target, d2t), seed=1)
    drafted = []
    prop = record_drafts(Eagle2Proposer(dr, total_tokens=10, depth=4, top_k=3), drafted)
    prompt = torch.tensor([1, 5, 2, 7])
    out = sd.generate(target, prompt, 30, prop)
    assert out.tokens == generate_ar(target, prompt, 30)
    assert drafted and all(t2d[t] for t in drafted)
    assert any(not t2d[t] for t in out.tokens), "the target still writes tokens the drafter cannot propose"


# ------------------------------------------------------------------- training-time test == inference
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_training_time_attention_equals_inference_position_by_position(arch):
    """Step s at position j of the unrolled training pass must be exactly what the drafter computes at
    inference: a cache filled from the TRUE fused features over positions 0 .. j, then s drafting steps,
    each reading its own previous output and the next token of the correct path at position j + s."""
    torch.manual_seed(0)
    target = gqa_model(arch)
    dr = randomised(Eagle3Drafter(target))
    ids = torch.randint(0, 24, (2, 14))
    steps = 5
    with torch.no_grad():
        g = dr.fuse(target_inputs(target, dr, ids)[0])
        outs = ttt_outputs(dr, g, ids, steps)
        assert [o.shape[1] for o in outs] == [13, 12, 11, 10, 9]
        checked = 0
        for b in range(2):
            for j in range(13):
                cache = KVCache()
                h = dr(g[b, : j + 1], ids[b, 1 : j + 2], torch.arange(j + 1), cache)[-1:]
                for s in range(steps):
                    if s:  # the next draft: its own output, the next token of the path, position j + s
                        h = dr(h, ids[b, j + s + 1 : j + s + 2], torch.tensor([j + s]), cache)
                    assert torch.allclose(h[0], outs[s][b, j], rtol=1e-4, atol=1e-4), (b, j, s)
                    checked += 1
                    if s + 1 == steps or j >= outs[s + 1].shape[1]:
                        break
    assert checked == 2 * (13 + 12 + 11 + 10 + 9)  # every (position, step) of both rows


def test_the_equality_test_has_teeth():
    """Two plausible slips in the unrolled pass: every step attends causally to ALL earlier positions of
    its own step (a plain causal mask per step), or steps reuse position j (no RoPE shift)."""
    target = gqa_model()
    dr = randomised(Eagle3Drafter(target))
    ids = torch.randint(0, 24, (1, 10))
    with torch.no_grad():
        g = dr.fuse(target_inputs(target, dr, ids)[0])
        right = ttt_outputs(dr, g, ids, 3)
        cache = KVCache()  # inference for j = 4, step 1
        h = dr(g[0, :5], ids[0, 1:6], torch.arange(5), cache)[-1:]
        h = dr(h, ids[0, 6:7], torch.tensor([5]), cache)
        assert torch.allclose(h[0], right[1][0, 4], rtol=1e-4, atol=1e-4)
        # slip 1: step 1 as an ordinary causal pass over its own (guessed) states
        wrong = dr(right[0][0, :5], ids[0, 2:7], torch.arange(1, 6))[-1]
        assert not torch.allclose(wrong, right[1][0, 4], atol=1e-3)
        # slip 2: no RoPE shift for step 1
        cache = KVCache()
        h = dr(g[0, :5], ids[0, 1:6], torch.arange(5), cache)[-1:]
        h = dr(h, ids[0, 6:7], torch.tensor([4]), cache)
        assert not torch.allclose(h[0], right[1][0, 4], atol=1e-3)
    with pytest.raises(ValueError, match="steps"):
        ttt_outputs(dr, g, ids, 0)


# ------------------------------------------------------------------------------------------ the loss
def test_loss_is_decayed_soft_ce_over_the_draft_vocabulary_with_the_mask():
    torch.manual_seed(0)
    target = gqa_model()
    d2t, t2d = draft_vocabulary(torch.arange(24) % 7, 12)
    dr = randomised(Eagle3Drafter(target, d2t))
    ids = torch.randint(0, 24, (2, 11))
    hidden, logits = target_inputs(target, dr, ids)
    loss, per = eagle3_loss(dr, hidden, logits, ids, steps=3)
    outs = ttt_outputs(dr, dr.fuse(hidden), ids, 3)
    used = t2d.nonzero().flatten()
    for s in range(3):
        m = 10 - s
        want = logits[:, 1 + s : 1 + s + m]
        p = torch.softmax(want[..., used], -1)
        ce = -(p * torch.log_softmax(dr.draft_logits(outs[s]), -1)).sum(-1)
        mask = t2d[want.argmax(-1)]
        assert 0 < mask.sum() < mask.numel()  # the mask is exercised both ways
        assert torch.allclose(per[s], (ce * mask).mean(), atol=1e-6)
    assert torch.allclose(loss, per[0] + 0.8 * per[1] + 0.64 * per[2], atol=1e-6)
    tf_loss, tf_per = eagle3_loss(dr, hidden, logits, ids, steps=1)  # teacher forcing = step 0 alone
    assert torch.allclose(tf_loss, per[0]) and len(tf_per) == 1
    loss.backward()
    assert all(p.grad is not None for p in dr.parameters())  # every own weight learns
    own = {p.data_ptr() for p in dr.parameters()}  # the embedding is the target's: shared, never trained
    assert hf.embeddings(target).weight.data_ptr() not in own
    assert set(dr.state_dict()) == {k for k, _ in dr.named_parameters()} | {"d2t"}


def test_zoo_drafter_is_greedy_exact_and_its_card_holds_the_experiments():
    target, _, tok = sd.load_pair("tiny-code", device="cpu")
    prop = sd.make_proposer("eagle3", target)
    dr = prop.drafter
    assert dr.feature_layers == (1, 3, 5) and len(dr.d2t) < dr.vocab
    for text in sd.heldout_prompts(2):
        ids = torch.tensor(tok.encode(text))[-40:]
        assert sd.generate(target, ids, 24, sd.make_proposer("eagle3", target)).tokens == generate_ar(
            target, ids, 24
        )
    from specdec_lib.eagle3 import load_eagle3

    _, card = load_eagle3(target)
    exp = card["experiments"]
    results, budgets = exp["results"], exp["scaling_units"]
    assert budgets[-1] * exp["unit_tokens"] == card["tokens_seen"]  # the last point is the shipped drafter
    assert results[f"eagle3:{budgets[-1]}"]["acc"] == card["rank_acceptance"]["acc"]
    for method in ("eagle", "eagle3"):
        for units in budgets:
            assert results[f"{method}:{units}"]["tau_greedy_eagle2_tree"] >= 1.0
    for ablation in ("eagle3-last-layer", "eagle3-teacher-forced"):
        assert len(results[f"{ablation}:{exp['ablation_units']}"]["acc"]) == 8
