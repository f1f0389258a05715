"""Train the offline zoo in one command: ``python -m specdec_lib.zoo_train`` (about 330 min on 2 CPU cores),
or one stage of it: ``--stage NAME``.

Hand-written support code: the corpus, the target and the draft are its own; every proposer is trained by
its chapter's ``train_*`` on chapter 05's loop (``specdec_lib.training``), with a schedule object. All seeded.

| stage    | writes                                        | how                                                        |
|----------|-----------------------------------------------|------------------------------------------------------------|
| prompts  | specdec_lib/data/prompts.json                 | held-out prompts from the validation and test files        |
| target   | models/<name>/target/ (+ the tokenizer)       | byte-level BPE on the train files; a 6-layer Llama, Cosine |
| draft    | models/<name>/draft/                          | one layer, trained on data and distilled; the one the      |
|          |                                               | target agrees with more is kept (draft_tournament)         |
| heads    | medusa, mtp-independent, mtp-sequential       | train_medusa, train_mtp (ch05-06), Cosine, on the          |
|          |                                               | regenerated text (zoo_stages.ladder)                       |
| eagle    | eagle + two ablations (+ calibration, ch08)   | train_eagle (ch07), Cosine, on the regenerated text for the|
|          |                                               | ladder's budget (zoo_stages.ladder, issue 51)              |
| eagle3   | eagle3 + the scaling experiment and ablations | train_eagle3, train_eagle (ch09), WarmupStableDecay        |
|          |                                               | branches (at_budgets), on the regenerated text for the     |
|          |                                               | ladder's budget (zoo_stages.ladder)                        |
| dflash   | dflash (on the target's regenerated text; the | train_dflash (ch10), WarmupStableDecay; regenerated_windows|
|          | corpus-trained one only measured, its card)   | (cached)                                                   |
| dflash2  | dflash2 (two runs on the frozen DFlash)       | train_dflash2 (ch11), WarmupStableDecay                    |

A real preset (``--name smollm2-135m``: a pretrained target, zoo.REAL_PRESETS) has one stage, ``eagle3``: its
EAGLE-3 drafter, by train_eagle3 (ch09) on cached features of the target's own answers to the project's
instructions (``zoo_stages.chat_data``: resumable chunks, the tokens committed in data/answers/), in resumable
runs of at most ``--minutes`` (``zoo_stages.eagle3_real``); repeat the command until the card is written.

The proposer stages are the ones the registry names (``methods.register(..., zoo_stage=...)``). Each has a
step budget that reproduces the shipped weights and a time cap; a card's ``config`` is exactly its
constructor's keyword arguments (the chapter's ``load_*`` rebuilds the module from it). Every model folder gets a
``card.json``: corpus rule, steps, tokens seen, wall time, validation numbers, the loss curve.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from specdec_lib import zoo
from specdec_lib.zoo_stages import cards, ladder
from specdec_lib.zoo_stages.base import draft_tournament, train_target, write_prompts
from specdec_lib.zoo_stages.common import log
from specdec_lib.zoo_stages.dflash import train_dflash2_stage, train_dflash_stage
from specdec_lib.zoo_stages.eagle3_real import train_eagle3_real

# This module is the command line only: each stage's code lives in a module of zoo_stages, which never
# imports this one. base: the prompts, the tokenizer, the target and the draft; common: what every proposer
# stage shares (the frozen target, cards, the regenerated text, at_budgets); heads, eagle, dflash: one
# family each (chapters 05-06, 07-09, 10-11); ladder: the fair ladder's runs of heads and eagle; chat_data and
# eagle3_real: a real preset's data and EAGLE-3; cards: each stage's inputs, budget and card words, as data.


# ------------------------------------------------------------------------------ the table of stages
# `--stage all` runs them in this order; each reads what the stages above it wrote. The proposer stages are
# the ones the registry names (methods.register(..., zoo_stage=...)): check_stages keeps the two in step.
BASE = {
    "prompts": write_prompts,
    "target": train_target,
    "draft": draft_tournament,
}
STAGES = {  # `--stage NAME` -> its trainer (chapter: what it trains)
    "heads": lambda a: ladder.train_heads_stage(a.name, a.seed, steps=a.max_batches),  # 05-06: Medusa, MTP
    "eagle": lambda a: ladder.train_eagle_stage(a.name, a.seed, steps=a.max_batches),  # 07-08: EAGLE (ladder)
    "eagle3": lambda a: (  # 09: EAGLE-3 and its scaling experiment; for a real preset, its drafter alone
        train_eagle3_real(a.name, a.minutes or 40)
        if a.name in zoo.REAL_PRESETS
        else ladder.train_eagle3_ladder(a.name, a.seed, minutes=a.minutes, steps=a.max_batches)
    ),
    "dflash": lambda a: train_dflash_stage(a.name, a.seed, max_batches=a.max_batches),  # 10: DFlash
    "dflash2": lambda a: train_dflash2_stage(a.name, a.seed, max_batches=a.max_batches),  # 11: DFlash 2
}


REAL_STAGES = ("eagle3",)  # what zoo_train trains for a real preset (zoo.REAL_PRESETS)


def check_stages() -> None:
    """The registry (`methods.register(..., zoo_stage=...)`) is the one list of stages: each one it names
    must have a trainer here, and each trainer here must serve a registered method."""
    from specdec_lib.methods import zoo_stages

    named = set(zoo_stages())
    if named != set(STAGES):
        raise SystemExit(
            f"registered zoo stages {sorted(named)} and zoo_train's trainers {sorted(STAGES)} differ: "
            "add the missing trainer to STAGES (or the zoo_stage to its method's register call)"
        )


def run_stage(stage: str, args) -> None:
    """Run one stage; for a proposer stage, check that it wrote every weight its registered methods load."""
    from specdec_lib.methods import zoo_stages

    t0 = time.time()
    log(f"stage {stage}")
    if stage in BASE:
        return BASE[stage](args)
    STAGES[stage](args)
    absent = [
        w for w in zoo_stages()[stage] if not (zoo.ZOO_DIR / args.name / w / "model.safetensors").exists()
    ]
    if absent:
        raise SystemExit(f"stage {stage} did not write the weights {absent} that registered methods load")
    log(f"stage {stage} done in {(time.time() - t0) / 60:.1f} min")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="tiny-code")
    ap.add_argument("--stage", choices=["all", *BASE, *STAGES], default="all",
                    help="one stage of the table (default: all of them, in order)")  # fmt: skip
    target, draft = cards.TARGET.budget, cards.DRAFT.budget  # the base models' budgets, declared
    ap.add_argument("--vocab", type=int, default=target["vocab"])
    ap.add_argument("--ctx", type=int, default=target["ctx"])
    ap.add_argument("--target-minutes", type=float, default=target["minutes"])
    ap.add_argument("--target-steps", type=int, default=target["steps"])
    ap.add_argument(
        "--draft-minutes", type=float, default=draft["minutes"], help="for each of the two draft recipes"
    )
    ap.add_argument("--draft-steps", type=int, default=draft["steps"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    ap.add_argument(
        "--minutes", type=float, default=None, help="a resumable stage's run (eagle3): its time cap"
    )
    ap.add_argument(
        "--max-batches", type=int, default=None, help="proposer stages: fewer batches (smoke tests)"
    )
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    check_stages()
    t_all = time.time()
    stages = [*BASE, *STAGES] if args.stage == "all" else [args.stage]
    if args.name in zoo.REAL_PRESETS:  # a pretrained target: only its drafters are ours to train
        stages = [s for s in stages if s in REAL_STAGES]
        if not stages:
            raise SystemExit(
                f"preset {args.name!r} is a pretrained model: its stages are {sorted(REAL_STAGES)}"
            )
    for stage in stages:
        run_stage(stage, args)
    log(f"done in {(time.time() - t_all) / 60:.1f} min")


if __name__ == "__main__":
    sys.exit(main())
