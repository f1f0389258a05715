"""EAGLE-3 for a real preset (SmolLM2-135M, issue 49): chapter 09's train_eagle3 on the target's own answers
(chat_data's chunks), from cached target features, in resumable runs.

The run is a fixed number of optimiser steps with one warmup-stable-decay schedule over all of them, cut into
runs of at most ``minutes`` each: a run continues from the checkpoint the previous one left in
``zoo.cache_dir()`` (the drafter, the optimiser and where in the batches it stood) and writes its own. The
run that reaches the last step measures the drafter on the validation instructions, saves its weights and
card into the zoo and deletes the checkpoint. ``python -m specdec_lib.zoo_train --name smollm2-135m --stage
eagle3`` runs one such run; repeat it until the card is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from specdec_lib import hf, zoo
from specdec_lib.training import WarmupStableDecay, adamw
from specdec_lib.zoo_stages import cards, chat_data, common

RECIPE = cards.EAGLE3_REAL.budget  # the shipped drafter's recipe: what a resumed run must match


@dataclass(frozen=True)
class Resumed:
    """A schedule seen from a run that starts at step `start` of `total`: chapter 05's loop counts its own
    steps from 0, the schedule must see the whole run's."""

    schedule: object
    start: int
    total: int

    def __call__(self, step: int, progress: float) -> float:
        at = self.start + step
        return self.schedule(at, at / self.total)


def checkpoint_path(name: str):
    return zoo.cache_dir() / "checkpoints" / f"{name}-eagle3.pt"


def build(name: str, recipe: dict):
    """The frozen target, the draft vocabulary (the ids most frequent in the chunks' text) and a fresh drafter."""
    from specdec_lib.eagle3 import Eagle3Drafter, draft_vocabulary

    target, _, tok = zoo.load_pair(name, device="cpu")
    target.requires_grad_(False)
    text = torch.cat(
        [s for i in range(recipe["chunks"]) for s in chat_data.answer_chunk(name, i)["sequences"]]
    )
    counts = torch.bincount(text, minlength=hf.vocab_size(target))
    d2t, _ = draft_vocabulary(counts, recipe["draft_vocab"])
    torch.manual_seed(recipe["seed"])
    return target, tok, Eagle3Drafter(target, d2t), counts


def train_eagle3_real(
    name: str, minutes: float = 40, recipe: dict | None = None, max_steps: int | None = None
):
    """One run of at most `minutes` (see the module's docstring). `max_steps` caps this run's steps (tests)."""
    from specdec_lib.eagle3 import train_eagle3

    recipe = {**RECIPE, **(recipe or {})}
    chunks = chat_data.write_chunks(name, recipe["chunks"])
    if len(chunks) < recipe["chunks"]:
        raise RuntimeError(f"only chunks {chunks} of {recipe['chunks']} are written")
    target, tok, drafter, counts = build(name, recipe)
    opt = adamw(drafter, recipe["lr"], (0.9, 0.95))
    done, history, spent = resume(name, recipe, drafter, opt)
    epochs = -(-recipe["steps"] * recipe["batch"] * recipe["length"] // tokens_of(name, chunks)) + 1
    batches = chat_data.feature_batches(  # from where the previous runs stopped
        name, chunks, target, recipe["batch"], recipe["length"], epochs, recipe["seed"], start=done
    )
    left, t0 = recipe["steps"] - done, time.time()
    history += train_eagle3(
        drafter, target, batches, minutes * 60, recipe["ttt_steps"], recipe["lr"], optimizer=opt,
        max_steps=min(left, max_steps or left), schedule=Resumed(WarmupStableDecay(warmup=20), done, recipe["steps"]),
    )  # fmt: skip
    spent += time.time() - t0
    done = len(history)
    chat_data.log(f"eagle3 ({name}): step {done} of {recipe['steps']} after {spent / 60:.1f} min of training")
    if done < recipe["steps"]:
        path = checkpoint_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"recipe": recipe, "drafter": drafter.state_dict(), "optimizer": opt.state_dict(),
                    "done": done, "history": history, "seconds": spent}, path)  # fmt: skip
        return None
    card = finish(name, target, tok, drafter, counts, recipe, history, spent, chunks)
    checkpoint_path(name).unlink(missing_ok=True)
    return card


