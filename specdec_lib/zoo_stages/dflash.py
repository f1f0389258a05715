"""The zoo's DFlash family (chapters 10-11): chapter 10's DFlash drafter on the target's regenerated text
(``common.regenerated_windows``, with the corpus-trained one measured for the ablation), and chapter 11's
DFlash 2 parts (mixers, path selector) on that drafter, frozen. Budgets and the cards' words:
``zoo_stages.cards`` (DFLASH, DFLASH2)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from specdec_lib import zoo
from specdec_lib.zoo_stages import cards, common


# ------------------------------------------------------------------------- DFlash (chapter 10)
def mask_token(tok) -> int:
    """The id that stands for MASK: the rarest non-special token of the training split (ties: the lowest
    id). The drafter has no embedding of its own, so MASK is an existing id of the target's vocabulary."""
    from specdec_lib.eagle3 import token_counts

    counts = token_counts(tok, "train")
    counts[tok.all_special_ids] = counts.max() + 1  # never EOS: it also occurs in the context
    return int(counts.argmin())


DFLASH_DATA = ("corpus", "regenerated")  # what a DFlash drafter can be trained on (the ablation's two rows)


def dflash_taus(drafter, target, texts, starts, blocks=(4, 8, 16)) -> dict:
    """Greedy tau and acceptance by position of chapter 10's DFlashProposer at each block size in `blocks`
    (the chain capped at B - 1; the pass runs the drafter's trained block), 64 new tokens after each of
    validation_greedy_texts' prompts."""
    from specdec_lib import speculative as spec
    from specdec_lib.dflash import DFlashProposer

    taus = {}
    for B in blocks:
        pooled = spec.Stats.pool([spec.decode(target, s[:st], 64, DFlashProposer(drafter, B)).stats
                                  for s, st in zip(texts, starts)])  # fmt: skip
        taus[str(B)] = {"tau": round(pooled.tau, 4),
                        "acceptance_by_position": [round(float(x), 4) if x == x else None
                                                   for x in pooled.acceptance_by_position()]}  # fmt: skip
    return taus


@dataclass
class DFlashData:
    """What the DFlash stage reads besides the target: the target's regenerated training `windows` and
    their `summary`, the regenerated validation windows' summary, the `evals` of block recall ("corpus":
    validation-split batches; "greedy": the greedy half of the regenerated validation windows) and the
    greedy validation `texts` that tau is measured on."""

    windows: torch.Tensor
    summary: dict
    validation_summary: dict
    evals: dict
    texts: tuple


def dflash_data(name: str, seed: int, target, tok, b) -> DFlashData:
    windows, summary = common.regenerated_windows(name, "train", seed=seed)
    val_regen, val_summary = common.regenerated_windows(name, "validation", count=512, seed=seed + 1)
    greedy_val = val_regen[~common.sampled_windows(len(val_regen))]  # the greedy half
    evals = {
        "corpus": zoo.token_batches(tok, "validation", b.batch, b.length, max_batches=20, seed=seed),
        "greedy": list(greedy_val[: 20 * b.batch].split(b.batch)),
    }
    return DFlashData(windows, summary, val_summary, evals, common.validation_greedy_texts(target, tok))


