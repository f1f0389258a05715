"""Checkers for chapter 01 (autoregressive decoding): sampling controls and the cost of a decode step.

Each `check_x(fn)` runs the learner's `fn` on hand-made and random cases, compares it with the expected
answers (recorded from the teacher's reference solutions, see `_core`), prints a verdict and returns it
("correct", "incorrect" with a hint, or "not attempted"). Random cases use a private generator, so
checking never moves the notebook's RNG.
"""

from __future__ import annotations

import math

import torch

from specdec_course.checks._core import Answers, expect, hidden, seed, verdict

_expected = Answers("ch01")

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


def _random_model(rng):
    """A hidden case of the decode-step exercise: (arguments, description)."""
    args = (
        rng.choice([1e8, 7e8, 3e9, 13e9]),
        rng.choice([1, 2, 4]),
        rng.randint(2, 48),
        128 * rng.randint(1, 32),
    )
    args += (rng.randint(1, 9000),)
    return args, "{:.3g} parameters at {} bytes, {} layers, kv_dim {}, {} cached positions".format(*args)


def _random_machine(rng):
    """A hidden case of the roofline exercise: (arguments, description)."""
    args = (rng.choice([1e8, 7e8, 3e9, 13e9]), rng.choice([1, 2, 4]), rng.choice([1, 4, 32, 500, 4000]))
    args += (rng.choice([50e9, 1e12, 3.35e12]), rng.choice([0.2e12, 100e12, 989e12]))
    return args, "{:.3g} parameters at {} bytes, {} tokens, {:.3g} B/s, {:.3g} FLOP/s".format(*args)


# ----------------------------------------------------------------------------------------- checkers


def check_temperature_softmax(fn) -> str:
    """fn(logits [..., V], temperature) -> probabilities [..., V]; temperature 0 = one-hot argmax."""

    def cases(fn):
        logits = torch.tensor([2.0, 1.0, 0.5, -1.0, 3.0, 0.0])
        want = _expected.temperature_softmax(logits, 1.0)
        got = _tensor_out(_unchanged(fn, logits, 1.0), logits.shape, "T=1")
        expect(
            _same(got, want),
            f"with temperature 1 the answer is plain softmax(logits) = {_fmt(want)}, got {_fmt(got)}",
        )
        want = _expected.temperature_softmax(logits, 0.0)
        got = fn(logits, 0.0)
        expect(
            bool(torch.isfinite(torch.as_tensor(got)).all()),
            "T=0 gives NaN or inf (dividing by zero): handle temperature 0 separately, as greedy decoding",
        )
        got = _tensor_out(got, logits.shape, "T=0")
        expect(
            _same(got, want),
            "with temperature 0 the answer is a point mass: 1.0 on the argmax (index 4 here), 0 elsewhere",
        )
        for t in (0.5, 2.0):
            want = _expected.temperature_softmax(logits, t)
            got = _tensor_out(fn(logits, t), logits.shape, f"T={t}")
            expect(
                _same(got, want),
                f"T={t}: expected {_fmt(want)}, got {_fmt(got)}. Divide the logits "
                "by T before the softmax (T < 1 sharpens the distribution, T > 1 flattens it)",
            )
        big = torch.tensor([1000.0, 999.0, 0.0])
        want = _expected.temperature_softmax(big, 1.0)
        got = fn(big, 1.0)
        expect(
            bool(torch.isfinite(torch.as_tensor(got)).all()),
            "large logits (1000) give NaN or inf: subtract the largest logit before exp, "
            "or let torch.softmax do it",
        )
        expect(_same(_tensor_out(got, big.shape, "large logits"), want), "large logits")
        g = torch.Generator().manual_seed(seed(101))
        batch = torch.randn(3, 50, generator=g) * 3
        for t in (0.0, 0.7, 1.5):
            want = _expected.temperature_softmax(batch, t)
            got = _tensor_out(fn(batch, t), batch.shape, f"a batch of logits [3, 50] at T={t}")
            expect(
                _same(got, want),
                f"a batch of logits [3, 50] at T={t}: normalise over the last dimension only "
                "(each row is one distribution)",
            )

    return verdict("check_temperature_softmax", fn, cases)


