"""What each stage of the zoo declares, as data (hand-written plumbing, not a chapter): what it reads, its
budget, and the fixed words of the card it writes.

One ``Stage`` record per stage (one per card family), in the order ``make zoo`` runs them:

- ``inputs``: what the stage reads (which target, which text), in words, for the reader;
- ``budget``: its defaults (steps, minutes, batch, learning rate, schedule, ...). The stage function takes
  any of them as a keyword argument (``budget_with``: a smoke test passes fewer steps); nothing else;
- ``prose``: the card's fixed text, by its field's path in the card (``"loss"``, ``"recall.how"``), each a
  ``str.format`` template whose ``{placeholders}`` are the numbers the run used (``texts``; ``text`` for
  one field): usually the budget itself, plus the few a stage passes or computes (the target's name, ...).

The stage's code decides the card's shape (its keys, their order, the measured numbers); this module says
its words. tests/test_zoo_cards.py rebuilds the fixed text of every committed card from here, so the
declarations and the cards the zoo ships cannot drift apart: a sentence changed here fails that test until
the card is retrained (or the sentence is put back). The cards are read by the notebooks and the tests: the
words here are part of what the zoo ships.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from specdec_lib.training import Cosine, WarmupStableDecay


@dataclass(frozen=True)
class Stage:
    """One stage's declaration: `inputs` (words), `budget` (its defaults), `prose` (card path -> template)."""

    inputs: dict[str, str]
    budget: dict[str, object]
    prose: dict[str, str] = field(default_factory=dict)

    def budget_with(self, **overrides) -> SimpleNamespace:
        """The budget a run uses: the defaults, with `overrides` (only names the budget has)."""
        unknown = sorted(set(overrides) - set(self.budget))
        if unknown:
            raise TypeError(f"{unknown} are not in this stage's budget {sorted(self.budget)}")
        return SimpleNamespace(**{**self.budget, **overrides})

    def text(self, path: str, **numbers) -> str:
        """The card's fixed field at `path`, its placeholders filled from `numbers`."""
        return self.prose[path].format(**numbers)

    def texts(self, **numbers) -> dict[str, str]:
        """Every fixed field of the card, its placeholders filled from `numbers`: {path: text}."""
        return {path: self.text(path, **numbers) for path in self.prose}


def at(card: dict, path: str):
    """A card's field by its path ("recall.how": card["recall"]["how"])."""
    for key in path.split("."):
        card = card[key]
    return card


# Shared words: the same field in several cards.
SAMPLED_SLOTS_HOW = (
    "chapter 08's slot_acceptance at T = 1: depths 1-5 along 64 greedy target tokens after each of 30 validation "
    "prompts, 4 draws of 8 slots per position, 10 bins of the drafter's top probability"
)  # every EAGLE-family card's calibration.sampled_slot_acceptance.how (eagle.calibrate_sampled_slots)
CORPUS = "CPython {python} standard library *.py without tests; split {split_rule}"  # the base models'


# ------------------------------------------------------------------- base models (zoo_stages.base)
PROMPTS = Stage(
    inputs={"text": "the validation and test files of the corpus"},
    budget={"per_file": 3, "limit": 200},
    prose={
        "rule": "20 lines before and including a one-line def/class signature, ending at its colon, at most "
        "800 chars; three per file; fixed shuffle"
    },
)
TARGET = Stage(  # zoo_train's --target-steps, --target-minutes, --vocab and --ctx default to this budget
    inputs={
        "text": "the training split (byte-level BPE trained on it)",
        "validation": "the validation split",
    },
    budget={"steps": 1800, "minutes": 60, "batch": 8, "lr": 2e-3, "vocab": 4096, "ctx": 512},
    prose={"corpus": CORPUS, "schedule": "AdamW(0.9, 0.95), weight decay 0.1, clip 1.0, {schedule}"},
)
DRAFT = Stage(  # zoo_train's --draft-steps and --draft-minutes (each recipe's) default to this budget
    inputs={
        "target": "the zoo's target, frozen (the distilled recipe's teacher)",
        "text": "the training split",
    },
    budget={"steps": 1500, "minutes": 6, "batch": 8, "lr": 2e-3, "prompts": 50},
    prose={
        "why": "trained on data and distilled from the target (forward KL), same budget; kept the one with the "
        "higher greedy agreement with the target on {prompts} validation prompts",
        "corpus": CORPUS,
        "schedule": TARGET.prose["schedule"],
    },
)

