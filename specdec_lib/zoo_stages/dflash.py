"""The zoo's DFlash family (chapters 10-11): chapter 10's DFlash drafter on the target's regenerated text
(``common.regenerated_windows``, with the corpus-trained one measured for the ablation), and chapter 11's
DFlash 2 parts (mixers, path selector) on that drafter, frozen."""

from __future__ import annotations

import time

import torch

from specdec_lib import zoo
from specdec_lib.training import WarmupStableDecay
from specdec_lib.zoo_stages import common


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


def train_dflash_stage(name: str, seed: int, steps: int = 2863, minutes: float = 60, batch: int = 8,
                       length: int = 256, block_size: int = 16, anchors: int = 32, gamma: float = 7.0,
                       lr: float = 1e-3, layers: int = 2, passes: int = 2, max_batches: int | None = None,
                       corpus_drafter=None):  # fmt: skip
    """DFlash's drafter (chapter 10) by chapter 10's train_dflash on the frozen target, SpecForge's recipe at
    our scale: `anchors` random blocks of `block_size` per sequence, the training mask, position-decayed
    soft CE (gamma 7), AdamW(0.9, 0.95), warmup-stable-decay (20-step warm-up, linear decay to 10% over the
    last 20%) over `steps` or `minutes`. Two drafters, the same recipe on two kinds of text (the
    ablation of chapter 10): "corpus", at most `passes` passes of the training split; "regenerated", the
    target's own continuations of training-split cuts (regenerated_windows), as many passes as the steps
    take. The regenerated one is saved; its card holds both drafters' recall per block position (on
    corpus text and on the target's greedy text) and greedy tau at block sizes 4, 8 and 16.
    `corpus_drafter`: (drafter, card) already trained by the corpus recipe (e.g. load_dflash of the previous
    zoo) to measure instead of training one."""
    from specdec_lib.dflash import DFlashDrafter, block_recall, train_dflash

    target, tok = common.frozen_target(name)
    config = {"layers": layers, "mask_token_id": mask_token(tok), "block_size": block_size}
    regenerated, data = common.regenerated_windows(name, "train", seed=seed)
    val_regen, val_data = common.regenerated_windows(name, "validation", count=512, seed=seed + 1)
    greedy_val = val_regen[~common.sampled_windows(len(val_regen))]  # the greedy half
    evals = {
        "corpus": zoo.token_batches(tok, "validation", batch, length, max_batches=20, seed=seed),
        "greedy": list(greedy_val[: 20 * batch].split(batch)),
    }
    texts, starts = common.validation_greedy_texts(target, tok)
    sources = {
        "corpus": lambda: zoo.token_batches(tok, "train", batch, length, max_batches, seed=seed) * passes,
        "regenerated": lambda: common.shuffled_batches(
            regenerated, batch, -(-steps * batch // len(regenerated)), seed
        )[:max_batches],
    }
    runs, saved = {}, None
    for kind in DFLASH_DATA:
        torch.manual_seed(seed)
        if kind == "corpus" and corpus_drafter is not None:
            (drafter, its_card), history = corpus_drafter, None
            common.log(
                "dflash corpus: measuring the drafter passed in (trained by this recipe), not training one"
            )
        else:
            drafter = DFlashDrafter(target, **config)
            batches = sources[kind]()
            common.log(f"dflash {kind}: up to {len(batches)} batches of {batch}x{length}, {anchors} blocks of "
                f"{block_size} each; {steps} steps or {minutes} min; config {config}")  # fmt: skip
            t0, schedule = time.time(), WarmupStableDecay(warmup=20, decay=0.2, floor=0.1)
            history = train_dflash(drafter, target, batches, minutes * 60, block_size, anchors, gamma, lr,
                                   generator=torch.Generator().manual_seed(seed), max_steps=steps, schedule=schedule,
                                   betas=(0.9, 0.95), log_every=100)  # fmt: skip
            wall = (time.time() - t0) / 60
        recall = {
            text: block_recall(
                drafter, target, val, block_size, 16, (1, 16), torch.Generator().manual_seed(1)
            )
            for text, val in evals.items()
        }
        taus = dflash_taus(drafter, target, texts, starts)
        runs[kind] = {
            "recall": {
                text: {
                    "top1": [round(x, 4) for x in r[0].tolist()],
                    "top16": [round(x, 4) for x in r[1].tolist()],
                }
                for text, r in recall.items()
            },  # fmt: skip
            "tau_greedy": taus,
            "steps": len(history) if history is not None else its_card["steps"],
            "wall_minutes": round(wall, 1) if history is not None else its_card["wall_minutes"],
        }
        common.log(f"dflash {kind}: top-1 recall on greedy text {runs[kind]['recall']['greedy']['top1'][:8]}, "
            f"tau {[taus[b]['tau'] for b in taus]}")  # fmt: skip
        if kind == "regenerated":
            saved = (drafter, history, t0, schedule)
    drafter, history, t0, schedule = saved
    config["feature_layers"] = list(drafter.feature_layers)  # the course's taps for this target
    head = common.card_of(name, "dflash", drafter, config, train_dflash, history, batch, length, t0, lr=lr,
                   schedule=f"AdamW(0.9, 0.95), {schedule}")  # fmt: skip
    card = {
        **head,
        "block_size": block_size,
        "mask_token": "the rarest non-special token of the training split (ties: lowest id); the drafter has no "
        "embedding of its own, so MASK is an existing id of the target's vocabulary",
        "loss": f"sum_k w_k CE_k / sum_k w_k, w_k = exp(-(k-1)/{gamma}), soft CE against the frozen target's "
        f"distribution of the token at anchor + k; {anchors} random anchors per sequence of {length}",
        "blocks_seen": len(history) * batch * anchors,
        "seed": seed,
        "data": {
            "text": "regenerated",
            **data,
            "epochs_seen": round(len(history) * batch / len(regenerated), 2),
            "validation_set": val_data,
        },  # fmt: skip
        "recall": {
            "how": "20 batches of 8x256, 16 random anchors each; row k hits when the target's greedy token at "
            "anchor + k is in the drafter's top-t, context teacher-forced. 'corpus': validation-split text; "
            "'greedy': the greedy half of the regenerated validation windows (the target's own text)",
            **runs["regenerated"]["recall"],
        },
        "tau_greedy": {
            "how": "greedy, 64 new tokens after each of 30 validation prompts (last 64 tokens); at B < "
            f"{block_size} the pass still runs the trained block of {block_size} and the chain keeps rows 1 .. B - 1",
            **runs["regenerated"]["tau_greedy"],
        },
        "ablation": {
            "how": "the same recipe, steps and seed on two kinds of text: 'corpus' = at most "
            f"{passes} passes of the training split; 'regenerated' = the target's own text (this drafter); "
            "recall and tau as above",
            **runs,
        },
        "curve": common.curve_of(history),
        "torch": torch.__version__,
    }
    zoo.save_weights(drafter, "dflash", card, preset=name)


# ----------------------------------------------------------------------- DFlash 2 (chapter 11)
def train_dflash2_stage(name: str, seed: int, steps: dict | None = None, minutes: float = 30, batch: int = 8,
                        length: int = 256, block_size: int = 16, anchors: int = 32, gamma: float = 7.0,
                        lr: float = 2e-3, max_batches: int | None = None):  # fmt: skip
    """DFlash 2's two parts on chapter 10's DFlash drafter, which stays FROZEN, so that every variant of
    the ablation shares one backbone and differs only in the parts it adds; trained on the backbone's data
    (the target's regenerated text, regenerated_windows); both runs by chapter 11's
    train_dflash2 (AdamW(0.9, 0.95), warmup-stable-decay over `steps[run]` steps or its share of
    `minutes`). Two runs: "mixed", mixers and selector together (the selector is a head on the mixed
    backbone: its loss does not reach the mixers); "plain", a selector alone on the plain backbone. Card:
    per variant (dflash, selector, mixing, both) tau and acceptance at B = 16 on the validation prompts,
    top-1 recall per row (the selector's top-1 = its walk's teacher-forced pick), candidate recall; the
    oracle ceiling: tau when the target's token is picked whenever it is among the 16 candidates."""
    from types import SimpleNamespace

    from specdec_lib import speculative as spec
    from specdec_lib.dflash import load_dflash
    from specdec_lib.dflash2 import (
        DFlash2Drafter,
        DFlash2Proposer,
        OracleProposer,
        selector_recall,
        train_dflash2,
    )

    steps = steps or {"mixed": 499, "plain": 283}
    target, tok = common.frozen_target(name)
    # the backbone's data (chapter 10)
    regenerated, data = common.regenerated_windows(name, "train", seed=seed)
    base, base_card = load_dflash(target, name)
    base.requires_grad_(False)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)  # one anchor stream, through both runs in turn
    config = {"rank": 64, "top_k": 16}
    runs = {
        "mixed": DFlash2Drafter.from_dflash(target, base, mixing=True, **config),
        "plain": DFlash2Drafter.from_dflash(target, base, mixing=False, **config),
    }
    schedule, curves, done, spent = WarmupStableDecay(warmup=20, decay=0.2, floor=0.1), {}, {}, {}
    for run, drafter in runs.items():
        batches = common.shuffled_batches(
            regenerated, batch, -(-steps[run] * batch // len(regenerated)), seed + 1
        )
        batches = batches[:max_batches]
        share = minutes * steps[run] / sum(steps.values())
        common.log(f"dflash2 {run}: {steps[run]} steps or {share:.1f} min")
        t0 = time.time()
        history = train_dflash2(drafter, target, batches, share * 60, block_size, anchors, gamma, lr, generator=gen,
                                max_steps=steps[run], schedule=schedule, betas=(0.9, 0.95), log_every=50)  # fmt: skip
        curves[run], done[run] = common.curve_of(history), len(history)
        spent[run] = round((time.time() - t0) / 60, 1)  # the ladder table's training minutes (issue 51)
    variants = {
        "dflash": DFlash2Drafter.from_dflash(target, base, mixing=False, selector=False),
        "selector": runs["plain"],
        "mixing": DFlash2Drafter.from_dflash(target, base, mixing=True, selector=False),
        "both": runs["mixed"],
    }
    variants["mixing"].load_state_dict(runs["mixed"].state_dict(), strict=False)  # its mixers, no selector
    val = zoo.token_batches(tok, "validation", batch, length, max_batches=20, seed=seed)
    texts, starts = common.validation_greedy_texts(target, tok)
    ablation = {}
    for v, drafter in variants.items():
        recall = selector_recall(drafter, target, val, block_size, 16, torch.Generator().manual_seed(1))
        pooled = spec.Stats.pool([spec.decode(target, s[:st], 64, DFlash2Proposer(drafter, block_size)).stats
                                  for s, st in zip(texts, starts)])  # fmt: skip
        ablation[v] = {"tau": round(pooled.tau, 4),
                       "acceptance_by_position": [round(float(x), 4) if x == x else None  # nan: never reached
                                                  for x in pooled.acceptance_by_position()],
                       **{k: [round(x, 4) for x in r.tolist()] for k, r in recall.items()}}  # fmt: skip
        common.log(f"dflash2 {v}: tau {ablation[v]['tau']}, top-1 recall {ablation[v]['top1'][:8]}")
    for v in ("dflash", "mixing"):
        oracle = [spec.decode(target, s[:st], 64, OracleProposer(variants[v], block_size, s.tolist())).stats
                  for s, st in zip(texts, starts)]  # fmt: skip
        key = "oracle" if v == "dflash" else "oracle_mixing"
        ablation[key] = {"tau": round(spec.Stats.pool(oracle).tau, 4)}
        common.log(f"dflash2 {key}: tau {ablation[key]['tau']}")
    state = {f"{run}.{k}": v for run, drafter in runs.items() for k, v in drafter.state_dict().items()
             if DFlash2Drafter.is_new_part(k)}  # fmt: skip
    card = {
        "role": "dflash2",
        "for_target": f"{name}/target",
        "backbone": f"{name}/dflash (chapter 10), frozen: {base_card['parameters']} parameters",
        "parameters": {
            run: sum(v.numel() for k, v in state.items() if k.startswith(run + ".")) for run in runs
        },
        "config": config,
        "group_size": runs["mixed"].layers[0].attention_conv.group_size,
        "block_size": block_size,
        "loss": f"DFlash's decay-weighted soft CE (gamma {gamma}; trains the mixers) + the selector's loss: soft CE "
        "over each row's top-16 candidates against the target's distribution renormalised to them, the "
        "predecessor teacher-forced (the text's token), rows whose list misses the target's top token "
        "excluded, the same row weights; the selector reads the drafter's outputs detached",
        "runs": {"mixed": "mixers + selector together", "plain": "a selector alone on the plain backbone"},
        "schedule": f"AdamW(0.9, 0.95), lr {lr}, {schedule}, over each run's steps",
        "trainer": "specdec_lib.dflash2.train_dflash2",
        "data": {
            "text": "regenerated",
            **data,
            "note": "the regenerated windows the DFlash backbone was trained on, fresh shuffles",
        },
        "steps": done,
        "train_minutes": spent,
        "seed": seed,
        "ablation": {
            "how": "tau: greedy, block 16, 64 new tokens after each of 30 validation prompts (last 64 tokens); "
            "recall: 20 validation batches of 8x256, 16 random anchors each, teacher-forced (top1: the chain's "
            "pick for row k, the walk's with a selector; top16: the target's token among the 16 candidates)",
            **ablation,
        },
        "curves": curves,
        "torch": torch.__version__,
    }
    zoo.save_weights(SimpleNamespace(state_dict=lambda: state), "dflash2", card, preset=name)
