"""The zoo's base models (the ``prompts``, ``target`` and ``draft`` stages): held-out prompts cut from the
validation and test files, a byte-level BPE tokenizer, the target pretrained on the training split and the
draft, trained on data and distilled, the better of the two kept (draft_tournament). Both are small Llamas
(TARGET, DRAFT) on chapter 05's loop (``pretrain``). Budgets and the cards' words: ``zoo_stages.cards``
(PROMPTS, TARGET, DRAFT)."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import platform
import re
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec_lib import zoo
from specdec_lib.training import Cosine, adamw, train_on_frozen_target
from specdec_lib.zoo_stages import cards, common

EOS = "<|endoftext|>"
DEF_LINE = re.compile(r"^\s*(async\s+def|def|class)\s+\w+.*:\s*$")


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


def compiled(model):
    """torch.compile's version of `model`, or `model` where the compiler is missing."""
    try:
        return torch.compile(model)
    except Exception as e:  # pragma: no cover - compiler missing
        common.log("torch.compile unavailable, eager:", e)
        return model


def lm_loss(fwd, x: torch.Tensor, teacher=None) -> torch.Tensor:
    """Next-token cross-entropy of the windows `x` [B, ctx + 1], or (distillation, given the `teacher`) the
    forward KL to the teacher's whole next-token distribution, per position."""
    logits = fwd(input_ids=x[:, :-1]).logits
    if teacher is None:
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
    with torch.no_grad():
        t_logp = F.log_softmax(teacher(input_ids=x[:, :-1]).logits, -1)
    return F.kl_div(F.log_softmax(logits, -1), t_logp, log_target=True, reduction="batchmean") / (
        x.shape[1] - 1
    )


def random_windows(data: torch.Tensor, batch: int, ctx: int, g):
    """Endless batches [batch, ctx + 1] of windows of the training text at random places (generator `g`)."""
    while True:
        starts = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
        yield torch.stack([data[s : s + ctx + 1] for s in starts.tolist()])


