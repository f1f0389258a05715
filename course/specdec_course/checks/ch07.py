"""Checkers for chapter 07 (EAGLE). Hand-written; the notebook imports them.

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
    as_int_list,
    as_int_list_pair,
    expect,
    expect_choice,
    hidden,
    options_of,
    seed,
    verdict,
)

_expected = Answers("ch07")


# ------------------------------------------------------------- exercise 1: EAGLE's training pairs
def _windows() -> list[list[int]]:
    g = torch.Generator().manual_seed(seed(0))
    out = [list(range(10, 10 + T)) for T in (3, 4, 7)]
    out += [torch.randperm(60, generator=g)[:T].tolist() for T in (5, 9, 13)]
    return out


def check_eagle_pairs(fn) -> str:
    """fn(ids) -> (ahead, labels) for positions i = 0 .. T - 3 of a window: ahead[i] is the token whose
    embedding joins the feature f_i in the drafter's input, labels[i] the token that lm_head(f^_{i+1}),
    the drafter's output there, should pick (its soft label is the target's distribution at i + 1)."""

    def cases(fn):
        for ids in _windows():
            want_ahead, want_labels = _expected.eagle_pairs(ids)
            answer = fn(list(ids))
            ahead, labels = as_int_list_pair(
                answer,
                ("the tokens read", "the labels"),
                "return a pair: (tokens read with the features, labels)",
            )
            context = f"ids {ids}"
            expect(
                len(ahead) == len(labels) == len(ids) - 2,
                f"{context}: one entry per position i = 0 .. T - 3 ({len(ids) - 2}); you returned "
                f"{len(ahead)} and {len(labels)} (f^_{{i+1}} needs the target's f_{{i+1}} AND its next token)",
            )
            expect(
                ahead != ids[:-2],
                f"{context}: f_i is paired with t_(i+1), the token it CHOSE, not t_i (the token it read): "
                "that one-step shift is what resolves the feature's uncertainty",
            )
            expect(ahead == want_ahead, f"{context}: expected the tokens read {want_ahead}, got {ahead}")
            expect(
                labels != ahead,
                f"{context}: the drafter must not be asked to predict the token it reads",
            )
            expect(labels == want_labels, f"{context}: expected labels {want_labels}, got {labels}")

    return verdict("EAGLE training pairs", fn, cases)


# ------------------------------------ exercise 2: how EAGLE resolves the uncertainty, and the blur it fixes
# The options are stored by their text and ordered by a hash (`options_of`), listed here in that order; which
# one is right, and the hint of each near miss, are in the teacher's package (answers.json has their digests).
UNCERTAINTY_OPTIONS = options_of(
    "ch07-ex2",
    [
        "It gives the drafter the token that was actually sampled, so it predicts that branch's next feature.",
        "It divides the drafter's logits by a low temperature, so the sampled next token becomes near-certain.",
        "It gives the drafter the token its current feature was computed from, so it knows the last token read.",
        "It trains on the probability-weighted mean of the possible next features, the best squared-error guess.",
        "It adds uniform noise to the input features, so the drafter learns to tolerate an uncertain input.",
    ],
)


def _feature_cases():
    g = torch.Generator().manual_seed(seed(1))
    out = [(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0.5, 0.5]))]
    for m, d in ((3, 4), (2, 8), (4, 3)):
        p = torch.rand(m, generator=g) + 0.1
        out.append((torch.randn(m, d, generator=g), p / p.sum()))
    return out


def check_feature_uncertainty(answer=..., fn=None) -> str:
    """answer: the letter of the option in UNCERTAINTY_OPTIONS that says how EAGLE handles the
    uncertainty of the next feature. fn(next_features [m, d], probs [m]) -> [d]: the guess that
    minimises the expected squared error when the drafter does NOT know which of the m tokens was
    sampled (token j, with probability probs[j], leads to feature next_features[j])."""
    name = "feature uncertainty"
    if answer is ... or fn is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — choose a letter and write the function")
        return NOT_ATTEMPTED

    def cases(fn):
        expect_choice(
            answer,
            UNCERTAINTY_OPTIONS,
            _expected,
            "uncertainty",
            "what does the drafter read besides the feature? (see section 1)",
        )
        for feats, probs in _feature_cases():
            want = _expected.blurred_feature(feats, probs)
            got = fn(feats.clone(), probs.clone())
            try:
                got = torch.as_tensor(got, dtype=torch.float32).reshape(-1)
            except (TypeError, ValueError, RuntimeError) as e:
                raise Incorrect("return a vector of d numbers") from e
            expect(
                got.numel() == want.numel(), f"return one vector of {want.numel()} numbers, got {got.numel()}"
            )
            best = feats[probs.argmax()]
            expect(
                not torch.allclose(got, best, atol=1e-4) or torch.allclose(best, want, atol=1e-4),
                "the most likely token's feature is right only when that token is sampled; averaged over "
                "the draws, the squared error is smallest at the probability-weighted mean",
            )
            expect(
                torch.allclose(got, want, atol=1e-4),
                f"for probs {[round(float(p), 3) for p in probs]} expected {want.tolist()}, got {got.tolist()}",
            )

    return verdict(name, fn, cases)


# ------------------------------------------------------- exercise 3: the drafter's cache after a round
def check_drafter_cache(fn) -> str:
    """fn(n, accepted) -> (kept, fed): the root (pending token) of a round sat at position n, and
    `accepted` drafted nodes were accepted. kept: how many positions the drafter's cache keeps after
    the round; fed: the positions the next round's catch-up pass feeds with the target's true features."""

    def cases(fn):
        grid = [(n, accepted) for n in (1, 2, 5, 17) for accepted in (0, 1, 3, 5)]
        for n, accepted in grid + hidden(10, lambda r: (r.randint(1, 60), r.randint(0, 8)), 1):
            want_kept, want_fed = _expected.drafter_cache(n, accepted)
            answer = fn(n, accepted)
            try:
                kept, fed = answer
            except (TypeError, ValueError) as e:
                raise Incorrect("return a pair: (positions kept, positions fed next)") from e
            kept, fed = as_int_list(kept, "kept")[0] if kept is not None else -1, as_int_list(fed, "fed")
            context = f"n = {n}, accepted = {accepted}"
            expect(
                accepted == 0 or kept != n + accepted,
                f"{context}: keeping the accepted nodes keeps keys computed from the drafter's own GUESSED "
                "features; EAGLE drops them and re-feeds the path with the target's true features",
            )
            expect(kept == want_kept, f"{context}: expected {want_kept} positions kept, got {kept}")
            expect(
                len(fed) == accepted + 1,
                f"{context}: the target verified the root and {accepted} accepted node(s): that is "
                f"{accepted + 1} new features, each fed once; you feed {len(fed)}",
            )
            expect(fed == want_fed, f"{context}: expected positions {want_fed}, got {fed}")

    return verdict("drafter cache after a round", fn, cases)
