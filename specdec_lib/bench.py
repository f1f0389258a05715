"""The benchmark harness (hand-written support code; timings never gate a test).

    python -m specdec_lib.bench                        # every method at T = 0, 0.7 (top-p 0.9) and 1
    python -m specdec_lib.bench run --methods chain:4,eagle3,hf-assisted:4 --temperature 0 --prompts 10
    python -m specdec_lib.bench zoo                    # the zoo's numbers: load time, greedy agreement
    python -m specdec_lib.bench costs --preset smollm2-135m --out book/data   # V(n): what n nodes cost
    python -m specdec_lib.bench run --compile --methods ar,eagle3:16,hf-static --out book/data --stem bench-compiled
    python -m specdec_lib.bench compile-time --out book/data --stem bench-compiled   # cold/warm compile, break-even

`run` decodes the same held-out prompts with plain autoregressive decoding (`ar`, the baseline) and every
method in `--methods`, in ONE process: a warm-up of every method first, then `--repeats` passes over the
prompts with the methods interleaved prompt by prompt (a busy spell of the machine hits all of them
alike). Methods are registry specs (`specdec_lib.methods`) or transformers' own implementations:

    hf              model.generate, no drafter (transformers' plain decoding loop)
    hf-assisted:K   model.generate(assistant_model=draft), K drafted tokens per round, constant
    hf-assisted     the same with transformers' defaults (up to 20 tokens, stopped early when the draft's
                    confidence falls under 0.4: its dynamic speculation length; with scikit-learn
                    installed, as on Colab, transformers also adapts that threshold as it goes)
    hf-assisted:heuristic   K starts at transformers' 20 and moves +2 / -1 after full / partial acceptance
    hf-lookup:N     model.generate(prompt_lookup_num_tokens=N): prompt lookup, no drafter (it matches up to
                    2 tokens and copies after the earliest occurrence; our `ngram` up to 3, the latest)
    hf-static       model.generate with transformers' static cache and its own torch.compile of the decoding
                    step (cache_implementation="static", a CompileConfig allowed on any device): transformers'
                    compiled plain decoding, the peer of ar@compiled. Its target passes are its tokens (one
                    pass per token, the prefill's included), not counted with a hook, which it would compile
                    in. If transformers declines to compile (it may, quietly), the run is an error.
    SPEC@compiled   one of ours (or ar) with the target's and the drafter's passes compiled: generate(...,
                    compile=True) and make_proposer(..., compile=True); `--compile` adds one for every
                    method of ours that has passes to compile (issue 50). The warm-up compiles (every
                    prompt at every sampling, longest first, so that every cache fits the run).

Definitions (one of each, used everywhere):
- speedup = (total new tokens / total seconds) of the method over the same ratio of `ar`, per repeat,
  median over repeats (Spec-Bench's); beside it the spread of the per-prompt ratios (quartiles).
- tau = new tokens per target pass, pooled over every prompt (peers: counted with a hook on the target).
- acceptance by position: chapter 02's conditional alpha_d, pooled.
- per round of one of our methods: draft (the proposer's propose + update; the first round's also holds
  the drafter's own catch-up over the prompt), verify (the target pass + the verification rule), other
  (the engine's commit and bookkeeping); the target's prefill is timed apart. t1 = the baseline's verify
  time per round (one target pass on one token, plus its sampling).
- kc = draft / t1, V = verify / t1 - 1, and chapter 02's model predicts the decoding speedup
  tau / (1 + kc + V): drafting and verifying with no engine overhead, against a plain loop with none.
- efficiency = the measured decoding speedup (the same ratio as `speedup`, with both sides' prefill
  taken out, since the model has none) / predicted: what the engine's own work (other) costs, relative
  to the plain loop's.
- with compiled rows (`--compile`): speedup_vs_compiled_ar is every row's tokens/s over ar@compiled's, and a
  compiled row's t1, kc, V, predicted and efficiency are against ar@compiled (its own, compiled, step).
  At T = 0 a compiled row's tokens must equal ar@compiled's; ar@compiled's and hf-static's are compared
  with ar's and reported (greedy_identical; ar@compiled's near-ties where they part), not an error: two
  correct programs may round a near-tie apart. Compiled rows with different padded pass shapes are held
  to ar@compiled's tokens as strictly as eager rows to ar's (the contract tests are exact).
- compile (`compile-time`, added to a report's compiled rows): seconds a first pass over the report's
  decodes (every prompt at every sampling) takes over the same pass again, in a fresh process: cold (an
  empty inductor cache) and warm (the cache the cold run left); break_even_tokens = those seconds / the seconds a
  token saves against the eager row (None when compiling saves nothing).
Samplings: `--temperature 0,0.7:0.9,1` names three, T = 0 (greedy), T = 0.7 with top-p 0.9 ("T:P") and
T = 1 (the raw distribution); the report keys its results by the same strings ("0", "0.7:0.9", "1").
At T = 0 every method's tokens must equal the baseline's on every prompt: a mismatch is an error (exit 1).
Outputs: --out DIR gets bench.json, bench.md and bench.png (bench-PRESET.* for a --preset other than
tiny-code; `--preset smollm2-135m`, the real model offline, decodes the project's held-out instructions in
its chat template, to its end token). Timings depend on the machine and its load: compare rows of one run,
never numbers across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

import specdec_lib as sd
from specdec_lib import hf, zoo
from specdec_lib.autoregressive import generate_ar
from specdec_lib.methods import bench_defaults
from specdec_lib.reports import report_stem  # the reports' names (chapter 12's load_report reads them too)
from specdec_lib.speculative import Clock

PEERS = ("hf", "hf-assisted", "hf-lookup", "hf-static")


def sampling_setting(value) -> tuple[float, float]:
    """(temperature, top_p) from 0.7, (0.7, 0.9) or "0.7:0.9"; bad values raise ValueError."""
    if isinstance(value, str):
        t, colon, p = value.partition(":")
        value = (float(t), float(p)) if colon else float(t)
    t, p = value if isinstance(value, (tuple, list)) else (value, 1.0)
    t, p = float(t), float(p)
    if not (t >= 0 and 0 < p <= 1):
        raise ValueError(f"a sampling is T >= 0 with top-p in (0, 1], got T = {t}, top-p = {p}")
    if t == 0 and p != 1:
        raise ValueError("top-p needs T > 0 (T = 0 is greedy)")
    return t, p


def setting_key(setting) -> str:
    """The report's key for a sampling: "0", "1", "0.7:0.9" (temperature, then top-p when it cuts)."""
    t, p = sampling_setting(setting)
    return f"{t:g}" if p == 1 else f"{t:g}:{p:g}"


