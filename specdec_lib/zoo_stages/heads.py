"""The zoo's proposer heads (chapters 05-06): Medusa's heads and both MTP variants on the frozen target, each
by its chapter's train_*. ``make zoo``'s heads stage runs them through the fair ladder
(``zoo_stages.ladder.train_heads_stage``: the regenerated text for a stated budget). The budget and the
cards' words: ``zoo_stages.cards.HEADS``."""

from __future__ import annotations

import time

import torch

from specdec_lib import zoo
from specdec_lib.zoo_stages import cards, common

# One entry per trained proposer. `config` is exactly its constructor's keyword arguments: the stage builds
# it with them and writes them to its card, from which the chapter's load_* rebuilds it.
HEADS = {  # name: (config, peak learning rate)
    "medusa": ({"num_heads": 3, "train_projection": False}, 2e-3),
    "mtp-independent": ({"num_heads": 3}, 1e-3),
    "mtp-sequential": ({"depth": 3}, 1e-3),
}


def build(k: str):
    """The constructor of the HEADS entry `k` (its chapter's module)."""
    from specdec_lib.medusa import MedusaHeads
    from specdec_lib.mtp import IndependentMTP, SequentialMTP

    return {
        "medusa": MedusaHeads.for_target,
        "mtp-independent": IndependentMTP,
        "mtp-sequential": SequentialMTP,
    }[k]


def trainer(k: str):
    """The chapter's train_* of the HEADS entry `k`."""
    from specdec_lib.medusa import train_medusa
    from specdec_lib.mtp import train_mtp

    return train_medusa if k == "medusa" else train_mtp


def train_heads(name: str, seed: int, batches=None, kinds=None, data: dict | None = None, **budget):
    """Medusa heads (chapter 05) and both MTP variants (chapter 06) on the frozen target, each by its
    chapter's train_* on the same batches: AdamW, a 20-step warm-up and a cosine to 10% over `steps`
    steps (or `minutes`, whichever runs out first). The batches: `batches`, or the first of `max_batches`
    shuffled ones of the training split. kinds: which of the three to train (default: all; each one's
    seeded initial weights are the same either way); data: the text's summary for the cards; budget: any
    of cards.HEADS's (steps, minutes, max_batches, val_batches: fewer validation batches for a smoke test)."""
    b = cards.HEADS.budget_with(**budget)
    target, tok = common.frozen_target(name)
    torch.manual_seed(seed)  # the three are built first, in this order: their initial weights are seeded
    models = {k: build(k)(target, **config) for k, (config, _) in HEADS.items()}
    if batches is None:
        batches = zoo.token_batches(tok, "train", b.batch, b.length, b.max_batches, seed=seed)
    val = zoo.token_batches(tok, "validation", b.batch, b.length, max_batches=b.val_batches, seed=seed)
    for k, m in models.items():
        if kinds is None or k in kinds:
            train_head(name, seed, k, m, target, batches, val, b, data)


def train_head(name: str, seed: int, k: str, m, target, batches, val, b, data: dict | None) -> None:
    """Train one of HEADS (`m`, built from its config) by its chapter's train_*, measure it, save it."""
    config, lr = HEADS[k]
    train = trainer(k)
    t0 = time.time()
    history = train(
        m, target, batches, b.minutes * 60, lr, max_steps=b.steps, schedule=b.schedule, log_every=100
    )
    accuracy = validation_accuracy(k, m, target, val)
    card = heads_card(name, seed, k, m, config, lr, train, history, val, t0, b, accuracy, data)
    zoo.save_weights(m, k, card, preset=name)
    common.log(f"{k}: {len(history)} steps, validation top-1 by depth {accuracy['top1']}")


def validation_accuracy(k: str, m, target, val) -> dict:
    """Teacher-forced accuracy by depth on `val`: top-1, and for Medusa top-1 .. top-10 (top_i)."""
    from specdec_lib.medusa import head_accuracy
    from specdec_lib.mtp import depth_accuracy

    if k == "medusa":
        acc = head_accuracy(m, target, val, top=10)
        return {"top1": [round(float(a), 4) for a in acc[:, 0]],
                "top_i": [[round(float(x), 4) for x in row] for row in acc]}  # fmt: skip
    return {"top1": [round(float(a), 4) for a in depth_accuracy(m, target, val)]}


def heads_card(name, seed, k, m, config, lr, train, history, val, t0, b, accuracy, data) -> dict:
    """A head's card: the common fields, its recipe and cards.HEADS's words, its validation accuracy."""
    text = cards.HEADS.texts(**{**vars(b), "val_batches": len(val)})
    head = common.card_of(name, k, m, config, train, history, b.batch, b.length, t0, lr=lr,
                          schedule=text["schedule"])  # fmt: skip
    return {
        **head,
        "seed": seed,
        "validation_tokens_per_depth": text["validation_tokens_per_depth"],
        "validation_accuracy": accuracy,
        **({"why_shared_projection": text["why_shared_projection"]} if k == "medusa" else {}),
        "last_train_ce": [round(x, 4) for x in history[-1]],
        **({"data": data} if data else {}),
        "torch": torch.__version__,
    }
