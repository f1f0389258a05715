"""Chapter 01's checkers beyond the shared contract in tests/test_checks_common.py: specific answers
and edge cases."""

import torch

from specdec_course.checks import ch01
from specdec_teacher import ch01 as teacher


def test_in_place_modification_is_caught():
    def top_k_in_place(probs, k):
        out = teacher.top_k_filter(probs, k)
        probs.copy_(out)
        return out

    assert ch01.check_top_k_filter(top_k_in_place) == "incorrect"


def test_references_agree_with_the_library():
    """The exercise answers are the pieces of `process_logits` (chapter 01's export)."""
    from specdec_lib.autoregressive import SamplingParams, process_logits

    g = torch.Generator().manual_seed(5)
    logits = torch.randn(64, generator=g) * 3
    for t in (0.0, 0.5, 1.0, 1.7):
        assert torch.allclose(
            teacher.temperature_softmax(logits, t),
            process_logits(logits, SamplingParams(temperature=t)),
            atol=1e-6,
        )
    probs = torch.softmax(logits, -1)
    assert torch.allclose(
        teacher.top_k_filter(probs, 7),
        process_logits(logits, SamplingParams(temperature=1.0, top_k=7)),
        atol=1e-6,
    )
    assert torch.allclose(
        teacher.top_p_filter(probs, 0.8),
        process_logits(logits, SamplingParams(temperature=1.0, top_p=0.8)),
        atol=1e-6,
    )
