"""Train the offline zoo in one command: ``python -m specdec_lib.zoo_train`` (about 220 min on 2 CPU cores).

Hand-written support code. Steps, all seeded:
1. held-out prompts from the validation and test files  -> specdec_lib/data/prompts.json
2. a byte-level BPE tokenizer on the train files          -> models/tiny-code/*/tokenizer.json
3. the target: a small Llama trained on the train files   -> models/tiny-code/target/
4. the draft: one Llama layer (embeddings started from the target's), trained on data and, separately,
   distilled from the target; the one whose greedy agreement with the target is higher is kept
   -> models/tiny-code/draft/
5. Medusa heads and both MTP variants on the frozen target (chapters 05-06)  (--stage heads)
6. EAGLE's drafter and its two ablations on the frozen target (chapters 07-08)  (--stage eagle)
7. EAGLE-3's drafter and its experiments (chapter 09)  (--stage eagle3)
8. DFlash's drafter (chapter 10)  (--stage dflash)
Every model folder gets a ``card.json``: corpus rule, steps, tokens seen, wall time, validation loss and
bits per byte, the loss curve.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import re
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec_lib import zoo

EOS = "<|endoftext|>"
DEF_LINE = re.compile(r"^\s*(async\s+def|def|class)\s+\w+.*:\s*$")


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


# ---------------------------------------------------------------------------------------- prompts
def cut_prompts(split: str, per_file: int = 3, limit: int = 200) -> list[dict]:
    """Prefixes that end just after a one-line ``def``/``class`` signature (the model writes the body)."""
    found = []
    for rel, path in zoo.corpus_files(split):
        lines = zoo.read_source(path).splitlines()
        idx = [i for i, line in enumerate(lines) if i >= 8 and DEF_LINE.match(line)]
        picks = sorted(
            {idx[len(idx) * j // (per_file + 1)] for j in range(1, per_file + 1)} if idx else set()
        )
        for i in picks:
            # End right after the signature's ':' -- not after its newline: byte-level BPE merges a
            # newline with the indentation that follows, so a lone trailing "\n" token would tell the
            # model "column 0 comes next" and it would start a new top-level statement.
            text = "\n".join(lines[max(0, i - 20) : i + 1])
            while len(text) > 800 and "\n" in text:  # drop whole lines from the front
                text = text[text.index("\n") + 1 :]
            found.append({"file": rel, "line": i + 1, "text": text})
    # a fixed shuffle, so the first n prompts come from many files
    found.sort(key=lambda p: hashlib.sha1(f"{p['file']}:{p['line']}".encode()).hexdigest())
    return found[:limit]


# -------------------------------------------------------------------------------------- tokenizer
def train_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte: any text round-trips
        show_progress=False,
    )
    texts = (zoo.read_source(p) for _, p in zoo.corpus_files("train"))
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        pad_token=EOS,
        clean_up_tokenization_spaces=False,
    )


def encode_split(tok, split: str) -> tuple[list[torch.Tensor], int]:
    """One tensor per file, each starting with EOS (so its first token is predicted too); UTF-8 bytes."""
    seqs, nbytes = [], 0
    for _, path in zoo.corpus_files(split):
        text = zoo.read_source(path)
        nbytes += len(text.encode("utf-8"))
        seqs.append(torch.tensor([tok.eos_token_id] + tok.encode(text), dtype=torch.long))
    return seqs, nbytes


# ------------------------------------------------------------------------------------------ models
def llama(vocab: int, d: int, layers: int, heads: int, inter: int, ctx: int, eos: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=ctx,
        tie_word_embeddings=True,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        rope_theta=10000.0,
    )
    return LlamaForCausalLM(cfg)


def windows(seqs: list[torch.Tensor], ctx: int, stride: int) -> list[tuple[torch.Tensor, int]]:
    """Cut each file into windows of ≤ ctx tokens; (window, index of first scored target position)."""
    out = []
    for s in seqs:
        start = 0
        while True:
            w = s[start : start + ctx]
            out.append((w, 0 if start == 0 else ctx - stride))
            if start + ctx >= len(s):
                break
            start += stride
    return out


@torch.inference_mode()
def evaluate(model, seqs, nbytes: int, ctx: int, max_windows: int | None = None) -> dict:
    """Mean NLL per token and bits per byte (total NLL / UTF-8 bytes / ln 2) over whole files."""
    model.eval()
    ws = windows(seqs, ctx, stride=ctx * 3 // 4)
    if max_windows:
        ws = ws[:: max(1, len(ws) // max_windows)][:max_windows]
    total, count = 0.0, 0
    for w, first in ws:
        logits = model(input_ids=w[None]).logits[0, :-1].float()
        nll = F.cross_entropy(logits, w[1:], reduction="none")[first:]
        total += nll.sum().item()
        count += nll.numel()
    model.train()
    return {"loss": total / count, "tokens": count, "bpb": total / nbytes / math.log(2)}


def train_lm(
    model, data, steps, batch, ctx, lr, budget_s, seed, val=None, teacher=None, compile=True, name=""
):
    """AdamW with warm-up and cosine decay. Progress = max(step/steps, elapsed/budget), so a slower
    machine still anneals properly and stops on time (the card records where it stopped)."""
    g = torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    fwd = model
    if compile:
        try:
            fwd = torch.compile(model)
        except Exception as e:  # pragma: no cover - compiler missing
            log("torch.compile unavailable, eager:", e)
    model.train()
    curve, t0, warm, step = [], time.time(), min(100, steps // 10), 0
    while step < steps:
        progress = max(step / steps, (time.time() - t0) / budget_s)
        if progress >= 1:
            break
        scale = step / warm if step < warm else 0.1 + 0.45 * (1 + math.cos(math.pi * progress))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        starts = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
        x = torch.stack([data[s : s + ctx + 1] for s in starts.tolist()])
        logits = fwd(input_ids=x[:, :-1]).logits
        if teacher is None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        else:  # distillation: match the target's whole next-token distribution (forward KL)
            with torch.no_grad():
                t_logp = F.log_softmax(teacher(input_ids=x[:, :-1]).logits, -1)
            s_logp = F.log_softmax(logits, -1)
            loss = F.kl_div(s_logp, t_logp, log_target=True, reduction="batchmean") / ctx
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 25 == 0 or step == 1:
            point = {
                "step": step,
                "tokens": step * batch * ctx,
                "train_loss": round(loss.item(), 4),
                "minutes": round((time.time() - t0) / 60, 2),
            }
            if val is not None and step % 200 == 0:
                point["val_loss"] = round(evaluate(model, *val, ctx, max_windows=24)["loss"], 4)
            curve.append(point)
            log(name, point)
    return {
        "steps": step,
        "tokens_seen": step * batch * ctx,
        "wall_minutes": round((time.time() - t0) / 60, 2),
        "curve": curve,
        "batch": batch,
        "context": ctx,
        "peak_lr": lr,
    }


@torch.inference_mode()
def greedy_agreement(target, draft, tok, prompts, new_tokens=128) -> float:
    """Along the target's greedy continuation, the fraction of positions where argmax(draft) == argmax(target)."""
    hit = total = 0
    for text in prompts:
        ids = torch.tensor([tok.encode(text)])
        out = target.generate(
            ids, max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=tok.eos_token_id
        )
        n = ids.shape[1]
        t_pred = target(input_ids=out).logits[0, n - 1 : -1].argmax(-1)
        d_pred = draft(input_ids=out).logits[0, n - 1 : -1].argmax(-1)
        hit += (t_pred == d_pred).sum().item()
        total += t_pred.numel()
    return hit / total


