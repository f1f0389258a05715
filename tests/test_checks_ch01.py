"""Chapter 01's exercise checkers: right for the reference, wrong for plausible mistakes, never raising."""

import inspect

import pytest
import torch

from specdec_lib.checks import ch01

CHECKERS = sorted(
    name for name, obj in inspect.getmembers(ch01, inspect.isfunction) if name.startswith("check_")
)
WRONG_CASES = [(name, i) for name in CHECKERS for i in range(len(ch01.WRONG.get(name, [])))]


def test_every_checker_has_a_reference_and_wrong_answers():
    assert CHECKERS, "no check_* functions found"
    assert set(ch01.REFERENCE) == set(CHECKERS)
    assert set(ch01.WRONG) == set(CHECKERS)
    assert all(ch01.WRONG[name] for name in CHECKERS)


@pytest.mark.parametrize("name", CHECKERS)
def test_reference_is_correct(name, capsys):
    assert getattr(ch01, name)(ch01.REFERENCE[name]) == "correct"
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("name,i", WRONG_CASES, ids=[f"{n}-{i}" for n, i in WRONG_CASES])
def test_wrong_answer_is_incorrect_with_a_hint(name, i, capsys):
    assert getattr(ch01, name)(ch01.WRONG[name][i]) == "incorrect"
    out = capsys.readouterr().out
    assert "incorrect — " in out and len(out.split("incorrect — ", 1)[1].strip()) > 20, out


@pytest.mark.parametrize("name", CHECKERS)
def test_stub_is_not_attempted(name):
    def stub(*args, **kwargs):
        # your code here
        raise NotImplementedError

    assert getattr(ch01, name)(stub) == "not attempted"
    assert getattr(ch01, name)(None) == "not attempted"


@pytest.mark.parametrize("name", CHECKERS)
def test_a_crash_or_junk_is_incorrect_not_raised(name):
    def crashes(*args, **kwargs):
        raise ValueError("boom")

    assert getattr(ch01, name)(crashes) == "incorrect"
    assert getattr(ch01, name)(lambda *args, **kwargs: "junk") == "incorrect"
    assert getattr(ch01, name)(lambda *args, **kwargs: None) == "incorrect"


@pytest.mark.parametrize("name", CHECKERS)
def test_checking_leaves_the_global_rng_alone(name):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    getattr(ch01, name)(ch01.REFERENCE[name])
    assert torch.equal(torch.rand(3), expected)


def test_in_place_modification_is_caught():
    def top_k_in_place(probs, k):
        out = ch01.top_k_filter(probs, k)
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
            ch01.temperature_softmax(logits, t),
            process_logits(logits, SamplingParams(temperature=t)),
            atol=1e-6,
        )
    probs = torch.softmax(logits, -1)
    assert torch.allclose(
        ch01.top_k_filter(probs, 7),
        process_logits(logits, SamplingParams(temperature=1.0, top_k=7)),
        atol=1e-6,
    )
    assert torch.allclose(
        ch01.top_p_filter(probs, 0.8),
        process_logits(logits, SamplingParams(temperature=1.0, top_p=0.8)),
        atol=1e-6,
    )
