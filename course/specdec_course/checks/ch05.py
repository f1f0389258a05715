"""Checkers for chapter 05 (Medusa heads). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import itertools
import math

import torch

from specdec_course.checks._core import Answers, Incorrect, as_float, expect, seed, verdict

_expected = Answers("ch05")


# ------------------------------------------------------------------------------------------ helpers
def _token_lists() -> list[list[int]]:
    g = torch.Generator().manual_seed(seed(0))
    out = [[7], [3, 1], [5, 9, 2], [4, 4, 4, 4, 4], list(range(10, 20))]
    out += [torch.randint(0, 50, (n,), generator=g).tolist() for n in (6, 11, 17)]
    return out


def _distributions(s: int = 0) -> list[torch.Tensor]:
    """Target distributions: confident, flat, sparse (zeros), and random ones at several temperatures."""
    g = torch.Generator().manual_seed(seed(s))
    out = [
        torch.tensor([0.5, 0.3, 0.15, 0.05]),
        torch.tensor([0.97, 0.01, 0.01, 0.01]),
        torch.tensor([0.8, 0.12, 0.08]),
        torch.tensor([0.0, 0.6, 0.0, 0.4]),
        torch.full((6,), 1 / 6),
        torch.tensor([0.12, 0.11, 0.1, 0.1, 0.1, 0.1, 0.1, 0.09, 0.09, 0.09]),
    ]
    for n, scale in [(8, 0.5), (8, 2.0), (12, 1.0), (20, 3.0), (30, 1.5)]:
        out.append((scale * torch.randn(n, generator=g)).softmax(-1))
    return [p.double() / p.double().sum() for p in out]


# ---------------------------------------------------------------------- exercise 1: head labels
def check_head_labels(fn) -> str:
    """fn(tokens, k) -> {t: label}: the positions whose hidden state trains Medusa head k (k = 1 is the
    first head, which predicts the token after next) and the token it must predict there."""

    def cases(fn):
        for tokens in _token_lists():
            for k in (1, 2, 3, 4):
                want = _expected.head_labels(tokens, k)
                got = fn(list(tokens), k)
                try:
                    got = {int(t): int(label) for t, label in dict(got).items()}
                except (TypeError, ValueError, RuntimeError) as e:
                    raise Incorrect("return a dict {position t: label token}") from e
                context = f"tokens {tokens}, head {k}"
                shift = {t: tokens[t + k] for t in range(len(tokens) - k)}
                expect(
                    got != shift or got == want,
                    f"{context}: head k predicts token t + 1 + k, not t + k (t + 1 is the LM head's own job)",
                )
                expect(
                    set(got) <= set(want),
                    f"{context}: positions {sorted(set(got) - set(want))} have no label: the sequence ends "
                    "before the token head k would predict there",
                )
                expect(
                    set(got) == set(want),
                    f"{context}: every position t with t + 1 + k < len(tokens) has a label; "
                    f"expected positions {sorted(want)}",
                )
                expect(got == want, f"{context}: expected {want}, got {got}")

    return verdict("head labels", fn, cases)


# ------------------------------------------------------------------ exercise 2: expected accepted
def _acc_tables() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed(1))
    out = [torch.tensor([[0.5, 0.2], [0.4, 0.3], [0.6, 0.1]])]
    for K, top in [(2, 3), (3, 4), (4, 5)]:
        raw = torch.rand(K, top + 1, generator=g)
        out.append((raw / raw.sum(1, keepdim=True))[:, :top].sort(1, descending=True).values)
    return out


def _trees_for(acc: torch.Tensor) -> list[list[tuple[int, ...]]]:
    """Prefix-closed rank trees: a chain, a star, a dense product, random sparse ones."""
    K, top = acc.shape
    out = [[(0,)], [(r,) for r in range(top)], [tuple([0] * d) for d in range(1, K + 1)]]
    out.append([c for d in range(1, K + 1) for c in itertools.product(range(2), repeat=d)])
    g = torch.Generator().manual_seed(seed(K * 10 + top))
    for _ in range(3):
        tree = {(0,)}
        for _ in range(8):
            parent = sorted(tree)[int(torch.randint(len(tree), (1,), generator=g))]
            if len(parent) < K:
                tree.add(parent + (int(torch.randint(top, (1,), generator=g)),))
            tree.add((int(torch.randint(top, (1,), generator=g)),))
        out.append(sorted(tree, key=lambda c: (len(c), c)))
    return out


def check_expected_accepted(fn) -> str:
    """fn(acc, choices) -> expected accepted drafted tokens per round, with acc[j, r] the probability that
    head j + 1's rank-r guess is right and choices a list of rank tuples (heads treated as independent)."""

    def cases(fn):
        for acc in _acc_tables():
            for choices in _trees_for(acc):
                want = _expected.expected_accepted(acc, choices)
                got = as_float(fn(acc.clone(), list(choices)), "the expected length")
                context = f"acc {[[round(x, 3) for x in row] for row in acc.tolist()]}, tree {choices}"
                expect(
                    abs(got - (want + 1)) > 1e-6,
                    f"{context}: count the accepted drafted tokens only, not the target's own token (that "
                    "would be tau)",
                )
                last_only = sum(float(acc[len(c) - 1, c[-1]]) for c in choices)
                expect(
                    abs(got - last_only) > 1e-9 or abs(got - want) < 1e-9,
                    f"{context}: a node is accepted only if every guess on its path is right: multiply the "
                    "accuracies along the path, not just the node's own",
                )
                expect(
                    abs(got - _colleague_accepted(acc, choices)) > 1e-9 or abs(got - want) < 1e-9,
                    f"{context}: that is the colleague's answer: nodes at one depth are accepted in disjoint "
                    "events, so their probabilities add up (the largest alone is too low)",
                )
                expect(abs(got - want) < 1e-6, f"{context}: expected {want:.6f}, got {got:.6f}")

    return verdict("expected accepted length", fn, cases)