def save(model, tok, folder: Path, card: dict):
    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(folder)  # fp16 storage, loaded as fp32
    model.to(torch.float32)
    tok.save_pretrained(folder)
    (folder / "card.json").write_text(json.dumps(card, indent=1) + "\n")


def reload(folder: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def train_together(
    models: dict, lrs: dict, step_loss, batches, minutes: float, what: str, log_every: int = 50
):
    """Train several proposers side by side on the same batches (AdamW, 20-step warm-up, cosine to 10%,
    stopped by the time budget or the end of the batches). step_loss(ids) -> {name: (loss, per-part
    losses)}: one frozen-target pass per batch can feed them all. Returns (steps, last losses, minutes)."""
    opts = {k: torch.optim.AdamW(m.parameters(), lr=lrs[k], weight_decay=0.0) for k, m in models.items()}
    budget, t0, warm = minutes * 60, time.time(), 20
    step, last = 0, {}
    for step, ids in enumerate(batches):
        progress = max(step / len(batches), (time.time() - t0) / budget)
        if progress >= 1:
            break
        scale = min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for k, (loss, per) in step_loss(ids).items():
            for g in opts[k].param_groups:
                g["lr"] = lrs[k] * scale
            opts[k].zero_grad()
            loss.backward()
            opts[k].step()
            last[k] = [round(x, 4) for x in per.tolist()]
        if step % log_every == 0:
            log(f"{what} step {step} ({(time.time() - t0) / 60:.1f} min): losses {last}")
    return step, last, (time.time() - t0) / 60


# ------------------------------------------------------------------------- proposer heads (ch05-06)
def train_heads(
    name: str, minutes: float, seed: int, batch: int = 8, length: int = 256, max_steps: int = 4000
):
    """Medusa heads, independent MTP heads and sequential MTP modules, trained together on the frozen
    target: one target forward per batch feeds all three (AdamW, warm-up, cosine; time-budgeted)."""
    from specdec_lib import hf
    from specdec_lib.medusa import MedusaHeads, head_accuracy, medusa_loss
    from specdec_lib.mtp import (
        IndependentMTP,
        SequentialMTP,
        depth_accuracy,
        independent_mtp_loss,
        sequential_mtp_loss,
    )

    target, _, tok = zoo.load_pair(name, device="cpu")
    target.requires_grad_(False)
    torch.manual_seed(seed)
    models = {
        "medusa": MedusaHeads.for_target(target, num_heads=3, train_projection=False),
        "mtp-independent": IndependentMTP(target, num_heads=3),
        "mtp-sequential": SequentialMTP(target, depth=3),
    }
    losses = {
        "medusa": lambda m, f, ids: medusa_loss(m, f[-1], ids),
        "mtp-independent": lambda m, f, ids: independent_mtp_loss(m, f[hf.num_layers(target) - 1], ids),
        "mtp-sequential": lambda m, f, ids: sequential_mtp_loss(m, f[-1], ids),
    }
    lrs = {"medusa": 2e-3, "mtp-independent": 1e-3, "mtp-sequential": 1e-3}
    batches = zoo.token_batches(tok, "train", batch, length, max_batches=max_steps, seed=seed)
    log(f"heads: {len(batches)} batches of {batch}x{length} tokens available; budget {minutes} min")
    layers = (hf.num_layers(target) - 1, -1)

    def step_loss(ids):
        with torch.no_grad():
            feats = hf.hidden_states(target, ids, layers)
        return {k: losses[k](m, feats, ids) for k, m in models.items()}

    step, last, wall = train_together(models, lrs, step_loss, batches, minutes, "heads")
    val = zoo.token_batches(tok, "validation", batch, length, max_batches=40, seed=seed)
    out = zoo.ZOO_DIR / name
    for k, m in models.items():
        m.eval()
        if k == "medusa":
            acc = head_accuracy(m, target, val, top=10)
            accuracy = {
                "top1": [round(float(a), 4) for a in acc[:, 0]],
                "top_i": [[round(float(x), 4) for x in row] for row in acc],
            }
        else:
            accuracy = {"top1": [round(float(a), 4) for a in depth_accuracy(m, target, val)]}
        card = {
            "role": k,
            "for_target": f"{name}/target",
            "parameters": sum(p.numel() for p in m.parameters()),
            "config": {
                "medusa": {"num_heads": 3, "train_projection": False},
                "mtp-independent": {"num_heads": 3},
                "mtp-sequential": {"depth": 3},
            }[k],
            "steps": step,
            "tokens_seen": step * batch * length,
            "wall_minutes": round(wall, 1),
            "lr": lrs[k],
            "seed": seed,
            "validation_tokens_per_depth": "40 batches of 8x256 validation tokens, teacher-forced",
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
            "last_train_ce": last[k],
            "torch": torch.__version__,
        }
        zoo.save_weights(m, k, card, preset=name)
        log(f"{k}: {card['parameters'] / 1e6:.2f}M parameters, validation top-1 by depth {accuracy['top1']}")
    log(f"heads saved under {out} ({wall:.1f} min of training)")


def validation_greedy_texts(target, tok) -> tuple[list[torch.Tensor], list[int]]:
    """30 validation prompts (their last 64 tokens), each followed by 64 greedy target tokens, and where
    each continuation starts: the text the EAGLE cards measure acceptance and calibration on."""
    from specdec_lib.autoregressive import generate_ar

    prompts = [torch.tensor(tok.encode(p))[-64:] for p in zoo.heldout_prompts(30, split="validation")]
    texts = [torch.cat([p, torch.tensor(generate_ar(target, p, 64))]) for p in prompts]
    return texts, [len(p) for p in prompts]


def train_eagle_stage(
    name: str, minutes: float, seed: int, batch: int = 8, length: int = 256, max_steps: int = 6000
):
    """EAGLE's drafter and its two ablations (chapter 07), trained together on the frozen target: one
    target forward per batch feeds all three (AdamW, warm-up, cosine; time-budgeted). Each card records
    teacher-forced validation numbers and acc[d, r] along the target's greedy text (rank_acceptance),
    from which chapter 07 builds the static tree."""
    from specdec_lib.eagle import EAGLE_VARIANTS, EagleDrafter, eagle_features, eagle_loss, rank_acceptance

    target, _, tok = zoo.load_pair(name, device="cpu")
    target.requires_grad_(False)
    torch.manual_seed(seed)
    models = {k: EagleDrafter(target, use_token=v["use_token"]) for k, v in EAGLE_VARIANTS.items()}
    lr = 1e-3
    batches = zoo.token_batches(tok, "train", batch, length, max_batches=max_steps, seed=seed)
    log(f"eagle: {len(batches)} batches of {batch}x{length} tokens available; budget {minutes} min")

    def step_loss(ids):
        f = eagle_features(target, ids)
        return {k: eagle_loss(m, f, ids, w_cls=EAGLE_VARIANTS[k]["w_cls"]) for k, m in models.items()}

    step, last, wall = train_together(
        models, dict.fromkeys(models, lr), step_loss, batches, minutes, "eagle", 100
    )
    val = zoo.token_batches(tok, "validation", batch, length, max_batches=20, seed=seed)
    seqs, starts = validation_greedy_texts(target, tok)
    for k, m in models.items():
        m.eval()
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
        card = {
            "role": k,
            "for_target": f"{name}/target",
            "parameters": sum(p.numel() for p in m.parameters()),
            "config": {"use_token": EAGLE_VARIANTS[k]["use_token"]},
            "loss": f"SmoothL1(feature) + {EAGLE_VARIANTS[k]['w_cls']} x soft CE; uniform input noise +-0.1",
            "steps": step,
            "tokens_seen": step * batch * length,
            "wall_minutes": round(wall, 1),
            "lr": lr,
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
            "last_train": last[k],
            "torch": torch.__version__,
        }
        zoo.save_weights(m, k, card, preset=name)
        log(
            f"{k}: {card['parameters'] / 1e6:.2f}M parameters, {card['validation']}, acc[:, 0] {acc[:, 0].tolist()}"
        )
    log(f"eagle drafters saved under {zoo.ZOO_DIR / name} ({wall:.1f} min of training)")
    calibrate_eagle(name, (seqs, starts))


TEMPERATURE_GRID = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def calibrate_eagle(name: str, texts=None):
    """Fit the EAGLE drafter's greedy confidence temperature (chapter 08) on validation prompts and record
    it, with the expected calibration errors, in its card (EAGLE-2 shapes greedy trees with it)."""
    import json

    from specdec_lib.eagle import load_eagle
    from specdec_lib.eagle2 import calibration_records, fit_greedy_temperature, reliability

    target, _, tok = zoo.load_pair(name, device="cpu")
    drafter, card = load_eagle(target, "eagle", name)
    seqs, starts = texts or validation_greedy_texts(target, tok)  # train_eagle_stage hands its own over
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
    log(f"eagle calibration: {card['calibration']}")


# ------------------------------------------------------------------------- EAGLE-3 (chapter 09)
EAGLE3_RUNS = {  # name: (drafter kwargs, training-time-test steps, budget in units of the token budget)
    "eagle3": ({}, 6, 9),
    "eagle3-last-layer": ({"feature_layers": (-1,)}, 6, 3),
    "eagle3-teacher-forced": ({}, 1, 3),
}


def eagle_snapshot_eval(drafter, target, texts, prompts) -> dict:
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
        spec.generate(target, p, 64, Eagle2Proposer(drafter, 16, greedy_temperature=t)).stats for p in prompts
    ]
    pooled = spec.Stats.pool(runs)
    drafter.train()
    return {
        "acc": [[round(float(x), 4) for x in row] for row in acc],
        "greedy_temperature": t,
        "tau_greedy_eagle2_tree": round(pooled.tau, 4),
        "acceptance_by_depth": [round(float(a), 4) for a in pooled.acceptance_by_position()],
    }


