"""The zoo's EAGLE family (chapters 07-09): EAGLE's card, chapter 08's calibration of the EAGLE and EAGLE-3
drafters, and chapter 09's EAGLE-3 stage (EAGLE-3, its two ablations and the scaling experiment against an
EAGLE trained alike). ``make zoo`` trains EAGLE and EAGLE-3 through the fair ladder (``zoo_stages.ladder``:
the regenerated text for a stated budget); a real preset's EAGLE-3 is ``zoo_stages.eagle3_real``'s, which
measures and calibrates it with the functions here. Budgets and the cards' words: ``zoo_stages.cards``
(EAGLE, EAGLE3)."""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from specdec_lib import zoo
from specdec_lib.zoo_stages import cards, common


# ------------------------------------------------------------------------------ EAGLE (ch07-08)
@torch.no_grad()
def eagle_validation(m, target, val) -> dict:
    """An EAGLE drafter's teacher-forced numbers on the validation batches `val`: its two losses and the
    top-1 agreement of its next-feature guess with the target's next token."""
    from specdec_lib.eagle import eagle_features, eagle_loss

    reg = ce = hit = count = 0.0
    for ids in val:
        f = eagle_features(target, ids)
        _, per = eagle_loss(m, f, ids, noise=0.0)
        guess = m(f[:, :-1], ids[:, 1:], torch.arange(ids.shape[1] - 1))
        hit += float((m.logits(guess).argmax(-1) == m.logits(f[:, 1:]).argmax(-1)).sum())
        count += guess.shape[0] * guess.shape[1]
        reg, ce = reg + float(per[0]) / len(val), ce + float(per[1]) / len(val)
    return {"regression": round(reg, 4), "soft_ce": round(ce, 4), "top1_agreement": round(hit / count, 4)}


def eagle_card(name: str, role: str, m, target, config: dict, w_cls: float, history, val, texts, t0: float,
               seed: int, budget) -> dict:  # fmt: skip
    """An EAGLE drafter's card: its recipe (`budget`: cards.EAGLE's, as the run used it), teacher-forced
    numbers on the validation batches `val`, and acc[d, r] along the target's greedy `texts`
    (rank_acceptance), from which chapter 07 builds its tree."""
    from specdec_lib.eagle import rank_acceptance, train_eagle

    b, seqs, starts = budget, *texts
    text = cards.EAGLE.texts(**{**vars(b), "val_batches": len(val)}, w_cls=w_cls)
    validation = eagle_validation(m, target, val)
    acc = rank_acceptance(m, target, seqs, starts, depth=6, top=8)
    head = common.card_of(name, role, m, config, train_eagle, history, b.batch, b.length, t0, lr=b.lr,
                          schedule=text["schedule"])  # fmt: skip
    return {
        **head,
        "loss": text["loss"],
        "seed": seed,
        "validation": {"windows": text["validation.windows"], **validation},
        "rank_acceptance": {
            "how": text["rank_acceptance.how"],
            "acc": [[round(float(x), 4) for x in row] for row in acc],
        },
        "last_train": [round(x, 4) for x in history[-1]],
        "torch": torch.__version__,
    }


