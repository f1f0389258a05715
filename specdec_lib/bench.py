"""Benchmarks and the issues' end-to-end checks (hand-written support code; not a pass/fail test).

    python -m specdec_lib.bench lossless            # greedy == plain AR, 50 prompts, every method (--methods)
    python -m specdec_lib.bench speed               # AR vs ours (k = 2, 4, 8) vs transformers assisted
    python -m specdec_lib.bench speed-methods --methods chain:3,tree:3-3-1,medusa:16   # interleaved timings
    python -m specdec_lib.bench zoo                 # the zoo's numbers: load time, greedy agreement, sample

Everything runs on the zoo pair and the committed held-out prompts, in one process, and prints medians.
Timings depend on the machine and its load: compare rows of one run, not numbers across runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import specdec_lib as sd
from specdec_lib import zoo
from specdec_lib.autoregressive import generate_ar


def _encode(tok, prompts, device):
    return [torch.tensor(tok.encode(p), device=device) for p in prompts]


def make_proposer(spec: str, target, draft):
    """A factory of fresh proposers for one method spec, from the registry (`specdec_lib.methods`)."""
    from specdec_lib.methods import make_proposer as make

    make(spec, target, draft)  # fail fast on a bad spec, and load any zoo weights once
    return lambda: make(spec, target, draft)


def lossless(args) -> bool:
    """Greedy: every method == plain AR on held-out prompts, with tau, acceptance by depth and one-run
    tokens/s; with --temperature > 0 the same numbers under lossless sampling (one seed per prompt),
    against plain sampling through the same engine."""
    target, draft, tok = zoo.load_pair(args.preset)
    prompts = _encode(tok, zoo.heldout_prompts(args.prompts), sd.hf.device_of(target))
    refs, ar_time = [], 0.0
    for ids in prompts:
        ref, dt = _timed(lambda ids=ids: generate_ar(target, ids, args.new_tokens))
        refs.append(ref)
        ar_time += dt
    n_tok = len(prompts) * args.new_tokens
    print(f"plain AR: {n_tok / ar_time:.1f} tokens/s ({len(prompts)} prompts x {args.new_tokens} tokens)")
    ar_sampled = 0.0
    if args.temperature > 0:
        for i, ids in enumerate(prompts):
            ar_sampled += _timed(
                lambda ids=ids, i=i: sd.generate(
                    target, ids, args.new_tokens, None, temperature=args.temperature, seed=i
                )
            )[1]
        print(f"plain sampling at T={args.temperature:g}: {n_tok / ar_sampled:.1f} tokens/s")
    ok = True

    def summary(outs, spent, reference):
        taus = [o.stats.tau for o in outs]
        by_pos = [o.stats.acceptance_by_position() for o in outs]
        depth = max(len(a) for a in by_pos)
        alpha = []
        for d in range(depth):
            seen = [a[d] for a in by_pos if len(a) > d and a[d] == a[d]]
            alpha.append(statistics.mean(seen) if seen else float("nan"))
        rounds = sum(o.stats.target_forwards for o in outs)
        draft_ms = 1000 * sum(o.stats.time_draft for o in outs) / max(1, rounds)
        return (
            f"tau {statistics.mean(taus):.2f}; acceptance by depth {' '.join(f'{a:.2f}' for a in alpha)}; "
            f"drafting {draft_ms:.2f} ms/round; {n_tok / spent:.1f} tokens/s = {reference / spent:.2f}x plain"
        )

    for spec in args.methods:
        make = make_proposer(spec, target, draft)
        outs, spent = [], 0.0
        for ids in prompts:
            out, dt = _timed(lambda ids=ids, make=make: sd.generate(target, ids, args.new_tokens, make()))
            outs.append(out)
            spent += dt
        same = sum(o.tokens == r for o, r in zip(outs, refs, strict=True))
        ok &= same == len(prompts)
        line = f"{spec}: {same}/{len(prompts)} token-identical to plain greedy; T=0 " + summary(
            outs, spent, ar_time
        )
        if args.temperature > 0:
            outs, spent = [], 0.0
            for i, ids in enumerate(prompts):
                out, dt = _timed(
                    lambda ids=ids, i=i, make=make: sd.generate(
                        target, ids, args.new_tokens, make(), temperature=args.temperature, seed=i
                    )
                )
                outs.append(out)
                spent += dt
            line += f"; T={args.temperature:g} " + summary(outs, spent, ar_sampled)
        print(line, flush=True)
    return ok


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def speed(args) -> bool:
    target, draft, tok = zoo.load_pair(args.preset)
    device = sd.hf.device_of(target)
    prompts = _encode(tok, zoo.heldout_prompts(args.prompts), device)
    eos = tok.eos_token_id
    n = args.new_tokens

    def ours(k):
        def run(ids):
            out = sd.generate(
                target, ids, n, None if k == 0 else sd.DraftModelProposer(draft, k), eos_token_id=eos
            )
            return out.tokens, out.stats.tau

        return run

    def theirs(k):
        def run(ids):
            extra = (
                {}
                if k is None
                else {
                    "num_assistant_tokens": k,
                    "num_assistant_tokens_schedule": "constant",
                    "assistant_confidence_threshold": 0.0,
                }
            )
            with torch.inference_mode():
                out = target.generate(
                    ids[None],
                    assistant_model=draft,
                    do_sample=False,
                    max_new_tokens=n,
                    eos_token_id=eos,
                    pad_token_id=eos,
                    **extra,
                )
            return out[0, len(ids) :].tolist(), float("nan")

        return run

    def hf_plain(ids):
        with torch.inference_mode():
            out = target.generate(
                ids[None], do_sample=False, max_new_tokens=n, eos_token_id=eos, pad_token_id=eos
            )
        return out[0, len(ids) :].tolist(), 1.0

    def spec(name):
        make = make_proposer(name, target, draft)

        def run(ids):
            out = sd.generate(target, ids, n, make(), eos_token_id=eos)
            return out.tokens, out.stats.tau

        return run

    methods = [("ours, plain AR", 0, ours(0)), ("transformers generate (no draft)", 0, hf_plain)]
    if args.what == "speed":
        for k in args.ks:
            methods.append(("ours, draft model", k, ours(k)))
        for k in args.ks:
            methods.append(("transformers assisted (constant k)", k, theirs(k)))
        methods.append(("transformers assisted (its defaults)", "dyn", theirs(None)))
    else:  # speed-methods: the --methods specs, interleaved with plain AR
        methods += [(f"ours, {m}", "-", spec(m)) for m in args.methods]

    for _, _, run in methods:  # warm up every path once
        run(prompts[0][:16])
    times = {i: [] for i in range(len(methods))}
    tokens = {i: [] for i in range(len(methods))}
    taus = {i: [] for i in range(len(methods))}
    same = {i: 0 for i in range(len(methods))}
    for _ in range(args.repeats):
        for ids in prompts:
            ref = None
            for i, (_, _, run) in enumerate(methods):  # interleaved, so load drifts hit every method alike
                (out, tau), dt = _timed(lambda run=run, ids=ids: run(ids))
                ref = out if i == 0 else ref
                times[i].append(dt / max(1, len(out)))
                tokens[i].append(len(out))
                taus[i].append(tau)
                same[i] += out == ref
    ar = times[0]
    print(
        f"\n{args.preset} pair on {device} ({torch.get_num_threads()} threads), {len(prompts)} held-out prompts x "
        f"{args.repeats} repeats, greedy, up to {n} new tokens, transformers {sd.hf.version()}"
    )
    print(f"{'method':38} {'k':>4} {'tau':>6} {'tokens/s':>9} {'speedup':>8} {'== AR':>7}")
    for i, (name, k, _) in enumerate(methods):
        tps = 1 / statistics.median(times[i])
        speedup = statistics.median(a / b for a, b in zip(ar, times[i], strict=True))
        tau = statistics.mean(taus[i]) if taus[i] and taus[i][0] == taus[i][0] else float("nan")
        tau_s = f"{tau:6.2f}" if tau == tau else f"{'-':>6}"
        print(f"{name:38} {k!s:>4} {tau_s} {tps:9.1f} {speedup:7.2f}x {same[i]:>3}/{len(ar):<3}")
    return all(same[i] == len(ar) for i in same)


def zoo_report(args) -> bool:
    t0 = time.perf_counter()
    from transformers import LlamaForCausalLM  # noqa: F401  (the one-time import of the model code)

    t1 = time.perf_counter()
    target, draft, tok = zoo.load_pair(args.preset, device="cpu")
    t2 = time.perf_counter()
    print(
        f"load_pair({args.preset!r}) on CPU: {t2 - t1:.2f} s (+ {t1 - t0:.2f} s importing transformers' model code)"
    )
    for role in ("target", "draft"):
        card = zoo.model_card(args.preset, role)
        print(
            f"{role}: {card['parameters'] / 1e6:.2f}M parameters, {card['steps']} steps, "
            f"{card['tokens_seen'] / 1e6:.1f}M tokens, {card['wall_minutes']} min, validation "
            f"{card['validation']['bits_per_byte']} bits/byte"
        )
    prompts = zoo.heldout_prompts(args.prompts)
    hit = total = 0
    with torch.inference_mode():
        for p in prompts:
            ids = torch.tensor(tok.encode(p))
            cont = torch.tensor(generate_ar(target, ids, args.new_tokens))
            seq = torch.cat([ids, cont])[None]
            t = target(input_ids=seq).logits[0, len(ids) - 1 : -1].argmax(-1)
            d = draft(input_ids=seq).logits[0, len(ids) - 1 : -1].argmax(-1)
            hit += int((t == d).sum())
            total += len(t)
    print(
        f"greedy agreement (draft argmax == target argmax along the target's greedy continuation), "
        f"{len(prompts)} test prompts x {args.new_tokens} tokens: {hit / total:.3f}"
    )
    ids = tok.encode(prompts[0])
    print("--- held-out prompt (end) ---\n" + prompts[0][-300:])
    print("--- target's greedy 128-token continuation ---\n" + tok.decode(generate_ar(target, ids, 128)))
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["lossless", "speed", "speed-methods", "zoo"], nargs="?", default="speed")
    ap.add_argument("--preset", default="tiny-code")
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--new-tokens", type=int, default=None)
    ap.add_argument("--ks", default=None, help="comma-separated draft lengths")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument(
        "--methods",
        default="chain:1,chain:4,chain:8,tree:3-2-1,tree:3-3-3,medusa:16,mtp-independent,mtp-sequential",
        help="for `lossless`: comma-separated specs, e.g. chain:3,tree:3-3-1,medusa:16,mtp-sequential:2",
    )
    ap.add_argument("--temperature", type=float, default=0.0, help="for `lossless`: also tau at this T")
    args = ap.parse_args(argv)
    defaults = {
        "lossless": (50, 64, "1,4,8"),
        "speed": (10, 64, "2,4,8"),
        "speed-methods": (10, 64, ""),
        "zoo": (50, 128, ""),
    }[args.what]
    args.prompts = args.prompts or defaults[0]
    args.new_tokens = args.new_tokens or defaults[1]
    args.ks = [int(k) for k in (args.ks or defaults[2]).split(",") if k]
    args.methods = [m for m in args.methods.split(",") if m]
    ok = {"lossless": lossless, "speed": speed, "speed-methods": speed, "zoo": zoo_report}[args.what](args)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
