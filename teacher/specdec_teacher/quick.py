"""The quick-checks' answers (the teacher's side of course/specdec_course/checks/quick.py)."""

from __future__ import annotations

from specdec_course.checks._core import letter_of
from specdec_course.checks.quick import QUICK

# chapter -> the right option's text (multiple choice), or the right number with its known wrong numbers
ANSWERS = {
    1: "about as long: the pass waits on reading the weights, once per pass however many tokens",
    2: (
        3.3616,
        {
            2.3616: "the target always adds one token of its own (the bonus or the correction): count it",
            4.2: "the round stops at the first rejection: depth d is reached only if depths 1..d-1 were all accepted",
            3.2: "the round stops at the first rejection, and the target adds one token of its own",
        },
    ),
    3: (
        0.55,
        {
            0.45: "that is the total variation distance, the probability of a REJECTION",
            0.25: "the likely token is accepted only up to q's 1/4, but every other token up to its own 0.1",
            0.7: "that would be a draft that always proposes the target's favourite: this one proposes it a quarter of the time",
        },
    ),
    4: "more accepted tokens per pass, paid for by scoring more positions in the one pass",
    5: "the target's exact distribution when sampling (greedy outputs stay the same)",
    6: "the previous depth's hidden state and the embedding of the token it stands for",
    7: "the target's frozen head: the guess is trained to be the target's next feature",
    8: "the drafter is calibrated: what it gives probability c is accepted about c of the time",
    9: "a little acceptance: a rare token is never drafted, yet the target can still emit it",
    10: "the target has not yet run on the anchor, so at inference its feature does not exist",
    11: "q_t depends only on the context and rows 1..t-1, exactly what row t is judged after",
    12: "at 32 x 16 tokens the target's pass is compute-bound, so verifying a block costs time",
}


# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
VALUES = {
    f"q{n:02d}": (answer, None, []) if isinstance(answer, str) else (answer[0], 3, list(answer[1].items()))
    for n, answer in ANSWERS.items()
}

# what answers each question: a letter, or the number
REFERENCE = {
    n: letter_of(QUICK[n]["options"], answer) if isinstance(answer, str) else answer[0]
    for n, answer in ANSWERS.items()
}