TEMPERATURE_GRID = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def calibrate_eagle(name: str, texts=None):
    """Fit the EAGLE drafter's greedy confidence temperature (chapter 08) on validation prompts and record
    it, with the expected calibration errors, in its card (EAGLE-2 shapes greedy trees with it)."""
    from specdec_lib.eagle import load_eagle
    from specdec_lib.eagle2 import calibration_records, fit_greedy_temperature, reliability

    target, _, tok = zoo.load_pair(name, device="cpu")
    drafter, card = load_eagle(target, "eagle", name)
    seqs, starts = texts or common.validation_greedy_texts(target, tok)  # the EAGLE stage hands its own over
    records = calibration_records(drafter, target, seqs, starts, temperatures=TEMPERATURE_GRID)
    best = fit_greedy_temperature(records)
    card["calibration"] = {
        "how": cards.EAGLE.text("calibration.how"),
        "greedy_temperature": best,
        "ece_greedy_at_t1": round(reliability(records[1.0][:, 0], records[1.0][:, 2])[1], 4),
        "ece_greedy_at_fitted_t": round(reliability(records[best][:, 0], records[best][:, 2])[1], 4),
        "ece_target_probability_at_t1": round(reliability(records[1.0][:, 0], records[1.0][:, 1])[1], 4),
    }
    (zoo.ZOO_DIR / name / "eagle" / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    common.log(f"eagle calibration: {card['calibration']}")
    calibrate_sampled_slots(name, "eagle", (seqs, starts))


def calibrate_sampled_slots(name: str, kind: str, texts=None, seed: int = 0):
    """Measure what a sampled child slot is worth for the `kind` ("eagle" or "eagle3") drafter (chapter
    08's slot_acceptance, at T = 1, on the validation prompts) and record the table in its card, where
    the registry's eagle2 / eagle3 find it. Only the shape of their sampled trees depends on it."""
    from specdec_lib.autoregressive import SamplingParams
    from specdec_lib.eagle import load_eagle
    from specdec_lib.eagle2 import slot_acceptance
    from specdec_lib.eagle3 import load_eagle3

    target, _, tok = zoo.load_pair(name, device="cpu")
    drafter, card = load_eagle(target, "eagle", name) if kind == "eagle" else load_eagle3(target, name)
    seqs, starts = texts or common.validation_greedy_texts(target, tok)
    gen = torch.Generator().manual_seed(seed)
    acc = slot_acceptance(drafter, target, seqs, starts, SamplingParams(1.0), generator=gen)
    card["calibration"]["sampled_slot_acceptance"] = {
        "how": cards.SAMPLED_SLOTS_HOW,
        "acc": [[round(float(x), 4) for x in row] for row in acc],
    }
    (zoo.ZOO_DIR / name / kind / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    common.log(f"{kind} sampled-slot acceptance, first slot by bin: {acc[:, 0].tolist()}")


# ------------------------------------------------------------------------- EAGLE-3 (chapter 09)
EAGLE3_RUNS = {  # run: (constructor config, training-time-test steps, an ablation: trained to ablation_units)
    "eagle3": ({}, 6, False),
    "eagle3-last-layer": ({"feature_layers": (-1,)}, 6, True),
    "eagle3-teacher-forced": ({}, 1, True),
}


def eagle_snapshot_eval(drafter, target, texts, prompts, eos: int | None = None) -> dict:
    """What the EAGLE-3 card reports for one drafter: acc[d][r] along the target's greedy text (depth 8),
    the fitted greedy temperature, and the tau and acceptance by depth of greedy decoding with EAGLE-2's
    dynamic tree (16 nodes, depth 8, top-4) on the validation prompts, 64 new tokens each."""
    from specdec_lib import speculative as spec
    from specdec_lib.eagle import rank_acceptance
    from specdec_lib.eagle2 import Eagle2Proposer, calibration_records, fit_greedy_temperature

    drafter.eval()
    seqs, starts = texts
    acc = rank_acceptance(drafter, target, seqs, starts, depth=8, top=8)
    t = fit_greedy_temperature(
        calibration_records(drafter, target, seqs, starts, temperatures=TEMPERATURE_GRID)
    )
    runs = [
        spec.decode(target, p, 64, Eagle2Proposer(drafter, 16, greedy_temperature=t), eos_token_id=eos).stats
        for p in prompts
    ]
    pooled = spec.Stats.pool(runs)
    return {
        "acc": [[round(float(x), 4) for x in row] for row in acc],
        "greedy_temperature": t,
        "tau_greedy_eagle2_tree": round(pooled.tau, 4),
        "acceptance_by_depth": [  # None: no round reached that depth (JSON has no NaN)
            round(float(a), 4) if a == a else None for a in pooled.acceptance_by_position()
        ],
    }


@dataclass
class Eagle3Run:
    """What chapter 09's experiment runs on: the frozen target, the draft vocabulary (`d2t`, from `counts`),
    one pass of `batches` cut into units of `unit` batches, the greedy validation `texts` and their
    `prompts`, the drafters (built before any training, so that their seeded initial weights do not
    depend on it), the `budgets` (in units) each is trained to, and the scaling and ablation points."""

    target: object
    d2t: torch.Tensor
    counts: torch.Tensor
    batches: list
    unit: int
    texts: tuple
    prompts: list
    drafters: dict
    budgets: dict
    scaling: tuple
    ablation: tuple


def eagle3_run(name: str, seed: int, b, batches=None, counts=None) -> Eagle3Run:
    """The experiment's data and drafters for the budget `b` (cards.EAGLE3's): `batches` (default: the
    training split, once) and the token `counts` of that text (default: the training split's)."""
    from specdec_lib.eagle import EagleDrafter
    from specdec_lib.eagle3 import DRAFT_VOCAB, Eagle3Drafter, draft_vocabulary, token_counts

    target, tok = common.frozen_target(name)
    torch.manual_seed(seed)
    counts = token_counts(tok, "train") if counts is None else counts
    d2t, _ = draft_vocabulary(counts, DRAFT_VOCAB)
    if batches is None:  # the whole split, once
        batches = zoo.token_batches(tok, "train", b.batch, b.length, b.max_batches, seed=seed)
    unit, texts = len(batches) // b.units, common.validation_greedy_texts(target, tok)
    common.log(f"eagle3: {unit * b.units} batches of {b.batch}x{b.length} tokens, a unit = {unit} batches; "
               f"draft vocab {len(d2t)}")  # fmt: skip
    drafters = {"eagle": EagleDrafter(target)}  # in this order: each one's seeded initial weights
    drafters.update({k: Eagle3Drafter(target, d2t, **kw) for k, (kw, _, _) in EAGLE3_RUNS.items()})
    scaling = (*[u for u in b.scaling if u < b.units], b.units)  # EAGLE-1 and EAGLE-3: the scaling experiment
    ablation = (min(b.ablation_units, b.units),)
    budgets = {
        "eagle": scaling,
        **{k: ablation if abl else scaling for k, (_, _, abl) in EAGLE3_RUNS.items()},
    }
    prompts = [s[:st] for s, st in zip(*texts)]
    return Eagle3Run(target, d2t, counts, batches, unit, texts, prompts, drafters, budgets, scaling, ablation)


def eagle3_trainer(k: str, lr: float, target):
    """(drafter, batches, schedule, optimiser) -> chapter 07's or 09's train_* on them, for the drafter `k`."""
    from specdec_lib.eagle import train_eagle
    from specdec_lib.eagle3 import train_eagle3

    if k == "eagle":
        return lambda m, b, sch, opt: train_eagle(m, target, b, math.inf, lr, schedule=sch, optimizer=opt)
    ttt = EAGLE3_RUNS[k][1]
    return lambda m, b, sch, opt: train_eagle3(m, target, b, math.inf, ttt, lr, schedule=sch, optimizer=opt)


def train_eagle3_drafter(k: str, run: Eagle3Run, b) -> tuple[dict, tuple[float, float]]:
    """Train the drafter `k` to each of its budgets (common.at_budgets) and measure each one: its results
    {"k:units": numbers} and its minutes (training, all)."""
    lr, t = (b.eagle_lr if k == "eagle" else b.lr), time.time()
    trained_at = common.at_budgets(run.drafters[k], eagle3_trainer(k, lr, run.target), run.batches, run.unit,
                                   run.budgets[k], lr)  # fmt: skip
    train_minutes = round((time.time() - t) / 60, 1)
    results = {}
    for units, trained in trained_at.items():
        results[f"{k}:{units}"] = {"tokens": units * run.unit * b.batch * b.length,
                                   **eagle_snapshot_eval(trained, run.target, run.texts, run.prompts)}  # fmt: skip
        common.log(f"{k}:{units}: tau {results[f'{k}:{units}']['tau_greedy_eagle2_tree']}")
    return results, (train_minutes, round((time.time() - t) / 60, 1))


def checkpoint_folder(name: str, seed: int) -> Path:
    return zoo.cache_dir() / "checkpoints" / f"{name}-eagle3-stage-seed{seed}"


def resume_drafter(path: Path, key: dict, k: str, run: Eagle3Run, results: dict, spent: dict) -> bool:
    """Take the drafter `k`'s results, minutes, the random state after it (and EAGLE-3's weights) from its
    checkpoint, if there is one of this run (`key`); False if there is none."""
    if not path.exists() or (done := torch.load(path, weights_only=False))["key"] != key:
        return False
    results.update(done["results"])
    spent[k] = done["spent"]
    torch.set_rng_state(done["rng"])
    if done["state"] is not None:
        run.drafters[k].load_state_dict(done["state"])
    common.log(f"{k}: done in an earlier run ({path})")
    return True


def train_eagle3_drafters(name: str, seed: int, run: Eagle3Run, b, minutes: float | None):
    """Every drafter of the experiment in turn, each resumed from its checkpoint or trained, measured and
    checkpointed. Returns (results, {drafter: (training minutes, all its minutes)}), or None once this run's
    `minutes` are spent."""
    folder = checkpoint_folder(name, seed)
    key = {"steps": run.unit * b.units, "units": b.units, "budgets": run.budgets, "d2t": run.d2t.tolist(),
           "batches": [int(run.batches[0].sum()), int(run.batches[-1].sum())]}  # fmt: skip
    results, spent, t0 = {}, {}, time.time()
    for k in run.drafters:
        path = folder / f"{k}.pt"
        if resume_drafter(path, key, k, run, results, spent):
            continue
        if minutes is not None and time.time() - t0 > minutes * 60:
            common.log(
                f"eagle3: this run's {minutes} minutes are spent; run the stage again to go on from {k}"
            )
            return None
        mine, spent[k] = train_eagle3_drafter(k, run, b)
        results.update(mine)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save({"key": key, "results": mine, "spent": spent[k], "rng": torch.get_rng_state(),
                    "state": run.drafters[k].state_dict() if k == "eagle3" else None}, path)  # fmt: skip
    return results, spent


def draft_vocabulary_coverage(counts: torch.Tensor, size: int) -> float:
    """The share of the text's tokens that the `size` most frequent ids cover."""
    return round(float(counts.sort(descending=True).values[:size].sum() / counts.sum()), 4)


def eagle3_card(
    name: str, seed: int, run: Eagle3Run, b, results: dict, spent: dict, data: dict | None
) -> dict:
    """The shipped EAGLE-3's card: its recipe (cards.EAGLE3's words), its numbers and the experiment's."""
    final, res, ttt = run.drafters["eagle3"], results[f"eagle3:{b.units}"], EAGLE3_RUNS["eagle3"][1]
    text = cards.EAGLE3.texts(**vars(b), ttt_steps=ttt)
    return {
        "role": "eagle3",
        "for_target": f"{name}/target",
        "parameters": sum(p.numel() for p in final.parameters()),
        "config": {"feature_layers": list(final.feature_layers)},
        "draft_vocab": len(run.d2t),
        "ttt_steps": ttt,
        "loss": text["loss"],
        "schedule": text["schedule"],
        "trainer": "specdec_lib.eagle3.train_eagle3",
        "steps": run.unit * b.units,
        "tokens_seen": run.unit * b.units * b.batch * b.length,
        "wall_minutes": round(sum(total for _, total in spent.values()), 1),
        "train_minutes": {"how": text["train_minutes.how"], **{k: train for k, (train, _) in spent.items()}},
        "seed": seed,
        "draft_vocabulary": {
            "rule": text["draft_vocabulary.rule"],
            "train_token_coverage": draft_vocabulary_coverage(run.counts, len(run.d2t)),
        },  # fmt: skip
        "rank_acceptance": {"how": text["rank_acceptance.how"], "acc": res["acc"]},
        "calibration": {"greedy_temperature": res["greedy_temperature"]},
        "experiments": {
            "how": text["experiments.how"],
            "unit_tokens": run.unit * b.batch * b.length,
            "scaling_units": list(run.scaling),
            "ablation_units": run.ablation[0],
            "results": results,
        },  # fmt: skip
        **({"data": data} if data else {}),
        "torch": torch.__version__,
    }


def train_eagle3_stage(name: str, seed: int, batches=None, counts=None, data: dict | None = None,
                       minutes: float | None = None, **budget):  # fmt: skip
    """EAGLE-3 (chapter 09) and the experiments its chapter plots, on ONE pass over `batches` (default: the
    training split) cut into `units` equal token budgets, every drafter by its chapter's train_* on the
    same batches (AdamW(0.9, 0.95), warmup-stable-decay, see at_budgets). The scaling experiment: EAGLE-1
    and EAGLE-3 at the `scaling` budgets and at all `units`. Two EAGLE-3 ablations at `ablation_units`:
    last-layer features only, and teacher forcing (one step instead of the training-time test). Only the
    full-budget EAGLE-3 ships; the card stores every number. counts: token counts of the training text,
    for the draft vocabulary (default: the training split's); data: the text's summary for the card;
    budget: any of cards.EAGLE3's (units, scaling, ablation_units, ...).

    Resumable: each drafter, once trained and measured, is checkpointed (its numbers, the random state
    after it, and EAGLE-3's weights) in zoo.cache_dir(); a run given `minutes` starts no new drafter after
    them and returns None, and the next run continues where it stopped, with the same numbers an unbroken
    run gets. Returns the card once every drafter is done."""
    b = cards.EAGLE3.budget_with(**budget)
    run = eagle3_run(name, seed, b, batches, counts)
    trained = train_eagle3_drafters(name, seed, run, b, minutes)
    if trained is None:
        return None
    card = eagle3_card(name, seed, run, b, *trained, data)
    zoo.save_weights(run.drafters["eagle3"], "eagle3", card, preset=name)
    calibrate_sampled_slots(name, "eagle3")
    shutil.rmtree(checkpoint_folder(name, seed), ignore_errors=True)
    tau = card["experiments"]["results"][f"eagle3:{b.units}"]["tau_greedy_eagle2_tree"]
    common.log(f"eagle3 saved under {zoo.ZOO_DIR / name}; tau {tau}")
    return card
