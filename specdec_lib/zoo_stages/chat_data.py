"""The real model's training text, in resumable chunks (issue 49): the target's own answers to the project's
training instructions, with the target features its drafters train on, captured while it writes.

Chunk i holds the training instructions i*CHUNK .. (i+1)*CHUNK - 1 (``zoo.instructions("train")``, whose order
spreads templates and topics, so any number of chunks is a balanced sample), each answered twice by the frozen
target: greedy, and drawn at T = 1 from its exact distribution (no top-k, no top-p), up to ``new_tokens`` new
tokens or its end token. While it writes, the target's hidden states at the drafters' taps and its last layer
and its argmax at every position are kept, so a drafter trains on them without a target pass per step (the
offline mode of SpecForge and of vLLM's speculators).

Two stores, because they differ a thousandfold in size:
- the tokens: ``data/answers/<preset>/chunk-NNN.npz`` in the repository (uint16 ids, about 0.3 MB a chunk),
  committed: writing them takes CPU hours and a machine's cache does not outlive a session;
- the features: ``zoo.cache_dir()/features/<preset>/chunk-NNN/`` (fp16, about 4.6 KB a token for SmolLM2-135M's
  four taps: never committed), recomputed from the committed tokens by one batched prefill when absent.

A finished chunk is never recomputed. ``python -m specdec_lib.zoo_stages.chat_data --name smollm2-135m
--chunks 12 --minutes 40`` writes the missing chunks in order and starts no new one after 40 minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from specdec_lib import hf, zoo

CHUNK = 512  # instructions a chunk: both answers of each, about 7 minutes of SmolLM2-135M on 2 cores
ANSWERS_DIR = Path(
    os.environ.get("SPECDEC_ANSWERS_DIR", Path(__file__).resolve().parents[2] / "data" / "answers")
)
MODES = ("greedy", "sampled_t1")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def chunk_count(name: str) -> int:
    """How many chunks the training instructions make (the last may be shorter)."""
    del name  # every preset answers the same instructions
    return -(-len(zoo.instructions("train")) // CHUNK)


def tokens_path(name: str, index: int) -> Path:
    return ANSWERS_DIR / name / f"chunk-{index:03d}.npz"


def features_dir(name: str, index: int) -> Path:
    return zoo.cache_dir() / "features" / name / f"chunk-{index:03d}"


def tap_layers(target) -> tuple[int, ...]:
    """The hidden states kept for every position: EAGLE-3's three taps (chapter 09) and the last layer (after
    the final norm: the LM head's input, from which any slice of the target's logits is one matmul)."""
    from specdec_lib.eagle3 import eagle3_feature_layers

    return (*eagle3_feature_layers(target), -1)


def _instruction_digest(texts: list[str]) -> str:
    return hashlib.sha1("\n".join(texts).encode()).hexdigest()[:16]


@torch.no_grad()
def write_answers(
    target, prompts: list[torch.Tensor], new_tokens: int, eos: int, sampled: bool,
    generator: torch.Generator | None, layers: tuple[int, ...],
) -> list[dict]:  # fmt: skip
    """One batch of the target's answers, left-padded, with its features at every position.

    Each row: "ids" (prompt + answer, up to and including the end token), "hidden" [n, len(layers), d] (fp16,
    the state the target computed when it read each token) and "argmax" [n] (its most likely next token
    there). Greedy rows take the argmax; sampled rows one draw from softmax(logits) at T = 1. A row that
    ended leaves the batch (and its cache rows) once its end token is read, so the rest run faster."""
    B, width = len(prompts), max(len(p) for p in prompts)
    ids, mask = left_padded(prompts, width, eos)
    cache = hf.new_cache(target)
    logits, hidden = hf.forward_rows(target, ids, mask, cache, layers)
    d = hidden[-1].shape[-1]
    states = torch.zeros(B, width + new_tokens, len(layers), d, dtype=torch.float16)
    argmax = torch.zeros(B, width + new_tokens, dtype=torch.int32)
    answers = torch.full((B, new_tokens), eos, dtype=torch.long)
    states[:, :width] = torch.stack([hidden[i] for i in layers], 2)
    # the prompt's argmax: the last position's comes with the logits, the others are one LM-head pass
    argmax[:, : width - 1] = hf.lm_head(target)(hidden[-1][:, :-1]).argmax(-1)
    argmax[:, width - 1] = logits.argmax(-1)
    alive, lengths = torch.arange(B), torch.full((B,), new_tokens)  # original rows still in the batch
    for t in range(new_tokens):
        if sampled:
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]
        else:
            nxt = logits.argmax(-1)
        answers[alive, t] = nxt
        ended = nxt == eos
        lengths[alive[ended]] = t + 1
        mask = torch.cat([mask, torch.ones(len(alive), 1, dtype=torch.long)], 1)
        logits, hidden = hf.forward_rows(target, nxt[:, None], mask, cache, layers)
        states[alive, width + t] = torch.stack([hidden[i][:, 0] for i in layers], 1).half()
        argmax[alive, width + t] = logits.argmax(-1).int()
        if ended.any():  # their end token is read: drop them
            keep = (~ended).nonzero()[:, 0]
            if len(keep) == 0:
                break
            hf.keep_cache_rows(cache, keep)
            alive, mask, logits = alive[keep], mask[keep], logits[keep]
    if not torch.isfinite(states).all():
        raise FloatingPointError("a hidden state overflowed fp16: store this target's features in fp32")
    return [
        answer_row(p, answers[r, : int(lengths[r])], states[r], argmax[r], width)
        for r, p in enumerate(prompts)
    ]


def left_padded(prompts: list[torch.Tensor], width: int, eos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompts as one batch [B, width], left-padded with `eos`, and its attention mask."""
    ids = torch.full((len(prompts), width), eos, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :], mask[r, width - len(p) :] = p, 1
    return ids, mask


