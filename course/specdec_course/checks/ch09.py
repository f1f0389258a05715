"""Checkers for chapter 09 (EAGLE-3). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import torch

from specdec_course.checks._core import (
    NOT_ATTEMPTED,
    Answers,
    Incorrect,
    expect,
    expect_choice,
    hidden,
    options_of,
    seed,
    unanswered,
    verdict,
)

_expected = Answers("ch09")

# ----------------------------------------- exercise 1: predict the teacher-forced drafter's collapse
# The options, in the order of their letters (`options_of` orders them by a hash); which one is right, and
# the hint of each near miss, are in the teacher's package (answers.json has their digests).
TF_OPTIONS = options_of(
    "ch09-teacher-forcing",
    [
        "from depth 2 on it reads its own previous output in place of a target feature, an input it never trained on",
        "from depth 2 on more of the target's tokens fall outside its 2048-id draft vocabulary, so it cannot guess them",
        "from depth 2 on its queries sit at RoPE positions past any position it met in training, so attention drifts",
        "from depth 2 on the 0.8^s loss weight had shrunk, so its training put too little weight on those steps",
    ],
)


def check_teacher_forcing(depth=..., choice=...) -> str:
    """depth: the first depth at which the teacher-forced drafter's first-guess acceptance falls far below
    EAGLE-3's (both trained on the same 1.1M tokens); choice: the letter of the option in TF_OPTIONS that
    says why."""
    name = "the teacher-forced drafter's collapse"
    if unanswered(name, (depth, choice), "give a depth and a letter"):
        return NOT_ATTEMPTED

    def cases(_):
        try:
            d = int(depth)
        except (TypeError, ValueError) as e:
            raise Incorrect("the depth is a whole number (1 = the first drafted token)") from e
        expect(d == depth, "the depth is a whole number (1 = the first drafted token)")
        expect(
            _expected.right("tf.depth", d),
            _expected.hint("tf.depth", d)
            or f"depth {d} is not it: which is the first drafted step whose input is not a target feature?",
        )
        expect_choice(
            choice,
            TF_OPTIONS,
            _expected,
            "tf.choice",
            "what does it read there that it never read in training?",
        )

    return verdict(name, True, cases)


# ------------------------------------------------- exercise 2: which keys a training-time-test query sees
def _pairs(answer) -> list[tuple[int, int]]:
    hint = "return a list of (step, position) pairs, e.g. [(0, 0), (0, 1), (1, 1)]"
    if isinstance(answer, (str, bytes)) or answer is None:
        raise Incorrect(hint)
    try:
        out = []
        for pair in answer:
            t, i = pair
            out.append((int(t), int(i)))
    except (TypeError, ValueError, RuntimeError) as e:
        raise Incorrect(hint) from e
    return out


def check_visible_keys(fn) -> str:
    """fn(s, j) -> the keys the step-s query at window position j may attend to during training-time test,
    as (step, position) pairs: (t, i) is the key step t computed at window position i (the key in column
    t * T + i of the chapter's figure), t = 0 being the true-feature pass."""

    def cases(fn):
        fixed = [(2, 3), (0, 0), (0, 4), (1, 0), (1, 5), (3, 2), (5, 6), (4, 1)]
        for s, j in fixed + hidden(8, lambda r: (r.randint(0, 7), r.randint(0, 12)), 1):
            want = set(_expected.visible_keys(s, j))
            got_list = _pairs(fn(s, j))
            got = set(got_list)
            context = f"step {s}, position {j}"
            expect(len(got_list) == len(got), f"{context}: name each key once")
            expect(
                not any(t > s for t, _ in got),
                f"{context}: a step-{s} query cannot see keys of later steps: they are not computed yet",
            )
            expect(
                not any(t >= 1 and i == j + t for t, i in got - want),
                f"{context}: name a key by its window position j (column t * T + j), not by its RoPE "
                "position j + t",
            )
            expect(
                not any(t == 0 and i > j for t, i in got),
                f"{context}: the step-0 keys after position {j} are true features of the very tokens this query "
                f"is guessing (its context ends at t_{{{j + 1}}}): a leak. That it sits at RoPE position "
                f"{j + s} does not give it a longer true context",
            )
            expect(
                not any(t >= 1 and i != j for t, i in got),
                f"{context}: a drafted key at another position i != {j} belongs to a DIFFERENT context's "
                "chain (the drafts after t_0 .. t_(i+1)); inference never has it in the drafter's cache",
            )
            expect(
                all((0, i) in got for i in range(j + 1)),
                f"{context}: the query sees the whole true context, step-0 keys at positions 0 .. {j}, "
                f"position {j} included",
            )
            expect(
                s == 0 or (s, j) in got,
                f"{context}: a query attends to its own key too: the diagonal runs over steps 1 .. {s}, "
                f"step {s} included",
            )
            expect(got == want, f"{context}: expected {sorted(want)}, got {sorted(got)}")

    return verdict("what a training-time-test query sees", fn, cases)


# ---------------------------------------------------------------- exercise 3: the inverse offset map
def _d2t_cases():
    g = torch.Generator().manual_seed(seed(9))
    out = [([0, 1, 1, 3], 9), ([2, 2, 4], 8), ([0, 0, 0], 3), ([5], 6)]
    for V, N in ((12, 5), (30, 9), (40, 37)):
        used = sorted(torch.randperm(V, generator=g)[:N].tolist())
        out.append(([u - i for i, u in enumerate(used)], V))
    return out


def check_draft_id(fn) -> str:
    """fn(d2t, v) -> the draft id i whose target id is v (i + d2t[i] == v), or None when target id v has no
    draft id. d2t: the offsets of a reduced draft vocabulary (one per draft id), as the chapter builds them."""

    def cases(fn):
        for d2t, V in _d2t_cases():
            context = f"d2t {d2t}"
            inside = [i + o for i, o in enumerate(d2t)]
            for v in inside + [v for v in range(V) if v not in inside]:  # the draft vocabulary first
                want = _expected.draft_id(d2t, v)
                try:
                    got = fn(list(d2t), v)
                except IndexError as e:
                    raise Incorrect(
                        f"{context}, target id {v}: d2t has one entry per DRAFT id ({len(d2t)} of them), "
                        "so it is indexed by draft ids, never by a target id"
                    ) from e
                if want is None:
                    expect(
                        got is None,
                        f"{context}: target id {v} is outside the draft vocabulary (no i has i + d2t[i] == {v}), "
                        f"so it has no draft id: return None, got {got!r}",
                    )
                    continue
                expect(
                    got is not None,
                    f"{context}: target id {v} has a draft id (some i has i + d2t[i] == {v}), got None",
                )
                try:
                    got = int(got)
                except (TypeError, ValueError) as e:
                    raise Incorrect(f"{context}: return a draft id (an int) or None") from e
                if 0 <= got < len(d2t) and got + d2t[got] == v:
                    continue
                expect(
                    v >= len(d2t) or got != d2t[v],
                    f"{context}, target id {v}: d2t[{v}] is the OFFSET of draft id {v}, not the draft id of "
                    f"target id {v}: d2t is indexed by draft ids",
                )
                expect(
                    v >= len(d2t) or got != v - d2t[v],
                    f"{context}, target id {v}: v - d2t[v] subtracts the offset of draft id {v}; the offset to "
                    "subtract is that of the draft id you are looking for, so search for the i with "
                    f"i + d2t[i] == {v}",
                )
                expect(
                    False,
                    f"{context}, target id {v}: draft id {got} maps to target id "
                    f"{got + d2t[got] if 0 <= got < len(d2t) else '(none: out of range)'}; the map is "
                    f"target = i + d2t[i], so look for the draft id i with i + d2t[i] == {v}",
                )

    return verdict("the inverse of the offset map", fn, cases)
