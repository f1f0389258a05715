"""Checkers for chapter 12 (recap and benchmark): the problem set, one exercise per thread of the course.
Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
`REFERENCE` holds the reference solutions and `WRONG` plausible mistakes; tests/test_checks_common.py and
tests/test_checks_ch12.py run every checker on both.
"""

from __future__ import annotations

import torch

from specdec_lib.checks._core import _ICON, NOT_ATTEMPTED, Incorrect, as_float, expect, verdict


def _close(a: float, b: float, tol: float = 1e-6) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(b))


# ------------------------------------------- exercise 1 (chapters 02 and 12): the round model
def _ref_round_model(tau, draft_ms, verify_ms, t1_ms):
    kc = draft_ms / t1_ms  # drafting, in units of one plain decoding step
    V = verify_ms / t1_ms - 1  # what verifying the tree costs beyond one plain step
    return kc, V, tau / (1 + kc + V)


_ROUNDS = [(2.3, 9.2, 10.5, 9.2), (5.8, 26.0, 17.0, 8.5), (1.0, 0.0, 9.0, 9.0), (3.9, 8.8, 13.6, 9.4)]


def check_round_model(fn) -> str:
    """fn(tau, draft_ms, verify_ms, t1_ms) -> (kc, V, predicted speedup), from one method's measured
    milliseconds per round and t1, the plain decoder's milliseconds per step."""

    def cases(fn):
        for tau, d, v, t1 in _ROUNDS:
            want = _ref_round_model(tau, d, v, t1)
            try:
                got = [float(x) for x in fn(tau, d, v, t1)]
            except (TypeError, ValueError) as e:
                raise Incorrect("return three numbers: (kc, V, predicted)") from e
            expect(len(got) == 3, "return three numbers: (kc, V, predicted)")
            case = f"tau {tau}, draft {d} ms, verify {v} ms, t1 {t1} ms"
            expect(_close(got[0], want[0]), f"{case}: kc is the drafting time in units of one plain step, t1")
            expect(
                not _close(got[1], v / t1) or _close(v / t1, want[1]),
                f"{case}: V is what verification costs BEYOND one plain step (a plain step is the 1 in 1 + kc + V)",
            )
            expect(_close(got[1], want[1]), f"{case}: V = verify / t1 - 1")
            expect(_close(got[2], want[2]), f"{case}: predicted = tau / (1 + kc + V)")

    return verdict("the round model", fn, cases)


# --------------------------- exercise 2 (chapters 03, 08 and 10): a sampled draft vs a deterministic pick
def _ref_two_acceptances(p, q):
    p, q = torch.as_tensor(p).double(), torch.as_tensor(q).double()
    return float(torch.minimum(p, q).sum()), float(p[q.argmax()])


def _prob_pairs():
    g = torch.Generator().manual_seed(12)
    pairs = [
        (torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.3, 0.3, 0.4])),  # the seeds' example
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
            want = _ref_two_acceptances(p, q)
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


# ---------------------------------------------------- exercise 3 (chapter 12): prompt lookup
def _ref_lookup(tokens, k, max_ngram):
    seq = [int(t) for t in tokens]
    for n in range(min(max_ngram, len(seq) - 1), 0, -1):
        starts = [i for i in range(len(seq) - n) if seq[i : i + n] == seq[-n:]]
        if starts:
            return seq[starts[-1] + n :][:k]
    return []


_LOOKUPS = [
    ([5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7], 3, 3),  # two earlier "5 6 7": the latest continues with 9
    ([1, 2, 3, 4, 2, 3], 2, 3),  # "4 2 3" never occurred: fall back to "2 3"
    ([1, 2, 3, 1, 9, 9, 3], 4, 2),  # no "9 3" before: fall back to "3", which was followed by "1 9 9 3"
    ([4, 4, 4], 5, 3),  # overlapping occurrences; the continuation runs into the text's end
    ([1, 2, 3], 2, 2),  # nothing repeats: no draft
    ([7, 8, 9, 7, 8, 9, 7, 8], 2, 1),  # max_ngram 1: the latest earlier "8"
]


