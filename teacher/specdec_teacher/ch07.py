"""Chapter 07's reference solutions and planted mistakes (the teacher's side of course/specdec_course/checks/ch07.py)."""

from __future__ import annotations

import torch

from specdec_course.checks._core import letter_of
from specdec_course.checks.ch07 import UNCERTAINTY_OPTIONS


def eagle_pairs(ids):
    T = len(ids)
    return [ids[i + 1] for i in range(T - 2)], [ids[i + 2] for i in range(T - 2)]


# The right option and the near misses of exercise 2, each with the hint that names why it misses.
UNCERTAINTY_RIGHT = (
    "It gives the drafter the token that was actually sampled, so it predicts that branch's next feature."
)
UNCERTAINTY_WRONG = {
    "It trains on the probability-weighted mean of the possible next features, the best squared-error guess.": (
        "that weighted mean is the blur of section 1, a feature of no actual continuation: it is the "
        "problem a token-blind drafter runs into, not EAGLE's fix"
    ),
    "It gives the drafter the token its current feature was computed from, so it knows the last token read.": (
        "that is t_i, the token f_i READ, and f_i already encodes it. The open question is t_(i+1), the "
        "token f_i CHOSE: EAGLE feeds e(t_(i+1)), one step ahead"
    ),
    "It adds uniform noise to the input features, so the drafter learns to tolerate an uncertain input.": (
        "the noise prepares the drafter for its own imperfect guesses from depth 2 on; it does not tell the "
        "drafter which branch was taken, so the next feature stays a blur"
    ),
    "It divides the drafter's logits by a low temperature, so the sampled next token becomes near-certain.": (
        "a temperature changes how the drafter's distribution looks, not which token the target sampled; "
        "the next feature still depends on that token"
    ),
}


def blurred_feature(next_features, probs):
    return (torch.as_tensor(probs, dtype=torch.float32)[:, None] * torch.as_tensor(next_features)).sum(0)


def drafter_cache(n, accepted):
    return n, list(range(n, n + accepted + 1))


_RIGHT_LETTER = letter_of(UNCERTAINTY_OPTIONS, UNCERTAINTY_RIGHT)

# value questions: key -> (right answer, decimals of its tolerance, [(known wrong answer, its hint)])
VALUES = {"uncertainty": (UNCERTAINTY_RIGHT, None, list(UNCERTAINTY_WRONG.items()))}

REFERENCE = {
    "check_eagle_pairs": eagle_pairs,
    # values: check_feature_uncertainty(*answer)
    "check_feature_uncertainty": (_RIGHT_LETTER, blurred_feature),
    "check_drafter_cache": drafter_cache,
}


WRONG = {
    "check_eagle_pairs": [
        lambda ids: (ids[:-2], ids[1:-1]),  # pairs f_i with the token it read: no shift
        lambda ids: (ids[1:-1], ids[1:-1]),  # predicts the token it reads
        lambda ids: (ids[1:], ids[2:]),  # one position too many
        lambda ids: (ids[1:-1], ids[3:] + [0]),  # labels one too far
        lambda ids: (ids[2:], ids[2:]),  # reads two ahead
    ],
    "check_feature_uncertainty": [
        # every near-miss option, with the right function
        *[(letter_of(UNCERTAINTY_OPTIONS, text), blurred_feature) for text in UNCERTAINTY_WRONG],
        # the right option, with a wrong function
        (
            _RIGHT_LETTER,
            lambda f, p: torch.as_tensor(f)[torch.as_tensor(p).argmax()],
        ),  # the likeliest feature
        (_RIGHT_LETTER, lambda f, p: torch.as_tensor(f).mean(0)),  # unweighted mean
        (f" ({_RIGHT_LETTER.upper()}) ", lambda f, p: torch.as_tensor(f).sum(0)),  # forgets the probabilities
    ],
    "check_drafter_cache": [
        lambda n, a: (n + a, [n + a]),  # keeps the guessed-feature entries
        lambda n, a: (n, list(range(n, n + a))),  # forgets the root's feature
        lambda n, a: (n - 1, list(range(n - 1, n + a + 1))),  # one too few kept
        lambda n, a: (n, list(range(n + 1, n + a + 2))),  # fed one position late
        lambda n, a: (0, list(range(n + a + 1))),  # re-feeds everything (right answer, 10x the work)
    ],
}
