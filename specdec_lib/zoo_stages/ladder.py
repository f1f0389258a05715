"""The fair ladder (issue 51): every trained proposer on the same text, with a stated budget, measured alike.

Until now each drafter learned from what its stage happened to use: DFlash from the target's own regenerated
text, EAGLE, EAGLE-3, Medusa and the MTP heads from the corpus, each for its own number of steps. A ranking
of the methods then mixes the method with its data. The ladder's recipe is one for all:

- the text: ``zoo_stages.common.regenerated_windows`` (the frozen target's own continuations of
  training-split cuts, half greedy and half drawn at T = 1), the windows DFlash already learns from;
- the budget: a stated number of tokens seen per drafter (``BUDGETS``), in windows of 8 x 256;
- the held-out measure: ``ladder_tau``, each method's greedy and T = 1 tau on the same validation prompts,
  decoded by the engine (the number a learner's decode gets, not a teacher-forced proxy).

One stage per drafter, each its own run of at most ``minutes``: ``python -m specdec_lib.zoo_stages.ladder
eagle``. It writes the zoo's weights and card, which records the recipe, the budget and the ladder's tau.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

import specdec_lib as sd
from specdec_lib import zoo
from specdec_lib.zoo_stages import cards, common

BATCH, LENGTH = 8, 256
BUDGETS = {  # drafter: tokens seen (steps x 8 x 256), about 2 epochs of the 6144 regenerated windows
    "eagle": 1565 * BATCH * LENGTH,  # what the corpus-trained EAGLE saw
    "eagle3": 1566 * BATCH * LENGTH,  # 18 units of 87 steps (chapter 09's scaling points), as the corpus one
    "medusa": 484 * BATCH * LENGTH,  # the Medusa heads and the MTP modules: what the corpus-trained ones saw
    "mtp-independent": 484 * BATCH * LENGTH,
    "mtp-sequential": 484 * BATCH * LENGTH,
}
HEADS = ("medusa", "mtp-independent", "mtp-sequential")
EAGLE3_UNITS, EAGLE3_SCALING, EAGLE3_ABLATION = (
    18,
    (2, 6, 9),
    6,
)  # 1/9, 1/3, 1/2 of the budget; ablations at 1/3
LADDER_SPECS = {"eagle": "eagle:16", "eagle3": "eagle3:16", "medusa": "medusa:16",
                "mtp-independent": "mtp-independent", "mtp-sequential": "mtp-sequential"}  # fmt: skip  # the method spec the ladder measures each by


def ladder_tau(spec: str, name: str = "tiny-code", prompts: int = 30, new_tokens: int = 64, seed: int = 0):
    """{"greedy": tau, "t1": tau}: new tokens per target pass of `spec`, pooled over the first `prompts`
    validation prompts (their last 64 tokens, as the EAGLE cards' texts), `new_tokens` each, at T = 0 and
    at T = 1 (seeded per prompt)."""
    target, draft, tok = zoo.load_pair(name, device="cpu")
    ids = [torch.tensor(tok.encode(p))[-64:] for p in zoo.heldout_prompts(prompts, split="validation")]
    out = {}
    for key, temperature in (("greedy", 0.0), ("t1", 1.0)):
        tokens = passes = 0
        for i, p in enumerate(ids):
            proposer = sd.make_proposer(spec, target, draft)
            g = sd.generate(target, p, new_tokens, proposer, temperature=temperature, seed=seed + i)
            tokens, passes = tokens + len(g.tokens), passes + g.stats.target_forwards
        out[key] = round(tokens / passes, 4)
    return out


def regenerated_batches(name: str, steps: int, seed: int) -> tuple[list[torch.Tensor], dict]:
    """`steps` batches [8, 256] of the regenerated windows in seeded shuffled epochs, and the windows'
    summary (their recipe) for the card."""
    windows, summary = common.regenerated_windows(name, "train", seed=0)  # DFlash's: generated once, cached
    epochs = math.ceil(steps * BATCH / len(windows))
    return common.shuffled_batches(windows, BATCH, epochs, seed)[:steps], summary


def ladder_text(name: str, kind: str, steps: int | None, seed: int) -> tuple[int, list[torch.Tensor], dict]:
    """A stage's steps (its budget's, or fewer for a smoke test), its batches of the regenerated text, and
    the text's summary for its card."""
    full = BUDGETS[kind] // (BATCH * LENGTH)
    steps = min(steps or full, full)
    batches, data = regenerated_batches(name, steps, seed)
    return (
        steps,
        batches,
        {"text": "regenerated", **{k: data[k] for k in ("recipe", "windows", "generated_tokens")}},
    )