def answer_row(prompt: torch.Tensor, answer: torch.Tensor, states, argmax, width: int) -> dict:
    """One row of write_answers: prompt + answer, and the features of those positions (its padding cut)."""
    keep = slice(width - len(prompt), width + len(answer))
    return {
        "ids": torch.cat([prompt, answer]),
        "hidden": states[keep].clone(),
        "argmax": argmax[keep].clone(),
    }


def answer_chunk(name: str, index: int, new_tokens: int = 128, batch: int = 128, seed: int = 0,
                 pair=None) -> dict:  # fmt: skip
    """Chunk `index` of preset `name`'s answers: loaded if written, else written now (tokens to ANSWERS_DIR,
    features to the cache). Returns {"sequences", "prompt_lengths", "sampled", "instruction", "meta"}.
    `pair`: (target, tokenizer) already loaded."""
    texts = zoo.instructions("train")
    if not 0 <= index < chunk_count(name):
        raise ValueError(f"chunk index must be in 0..{chunk_count(name) - 1}, got {index}")
    first, mine = index * CHUNK, texts[index * CHUNK : (index + 1) * CHUNK]
    path = tokens_path(name, index)
    if path.exists():
        return written_chunk(path, mine)
    target, tok = pair if pair is not None else zoo.load_pair(name, device="cpu")[::2]
    target.eval()
    if hf.vocab_size(target) > np.iinfo(np.uint16).max + 1:
        raise ValueError(f"{name}'s {hf.vocab_size(target)} ids do not fit the chunks' uint16 token store")
    layers, prompts = tap_layers(target), [zoo.chat_ids(tok, t) for t in mine]
    generator, t0 = torch.Generator().manual_seed(seed * 1_000_003 + index), time.time()
    rows = answer_all(target, prompts, new_tokens, batch, tok.eos_token_id, generator, layers)
    seconds = time.time() - t0
    keys = [(s, i) for s in (False, True) for i in range(len(prompts))]
    seqs, prompt_lengths = [rows[k]["ids"] for k in keys], [len(prompts[i]) for _, i in keys]
    meta = {
        "preset": name,
        "index": index,
        "chunk": CHUNK,
        "instructions": [first, first + len(mine)],
        "instructions_sha1": _instruction_digest(mine),
        "modes": list(MODES),
        "new_tokens": new_tokens,
        "seed": seed,
        "how": f"write_answers: the frozen target in fp32 on the CPU, left-padded batches of {batch}, "
        "features captured as it wrote",
        "seconds": round(seconds, 1),
        "answer_tokens": sum(len(s) - p for s, p in zip(seqs, prompt_lengths)),
        "tokens": sum(len(s) for s in seqs),
        "answers_ended": sum(int(s[-1]) == tok.eos_token_id for s in seqs),
        "torch": torch.__version__,
    }
    save_chunk(name, index, [rows[k] for k in keys], layers, keys, prompt_lengths, first, meta)
    log(f"{name} chunk {index}: {meta['answer_tokens']} answer tokens in {seconds / 60:.1f} min "
        f"({meta['answer_tokens'] / seconds * 60:.0f} a minute)")  # fmt: skip
    return load_tokens(path)


