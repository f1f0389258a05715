"""Checkers for chapter 09 (EAGLE-3). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
`REFERENCE` holds the reference answers and `WRONG` plausible mistakes; tests/test_checks_common.py runs
the function checkers on both, tests/test_checks_ch09.py the value checker.
"""

from __future__ import annotations

import torch

from specdec_lib.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    Incorrect,
    expect,
    expect_choice,
    letter_of,
    lettered,
    verdict,
)

# ----------------------------------------- exercise 1: predict the teacher-forced drafter's collapse
TF_RIGHT = "from depth 2 on it reads its own previous output in place of a target feature, an input it never trained on"
TF_WRONG = {
    "from depth 2 on more of the target's tokens fall outside its 2048-id draft vocabulary, so it cannot guess them": (
        "both drafters have the same 2048-id draft vocabulary, so that cannot separate them; what does the "
        "teacher-forced one read at depth 2 that it never read in training?"
    ),
    "from depth 2 on its queries sit at RoPE positions past any position it met in training, so attention drifts": (
        "it was trained at every position of 256-token windows, so a position one step further on is not "
        "new; what is new at depth 2 is the INPUT it reads there"
    ),
    "from depth 2 on the 0.8^s loss weight had shrunk, so its training put too little weight on those steps": (
        "teacher forcing is steps = 1: its loss has step 0 only, there is no shrunken weight, no step 1 at all. "
        "So what does it read at depth 2, and where would it have seen that in training?"
    ),
}
TF_OPTIONS = lettered("ch09-teacher-forcing", TF_RIGHT, list(TF_WRONG))


def check_teacher_forcing(depth=..., choice=...) -> str:
    """depth: the first depth at which the teacher-forced drafter's first-guess acceptance falls far below
    EAGLE-3's (both trained on the same 1.1M tokens); choice: the letter of the option in TF_OPTIONS that
    says why."""
    name = "the teacher-forced drafter's collapse"
    if any(a is ... or a is None for a in (depth, choice)):
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — give a depth and a letter")
        return NOT_ATTEMPTED

    def cases(_):
        try:
            d = int(depth)
        except (TypeError, ValueError) as e:
            raise Incorrect("the depth is a whole number (1 = the first drafted token)") from e
        expect(d == depth, "the depth is a whole number (1 = the first drafted token)")
        expect(
            d != 1,
            "at depth 1 both drafters read TRUE fused features of the context, exactly what teacher forcing "
            "trained on: that step is the same for both. Which is the first depth that reads something else?",
        )
        expect(
            d == 2,
            f"depth {d} is too late: the very first drafted step that reads the drafter's own output instead "
            "of a target feature is the one right after depth 1",
        )
        hints = {letter: TF_WRONG.get(text, "") for letter, text in TF_OPTIONS.items()}
        letter = str(choice).strip().lower().strip("()")
        expect_choice(choice, TF_OPTIONS, TF_RIGHT, hints.get(letter, ""))

    return verdict(name, True, cases)


# ------------------------------------------------- exercise 2: which keys a training-time-test query sees
def _ref_visible_keys(s, j):
    # step 0: the true context, causal (positions 0 .. j); steps 1 .. s: its own chain, at the same j
    return [(0, i) for i in range(j + 1)] + [(t, j) for t in range(1, s + 1)]


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
        for s, j in ((2, 3), (0, 0), (0, 4), (1, 0), (1, 5), (3, 2), (5, 6), (4, 1)):
            want = set(_ref_visible_keys(s, j))
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
def _ref_draft_id(d2t, v):
    for i, offset in enumerate(d2t):
        if i + offset == v:
            return i
    return None


def _d2t_cases():
    g = torch.Generator().manual_seed(9)
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
                want = _ref_draft_id(d2t, v)
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


REFERENCE = {
    "check_teacher_forcing": (2, letter_of(TF_OPTIONS, TF_RIGHT)),  # values: check_teacher_forcing(*answer)
    "check_visible_keys": _ref_visible_keys,
    "check_draft_id": _ref_draft_id,
}

WRONG = {
    "check_teacher_forcing": [
        (1, letter_of(TF_OPTIONS, TF_RIGHT)),
        (3, letter_of(TF_OPTIONS, TF_RIGHT)),
        *[(2, letter_of(TF_OPTIONS, text)) for text in TF_WRONG],
        (2, "z"),
    ],
    "check_visible_keys": [
        # every step causal over its own keys: the leak of other positions' chains
        lambda s, j: [(t, i) for t in range(s + 1) for i in range(j + 1)],
        # the true context up to the query's RoPE position j + s
        lambda s, j: [(0, i) for i in range(j + s + 1)] + [(t, j) for t in range(1, s + 1)],
        # its own key forgotten
        lambda s, j: [(0, i) for i in range(j + 1)] + [(t, j) for t in range(1, s)],
        # the chain named by RoPE position
        lambda s, j: [(0, i) for i in range(j + 1)] + [(t, j + t) for t in range(1, s + 1)],
        # the context strictly before j
        lambda s, j: [(0, i) for i in range(j)] + [(t, j) for t in range(1, s + 1)],
        # only the chain, no context
        lambda s, j: [(t, j) for t in range(s + 1)],
    ],
    "check_draft_id": [
        lambda d2t, v: d2t[v] if v < len(d2t) else None,  # reads d2t as a target -> draft table
        lambda d2t, v: v - d2t[v],  # indexes the offsets by the target id
        lambda d2t, v: _ref_draft_id(d2t, v) if _ref_draft_id(d2t, v) is not None else v,  # v itself
        lambda d2t, v: next((i for i, o in enumerate(d2t) if o == v), None),  # offsets taken for ids
        lambda d2t, v: next((i for i, o in enumerate(d2t) if i - o == v), None),  # the sign flipped
    ],
}
