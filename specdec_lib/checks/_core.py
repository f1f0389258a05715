"""The shared verdict machinery of the exercise checkers."""

from __future__ import annotations

import dis
import hashlib
import traceback

import torch

CORRECT, INCORRECT, NOT_ATTEMPTED = "correct", "incorrect", "not attempted"
_ICON = {CORRECT: "✅", INCORRECT: "❌", NOT_ATTEMPTED: "⏳"}


class Incorrect(Exception):
    """Raised inside a checker's cases to report a wrong answer with a hint."""


_EMPTY_BODY = {"RESUME", "NOP", "RETURN_CONST", "RETURN_VALUE", "LOAD_CONST"}


def is_stub(fn) -> bool:
    """A function whose body does nothing (`...`, `pass`, a docstring): nbgrader's release stub, or
    ours before it is filled in. It can only return None, so it answers no exercise."""
    if getattr(fn, "__name__", "<lambda>") == "<lambda>":  # `lambda: None` is an answer, a wrong one
        return False
    try:
        ops = list(dis.get_instructions(fn))
    except TypeError:  # not a plain function (a class, a tensor)
        return False
    return all(
        op.opname in _EMPTY_BODY
        and (op.opname != "LOAD_CONST" and op.opname != "RETURN_CONST" or op.argval is None)
        for op in ops
    )


def verdict(exercise: str, fn, cases) -> str:
    """Run `cases(fn)` (which raises Incorrect on a wrong answer) and print/return the verdict."""
    if fn is None:
        status, detail = NOT_ATTEMPTED, "pass your function to the checker"
    elif callable(fn) and is_stub(fn):
        status, detail = NOT_ATTEMPTED, "write the function's body (it does nothing yet)"
    else:
        try:
            cases(fn)
            status, detail = CORRECT, ""
        except NotImplementedError:
            status, detail = NOT_ATTEMPTED, "replace `raise NotImplementedError` with your code"
        except Incorrect as e:
            status, detail = INCORRECT, str(e)
        except Exception as e:  # a crash in the learner's code is a wrong answer, shown briefly
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            status, detail = INCORRECT, f"your function raised {last}"
    print(f"{_ICON[status]} {exercise}: {status}" + (f" — {detail}" if detail else ""))
    return status


def expect(condition: bool, hint: str) -> None:
    if not condition:
        raise Incorrect(hint)


def as_float(value, what: str) -> float:
    """A learner's answer as one number, or Incorrect with a hint."""
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise Incorrect(f"{what} should be a single number, got {type(value).__name__}") from e


def as_int_list(value, what: str) -> list[int]:
    """A learner's answer (list, tuple or tensor) as a flat list of ints, or Incorrect with a hint."""
    try:
        return [int(v) for v in torch.as_tensor(value).reshape(-1).tolist()]
    except (TypeError, ValueError, RuntimeError) as e:
        raise Incorrect(
            f"{what} should be a list (or 1-D tensor) of integers, got {type(value).__name__}"
        ) from e


def as_int_list_pair(answer, names: tuple[str, str], hint: str) -> tuple[list[int], list[int]]:
    """A learner's answer that should be a pair of integer lists, or Incorrect with `hint`."""
    try:
        first, second = answer
    except (TypeError, ValueError) as e:
        raise Incorrect(hint) from e
    return as_int_list(first, names[0]), as_int_list(second, names[1])


# ------------------------------------------------------------------------------ multiple choice
LETTERS = "abcdefgh"


def lettered(key: str, right: str, wrong) -> dict[str, str]:
    """A multiple-choice question's options as ``{letter: text}``.

    The right option is stored by its text, never by a letter: the order comes from a hash of `key`
    (the question's id) and each text, so it is the same on every machine and in every copy of the
    notebook, and whoever writes a question does not choose where the right answer lands."""
    texts = [right, *wrong]
    if len(set(texts)) != len(texts) or len(texts) > len(LETTERS):
        raise ValueError(f"{key}: options must be distinct, at most {len(LETTERS)}")
    order = sorted(texts, key=lambda t: hashlib.sha1(f"{key}\n{t}".encode()).hexdigest())
    return dict(zip(LETTERS, order))


def letter_of(options: dict[str, str], text: str) -> str:
    """The letter under which `options` shows `text`."""
    return next(letter for letter, t in options.items() if t == text)


def show_options(options: dict[str, str]) -> None:
    for letter, text in options.items():
        print(f"  ({letter}) {text}")


def expect_choice(answer, options: dict[str, str], right: str, hint: str) -> None:
    """Incorrect (with `hint`) unless `answer` is the letter of the option whose text is `right`."""
    letters = list(options)
    expect(isinstance(answer, str), f"answer with one letter among {letters}")
    letter = answer.strip().lower().strip("()")
    expect(letter in options, f"answer with one letter among {letters}")
    expect(options[letter] == right, f"({letter}) is not it — {hint}")