# ----------------------------------------------------- the target's regenerated text (common, chapter 10)
REGENERATED = Stage(  # not a stage of its own: the data the proposer stages train on (its card's "data")
    inputs={"target": "the zoo's target, frozen", "text": "random cuts of a split of the corpus"},
    budget={"count": 6144, "length": 256, "batch": 128, "prompt_tokens": (16, 128)},
    prose={
        "recipe": "random cuts of the {split} split keep their first P tokens (P uniform in {prompt_tokens} per "
        "batch of {batch}); the frozen target continues each to {length} tokens, alternate batches greedy and "
        "at T = 1; seed {seed}"
    },
)

# ------------------------------------------------------------ proposer heads (zoo_stages.heads, ch05-06)
HEADS = Stage(
    inputs={
        "target": "the zoo's target, frozen",
        "text": "the batches passed in (the ladder's: the target's regenerated text), else the training split",
        "validation": "batches of the validation split",
    },
    budget={
        "steps": 484,
        "minutes": 30,
        "batch": 8,
        "length": 256,
        "max_batches": 4000,
        "val_batches": 40,
        "schedule": Cosine(20, 0.1),
    },  # fmt: skip
    prose={
        "schedule": "AdamW, Cosine({schedule.warmup}, {schedule.floor})",
        "validation_tokens_per_depth": "{val_batches} batches of {batch}x{length} validation tokens, teacher-forced",
        "why_shared_projection": "the heads share the target's frozen LM head instead of 3 trained copies "
        "(6.3 MB more); in an 80-step A/B the trained copies were only slightly better (head-1 top-1 0.237 vs "
        "0.229)",  # Medusa's card only
    },
)

# ---------------------------------------------------------------- EAGLE (zoo_stages.eagle, ch07-08)
EAGLE = Stage(  # trained by the ladder (zoo_stages.ladder.train_eagle_ladder), carded by eagle.eagle_card
    inputs={
        "target": "the zoo's target, frozen",
        "text": "the target's regenerated text (the ladder's budget)",
        "validation": "batches of the validation split; the target's greedy text after 30 validation prompts",
    },
    budget={
        "lr": 1e-3,
        "minutes": 40,
        "batch": 8,
        "length": 256,
        "val_batches": 20,
        "schedule": Cosine(20, 0.1),
    },
    prose={
        "schedule": HEADS.prose["schedule"],
        "loss": "SmoothL1(feature) + {w_cls} x soft CE; uniform input noise +-0.1",
        "validation.windows": "{val_batches} batches of {batch}x{length} validation tokens, teacher-forced",
        "rank_acceptance.how": "30 validation prompts (last 64 tokens) + 64 greedy target tokens; acc[d][r] = "
        "P(target token at depth d is the drafter's rank r | correct path), drafter on its own feature guesses",
        "calibration.how": "the drafter's top-4 guesses at depths 1-5 drafting along 64 greedy target tokens "
        "after each of 30 validation prompts; ECE over 10 bins",  # EAGLE's card only (not the ablations')
        "calibration.sampled_slot_acceptance.how": SAMPLED_SLOTS_HOW,  # EAGLE's card only
    },
)

