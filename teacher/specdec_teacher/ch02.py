"""Chapter 02's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch02.py)."""

from __future__ import annotations

# --------------------------------------------------------------------------------------- references


def expected_tau(alpha, k):
    """Expected tokens per round with i.i.d. acceptance alpha and k drafts: 1 + alpha + ... + alpha**k."""
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def alpha_for_tau(tau, k):
    """The alpha with expected_tau(alpha, k) = tau, by bisection: tau grows with alpha from 1 to k + 1."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tau(mid, k) < tau else (lo, mid)
    return (lo + hi) / 2


def break_even_c(alpha, k, V):
    """tau / (1 + k c + V) = 1  <=>  c = (tau - 1 - V) / k."""
    return (expected_tau(alpha, k) - 1 - V) / k


def greedy_accept(draft_tokens, target_argmax):
    """(accepted drafts, the target's next token): the longest matching prefix, then target_argmax[a]."""
    a = 0
    while a < len(draft_tokens) and draft_tokens[a] == target_argmax[a]:
        a += 1
    return a, target_argmax[a]


def naive_alpha(alpha, k):
    """What accepted/drafted converges to: E[accepted] = alpha + ... + alpha**k = tau - 1, over k drafted."""
    return (expected_tau(alpha, k) - 1) / k


def predicted_speedup(alpha, k, c, V):
    """S = tau / (1 + k c + V): k draft passes of cost c, one target pass over k + 1 tokens of cost 1 + V."""
    return expected_tau(alpha, k) / (1 + k * c + V)


def best_k(alpha, c, V=0.0):
    """The k in 1..16 with the largest predicted speedup (the smallest on a tie)."""
    return max(range(1, 17), key=lambda k: predicted_speedup(alpha, k, c, V))


def speedup_table(alpha, c, V=0.0):
    """The predicted speedup of every k in 1..16 (best_k's hint shows two of them)."""
    return [predicted_speedup(alpha, k, c, V) for k in range(1, 17)]


REFERENCE = {
    "check_alpha_for_tau": alpha_for_tau,
    "check_greedy_accept": greedy_accept,
    "check_naive_alpha": naive_alpha,
    "check_break_even_c": break_even_c,
    "check_best_k": best_k,
}

WRONG = {
    "check_alpha_for_tau": [
        lambda tau, k: 1 - 1 / tau,  # the k -> infinity limit, tau = 1 / (1 - alpha)
        lambda tau, k: (tau - 1) / k,  # linear: as if tau = 1 + k alpha
        lambda tau, k: alpha_for_tau(tau, k - 1) if k > 1 else 0.5,  # forgets the target's own token
        lambda tau, k: (tau - 1) ** (1 / k) if tau < k + 1 else 1.0,  # only the last term, alpha**k
    ],
    "check_greedy_accept": [
        lambda d, g: (sum(x == y for x, y in zip(d, g)), g[sum(x == y for x, y in zip(d, g))]),  # any match
        lambda d, g: (
            greedy_accept(d, g)[0],
            d[greedy_accept(d, g)[0]] if greedy_accept(d, g)[0] < len(d) else g[-1],
        ),
        lambda d, g: (greedy_accept(d, g)[0], g[max(0, greedy_accept(d, g)[0] - 1)]),  # off by one
        lambda d, g: (greedy_accept(d, g)[0], g[-1]),  # always the last row
    ],
    "check_naive_alpha": [
        lambda alpha, k: alpha,  # the per-position rate: what the pooled estimate measures
        lambda alpha, k: expected_tau(alpha, k) - 1,  # the accepted count, not divided by k
        lambda alpha, k: alpha**k,  # all k accepted
        lambda alpha, k: expected_tau(alpha, k) / (k + 1),  # tokens per round over k + 1
    ],
    "check_break_even_c": [
        lambda alpha, k, V: (expected_tau(alpha, k) - 1) / k,  # ignores the verification cost
        lambda alpha, k, V: (expected_tau(alpha, k) - V) / k,  # forgets the target pass itself
        lambda alpha, k, V: expected_tau(alpha, k) - 1 - V,  # one draft pass per round
        lambda alpha, k, V: alpha,  # Leviathan's alpha > c, which holds at k = 1 and V = 0 only
    ],
    "check_best_k": [
        lambda alpha, c, V=0.0: 16,  # the longest draft: maximises tau, not speed
        lambda alpha, c, V=0.0: max(
            range(16), key=lambda i: predicted_speedup(alpha, i + 1, c, V)
        ),  # an index
        lambda alpha, c, V=0.0: max(
            range(1, 16), key=lambda k: predicted_speedup(alpha, k, c, V)
        ),  # stops at 15
        lambda alpha, c, V=0.0: max(
            range(1, 17), key=lambda k: predicted_speedup(alpha, k, c, 0.0)
        ),  # drops V
    ],
}