def _colleague_accepted(acc, choices) -> float:
    """The notebook's `colleague_expected_accepted`, bug included (it is shown to the learner)."""
    best = {}
    for node in choices:
        prob = 1.0
        for j, r in enumerate(node):
            prob *= float(acc[j, r])
        best[len(node)] = max(best.get(len(node), 0.0), prob)
    return sum(best.values())


# ---------------------------------------------------------------- exercise 3: typical acceptance
def _typical_cases():
    for p in _distributions():
        for x in range(len(p)):
            for epsilon, delta in [(0.09, 0.3), (0.3, 0.55), (0.02, 0.15)]:
                yield p, x, epsilon, delta


def check_typical_accept(fn) -> str:
    """fn(p, x, epsilon, delta) -> True when P(x) > min(epsilon, delta * exp(-H(P))), H in nats."""

    def cases(fn):
        for p, x, epsilon, delta in _typical_cases():
            want = _expected.typical_accept(p, x, epsilon, delta)
            threshold = _expected.threshold(p, epsilon, delta)
            answer = fn(p.clone(), x, epsilon, delta)
            try:
                got = bool(answer)
            except (TypeError, ValueError, RuntimeError) as e:
                raise Incorrect("return True or False") from e
            context = (
                f"p = {[round(v, 3) for v in p.tolist()]}, x = {x}, epsilon {epsilon}, delta {delta} "
                f"(threshold {threshold:.4f})"
            )
            entropy = float(-(p.double() * p.double().clamp_min(1e-30).log()).sum())
            colleague = bool(float(p[x]) > min(epsilon, delta * math.exp(entropy)))
            expect(
                got == want or got != colleague,
                f"{context}: expected {want}; yours is the colleague's answer: the threshold must FALL as the "
                "target's entropy H grows, delta * exp(-H), so that an unsure target accepts more tokens",
            )
            expect(
                got == want,
                f"{context}: expected {want}. Hint: the threshold is min(epsilon, delta * exp(-H)), with the "
                "entropy H in nats (natural log) and 0 log 0 = 0; the token must be strictly above it",
            )

    return verdict("typical acceptance rule", fn, cases)


# ------------------------------------------------------------ exercise 4: the law of the first token
def _law_cases():
    g = torch.Generator().manual_seed(seed(2))
    for p in _distributions(s=3):
        order = p.argsort(descending=True).tolist()
        options = [order[:1], order[:2], order[1:3], order[-2:], order[:3][::-1]]
        options.append(torch.randperm(len(p), generator=g)[:3].tolist())
        for children in options:
            if len({round(float(p[x]), 12) for x in children}) == len(children):  # no exact ties
                yield p, children


def check_typical_law(fn) -> str:
    """fn(p, children, epsilon, delta) -> the exact distribution of the first token emitted when the root's
    children `children` are verified with typical acceptance (one level, target distribution p)."""

    def cases(fn):
        for p, children in _law_cases():
            want = _expected.typical_law(p, children)
            answer = fn(p.clone(), list(children), 0.09, 0.3)
            try:
                got = torch.as_tensor(answer, dtype=torch.float64).reshape(-1)
            except (TypeError, ValueError, RuntimeError) as e:
                raise Incorrect("return a tensor (or list) of probabilities, one per token, like p") from e
            context = f"p = {[round(v, 3) for v in p.tolist()]}, children {children}"
            expect(got.numel() == p.numel(), f"{context}: return one probability per token ({p.numel()})")
            expect(abs(float(got.sum()) - 1) < 1e-6, f"{context}: a distribution sums to 1")
            expect(
                not torch.allclose(got, p, atol=1e-6) or torch.allclose(want, p),
                f"{context}: a child passed the bar, so it is emitted with probability 1; p itself is what "
                "exact verification (MSS) would give",
            )
            accepted = [x for x in children if float(want[x]) == 1.0]
            expect(
                torch.allclose(got, want, atol=1e-6) or not accepted or float(got.max()) < 1 - 1e-6,
                f"{context}: when several siblings are accepted, the one with the larger log P wins",
            )
            expect(
                torch.allclose(got, want, atol=1e-6),
                f"{context}: expected {[round(v, 3) for v in want.tolist()]}",
            )

    return verdict("first-token law under typical acceptance", fn, cases)
