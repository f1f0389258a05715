"""The contract every exercise checker keeps, for every chapter's `course/specdec_course/checks/chNN.py`:
it returns (and prints) "correct" for the reference solution, "incorrect" with a hint for each plausible
wrong solution, "not attempted" for an untouched stub or None, and never raises -- a crash or junk in
the learner's function is "incorrect". The references and wrong solutions come from the teacher's package
(`specdec_teacher.chNN`), and so do the hidden cases: on them too the reference is correct and every wrong
solution incorrect. Checkers of function exercises are tested here; checkers that take values (numbers
answering a question) have more tests in their chapter's file."""

import importlib
import pkgutil

import pytest
import torch

import specdec_course.checks
import specdec_teacher

MODULES = sorted(
    m.name for m in pkgutil.iter_modules(specdec_course.checks.__path__) if m.name.startswith("ch")
)


def checkers(module):
    return sorted(
        name for name in vars(module) if name.startswith("check_") and callable(getattr(module, name))
    )


def function_cases():
    for mod in MODULES:
        module = importlib.import_module(f"specdec_course.checks.{mod}")
        teacher = specdec_teacher.module(mod)
        for name in checkers(module):
            if callable(teacher.REFERENCE[name]):
                yield pytest.param(module, teacher, name, id=f"{mod}.{name}")


def all_cases():
    for mod in MODULES:
        for name in specdec_teacher.module(mod).REFERENCE:
            yield pytest.param(mod, name, id=f"{mod}.{name}")


def stub(*args, **kwargs):
    # your code here
    raise NotImplementedError


@pytest.mark.parametrize("mod", MODULES)
def test_every_checker_has_a_reference_and_wrong_answers(mod):
    module = importlib.import_module(f"specdec_course.checks.{mod}")
    teacher = specdec_teacher.module(mod)
    names = checkers(module)
    assert len(names) >= 3, "a chapter has at least three self-check exercises"
    assert set(teacher.REFERENCE) == set(names) == set(teacher.WRONG)
    assert all(teacher.WRONG[name] for name in names)


@pytest.mark.parametrize(("module", "teacher", "name"), list(function_cases()))
def test_reference_is_correct(module, teacher, name, capsys):
    assert getattr(module, name)(teacher.REFERENCE[name]) == "correct"
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("module", "teacher", "name"), list(function_cases()))
def test_wrong_answers_are_incorrect_with_a_hint(module, teacher, name, capsys):
    for wrong in teacher.WRONG[name]:
        assert getattr(module, name)(wrong) == "incorrect", wrong
        out = capsys.readouterr().out
        assert "incorrect — " in out and len(out.split("incorrect — ", 1)[1].strip()) > 10, out


@pytest.mark.parametrize(("mod", "name"), list(all_cases()))
def test_on_the_hidden_cases_too(mod, name, capsys):
    """The graded check (`hidden_check`: other seeds, extra cases) agrees with the public one on every
    planted answer, value checkers included."""
    ref = specdec_teacher.module(mod).REFERENCE[name]
    module = f"specdec_course.checks.{mod}"
    assert specdec_teacher.hidden_check(module, name, *specdec_teacher.reference_args(mod, name)) == "correct"
    for wrong in specdec_teacher.module(mod).WRONG[name]:
        args = wrong if isinstance(ref, tuple) else (wrong,)
        assert specdec_teacher.hidden_check(module, name, *args) == "incorrect", wrong
    out = capsys.readouterr().out
    if any(callable(a) for a in specdec_teacher.reference_args(mod, name)):
        assert "(hidden cases): correct" in out  # a function exercise: hidden cases did run


def empty_stub(*args, **kwargs):
    """nbgrader's release stub (its code_stub is `...`, see specdec_course.student.NBGRADER_CONFIG)."""
    ...  # YOUR CODE HERE


@pytest.mark.parametrize(("module", "teacher", "name"), list(function_cases()))
def test_stub_or_none_is_not_attempted(module, teacher, name):
    assert getattr(module, name)(stub) == "not attempted"
    assert getattr(module, name)(empty_stub) == "not attempted"
    assert getattr(module, name)(None) == "not attempted"


@pytest.mark.parametrize(("module", "teacher", "name"), list(function_cases()))
def test_a_crash_or_junk_is_incorrect_not_raised(module, teacher, name):
    def crashes(*args, **kwargs):
        raise ValueError("boom")

    assert getattr(module, name)(crashes) == "incorrect"
    assert getattr(module, name)(lambda *args, **kwargs: "junk") == "incorrect"


@pytest.mark.parametrize(("module", "teacher", "name"), list(function_cases()))
def test_checking_leaves_the_global_rng_alone(module, teacher, name):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    getattr(module, name)(teacher.REFERENCE[name])
    assert torch.equal(torch.rand(3), expected)
