"""Chapter 09's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch09.py)."""

from __future__ import annotations

from specdec_course.checks._core import letter_of
from specdec_course.checks.ch09 import TF_OPTIONS

# exercise 1: the right option, and each near miss with the hint that names why it misses
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
# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
_TOO_LATE = (
    "that depth is too late: the very first drafted step that reads the drafter's own output instead of a "
    "target feature is the one right after depth 1"
)
VALUES = {
    "tf.depth": (
        2,
        None,
        [
            (
                1,
                "at depth 1 both drafters read TRUE fused features of the context, exactly what teacher forcing "
                "trained on: that step is the same for both. Which is the first depth that reads something else?",
            ),
            *((d, _TOO_LATE) for d in range(3, 9)),
        ],
    ),
    "tf.choice": (TF_RIGHT, None, list(TF_WRONG.items())),
}


def visible_keys(s, j):
    # step 0: the true context, causal (positions 0 .. j); steps 1 .. s: its own chain, at the same j
    return [(0, i) for i in range(j + 1)] + [(t, j) for t in range(1, s + 1)]


def draft_id(d2t, v):
    for i, offset in enumerate(d2t):
        if i + offset == v:
            return i
    return None


REFERENCE = {
    "check_teacher_forcing": (2, letter_of(TF_OPTIONS, TF_RIGHT)),  # values: check_teacher_forcing(*answer)
    "check_visible_keys": visible_keys,
    "check_draft_id": draft_id,
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
        lambda d2t, v: draft_id(d2t, v) if draft_id(d2t, v) is not None else v,  # v itself
        lambda d2t, v: next((i for i, o in enumerate(d2t) if o == v), None),  # offsets taken for ids
        lambda d2t, v: next((i for i, o in enumerate(d2t) if i - o == v), None),  # the sign flipped
    ],
}
