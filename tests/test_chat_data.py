"""The real model's training text (zoo_stages.chat_data): batched answers written with the features the
drafters train on, stored in resumable chunks, and chapter 09's train_eagle3 on those cached features. On a
tiny random target with a stand-in chat template, so it runs in seconds."""

import types

import numpy as np
import pytest
import torch
from conftest import gqa_model, randomised

from specdec_lib import hf, zoo
from specdec_lib.autoregressive import SamplingParams, generate_ar
from specdec_lib.eagle3 import (
    Eagle3Drafter,
    cached_inputs,
    draft_vocabulary,
    eagle3_loss,
    target_inputs,
    train_eagle3,
)
from specdec_lib.zoo_stages import chat_data

EOS = 5


def prompts_of(n, seed=0, lengths=(3, 9)):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randint(6, 24, (int(torch.randint(*lengths, (1,), generator=g)),), generator=g)
        for _ in range(n)
    ]


@torch.no_grad()
def reference_states(target, ids, layers):
    h = hf.hidden_states(target, ids[None], layers)
    return torch.stack([h[i][0] for i in layers], 1), hf.lm_head(target)(h[-1][0]).argmax(-1)


def test_batched_answers_are_plain_greedy_decoding_with_the_targets_own_features():
    """Left-padded rows of different lengths: each greedy answer is what plain decoding writes for that prompt
    alone (stopping at the end token; rows that end leave the batch), and each position's kept state and
    argmax are the ones an unpadded forward of the row computes."""
    target = gqa_model()
    layers = (1, 2, 3, -1)
    prompts = prompts_of(6)
    # an end token that row 0 writes early, so some rows end and leave the batch while others go on
    eos = int(torch.as_tensor(generate_ar(target, prompts[0], 4, SamplingParams())).reshape(-1)[3])
    rows = chat_data.write_answers(target, prompts, 12, eos, False, None, layers)
    new = [len(row["ids"]) - len(p) for p, row in zip(prompts, rows)]
    assert min(new) <= 4 and max(new) == 12
    for p, row in zip(prompts, rows):
        alone = torch.as_tensor(generate_ar(target, p, 12, SamplingParams(), eos_token_id=eos)).reshape(-1)
        assert torch.equal(row["ids"][: len(p)], p) and torch.equal(row["ids"][len(p) :], alone)
        assert eos not in row["ids"][len(p) : -1].tolist()  # an answer ends at its first end token
        states, top = reference_states(target, row["ids"], layers)
        assert row["hidden"].dtype == torch.float16 and row["hidden"].shape == states.shape
        assert torch.allclose(row["hidden"].float(), states, atol=2e-3 * float(states.abs().max()))
        assert torch.equal(row["argmax"].long(), top)
        assert torch.equal(top[len(p) - 1 : -1], row["ids"][len(p) :])  # greedy: each token is the argmax


def test_sampled_answers_are_seeded_and_draw_from_the_target():
    target = gqa_model()
    prompts = prompts_of(4, seed=1)
    draw = lambda s: chat_data.write_answers(
        target, prompts, 10, EOS, True, torch.Generator().manual_seed(s), (1, -1)
    )  # fmt: skip
    a, b, c = draw(0), draw(0), draw(1)
    assert all(torch.equal(x["ids"], y["ids"]) for x, y in zip(a, b))
    assert any(not torch.equal(x["ids"], y["ids"]) for x, y in zip(a, c))
    greedy = chat_data.write_answers(target, prompts, 10, EOS, False, None, (1, -1))
    assert any(not torch.equal(x["ids"], y["ids"]) for x, y in zip(a, greedy))  # not the argmax path


@pytest.fixture
def tiny_chunks(tmp_path, monkeypatch):
    """chat_data on a tiny target: chunks of 3 instructions, a stand-in chat template, temporary stores."""
    target = gqa_model()
    tok = types.SimpleNamespace(eos_token_id=EOS)
    monkeypatch.setattr(chat_data, "CHUNK", 3)
    monkeypatch.setattr(chat_data, "ANSWERS_DIR", tmp_path / "answers")
    monkeypatch.setenv("SPECDEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(
        zoo, "chat_ids", lambda tok, text, device=None: torch.tensor([6 + b % 18 for b in text.encode()[:7]])
    )
    return target, tok


