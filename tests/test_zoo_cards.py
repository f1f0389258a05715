"""The zoo's cards as data (specdec_lib.zoo_stages.cards): every committed card's fixed words are its stage's
declaration, filled with the numbers of the run that wrote it. A sentence changed in cards.py (or a card
edited by hand) fails here: the declarations and the cards the zoo ships cannot drift apart."""

import json
from pathlib import Path

import pytest

from specdec_lib import zoo
from specdec_lib.zoo_stages import cards

PYTHON = json.loads((Path(__file__).parent / "zoo_splits.json").read_text())["python"]  # the zoo's corpus


def declared(preset: str, weights: str) -> tuple[cards.Stage, dict, set[str]]:
    """The stage that wrote a committed card, the placeholders its run filled (its budget, and what the run
    passed or computed), and the declared fields that this card does not have."""
    from specdec_lib.eagle import EAGLE_VARIANTS
    from specdec_lib.zoo_stages import ladder
    from specdec_lib.zoo_stages.eagle import EAGLE3_RUNS

    base = {"python": PYTHON, "split_rule": zoo.SPLIT_RULE, "schedule": None}
    if (preset, weights) == ("smollm2-135m", "eagle3"):
        return cards.EAGLE3_REAL, cards.EAGLE3_REAL.budget, set()
    if weights in ("target", "draft"):  # their cards predate the schedule's words
        stage = cards.TARGET if weights == "target" else cards.DRAFT
        return stage, {**stage.budget, **base}, {"schedule"}
    if weights in ladder.HEADS:  # the medusa card alone says why its heads share the target's LM head
        return cards.HEADS, cards.HEADS.budget, set() if weights == "medusa" else {"why_shared_projection"}
    if weights in EAGLE_VARIANTS:  # only EAGLE itself is calibrated
        lacks = (
            set() if weights == "eagle" else {"calibration.how", "calibration.sampled_slot_acceptance.how"}
        )
        return cards.EAGLE, {**cards.EAGLE.budget, "w_cls": EAGLE_VARIANTS[weights]["w_cls"]}, lacks
    if weights == "eagle3":  # the ladder's run: its own units
        numbers = {**cards.EAGLE3.budget, "ttt_steps": EAGLE3_RUNS["eagle3"][1], "units": ladder.EAGLE3_UNITS}
        return cards.EAGLE3, numbers, set()
    if weights == "dflash":
        return cards.DFLASH, cards.DFLASH.budget, set()
    if weights == "dflash2":
        backbone = zoo.model_card(preset, "dflash")["parameters"]
        return cards.DFLASH2, {**cards.DFLASH2.budget, "name": preset, "backbone_parameters": backbone}, set()
    raise AssertionError(f"no stage is declared for {preset}/{weights}: add it to cards.py and here")


COMMITTED = sorted((p.parent.parent.name, p.parent.name) for p in zoo.ZOO_DIR.glob("*/*/card.json"))


def test_every_trained_family_has_a_committed_card():
    assert {w for _, w in COMMITTED} >= {"target", "draft", "medusa", "mtp-independent", "mtp-sequential",
                                         "eagle", "eagle-feature-only", "eagle-regression-only", "eagle3",
                                         "dflash", "dflash2"}  # fmt: skip
    assert ("smollm2-135m", "eagle3") in COMMITTED


@pytest.mark.parametrize("preset, weights", COMMITTED)
def test_a_committed_cards_fixed_words_are_its_stages_declaration(preset, weights):
    stage, numbers, lacks = declared(preset, weights)
    card = zoo.model_card(preset, weights)
    for path, text in stage.texts(**numbers).items():
        if path in lacks:
            with pytest.raises(KeyError):
                cards.at(card, path)
        else:
            assert cards.at(card, path) == text, f"{preset}/{weights}: {path}"


def test_every_declared_sentence_is_in_a_committed_card():
    """No declaration is dead: each of its fields is in some committed card (the base models' schedule only
    in the cards a new run writes: the committed ones predate it)."""
    found = {(id(stage), path) for p, w in COMMITTED for stage, _, lacks in [declared(p, w)]
             for path in stage.prose if path not in lacks}  # fmt: skip
    missing = [(name, path) for name, stage in vars(cards).items() if isinstance(stage, cards.Stage)
               for path in stage.prose if (id(stage), path) not in found]  # fmt: skip
    assert sorted(missing) == [("DRAFT", "schedule"), ("PROMPTS", "rule"), ("REGENERATED", "recipe"),
                               ("TARGET", "schedule")]  # fmt: skip  # the last three: checked below


def test_the_prompts_and_the_regenerated_texts_words_are_declared():
    assert json.loads(zoo.PROMPTS_FILE.read_text())["rule"] == cards.PROMPTS.text("rule")
    regenerated = cards.REGENERATED.budget
    for weights in ("dflash", "dflash2"):
        data = zoo.model_card("tiny-code", weights)["data"]
        for split, seed, summary in (("train", 0, data), ("validation", 1, data.get("validation_set"))):
            if summary is not None:
                words = cards.REGENERATED.text("recipe", **{**regenerated, "prompt_tokens": list(regenerated["prompt_tokens"])},
                                               split=split, seed=seed)  # fmt: skip
                assert summary["recipe"] == words, (weights, split)


def test_the_real_models_card_records_the_declared_recipe():
    card = zoo.model_card("smollm2-135m", "eagle3")
    assert card["recipe"] == cards.EAGLE3_REAL.budget


def test_a_budget_takes_only_its_own_names():
    assert cards.DFLASH.budget_with(steps=3).steps == 3 and cards.DFLASH.budget_with().steps == 2863
    with pytest.raises(TypeError, match="stepz"):
        cards.DFLASH.budget_with(stepz=3)
