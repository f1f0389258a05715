"""The contract every exercise checker keeps, for every chapter's `specdec_lib/checks/chNN.py`:
it returns (and prints) "correct" for the reference solution, "incorrect" with a hint for each plausible
wrong solution, "not attempted" for an untouched stub or None, and never raises -- a crash or junk in
the learner's function is "incorrect". Checkers of function exercises are tested here; checkers that
take values (numbers answering a question) have tests in their chapter's file."""

import importlib
import pkgutil

import pytest
import torch

import specdec_lib.checks

MODULES = sorted(m.name for m in pkgutil.iter_modules(specdec_lib.checks.__path__) if m.name.startswith("ch"))


def checkers(module):
    return sorted(
        name for name in vars(module) if name.startswith("check_") and callable(getattr(module, name))
    )


def function_cases():
    for mod in MODULES:
        module = importlib.import_module(f"specdec_lib.checks.{mod}")
        for name in checkers(module):
            if callable(module.REFERENCE[name]):
                yield pytest.param(module, name, id=f"{mod}.{name}")


def stub(*args, **kwargs):
    # your code here
    raise NotImplementedError


@pytest.mark.parametrize("mod", MODULES)
def test_every_checker_has_a_reference_and_wrong_answers(mod):
    module = importlib.import_module(f"specdec_lib.checks.{mod}")
    names = checkers(module)
    assert len(names) >= 3, "a chapter has at least three self-check exercises"
    assert set(module.REFERENCE) == set(names) == set(module.WRONG)
    assert all(module.WRONG[name] for name in names)


@pytest.mark.parametrize(("module", "name"), list(function_cases()))
def test_reference_is_correct(module, name, capsys):
    assert getattr(module, name)(module.REFERENCE[name]) == "correct"
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("module", "name"), list(function_cases()))
def test_wrong_answers_are_incorrect_with_a_hint(module, name, capsys):
    for wrong in module.WRONG[name]:
        assert getattr(module, name)(wrong) == "incorrect", wrong
        out = capsys.readouterr().out
        assert "incorrect — " in out and len(out.split("incorrect — ", 1)[1].strip()) > 10, out


def empty_stub(*args, **kwargs):
    """nbgrader's release stub (its code_stub is `...`, see specdec_lib.student.NBGRADER_CONFIG)."""
    ...  # YOUR CODE HERE


@pytest.mark.parametrize(("module", "name"), list(function_cases()))
def test_stub_or_none_is_not_attempted(module, name):
    assert getattr(module, name)(stub) == "not attempted"
    assert getattr(module, name)(empty_stub) == "not attempted"
    assert getattr(module, name)(None) == "not attempted"


@pytest.mark.parametrize(("module", "name"), list(function_cases()))
def test_a_crash_or_junk_is_incorrect_not_raised(module, name):
    def crashes(*args, **kwargs):
        raise ValueError("boom")

    assert getattr(module, name)(crashes) == "incorrect"
    assert getattr(module, name)(lambda *args, **kwargs: "junk") == "incorrect"


@pytest.mark.parametrize(("module", "name"), list(function_cases()))
def test_checking_leaves_the_global_rng_alone(module, name):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    getattr(module, name)(module.REFERENCE[name])
    assert torch.equal(torch.rand(3), expected)
