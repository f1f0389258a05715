"""What every proposer stage of the zoo shares (hand-written plumbing, not a chapter): the frozen target, the
fields every card starts with, the target's greedy validation texts, the target's regenerated text (chapter
10's self-distillation data, which the fair ladder trains every drafter on), shuffled batches, the
warmup-stable-decay branches of ``at_budgets``, and the log.

Stages call these through the module (``common.regenerated_windows(...)``, not a name imported from it), so
that a test that patches one here (a small stand-in for minutes of generation) reaches every stage.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from specdec_lib import hf, zoo
from specdec_lib.training import WarmupStableDecay, adamw
from specdec_lib.zoo_stages import cards


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


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


# ------------------------------------------------------------------------------------------ batches
def shuffled_batches(windows: torch.Tensor, batch: int, epochs: int, seed: int) -> list[torch.Tensor]:
    """`windows` [N, T] in a seeded shuffled order per epoch, cut into batches [batch, T]."""
    out = []
    for e in range(epochs):
        order = torch.randperm(len(windows), generator=torch.Generator().manual_seed(seed + e))
        out += [windows[order[b : b + batch]] for b in range(0, len(order) - batch + 1, batch)]
    return out


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


# ------------------------------------------------------ the target's regenerated text (chapter 10)
def sampled_windows(count: int, batch: int = 128) -> torch.Tensor:
    """Which of regenerated_windows' `count` windows were drawn at T = 1 (True) rather than greedy: the
    odd batches of `batch`. The one place that knows the layout."""
    return torch.arange(count) // batch % 2 == 1


@torch.no_grad()
def continue_greedy_or_sampled(
    target, ids: torch.Tensor, new_tokens: int, sampled: bool, gen
) -> torch.Tensor:
    """`ids` [B, P] continued by the frozen target for `new_tokens` tokens, each argmax or (`sampled`) drawn
    at T = 1 from its exact distribution with the generator `gen`: [B, P + new_tokens]."""
    cache = hf.new_cache(target)
    logits, new = hf.forward_batch(target, ids, cache)[:, -1], []
    for _ in range(new_tokens):
        if sampled:
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
        else:
            nxt = logits.argmax(-1, keepdim=True)
        new.append(nxt)
        logits = hf.forward_batch(target, nxt, cache)[:, -1]
    return torch.cat([ids, *new], dim=1)


@torch.no_grad()
def regenerated_windows(
    name: str, split: str = "train", seed: int = 0, **budget
) -> tuple[torch.Tensor, dict]:
    """`count` windows [count, length] of the target's OWN text (self-distillation, SpecForge's recipe):
    a random cut of the `split` corpus (zoo.token_batches' shuffled windows) keeps its first P tokens, P
    drawn per batch in `prompt_tokens`, and the frozen target continues it to `length` tokens, half the
    batches greedy, half drawn at T = 1; EOS is a token like any other (a new file starts), as in the
    tiny zoo's greedy texts. budget: any of cards.REGENERATED's (count, length, batch, prompt_tokens).
    Seeded; cached in zoo.cache_dir() (rebuilt, never committed). Returns the windows and a summary for
    the card: size, time, and how the text differs from the corpus (the target's loss on it, repeated
    4-grams)."""
    b = cards.REGENERATED.budget_with(**budget)
    path = zoo.cache_dir() / f"{name}-regenerated-{split}-seed{seed}-{b.count}x{b.length}.pt"
    if path.exists():
        data = torch.load(path)
        return data["windows"], data["summary"]
    target, tok = frozen_target(name)
    corpus = torch.cat(
        zoo.token_batches(tok, split, b.batch, b.length, max_batches=-(-b.count // b.batch), seed=seed)
    )
    gen = torch.Generator().manual_seed(seed)
    out, prompts, t0 = [], [], time.time()
    sampled = sampled_windows(b.count, b.batch)
    for i in range(0, b.count, b.batch):
        P = int(torch.randint(b.prompt_tokens[0], b.prompt_tokens[1] + 1, (1,), generator=gen))
        out.append(
            continue_greedy_or_sampled(target, corpus[i : i + b.batch, :P], b.length - P, sampled[i], gen)
        )
        prompts.append(P)
        log(f"regenerated {split}: {sum(len(w) for w in out)}/{b.count} windows, {time.time() - t0:.0f} s")
    windows = torch.cat(out)
    summary = {
        "recipe": cards.REGENERATED.text(
            "recipe", **{**vars(b), "prompt_tokens": list(b.prompt_tokens)}, split=split, seed=seed
        ),  # fmt: skip
        "windows": len(windows),
        "generated_tokens": sum((b.length - P) * len(w) for P, w in zip(prompts, out)),
        "prompt_lengths": prompts,  # P of each batch
        "generation_minutes": round((time.time() - t0) / 60, 1),
        "statistics": text_statistics(
            target,
            {"corpus": corpus[: len(windows)], "greedy": windows[~sampled], "sampled_t1": windows[sampled]},
            start=b.prompt_tokens[1],
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