def train_eagle3_stage(
    name: str, seed: int, batch: int = 8, length: int = 256, units: int = 9, max_batches: int | None = None
):
    """EAGLE-3 (chapter 09) and the experiments its chapter plots, in ONE pass over the training split.

    The pass is cut into `units` equal token budgets. Trained side by side on the same batches, one
    frozen-target forward each: EAGLE-1 and EAGLE-3 for all 9 units (the scaling experiment), and two
    EAGLE-3 ablations for 3 (last-layer features only; teacher forcing, i.e. one step instead of the
    training-time test). Learning rate: warm-up then constant, decayed linearly to 10% over the last 10%
    of each budget (a warmup-stable-decay schedule): the 1- and 3-unit snapshots are decay branches split
    off the constant-rate run at 0.9 and 2.7 units, so each budget is a fully trained drafter and one
    run gives every point. Only the 9-unit EAGLE-3 ships; the card stores every number."""
    import copy

    from specdec_lib.eagle import EagleDrafter, eagle_loss
    from specdec_lib.eagle3 import (
        DRAFT_VOCAB,
        Eagle3Drafter,
        draft_vocabulary,
        eagle3_loss,
        target_inputs,
        token_counts,
    )

    target, _, tok = zoo.load_pair(name, device="cpu")
    target.requires_grad_(False)
    torch.manual_seed(seed)
    counts = token_counts(tok, "train")
    d2t, _ = draft_vocabulary(counts, DRAFT_VOCAB)
    batches = zoo.token_batches(tok, "train", batch, length, max_batches, seed=seed)  # the whole split, once
    unit = len(batches) // units
    total = unit * units
    texts = validation_greedy_texts(target, tok)
    prompts = [s[:st] for s, st in zip(*texts)]
    lrs = {"eagle": 1e-3, "eagle3": 2e-3}
    warm = 20

    class Run:  # one model, its optimiser and its schedule
        def __init__(self, key, model, steps, budget, lr, opt=None):
            self.key, self.model, self.steps, self.end, self.lr = key, model, steps, budget * unit, lr
            self.opt = opt or torch.optim.AdamW(
                model.parameters(), lr=self.lr, betas=(0.9, 0.95), weight_decay=0.0
            )

        def scale(self, step):
            decay_from = 0.9 * self.end
            tail = 1.0 if step < decay_from else 1.0 - 0.9 * (step - decay_from) / (self.end - decay_from)
            return min(1.0, (step + 1) / warm) * tail

        def branch(self, budget):  # a copy (weights and optimiser state) that decays toward `budget`
            model = copy.deepcopy(self.model)
            opt = torch.optim.AdamW(model.parameters(), lr=self.lr, betas=(0.9, 0.95), weight_decay=0.0)
            opt.load_state_dict(copy.deepcopy(self.opt.state_dict()))
            return Run(f"{self.key}:{budget}", model, self.steps, budget, self.lr, opt)

    runs = [Run("eagle", EagleDrafter(target), 0, units, lrs["eagle"])]
    for key, (kw, steps, budget) in EAGLE3_RUNS.items():
        runs.append(Run(key, Eagle3Drafter(target, d2t, **kw), steps, budget, lrs["eagle3"]))
    fused = runs[1].model  # its taps and -1 cover every run's inputs
    results, t0, last = {}, time.time(), {}
    branch_at = {round(0.9 * b * unit): b for b in (1, 3) if b < units}
    log(
        f"eagle3: {total} batches of {batch}x{length} tokens, a unit = {unit} batches; draft vocab {len(d2t)}"
    )
    for step, ids in enumerate(batches[:total]):
        if step in branch_at:
            runs += [r.branch(branch_at[step]) for r in runs if r.key in ("eagle", "eagle3")]
        hidden, target_logits = target_inputs(target, fused, ids)  # one frozen-target pass for all
        for r in runs:
            if isinstance(r.model, EagleDrafter):
                loss, per = eagle_loss(r.model, hidden[-1], ids)
            else:
                loss, per = eagle3_loss(r.model, hidden, target_logits, ids, r.steps)
            for g in r.opt.param_groups:
                g["lr"] = r.lr * r.scale(step)
            r.opt.zero_grad()
            loss.backward()
            r.opt.step()
            last[r.key] = [round(x, 3) for x in per.tolist()]
        if step % 50 == 0:
            log(f"eagle3 step {step}/{total} ({(time.time() - t0) / 60:.1f} min): {last}")
        for r in [r for r in runs if step + 1 == r.end]:
            runs.remove(r)
            last.pop(r.key, None)
            key = r.key if ":" in r.key else f"{r.key}:{r.end // unit}"
            results[key] = {
                "tokens": r.end * batch * length,
                **eagle_snapshot_eval(r.model, target, texts, prompts),
            }
            log(
                f"{key}: {results[key]['tau_greedy_eagle2_tree']} tau, acc[:, 0] {[a[0] for a in results[key]['acc']]}"
            )
            if r.key == "eagle3":
                final = r.model
    wall = (time.time() - t0) / 60
    res = results[f"eagle3:{units}"]
    card = {
        "role": "eagle3",
        "for_target": f"{name}/target",
        "parameters": sum(p.numel() for p in final.parameters()),
        "config": {
            "feature_layers": list(final.feature_layers),
            "draft_vocab": len(d2t),
            "ttt_steps": EAGLE3_RUNS["eagle3"][1],
        },
        "loss": "sum_s 0.8^s x soft CE against the target's distribution over the draft vocabulary, "
        "positions whose target argmax is outside it masked; training-time test, 6 steps",
        "schedule": f"AdamW(0.9, 0.95), lr {lrs['eagle3']}, {warm}-step warm-up, constant, linear decay "
        "to 10% over the last 10% of each budget",
        "steps": total,
        "tokens_seen": total * batch * length,
        "wall_minutes": round(wall, 1),
        "seed": seed,
        "draft_vocabulary": {
            "rule": "the most frequent tokens of the training split",
            "train_token_coverage": round(
                float(counts.sort(descending=True).values[: len(d2t)].sum() / counts.sum()), 4
            ),
        },
        "rank_acceptance": {
            "how": "as the eagle card's, at depth 8, for the shipped (9-unit) drafter",
            "acc": res["acc"],
        },
        "calibration": {"greedy_temperature": res["greedy_temperature"]},
        "experiments": {
            "how": "one pass over the training split cut into 9 token budgets; each point is a drafter "
            "trained to that budget (warmup-stable-decay branches); tau: greedy decoding with EAGLE-2's "
            "tree (16 nodes, depth 8, top-4, fitted temperature) after each of 30 validation prompts, "
            "64 new tokens; acc as in rank_acceptance. EAGLE-1: lr 1e-3, regression + 0.1 CE, noise 0.1",
            "unit_tokens": unit * batch * length,
            "results": results,
        },
        "last_train": last,
        "torch": torch.__version__,
    }
    zoo.save_weights(final, "eagle3", card, preset=name)
    log(f"eagle3 saved under {zoo.ZOO_DIR / name} ({wall:.1f} min); tau {res['tau_greedy_eagle2_tree']}")