def check_prompt_lookup(fn) -> str:
    """fn(tokens: list[int], k, max_ngram) -> list[int]: the tokens that followed the LATEST earlier
    occurrence of the text's last n tokens, n = max_ngram, then fewer until one occurred before; at most k
    of them; [] when no suffix occurred before. The text's own last n tokens do not count as an occurrence."""

    def cases(fn):
        for tokens, k, n in _LOOKUPS:
            want = _ref_lookup(tokens, k, n)
            try:
                got = [int(t) for t in fn(list(tokens), k, n)]
            except TypeError as e:
                raise Incorrect("return a list of token ids ([] when nothing matches)") from e
            case = f"tokens {tokens}, k = {k}, max_ngram = {n}"
            expect(len(got) <= k, f"{case}: at most k = {k} tokens")
            expect(got == want, f"{case}: expected {want}, got {got}")

    return verdict("prompt lookup", fn, cases)


# ----------------------------------- exercise 4 (chapters 01 and 12): where verification stops being free
def _ref_free_budget(tokens_per_pass, ms, tolerance):
    base, best = ms[0], tokens_per_pass[0]
    for n, t in zip(tokens_per_pass, ms, strict=True):
        if t > (1 + tolerance) * base:
            break
        best = n
    return best


_SWEEPS = [
    ([1, 2, 4, 8, 16, 32, 64], [7.0, 7.2, 7.5, 7.6, 8.9, 12.0, 20.0], 0.10),
    ([1, 2, 4, 8, 16, 32], [7.0, 7.9, 7.4, 7.6, 7.8, 9.0], 0.10),  # a noisy bump at 2 ends the free range
    ([1, 4, 16, 64, 256], [2.0, 2.1, 2.2, 2.3, 2.5], 0.25),  # free all the way
    ([1, 2, 4], [5.0, 6.0, 7.0], 0.05),  # never free beyond one token
    ([1, 2, 4, 8], [4.0, 5.0, 4.0, 4.5], 0.25),  # exactly at the tolerance still counts as free
    ([1, 2, 4, 8, 16], [4.0, 4.3, 4.6, 4.9, 5.2], 0.10),  # a slow creep: each step is small, the sum is not
]