def written_chunk(path: Path, instructions: list[str]) -> dict:
    """A written chunk's tokens, if it answers `instructions` (else the instruction set changed: an error)."""
    chunk = load_tokens(path)
    if chunk["meta"]["instructions_sha1"] != _instruction_digest(instructions):
        raise ValueError(
            f"{path} answers other instructions than zoo.instructions('train') now holds: the "
            "instruction set changed since it was written; delete the chunks to rewrite them"
        )
    return chunk


def answer_all(target, prompts, new_tokens: int, batch: int, eos: int, generator, layers) -> dict:
    """Both answers to every prompt (write_answers, `batch` prompts of similar lengths at a time: little
    padding), greedy ones first: {(sampled, prompt index): row}."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    rows = {}
    for sampled in (False, True):
        for b in range(0, len(order), batch):
            group = order[b : b + batch]
            out = write_answers(
                target, [prompts[i] for i in group], new_tokens, eos, sampled, generator, layers
            )
            rows.update({(sampled, i): row for i, row in zip(group, out)})
    return rows


def save_chunk(name: str, index: int, rows: list[dict], layers, keys, prompt_lengths, first: int, meta: dict):
    """Write a chunk: its features to the cache, then its tokens to ANSWERS_DIR (a chunk exists once it is
    whole: written under another name, then renamed)."""
    feats, path = features_dir(name, index), tokens_path(name, index)
    feats.mkdir(parents=True, exist_ok=True)
    np.save(feats / "hidden.npy", torch.cat([row["hidden"] for row in rows]).numpy())
    np.save(feats / "argmax.npy", torch.cat([row["argmax"] for row in rows]).numpy())
    (feats / "meta.json").write_text(json.dumps({"layers": list(layers), "tokens": meta["tokens"]}))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.stem}.partial-{os.getpid()}.npz")
    np.savez_compressed(
        partial,
        tokens=torch.cat([row["ids"] for row in rows]).numpy().astype(np.uint16),
        lengths=np.array([len(row["ids"]) for row in rows], dtype=np.int32),
        prompt_lengths=np.array(prompt_lengths, dtype=np.int32),
        sampled=np.array([s for s, _ in keys]),
        instruction=np.array([first + i for _, i in keys], dtype=np.int32),
        meta=np.array(json.dumps(meta)),
    )
    partial.rename(path)


def load_tokens(path: Path) -> dict:
    """A chunk's tokens as written by answer_chunk: the sequences (prompt + answer) and what each row is."""
    with np.load(path) as z:
        flat = torch.from_numpy(z["tokens"].astype(np.int64))
        lengths = z["lengths"].tolist()
        return {
            "sequences": list(torch.split(flat, lengths)),
            "prompt_lengths": z["prompt_lengths"].tolist(),
            "sampled": z["sampled"].tolist(),
            "instruction": z["instruction"].tolist(),
            "meta": json.loads(str(z["meta"])),
        }