def finish_card(name: str, weights: str, kind: str, ladder_prompts: int | None = 30) -> dict:
    """Record in a saved drafter's card its budget (reached or not) and, unless ladder_prompts is None,
    the ladder's tau of its method; rewrite the card and return it."""
    card = zoo.load_weights(weights, name)[1]
    card["budget"] = {"tokens": BUDGETS[kind], "reached": card["tokens_seen"] == BUDGETS[kind]}
    if ladder_prompts is not None:
        card["ladder"] = {
            "spec": LADDER_SPECS[kind],
            **ladder_tau(LADDER_SPECS[kind], name, prompts=ladder_prompts),
        }
    (zoo.ZOO_DIR / name / weights / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    return card


def train_eagle_ladder(name: str = "tiny-code", seed: int = 0, texts=None, ladder_prompts: int = 30,
                       variant: str = "eagle", steps: int | None = None, **budget):  # fmt: skip
    """EAGLE's drafter (chapter 07's train_eagle, its corpus recipe otherwise unchanged: AdamW, a 20-step
    warm-up, a cosine to 10%) on the regenerated windows for BUDGETS["eagle"] tokens, or `minutes`. Saves
    it as the zoo's "eagle" with the corpus stage's card fields (chapters 07 and 08 read them), then the
    recipe and the ladder's tau; then chapter 08's calibration, as the corpus stage did. variant: one of
    chapter 07's EAGLE_VARIANTS (an ablation is saved under its own name, neither calibrated nor measured
    by the ladder). budget: any of cards.EAGLE's (lr, minutes, val_batches, ...). texts (the target's greedy
    validation texts), val_batches, ladder_prompts and steps (fewer than the budget's): smaller for a smoke
    test."""
    from specdec_lib.eagle import EAGLE_VARIANTS, EagleDrafter, train_eagle
    from specdec_lib.zoo_stages.eagle import calibrate_eagle, eagle_card

    b = cards.EAGLE.budget_with(**budget)
    target, tok = common.frozen_target(name)
    torch.manual_seed(seed)
    config, w_cls = {"use_token": EAGLE_VARIANTS[variant]["use_token"]}, EAGLE_VARIANTS[variant]["w_cls"]
    drafter = EagleDrafter(target, **config)
    steps, batches, data = ladder_text(name, "eagle", steps, seed)
    t0 = time.time()
    history = train_eagle(drafter, target, batches, b.minutes * 60, b.lr, w_cls, max_steps=steps,
                          schedule=b.schedule, log_every=200)  # fmt: skip
    val = zoo.token_batches(tok, "validation", b.batch, b.length, max_batches=b.val_batches, seed=seed)
    texts = texts or common.validation_greedy_texts(target, tok)
    card = eagle_card(name, variant, drafter, target, config, w_cls, history, val, texts, t0, seed, b)
    zoo.save_weights(drafter, variant, {**card, "data": data}, preset=name)
    if variant != "eagle":  # an ablation (chapter 07 compares the three): no calibration, no method spec
        return finish_card(name, variant, "eagle", ladder_prompts=None)
    calibrate_eagle(name, texts)
    return finish_card(name, "eagle", "eagle", ladder_prompts)


def train_eagle3_ladder(name: str = "tiny-code", seed: int = 0, minutes: float | None = 40, steps: int | None = None,
                        ladder_prompts: int = 30):  # fmt: skip
    """Chapter 09's EAGLE-3 stage (zoo_stages.eagle.train_eagle3_stage: EAGLE-3, its two ablations and the
    scaling experiment against an EAGLE trained alike) on the regenerated windows for BUDGETS["eagle3"]
    tokens, cut into EAGLE3_UNITS units: the scaling points include half the budget (issue 51's data-scaling
    point).
    The draft vocabulary is the regenerated text's most frequent tokens. Then the ladder's tau in its card.
    steps, ladder_prompts: fewer (a smoke test; the units shrink with the steps). minutes: the run starts no
    new drafter after them (None: no cap) and returns None; run it again to go on (the whole stage is about
    70 minutes on 2 cores, each drafter at most about 30)."""
    from specdec_lib.zoo_stages.eagle import train_eagle3_stage

    steps, batches, data = ladder_text(name, "eagle3", steps, seed)
    windows = torch.stack([w for b in batches for w in b])
    target, _, tok = zoo.load_pair(name, device="cpu")
    counts = torch.bincount(windows.flatten(), minlength=len(tok))[: len(tok)]  # the text it learns from
    units = min(EAGLE3_UNITS, steps)
    if train_eagle3_stage(name, seed, units=units, batches=batches, counts=counts, scaling=EAGLE3_SCALING,
                          ablation_units=EAGLE3_ABLATION, data=data, minutes=minutes) is None:  # fmt: skip
        return None  # this run's minutes are spent: the next run goes on from its checkpoints
    return finish_card(name, "eagle3", "eagle3", ladder_prompts)


def train_heads_ladder(kind: str, name: str = "tiny-code", seed: int = 0, minutes: float = 40,
                       steps: int | None = None, ladder_prompts: int = 30, val_batches: int = 40):  # fmt: skip
    """Chapter 05's Medusa heads or one of chapter 06's MTP variants (`kind`, one of HEADS), by
    zoo_stages.heads.train_heads (its chapter's train_*, AdamW, a 20-step warm-up, a cosine to 10%) on
    the regenerated windows for BUDGETS[kind] tokens, or `minutes`; then the ladder's tau in its card.
    steps, ladder_prompts, val_batches: fewer (a smoke test)."""
    from specdec_lib.zoo_stages.heads import train_heads

    if kind not in HEADS:
        raise ValueError(f"kind must be one of {HEADS}, got {kind!r}")
    steps, batches, data = ladder_text(name, kind, steps, seed)
    train_heads(
        name,
        seed,
        steps=steps,
        minutes=minutes,
        batches=batches,
        kinds=(kind,),
        data=data,
        val_batches=val_batches,
    )
    return finish_card(name, kind, kind, ladder_prompts)


def train_heads_stage(name: str = "tiny-code", seed: int = 0, minutes: float = 40, steps: int | None = None):
    """`make zoo`'s heads stage (chapters 05-06): the three, one after the other, each its own run."""
    for kind in HEADS:
        card = train_heads_ladder(kind, name, seed, minutes, steps)
    return card


def train_eagle_stage(name: str = "tiny-code", seed: int = 0, minutes: float = 40, steps: int | None = None):
    """`make zoo`'s EAGLE stage (chapters 07-08): the two ablations, then EAGLE itself (calibrated and
    measured by the ladder), each on the regenerated text for the same budget, or `steps` (a smoke test)."""
    from specdec_lib.eagle import EAGLE_VARIANTS

    # the same greedy texts for all three cards
    texts = common.validation_greedy_texts(*common.frozen_target(name))
    for variant in sorted(EAGLE_VARIANTS, key=lambda v: v == "eagle"):  # EAGLE last: it calibrates
        card = train_eagle_ladder(name, seed, texts=texts, variant=variant, steps=steps, minutes=minutes)
    return card


STAGES = {
    "eagle": train_eagle_stage,
    "eagle3": train_eagle3_ladder,
    **{
        kind: (lambda name, minutes, kind=kind: train_heads_ladder(kind, name, minutes=minutes))
        for kind in HEADS
    },
}


# ------------------------------------------------------------------ the ladder table (chapter 12)
RUNGS = (  # the seeds' claim, the lower method, the upper one, the tau ratio the claim asks of the upper
    ("EAGLE-2 above EAGLE", "eagle:16", "eagle2:16", 1.0),
    ("EAGLE-3 above EAGLE-2", "eagle2:16", "eagle3:16", 1.0),
    ("DFlash above EAGLE-3", "eagle3:16", "dflash:16", 1.0),
    ("DFlash 2 21% above DFlash", "dflash:16", "dflash2:16+selector", 1.21),
)
WEIGHTS = {"eagle:16": "eagle", "eagle2:16": "eagle", "eagle3:16": "eagle3", "dflash:16": "dflash",
           "dflash2:16+selector": "dflash2"}  # fmt: skip


def drafter_facts(method: str, name: str = "tiny-code") -> dict:
    """What a ladder method's drafter learned from, for how long, and its size, read from its zoo card:
    {"weights", "text", "tokens", "minutes", "parameters"} (None where the card does not record it). DFlash
    2 trains its mixers and selector on DFlash's frozen drafter: both count."""
    weights = WEIGHTS[method]
    card = zoo.model_card(name, weights)
    text = card.get("data", {}).get("text", "corpus")
    if weights == "dflash2":  # the frozen backbone is DFlash's: its tokens and minutes, then the mixed run's
        backbone = zoo.model_card(name, "dflash")
        # None: a card from before the stage timed its runs
        mixed = card.get("train_minutes", {}).get("mixed")
        return {"weights": weights, "text": text,
                "tokens": backbone["tokens_seen"] + card["steps"]["mixed"] * BATCH * LENGTH,
                "minutes": None if mixed is None else round(backbone["wall_minutes"] + mixed, 1),
                "parameters": backbone["parameters"] + card["parameters"]["mixed"]}  # fmt: skip
    minutes = card.get("train_minutes", {}).get(weights, card["wall_minutes"])
    return {"weights": weights, "text": text, "tokens": card["tokens_seen"], "minutes": minutes,
            "parameters": card["parameters"]}  # fmt: skip


def check_same_drafters(report: dict, name: str = "tiny-code") -> None:
    """The report must have measured the drafters the zoo ships now (their digests, bench.drafters_of):
    the table puts its tau next to the cards' recipes. An older run, or retrained weights, is an error."""
    from specdec_lib.bench import drafters_of

    now = drafters_of(name, list(WEIGHTS))
    ran = {w: d for w, d in report.get("drafters", {}).items() if w in now}
    if ran != now:
        moved = sorted(w for w in now if ran.get(w) != now[w])
        raise ValueError(
            f"the report measured other weights than the zoo ships for {moved} (retrained since, or a report "
            "older than the drafters' record): rerun the benchmark before reading the ladder from it"
        )


def ladder_rungs(report: dict, name: str = "tiny-code") -> list[dict]:
    """Each rung of the seeds' ladder at each of the report's samplings: both methods' tau and speed-up,
    the tau ratio, whether the rung holds (the ratio reaches the claim's) and whether the upper one is
    also faster. A rung whose methods the report lacks, or a report of other drafters, is an error."""
    check_same_drafters(report, name)
    rows = []
    for claim, lower, upper, ratio in RUNGS:
        for key, results in report["results"].items():
            missing = [m for m in (lower, upper) if m not in results]
            if missing:
                raise ValueError(f"the report has no {missing} at T = {key}: run the benchmark with them")
            lo, hi = results[lower], results[upper]
            rows.append({"rung": claim, "sampling": key, "lower": lower, "upper": upper,
                         "tau": (lo["tau"], hi["tau"]), "speedup": (lo["speedup"], hi["speedup"]),
                         "tau_ratio": hi["tau"] / lo["tau"], "holds": hi["tau"] / lo["tau"] >= ratio,
                         "faster": hi["speedup"] > lo["speedup"]})  # fmt: skip
    return rows


def ladder_markdown(report: dict, name: str = "tiny-code") -> str:
    """The ladder table (rungs x samplings) and the drafters' facts, as markdown."""
    from specdec_lib.bench import sampling_heading

    out = ["| rung | sampling | tau (lower -> upper) | ratio | holds | speed-up (lower -> upper) | faster |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in ladder_rungs(report, name):
        out.append(
            f"| {r['rung']} | {sampling_heading(r['sampling'])} | {r['tau'][0]:.2f} -> {r['tau'][1]:.2f} | "
            f"{r['tau_ratio']:.2f} | {'yes' if r['holds'] else '**no**'} | {r['speedup'][0]:.2f}x -> "
            f"{r['speedup'][1]:.2f}x | {'yes' if r['faster'] else 'no'} |"
        )
    out += ["", "| method | its drafter | text | tokens seen | training minutes | parameters |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    untimed = False
    for method in WEIGHTS:
        f = drafter_facts(method, name)
        minutes = "-" if f["minutes"] is None else f"{f['minutes']:g}"
        out.append(f"| {method} | {f['weights']} | {f['text']} | {f['tokens'] / 1e6:.2f}M | {minutes} | "
                   f"{f['parameters'] / 1e6:.2f}M |")  # fmt: skip
        untimed = untimed or f["minutes"] is None
    if untimed:
        out += ["", "(-: the drafter's card does not record its training minutes)"]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=sorted(STAGES))
    ap.add_argument("--name", default="tiny-code")
    ap.add_argument(
        "--minutes", type=float, default=40, help="the run's time cap (the budget usually ends it)"
    )
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    card = STAGES[args.stage](args.name, minutes=args.minutes)
    if card is None:
        print(f"{args.stage}: not finished in {args.minutes} minutes; run the same command again to go on")
    else:
        print({k: card[k] for k in ("steps", "tokens_seen", "wall_minutes", "ladder")})


if __name__ == "__main__":
    main()
