"""Chapter 06's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch06.py)."""

from __future__ import annotations

import math

from specdec_course.checks.ch06 import DEEPSEEK_ALPHA, DEEPSEEK_SPEEDUP, _colleague_tau


def module_pairs(ids, k):
    T = len(ids)
    return [ids[j + k] for j in range(T - k - 1)], [ids[j + k + 1] for j in range(T - k - 1)]


def kept_positions(k, n, n_new):
    return max(0, min(n, n + n_new - k))


def expected_tau(alphas):
    tau, reach = 1.0, 1.0
    for alpha in alphas:
        reach *= alpha
        tau += reach
    return tau


REFERENCE = {
    "check_module_pairs": module_pairs,
    "check_kept_positions": kept_positions,
    "check_expected_tau": expected_tau,
    # values: check_deepseek_numbers(*answer)
    "check_deepseek_numbers": (1 + DEEPSEEK_ALPHA, (1 + DEEPSEEK_ALPHA) / DEEPSEEK_SPEEDUP - 1),
}

# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
_TAU = 1 + DEEPSEEK_ALPHA
VALUES = {
    "deepseek.tau": (
        _TAU,
        3,
        [(DEEPSEEK_ALPHA, "tau counts the target's own token as well as the accepted draft")],
    ),
    "deepseek.overhead": (
        _TAU / DEEPSEEK_SPEEDUP - 1,
        3,
        [
            (
                _TAU / DEEPSEEK_SPEEDUP,
                "that is the cost of a round in plain steps; the question asks how much MORE it costs (subtract 1)",
            ),
            (
                DEEPSEEK_SPEEDUP / _TAU - 1,
                "speedup = tau / (cost of a round in plain steps), so the cost is tau / speedup, not the inverse",
            ),
        ],
    ),
}


WRONG = {
    "check_module_pairs": [
        lambda ids, k: (ids[k - 1 : len(ids) - 2], ids[k : len(ids) - 1]),  # predicts k ahead, not k + 1
        lambda ids, k: (ids[k:], ids[k + 1 :]),  # reads one token more than it has labels for
        lambda ids, k: (ids[k + 1 :], ids[k + 1 :]),  # reads its own label
        lambda ids, k: (ids[: len(ids) - k - 1], ids[k + 1 :]),  # reads x_j, the independent head's view
        lambda ids, k: (ids[k : len(ids) - 1], ids[k + 2 :] + [0]),  # labels one too far
    ],
    "check_kept_positions": [
        lambda k, n, n_new: n,  # keeps everything: right for independent heads only
        lambda k, n, n_new: max(0, min(n, n + n_new - k + 1)),  # keeps the entry that read the pending index
        lambda k, n, n_new: n + n_new - k,  # forgets the bounds
        lambda k, n, n_new: max(0, min(n, n_new - k)),  # counts from the round's start only
        lambda k, n, n_new: max(0, min(n, n + n_new - 1)),  # ignores k
    ],
    "check_expected_tau": [
        lambda alphas: 1 + sum(alphas),  # treats the depths as independent
        _colleague_tau,  # the notebook's colleague: adds before multiplying
        lambda alphas: expected_tau(alphas) - 1,  # forgets the target's own token
        lambda alphas: 1 + math.prod(alphas),  # only the full chain
        lambda alphas: 1 + len(alphas) * math.prod(alphas),  # all or nothing
        lambda alphas: sum(a ** (d + 1) for d, a in enumerate(alphas)) + 1,  # powers of each alpha
    ],
    "check_deepseek_numbers": [
        (0.85, 0.85 / 1.8 - 1),  # forgets the target's own token
        (1.85, 1.85 / 1.8),  # the cost, not the overhead
        (1.85, 1.8 / 1.85 - 1),  # inverse
        (1.9, 1.85 / 1.8 - 1),  # the other end of the reported range, not 0.85
        ("1.85", "three percent"),  # not a number
    ],
}
