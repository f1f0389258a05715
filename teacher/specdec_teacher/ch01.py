"""Chapter 01's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch01.py)."""

from __future__ import annotations

import torch

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

# ------------------------------------------------ plausible wrong answers (for tests/test_checks_*.py)


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
