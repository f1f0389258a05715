"""The zoo's proposer heads (chapters 05-06): Medusa's heads and both MTP variants on the frozen target, each
by its chapter's train_*. ``make zoo``'s heads stage runs them through the fair ladder
(``zoo_stages.ladder.train_heads_stage``: the regenerated text for a stated budget)."""

from __future__ import annotations

import time

import torch

from specdec_lib import zoo
from specdec_lib.training import Cosine
from specdec_lib.zoo_stages import common

# One entry per trained proposer. `config` is exactly its constructor's keyword arguments: the stage builds
# it with them and writes them to its card, from which the chapter's load_* rebuilds it.
HEADS = {  # name: (config, peak learning rate)
    "medusa": ({"num_heads": 3, "train_projection": False}, 2e-3),
    "mtp-independent": ({"num_heads": 3}, 1e-3),
    "mtp-sequential": ({"depth": 3}, 1e-3),
}


def train_heads(name: str, seed: int, steps: int = 484, minutes: float = 30, batch: int = 8, length: int = 256,
                max_batches: int | None = 4000, batches=None, kinds=None, data: dict | None = None,
                val_batches: int = 40):  # fmt: skip
    """Medusa heads (chapter 05) and both MTP variants (chapter 06) on the frozen target, each by its
    chapter's train_* on the same batches: AdamW, a 20-step warm-up and a cosine to 10% over `steps`
    steps (or `minutes`, whichever runs out first). The batches: `batches`, or the first of `max_batches`
    shuffled ones of the training split. kinds: which of the three to train (default: all; each one's
    seeded initial weights are the same either way); data: the text's summary for the cards;
    val_batches: how many validation batches measure each head's accuracy (fewer: a smoke test)."""
    from specdec_lib.medusa import MedusaHeads, head_accuracy, train_medusa
    from specdec_lib.mtp import IndependentMTP, SequentialMTP, depth_accuracy, train_mtp

    build = {
        "medusa": MedusaHeads.for_target,
        "mtp-independent": IndependentMTP,
        "mtp-sequential": SequentialMTP,
    }
    target, tok = common.frozen_target(name)
    torch.manual_seed(seed)  # the three are built first, in this order: their initial weights are seeded
    models = {k: build[k](target, **config) for k, (config, _) in HEADS.items()}
    if batches is None:
        batches = zoo.token_batches(tok, "train", batch, length, max_batches, seed=seed)
    val = zoo.token_batches(tok, "validation", batch, length, max_batches=val_batches, seed=seed)
    for k, m in models.items():
        if kinds is not None and k not in kinds:
            continue
        config, lr = HEADS[k]
        train = train_medusa if k == "medusa" else train_mtp
        t0 = time.time()
        history = train(
            m, target, batches, minutes * 60, lr, max_steps=steps, schedule=Cosine(20, 0.1), log_every=100
        )
        if k == "medusa":
            acc = head_accuracy(m, target, val, top=10)
            accuracy = {"top1": [round(float(a), 4) for a in acc[:, 0]],
                        "top_i": [[round(float(x), 4) for x in row] for row in acc]}  # fmt: skip
        else:
            accuracy = {"top1": [round(float(a), 4) for a in depth_accuracy(m, target, val)]}
        head = common.card_of(name, k, m, config, train, history, batch, length, t0, lr=lr,
                       schedule="AdamW, Cosine(20, 0.1)")  # fmt: skip
        card = {
            **head,
            "seed": seed,
            "validation_tokens_per_depth": f"{len(val)} batches of {batch}x{length} validation tokens, teacher-forced",
            "validation_accuracy": accuracy,
            **(
                {
                    "why_shared_projection": "the heads share the target's frozen LM head instead of "
                    "3 trained copies (6.3 MB more); in an 80-step A/B the trained copies were only "
                    "slightly better (head-1 top-1 0.237 vs 0.229)"
                }
                if k == "medusa"
                else {}
            ),
            "last_train_ce": [round(x, 4) for x in history[-1]],
            **({"data": data} if data else {}),
            "torch": torch.__version__,
        }
        zoo.save_weights(m, k, card, preset=name)
        common.log(f"{k}: {len(history)} steps, validation top-1 by depth {accuracy['top1']}")
