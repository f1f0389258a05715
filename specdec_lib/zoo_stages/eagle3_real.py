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
from specdec_lib.zoo_stages import chat_data, common

RECIPE = {  # the shipped drafter's recipe: what a resumed run must match
    "steps": 1000,  # ~1.2 epochs of the 12 chunks' text; ~50 min at ~20 steps a minute on 2 cores
    "batch": 8,
    "length": 256,
    "ttt_steps": 3,  # 4 costs a third more per step; the data, not the depth, is what the old drafter lacked
    "draft_vocab": 8192,
    "lr": 2e-3,
    "chunks": 12,
    "seed": 0,
}


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
    opt, done, history, spent = adamw(drafter, recipe["lr"], (0.9, 0.95)), 0, [], 0.0
    path = checkpoint_path(name)
    if path.exists():
        state = torch.load(path, weights_only=False)
        if state["recipe"] != recipe:
            raise ValueError(
                f"{path} was trained with another recipe {state['recipe']}: delete it to start over"
            )
        drafter.load_state_dict(state["drafter"])
        opt.load_state_dict(state["optimizer"])
        done, history, spent = state["done"], state["history"], state["seconds"]
        chat_data.log(f"eagle3 ({name}): resuming at step {done} of {recipe['steps']}")
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
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"recipe": recipe, "drafter": drafter.state_dict(), "optimizer": opt.state_dict(),
                    "done": done, "history": history, "seconds": spent}, path)  # fmt: skip
        return None
    card = finish(name, target, tok, drafter, counts, recipe, history, spent, chunks)
    path.unlink(missing_ok=True)
    return card


def tokens_of(name: str, chunks: list[int]) -> int:
    return sum(chat_data.answer_chunk(name, i)["meta"]["tokens"] for i in chunks)


def finish(name, target, tok, drafter, counts, recipe, history, seconds, chunks) -> dict:
    """Measure the trained drafter as every EAGLE-3 card does (zoo_stages.eagle.eagle_snapshot_eval on 30
    validation instructions), write its weights and card into the zoo, and fit its sampled slots (chapter 08)."""
    from specdec_lib.eagle3 import train_eagle3
    from specdec_lib.zoo_stages.eagle import calibrate_sampled_slots, eagle_snapshot_eval

    # The drafter this one replaces, for the card: what more data and cached features bought.
    before = zoo.model_card(name, "eagle3") if zoo.has_weights("eagle3", name) else None
    texts = common.validation_greedy_texts(target, tok)
    res = eagle_snapshot_eval(drafter, target, texts, [s[:st] for s, st in zip(*texts)], eos=tok.eos_token_id)
    data = chat_data.summary(name, chunks)
    card = common.card_of(
        name, "eagle3", drafter, {"feature_layers": list(drafter.feature_layers)}, train_eagle3, history,
        recipe["batch"], recipe["length"], time.time(), loss="as the tiny-code eagle3 card's: 0.8^s-weighted soft "
        f"CE over the draft vocabulary, training-time test, {recipe['ttt_steps']} steps",
        schedule=f"AdamW(0.9, 0.95), lr {recipe['lr']}, warmup-stable-decay (20-step warm-up, linear decay to 10% "
        f"over the last 20%) over {recipe['steps']} steps", seed=recipe["seed"],
    )  # fmt: skip
    card.update(
        {
            "wall_minutes": round(seconds / 60, 1),
            "recipe": recipe,
            "training": {
                "how": "from cached target features (chat_data: the target's taps, last layer and argmax kept "
                "as it wrote the text; cached_inputs), in resumable runs",
                "steps_per_minute": round(len(history) / (seconds / 60), 2),
                "tokens_per_minute": round(len(history) * recipe["batch"] * recipe["length"] / (seconds / 60)),
            },
            "data": {
                "recipe": "the target's own answers (one greedy, one at T = 1) to the project's training "
                "instructions (zoo.instructions('train'): templates x topics; validation and test topics held out), "
                "in the chat template; windows of each chunk's text end to end",
                **data,
                "epochs_seen": round(len(history) * recipe["batch"] * recipe["length"] / data["total_tokens"], 2),
            },
            "draft_vocab": len(drafter.d2t),
            "draft_vocabulary": {
                "rule": "the ids most frequent in the training text (prompts included)",
                "coverage_of_training_tokens": round(
                    float(counts.sort(descending=True).values[: len(drafter.d2t)].sum() / counts.sum()), 4
                ),
            },
            "loss_curve": [{"step": i, "losses": [round(x, 3) for x in history[i]]} for i in range(0, len(history), 50)],
            "rank_acceptance": {"how": "acc[d][r] along the target's greedy answers to 30 validation instructions, depth 8", "acc": res["acc"]},
            "calibration": {"greedy_temperature": res["greedy_temperature"]},
            "validation": {
                "how": "greedy decoding with EAGLE-2's tree (16 nodes, depth 8, top-4, fitted temperature) on 30 "
                "validation instructions, 64 new tokens",
                "tau": res["tau_greedy_eagle2_tree"],
                "acceptance_by_depth": res["acceptance_by_depth"],
            },
            "torch": torch.__version__,
        }
    )  # fmt: skip
    if before is not None:
        card["replaces"] = {
            "steps": before["steps"],
            "tokens_seen": before["tokens_seen"],
            "wall_minutes": before["wall_minutes"],
            "training_tokens": before["data"]["total_tokens"],
            "validation_tau": before["validation"]["tau"],
        }
    zoo.save_weights(drafter, "eagle3", card, preset=name)
    calibrate_sampled_slots(name, "eagle3", texts)
    chat_data.log(f"eagle3 ({name}) saved; validation tau {res['tau_greedy_eagle2_tree']}")
    return card
