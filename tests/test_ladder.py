"""The fair ladder's stages (issue 51, specdec_lib.zoo_stages.ladder): trained on the regenerated text for a
stated budget, measured by the same held-out decode, saved where the registry loads them from."""

import hashlib
import json
from pathlib import Path

import pytest
import torch

import specdec_lib as sd
from specdec_lib import bench, zoo
from specdec_lib.zoo_stages import common, ladder


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _scratch_zoo(monkeypatch, tmp_path):
    """A zoo in tmp_path that shares the shipped frozen pair (symlinks) and takes the drafters written, and a
    cache of its own (checkpoints)."""
    mine = tmp_path / "tiny-code"
    mine.mkdir(parents=True)
    for part in ("target", "draft"):
        (mine / part).symlink_to((zoo.ZOO_DIR / "tiny-code" / part).resolve())
    monkeypatch.setattr(zoo, "ZOO_DIR", tmp_path)
    monkeypatch.setenv("SPECDEC_CACHE_DIR", str(tmp_path / "cache"))


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
    # patched where they live: every stage calls them through the module common (common.regenerated_windows)
    monkeypatch.setattr(common, "regenerated_windows", regenerated)
    monkeypatch.setattr(common, "validation_greedy_texts", lambda target, tok: texts)
    return asked, texts


def test_the_eagle3_stage_runs_chapter_09s_experiment_and_resumes_where_a_run_stopped(monkeypatch, tmp_path):
    """Chapter 09's experiment on the regenerated text, saved where the registry loads it from. The stage
    is longer than a session's job may be: a run stopped between drafters (here by an interrupt in the
    third) goes on from the checkpoints, and ends with what the unbroken run got."""
    shipped = zoo.ZOO_DIR / "tiny-code"
    before = _digest(shipped / "eagle3" / "model.safetensors")
    monkeypatch.setitem(ladder.BUDGETS, "eagle3", 4 * 8 * 256)  # 4 steps of 8 x 256, one a unit
    asked, _ = _stand_in_text(monkeypatch, zoo.load_pair("tiny-code")[2])
    _scratch_zoo(monkeypatch, tmp_path / "unbroken")
    card = ladder.train_eagle3_ladder(ladder_prompts=1, minutes=None)
    assert asked == ["train"] and card["data"]["text"] == "regenerated"
    assert (
        card["steps"] == 4 and card["tokens_seen"] == card["budget"]["tokens"] and card["budget"]["reached"]
    )
    exp = card["experiments"]
    assert exp["scaling_units"] == [2, 4] and exp["ablation_units"] == 4  # a scaling point, the whole budget
    assert set(exp["results"]) == {"eagle:2", "eagle:4", "eagle3:2", "eagle3:4", "eagle3-last-layer:4",
                                   "eagle3-teacher-forced:4"}  # fmt: skip
    assert set(card["train_minutes"]) >= {"eagle", "eagle3", "eagle3-last-layer", "eagle3-teacher-forced"}
    assert card["ladder"]["spec"] == "eagle3:16" and card["ladder"]["greedy"] >= 1
    assert "sampled_slot_acceptance" in card["calibration"]
    assert _digest(shipped / "eagle3" / "model.safetensors") == before
    target, draft, _ = zoo.load_pair("tiny-code")
    loaded = sd.make_proposer("eagle3:16", target, draft).drafter.state_dict()
    unbroken_state = zoo.load_weights("eagle3", "tiny-code")[0]
    assert all(torch.equal(loaded[k].float(), v.float()) for k, v in unbroken_state.items())

    checkpoints = lambda: list((tmp_path / "resumed" / "cache" / "checkpoints").glob("*/*.pt"))  # noqa: E731
    _scratch_zoo(monkeypatch, tmp_path / "resumed")
    calls, at_budgets = [], common.at_budgets

    def counted(*a, stop_at=None, **kw):
        calls.append(1)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return at_budgets(*a, **kw)

    monkeypatch.setattr(common, "at_budgets", lambda *a, **kw: counted(*a, stop_at=3, **kw))
    with pytest.raises(KeyboardInterrupt):
        ladder.train_eagle3_ladder(ladder_prompts=1, minutes=None)
    assert len(checkpoints()) == 2  # two drafters done before the interrupt
    calls.clear()
    monkeypatch.setattr(common, "at_budgets", counted)
    resumed = ladder.train_eagle3_ladder(ladder_prompts=1, minutes=None)
    assert len(calls) == 2  # the resumed run trained only the two drafters left
    assert resumed["experiments"]["results"] == exp["results"]
    state = zoo.load_weights("eagle3", "tiny-code")[0]
    assert all(torch.equal(state[k], unbroken_state[k]) for k in state)
    assert not checkpoints()  # removed once the card is written


