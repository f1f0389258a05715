"""The zoo's EAGLE family (chapters 07-09): EAGLE's card, chapter 08's calibration of the EAGLE and EAGLE-3
drafters, and chapter 09's EAGLE-3 stage (EAGLE-3, its two ablations and the scaling experiment against an
EAGLE trained alike). ``make zoo`` trains EAGLE and EAGLE-3 through the fair ladder (``zoo_stages.ladder``:
the regenerated text for a stated budget); a real preset's EAGLE-3 is ``zoo_stages.eagle3_real``'s, which
measures and calibrates it with the functions here."""

from __future__ import annotations

import json
import math
import shutil
import time

import torch

from specdec_lib import zoo
from specdec_lib.zoo_stages import common


# ------------------------------------------------------------------------------ EAGLE (ch07-08)
def eagle_card(name: str, role: str, m, target, config: dict, w_cls: float, history, val, texts, t0: float,
               lr: float, seed: int, batch: int = 8, length: int = 256) -> dict:  # fmt: skip
    """An EAGLE drafter's card: its recipe, teacher-forced numbers on the validation batches `val`, and
    acc[d, r] along the target's greedy `texts` (rank_acceptance), from which chapter 07 builds its tree."""
    from specdec_lib.eagle import eagle_features, eagle_loss, rank_acceptance, train_eagle

    seqs, starts = texts
    with torch.no_grad():
        reg = ce = hit = count = 0.0
        for ids in val:
            f = eagle_features(target, ids)
            _, per = eagle_loss(m, f, ids, noise=0.0)
            guess = m(f[:, :-1], ids[:, 1:], torch.arange(ids.shape[1] - 1))
            hit += float((m.logits(guess).argmax(-1) == m.logits(f[:, 1:]).argmax(-1)).sum())
            count += guess.shape[0] * guess.shape[1]
            reg, ce = reg + float(per[0]) / len(val), ce + float(per[1]) / len(val)
    acc = rank_acceptance(m, target, seqs, starts, depth=6, top=8)
    head = common.card_of(name, role, m, config, train_eagle, history, batch, length, t0, lr=lr,
                   schedule="AdamW, Cosine(20, 0.1)")  # fmt: skip
    return {
        **head,
        "loss": f"SmoothL1(feature) + {w_cls} x soft CE; uniform input noise +-0.1",
        "seed": seed,
        "validation": {
            "windows": f"{len(val)} batches of {batch}x{length} validation tokens, teacher-forced",
            "regression": round(reg, 4),
            "soft_ce": round(ce, 4),
            "top1_agreement": round(hit / count, 4),
        },
        "rank_acceptance": {
            "how": "30 validation prompts (last 64 tokens) + 64 greedy target tokens; acc[d][r] = "
            "P(target token at depth d is the drafter's rank r | correct path), drafter on its own "
            "feature guesses",
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
        "how": "the drafter's top-4 guesses at depths 1-5 drafting along 64 greedy target tokens after each of "
        "30 validation prompts; ECE over 10 bins",
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
        "how": "chapter 08's slot_acceptance at T = 1: depths 1-5 along 64 greedy target tokens after each of "
        "30 validation prompts, 4 draws of 8 slots per position, 10 bins of the drafter's top probability",
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


def train_eagle3_stage(name: str, seed: int, batch: int = 8, length: int = 256, units: int = 9,
                       max_batches: int | None = None, batches=None, counts=None, scaling=(1, 3),
                       ablation_units: int = 3, data: dict | None = None, minutes: float | None = None):  # fmt: skip
    """EAGLE-3 (chapter 09) and the experiments its chapter plots, on ONE pass over `batches` (default: the
    training split) cut into `units` equal token budgets, every drafter by its chapter's train_* on the
    same batches (AdamW(0.9, 0.95), warmup-stable-decay, see at_budgets). The scaling experiment: EAGLE-1
    and EAGLE-3 at the `scaling` budgets and at all `units`. Two EAGLE-3 ablations at `ablation_units`:
    last-layer features only, and teacher forcing (one step instead of the training-time test). Only the
    full-budget EAGLE-3 ships; the card stores every number. counts: token counts of the training text,
    for the draft vocabulary (default: the training split's); data: the text's summary for the card.

    Resumable: each drafter, once trained and measured, is checkpointed (its numbers, the random state
    after it, and EAGLE-3's weights) in zoo.cache_dir(); a run given `minutes` starts no new drafter after
    them and returns None, and the next run continues where it stopped, with the same numbers an unbroken
    run gets. Returns the card once every drafter is done."""
    from specdec_lib.eagle import EagleDrafter, train_eagle
    from specdec_lib.eagle3 import DRAFT_VOCAB, Eagle3Drafter, draft_vocabulary, token_counts, train_eagle3

    target, tok = common.frozen_target(name)
    torch.manual_seed(seed)
    counts = token_counts(tok, "train") if counts is None else counts
    d2t, _ = draft_vocabulary(counts, DRAFT_VOCAB)
    if batches is None:
        batches = zoo.token_batches(
            tok, "train", batch, length, max_batches, seed=seed
        )  # the whole split, once
    unit = len(batches) // units
    texts = common.validation_greedy_texts(target, tok)
    prompts = [s[:st] for s, st in zip(*texts)]
    lrs = {"eagle": 1e-3, "eagle3": 2e-3}
    common.log(
        f"eagle3: {unit * units} batches of {batch}x{length} tokens, a unit = {unit} batches; draft vocab {len(d2t)}"
    )
    # Built first, in this order, so that each one's seeded initial weights do not depend on the training.
    drafters = {"eagle": EagleDrafter(target)}
    drafters.update({k: Eagle3Drafter(target, d2t, **kw) for k, (kw, _, _) in EAGLE3_RUNS.items()})
    scaling = (*[b for b in scaling if b < units], units)  # EAGLE-1 and EAGLE-3: the scaling experiment
    ablation = (min(ablation_units, units),)
    budgets = {"eagle": scaling, **{k: ablation if b else scaling for k, (_, _, b) in EAGLE3_RUNS.items()}}

    def trainer(k, lr):  # (drafter, batches, schedule, optimiser) -> chapter 07's or 09's train_* on them
        if k == "eagle":
            return lambda m, b, sch, opt: train_eagle(m, target, b, math.inf, lr, schedule=sch, optimizer=opt)
        ttt = EAGLE3_RUNS[k][1]
        return lambda m, b, sch, opt: train_eagle3(
            m, target, b, math.inf, ttt, lr, schedule=sch, optimizer=opt
        )

    folder = zoo.cache_dir() / "checkpoints" / f"{name}-eagle3-stage-seed{seed}"
    key = {"steps": unit * units, "units": units, "budgets": budgets, "d2t": d2t.tolist(),
           "batches": [int(batches[0].sum()), int(batches[-1].sum())]}  # fmt: skip
    results, spent, t0 = {}, {}, time.time()  # spent: {drafter: (training minutes, all its minutes)}
    for k, m in drafters.items():
        path = folder / f"{k}.pt"
        if path.exists() and (done := torch.load(path, weights_only=False))["key"] == key:
            (
                results.update(done["results"]),
                spent.update({k: done["spent"]}),
                torch.set_rng_state(done["rng"]),
            )
            if done["state"] is not None:
                m.load_state_dict(done["state"])
            common.log(f"{k}: done in an earlier run ({path})")
            continue
        if minutes is not None and time.time() - t0 > minutes * 60:
            common.log(
                f"eagle3: this run's {minutes} minutes are spent; run the stage again to go on from {k}"
            )
            return None
        lr, t = lrs["eagle" if k == "eagle" else "eagle3"], time.time()
        trained_at = common.at_budgets(m, trainer(k, lr), batches, unit, budgets[k], lr)
        train_minutes = round((time.time() - t) / 60, 1)
        for b, trained in trained_at.items():
            results[f"{k}:{b}"] = {"tokens": b * unit * batch * length,
                                   **eagle_snapshot_eval(trained, target, texts, prompts)}  # fmt: skip
            common.log(f"{k}:{b}: tau {results[f'{k}:{b}']['tau_greedy_eagle2_tree']}")
        spent[k] = (train_minutes, round((time.time() - t) / 60, 1))
        folder.mkdir(parents=True, exist_ok=True)
        torch.save({"key": key, "results": {r: v for r, v in results.items() if r.startswith(f"{k}:")},
                    "spent": spent[k], "rng": torch.get_rng_state(),
                    "state": m.state_dict() if k == "eagle3" else None}, path)  # fmt: skip
    minutes = {k: train for k, (train, _) in spent.items()}
    final, res = drafters["eagle3"], results[f"eagle3:{units}"]
    card = {
        "role": "eagle3",
        "for_target": f"{name}/target",
        "parameters": sum(p.numel() for p in final.parameters()),
        "config": {"feature_layers": list(final.feature_layers)},
        "draft_vocab": len(d2t),
        "ttt_steps": EAGLE3_RUNS["eagle3"][1],
        "loss": "sum_s 0.8^s x soft CE against the target's distribution over the draft vocabulary, "
        "positions whose target argmax is outside it masked; training-time test, 6 steps",
        "schedule": f"AdamW(0.9, 0.95), lr {lrs['eagle3']}, 20-step warm-up, constant, linear decay "
        "to 10% over the last 10% of each budget",
        "trainer": "specdec_lib.eagle3.train_eagle3",
        "steps": unit * units,
        "tokens_seen": unit * units * batch * length,
        "wall_minutes": round(sum(total for _, total in spent.values()), 1),
        "train_minutes": {"how": "each drafter's training, its decay branches included", **minutes},
        "seed": seed,
        "draft_vocabulary": {
            "rule": "the most frequent tokens of the training text",
            "train_token_coverage": round(
                float(counts.sort(descending=True).values[: len(d2t)].sum() / counts.sum()), 4
            ),
        },
        "rank_acceptance": {
            "how": f"as the eagle card's, at depth 8, for the shipped ({units}-unit) drafter",
            "acc": res["acc"],
        },
        "calibration": {"greedy_temperature": res["greedy_temperature"]},
        "experiments": {
            "how": f"one pass over the training text cut into {units} token budgets; each point is a drafter "
            "trained to that budget (warmup-stable-decay branches); tau: greedy decoding with EAGLE-2's "
            "tree (16 nodes, depth 8, top-4, fitted temperature) after each of 30 validation prompts, "
            "64 new tokens; acc as in rank_acceptance. EAGLE-1: lr 1e-3, regression + 0.1 CE, noise 0.1",
            "unit_tokens": unit * batch * length,
            "scaling_units": list(scaling),
            "ablation_units": ablation[0],
            "results": results,
        },
        **({"data": data} if data else {}),
        "torch": torch.__version__,
    }
    zoo.save_weights(final, "eagle3", card, preset=name)
    calibrate_sampled_slots(name, "eagle3")
    shutil.rmtree(folder, ignore_errors=True)
    common.log(f"eagle3 saved under {zoo.ZOO_DIR / name}; tau {res['tau_greedy_eagle2_tree']}")
    return card