def test_a_chunk_is_written_once_and_read_back(tiny_chunks, monkeypatch):
    target, tok = tiny_chunks
    chunk = chat_data.answer_chunk("tiny", 1, new_tokens=8, batch=2, pair=(target, tok))
    texts = zoo.instructions("train")[3:6]
    assert chunk["instruction"] == [3, 4, 5, 3, 4, 5] and chunk["sampled"] == [False] * 3 + [True] * 3
    for seq, n, i in zip(chunk["sequences"], chunk["prompt_lengths"], chunk["instruction"]):
        assert torch.equal(seq[:n], zoo.chat_ids(tok, zoo.instructions("train")[i]))
    meta = chunk["meta"]
    assert meta["tokens"] == sum(len(s) for s in chunk["sequences"])
    assert meta["answer_tokens"] == meta["tokens"] - sum(chunk["prompt_lengths"])
    assert meta["instructions"] == [3, 6] and meta["instructions_sha1"] == chat_data._instruction_digest(
        texts
    )
    hidden, argmax, layers = chat_data.chunk_features("tiny", 1, target)
    assert layers == (1, 2, 3, -1) and hidden.shape[0] == argmax.shape[0] == meta["tokens"]
    # never written twice: a second call reads the stores
    monkeypatch.setattr(chat_data, "write_answers", lambda *a, **k: pytest.fail("chunk rewritten"))
    again = chat_data.answer_chunk("tiny", 1)
    assert all(torch.equal(x, y) for x, y in zip(again["sequences"], chunk["sequences"]))
    assert chat_data.write_chunks("tiny", 2, minutes=0) == [1]  # the budget is spent: chunk 0 not started
    # the features are recomputed from the committed tokens when the cache lost them
    captured = np.array(hidden, dtype=np.float32)
    for f in chat_data.features_dir("tiny", 1).iterdir():
        f.unlink()
    hidden2, argmax2, _ = chat_data.chunk_features("tiny", 1, target)
    assert np.allclose(np.asarray(hidden2, dtype=np.float32), captured, atol=2e-3 * np.abs(captured).max())
    assert np.array_equal(argmax2, argmax)
    # another instruction set: a clear error, not silently stale text
    monkeypatch.setattr(zoo, "instructions", lambda split="train", n=None: ["something else"] * 9)
    with pytest.raises(ValueError, match="instruction set changed"):
        chat_data.answer_chunk("tiny", 1)
    with pytest.raises(ValueError, match="chunk index"):
        chat_data.answer_chunk("tiny", 3)


def test_train_eagle3_on_cached_features_is_the_same_loss(tiny_chunks):
    """cached_inputs + eagle3_loss on a cached batch = the loss with the target run on the same ids (up to the
    features' fp16 storage), and train_eagle3 trains on such batches without running the target."""
    target, tok = tiny_chunks
    for i in (0, 1):
        chat_data.answer_chunk("tiny", i, new_tokens=10, batch=3, pair=(target, tok))
    d2t, _ = draft_vocabulary(torch.arange(24) % 7, 12)
    dr = randomised(Eagle3Drafter(target, d2t))
    batches = list(chat_data.feature_batches("tiny", [0, 1], target, batch=2, length=8, epochs=2, seed=0))
    assert len(batches) >= 4 and batches[0]["ids"].shape == (2, 8)
    # one window inside one sequence (the target reads each sequence alone: a window across two differs)
    hidden, argmax, layers = chat_data.chunk_features("tiny", 0, target)
    seq = chat_data.answer_chunk("tiny", 0)["sequences"][0]
    b = {
        "ids": seq[None, :8],
        "hidden": {i: torch.from_numpy(np.array(hidden[:8]))[None, :, k] for k, i in enumerate(layers)},
        "argmax": torch.from_numpy(np.array(argmax[:8])).long()[None],
    }
    hidden, logits = cached_inputs(target, dr, b)
    cached, _ = eagle3_loss(dr, hidden, logits, b["ids"], 3, target_argmax=b["argmax"])
    live, _ = eagle3_loss(dr, *target_inputs(target, dr, b["ids"]), b["ids"], 3)
    assert torch.allclose(cached, live, rtol=2e-3)
    calls = []
    hook = target.register_forward_hook(lambda *a: calls.append(1))
    log = train_eagle3(dr, target, batches, seconds=60, steps=3)
    hook.remove()
    assert len(log) == len(batches) and len(log[0]) == 3 and not calls


def test_a_resumed_training_run_is_the_uninterrupted_one(tiny_chunks, monkeypatch):
    """zoo_stages.eagle3_real: runs cut short by their budget continue from their checkpoint (drafter,
    optimiser, schedule position, batch position); three short runs give the weights of one long run."""
    from specdec_lib.zoo_stages import eagle3_real

    target, tok = tiny_chunks
    for i in (0, 1):
        chat_data.answer_chunk("tiny", i, new_tokens=10, batch=3, pair=(target, tok))
    d2t, _ = draft_vocabulary(torch.arange(24) % 7, 12)

    def build(name, recipe):
        torch.manual_seed(0)
        return target, tok, randomised(Eagle3Drafter(target, d2t)), None

    finished = []
    monkeypatch.setattr(eagle3_real, "build", build)
    monkeypatch.setattr(
        eagle3_real, "finish", lambda name, t, tk, drafter, *a: finished.append(drafter) or "card"
    )
    recipe = {"steps": 6, "batch": 2, "length": 8, "ttt_steps": 2, "chunks": 2, "lr": 1e-2}
    assert eagle3_real.train_eagle3_real("tiny", recipe=recipe) == "card"
    whole = finished.pop().state_dict()
    assert not eagle3_real.checkpoint_path("tiny").exists()
    assert eagle3_real.train_eagle3_real("tiny", recipe=recipe, max_steps=2) is None
    assert torch.load(eagle3_real.checkpoint_path("tiny"), weights_only=False)["done"] == 2
    assert eagle3_real.train_eagle3_real("tiny", recipe=recipe, max_steps=3) is None
    assert eagle3_real.train_eagle3_real("tiny", recipe=recipe) == "card"
    resumed = finished.pop().state_dict()
    assert all(torch.allclose(whole[k].float(), resumed[k].float(), atol=1e-6) for k in whole)
    assert not torch.equal(
        whole["fc.weight"], build("tiny", recipe)[2].state_dict()["fc.weight"]
    )  # it trained
    with pytest.raises(ValueError, match="another recipe"):
        eagle3_real.train_eagle3_real("tiny", recipe=recipe, max_steps=2)
        eagle3_real.train_eagle3_real("tiny", recipe={**recipe, "lr": 1e-3})
