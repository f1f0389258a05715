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
import hashlib
import itertools
import json
import math
import platform
import re
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec_lib import hf, zoo
from specdec_lib.training import Cosine, WarmupStableDecay, adamw, train_on_frozen_target
from specdec_lib.zoo_stages import ladder
from specdec_lib.zoo_stages.eagle3_real import train_eagle3_real

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


def pretrain(
    model, data, steps, batch, ctx, lr, minutes, seed, val=None, teacher=None, compile=True, name=""
):
    """A language model on the training text (the target; the draft, from data or distilled from `teacher`)
    with chapter 05's loop: AdamW(0.9, 0.95) with weight decay 0.1, gradients clipped at 1, warm-up and
    cosine decay to 10% over `steps` steps or `minutes`, whichever runs out first (a slower machine still
    anneals fully and stops on time; the card records where it stopped). Random windows of `ctx` tokens."""
    g = torch.Generator().manual_seed(seed)
    fwd = model
    if compile:
        try:
            fwd = torch.compile(model)
        except Exception as e:  # pragma: no cover - compiler missing
            log("torch.compile unavailable, eager:", e)

    def windows_of_text():
        while True:
            starts = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
            yield torch.stack([data[s : s + ctx + 1] for s in starts.tolist()])

    curve, t0, steps_taken = [], time.time(), itertools.count()

    def loss_of(x):
        logits = fwd(input_ids=x[:, :-1]).logits
        if teacher is None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        else:  # distillation: match the target's whole next-token distribution (forward KL)
            with torch.no_grad():
                t_logp = F.log_softmax(teacher(input_ids=x[:, :-1]).logits, -1)
            loss = F.kl_div(F.log_softmax(logits, -1), t_logp, log_target=True, reduction="batchmean") / ctx
        step = next(steps_taken)
        if step % 25 == 0:  # the loss of the step about to be taken (step 0: the untrained model)
            point = {"step": step, "tokens": step * batch * ctx, "train_loss": round(loss.item(), 4),
                     "minutes": round((time.time() - t0) / 60, 2)}  # fmt: skip
            if val is not None and step % 200 == 0:
                point["val_loss"] = round(evaluate(model, *val, ctx, max_windows=24)["loss"], 4)
                model.train()
            curve.append(point)
            log(name, point)
        return loss, loss.detach()[None]

    opt = adamw(model, lr, betas=(0.9, 0.95), weight_decay=0.1)
    schedule = Cosine(warmup=min(100, steps // 10), floor=0.1)
    history = train_on_frozen_target(model, loss_of, windows_of_text(), minutes * 60, lr, max_steps=steps,
                                     schedule=schedule, optimizer=opt, clip=1.0)  # fmt: skip
    return {
        "steps": len(history),
        "tokens_seen": len(history) * batch * ctx,
        "wall_minutes": round((time.time() - t0) / 60, 2),
        "curve": curve,
        "batch": batch,
        "context": ctx,
        "peak_lr": lr,
        "schedule": f"AdamW(0.9, 0.95), weight decay 0.1, clip 1.0, {schedule}",
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


def frozen_target(name: str):
    """The zoo's target (frozen) and tokenizer: what every proposer stage trains on."""
    target, _, tok = zoo.load_pair(name, device="cpu")
    return target.requires_grad_(False), tok


def card_of(name: str, role: str, module, config: dict, train, history, batch: int, length: int, t0: float,
            **recipe) -> dict:  # fmt: skip
    """The fields every proposer's card starts with: what it is, its constructor's `config`, the chapter's
    `train` function that trained it, its recipe, and how far it got (`history`: the loop's loss log)."""
    return {
        "role": role,
        "for_target": f"{name}/target",
        "parameters": sum(p.numel() for p in module.parameters()),
        "config": config,
        "trainer": f"{train.__module__}.{train.__name__}",
        **recipe,
        "steps": len(history),
        "tokens_seen": len(history) * batch * length,
        "wall_minutes": round((time.time() - t0) / 60, 1),
    }


def curve_of(history, every: int = 50) -> list[dict]:
    """Every `every`-th step's per-part losses from a loop's loss log, for the card."""
    return [{"step": i, "losses": [round(x, 3) for x in history[i]]} for i in range(0, len(history), every)]


# ------------------------------------------------------------------------- proposer heads (ch05-06)
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
    target, tok = frozen_target(name)
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
        head = card_of(name, k, m, config, train, history, batch, length, t0, lr=lr,
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
        log(f"{k}: {len(history)} steps, validation top-1 by depth {accuracy['top1']}")


def validation_greedy_texts(target, tok) -> tuple[list[torch.Tensor], list[int]]:
    """30 validation prompts, each followed by up to 64 greedy target tokens, and where each continuation
    starts: the text the EAGLE cards measure acceptance and calibration on. The tiny zoo's prompts are the
    last 64 tokens of held-out code; a real preset's (zoo.REAL_PRESETS) are validation instructions in its
    chat template, answered up to its end token."""
    from specdec_lib.autoregressive import generate_ar

    if zoo.preset_of(target) in zoo.REAL_PRESETS:
        prompts = [zoo.chat_ids(tok, text) for text in zoo.instructions("validation", 30)]
        eos = tok.eos_token_id
    else:
        prompts = [torch.tensor(tok.encode(p))[-64:] for p in zoo.heldout_prompts(30, split="validation")]
        eos = None
    texts = [torch.cat([p, torch.tensor(generate_ar(target, p, 64, eos_token_id=eos))]) for p in prompts]
    return texts, [len(p) for p in prompts]


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
    head = card_of(name, role, m, config, train_eagle, history, batch, length, t0, lr=lr,
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
    seqs, starts = texts or validation_greedy_texts(target, tok)  # the EAGLE stage hands its own over
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
    seqs, starts = texts or validation_greedy_texts(target, tok)
    gen = torch.Generator().manual_seed(seed)
    acc = slot_acceptance(drafter, target, seqs, starts, SamplingParams(1.0), generator=gen)
    card["calibration"]["sampled_slot_acceptance"] = {
        "how": "chapter 08's slot_acceptance at T = 1: depths 1-5 along 64 greedy target tokens after each of "
        "30 validation prompts, 4 draws of 8 slots per position, 10 bins of the drafter's top probability",
        "acc": [[round(float(x), 4) for x in row] for row in acc],
    }
    (zoo.ZOO_DIR / name / kind / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    log(f"{kind} sampled-slot acceptance, first slot by bin: {acc[:, 0].tolist()}")


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


def at_budgets(model, train, batches, unit: int, budgets, lr: float) -> dict:
    """One warmup-stable-decay run that yields a fully trained drafter at every budget (in units of
    `unit` batches): the run stays at the peak rate, and at 90% of each budget a copy (weights and
    optimiser state) branches off and decays linearly to 10% over the budget's last 10%. The last budget's
    drafter is `model` itself. `train(model, batches, schedule, optimizer)` runs the chapter's train_* on
    exactly those batches (its budget: their number). Returns {budget: drafter}."""
    import copy

    wsd = WarmupStableDecay(warmup=20, decay=0.1, floor=0.1)

    def run_clock(at: int, end: int):  # a call that starts at step `at` of a run whose budget ends at `end`
        return lambda step, _: wsd(at + step, (at + step) / end)

    opt, done, out = adamw(model, lr, betas=(0.9, 0.95)), 0, {}
    for b in sorted(budgets):
        decay_from, end = round(0.9 * b * unit), b * unit
        train(model, batches[done:decay_from], run_clock(done, end), opt)
        done = decay_from
        if b == max(budgets):
            twin, twin_opt = model, opt
        else:
            twin = copy.deepcopy(model)
            twin_opt = adamw(twin, lr, betas=(0.9, 0.95))
            twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))
        train(twin, batches[decay_from:end], run_clock(decay_from, end), twin_opt)
        out[b] = twin
    return out


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

    target, tok = frozen_target(name)
    torch.manual_seed(seed)
    counts = token_counts(tok, "train") if counts is None else counts
    d2t, _ = draft_vocabulary(counts, DRAFT_VOCAB)
    if batches is None:
        batches = zoo.token_batches(
            tok, "train", batch, length, max_batches, seed=seed
        )  # the whole split, once
    unit = len(batches) // units
    texts = validation_greedy_texts(target, tok)
    prompts = [s[:st] for s, st in zip(*texts)]
    lrs = {"eagle": 1e-3, "eagle3": 2e-3}
    log(
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
            log(f"{k}: done in an earlier run ({path})")
            continue
        if minutes is not None and time.time() - t0 > minutes * 60:
            log(f"eagle3: this run's {minutes} minutes are spent; run the stage again to go on from {k}")
            return None
        lr, t = lrs["eagle" if k == "eagle" else "eagle3"], time.time()
        trained_at = at_budgets(m, trainer(k, lr), batches, unit, budgets[k], lr)
        train_minutes = round((time.time() - t) / 60, 1)
        for b, trained in trained_at.items():
            results[f"{k}:{b}"] = {"tokens": b * unit * batch * length,
                                   **eagle_snapshot_eval(trained, target, texts, prompts)}  # fmt: skip
            log(f"{k}:{b}: tau {results[f'{k}:{b}']['tau_greedy_eagle2_tree']}")
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
    log(f"eagle3 saved under {zoo.ZOO_DIR / name}; tau {res['tau_greedy_eagle2_tree']}")
    return card


# ------------------------------------------------------------------------- DFlash (chapter 10)
def sampled_windows(count: int, batch: int = 128) -> torch.Tensor:
    """Which of regenerated_windows' `count` windows were drawn at T = 1 (True) rather than greedy: the
    odd batches of `batch`. The one place that knows the layout."""
    return torch.arange(count) // batch % 2 == 1


@torch.no_grad()
def regenerated_windows(name: str, split: str = "train", count: int = 6144, seed: int = 0, length: int = 256,
                        batch: int = 128, prompt_tokens: tuple[int, int] = (16, 128)) -> tuple[torch.Tensor, dict]:  # fmt: skip
    """`count` windows [count, length] of the target's OWN text (self-distillation, SpecForge's recipe):
    a random cut of the `split` corpus (zoo.token_batches' shuffled windows) keeps its first P tokens, P
    drawn per batch in `prompt_tokens`, and the frozen target continues it to `length` tokens, half the
    batches greedy, half drawn at T = 1; EOS is a token like any other (a new file starts), as in the
    tiny zoo's greedy texts. Seeded; cached in zoo.cache_dir() (rebuilt, never committed). Returns the
    windows and a summary for the card: size, time, and how the text differs from the corpus (the
    target's loss on it, repeated 4-grams)."""
    path = zoo.cache_dir() / f"{name}-regenerated-{split}-seed{seed}-{count}x{length}.pt"
    if path.exists():
        data = torch.load(path)
        return data["windows"], data["summary"]
    target, tok = frozen_target(name)
    corpus = torch.cat(
        zoo.token_batches(tok, split, batch, length, max_batches=-(-count // batch), seed=seed)
    )
    gen = torch.Generator().manual_seed(seed)
    out, prompts, t0 = [], [], time.time()
    sampled = sampled_windows(count, batch)
    for i in range(0, count, batch):
        P = int(torch.randint(prompt_tokens[0], prompt_tokens[1] + 1, (1,), generator=gen))
        ids = corpus[i : i + batch, :P]
        cache = hf.new_cache(target)
        logits, new = hf.forward_batch(target, ids, cache)[:, -1], []
        for _ in range(length - P):
            if sampled[i]:
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
            else:
                nxt = logits.argmax(-1, keepdim=True)
            new.append(nxt)
            logits = hf.forward_batch(target, nxt, cache)[:, -1]
        out.append(torch.cat([ids, *new], dim=1))
        prompts.append(P)
        log(f"regenerated {split}: {sum(len(w) for w in out)}/{count} windows, {time.time() - t0:.0f} s")
    windows = torch.cat(out)
    minutes = (time.time() - t0) / 60
    summary = {
        "recipe": f"random cuts of the {split} split keep their first P tokens (P uniform in {list(prompt_tokens)} "
        f"per batch of {batch}); the frozen target continues each to {length} tokens, alternate batches greedy "
        f"and at T = 1; seed {seed}",
        "windows": len(windows),
        "generated_tokens": sum((length - P) * len(w) for P, w in zip(prompts, out)),
        "prompt_lengths": prompts,  # P of each batch
        "generation_minutes": round(minutes, 1),
        "statistics": text_statistics(
            target,
            {
                "corpus": corpus[: len(windows)],
                "greedy": windows[~sampled],
                "sampled_t1": windows[sampled],
            },
            start=prompt_tokens[1],
        ),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"windows": windows, "summary": summary}, path)
    return windows, summary


@torch.no_grad()
def text_statistics(target, texts: dict, start: int, rows: int = 64) -> dict:
    """How predictable each kind of text is, on the tokens after `start` of its first `rows` windows: the
    target's mean loss (nats per token) and top-1 agreement with the text, and the share of 4-grams
    that already occurred earlier in the same window (repetition)."""
    stats = {}
    for kind, w in texts.items():
        w = w[:rows]
        logits = hf.forward_batch(target, w)[:, start - 1 : -1]
        nxt = w[:, start:]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), nxt.reshape(-1))
        top1 = (logits.argmax(-1) == nxt).float().mean()
        seen = total = 0
        for row in w.tolist():
            grams = set(tuple(row[j : j + 4]) for j in range(start - 3))
            for j in range(start - 3, len(row) - 3):
                g = tuple(row[j : j + 4])
                seen, total = seen + (g in grams), total + 1
                grams.add(g)
        stats[kind] = {"target_loss": round(float(loss), 3), "target_top1": round(float(top1), 3),
                       "repeated_4grams": round(seen / total, 3)}  # fmt: skip
    return stats


def mask_token(tok) -> int:
    """The id that stands for MASK: the rarest non-special token of the training split (ties: the lowest
    id). The drafter has no embedding of its own, so MASK is an existing id of the target's vocabulary."""
    from specdec_lib.eagle3 import token_counts

    counts = token_counts(tok, "train")
    counts[tok.all_special_ids] = counts.max() + 1  # never EOS: it also occurs in the context
    return int(counts.argmin())


def shuffled_batches(windows: torch.Tensor, batch: int, epochs: int, seed: int) -> list[torch.Tensor]:
    """`windows` [N, T] in a seeded shuffled order per epoch, cut into batches [batch, T]."""
    out = []
    for e in range(epochs):
        order = torch.randperm(len(windows), generator=torch.Generator().manual_seed(seed + e))
        out += [windows[order[b : b + batch]] for b in range(0, len(order) - batch + 1, batch)]
    return out


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

    target, tok = frozen_target(name)
    config = {"layers": layers, "mask_token_id": mask_token(tok), "block_size": block_size}
    regenerated, data = regenerated_windows(name, "train", seed=seed)
    val_regen, val_data = regenerated_windows(name, "validation", count=512, seed=seed + 1)
    greedy_val = val_regen[~sampled_windows(len(val_regen))]  # the greedy half
    evals = {
        "corpus": zoo.token_batches(tok, "validation", batch, length, max_batches=20, seed=seed),
        "greedy": list(greedy_val[: 20 * batch].split(batch)),
    }
    texts, starts = validation_greedy_texts(target, tok)
    sources = {
        "corpus": lambda: zoo.token_batches(tok, "train", batch, length, max_batches, seed=seed) * passes,
        "regenerated": lambda: shuffled_batches(
            regenerated, batch, -(-steps * batch // len(regenerated)), seed
        )[:max_batches],
    }
    runs, saved = {}, None
    for kind in DFLASH_DATA:
        torch.manual_seed(seed)
        if kind == "corpus" and corpus_drafter is not None:
            (drafter, its_card), history = corpus_drafter, None
            log("dflash corpus: measuring the drafter passed in (trained by this recipe), not training one")
        else:
            drafter = DFlashDrafter(target, **config)
            batches = sources[kind]()
            log(f"dflash {kind}: up to {len(batches)} batches of {batch}x{length}, {anchors} blocks of "
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
        log(f"dflash {kind}: top-1 recall on greedy text {runs[kind]['recall']['greedy']['top1'][:8]}, "
            f"tau {[taus[b]['tau'] for b in taus]}")  # fmt: skip
        if kind == "regenerated":
            saved = (drafter, history, t0, schedule)
    drafter, history, t0, schedule = saved
    config["feature_layers"] = list(drafter.feature_layers)  # the course's taps for this target
    head = card_of(name, "dflash", drafter, config, train_dflash, history, batch, length, t0, lr=lr,
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
        "curve": curve_of(history),
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
    target, tok = frozen_target(name)
    regenerated, data = regenerated_windows(name, "train", seed=seed)  # the backbone's data (chapter 10)
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
        batches = shuffled_batches(regenerated, batch, -(-steps[run] * batch // len(regenerated)), seed + 1)
        batches = batches[:max_batches]
        share = minutes * steps[run] / sum(steps.values())
        log(f"dflash2 {run}: {steps[run]} steps or {share:.1f} min")
        t0 = time.time()
        history = train_dflash2(drafter, target, batches, share * 60, block_size, anchors, gamma, lr, generator=gen,
                                max_steps=steps[run], schedule=schedule, betas=(0.9, 0.95), log_every=50)  # fmt: skip
        curves[run], done[run] = curve_of(history), len(history)
        spent[run] = round((time.time() - t0) / 60, 1)  # the ladder table's training minutes (issue 51)
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
        pooled = spec.Stats.pool([spec.decode(target, s[:st], 64, DFlash2Proposer(drafter, block_size)).stats
                                  for s, st in zip(texts, starts)])  # fmt: skip
        ablation[v] = {"tau": round(pooled.tau, 4),
                       "acceptance_by_position": [round(float(x), 4) if x == x else None  # nan: never reached
                                                  for x in pooled.acceptance_by_position()],
                       **{k: [round(x, 4) for x in r.tolist()] for k, r in recall.items()}}  # fmt: skip
        log(f"dflash2 {v}: tau {ablation[v]['tau']}, top-1 recall {ablation[v]['top1'][:8]}")
    for v in ("dflash", "mixing"):
        oracle = [spec.decode(target, s[:st], 64, OracleProposer(variants[v], block_size, s.tolist())).stats
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


# ---------------------------------------------------------------- the corpus, the target and the draft
def write_prompts(args) -> None:
    """Held-out prompts from the validation and test files -> specdec_lib/data/prompts.json."""
    prompts = {s: cut_prompts(s) for s in ("validation", "test")}
    rule = ("20 lines before and including a one-line def/class signature, ending at its colon, at most 800 "
            "chars; three per file; fixed shuffle")  # fmt: skip
    zoo.PROMPTS_FILE.write_text(
        json.dumps({"rule": rule, "python": platform.python_version(), **prompts}, indent=0) + "\n"
    )
    log({k: len(v) for k, v in prompts.items()})


def common_card(args) -> dict:
    return {
        "corpus": f"CPython {platform.python_version()} standard library *.py without tests; split {zoo.SPLIT_RULE}",
        "seed": args.seed,
        "torch": torch.__version__,
        "device": "cpu",
        "torch_threads": torch.get_num_threads(),
    }


TARGET = {"hidden": 256, "layers": 6, "heads": 4, "intermediate": 688}  # the target's architecture
DRAFT = {**TARGET, "layers": 1}  # the draft: one layer of the same width


def build_llama(config: dict, args, eos: int):
    return llama(args.vocab, config["hidden"], config["layers"], config["heads"], config["intermediate"],
                 args.ctx, eos)  # fmt: skip


def train_target(args) -> None:
    """A byte-level BPE tokenizer on the train files, and the target: a small Llama pretrained on them ->
    models/<name>/target/ (fp16 weights, evaluated as they ship)."""
    out = zoo.ZOO_DIR / args.name
    tok = train_tokenizer(args.vocab)
    train_seqs, train_bytes = encode_split(tok, "train")
    val = encode_split(tok, "validation")
    data = torch.cat(train_seqs)
    log(
        f"train: {len(train_seqs)} files, {train_bytes} bytes, {len(data)} tokens; validation: {val[1]} bytes"
    )
    torch.manual_seed(args.seed)
    target = build_llama(TARGET, args, tok.eos_token_id)
    rec = pretrain(target, data, args.target_steps, 8, args.ctx, 2e-3, args.target_minutes, args.seed, val=val,
                   compile=not args.no_compile, name="target")  # fmt: skip
    save(target, tok, out / "target", {})
    target = reload(out / "target")  # evaluate exactly what ships (fp16-rounded weights)
    ev = evaluate(target, *val, args.ctx)
    card = {
        "role": "target",
        "architecture": "LlamaForCausalLM",
        "parameters": sum(p.numel() for p in target.parameters()),
        "config": {**TARGET, "context": args.ctx, "vocab": args.vocab},
        **common_card(args),
        **rec,
        "validation": {
            "loss_per_token": round(ev["loss"], 4),
            "bits_per_byte": round(ev["bpb"], 4),
            "tokens": ev["tokens"],
            "bytes": val[1],
        },  # fmt: skip
        "train_bytes": train_bytes,
        "train_tokens_in_corpus": len(data),
    }
    save(target, tok, out / "target", card)


def draft_tournament(args) -> None:
    """Two draft recipes, same architecture and budget: trained on data, and distilled from the target
    (forward KL). The one whose greedy agreement with the target on 50 validation prompts is higher is
    kept -> models/<name>/draft/."""
    import shutil

    out = zoo.ZOO_DIR / args.name
    target, tok = frozen_target(args.name)
    data = torch.cat(encode_split(tok, "train")[0])
    val = encode_split(tok, "validation")
    prompts = zoo.heldout_prompts(50, split="validation")
    candidates = {}
    for recipe in ("data", "distilled"):
        torch.manual_seed(args.seed + 1)
        draft = build_llama(DRAFT, args, tok.eos_token_id)
        draft.model.embed_tokens.weight.data.copy_(target.model.embed_tokens.weight.data)  # a head start
        r = pretrain(draft, data, args.draft_steps, 8, args.ctx, 2e-3, args.draft_minutes, args.seed + 1,
                     teacher=target if recipe == "distilled" else None, compile=not args.no_compile,
                     name=f"draft-{recipe}")  # fmt: skip
        save(draft, tok, out / f"draft-{recipe}", {})
        draft = reload(out / f"draft-{recipe}")
        alpha = greedy_agreement(target, draft, tok, prompts)
        log(f"draft-{recipe}: greedy agreement on 50 validation prompts = {alpha:.3f}")
        candidates[recipe] = (alpha, draft, r)
    best = max(candidates, key=lambda k: candidates[k][0])
    alpha, draft, r = candidates[best]
    test_alpha = greedy_agreement(target, draft, tok, zoo.heldout_prompts(50, split="test"))
    ev = evaluate(draft, *val, args.ctx)
    card = {
        "role": "draft",
        "architecture": "LlamaForCausalLM",
        "recipe": best,
        "parameters": sum(p.numel() for p in draft.parameters()),
        "config": {**DRAFT, "context": args.ctx, "vocab": args.vocab},
        "why": "trained on data and distilled from the target (forward KL), same budget; kept the one "
        "with the higher greedy agreement with the target on 50 validation prompts",
        "greedy_agreement_validation": {k: round(v[0], 4) for k, v in candidates.items()},
        "greedy_agreement_test_50_prompts": round(test_alpha, 4),
        **common_card(args),
        **r,
        "validation": {"loss_per_token": round(ev["loss"], 4), "bits_per_byte": round(ev["bpb"], 4)},
    }
    for recipe in candidates:
        shutil.rmtree(out / f"draft-{recipe}")
    save(draft, tok, out / "draft", card)
    log(f"kept the {best} draft; greedy agreement on 50 test prompts = {test_alpha:.3f}")


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