# ----------------------------------------------------------------- EAGLE-3 (zoo_stages.eagle, ch09)
EAGLE3 = Stage(  # the ladder runs it for its budget, with units, scaling and ablation_units of its own
    inputs={
        "target": "the zoo's target, frozen",
        "text": "the batches passed in (the ladder's: the target's regenerated text), else the training split",
        "validation": "the target's greedy text after 30 validation prompts",
    },
    budget={
        "batch": 8,
        "length": 256,
        "units": 9,
        "scaling": (1, 3),
        "ablation_units": 3,
        "max_batches": None,
        "lr": 2e-3,
        "eagle_lr": 1e-3,
    },  # fmt: skip  # lr: EAGLE-3's; eagle_lr: the scaling experiment's EAGLE
    prose={
        "loss": "sum_s 0.8^s x soft CE against the target's distribution over the draft vocabulary, positions "
        "whose target argmax is outside it masked; training-time test, {ttt_steps} steps",
        "schedule": "AdamW(0.9, 0.95), lr {lr}, 20-step warm-up, constant, linear decay to 10% over the last 10% "
        "of each budget",
        "train_minutes.how": "each drafter's training, its decay branches included",
        "draft_vocabulary.rule": "the most frequent tokens of the training text",
        "rank_acceptance.how": "as the eagle card's, at depth 8, for the shipped ({units}-unit) drafter",
        "calibration.sampled_slot_acceptance.how": SAMPLED_SLOTS_HOW,
        "experiments.how": "one pass over the training text cut into {units} token budgets; each point is a "
        "drafter trained to that budget (warmup-stable-decay branches); tau: greedy decoding with EAGLE-2's "
        "tree (16 nodes, depth 8, top-4, fitted temperature) after each of 30 validation prompts, 64 new "
        "tokens; acc as in rank_acceptance. EAGLE-1: lr 1e-3, regression + 0.1 CE, noise 0.1",
    },
)
EAGLE3_REAL = Stage(  # a real preset's EAGLE-3 (zoo_stages.eagle3_real); its budget is the run's `recipe`
    inputs={
        "target": "the real preset, frozen",
        "text": "the target's own answers to the training instructions (zoo_stages.chat_data), cached features",
        "validation": "the target's greedy answers to 30 validation instructions",
    },
    budget={  # the shipped drafter's recipe: what a resumed run must match
        "steps": 1000,  # ~1.2 epochs of the 12 chunks' text; ~50 min at ~20 steps a minute on 2 cores
        "batch": 8,
        "length": 256,
        "ttt_steps": 3,  # 4 costs a third more per step; the data, not the depth, is what the old drafter lacked
        "draft_vocab": 8192,
        "lr": 2e-3,
        "chunks": 12,
        "seed": 0,
    },
    prose={
        "loss": "as the tiny-code eagle3 card's: 0.8^s-weighted soft CE over the draft vocabulary, training-time "
        "test, {ttt_steps} steps",
        "schedule": "AdamW(0.9, 0.95), lr {lr}, warmup-stable-decay (20-step warm-up, linear decay to 10% over "
        "the last 20%) over {steps} steps",
        "training.how": "from cached target features (chat_data: the target's taps, last layer and argmax kept "
        "as it wrote the text; cached_inputs), in resumable runs",
        "data.recipe": "the target's own answers (one greedy, one at T = 1) to the project's training "
        "instructions (zoo.instructions('train'): templates x topics; validation and test topics held out), in "
        "the chat template; windows of each chunk's text end to end",
        "draft_vocabulary.rule": "the ids most frequent in the training text (prompts included)",
        "rank_acceptance.how": "acc[d][r] along the target's greedy answers to 30 validation instructions, "
        "depth 8",
        "calibration.sampled_slot_acceptance.how": SAMPLED_SLOTS_HOW,
        "validation.how": "greedy decoding with EAGLE-2's tree (16 nodes, depth 8, top-4, fitted temperature) "
        "on 30 validation instructions, 64 new tokens",
    },
)

