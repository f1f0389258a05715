"""Checkers for chapter 12 (recap and benchmark): the problem set, one exercise per thread of the course.
Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import torch

from specdec_course.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    Answers,
    Incorrect,
    as_float,
    expect,
    hidden,
    options_of,
    seed,
    verdict,
)

_expected = Answers("ch12")


def _close(a: float, b: float, tol: float = 1e-6) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(b))


# ------------------------------------------- exercise 1 (chapters 02 and 12): which lever
_ROUNDS = [(2.3, 9.2, 10.5, 9.2), (5.8, 26.0, 17.0, 8.5), (1.0, 0.0, 9.0, 9.0), (3.9, 8.8, 13.6, 9.4)]


def _random_round(rng):
    t1 = round(rng.uniform(2, 20), 1)
    return (
        round(rng.uniform(1, 6), 2),
        round(rng.uniform(0, 4 * t1), 1),
        round(rng.uniform(1.05, 3) * t1, 1),
        t1,
    )


def check_levers(fn) -> str:
    """fn(tau, draft_ms, verify_ms, t1_ms) -> (as measured, drafting free, verification free): the round
    model's predicted speedup from one method's milliseconds per round, then with the drafting time set to
    zero, then with the verification pass costing one plain step (V = 0, a GPU's regime at batch 1)."""

    def cases(fn):
        for tau, d, v, t1 in _ROUNDS + hidden(8, _random_round, 1):
            want = _expected.levers(tau, d, v, t1)
            try:
                got = [float(x) for x in fn(tau, d, v, t1)]
            except (TypeError, ValueError) as e:
                raise Incorrect(
                    "return three numbers: (as measured, drafting free, verification free)"
                ) from e
            expect(len(got) == 3, "return three numbers: (as measured, drafting free, verification free)")
            case = f"tau {tau}, draft {d} ms, verify {v} ms, t1 {t1} ms"
            expect(
                _close(got[0], want[0]),
                f"{case}: as measured, S = tau / (1 + kc + V) with kc = draft / t1 and 1 + V = verify / t1",
            )
            expect(
                _close(got[1], want[1]),
                f"{case}: free drafting sets kc = 0 and leaves the verification pass as it is",
            )
            expect(
                _close(got[2], want[2]),
                f"{case}: free verification sets V = 0: the pass still costs the plain step it replaces",
            )

    return verdict("which lever", fn, cases)


# --------------------------- exercise 2 (chapters 03, 08 and 10): a sampled draft vs a deterministic pick
def _prob_pairs():
    g = torch.Generator().manual_seed(seed(12))
    pairs = [
        (
            torch.tensor([0.6, 0.3, 0.1]),
            torch.tensor([0.3, 0.3, 0.4]),
        ),  # the example in the notes under the exercise
        (torch.tensor([0.5, 0.5, 0.0]), torch.tensor([0.4, 0.4, 0.2])),  # a token the target never says
    ]
    for v, sharp in ((5, 1.0), (8, 3.0), (6, 0.3)):
        p = torch.softmax(torch.randn(v, generator=g) * sharp, -1)
        q = torch.softmax(torch.randn(v, generator=g) * sharp, -1)
        pairs.append((p, q))
    return pairs


def check_two_acceptances(fn) -> str:
    """fn(p, q) -> (accept_sampled, accept_pick): the probability that the first drafted token is accepted
    when the drafter SAMPLES it from q (chapter 03's rule), and when it proposes q's most likely token as a
    deterministic pick (q = None, as EAGLE-2's top-k children and prompt lookup do; chapter 04's rule)."""

    def cases(fn):
        for p, q in _prob_pairs():
            want = _expected.two_acceptances(p, q)
            try:
                got = [float(x) for x in fn(p.clone(), q.clone())]
            except (TypeError, ValueError) as e:
                raise Incorrect("return two numbers: (accept_sampled, accept_pick)") from e
            expect(len(got) == 2, "return two numbers: (accept_sampled, accept_pick)")
            case = f"p = {[round(x, 3) for x in p.tolist()]}, q = {[round(x, 3) for x in q.tolist()]}"
            expect(
                not _close(got[0], float((p * q).sum())) or _close(float((p * q).sum()), want[0], 1e-4),
                f"{case}: sum p*q is the chance that two INDEPENDENT draws agree; the rule accepts x with "
                "probability min(1, p(x)/q(x)) (chapter 03)",
            )
            expect(_close(got[0], want[0], 1e-4), f"{case}: E_q[min(1, p/q)] = sum_x min(p(x), q(x))")
            x = int(q.argmax())
            expect(
                not _close(got[1], float(q[x])) or _close(float(q[x]), want[1], 1e-4),
                f"{case}: the pick is judged by the TARGET: a point mass is accepted with probability p(x)",
            )
            expect(_close(got[1], want[1], 1e-4), f"{case}: a deterministic pick x is accepted with p(x)")

    return verdict("a sampled draft vs a deterministic pick", fn, cases)


# ------------------------------------------- exercise 3 (chapters 02 and 12): the tau it would take
# (kc, V, speedup): (kc, V) pairs measured in the committed benchmark (book/data/bench.json), a free
# drafter, and a GPU-like pair with both costs small; speedups the table does not pair with them.
_NEEDS = [
    (1.21, 0.41, 1.0),  # chain:4 at T = 1: break even
    (4.28, 0.87, 1.0),  # eagle2:16 at T = 1
    (0.61, 0.85, 1.5),  # medusa:16 at T = 1, to reach 1.5x
    (2.04, 0.79, 1.51),  # eagle:16 at T = 0, to match prompt lookup's speedup
    (0.0, 0.29, 1.0),  # a free drafter (prompt lookup): only verification to pay for
    (0.05, 0.02, 3.0),  # a GPU-like pair
]


def check_tau_needed(fn) -> str:
    """fn(kc, V, speedup) -> the tau a method with drafting cost kc and verification cost V (both in plain
    decoding steps, as in the benchmark) must reach for chapter 02's model S = tau / (1 + kc + V) to predict
    `speedup`."""

    def cases(fn):
        extra = hidden(
            8,
            lambda r: (round(r.uniform(0, 4), 2), round(r.uniform(0, 1.5), 2), round(r.uniform(0.5, 4), 2)),
            2,
        )
        for kc, V, s in _NEEDS + extra:
            want = _expected.tau_needed(kc, V, s)
            got = as_float(fn(kc, V, s), "the tau needed")
            case = f"kc = {kc}, V = {V}, speedup {s}"
            misconceptions = (
                (
                    s * (kc + V),
                    "the round also pays for the plain step that verification replaces: the 1 in 1 + kc + V",
                ),
                (s * (1 + V), "drafting is not free: the round pays kc for it too"),
                (
                    s / (1 + kc + V),
                    "that divides the speedup by the cost; solve S = tau / (1 + kc + V) for tau instead",
                ),
                (1 + kc + V, "that is the tau to break even (S = 1); scale it by the speedup asked for"),
            )
            for value, hint in misconceptions:
                expect(not _close(got, value, 1e-4) or _close(value, want, 1e-4), f"{case}: {hint}")
            expect(_close(got, want, 1e-4), f"{case}: expected {want:.3f}, got {got:.3f}")

    return verdict("the tau it would take", fn, cases)


# ----------------------------------- exercise 4 (chapters 01 and 12): where verification stops being free
_SWEEPS = [
    ([1, 2, 4, 8, 16, 32, 64], [7.0, 7.2, 7.5, 7.6, 8.9, 12.0, 20.0], 0.10),
    ([1, 2, 4, 8, 16, 32], [7.0, 7.9, 7.4, 7.6, 7.8, 9.0], 0.10),  # a noisy bump at 2 ends the free range
    ([1, 4, 16, 64, 256], [2.0, 2.1, 2.2, 2.3, 2.5], 0.25),  # free all the way
    ([1, 2, 4], [5.0, 6.0, 7.0], 0.05),  # never free beyond one token
    ([1, 2, 4, 8], [4.0, 5.0, 4.0, 4.5], 0.25),  # exactly at the tolerance still counts as free
    ([1, 2, 4, 8, 16], [4.0, 4.3, 4.6, 4.9, 5.2], 0.10),  # a slow creep: each step is small, the sum is not
]


def _random_sweep(rng):
    sizes = [2**i for i in range(rng.randint(3, 8))]
    ms = [round(rng.uniform(2, 9), 1)]
    for _ in sizes[1:]:
        ms.append(round(ms[-1] * rng.uniform(0.93, 1.3), 2))
    return sizes, ms, rng.choice([0.05, 0.1, 0.2, 0.25])


def check_free_budget(fn) -> str:
    """fn(tokens_per_pass, ms, tolerance) -> the largest tokens per pass up to which EVERY pass costs at most
    (1 + tolerance) x the cost of the first one (1 token); sizes ascending."""

    def cases(fn):
        for sizes, ms, tol in _SWEEPS + hidden(8, _random_sweep, 3):
            want = _expected.free_budget(sizes, ms, tol)
            got = fn(list(sizes), list(ms), tol)
            got = as_float(got, "the answer")
            case = f"sizes {sizes}, ms {ms}, tolerance {tol}"
            within = [n for n, t in zip(sizes, ms, strict=True) if t <= (1 + tol) * ms[0]]
            expect(
                got != max(within) or max(within) == want,
                f"{case}: {int(got)} is within the tolerance, but a pass before it was not: the budget ends at "
                "the first pass that costs too much",
            )
            expect(got == want, f"{case}: expected {want}, got {got:g}")

    return verdict("where verification stops being free", fn, cases)


# ------------------------------------------- exercise 5 (chapters 02 and 04-12): draft passes per round
FAMILY = ("chain", "tree", "medusa", "mtp-sequential", "eagle2", "dflash", "dflash2", "ngram")
PASS_OPTIONS = ("0", "1", "depth")


def check_draft_passes(answer=None) -> str:
    """answer: {method: "0" | "1" | "depth"}: how many drafter passes (of a network) each method needs per
    round to draft a chain or tree of the given depth."""
    name = "draft passes per round"
    if answer is None or answer is ...:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — fill in the dictionary")
        return NOT_ATTEMPTED

    def cases(answer):
        expect(isinstance(answer, dict), "answer with a dictionary {method: '0' | '1' | 'depth'}")
        got = {str(k).strip().lower(): str(v).strip().lower() for k, v in answer.items()}
        expect(set(got) == set(FAMILY), f"give exactly these methods: {', '.join(FAMILY)}")
        for m, v in got.items():
            expect(v in PASS_OPTIONS, f"{m}: choose one of {PASS_OPTIONS}")
        wrong = [m for m in FAMILY if not _expected.right(f"passes.{m}", got[m])]
        hints = {
            "medusa": "Medusa's heads are a small network run once per round, all together, on the hidden "
            "state the target's verify pass already computed: one drafter pass (not 0: the heads do run; not "
            "one per depth: no head waits for another), and no extra target pass (chapter 05; the "
            "benchmark's draft_passes_per_round for medusa:16 is about 1)",
            "mtp-sequential": "what does sequential module k read? (chapter 06)",
            "eagle2": "EAGLE-2 grows its tree level by level, each level reading the one above (chapter 08)",
            "dflash": "how many passes fill a DFlash block? (chapter 10)",
            "dflash2": "does DFlash 2's walk run a network, or walk precomputed scores? (chapter 11)",
            "ngram": "which network does prompt lookup run? (section 2)",
            "tree": "a tree drafter runs all nodes of one level in one pass, but a level needs its parents "
            "(chapter 04)",
            "chain": "a draft model drafts one token per pass (chapter 02)",
        }
        expect(not wrong, f"{len(wrong)} wrong, e.g. {wrong[0]}: {hints[wrong[0]]}" if wrong else "")

    return verdict(name, answer, cases)


# ------------------------------------------------ exercise 6 (chapters 03-11): which rules are lossless
# The options, in the order of their letters (`options_of` orders them by a hash); which ones are lossless,
# and why, are in the teacher's package (answers.json has their digests).
LOSSLESS_OPTIONS = options_of(
    "ch12-ex6",
    [
        "EAGLE-2's deterministic top-k children, verified by chapter 04's tree rule (q = None)",
        "prompt lookup's copied tokens, verified as deterministic picks (q = None)",
        "a chain kept while a fresh draw from the target equals it; that draw emitted at a miss",
        "DFlash rows, each drawn from its own q_t, with that q_t handed to verification",
        "top-p 0.9 applied to the drafter's q only, the target's p verified unfiltered",
        "Medusa's heads, verified with typical acceptance instead of chapter 03's rule",
        "a drafter sampling at T = 1 that hands verification its q reshaped to T = 0.7",
    ],
)


def check_lossless(answer=None) -> str:
    """answer: the set of letters of LOSSLESS_OPTIONS whose output has EXACTLY the distribution asked for
    (the target's, at the requested temperature, top-k and top-p), at any temperature."""
    name = "which are lossless"
    if answer is None or answer is ...:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — answer with a set of letters")
        return NOT_ATTEMPTED

    def cases(answer):
        try:
            got = {str(a).strip().lower().strip("()") for a in answer}
        except TypeError as e:
            raise Incorrect("answer with a set of letters, e.g. {'a', 'b'}") from e
        expect(got <= set(LOSSLESS_OPTIONS), f"use letters among {sorted(LOSSLESS_OPTIONS)}")
        wrong = [x for x in LOSSLESS_OPTIONS if not _expected.right(f"lossless.{x}", x in got)]
        extra, missing = [x for x in wrong if x in got], [x for x in wrong if x not in got]
        for letters, verdict_text in ((extra, "is not lossless"), (missing, "is lossless")):
            if letters:
                x = letters[0]
                expect(False, f"({x}) {verdict_text} — {_expected.hint(f'lossless.{x}', x in got)}")

    return verdict(name, answer, cases)