@torch.no_grad()
def chunk_features(name: str, index: int, target, batch: int = 16) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Chunk `index`'s features, memory-mapped: hidden [N, k, d] fp16 and argmax [N] over the chunk's
    sequences end to end, and the layers (k) they are. Recomputed from the committed tokens by one prefill
    per sequence (right-padded batches: causal, so the padding changes nothing before it) when the cache
    has none."""
    feats = features_dir(name, index)
    if not (feats / "meta.json").exists():
        chunk = answer_chunk(name, index)
        layers, head, t0 = tap_layers(target), hf.lm_head(target), time.time()
        seqs = chunk["sequences"]
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        hidden, argmax = [None] * len(seqs), [None] * len(seqs)
        for b in range(0, len(order), batch):
            group = order[b : b + batch]
            width = max(len(seqs[i]) for i in group)
            ids = torch.full((len(group), width), int(seqs[group[0]][-1]), dtype=torch.long)
            for r, i in enumerate(group):
                ids[r, : len(seqs[i])] = seqs[i]
            h = hf.hidden_states(target, ids, layers)
            states = torch.stack([h[i] for i in layers], 2).half()
            top = head(h[-1]).argmax(-1).int()
            for r, i in enumerate(group):
                hidden[i], argmax[i] = states[r, : len(seqs[i])], top[r, : len(seqs[i])]
        feats.mkdir(parents=True, exist_ok=True)
        np.save(feats / "hidden.npy", torch.cat(hidden).numpy())
        np.save(feats / "argmax.npy", torch.cat(argmax).numpy())
        meta = {"layers": list(layers), "tokens": sum(len(s) for s in seqs), "recomputed": True}
        (feats / "meta.json").write_text(json.dumps(meta))
        log(f"{name} chunk {index}: features recomputed in {(time.time() - t0) / 60:.1f} min")
    meta = json.loads((feats / "meta.json").read_text())
    hidden = np.load(feats / "hidden.npy", mmap_mode="r")
    argmax = np.load(feats / "argmax.npy", mmap_mode="r")
    if len(hidden) != meta["tokens"] or len(argmax) != meta["tokens"]:
        raise ValueError(f"{feats} is incomplete ({len(hidden)} rows for {meta['tokens']} tokens): delete it")
    return hidden, argmax, tuple(meta["layers"])


def feature_batches(name: str, chunks: list[int], target, batch: int, length: int, epochs: int, seed: int,
                    start: int = 0):  # fmt: skip
    """Training batches from cached features, for chapter 09's train_eagle3: every `length`-token window of
    each chunk's sequences end to end, in a seeded shuffled order per epoch, `batch` windows a batch, each
    {"ids" [B, T], "hidden" {layer: [B, T, d] fp16}, "argmax" [B, T]} (cached_inputs reads it). Yields
    lazily: a window is read from the memory-mapped cache when its batch is due; the first `start` batches
    (a resumed run's) are skipped unread."""
    stores = []
    for i in chunks:
        hidden, argmax, layers = chunk_features(name, i, target)
        ids = torch.cat(answer_chunk(name, i)["sequences"])
        stores.append((ids, hidden, argmax))
    windows = [(c, w * length) for c, (ids, _, _) in enumerate(stores) for w in range(len(ids) // length)]
    per_epoch = len(windows) // batch
    for e in range(start // per_epoch, epochs):
        order = torch.randperm(len(windows), generator=torch.Generator().manual_seed(seed + e)).tolist()
        for b in range(max(0, start - e * per_epoch) * batch, per_epoch * batch, batch):
            picked = [windows[k] for k in order[b : b + batch]]
            ids = torch.stack([stores[c][0][s : s + length] for c, s in picked])
            states = torch.from_numpy(np.stack([stores[c][1][s : s + length] for c, s in picked]))
            top = torch.from_numpy(np.stack([stores[c][2][s : s + length] for c, s in picked])).long()
            yield {"ids": ids, "hidden": {i: states[:, :, k] for k, i in enumerate(layers)}, "argmax": top}


def write_chunks(name: str, count: int, minutes: float = float("inf"), **kw) -> list[int]:
    """Write the first `count` chunks that are missing, in order; start no new one after `minutes`.
    Returns the indices of the chunks that exist afterwards."""
    count = min(count, chunk_count(name))
    missing = [i for i in range(count) if not tokens_path(name, i).exists()]
    t0, pair = time.time(), None
    for i in missing:
        if (time.time() - t0) / 60 >= minutes:
            log(f"{minutes} min spent: chunks {missing[missing.index(i) :]} are left for the next run")
            break
        if pair is None:
            pair = zoo.load_pair(name, device="cpu")[::2]
        answer_chunk(name, i, pair=pair, **kw)
    return [i for i in range(count) if tokens_path(name, i).exists()]


def summary(name: str, chunks: list[int]) -> dict:
    """The data card of the written chunks: instructions, answers, tokens and the writing time."""
    metas = [load_tokens(tokens_path(name, i))["meta"] for i in chunks]
    seconds = sum(m["seconds"] for m in metas)
    cached = [f for i in chunks if features_dir(name, i).is_dir() for f in features_dir(name, i).iterdir()]
    answer_tokens = sum(m["answer_tokens"] for m in metas)
    return {
        "chunks": len(metas),
        "instructions": sum(m["instructions"][1] - m["instructions"][0] for m in metas),
        "answers_per_instruction": {"greedy": 1, "sampled_t1": 1},
        "max_new_tokens": metas[0]["new_tokens"] if metas else None,
        "answer_tokens": answer_tokens,
        "total_tokens": sum(m["tokens"] for m in metas),
        "answers_ended": sum(m["answers_ended"] for m in metas),
        "generation_minutes": round(seconds / 60, 1),
        "answer_tokens_per_minute": round(answer_tokens / seconds * 60) if seconds else None,
        "feature_cache_mb": round(sum(f.stat().st_size for f in cached) / 2**20),  # in zoo.cache_dir()
        "how": metas[0]["how"] if metas else None,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="smollm2-135m")
    ap.add_argument("--chunks", type=int, default=None, help="how many chunks (default: all of them)")
    ap.add_argument("--minutes", type=float, default=float("inf"), help="start no new chunk after this")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    done = write_chunks(args.name, args.chunks or chunk_count(args.name), args.minutes)
    print(json.dumps(summary(args.name, done), indent=1))


if __name__ == "__main__":
    main()