# ------------------------------------------------------------------ DFlash (zoo_stages.dflash, ch10)
DFLASH = Stage(
    inputs={
        "target": "the zoo's target, frozen",
        "text": "the target's regenerated text (trains the shipped drafter); the training split (the ablation's "
        "corpus drafter)",
        "validation": "validation-split batches, the greedy half of regenerated validation windows, the target's "
        "greedy text after 30 validation prompts",
    },
    budget={
        "steps": 2863,
        "minutes": 60,
        "batch": 8,
        "length": 256,
        "block_size": 16,
        "anchors": 32,
        "gamma": 7.0,
        "lr": 1e-3,
        "layers": 2,
        "passes": 2,
        "max_batches": None,
        "schedule": WarmupStableDecay(warmup=20, decay=0.2, floor=0.1),
    },  # fmt: skip
    prose={
        "schedule": "AdamW(0.9, 0.95), {schedule}",
        "mask_token": "the rarest non-special token of the training split (ties: lowest id); the drafter has no "
        "embedding of its own, so MASK is an existing id of the target's vocabulary",
        "loss": "sum_k w_k CE_k / sum_k w_k, w_k = exp(-(k-1)/{gamma}), soft CE against the frozen target's "
        "distribution of the token at anchor + k; {anchors} random anchors per sequence of {length}",
        "recall.how": "20 batches of {batch}x{length}, 16 random anchors each; row k hits when the target's "
        "greedy token at anchor + k is in the drafter's top-t, context teacher-forced. 'corpus': validation-split "
        "text; 'greedy': the greedy half of the regenerated validation windows (the target's own text)",
        "tau_greedy.how": "greedy, 64 new tokens after each of 30 validation prompts (last 64 tokens); at B < "
        "{block_size} the pass still runs the trained block of {block_size} and the chain keeps rows 1 .. B - 1",
        "ablation.how": "the same recipe, steps and seed on two kinds of text: 'corpus' = at most {passes} passes "
        "of the training split; 'regenerated' = the target's own text (this drafter); recall and tau as above",
    },
)

# --------------------------------------------------------------- DFlash 2 (zoo_stages.dflash, ch11)
DFLASH2 = Stage(
    inputs={
        "target": "the zoo's target, frozen",
        "backbone": "the zoo's DFlash drafter (chapter 10), frozen",
        "text": "the regenerated text DFlash was trained on, fresh shuffles",
        "validation": "validation-split batches; the target's greedy text after 30 validation prompts",
    },
    budget={
        "steps": {"mixed": 499, "plain": 283},
        "minutes": 30,
        "batch": 8,
        "length": 256,
        "block_size": 16,
        "anchors": 32,
        "gamma": 7.0,
        "lr": 2e-3,
        "max_batches": None,
        "rank": 64,
        "top_k": 16,
        "schedule": WarmupStableDecay(warmup=20, decay=0.2, floor=0.1),
    },  # fmt: skip
    prose={
        "backbone": "{name}/dflash (chapter 10), frozen: {backbone_parameters} parameters",
        "loss": "DFlash's decay-weighted soft CE (gamma {gamma}; trains the mixers) + the selector's loss: soft "
        "CE over each row's top-16 candidates against the target's distribution renormalised to them, the "
        "predecessor teacher-forced (the text's token), rows whose list misses the target's top token excluded, "
        "the same row weights; the selector reads the drafter's outputs detached",
        "runs.mixed": "mixers + selector together",
        "runs.plain": "a selector alone on the plain backbone",
        "schedule": "AdamW(0.9, 0.95), lr {lr}, {schedule}, over each run's steps",
        "data.note": "the regenerated windows the DFlash backbone was trained on, fresh shuffles",
        "ablation.how": "tau: greedy, block {block_size}, 64 new tokens after each of 30 validation prompts (last "
        "64 tokens); recall: 20 validation batches of {batch}x{length}, 16 random anchors each, teacher-forced "
        "(top1: the chain's pick for row k, the walk's with a selector; top16: the target's token among the 16 "
        "candidates)",
    },
)