def check_top_k_filter(fn) -> str:
    """fn(probs [V], k) -> probs [V] keeping the k largest entries, renormalised to sum to 1."""

    def cases(fn):
        probs = torch.tensor([0.1, 0.4, 0.2, 0.3])
        want = _expected.top_k_filter(probs, 2)
        got = _tensor_out(_unchanged(fn, probs, 2), probs.shape, "k=2")
        expect(
            abs(float(got.sum()) - 1) < 1e-5,
            f"k=2 on {_fmt(probs)}: the kept probabilities must be renormalised to sum to 1 "
            f"(yours sum to {float(got.sum()):.3f})",
        )
        expect(
            _same(got, want),
            f"k=2 on {_fmt(probs)}: keep the 2 largest (tokens 1 and 3) and renormalise: expected "
            f"{_fmt(want)}, got {_fmt(got)}",
        )
        want = _expected.top_k_filter(probs, 1)
        got = _tensor_out(fn(probs, 1), probs.shape, "k=1")
        expect(_same(got, want), "k=1 must give a one-hot vector on the most likely token")
        for k in (4, 10):  # compared with the input: which must still be the input (`_unchanged`)
            got = _tensor_out(_unchanged(fn, probs, k), probs.shape, f"k={k}")
            expect(
                _same(got, probs),
                f"k={k} with a vocabulary of 4 keeps every token: the distribution must come back unchanged",
            )
        g = torch.Generator().manual_seed(seed(202))
        for v, k in ((50, 3), (50, 10), (200, 25)):
            probs = _random_probs(g, v)
            want = _expected.top_k_filter(probs, k)
            got = _tensor_out(fn(probs, k), probs.shape, f"a random distribution over {v} tokens, k={k}")
            kept = int((got > 0).sum())
            expect(
                kept == k, f"a random distribution over {v} tokens, k={k}: you kept {kept} tokens, not {k}"
            )
            expect(
                _same(got, want),
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
        want = _expected.top_p_filter(probs, 0.6)
        got = _tensor_out(_unchanged(fn, probs, 0.6), probs.shape, "p=0.6")
        expect(
            abs(float(got.sum()) - 1) < 1e-5,
            f"p=0.6 on {_fmt(probs)}: renormalise the kept probabilities to sum to 1 "
            f"(yours sum to {float(got.sum()):.3f})",
        )
        expect(
            _same(got, want),
            f"p=0.6 on {_fmt(probs)}: 0.45 alone is below 0.6, so the set must also include 0.25 (mass 0.70); "
            f"keep the token that *crosses* p. Expected {_fmt(want)}, got {_fmt(got)}",
        )
        want = _expected.top_p_filter(probs, 0.3)
        got = _tensor_out(fn(probs, 0.3), probs.shape, "p=0.3")
        expect(
            _same(got, want),
            "p=0.3 when the top token alone has 0.45: keep just the top token (it is always kept)",
        )
        got = _tensor_out(_unchanged(fn, probs, 1.0), probs.shape, "p=1")  # compared with the input
        expect(_same(got, probs), "p=1 keeps every token: the distribution must come back unchanged")
        shuffled = torch.tensor([0.10, 0.45, 0.05, 0.25, 0.15])
        want = _expected.top_p_filter(shuffled, 0.6)
        got = _tensor_out(fn(shuffled, 0.6), shuffled.shape, "unsorted input")
        expect(
            _same(got, want),
            f"p=0.6 on {_fmt(shuffled)}: rank tokens by probability, not by their position in the vocabulary; "
            f"expected {_fmt(want)}, got {_fmt(got)}",
        )
        g = torch.Generator().manual_seed(seed(303))
        for probs, p in _top_p_cases(g):
            want = _expected.top_p_filter(probs, p)
            got = _tensor_out(fn(probs, p), probs.shape, f"a random distribution over 40 tokens, p={p}")
            expect(_same(got, want), f"a random distribution over 40 tokens, p={p}")

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
            *hidden(6, _random_model, 1),
        ):
            want = _expected.decode_step_bytes(*args)
            _close(
                fn(*args),
                want,
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
            *hidden(6, _random_machine, 2),
        ):
            want = _expected.pass_time_lower_bound(*args)
            _close(
                fn(*args),
                want,
                what,
                "Use max(bytes / bandwidth, 2 x parameters x tokens / peak FLOP/s)",
                mistakes(*args),
            )

    return verdict("check_pass_time", fn, cases)
