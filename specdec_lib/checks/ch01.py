"""Checkers for chapter 01 (autoregressive decoding): sampling controls and the cost of a decode step.

Each `check_x(fn)` runs the learner's `fn` on hand-made and random cases, compares it with the reference
solution in `REFERENCE`, prints a verdict and returns it ("correct", "incorrect" with a hint, or
"not attempted"). Random cases use a private generator, so checking never moves the notebook's RNG.
"""

from __future__ import annotations

import math

import torch

from specdec_lib.checks._core import expect, verdict

# ------------------------------------------------------------------------------ reference solutions


def temperature_softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T) over the last dimension; T = 0 gives a one-hot vector on the argmax."""
    logits = torch.as_tensor(logits).float()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    return torch.softmax(logits / temperature, dim=-1)


def top_k_filter(probs: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest probabilities of a 1-D distribution, zero the rest, renormalise."""
    probs = torch.as_tensor(probs).float()
    if k >= probs.numel():
        return probs / probs.sum()
    kth = probs.topk(k).values[-1]
    kept = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    return kept / kept.sum()


def top_p_filter(probs: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches p (the top token always stays)."""
    probs = torch.as_tensor(probs).float()
    sorted_probs, order = probs.sort(descending=True)
    mass_above = sorted_probs.cumsum(0) - sorted_probs  # probability of the tokens ranked higher
    keep_sorted = mass_above < p
    keep_sorted[0] = True
    keep = torch.zeros_like(keep_sorted).scatter(0, order, keep_sorted)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum()


def decode_step_bytes(n_params, bytes_per_param, n_layers, kv_dim, context_len):
    """Bytes read by one decode step at batch 1: every weight once, plus the keys and values of every
    cached position in every layer (stored in the same dtype as the weights)."""
    return bytes_per_param * (n_params + 2 * n_layers * kv_dim * context_len)


def pass_time_lower_bound(n_params, bytes_per_param, n_tokens, bandwidth, peak_flops):
    """Roofline lower bound (seconds) on one forward pass over `n_tokens` tokens: the larger of the time
    to stream the weights once and the time to do 2 * n_params FLOPs per token."""
    return max(n_params * bytes_per_param / bandwidth, 2 * n_params * n_tokens / peak_flops)


REFERENCE = {
    "check_temperature_softmax": temperature_softmax,
    "check_top_k_filter": top_k_filter,
    "check_top_p_filter": top_p_filter,
    "check_decode_step_bytes": decode_step_bytes,
    "check_pass_time": pass_time_lower_bound,
}

# ---------------------------------------------------- plausible wrong answers (for tests/test_checks)


def _temperature_multiplies(logits, temperature):
    return torch.softmax(torch.as_tensor(logits).float() * temperature, dim=-1)


def _temperature_no_greedy_case(logits, temperature):
    return torch.softmax(torch.as_tensor(logits).float() / temperature, dim=-1)


def _temperature_naive_exp(logits, temperature):
    logits = torch.as_tensor(logits).float()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    e = torch.exp(logits / temperature)
    return e / e.sum(-1, keepdim=True)


def _temperature_wrong_dim(logits, temperature):
    logits = torch.as_tensor(logits).float()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    return torch.softmax(logits / temperature, dim=0)


def _top_k_no_renorm(probs, k):
    probs = torch.as_tensor(probs).float()
    kth = probs.topk(min(k, probs.numel())).values[-1]
    return torch.where(probs >= kth, probs, torch.zeros_like(probs))


def _top_k_smallest(probs, k):
    probs = torch.as_tensor(probs).float()
    kth = probs.topk(min(k, probs.numel()), largest=False).values[-1]
    kept = torch.where(probs <= kth, probs, torch.zeros_like(probs))
    return kept / kept.sum()


def _top_k_off_by_one(probs, k):
    probs = torch.as_tensor(probs).float()
    if k >= probs.numel():
        return probs
    kth = probs.topk(k).values[-1]
    kept = torch.where(probs > kth, probs, torch.zeros_like(probs))  # drops the k-th token itself
    return kept / kept.sum()


def _top_p_no_renorm(probs, p):
    probs = torch.as_tensor(probs).float()
    sorted_probs, order = probs.sort(descending=True)
    keep_sorted = (sorted_probs.cumsum(0) - sorted_probs) < p
    keep = torch.zeros_like(keep_sorted).scatter(0, order, keep_sorted)
    return torch.where(keep, probs, torch.zeros_like(probs))


def _top_p_drops_crossing_token(probs, p):
    probs = torch.as_tensor(probs).float()
    sorted_probs, order = probs.sort(descending=True)
    keep_sorted = sorted_probs.cumsum(0) <= p  # stops *before* the token that reaches p
    keep = torch.zeros_like(keep_sorted).scatter(0, order, keep_sorted)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum()


def _top_p_unsorted(probs, p):
    probs = torch.as_tensor(probs).float()
    keep = (probs.cumsum(0) - probs) < p  # vocabulary order instead of probability order
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum()


WRONG = {
    "check_temperature_softmax": [
        _temperature_multiplies,
        _temperature_no_greedy_case,
        _temperature_naive_exp,
        _temperature_wrong_dim,
    ],
    "check_top_k_filter": [_top_k_no_renorm, _top_k_smallest, _top_k_off_by_one],
    "check_top_p_filter": [_top_p_no_renorm, _top_p_drops_crossing_token, _top_p_unsorted],
    "check_decode_step_bytes": [
        lambda n_params, bytes_per_param, n_layers, kv_dim, context_len: n_params * bytes_per_param,
        lambda n_params, bytes_per_param, n_layers, kv_dim, context_len: (
            bytes_per_param * (n_params + n_layers * kv_dim * context_len)
        ),
        lambda n_params, bytes_per_param, n_layers, kv_dim, context_len: (
            n_params * bytes_per_param + 2 * n_layers * kv_dim * context_len
        ),
        lambda n_params, bytes_per_param, n_layers, kv_dim, context_len: 2 * n_params,
    ],
    "check_pass_time": [
        lambda n_params, bytes_per_param, n_tokens, bandwidth, peak_flops: (
            n_params * bytes_per_param / bandwidth + 2 * n_params * n_tokens / peak_flops
        ),
        lambda n_params, bytes_per_param, n_tokens, bandwidth, peak_flops: (
            n_params * bytes_per_param * n_tokens / bandwidth
        ),
        lambda n_params, bytes_per_param, n_tokens, bandwidth, peak_flops: max(
            n_params * bytes_per_param / bandwidth, n_params * n_tokens / peak_flops
        ),
        lambda n_params, bytes_per_param, n_tokens, bandwidth, peak_flops: (
            n_params * bytes_per_param / bandwidth
        ),
    ],
}

# --------------------------------------------------------------------------------------- helpers


def _tensor_out(out, shape, what: str) -> torch.Tensor:
    """The learner's output as a float64 tensor of the expected shape (or an informative Incorrect)."""
    try:
        t = torch.as_tensor(out).detach().to(torch.float64)
    except Exception:
        expect(False, f"{what}: return a torch tensor (got {type(out).__name__})")
    expect(tuple(t.shape) == tuple(shape), f"{what}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    expect(bool(torch.isfinite(t).all()), f"{what}: your output contains NaN or inf")
    return t


def _same(got: torch.Tensor, want: torch.Tensor, atol: float = 1e-5) -> bool:
    return bool(torch.allclose(got, want.to(torch.float64), atol=atol, rtol=1e-4))


def _fmt(t: torch.Tensor, n: int = 6) -> str:
    vals = ", ".join(f"{v:.3f}" for v in t.flatten()[:n].tolist())
    return f"[{vals}{', ...' if t.numel() > n else ''}]"


def _random_probs(g: torch.Generator, v: int) -> torch.Tensor:
    """A random distribution over v tokens with distinct values (no ties) and a few large entries."""
    logits = torch.randn(v, generator=g, dtype=torch.float64) * 2.0
    return torch.softmax(logits, 0).float()


def _unchanged(fn, x: torch.Tensor, *args) -> object:
    """Call fn on a copy and complain if it modified its input in place."""
    before = x.clone()
    out = fn(x, *args)
    expect(torch.equal(x, before), "your function changed its input tensor in place: work on a copy")
    return out


def _close(got, want: float, what: str, hint: str, mistakes: dict[str, float] | None = None) -> None:
    """Compare a number; when it matches a known mistake, give that mistake's hint instead."""
    try:
        got = float(got)
    except (TypeError, ValueError):
        expect(False, f"{what}: return a number (got {type(got).__name__})")
    if math.isclose(got, want, rel_tol=1e-6):
        return
    for mistake_hint, value in (mistakes or {}).items():
        if math.isclose(got, value, rel_tol=1e-6):
            hint = mistake_hint
            break
    expect(False, f"{what}: expected {want:.6g}, got {got:.6g}. {hint}")


# ----------------------------------------------------------------------------------------- checkers


def check_temperature_softmax(fn) -> str:
    """fn(logits [..., V], temperature) -> probabilities [..., V]; temperature 0 = one-hot argmax."""

    def cases(fn):
        logits = torch.tensor([2.0, 1.0, 0.5, -1.0, 3.0, 0.0])
        got = _tensor_out(_unchanged(fn, logits, 1.0), logits.shape, "T=1")
        expect(
            _same(got, torch.softmax(logits, -1)),
            f"with temperature 1 the answer is plain softmax(logits) = {_fmt(torch.softmax(logits, -1))}, "
            f"got {_fmt(got)}",
        )
        got = fn(logits, 0.0)
        expect(
            bool(torch.isfinite(torch.as_tensor(got)).all()),
            "T=0 gives NaN or inf (dividing by zero): handle temperature 0 separately, as greedy decoding",
        )
        got = _tensor_out(got, logits.shape, "T=0")
        expect(
            _same(got, temperature_softmax(logits, 0.0)),
            "with temperature 0 the answer is a point mass: 1.0 on the argmax (index 4 here), 0 elsewhere",
        )
        for t in (0.5, 2.0):
            got = _tensor_out(fn(logits, t), logits.shape, f"T={t}")
            expect(
                _same(got, temperature_softmax(logits, t)),
                f"T={t}: expected {_fmt(temperature_softmax(logits, t))}, got {_fmt(got)}. Divide the logits "
                "by T before the softmax (T < 1 sharpens the distribution, T > 1 flattens it)",
            )
        big = torch.tensor([1000.0, 999.0, 0.0])
        got = fn(big, 1.0)
        expect(
            bool(torch.isfinite(torch.as_tensor(got)).all()),
            "large logits (1000) give NaN or inf: subtract the largest logit before exp, "
            "or let torch.softmax do it",
        )
        expect(
            _same(_tensor_out(got, big.shape, "large logits"), temperature_softmax(big, 1.0)), "large logits"
        )
        g = torch.Generator().manual_seed(101)
        batch = torch.randn(3, 50, generator=g) * 3
        for t in (0.0, 0.7, 1.5):
            got = _tensor_out(fn(batch, t), batch.shape, f"a batch of logits [3, 50] at T={t}")
            expect(
                _same(got, temperature_softmax(batch, t)),
                f"a batch of logits [3, 50] at T={t}: normalise over the last dimension only "
                "(each row is one distribution)",
            )

    return verdict("check_temperature_softmax", fn, cases)


def check_top_k_filter(fn) -> str:
    """fn(probs [V], k) -> probs [V] keeping the k largest entries, renormalised to sum to 1."""

    def cases(fn):
        probs = torch.tensor([0.1, 0.4, 0.2, 0.3])
        got = _tensor_out(_unchanged(fn, probs, 2), probs.shape, "k=2")
        expect(
            abs(float(got.sum()) - 1) < 1e-5,
            f"k=2 on {_fmt(probs)}: the kept probabilities must be renormalised to sum to 1 "
            f"(yours sum to {float(got.sum()):.3f})",
        )
        expect(
            _same(got, top_k_filter(probs, 2)),
            f"k=2 on {_fmt(probs)}: keep the 2 largest (tokens 1 and 3) and renormalise: expected "
            f"{_fmt(top_k_filter(probs, 2))}, got {_fmt(got)}",
        )
        got = _tensor_out(fn(probs, 1), probs.shape, "k=1")
        expect(_same(got, top_k_filter(probs, 1)), "k=1 must give a one-hot vector on the most likely token")
        for k in (4, 10):
            got = _tensor_out(fn(probs, k), probs.shape, f"k={k}")
            expect(
                _same(got, probs),
                f"k={k} with a vocabulary of 4 keeps every token: the distribution must come back unchanged",
            )
        g = torch.Generator().manual_seed(202)
        for v, k in ((50, 3), (50, 10), (200, 25)):
            probs = _random_probs(g, v)
            got = _tensor_out(fn(probs, k), probs.shape, f"a random distribution over {v} tokens, k={k}")
            kept = int((got > 0).sum())
            expect(
                kept == k, f"a random distribution over {v} tokens, k={k}: you kept {kept} tokens, not {k}"
            )
            expect(
                _same(got, top_k_filter(probs, k)),
                f"a random distribution over {v} tokens, k={k}: keep the k *largest* probabilities",
            )

    return verdict("check_top_k_filter", fn, cases)


def _top_p_cases(g: torch.Generator):
    """Random (probs, p) pairs whose cumulative sums stay clear of p (no floating-point boundary cases)."""
    out = []
    while len(out) < 4:
        probs = _random_probs(g, 40)
        p = (0.5, 0.9)[len(out) % 2]
        cum = probs.double().sort(descending=True).values.cumsum(0)
        if float((cum - p).abs().min()) > 1e-3:
            out.append((probs, p))
    return out


def check_top_p_filter(fn) -> str:
    """fn(probs [V], p) -> probs [V] keeping the smallest most-likely set with mass >= p, renormalised."""

    def cases(fn):
        probs = torch.tensor([0.45, 0.25, 0.15, 0.10, 0.05])
        got = _tensor_out(_unchanged(fn, probs, 0.6), probs.shape, "p=0.6")
        expect(
            abs(float(got.sum()) - 1) < 1e-5,
            f"p=0.6 on {_fmt(probs)}: renormalise the kept probabilities to sum to 1 "
            f"(yours sum to {float(got.sum()):.3f})",
        )
        expect(
            _same(got, top_p_filter(probs, 0.6)),
            f"p=0.6 on {_fmt(probs)}: 0.45 alone is below 0.6, so the set must also include 0.25 (mass 0.70); "
            f"keep the token that *crosses* p. Expected {_fmt(top_p_filter(probs, 0.6))}, got {_fmt(got)}",
        )
        got = _tensor_out(fn(probs, 0.3), probs.shape, "p=0.3")
        expect(
            _same(got, top_p_filter(probs, 0.3)),
            "p=0.3 when the top token alone has 0.45: keep just the top token (it is always kept)",
        )
        got = _tensor_out(fn(probs, 1.0), probs.shape, "p=1")
        expect(_same(got, probs), "p=1 keeps every token: the distribution must come back unchanged")
        shuffled = torch.tensor([0.10, 0.45, 0.05, 0.25, 0.15])
        got = _tensor_out(fn(shuffled, 0.6), shuffled.shape, "unsorted input")
        expect(
            _same(got, top_p_filter(shuffled, 0.6)),
            f"p=0.6 on {_fmt(shuffled)}: rank tokens by probability, not by their position in the vocabulary; "
            f"expected {_fmt(top_p_filter(shuffled, 0.6))}, got {_fmt(got)}",
        )
        g = torch.Generator().manual_seed(303)
        for probs, p in _top_p_cases(g):
            got = _tensor_out(fn(probs, p), probs.shape, f"a random distribution over 40 tokens, p={p}")
            expect(_same(got, top_p_filter(probs, p)), f"a random distribution over 40 tokens, p={p}")

    return verdict("check_top_p_filter", fn, cases)


def check_decode_step_bytes(fn) -> str:
    """fn(n_params, bytes_per_param, n_layers, kv_dim, context_len) -> bytes read per decode step."""

    def mistakes(n_params, b, n_layers, kv_dim, ctx):
        kv = n_layers * kv_dim * ctx
        return {
            "You left out the KV cache: each step also reads the keys and values of every cached position": (
                n_params * b
            ),
            "Each layer caches a key AND a value vector per position: count the cache twice": b
            * (n_params + kv),
            "The cached keys and values are numbers of bytes_per_param bytes each, like the weights": (
                n_params * b + 2 * kv
            ),
        }

    def cases(fn):
        _close(
            fn(7e9, 2, 32, 4096, 0),
            14e9,
            "7B parameters in fp16, empty cache",
            "With nothing cached, a step reads each weight once: parameters x bytes per parameter",
        )
        for args, what in (
            ((5.8e6, 4, 6, 256, 200), "5.8M fp32 parameters, 6 layers, kv_dim 256, 200 cached positions"),
            ((7e9, 2, 32, 4096, 4096), "7B fp16 parameters, 32 layers, kv_dim 4096, 4096 cached positions"),
            ((1.2e9, 1, 16, 512, 8000), "1.2B int8 parameters, 16 layers, kv_dim 512, 8000 cached positions"),
        ):
            _close(
                fn(*args),
                decode_step_bytes(*args),
                what,
                "Weights: parameters x bytes. Cache: layers x 2 (keys and values) x kv_dim x positions x bytes",
                mistakes(*args),
            )

    return verdict("check_decode_step_bytes", fn, cases)


def check_pass_time(fn) -> str:
    """fn(n_params, bytes_per_param, n_tokens, bandwidth, peak_flops) -> roofline seconds per pass."""

    def mistakes(n_params, b, n_tokens, bw, peak):
        memory, compute = n_params * b / bw, 2 * n_params * n_tokens / peak
        return {
            "The two costs overlap (the arithmetic runs while the weights stream in): take the larger one, "
            "not the sum": memory + compute,
            "One pass reads the weights once, however many tokens it scores": memory * n_tokens,
            "Count about 2 x parameters FLOPs per token (one multiply and one add per weight)": max(
                memory, compute / 2
            ),
            "With many tokens the arithmetic dominates: 2 x parameters x tokens FLOPs at peak FLOP/s": memory,
        }

    def cases(fn):
        for args, what in (
            ((7e9, 2, 1, 3.35e12, 989e12), "7B fp16 on an H100, 1 token"),
            ((7e9, 2, 16, 3.35e12, 989e12), "7B fp16 on an H100, 16 tokens"),
            ((7e9, 2, 2000, 3.35e12, 989e12), "7B fp16 on an H100, 2000 tokens"),
            (
                (5.8e6, 4, 32, 50e9, 0.2e12),
                "a 5.8M-parameter fp32 model on a CPU (50 GB/s, 0.2 TFLOP/s), 32 tokens",
            ),
        ):
            _close(
                fn(*args),
                pass_time_lower_bound(*args),
                what,
                "Use max(bytes / bandwidth, 2 x parameters x tokens / peak FLOP/s)",
                mistakes(*args),
            )

    return verdict("check_pass_time", fn, cases)