def pretrain(
    model, data, steps, batch, ctx, lr, minutes, seed, val=None, teacher=None, compile=True, name=""
):
    """A language model on the training text (the target; the draft, from data or distilled from `teacher`)
    with chapter 05's loop: AdamW(0.9, 0.95) with weight decay 0.1, gradients clipped at 1, warm-up and
    cosine decay to 10% over `steps` steps or `minutes`, whichever runs out first (a slower machine still
    anneals fully and stops on time; the card records where it stopped). Random windows of `ctx` tokens;
    every 25th step's loss in the curve (and every 200th, the validation loss on 24 windows of `val`)."""
    fwd = compiled(model) if compile else model
    curve, t0, steps_taken = [], time.time(), itertools.count()

    def loss_of(x):
        loss, step = lm_loss(fwd, x, teacher), next(steps_taken)
        if step % 25 == 0:  # the loss of the step about to be taken (step 0: the untrained model)
            curve.append({"step": step, "tokens": step * batch * ctx, "train_loss": round(loss.item(), 4),
                          "minutes": round((time.time() - t0) / 60, 2)})  # fmt: skip
            if val is not None and step % 200 == 0:
                curve[-1]["val_loss"] = round(evaluate(model, *val, ctx, max_windows=24)["loss"], 4)
                model.train()
            common.log(name, curve[-1])
        return loss, loss.detach()[None]

    opt = adamw(model, lr, betas=(0.9, 0.95), weight_decay=0.1)
    schedule = Cosine(warmup=min(100, steps // 10), floor=0.1)
    batches = random_windows(data, batch, ctx, torch.Generator().manual_seed(seed))
    history = train_on_frozen_target(model, loss_of, batches, minutes * 60, lr, max_steps=steps,
                                     schedule=schedule, optimizer=opt, clip=1.0)  # fmt: skip
    return {
        "steps": len(history),
        "tokens_seen": len(history) * batch * ctx,
        "wall_minutes": round((time.time() - t0) / 60, 2),
        "curve": curve,
        "batch": batch,
        "context": ctx,
        "peak_lr": lr,
        "schedule": cards.TARGET.text("schedule", schedule=schedule),
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


# ---------------------------------------------------------------- the corpus, the target and the draft
def write_prompts(args) -> None:
    """Held-out prompts from the validation and test files -> specdec_lib/data/prompts.json."""
    prompts = {s: cut_prompts(s, **cards.PROMPTS.budget) for s in ("validation", "test")}
    zoo.PROMPTS_FILE.write_text(
        json.dumps(
            {"rule": cards.PROMPTS.text("rule"), "python": platform.python_version(), **prompts}, indent=0
        )
        + "\n"
    )
    common.log({k: len(v) for k, v in prompts.items()})


def common_card(args) -> dict:
    return {
        "corpus": cards.TARGET.text("corpus", python=platform.python_version(), split_rule=zoo.SPLIT_RULE),
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
    models/<name>/target/ (fp16 weights, evaluated as they ship). Its budget: cards.TARGET's, the steps,
    minutes, vocabulary and context as the command line says (its defaults are that budget)."""
    out, b = zoo.ZOO_DIR / args.name, cards.TARGET.budget_with()
    tok = train_tokenizer(args.vocab)
    train_seqs, train_bytes = encode_split(tok, "train")
    val = encode_split(tok, "validation")
    data = torch.cat(train_seqs)
    common.log(
        f"train: {len(train_seqs)} files, {train_bytes} bytes, {len(data)} tokens; validation: {val[1]} bytes"
    )
    torch.manual_seed(args.seed)
    target = build_llama(TARGET, args, tok.eos_token_id)
    rec = pretrain(target, data, args.target_steps, b.batch, args.ctx, b.lr, args.target_minutes, args.seed,
                   val=val, compile=not args.no_compile, name="target")  # fmt: skip
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


def train_draft(recipe: str, args, target, tok, data: torch.Tensor, prompts: list[str]):
    """One draft recipe ("data" or "distilled", from the target): a one-layer Llama that starts from the
    target's embeddings, pretrained for cards.DRAFT's budget (steps and minutes: the command line's), saved
    and reloaded as it would ship. Returns (its greedy agreement with the target on `prompts`, the draft,
    pretrain's record)."""
    b, out = cards.DRAFT.budget_with(), zoo.ZOO_DIR / args.name / f"draft-{recipe}"
    torch.manual_seed(args.seed + 1)
    draft = build_llama(DRAFT, args, tok.eos_token_id)
    draft.model.embed_tokens.weight.data.copy_(target.model.embed_tokens.weight.data)  # a head start
    r = pretrain(draft, data, args.draft_steps, b.batch, args.ctx, b.lr, args.draft_minutes, args.seed + 1,
                 teacher=target if recipe == "distilled" else None, compile=not args.no_compile,
                 name=f"draft-{recipe}")  # fmt: skip
    save(draft, tok, out, {})
    draft = reload(out)
    alpha = greedy_agreement(target, draft, tok, prompts)
    common.log(f"draft-{recipe}: greedy agreement on {len(prompts)} validation prompts = {alpha:.3f}")
    return alpha, draft, r


def draft_tournament(args) -> None:
    """Two draft recipes, same architecture and budget: trained on data, and distilled from the target
    (forward KL). The one whose greedy agreement with the target on 50 validation prompts is higher is
    kept -> models/<name>/draft/."""
    import shutil

    out, b = zoo.ZOO_DIR / args.name, cards.DRAFT.budget_with()
    target, tok = common.frozen_target(args.name)
    data = torch.cat(encode_split(tok, "train")[0])
    val = encode_split(tok, "validation")
    prompts = zoo.heldout_prompts(b.prompts, split="validation")
    candidates = {
        recipe: train_draft(recipe, args, target, tok, data, prompts) for recipe in ("data", "distilled")
    }
    best = max(candidates, key=lambda k: candidates[k][0])
    alpha, draft, r = candidates[best]
    test_alpha = greedy_agreement(target, draft, tok, zoo.heldout_prompts(b.prompts, split="test"))
    ev = evaluate(draft, *val, args.ctx)
    card = {
        "role": "draft",
        "architecture": "LlamaForCausalLM",
        "recipe": best,
        "parameters": sum(p.numel() for p in draft.parameters()),
        "config": {**DRAFT, "context": args.ctx, "vocab": args.vocab},
        "why": cards.DRAFT.text("why", prompts=b.prompts),
        "greedy_agreement_validation": {k: round(v[0], 4) for k, v in candidates.items()},
        "greedy_agreement_test_50_prompts": round(test_alpha, 4),
        **common_card(args),
        **r,
        "validation": {"loss_per_token": round(ev["loss"], 4), "bits_per_byte": round(ev["bpb"], 4)},
    }
    for recipe in candidates:
        shutil.rmtree(out / f"draft-{recipe}")
    save(draft, tok, out / "draft", card)
    common.log(f"kept the {best} draft; greedy agreement on {b.prompts} test prompts = {test_alpha:.3f}")