def resume(name: str, recipe: dict, drafter, opt) -> tuple[int, list, float]:
    """Load the previous run's checkpoint, if any, into `drafter` and `opt`: (steps done, loss log, seconds
    of training), (0, [], 0.0) for a first run. A checkpoint of another recipe is an error."""
    path = checkpoint_path(name)
    if not path.exists():
        return 0, [], 0.0
    state = torch.load(path, weights_only=False)
    if state["recipe"] != recipe:
        raise ValueError(f"{path} was trained with another recipe {state['recipe']}: delete it to start over")
    drafter.load_state_dict(state["drafter"])
    opt.load_state_dict(state["optimizer"])
    chat_data.log(f"eagle3 ({name}): resuming at step {state['done']} of {recipe['steps']}")
    return state["done"], state["history"], state["seconds"]


def tokens_of(name: str, chunks: list[int]) -> int:
    return sum(chat_data.answer_chunk(name, i)["meta"]["tokens"] for i in chunks)


def finish(name, target, tok, drafter, counts, recipe, history, seconds, chunks) -> dict:
    """Measure the trained drafter as every EAGLE-3 card does (zoo_stages.eagle.eagle_snapshot_eval on 30
    validation instructions), write its weights and card into the zoo, and fit its sampled slots (chapter 08)."""
    from specdec_lib.zoo_stages.eagle import calibrate_sampled_slots, eagle_snapshot_eval

    # The drafter this one replaces, for the card: what more data and cached features bought.
    before = zoo.model_card(name, "eagle3") if zoo.has_weights("eagle3", name) else None
    texts = common.validation_greedy_texts(target, tok)
    res = eagle_snapshot_eval(drafter, target, texts, [s[:st] for s, st in zip(*texts)], eos=tok.eos_token_id)
    card = real_card(name, drafter, counts, recipe, history, seconds, chat_data.summary(name, chunks), res)
    if before is not None:
        card["replaces"] = replaced(before)
    zoo.save_weights(drafter, "eagle3", card, preset=name)
    calibrate_sampled_slots(name, "eagle3", texts)
    chat_data.log(f"eagle3 ({name}) saved; validation tau {res['tau_greedy_eagle2_tree']}")
    return card


def real_card(name, drafter, counts, recipe, history, seconds, data, res) -> dict:
    """The real preset's EAGLE-3 card: the common fields, the recipe in cards.EAGLE3_REAL's words, the
    training speed, the data (`data`: chat_data.summary's) and the measured numbers (`res`)."""
    from specdec_lib.eagle3 import train_eagle3
    from specdec_lib.zoo_stages.eagle import draft_vocabulary_coverage

    text = cards.EAGLE3_REAL.texts(**recipe)
    card = common.card_of(name, "eagle3", drafter, {"feature_layers": list(drafter.feature_layers)}, train_eagle3,
                          history, recipe["batch"], recipe["length"], time.time(), loss=text["loss"],
                          schedule=text["schedule"], seed=recipe["seed"])  # fmt: skip
    tokens, minutes = len(history) * recipe["batch"] * recipe["length"], seconds / 60
    return {
        **card,
        "wall_minutes": round(minutes, 1),
        "recipe": recipe,
        "training": {
            "how": text["training.how"],
            "steps_per_minute": round(len(history) / minutes, 2),
            "tokens_per_minute": round(tokens / minutes),
        },  # fmt: skip
        "data": {
            "recipe": text["data.recipe"],
            **data,
            "epochs_seen": round(tokens / data["total_tokens"], 2),
        },
        "draft_vocab": len(drafter.d2t),
        "draft_vocabulary": {
            "rule": text["draft_vocabulary.rule"],
            "coverage_of_training_tokens": draft_vocabulary_coverage(counts, len(drafter.d2t)),
        },  # fmt: skip
        "loss_curve": common.curve_of(history),
        "rank_acceptance": {"how": text["rank_acceptance.how"], "acc": res["acc"]},
        "calibration": {"greedy_temperature": res["greedy_temperature"]},
        "validation": {
            "how": text["validation.how"],
            "tau": res["tau_greedy_eagle2_tree"],
            "acceptance_by_depth": res["acceptance_by_depth"],
        },  # fmt: skip
        "torch": torch.__version__,
    }


def replaced(before: dict) -> dict:
    """What the card of the drafter a new one replaces said: its budget, its text's size, its tau."""
    return {
        "steps": before["steps"],
        "tokens_seen": before["tokens_seen"],
        "wall_minutes": before["wall_minutes"],
        "training_tokens": before["data"]["total_tokens"],
        "validation_tau": before["validation"]["tau"],
    }