def test_a_heads_stage_trains_one_drafter_on_the_regenerated_text(monkeypatch, tmp_path):
    _scratch_zoo(monkeypatch, tmp_path)
    monkeypatch.setitem(ladder.BUDGETS, "mtp-sequential", 3 * 8 * 256)
    asked, _ = _stand_in_text(monkeypatch, zoo.load_pair("tiny-code")[2])
    card = ladder.train_heads_ladder("mtp-sequential", ladder_prompts=2, val_batches=1)
    assert asked == ["train"] and card["data"]["text"] == "regenerated" and card["steps"] == 3
    assert card["budget"] == {"tokens": 3 * 8 * 256, "reached": True}
    assert card["ladder"]["spec"] == "mtp-sequential" and card["ladder"]["greedy"] >= 1
    assert not (tmp_path / "tiny-code" / "medusa").exists()  # one drafter a stage
    with pytest.raises(ValueError, match="kind must be one of"):
        ladder.train_heads_ladder("eagle")


def test_the_eagle_stage_learns_from_the_regenerated_text_for_its_budget(monkeypatch, tmp_path):
    shipped = zoo.ZOO_DIR / "tiny-code"
    before = _digest(shipped / "eagle" / "model.safetensors")
    _scratch_zoo(monkeypatch, tmp_path)
    monkeypatch.setitem(ladder.BUDGETS, "eagle", 4 * 8 * 256)  # 4 steps of 8 x 256
    asked, texts = _stand_in_text(monkeypatch, zoo.load_pair("tiny-code")[2])
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


def _report(taus, speedups):
    """A benchmark report with the ladder's methods at one sampling."""
    methods = [m for _, lower, upper, _ in ladder.RUNGS for m in (lower, upper)]
    return {
        "drafters": bench.drafters_of("tiny-code", methods),
        "results": {"0": {m: {"tau": taus[m], "speedup": speedups[m]} for m in methods}},
    }


def test_a_rung_holds_when_its_tau_ratio_reaches_the_seeds_claim():
    taus = {"eagle:16": 4.0, "eagle2:16": 4.0, "eagle3:16": 6.0, "dflash:16": 5.0, "dflash2:16+selector": 6.0}
    speed = {
        "eagle:16": 1.1,
        "eagle2:16": 1.0,
        "eagle3:16": 1.2,
        "dflash:16": 1.3,
        "dflash2:16+selector": 1.5,
    }
    rows = {r["rung"]: r for r in ladder.ladder_rungs(_report(taus, speed))}
    assert rows["EAGLE-2 above EAGLE"]["holds"] and not rows["EAGLE-2 above EAGLE"]["faster"]  # a tie holds
    assert rows["EAGLE-3 above EAGLE-2"]["holds"] and rows["EAGLE-3 above EAGLE-2"]["tau_ratio"] == 1.5
    assert not rows["DFlash above EAGLE-3"]["holds"] and rows["DFlash above EAGLE-3"]["faster"]
    assert not rows["DFlash 2 21% above DFlash"]["holds"]  # +20% is short of the seeds' +21%
    taus["dflash2:16+selector"] = 5.0 * 1.21
    assert {r["rung"]: r for r in ladder.ladder_rungs(_report(taus, speed))}["DFlash 2 21% above DFlash"][
        "holds"
    ]


