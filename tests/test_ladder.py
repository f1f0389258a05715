"""The fair ladder's stages (issue 51, specdec_lib.zoo_stages.ladder): trained on the regenerated text for a
stated budget, measured by the same held-out decode, saved where the registry loads them from."""

import hashlib

import torch

import specdec_lib as sd
import specdec_lib.zoo_train as zoo_train
from specdec_lib import zoo
from specdec_lib.zoo_stages import ladder


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _scratch_zoo(monkeypatch, tmp_path):
    """A zoo in tmp_path that shares the shipped frozen pair (symlinks) and takes the drafters written."""
    mine = tmp_path / "tiny-code"
    mine.mkdir()
    for part in ("target", "draft"):
        (mine / part).symlink_to(zoo.ZOO_DIR / "tiny-code" / part)
    monkeypatch.setattr(zoo, "ZOO_DIR", tmp_path)


def _stand_in_text(monkeypatch, tok, windows=24):
    """The regenerated windows and the greedy validation texts, small stand-ins (the real ones take minutes)."""
    data = torch.randint(0, len(tok), (windows, 256), generator=torch.Generator().manual_seed(0))
    asked = []

    def regenerated(name, split="train", **kw):
        asked.append(split)
        return data, {"recipe": "a stand-in", "windows": len(data), "generated_tokens": 0}

    texts = (
        [torch.tensor(tok.encode(p))[-40:] for p in zoo.heldout_prompts(2, split="validation")],
        [24, 24],
    )
    monkeypatch.setattr(zoo_train, "regenerated_windows", regenerated)
    monkeypatch.setattr(zoo_train, "validation_greedy_texts", lambda target, tok: texts)
    return asked, texts


def test_the_eagle3_stage_runs_chapter_09s_experiment_on_the_regenerated_text(monkeypatch, tmp_path):
    shipped = zoo.ZOO_DIR / "tiny-code"
    before = _digest(shipped / "eagle3" / "model.safetensors")
    _scratch_zoo(monkeypatch, tmp_path)
    monkeypatch.setitem(ladder.BUDGETS, "eagle3", 6 * 8 * 256)  # 6 steps of 8 x 256, one a unit
    asked, _ = _stand_in_text(monkeypatch, zoo.load_pair("tiny-code")[2])
    card = ladder.train_eagle3_ladder(ladder_prompts=2)
    assert asked == ["train"] and card["data"]["text"] == "regenerated"
    assert (
        card["steps"] == 6 and card["tokens_seen"] == card["budget"]["tokens"] and card["budget"]["reached"]
    )
    exp = card["experiments"]
    assert exp["scaling_units"] == [2, 6] and exp["ablation_units"] == 6  # 1/3 and the whole budget here
    assert set(exp["results"]) == {"eagle:2", "eagle:6", "eagle3:2", "eagle3:6", "eagle3-last-layer:6",
                                   "eagle3-teacher-forced:6"}  # fmt: skip
    assert set(card["train_minutes"]) >= {"eagle", "eagle3", "eagle3-last-layer", "eagle3-teacher-forced"}
    assert card["ladder"]["spec"] == "eagle3:16" and card["ladder"]["greedy"] >= 1
    assert "sampled_slot_acceptance" in card["calibration"]
    assert _digest(shipped / "eagle3" / "model.safetensors") == before
    target, draft, _ = zoo.load_pair("tiny-code")
    loaded = sd.make_proposer("eagle3:16", target, draft).drafter.state_dict()
    state = zoo.load_weights("eagle3", "tiny-code")[0]
    assert all(torch.equal(loaded[k].float(), v.float()) for k, v in state.items())


def test_the_eagle_stage_learns_from_the_regenerated_text_for_its_budget(monkeypatch, tmp_path):
    shipped = zoo.ZOO_DIR / "tiny-code"
    before = _digest(shipped / "eagle" / "model.safetensors")
    mine = tmp_path / "tiny-code"
    mine.mkdir()
    for part in ("target", "draft"):  # the frozen pair, shared; the drafter goes to a scratch zoo
        (mine / part).symlink_to(shipped / part)
    monkeypatch.setattr(zoo, "ZOO_DIR", tmp_path)
    windows = torch.randint(0, 4096, (24, 256), generator=torch.Generator().manual_seed(0))
    asked = []

    def regenerated(name, split="train", **kw):  # the target's own text, here a stand-in of 24 windows
        asked.append(split)
        return windows, {"recipe": "a stand-in", "windows": len(windows), "generated_tokens": 0}

    monkeypatch.setattr(zoo_train, "regenerated_windows", regenerated)
    monkeypatch.setitem(ladder.BUDGETS, "eagle", 4 * 8 * 256)  # 4 steps of 8 x 256
    target, _, tok = zoo.load_pair("tiny-code")
    texts = (
        [torch.tensor(tok.encode(p))[-40:] for p in zoo.heldout_prompts(2, split="validation")],
        [24, 24],
    )
    card = ladder.train_eagle_ladder(texts=texts, val_batches=1, ladder_prompts=2)
    assert asked == ["train"] and card["data"]["text"] == "regenerated"
    assert card["steps"] == 4 and card["tokens_seen"] == card["budget"]["tokens"] == 4 * 8 * 256
    assert card["budget"]["reached"] and "greedy_temperature" in card["calibration"]
    assert (
        card["ladder"]["spec"] == "eagle:16" and card["ladder"]["greedy"] >= 1 and card["ladder"]["t1"] >= 1
    )
    assert _digest(shipped / "eagle" / "model.safetensors") == before  # the shipped drafter is untouched
    # the registry loads the new drafter from the zoo it was saved to
    target, draft, _ = zoo.load_pair("tiny-code")
    proposer = sd.make_proposer("eagle:16", target, draft)
    state = zoo.load_weights("eagle", "tiny-code")[0]
    loaded = proposer.drafter.state_dict()
    assert all(torch.equal(loaded[k].float(), v.float()) for k, v in state.items())