# ------------------------------------------------------------------------- DFlash (chapter 10)
def budgeted(batches, opt, lr: float, minutes: float, warm: int = 20):
    """Yield (step, batch) until `minutes` have passed, setting opt's learning rate before each step: a
    linear warm-up over `warm` steps, constant, then a linear decay to 10% over the last 20% of the time."""
    t0, budget = time.time(), minutes * 60
    for step, ids in enumerate(batches):
        frac = (time.time() - t0) / budget
        if frac >= 1:
            return
        scale = min(1.0, (step + 1) / warm) * (1.0 if frac < 0.8 else 1.0 - 0.9 * (frac - 0.8) / 0.2)
        for g in opt.param_groups:
            g["lr"] = lr * scale
        yield step, ids


def train_dflash_stage(
    name: str, minutes: float, seed: int, batch: int = 8, length: int = 256, block_size: int = 16,
    anchors: int = 32, gamma: float = 7.0, lr: float = 1e-3, layers: int = 2, passes: int = 2,
    max_batches: int | None = None,
):  # fmt: skip
    """DFlash's drafter (chapter 10) on the frozen target, SpecForge's recipe at our scale: `anchors`
    random blocks of `block_size` per sequence, the training mask, position-decayed soft CE (gamma 7).
    Time-budgeted over at most `passes` passes of the training split (fresh anchors each pass); AdamW,
    warm-up, constant, then linear decay to 10% over the last 20% of the budget (by elapsed time). The
    card holds the held-out recall per block position and tau at block sizes 4, 8 and 16."""
    from specdec_lib import speculative as spec
    from specdec_lib.dflash import (
        DFlashDrafter,
        DFlashProposer,
        block_recall,
        dflash_loss,
        sample_anchors,
        target_inputs,
    )
    from specdec_lib.eagle3 import token_counts

    target, _, tok = zoo.load_pair(name, device="cpu")
    target.requires_grad_(False)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    counts = token_counts(tok, "train")
    counts[tok.all_special_ids] = counts.max() + 1  # never EOS: it also occurs in the context
    mask_id = int(counts.argmin())  # the rarest training token (ties: the lowest id) stands for MASK
    drafter = DFlashDrafter(target, layers, mask_token_id=mask_id)
    batches = zoo.token_batches(tok, "train", batch, length, max_batches, seed=seed) * passes
    opt = torch.optim.AdamW(drafter.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warm = 20
    log(f"dflash: up to {len(batches)} batches of {batch}x{length}, {anchors} blocks of {block_size} each; "
        f"budget {minutes} min; mask token {mask_id} (count {int(counts[mask_id])})")  # fmt: skip
    t0, step, curve = time.time(), 0, []
    drafter.train()
    for step, ids in budgeted(batches, opt, lr, minutes, warm):
        a = sample_anchors(length, block_size, anchors, batch, gen)
        loss, per = dflash_loss(drafter, *target_inputs(target, drafter, ids), ids, a, block_size, gamma)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            curve.append({"step": step, "minutes": round((time.time() - t0) / 60, 2),
                          "ce_by_row": [round(x, 3) for x in per.tolist()]})  # fmt: skip
            log(f"dflash step {step} ({curve[-1]['minutes']} min): loss {float(loss.detach()):.3f}, "
                f"rows 1/4/8/15 {[curve[-1]['ce_by_row'][k] for k in (0, 3, 7, block_size - 2)]}")  # fmt: skip
    steps, wall = step, (time.time() - t0) / 60
    drafter.eval()
    val = zoo.token_batches(tok, "validation", batch, length, max_batches=20, seed=seed)
    recall = block_recall(drafter, target, val, block_size, 16, (1, 16), torch.Generator().manual_seed(1))
    log(
        f"dflash recall top-1 {[round(x, 3) for x in recall[0].tolist()]}, top-16 {[round(x, 3) for x in recall[1].tolist()]}"
    )
    texts, starts = validation_greedy_texts(target, tok)
    taus = {}
    for B in (4, 8, 16):
        runs = [
            spec.generate(target, s[:st], 64, DFlashProposer(drafter, B)).stats
            for s, st in zip(texts, starts)
        ]
        pooled = spec.Stats.pool(runs)
        taus[str(B)] = {"tau": round(pooled.tau, 4),
                        "acceptance_by_position": [round(float(x), 4) for x in pooled.acceptance_by_position()]}  # fmt: skip
        log(f"dflash B={B}: tau {taus[str(B)]['tau']}")
    card = {
        "role": "dflash",
        "for_target": f"{name}/target",
        "parameters": sum(p.numel() for p in drafter.parameters()),
        "config": {
            "layers": layers,
            "feature_layers": list(drafter.feature_layers),
            "mask_token_id": mask_id,
            "block_size": block_size,
        },  # fmt: skip
        "mask_token": "the rarest non-special token of the training split (ties: lowest id); the drafter has no embedding "
        "of its own, so MASK is an existing id of the target's vocabulary",
        "loss": f"sum_k w_k CE_k / sum_k w_k, w_k = exp(-(k-1)/{gamma}), soft CE against the frozen target's "
        f"distribution of the token at anchor + k; {anchors} random anchors per sequence of {length}",
        "schedule": f"AdamW(0.9, 0.95), lr {lr}, {warm}-step warm-up, constant, linear decay to 10% over the last "
        "20% of the time budget",
        "steps": steps,
        "tokens_seen": steps * batch * length,
        "blocks_seen": steps * batch * anchors,
        "wall_minutes": round(wall, 1),
        "seed": seed,
        "recall": {
            "how": "20 validation batches of 8x256, 16 random anchors each; row k hits when the target's greedy "
            "token at anchor + k is in the drafter's top-t, context teacher-forced",
            "top1": [round(x, 4) for x in recall[0].tolist()],
            "top16": [round(x, 4) for x in recall[1].tolist()],
        },
        "tau_greedy": {
            "how": "greedy, 64 new tokens after each of 30 validation prompts (last 64 tokens)",
            **taus,
        },
        "curve": curve,
        "torch": torch.__version__,
    }
    zoo.save_weights(drafter, "dflash", card, preset=name)
    log(f"dflash saved under {zoo.ZOO_DIR / name} ({wall:.1f} min of training)")


# ----------------------------------------------------------------------- DFlash 2 (chapter 11)
def train_dflash2_stage(
    name: str, minutes: float, seed: int, batch: int = 8, length: int = 256, block_size: int = 16,
    anchors: int = 32, gamma: float = 7.0, lr: float = 2e-3, selector_share: float = 0.25,
    max_batches: int | None = None,
):  # fmt: skip
    """DFlash 2's two parts on chapter 10's DFlash drafter, which stays FROZEN, so that every variant of
    the ablation shares one backbone and differs only in the parts it adds. Two runs: (1) mixers and
    selector together (the selector is a head on the mixed backbone: its loss does not reach the mixers),
    (1 - selector_share) of the budget; (2) a selector alone on the plain backbone, the rest. Card: per
    variant (dflash, selector, mixing, both) tau and acceptance at B = 16 on the validation prompts,
    top-1 recall per row (the selector's top-1 = its walk's teacher-forced pick), candidate recall; the
    oracle ceiling: tau when the target's token is picked whenever it is among the 16 candidates."""
    from types import SimpleNamespace

    from specdec_lib import speculative as spec
    from specdec_lib.dflash import load_dflash, sample_anchors, target_inputs
    from specdec_lib.dflash2 import (
        DFlash2Drafter,
        DFlash2Proposer,
        OracleProposer,
        dflash2_loss,
        selector_recall,
    )

    target, _, tok = zoo.load_pair(name, device="cpu")
    target.requires_grad_(False)
    base, base_card = load_dflash(target, name)
    base.requires_grad_(False)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    rank, top_k = 64, 16
    runs = {
        "mixed": DFlash2Drafter.from_dflash(target, base, mixing=True, rank=rank, top_k=top_k),
        "plain": DFlash2Drafter.from_dflash(target, base, mixing=False, rank=rank, top_k=top_k),
    }
    budgets = {"mixed": minutes * (1 - selector_share), "plain": minutes * selector_share}
    curves, steps = {}, {}
    for run, drafter in runs.items():
        for p in drafter.backbone():
            p.requires_grad_(False)
        params = [p for p in drafter.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
        batches = zoo.token_batches(tok, "train", batch, length, max_batches, seed=seed + 1)
        t0, curve = time.time(), []
        log(
            f"dflash2 {run}: {sum(p.numel() for p in params)} trainable parameters, budget {budgets[run]:.1f} min"
        )
        drafter.train()
        step = 0
        for step, ids in budgeted(batches, opt, lr, budgets[run]):
            a = sample_anchors(length, block_size, anchors, batch, gen)
            loss, per = dflash2_loss(drafter, *target_inputs(target, drafter, ids), ids, a, block_size, gamma)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 50 == 0:
                rows = block_size - 1
                curve.append({"step": step, "minutes": round((time.time() - t0) / 60, 2),
                              "ce_by_row": [round(x, 3) for x in per[:rows].tolist()],
                              "selector_ce_by_row": [round(x, 3) for x in per[rows:].tolist()]})  # fmt: skip
                log(f"dflash2 {run} step {step} ({curve[-1]['minutes']} min): loss {float(loss.detach()):.3f}, "
                    f"rows 1/4/8/15 CE {[curve[-1]['ce_by_row'][k] for k in (0, 3, 7, 14)]}, selector "
                    f"{[curve[-1]['selector_ce_by_row'][k] for k in (0, 3, 7, 14)]}")  # fmt: skip
        drafter.eval()
        curves[run], steps[run] = curve, step
    variants = {
        "dflash": DFlash2Drafter.from_dflash(target, base, mixing=False, selector=False),
        "selector": runs["plain"],
        "mixing": DFlash2Drafter.from_dflash(target, base, mixing=True, selector=False),
        "both": runs["mixed"],
    }
    variants["mixing"].load_state_dict(runs["mixed"].state_dict(), strict=False)  # its mixers, no selector
    val = zoo.token_batches(tok, "validation", batch, length, max_batches=20, seed=seed)
    texts, starts = validation_greedy_texts(target, tok)
    ablation = {}
    for v, drafter in variants.items():
        recall = selector_recall(drafter, target, val, block_size, 16, torch.Generator().manual_seed(1))
        runs_v = [spec.generate(target, s[:st], 64, DFlash2Proposer(drafter, block_size)).stats
                  for s, st in zip(texts, starts)]  # fmt: skip
        pooled = spec.Stats.pool(runs_v)
        ablation[v] = {"tau": round(pooled.tau, 4),
                       "acceptance_by_position": [round(float(x), 4) if x == x else None  # nan: never reached
                                                  for x in pooled.acceptance_by_position()],
                       **{k: [round(x, 4) for x in r.tolist()] for k, r in recall.items()}}  # fmt: skip
        log(f"dflash2 {v}: tau {ablation[v]['tau']}, top-1 recall {ablation[v]['top1'][:8]}")
    for v in ("dflash", "mixing"):
        oracle = [spec.generate(target, s[:st], 64, OracleProposer(variants[v], block_size, s.tolist())).stats
                  for s, st in zip(texts, starts)]  # fmt: skip
        key = "oracle" if v == "dflash" else "oracle_mixing"
        ablation[key] = {"tau": round(spec.Stats.pool(oracle).tau, 4)}
        log(f"dflash2 {key}: tau {ablation[key]['tau']}")
    state = {f"{run}.{k}": v for run, drafter in runs.items() for k, v in drafter.state_dict().items()
             if DFlash2Drafter.is_new_part(k)}  # fmt: skip
    card = {
        "role": "dflash2",
        "for_target": f"{name}/target",
        "backbone": f"{name}/dflash (chapter 10), frozen: {base_card['parameters']} parameters",
        "parameters": {
            run: sum(v.numel() for k, v in state.items() if k.startswith(run + ".")) for run in runs
        },
        "config": {"rank": rank, "top_k": top_k, "group_size": 16, "block_size": block_size},
        "loss": f"DFlash's decay-weighted soft CE (gamma {gamma}; trains the mixers) + the selector's loss: soft CE "
        "over each row's top-16 candidates against the target's distribution renormalised to them, the "
        "predecessor teacher-forced (the text's token), rows whose list misses the target's top token "
        "excluded, the same row weights; the selector reads the drafter's outputs detached",
        "runs": {"mixed": "mixers + selector together", "plain": "a selector alone on the plain backbone"},
        "schedule": f"AdamW(0.9, 0.95), lr {lr}, 20-step warm-up, constant, linear decay to 10% over the last 20% "
        f"of each run's budget; budgets {budgets} minutes",
        "steps": steps,
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
    log(f"dflash2 saved under {zoo.ZOO_DIR / name}")


# ------------------------------------------------------------------- the stages the registry names
STAGES = {  # `--stage NAME` -> its trainer, in the order `--stage all` runs them after the target and draft
    "heads": lambda a: train_heads(a.name, a.heads_minutes, a.seed),
    "eagle": lambda a: train_eagle_stage(a.name, a.eagle_minutes, a.seed),
    "eagle3": lambda a: train_eagle3_stage(a.name, a.seed, max_batches=a.max_batches),
    "dflash": lambda a: train_dflash_stage(a.name, a.dflash_minutes, a.seed, max_batches=a.max_batches),
    "dflash2": lambda a: train_dflash2_stage(a.name, a.dflash2_minutes, a.seed, max_batches=a.max_batches),
}


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
    """Run one stage, then check that it wrote every weight its registered methods load."""
    from specdec_lib.methods import zoo_stages

    STAGES[stage](args)
    absent = [
        w for w in zoo_stages()[stage] if not (zoo.ZOO_DIR / args.name / w / "model.safetensors").exists()
    ]
    if absent:
        raise SystemExit(f"stage {stage} did not write the weights {absent} that registered methods load")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="tiny-code")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--target-minutes", type=float, default=60)
    ap.add_argument("--target-steps", type=int, default=1800)
    ap.add_argument("--draft-minutes", type=float, default=6, help="for each of the two draft recipes")
    ap.add_argument("--draft-steps", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    ap.add_argument(
        "--stage",
        choices=["all", *STAGES],
        default="all",
        help="heads: only the ch05-06 heads; eagle: only the ch07-08 drafters; eagle3: chapter 09's "
        "drafter and its experiments (one pass over the training split, ~50 min on 2 cores); dflash: "
        "chapter 10's drafter (--dflash-minutes); dflash2: chapter 11's mixers and selectors on the frozen "
        "DFlash drafter, and the ablation (--dflash2-minutes)",
    )
    ap.add_argument("--max-batches", type=int, default=None, help="eagle3: cut the pass short (smoke tests)")
    ap.add_argument("--dflash-minutes", type=float, default=28, help="DFlash's drafter (chapter 10)")
    ap.add_argument("--dflash2-minutes", type=float, default=20, help="DFlash 2's parts (chapter 11)")
    ap.add_argument("--heads-minutes", type=float, default=24, help="Medusa + both MTP variants, together")
    ap.add_argument("--eagle-minutes", type=float, default=15, help="EAGLE + its two ablations, together")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    check_stages()
    if args.stage != "all":
        return run_stage(args.stage, args)
    t_all = time.time()
    out = zoo.ZOO_DIR / args.name
    common = {
        "corpus": f"CPython {platform.python_version()} standard library *.py without tests; "
        f"split {zoo.SPLIT_RULE}",
        "seed": args.seed,
        "torch": torch.__version__,
        "device": "cpu",
        "torch_threads": torch.get_num_threads(),
    }

    log("prompts")
    prompts = {s: cut_prompts(s) for s in ("validation", "test")}
    zoo.PROMPTS_FILE.write_text(
        json.dumps(
            {
                "rule": "20 lines before and including a one-line def/class "
                "signature, ending at its colon, at most 800 chars; three per file; fixed shuffle",
                "python": platform.python_version(),
                **prompts,
            },
            indent=0,
        )
        + "\n"
    )
    log({k: len(v) for k, v in prompts.items()})

    log("tokenizer")
    tok = train_tokenizer(args.vocab)
    eos = tok.eos_token_id
    train_seqs, train_bytes = encode_split(tok, "train")
    val = encode_split(tok, "validation")
    data = torch.cat(train_seqs)
    log(
        f"train: {len(train_seqs)} files, {train_bytes} bytes, {len(data)} tokens "
        f"({train_bytes / len(data):.2f} bytes/token); validation: {len(val[0])} files, {val[1]} bytes"
    )

    torch.manual_seed(args.seed)
    target = llama(args.vocab, d=256, layers=6, heads=4, inter=688, ctx=args.ctx, eos=eos)
    n_params = sum(p.numel() for p in target.parameters())
    log(f"target: {n_params / 1e6:.2f}M parameters")
    rec = train_lm(
        target,
        data,
        args.target_steps,
        8,
        args.ctx,
        2e-3,
        args.target_minutes * 60,
        args.seed,
        val=val,
        compile=not args.no_compile,
        name="target",
    )
    save(target, tok, out / "target", {})
    target = reload(out / "target")  # evaluate exactly what ships (fp16-rounded weights)
    ev = evaluate(target, *val, args.ctx)
    log("target validation", ev)
    card = {
        "role": "target",
        "architecture": "LlamaForCausalLM",
        "parameters": n_params,
        "config": {
            "hidden": 256,
            "layers": 6,
            "heads": 4,
            "intermediate": 688,
            "context": args.ctx,
            "vocab": args.vocab,
        },
        **common,
        **rec,
        "validation": {
            "loss_per_token": round(ev["loss"], 4),
            "bits_per_byte": round(ev["bpb"], 4),
            "tokens": ev["tokens"],
            "bytes": val[1],
        },
        "train_bytes": train_bytes,
        "train_tokens_in_corpus": len(data),
    }
    save(target, tok, out / "target", card)
    target.requires_grad_(False)

    # Two draft recipes, same architecture and budget; keep the one the target agrees with more.
    sel_prompts = [p["text"] for p in prompts["validation"][:50]]
    candidates = {}
    for recipe in ("data", "distilled"):
        torch.manual_seed(args.seed + 1)
        draft = llama(args.vocab, d=256, layers=1, heads=4, inter=688, ctx=args.ctx, eos=eos)
        draft.model.embed_tokens.weight.data.copy_(target.model.embed_tokens.weight.data)  # a head start
        r = train_lm(
            draft,
            data,
            args.draft_steps,
            8,
            args.ctx,
            2e-3,
            args.draft_minutes * 60,
            args.seed + 1,
            teacher=target if recipe == "distilled" else None,
            compile=not args.no_compile,
            name=f"draft-{recipe}",
        )
        save(draft, tok, out / f"draft-{recipe}", {})
        draft = reload(out / f"draft-{recipe}")
        alpha = greedy_agreement(target, draft, tok, sel_prompts)
        log(f"draft-{recipe}: greedy agreement on 50 validation prompts = {alpha:.3f}")
        candidates[recipe] = (alpha, draft, r)
    best = max(candidates, key=lambda k: candidates[k][0])
    alpha, draft, r = candidates[best]
    test_alpha = greedy_agreement(target, draft, tok, [p["text"] for p in prompts["test"][:50]])
    ev = evaluate(draft, *val, args.ctx)
    card = {
        "role": "draft",
        "architecture": "LlamaForCausalLM",
        "recipe": best,
        "parameters": sum(p.numel() for p in draft.parameters()),
        "config": {
            "hidden": 256,
            "layers": 1,
            "heads": 4,
            "intermediate": 688,
            "context": args.ctx,
            "vocab": args.vocab,
        },
        "why": "trained on data and distilled from the target (forward KL), same budget; kept the one "
        "with the higher greedy agreement with the target on 50 validation prompts",
        "greedy_agreement_validation": {k: round(v[0], 4) for k, v in candidates.items()},
        "greedy_agreement_test_50_prompts": round(test_alpha, 4),
        **common,
        **r,
        "validation": {"loss_per_token": round(ev["loss"], 4), "bits_per_byte": round(ev["bpb"], 4)},
    }
    import shutil

    for recipe in candidates:
        shutil.rmtree(out / f"draft-{recipe}")
    save(draft, tok, out / "draft", card)
    log(f"kept the {best} draft; greedy agreement on 50 test prompts = {test_alpha:.3f}")
    for stage in STAGES:
        run_stage(stage, args)
    log(f"zoo done in {(time.time() - t_all) / 60:.1f} min")


if __name__ == "__main__":
    sys.exit(main())