def dflash_batches(kind: str, data: DFlashData, tok, b, seed: int) -> list[torch.Tensor]:
    """A DFlash drafter's training batches: "corpus", at most `passes` passes of the training split;
    "regenerated", the regenerated windows in shuffled epochs, as many as the steps take."""
    if kind == "corpus":
        return zoo.token_batches(tok, "train", b.batch, b.length, b.max_batches, seed=seed) * b.passes
    epochs = -(-b.steps * b.batch // len(data.windows))
    return common.shuffled_batches(data.windows, b.batch, epochs, seed)[: b.max_batches]


def train_dflash_drafter(kind: str, target, config: dict, data: DFlashData, tok, b, seed: int):
    """A fresh DFlash drafter trained by chapter 10's train_dflash on the `kind` of text, the recipe `b`.
    Returns (drafter, its loss log, when it started, its training minutes)."""
    from specdec_lib.dflash import DFlashDrafter, train_dflash

    drafter = DFlashDrafter(target, **config)
    batches = dflash_batches(kind, data, tok, b, seed)
    common.log(f"dflash {kind}: up to {len(batches)} batches of {b.batch}x{b.length}, {b.anchors} blocks of "
               f"{b.block_size} each; {b.steps} steps or {b.minutes} min; config {config}")  # fmt: skip
    t0 = time.time()
    history = train_dflash(drafter, target, batches, b.minutes * 60, b.block_size, b.anchors, b.gamma, b.lr,
                           generator=torch.Generator().manual_seed(seed), max_steps=b.steps,
                           schedule=b.schedule, betas=(0.9, 0.95), log_every=100)  # fmt: skip
    return drafter, history, t0, (time.time() - t0) / 60


def measure_dflash(drafter, target, data: DFlashData, b) -> dict:
    """A DFlash drafter's recall per block position on each of data.evals (top-1, top-16) and its greedy
    tau at block sizes 4, 8 and 16 (dflash_taus)."""
    from specdec_lib.dflash import block_recall

    recall = {
        text: block_recall(drafter, target, val, b.block_size, 16, (1, 16), torch.Generator().manual_seed(1))
        for text, val in data.evals.items()
    }
    return {
        "recall": {text: {"top1": [round(x, 4) for x in r[0].tolist()],
                          "top16": [round(x, 4) for x in r[1].tolist()]} for text, r in recall.items()},
        "tau_greedy": dflash_taus(drafter, target, *data.texts),
    }  # fmt: skip


def dflash_card(name: str, seed: int, drafter, config: dict, history, t0: float, runs: dict,
                data: DFlashData, b) -> dict:  # fmt: skip
    """The shipped (regenerated) DFlash drafter's card: its recipe in cards.DFLASH's words, its numbers,
    and the ablation's two `runs`."""
    from specdec_lib.dflash import train_dflash

    text = cards.DFLASH.texts(**vars(b))
    config = {**config, "feature_layers": list(drafter.feature_layers)}  # the course's taps for this target
    head = common.card_of(name, "dflash", drafter, config, train_dflash, history, b.batch, b.length, t0,
                          lr=b.lr, schedule=text["schedule"])  # fmt: skip
    return {
        **head,
        "block_size": b.block_size,
        "mask_token": text["mask_token"],
        "loss": text["loss"],
        "blocks_seen": len(history) * b.batch * b.anchors,
        "seed": seed,
        "data": {
            "text": "regenerated",
            **data.summary,
            "epochs_seen": round(len(history) * b.batch / len(data.windows), 2),
            "validation_set": data.validation_summary,
        },
        "recall": {"how": text["recall.how"], **runs["regenerated"]["recall"]},
        "tau_greedy": {"how": text["tau_greedy.how"], **runs["regenerated"]["tau_greedy"]},
        "ablation": {"how": text["ablation.how"], **runs},
        "curve": common.curve_of(history),
        "torch": torch.__version__,
    }


def train_dflash_stage(name: str, seed: int, corpus_drafter=None, **budget):
    """DFlash's drafter (chapter 10) by chapter 10's train_dflash on the frozen target, SpecForge's recipe at
    our scale (cards.DFLASH's budget; `budget`: any of it): `anchors` random blocks of `block_size` per
    sequence, the training mask, position-decayed soft CE (gamma 7), AdamW(0.9, 0.95), warmup-stable-decay
    (20-step warm-up, linear decay to 10% over the last 20%) over `steps` or `minutes`. Two drafters, the
    same recipe on two kinds of text (the ablation of chapter 10): "corpus", at most `passes` passes of the
    training split; "regenerated", the target's own continuations of training-split cuts
    (regenerated_windows), as many passes as the steps take. The regenerated one is saved; its card holds
    both drafters' recall per block position (on corpus text and on the target's greedy text) and greedy
    tau at block sizes 4, 8 and 16. `corpus_drafter`: (drafter, card) already trained by the corpus recipe
    (e.g. load_dflash of the previous zoo) to measure instead of training one."""
    b = cards.DFLASH.budget_with(**budget)
    target, tok = common.frozen_target(name)
    config = {"layers": b.layers, "mask_token_id": mask_token(tok), "block_size": b.block_size}
    data, runs = dflash_data(name, seed, target, tok, b), {}
    for kind in DFLASH_DATA:
        torch.manual_seed(seed)
        if kind == "corpus" and corpus_drafter is not None:
            (drafter, its_card), history = corpus_drafter, None
            common.log(
                "dflash corpus: measuring the drafter passed in (trained by this recipe), not training one"
            )
            steps, wall = its_card["steps"], its_card["wall_minutes"]
        else:
            drafter, history, t0, wall = train_dflash_drafter(kind, target, config, data, tok, b, seed)
            steps, wall = len(history), round(wall, 1)
        runs[kind] = {**measure_dflash(drafter, target, data, b), "steps": steps, "wall_minutes": wall}
        common.log(f"dflash {kind}: top-1 recall on greedy text {runs[kind]['recall']['greedy']['top1'][:8]}, "
                   f"tau {[t['tau'] for t in runs[kind]['tau_greedy'].values()]}")  # fmt: skip
        if kind == "regenerated":
            shipped = (drafter, history, t0)
    drafter, history, t0 = shipped
    zoo.save_weights(drafter, "dflash", dflash_card(name, seed, drafter, config, history, t0, runs, data, b),
                     preset=name)  # fmt: skip


# ----------------------------------------------------------------------- DFlash 2 (chapter 11)
def train_dflash2_runs(runs: dict, target, windows: torch.Tensor, b, seed: int) -> tuple[dict, dict, dict]:
    """Chapter 11's train_dflash2 on each of `runs` in turn (the regenerated `windows`, fresh shuffles; one
    anchor stream through both): each run's loss curve, steps and training minutes."""
    from specdec_lib.dflash2 import train_dflash2

    gen = torch.Generator().manual_seed(seed)  # one anchor stream, through both runs in turn
    curves, done, spent = {}, {}, {}
    for run, drafter in runs.items():
        epochs = -(-b.steps[run] * b.batch // len(windows))
        batches = common.shuffled_batches(windows, b.batch, epochs, seed + 1)[: b.max_batches]
        share = b.minutes * b.steps[run] / sum(b.steps.values())
        common.log(f"dflash2 {run}: {b.steps[run]} steps or {share:.1f} min")
        t0 = time.time()
        history = train_dflash2(drafter, target, batches, share * 60, b.block_size, b.anchors, b.gamma, b.lr,
                                generator=gen, max_steps=b.steps[run], schedule=b.schedule, betas=(0.9, 0.95),
                                log_every=50)  # fmt: skip
        curves[run], done[run] = common.curve_of(history), len(history)
        spent[run] = round((time.time() - t0) / 60, 1)  # the ladder table's training minutes (issue 51)
    return curves, done, spent


def dflash2_variants(target, base, runs: dict) -> dict:
    """The ablation's four drafters on the frozen DFlash `base`: neither part, the selector alone (the
    "plain" run), the mixers alone (the "mixed" run's, without its selector), both (the "mixed" run)."""
    from specdec_lib.dflash2 import DFlash2Drafter

    variants = {
        "dflash": DFlash2Drafter.from_dflash(target, base, mixing=False, selector=False),
        "selector": runs["plain"],
        "mixing": DFlash2Drafter.from_dflash(target, base, mixing=True, selector=False),
        "both": runs["mixed"],
    }
    variants["mixing"].load_state_dict(runs["mixed"].state_dict(), strict=False)  # its mixers, no selector
    return variants


def measure_dflash2(variants: dict, target, tok, b, seed: int) -> dict:
    """Each variant's greedy tau and acceptance at block `block_size` on the validation prompts, and its
    recall per row (selector_recall); then the oracle ceilings (oracle_taus)."""
    from specdec_lib import speculative as spec
    from specdec_lib.dflash2 import DFlash2Proposer, selector_recall

    val = zoo.token_batches(tok, "validation", b.batch, b.length, max_batches=20, seed=seed)
    texts, starts = common.validation_greedy_texts(target, tok)
    ablation = {}
    for v, drafter in variants.items():
        recall = selector_recall(drafter, target, val, b.block_size, 16, torch.Generator().manual_seed(1))
        pooled = spec.Stats.pool([spec.decode(target, s[:st], 64, DFlash2Proposer(drafter, b.block_size)).stats
                                  for s, st in zip(texts, starts)])  # fmt: skip
        ablation[v] = {"tau": round(pooled.tau, 4),
                       "acceptance_by_position": [round(float(x), 4) if x == x else None  # nan: never reached
                                                  for x in pooled.acceptance_by_position()],
                       **{k: [round(x, 4) for x in r.tolist()] for k, r in recall.items()}}  # fmt: skip
        common.log(f"dflash2 {v}: tau {ablation[v]['tau']}, top-1 recall {ablation[v]['top1'][:8]}")
    return {**ablation, **oracle_taus(variants, target, texts, starts, b)}


def oracle_taus(variants: dict, target, texts, starts, b) -> dict:
    """The ceiling of a perfect selector: tau when the target's token is picked whenever it is among the 16
    candidates, on the plain ("oracle") and the mixed ("oracle_mixing") backbone."""
    from specdec_lib import speculative as spec
    from specdec_lib.dflash2 import OracleProposer

    out = {}
    for v, key in (("dflash", "oracle"), ("mixing", "oracle_mixing")):
        oracle = [spec.decode(target, s[:st], 64, OracleProposer(variants[v], b.block_size, s.tolist())).stats
                  for s, st in zip(texts, starts)]  # fmt: skip
        out[key] = {"tau": round(spec.Stats.pool(oracle).tau, 4)}
        common.log(f"dflash2 {key}: tau {out[key]['tau']}")
    return out


def dflash2_card(name: str, seed: int, b, base_card: dict, runs: dict, state: dict, data: dict, trained: tuple,
                 ablation: dict) -> dict:  # fmt: skip
    """DFlash 2's card: the two runs' recipe in cards.DFLASH2's words, their sizes, steps and curves
    (`trained`: train_dflash2_runs'), and the ablation."""
    curves, done, spent = trained
    text = cards.DFLASH2.texts(**vars(b), name=name, backbone_parameters=base_card["parameters"])
    return {
        "role": "dflash2",
        "for_target": f"{name}/target",
        "backbone": text["backbone"],
        "parameters": {
            run: sum(v.numel() for k, v in state.items() if k.startswith(run + ".")) for run in runs
        },
        "config": {"rank": b.rank, "top_k": b.top_k},
        "group_size": runs["mixed"].layers[0].attention_conv.group_size,
        "block_size": b.block_size,
        "loss": text["loss"],
        "runs": {run: text[f"runs.{run}"] for run in runs},
        "schedule": text["schedule"],
        "trainer": "specdec_lib.dflash2.train_dflash2",
        "data": {"text": "regenerated", **data, "note": text["data.note"]},
        "steps": done,
        "train_minutes": spent,
        "seed": seed,
        "ablation": {"how": text["ablation.how"], **ablation},
        "curves": curves,
        "torch": torch.__version__,
    }


def train_dflash2_stage(name: str, seed: int, **budget):
    """DFlash 2's two parts on chapter 10's DFlash drafter, which stays FROZEN, so that every variant of
    the ablation shares one backbone and differs only in the parts it adds; trained on the backbone's data
    (the target's regenerated text, regenerated_windows); both runs by chapter 11's train_dflash2
    (AdamW(0.9, 0.95), warmup-stable-decay over `steps[run]` steps or its share of `minutes`; budget: any of
    cards.DFLASH2's). Two runs: "mixed", mixers and selector together (the selector is a head on the mixed
    backbone: its loss does not reach the mixers); "plain", a selector alone on the plain backbone. Card:
    per variant (dflash, selector, mixing, both) tau and acceptance at B = 16 on the validation prompts,
    top-1 recall per row (the selector's top-1 = its walk's teacher-forced pick), candidate recall; the
    oracle ceiling: tau when the target's token is picked whenever it is among the 16 candidates."""
    from types import SimpleNamespace

    from specdec_lib.dflash import load_dflash
    from specdec_lib.dflash2 import DFlash2Drafter

    b = cards.DFLASH2.budget_with(**budget)
    target, tok = common.frozen_target(name)
    regenerated, data = common.regenerated_windows(
        name, "train", seed=seed
    )  # the backbone's data (chapter 10)
    base, base_card = load_dflash(target, name)
    base.requires_grad_(False)
    torch.manual_seed(seed)
    config = {"rank": b.rank, "top_k": b.top_k}
    runs = {
        "mixed": DFlash2Drafter.from_dflash(target, base, mixing=True, **config),
        "plain": DFlash2Drafter.from_dflash(target, base, mixing=False, **config),
    }
    trained = train_dflash2_runs(runs, target, regenerated, b, seed)
    ablation = measure_dflash2(dflash2_variants(target, base, runs), target, tok, b, seed)
    state = {f"{run}.{k}": v for run, drafter in runs.items() for k, v in drafter.state_dict().items()
             if DFlash2Drafter.is_new_part(k)}  # fmt: skip
    card = dflash2_card(name, seed, b, base_card, runs, state, data, trained, ablation)
    zoo.save_weights(SimpleNamespace(state_dict=lambda: state), "dflash2", card, preset=name)