def test_the_ladder_refuses_a_report_without_its_methods():
    report = _report(dict.fromkeys(ladder.WEIGHTS, 2.0), dict.fromkeys(ladder.WEIGHTS, 1.0))
    del report["results"]["0"]["eagle3:16"]
    with pytest.raises(ValueError, match="eagle3:16"):
        ladder.ladder_rungs(report)


def test_the_ladder_table_reads_each_drafters_facts_from_its_card():
    text = ladder.ladder_markdown(
        _report(dict.fromkeys(ladder.WEIGHTS, 2.0), dict.fromkeys(ladder.WEIGHTS, 1.0))
    )
    for method in ladder.WEIGHTS:
        facts = ladder.drafter_facts(method)
        card = zoo.model_card("tiny-code", facts["weights"])
        assert facts["text"] in ("regenerated", "corpus") and facts["parameters"] > 0
        if method != "dflash2:16+selector":  # its tokens are the frozen DFlash's and its own run's
            assert facts["tokens"] == card["tokens_seen"]
        assert f"| {method} | {facts['weights']} | {facts['text']} |" in text


def test_the_ladder_refuses_a_report_of_other_drafters():
    report = _report(dict.fromkeys(ladder.WEIGHTS, 2.0), dict.fromkeys(ladder.WEIGHTS, 1.0))
    assert set(report["drafters"]) == {"eagle", "eagle3", "dflash", "dflash2"}
    report["drafters"]["eagle3"] = "0" * 16  # measured before EAGLE-3 was retrained
    with pytest.raises(ValueError, match="eagle3"):
        ladder.ladder_rungs(report)
    del report["drafters"]  # a report from before the record
    with pytest.raises(ValueError, match="rerun the benchmark"):
        ladder.ladder_markdown(report)


def test_each_drafters_recipe_line_is_read_from_its_card():
    for weights in ("eagle", "eagle-feature-only", "eagle3", "dflash", "dflash2", "medusa", "mtp-sequential"):
        card = zoo.model_card("tiny-code", weights)
        line = zoo.recipe(card)
        assert (
            line.startswith(f"{weights}: ") and zoo.TEXTS[card.get("data", {}).get("text", "corpus")] in line
        )
        steps = card["steps"] if isinstance(card["steps"], dict) else {"": card["steps"]}
        assert all(f"{n} steps" in line for n in steps.values())
    with pytest.raises(ValueError, match="the web"):  # an unknown text is not described silently
        zoo.recipe({**zoo.model_card("tiny-code", "eagle"), "data": {"text": "the web"}})


def test_dflash2s_minutes_are_its_backbones_and_its_mixed_runs(monkeypatch):
    real = zoo.model_card
    assert ladder.drafter_facts("dflash2:16+selector")["minutes"] is None or "train_minutes" in real(
        "tiny-code", "dflash2"
    )  # a card from before the stage timed its runs: no minutes, and the table says so
    timed = {"mixed": 10.0, "plain": 6.0}
    monkeypatch.setattr(
        zoo,
        "model_card",
        lambda name, weights: {
            **real(name, weights),
            **({"train_minutes": timed} if weights == "dflash2" else {}),
        },
    )
    facts = ladder.drafter_facts("dflash2:16+selector")
    assert facts["minutes"] == round(real("tiny-code", "dflash")["wall_minutes"] + 10.0, 1)


def test_the_committed_report_measured_the_drafters_the_zoo_ships():
    """Chapter 12's ladder reads book/data/bench.json next to the cards: a drafter retrained without a new
    benchmark run fails here, not silently in the table (and every method's weights count, not only the
    ladder's)."""
    report = json.loads((Path(__file__).resolve().parents[1] / "book" / "data" / "bench.json").read_text())
    assert report["drafters"] == bench.drafters_of("tiny-code", report["methods"])
    rows = ladder.ladder_rungs(report)
    assert {r["sampling"] for r in rows} == {"0", "0.7:0.9", "1"} and len(rows) == 3 * len(ladder.RUNGS)