# Every registered method's `bench` specs (registry order), then transformers' own implementations.
DEFAULT_METHODS = ",".join([*bench_defaults(), "hf", "hf-assisted:4", "hf-assisted", "hf-lookup:8"])


# ------------------------------------------------------------------------------------ the runners
class PassCounter:
    """Counts a model's forward calls, for the target passes and draft passes of the peers: a hook
    installed only inside `with counter:`, since a compiled pass of the same model would trace it and
    recompile at every count."""

    def __init__(self, model):
        self.model, self.calls = model, 0

    def __enter__(self):
        self.handle = self.model.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc):
        self.handle.remove()

    def _hook(self, *_):
        self.calls += 1


@dataclass
class Run:
    """One decode of one prompt: tokens, seconds, target passes (prefill included for peers), and the
    engine's Stats (None for transformers' peers)."""

    tokens: list
    seconds: float
    passes: int
    stats: object = None
    draft_passes: int = 0


@contextlib.contextmanager
def _assistant_config(draft, **settings):
    """transformers reads the drafting schedule from the ASSISTANT's generation config (arguments given to
    generate() land in the target's), and the heuristic schedule writes back into it: set, then restore."""
    cfg = draft.generation_config
    old = {k: getattr(cfg, k, None) for k in settings}
    for k, v in settings.items():
        setattr(cfg, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(cfg, k, v)


def _peer_settings(spec: str, draft):
    """(generate() kwargs, assistant config settings) of a transformers peer spec."""
    name, _, arg = spec.partition(":")
    if name == "hf":
        return {}, {}
    if name == "hf-static":  # transformers compiles the decoding step itself; on a CPU only when told to
        from transformers import CompileConfig

        config = CompileConfig(dynamic=False, fullgraph=True)
        config._compile_all_devices = True  # transformers' own flag for compiling off CUDA
        return {"cache_implementation": "static", "compile_config": config}, {}
    if name == "hf-lookup":
        return {"prompt_lookup_num_tokens": int(arg or 10)}, {}
    if draft is None:
        raise ValueError(f"{spec} needs the preset's draft model")
    if not arg:  # transformers' defaults: 20 tokens, stopped by the draft's confidence
        return {"assistant_model": draft}, {
            "num_assistant_tokens": 20,
            "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.4,
        }
    if arg == "heuristic":
        return {"assistant_model": draft}, {
            "num_assistant_tokens": 20,
            "num_assistant_tokens_schedule": "heuristic_transient",
            "assistant_confidence_threshold": 0.0,
        }
    if not arg.isdigit() or int(arg) < 1:
        raise ValueError(f"hf-assisted takes a positive K or 'heuristic', got {spec!r}")
    return {"assistant_model": draft}, {
        "num_assistant_tokens": int(arg),
        "num_assistant_tokens_schedule": "constant",
        "assistant_confidence_threshold": 0.0,
    }


COMPILED = "@compiled"
CAR = "ar" + COMPILED  # plain decoding compiled: the compiled rows' baseline


def make_runner(spec: str, target, draft, eos):
    """A function (ids, max_new_tokens, (temperature, top_p), seed) -> Run for one method spec."""
    device = hf.device_of(target)
    clock = Clock(device)
    if spec.partition(":")[0] in PEERS:
        kwargs, settings = _peer_settings(spec, draft)
        hooked = not spec.startswith("hf-static")  # a hook inside a compiled step would recompile it
        counters = (PassCounter(target) if hooked else None, PassCounter(draft) if hooked and draft else None)

        def peer(ids, n, setting, seed):
            temperature, top_p = setting
            sampling = (
                {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": top_p}
                if temperature > 0
                else {"do_sample": False}
            )
            if seed is not None:
                torch.manual_seed(seed)
            t_calls = counters[0].calls if counters[0] else 0
            d_calls = counters[1].calls if counters[1] else 0
            clock.lap()
            with _assistant_config(draft, **settings) if settings else contextlib.nullcontext():
                with (
                    torch.inference_mode(),
                    counters[0] or contextlib.nullcontext(),
                    counters[1] or contextlib.nullcontext(),
                ):
                    out = target.generate(
                        ids[None],
                        max_new_tokens=n,
                        eos_token_id=eos,
                        pad_token_id=eos if eos is not None else 0,
                        **sampling,
                        **kwargs,
                    )
            seconds = clock.lap()
            tokens = out[0, len(ids) :].tolist()
            return Run(
                tokens,
                seconds,
                counters[0].calls - t_calls if counters[0] else len(tokens),  # plain decoding: a pass a token
                None,
                (counters[1].calls - d_calls) if counters[1] else 0,
            )

        return peer

    from specdec_lib.methods import make_proposer

    spec, compiled = spec.removesuffix(COMPILED), spec.endswith(COMPILED)
    if spec != "ar":
        make_proposer(spec, target, draft, compile=compiled)  # fail fast on a bad spec; load zoo weights once

    def ours(ids, n, setting, seed):
        temperature, top_p = setting
        proposer = None if spec == "ar" else make_proposer(spec, target, draft, compile=compiled)
        clock.lap()
        how = {"temperature": temperature, "top_p": top_p, "seed": seed, "eos_token_id": eos}
        out = sd.generate(target, ids, n, proposer, **how, timed=True, compile=compiled)  # timed: kc and V
        seconds = clock.lap()
        s = out.stats
        return Run(out.tokens, seconds, s.target_forwards, s, s.draft_forwards)

    return ours


# -------------------------------------------------------------------------------- the measurement
def _quartiles(xs):
    xs = sorted(xs)
    if len(xs) == 1:
        return [xs[0]] * 3
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return [q[0], q[1], q[2]]


def _ratio(runs, baseline, prefill: bool):
    """Per repeat: (total tokens / total seconds) of runs over the same of baseline; with prefill=False
    each run's (and the baseline's) prefill seconds are taken out first."""

    def tps(rep):
        cut = 0.0 if prefill else sum(r.stats.time_prefill for r in rep)
        return sum(len(r.tokens) for r in rep) / (sum(r.seconds for r in rep) - cut)

    return [tps(mine) / tps(base) for mine, base in zip(runs, baseline, strict=True)]


def summarise(runs, baseline, t1, step=None):
    """One method at one sampling. runs / baseline: [repeat][prompt] -> Run. t1: the baseline's verify
    seconds per round. step: (runs, t1) of the plain loop that kc, V, predicted and efficiency are
    measured against, when not the baseline's (a compiled row's: ar@compiled). Returns a dict of plain
    numbers (see the module docstring for the definitions)."""
    step_runs, step_t1 = step or (baseline, t1)
    repeats, prompts = len(runs), len(runs[0])
    tokens = [sum(len(r.tokens) for r in rep) for rep in runs]
    seconds = [sum(r.seconds for r in rep) for rep in runs]
    speedups = _ratio(runs, baseline, prefill=True)
    per_prompt = []
    for p in range(prompts):
        mine = statistics.median(len(runs[i][p].tokens) / runs[i][p].seconds for i in range(repeats))
        base = statistics.median(len(baseline[i][p].tokens) / baseline[i][p].seconds for i in range(repeats))
        per_prompt.append(mine / base)
    flat = [r for rep in runs for r in rep]
    out = {
        "tokens_per_second": statistics.median(t / s for t, s in zip(tokens, seconds, strict=True)),
        "speedup": statistics.median(speedups),
        "speedup_per_repeat": speedups,
        "speedup_per_prompt_quartiles": _quartiles(per_prompt),
        "speedup_per_prompt_range": [min(per_prompt), max(per_prompt)],
        "new_tokens": sum(len(r.tokens) for r in flat),
        "target_passes": sum(r.passes for r in flat),
        "tau": sum(len(r.tokens) for r in flat) / max(1, sum(r.passes for r in flat)),
        "draft_passes_per_round": sum(r.draft_passes for r in flat) / max(1, sum(r.passes for r in flat)),
    }
    if flat[0].stats is not None:  # our engine: where the time went, and the analytic model
        s = sd.Stats.pool(r.stats for r in flat)
        rounds = max(1, s.target_forwards)
        draft, verify, other = (1000 * t / rounds for t in (s.time_draft, s.time_verify, s.time_other))
        kc, V = draft / (1000 * step_t1), verify / (1000 * step_t1) - 1
        predicted = s.tau / (1 + kc + V)
        out.update(
            tau=s.tau,
            acceptance_by_position=s.acceptance_by_position(),
            nodes_per_round=sum(s.tree_sizes) / rounds,
            ms_per_round={"draft": draft, "verify": verify, "other": other},
            prefill_ms=1000 * s.time_prefill / len(flat),
            kc=kc,
            c_per_draft_pass=kc / out["draft_passes_per_round"] if out["draft_passes_per_round"] else 0.0,
            V=V,
            predicted_speedup=predicted,
            decode_speedup=(decode := statistics.median(_ratio(runs, step_runs, prefill=False))),
            efficiency=decode / predicted,
        )
    out["runs"] = [  # the raw measurements: every derived number above can be recomputed from them
        [[len(r.tokens), round(r.seconds, 6), r.passes] for r in rep] for rep in runs
    ]
    return out


def measure(
    methods,
    temperatures=(0.0, "0.7:0.9", 1.0),
    prompts: int = 20,
    max_new_tokens: int = 64,
    repeats: int = 3,
    preset: str = "tiny-code",
    device=None,
    quiet: bool = False,
    command: str = "",
) -> dict:
    """Run the benchmark in this process and return its report (a dict of plain numbers, as bench.json).
    `ar` (plain decoding through the same engine) is always measured first: it is the baseline.
    temperatures: the samplings, each a temperature or "T:P" / (T, P) for temperature T with top-p P."""
    temperatures = [sampling_setting(t) for t in temperatures]
    target, draft, tok = zoo.load_pair(preset, device=device)
    device, eos = hf.device_of(target), tok.eos_token_id
    prompts = load_prompts(preset, tok, prompts, device)
    specs = ["ar"] + [m for m in methods if m != "ar"]
    if any(m.endswith(COMPILED) for m in specs) and CAR not in specs:
        specs.insert(1, CAR)  # compiled rows are measured against plain decoding compiled the same way
    from specdec_lib.methods import METHODS, make_proposer

    skipped = {}
    for m in list(specs):  # what this preset cannot run: no draft model, or no trained weights for it
        entry = METHODS.get(m.partition(":")[0])
        if draft is None and (m.startswith("hf-assisted") or (entry is not None and entry.needs_draft)):
            skipped[m] = f"preset {preset} has no draft model"
        elif entry is not None and entry.zoo_weights and not zoo.has_weights(entry.zoo_weights, preset):
            skipped[m] = f"no zoo weights for preset {preset}"
        elif m.endswith(COMPILED) and m != CAR:
            try:
                make_proposer(m.removesuffix(COMPILED), target, draft, compile=True)
            except ValueError as e:  # a method with no passes of its own to compile
                skipped[m] = str(e)
        if m in skipped:
            specs.remove(m)
    # whose greedy tokens each row must equal: ar@compiled's for our compiled rows, plain decoding's else
    reference = {m: CAR if m.endswith(COMPILED) and m != CAR else "ar" for m in specs}
    runners = {m: make_runner(m, target, draft, eos) for m in specs}
    errors = []
    for m, fn in runners.items():  # warm-up: every path once (kernels, caches, lazy imports, compilation)
        graphs = hf.compiled_graphs()
        for t in temperatures:  # a compiled method decodes every prompt: its pass shapes compile here
            for ids in sorted(prompts, key=len, reverse=True) if is_compiled(m) else [prompts[0][-32:]]:
                fn(ids, max_new_tokens if is_compiled(m) else 8, t, 0)  # longest first: caches fit the run
        if m.startswith("hf-static") and hf.compiled_graphs() == graphs:  # transformers may decline quietly
            errors.append(
                f"{m}: transformers compiled nothing (its auto-compile declined): not a compiled peer"
            )
    graphs = hf.compiled_graphs()  # what torch.compile builds after the warm-up is a recompilation
    from tqdm.auto import tqdm

    total = len(temperatures) * repeats * len(prompts) * len(specs)
    bar = tqdm(total=total, desc="bench", unit="decode", file=sys.stderr, disable=quiet)
    results = {}
    for t in temperatures:
        runs = {m: [[] for _ in range(repeats)] for m in specs}
        for rep in range(repeats):
            order = specs[rep % len(specs) :] + specs[: rep % len(specs)]  # who goes first rotates by repeat
            for p, ids in enumerate(prompts):
                for m in order:  # interleaved: every method on this prompt before the next prompt
                    runs[m][rep].append(runners[m](ids, max_new_tokens, t, 1000 * rep + p))
                    bar.update()
            if t[0] == 0:  # every method's greedy output against plain decoding's, prompt by prompt
                errors += [
                    f"T=0 {m}: prompt {p} (repeat {rep}) differs from plain greedy decoding"
                    + (" compiled the same way" if reference[m] != "ar" else "")
                    for m in specs
                    for p in range(len(prompts))
                    if not (is_compiled(m) and reference[m] == "ar")  # ar@compiled, hf-static: counted
                    and runs[m][rep][p].tokens != runs[reference[m]][rep][p].tokens
                ]
        rows = {}
        steps = {a: (runs[a], _t1(runs[a])) for a in ("ar", CAR) if a in runs}
        for m in specs:
            step = steps[CAR] if m.endswith(COMPILED) else None  # ar@compiled's own: kc = V = 0
            rows[m] = summarise(runs[m], runs["ar"], steps["ar"][1], step)
            rows[m]["greedy_identical"] = (
                sum(
                    runs[m][i][p].tokens == runs[reference[m]][i][p].tokens
                    for i in range(repeats)
                    for p in range(len(prompts))
                )
                if t[0] == 0
                else None
            )
            if CAR in runs:
                vs = _ratio(runs[m], runs[CAR], prefill=True)
                rows[m]["speedup_vs_compiled_ar"] = statistics.median(vs)
        for a, (_, t1) in steps.items():
            rows[a]["t1_ms"] = 1000 * t1
        if t[0] == 0 and CAR in runs:  # where compiled and eager plain decoding part, the target's margin
            rows[CAR]["near_ties"] = near_ties(target, prompts, runs["ar"], runs[CAR])
        results[setting_key(t)] = rows
    bar.close()
    return {
        "command": command,
        "preset": preset,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "transformers": hf.version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "prompts": len(prompts),
        "max_new_tokens": max_new_tokens,
        "repeats": repeats,
        "temperatures": [setting_key(t) for t in temperatures],
        "methods": specs,
        "drafters": drafters_of(preset, [s.removesuffix(COMPILED) for s in specs]),
        "recompiles_after_warmup": hf.compiled_graphs() - graphs,
        "skipped": skipped,
        "errors": errors,
        "results": results,
    }


def drafters_of(preset: str, specs) -> dict:
    """{zoo weights: their file's sha256 (first 16 hex digits)} for the trained drafters the specs load: which
    weights a report measured, so that a reader of the report (chapter 12's ladder) can tell when the zoo
    has moved on since."""
    import hashlib

    from specdec_lib.methods import METHODS

    names = {METHODS[s.partition(":")[0]].zoo_weights for s in specs if s.partition(":")[0] in METHODS}
    return {
        w: hashlib.sha256((zoo.ZOO_DIR / preset / w / "model.safetensors").read_bytes()).hexdigest()[:16]
        for w in sorted(n for n in names if n is not None and zoo.has_weights(n, preset))
    }


def load_prompts(preset: str, tok, n: int, device) -> list:
    """The first n held-out prompts as token ids: a chat model's in its chat template (the project's held-out
    instructions), the tiny zoo's as plain text."""
    if preset in zoo.REAL_PRESETS:
        return [zoo.chat_ids(tok, p, device) for p in zoo.instructions("test", n)]
    return [torch.tensor(tok.encode(p), device=device) for p in zoo.heldout_prompts(n)]


def _t1(runs) -> float:
    """Seconds of plain decoding's verification per round (one target pass on one token, and sampling)."""
    flat = [r for rep in runs for r in rep]
    return sum(r.stats.time_verify for r in flat) / sum(r.stats.target_forwards for r in flat)


def is_compiled(spec: str) -> bool:
    """Whether a spec's passes are compiled: ours with @compiled, or transformers' static-cache peer."""
    return spec.endswith(COMPILED) or spec.startswith("hf-static")


def near_ties(target, prompts, eager, fast, shown: int = 5) -> list:
    """Where compiled plain decoding's greedy tokens part from eager's (eager, fast: [repeat][prompt] ->
    Run), prompt by prompt, in the first repeat where they do: the position, both tokens and the gap
    between their logits in the eager target there (a near-tie is a gap of a rounding error). [] when
    every decode agrees."""
    out, seen = [], set()
    for rep_a, rep_b in zip(eager, fast, strict=True):
        for p, (a, b) in enumerate(zip(rep_a, rep_b, strict=True)):
            tie = None if p in seen else _parting(target, prompts[p], a.tokens, b.tokens)
            if tie is not None:
                seen.add(p)
                out.append({"prompt": p, **tie})
    return out[:shown]


def _parting(target, prompt, a, b):
    """Where greedy token lists a (eager) and b (compiled) first differ, with the eager logit gap; None if
    they agree (one that stops early, at an end token, parts where it stopped: not a near-tie, skipped)."""
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if i is None:
        return None
    ids = torch.cat([prompt, torch.tensor(a[:i], dtype=prompt.dtype, device=prompt.device)])
    with torch.inference_mode():
        logits = target(input_ids=ids[None]).logits[0, -1].float()
    return {"position": i, "eager": a[i], "compiled": b[i], "logit_gap": float(logits[a[i]] - logits[b[i]])}


def run(args) -> bool:
    if args.threads:
        torch.set_num_threads(args.threads)
    report = measure(
        args.methods,
        args.temperatures,
        args.prompts,
        args.max_new_tokens,
        args.repeats,
        args.preset,
        args.device,
        args.quiet,
        command="python -m specdec_lib.bench " + " ".join(args.argv),
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or report_stem(args.preset)
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(report))
    written = [out / f"{stem}.json", out / f"{stem}.md"]
    try:  # the figure is chapter 12's (which imports nothing of the harness: one direction only)
        from specdec_lib.recap import plot_benchmark

        plot_benchmark(report).savefig(out / f"{stem}.png", dpi=110, bbox_inches="tight")
        written.append(out / f"{stem}.png")
    except ImportError:  # chapter 12 not exported yet: the numbers are written anyway
        pass
    print(markdown(report))
    print("wrote " + ", ".join(str(w) for w in written))
    for e in report["errors"]:
        print("ERROR:", e, file=sys.stderr)
    return not report["errors"]


# ------------------------------------------------------------------------- what compiling costs
def eager_twin(spec: str) -> str:
    """The uncompiled row a compiled one is weighed against: ar for ar@compiled, hf for hf-static."""
    return "hf" if spec.startswith("hf-static") else spec.removesuffix(COMPILED)


def first_decodes(spec, preset, prompts, max_new_tokens, temperatures, threads, device=None) -> dict:
    """In a fresh process (see compile_times): the seconds of a first pass over the benchmark's decodes,
    every prompt (longest first) at every sampling, which compiles, and of the same decodes again. The
    eager twin decodes first, so that what any first call pays (lazy imports, allocations, kernels' own
    set-up) is not counted as compiling."""
    if threads:
        torch.set_num_threads(threads)
    target, draft, tok = zoo.load_pair(preset, device=device)
    ids = sorted(load_prompts(preset, tok, prompts, hf.device_of(target)), key=len, reverse=True)
    for t in temperatures:
        make_runner(eager_twin(spec), target, draft, tok.eos_token_id)(
            ids[0], max_new_tokens, sampling_setting(t), 0
        )
    fn = make_runner(spec, target, draft, tok.eos_token_id)
    work = [(p, sampling_setting(t)) for t in temperatures for p in ids]
    first = [fn(p, max_new_tokens, t, 0).seconds for p, t in work]
    again = [fn(p, max_new_tokens, t, 0).seconds for p, t in work]
    return {"first_s": sum(first), "again_s": sum(again), "graphs": hf.compiled_graphs()}


def _in_fresh_process(call: list, cache_dir: str) -> dict:
    import os
    import subprocess

    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, TORCHINDUCTOR_FX_GRAPH_CACHE="1")
    code = "import json, sys; from specdec_lib import bench; print('RESULT', json.dumps(bench.first_decodes(*json.loads(sys.argv[1]))))"
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(call)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,  # a child that hangs fails the command instead of holding it
    )
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not result:
        raise RuntimeError(f"compile-time child for {call[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(result[-1].removeprefix("RESULT "))


def compile_times(report: dict, threads=None, log=print) -> dict:
    """Adds to every compiled row of `report` what compiling cost: `compile_s` {cold, warm}, each measured in
    a fresh process (cold: an empty inductor cache; warm: the cache the cold run left), and at every
    sampling `break_even_tokens` {cold, warm}: the tokens after which compiling has paid for itself against
    the row's eager twin (ar for ar@compiled, hf for hf-static; None when the compiled row is not faster)."""
    import tempfile

    for m in [m for m in report["methods"] if is_compiled(m)]:
        how = [report[k] for k in ("preset", "prompts", "max_new_tokens", "temperatures")]
        call = [m, *how, threads or report["threads"], report["device"]]  # the run's own machine set-up
        cost = {}
        with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
            for phase in ("cold", "warm"):
                r = _in_fresh_process(call, cache)
                cost[phase] = r["first_s"] - r["again_s"]
                log(f"{m}: {phase} compile {cost[phase]:.1f} s ({r['graphs']} graphs)")
        twin = eager_twin(m)
        for rows in report["results"].values():
            rows[m]["compile_s"] = cost
            if twin not in rows:
                continue
            saved = 1 / rows[twin]["tokens_per_second"] - 1 / rows[m]["tokens_per_second"]  # seconds a token
            rows[m]["break_even_tokens"] = {k: (v / saved if saved > 0 else None) for k, v in cost.items()}
    return report


def compile_report(args) -> bool:
    """`compile-time`: measure what compiling costs for the compiled rows of a written report, add it to the
    report and rewrite its .json and .md."""
    path = Path(args.out) / f"{args.stem or report_stem(args.preset)}.json"
    report = compile_times(json.loads(path.read_text()), args.threads)
    report["compile_command"] = "python -m specdec_lib.bench " + " ".join(args.argv)
    report["compile_date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    path.write_text(json.dumps(report, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return True


def _f(x, spec="{:.2f}"):
    return "-" if x is None or x != x else spec.format(x)


def sampling_heading(key: str) -> str:
    """A report key as words: "0" -> "T = 0", "0.7:0.9" -> "T = 0.7, top-p 0.9"."""
    t, _, p = key.partition(":")
    return f"T = {t}, top-p {p}" if p else f"T = {t}"


def markdown(report) -> str:
    """The report as Markdown tables: one per temperature."""
    lines = [
        f"Benchmark: `{report['command']}`",
        "",
        f"{report['preset']} on {report['device']} ({report['threads']} threads), {report['prompts']} held-out "
        f"prompts x {report['max_new_tokens']} new tokens x {report['repeats']} repeats, torch {report['torch']}, "
        f"transformers {report['transformers']}, {report['date']}. Speedup = total tokens / total time over "
        "plain AR's, median of repeats [per-prompt quartiles]; predicted = tau / (1 + kc + V), the decoding "
        "speedup with no engine overhead; efficiency = measured decoding speedup (prefill out) / predicted.",
    ]
    vs_car = CAR in report["methods"]
    if vs_car:
        lines += [
            "",
            f"Graphs compiled after the warm-up (recompilations): {report['recompiles_after_warmup']}. A compiled "
            "row's kc, V, predicted and efficiency are against ar@compiled's t1; its greedy tokens against "
            "ar@compiled's (ar@compiled's against ar's).",
        ]
    for t, rows in report["results"].items():
        ar = rows["ar"]
        lines += [
            "",
            f"**{sampling_heading(t)}** (plain AR: {ar['tokens_per_second']:.1f} tokens/s; t1 = {ar['t1_ms']:.2f} ms, its target "
            "pass and sampling per token"
            + (
                f"; ar@compiled: {rows[CAR]['tokens_per_second']:.1f} tokens/s, t1 = {rows[CAR]['t1_ms']:.2f} ms)"
                if vs_car
                else ")"
            ),
            "",
            "| method | tau | acceptance by position | tokens/s | speedup [quartiles] | "
            + ("vs ar@compiled | " if vs_car else "")
            + "draft / verify / other ms per round | kc | V | predicted | efficiency | == greedy |",
            "|---|---|---|---|---|" + ("---|" if vs_car else "") + "---|---|---|---|---|---|",
        ]
        for m, r in rows.items():
            acc = " ".join(_f(a) for a in r.get("acceptance_by_position", [])[:8])
            ms = r.get("ms_per_round")
            q = r["speedup_per_prompt_quartiles"]
            same = (
                ""
                if r["greedy_identical"] is None
                else f"{r['greedy_identical']}/{report['prompts'] * report['repeats']}"
            )
            lines.append(
                f"| {m} | {_f(r['tau'])} | {acc or '-'} | {r['tokens_per_second']:.1f} | {r['speedup']:.2f}x "
                f"[{q[0]:.2f} {q[1]:.2f} {q[2]:.2f}] | "
                + (f"{r['speedup_vs_compiled_ar']:.2f}x | " if vs_car else "")
                + (f"{ms['draft']:.1f} / {ms['verify']:.1f} / {ms['other']:.1f}" if ms else "-")
                + f" | {_f(r.get('kc'))} | {_f(r.get('V'))} | {_f(r.get('predicted_speedup'))}"
                f" | {_f(r.get('efficiency'))} | {same} |"
            )
        ties = rows.get(CAR, {}).get("near_ties")
        if ties:
            lines += [
                "",
                "Where ar@compiled parts from ar: "
                + "; ".join(
                    f"prompt {n['prompt']}, token {n['position']}: {n['eager']} eager, {n['compiled']} compiled, "
                    f"eager logit gap {n['logit_gap']:.2g}"
                    for n in ties
                ),
            ]
    costs = {m: r["compile_s"] for m, r in next(iter(report["results"].values())).items() if "compile_s" in r}
    if costs:
        keys = list(report["results"])
        lines += [
            "",
            "**What compiling costs**: seconds of a first pass over the run's decodes (every prompt at every "
            "sampling, a fresh process) over the same pass again, with an empty inductor cache (cold) and with the one "
            "the cold run left (warm); break-even: the new tokens after which compiling has paid for itself "
            "against the eager row (- where compiling is not faster)"
            + (
                f"; `{report['compile_command']}`, {report['compile_date']}."
                if "compile_command" in report
                else "."
            ),
            "",
            "| method | cold s | warm s | "
            + " | ".join(f"break-even tokens, {sampling_heading(k)} (cold / warm)" for k in keys)
            + " |",
            "|---|---|---|" + "---|" * len(keys),
        ]
        for m, c in costs.items():
            even = [report["results"][k][m].get("break_even_tokens") or {} for k in keys]
            lines.append(
                f"| {m} | {c['cold']:.1f} | {c['warm']:.1f} | "
                + " | ".join(f"{_f(e.get('cold'), '{:.0f}')} / {_f(e.get('warm'), '{:.0f}')}" for e in even)
                + " |"
            )
    if report["skipped"]:
        lines += ["", "Skipped: " + "; ".join(f"{m} ({why})" for m, why in report["skipped"].items())]
    if report["errors"]:
        lines += ["", "**ERRORS**: " + "; ".join(report["errors"])]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- the zoo's report
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
            cont = torch.tensor(generate_ar(target, ids, args.max_new_tokens))
            seq = torch.cat([ids, cont])[None]
            t = target(input_ids=seq).logits[0, len(ids) - 1 : -1].argmax(-1)
            d = draft(input_ids=seq).logits[0, len(ids) - 1 : -1].argmax(-1)
            hit += int((t == d).sum())
            total += len(t)
    print(
        f"greedy agreement (draft argmax == target argmax along the target's greedy continuation), "
        f"{len(prompts)} test prompts x {args.max_new_tokens} tokens: {hit / total:.3f}"
    )
    ids = tok.encode(prompts[0])
    print("--- held-out prompt (end) ---\n" + prompts[0][-300:])
    print("--- target's greedy 128-token continuation ---\n" + tok.decode(generate_ar(target, ids, 128)))
    return True


def verify_cost(target, n: int, prefix_len: int = 96, repeats: int = 7) -> float:
    """Median seconds of one verification pass as the engine runs it (hf.forward with a [n, n] tree mask and
    explicit positions) over `n` nodes after a cached prefix of `prefix_len` random tokens."""
    device, vocab = hf.device_of(target), hf.vocab_size(target)
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, vocab, (prefix_len,), generator=g).to(device)
    nodes = torch.randint(0, vocab, (n,), generator=g).to(device)
    mask = torch.ones(n, n, dtype=torch.bool).tril()  # a chain; a tree's mask has the same shape and cost
    positions = torch.arange(prefix_len, prefix_len + n, device=device)
    cache = hf.new_cache(target)
    times = []
    with torch.inference_mode():
        hf.forward(target, prefix, cache, last_only=True)
        for _ in range(repeats + 1):  # the first run warms up and is discarded
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            hf.forward(target, nodes, cache, positions, tree_mask=mask)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            hf.crop_cache(cache, prefix_len)
    return statistics.median(times[1:])


def cost_report(args) -> bool:
    """V(n) = (one verification pass over n nodes) / (one over 1 token) - 1 for n = 1 .. 32, on this machine:
    the curve a tree budget is chosen on (chapter 12, section 8). Written to --out as costs-PRESET.json."""
    if args.threads:
        torch.set_num_threads(args.threads)
    target, _, _ = zoo.load_pair(args.preset, device=args.device)
    sizes = list(range(1, 33))
    rounds = []
    for _ in range(args.repeats):  # interleaved sweeps: a busy spell of the machine hits every n alike
        rounds.append({n: verify_cost(target, n) for n in sizes})
    ms = {n: 1000 * statistics.median(r[n] for r in rounds) for n in sizes}
    report = {
        "preset": args.preset,
        "device": str(hf.device_of(target)),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m specdec_lib.bench " + " ".join(args.argv),
        "how": "verify_cost: one hf.forward over n nodes with a [n, n] mask after 96 cached tokens, median of 7 "
        f"passes, median over {args.repeats} interleaved sweeps",
        "ms": {str(n): round(ms[n], 3) for n in sizes},
        "V": {str(n): round(ms[n] / ms[1] - 1, 4) for n in sizes},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"costs-{args.preset}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(" ".join(f"V({n})={report['V'][str(n)]:.2f}" for n in sizes))
    print(f"wrote {path}")
    return True


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["run", "zoo", "costs", "compile-time"], nargs="?", default="run")
    ap.add_argument("--methods", default=DEFAULT_METHODS, help="comma-separated specs (see above)")
    ap.add_argument(
        "--temperature",
        default="0,0.7:0.9,1",
        help="comma-separated samplings: T, or T:P for temperature T with top-p P (default 0,0.7:0.9,1)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=20, help="how many held-out prompts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--preset",
        default="tiny-code",
        help="tiny-code (offline zoo), smollm2-135m (a real model, offline), smollm2 or qwen3 (hub)",
    )
    ap.add_argument(
        "--device",
        default=None,
        help="cpu, cuda, ... (default: the preset's, see zoo.default_device: the CPU for tiny-code)",
    )
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--out", default="_build/bench", help="folder for bench.json, bench.md, bench.png")
    ap.add_argument(
        "--stem", default=None, help="report file name without suffix (default: bench, or bench-PRESET)"
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--compile", action="store_true", help="also run ar and each of our methods compiled")
    args = ap.parse_args(argv)
    args.argv = argv
    args.methods = [m for m in args.methods.split(",") if m]
    if args.compile:  # beside each eager row, its compiled twin (peers are transformers' own: none)
        ours = ["ar"] + [m for m in args.methods if m != "ar" and m.partition(":")[0] not in PEERS]
        args.methods += [m + COMPILED for m in ours if not m.endswith(COMPILED)]
    try:
        args.temperatures = [sampling_setting(t) for t in args.temperature.split(",") if t]
    except ValueError as e:
        ap.error(f"--temperature {args.temperature!r}: {e}")
    if not args.temperatures:
        ap.error("--temperature names no sampling")
    if args.max_new_tokens < 1 or args.prompts < 1 or args.repeats < 1:
        ap.error("--max-new-tokens, --prompts and --repeats must be >= 1")
    commands = {"run": run, "zoo": zoo_report, "costs": cost_report, "compile-time": compile_report}
    ok = commands[args.what](args)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