def check_free_budget(fn) -> str:
    """fn(tokens_per_pass, ms, tolerance) -> the largest tokens per pass up to which EVERY pass costs at most
    (1 + tolerance) x the cost of the first one (1 token); sizes ascending."""

    def cases(fn):
        for sizes, ms, tol in _SWEEPS:
            want = _ref_free_budget(sizes, ms, tol)
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
_PASSES = {
    "chain": "depth",  # a draft model: one pass per drafted token
    "tree": "depth",  # one pass per level, all nodes of the level at once
    "medusa": "1",  # every head reads the same last hidden state: one pass of all heads
    "mtp-sequential": "depth",  # module k reads module k - 1's output
    "eagle2": "depth",  # one drafter pass per tree level
    "dflash": "1",  # the whole block in one pass
    "dflash2": "1",  # still one pass; the walk over precomputed scores runs no network
    "ngram": "0",  # a copy: no model at all
}


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
        wrong = [m for m in FAMILY if got[m] != _PASSES[m]]
        hints = {
            "medusa": "Medusa's heads all read one hidden state: are they run one after another? (chapter 05)",
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
LOSSLESS_OPTIONS = {
    "a": "EAGLE-2's tree of deterministic top-k children, verified with chapter 04's tree rule (q = None)",
    "b": "Medusa with typical acceptance",
    "c": "DFlash drawing each row from its own q_t and handing that q_t to verification",
    "d": "a drafter that samples at T = 1 but hands verification its q processed at the requested T = 0.7",
    "e": "prompt lookup's copied tokens, verified as deterministic picks (q = None)",
    "f": "a chain checked by drawing the target's own token at each position and accepting the draft only "
    "when the two are equal (emitting the target's token at the first difference)",
    "g": "top-p 0.9 asked for: applied to the drafter's q, while the target's p is verified unfiltered",
}
_LOSSLESS = {"a", "c", "e", "f"}


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
        hints = {
            "b": "typical acceptance accepts tokens by a threshold on the target's probability: the course's "
            "one opt-in lossy rule (chapter 05)",
            "d": "the rule needs the q the token was actually drawn from (chapter 11's mutant S3)",
            "g": "the sampling controls are applied to the TARGET before verification; what law does an "
            "unfiltered p produce? (chapter 01 and 03)",
            "a": "a point mass is a distribution too: accepted with p(x), removed from the residual (chapter 04)",
            "c": "each row is judged with the q it was drawn from, conditioned on the rows before (chapter 10)",
            "e": "copies are deterministic picks, like EAGLE-2's children",
            "f": "what is emitted at each position is always a draw from the target itself: the draft only "
            "decides how many such draws one pass can confirm",
        }
        extra, missing = sorted(got - _LOSSLESS), sorted(_LOSSLESS - got)
        expect(not extra, f"({extra[0]}) is not lossless — {hints[extra[0]]}" if extra else "")
        expect(not missing, f"({missing[0]}) is lossless — {hints[missing[0]]}" if missing else "")

    return verdict(name, answer, cases)


REFERENCE = {
    "check_round_model": _ref_round_model,
    "check_two_acceptances": _ref_two_acceptances,
    "check_prompt_lookup": _ref_lookup,
    "check_free_budget": _ref_free_budget,
    "check_draft_passes": dict(_PASSES),
    "check_lossless": set(_LOSSLESS),
}


def _lookup_variant(earliest=False, no_fallback=False, self_match=False, ignore_k=False):
    def fn(tokens, k, max_ngram):
        seq = [int(t) for t in tokens]
        sizes = [max_ngram] if no_fallback else range(min(max_ngram, len(seq) - 1), 0, -1)
        for n in sizes:
            last = len(seq) - n + (1 if self_match else 0)
            starts = [i for i in range(max(0, last)) if seq[i : i + n] == seq[-n:]]
            if starts:
                s = starts[0] if earliest else starts[-1]
                out = seq[s + n :]
                return out if ignore_k else out[:k]
        return []

    return fn


WRONG = {
    "check_round_model": [
        lambda tau, d, v, t1: (d / t1, v / t1, tau / (1 + d / t1 + v / t1)),  # V without the -1
        lambda tau, d, v, t1: (d / v, v / t1 - 1, tau / (1 + d / v + v / t1 - 1)),  # kc in units of verify
        lambda tau, d, v, t1: (d / t1, v / t1 - 1, tau / (d / t1 + v / t1 - 1)),  # forgot the plain step
    ],
    "check_two_acceptances": [
        lambda p, q: (float((p * q).sum()), float(p[q.argmax()])),
        lambda p, q: (float(torch.minimum(p, q).sum()), float(q.max())),
        lambda p, q: (float(torch.minimum(p, q).sum()), float(min(1.0, p[q.argmax()] / q.max()))),
    ],
    "check_prompt_lookup": [
        _lookup_variant(earliest=True),
        _lookup_variant(no_fallback=True),
        _lookup_variant(self_match=True),
        _lookup_variant(ignore_k=True),
    ],
    "check_free_budget": [
        lambda sizes, ms, tol: max(n for n, t in zip(sizes, ms, strict=True) if t <= (1 + tol) * ms[0]),
        lambda sizes, ms, tol: next(  # compares each pass with the one before it
            (sizes[i - 1] for i in range(1, len(ms)) if ms[i] > (1 + tol) * ms[i - 1]), sizes[-1]
        ),
        lambda sizes, ms, tol: next(  # strict: a pass exactly at the tolerance is already "too costly"
            (sizes[i - 1] for i in range(1, len(ms)) if ms[i] >= (1 + tol) * ms[0]), sizes[-1]
        ),
    ],
    "check_draft_passes": [
        {**_PASSES, "medusa": "depth"},
        {**_PASSES, "dflash": "depth", "dflash2": "depth"},
        {**_PASSES, "dflash2": "depth"},
        {**_PASSES, "ngram": "1"},
        {**_PASSES, "eagle2": "1"},
        {m: v for m, v in _PASSES.items() if m != "tree"},
    ],
    "check_lossless": [
        _LOSSLESS | {"b"},
        _LOSSLESS | {"g"},
        _LOSSLESS | {"d"},
        _LOSSLESS - {"f"},
        _LOSSLESS - {"a"},
        {"c"},
    ],
}
