"""The shared verdict machinery of the exercise checkers, and how they know the right answers without
holding the solutions.

A checker never computes an expected value itself. On the public cases (fixed, or drawn from fixed seeds)
it reads the expected values from `answers.json`, written from the teacher's reference solutions
(`python -m specdec_teacher`, in the repository's `teacher/` folder, which is not part of the installed
package): `_expected.<name>(*args)` is the next value a checker run asked for, with a fingerprint of its
arguments to catch a case that does not match (a different torch, or a stale file). Answers that are
values or a choice are stored as salted SHA-256 digests (`_expected.right`), and so are the known wrong
answers that get their own hint (`_expected.hint`).

The teacher's package can also run a checker on hidden cases (`specdec_teacher.hidden_check`): the same
checker with other seeds and extra random cases (`seed`, `hidden`), whose answers it records from the
reference solution first and then replays to the learner's function, so the learner's code never runs while
the reference is reachable through the checker.
"""

from __future__ import annotations

import dis
import hashlib
import itertools
import json
import random
import traceback
from pathlib import Path

import torch

CORRECT, INCORRECT, NOT_ATTEMPTED = "correct", "incorrect", "not attempted"
_ICON = {CORRECT: "✅", INCORRECT: "❌", NOT_ATTEMPTED: "⏳"}


class Incorrect(Exception):
    """Raised inside a checker's cases to report a wrong answer with a hint."""


class CannotCheck(Exception):
    """The stored answers do not fit the cases this checker made here: no verdict on the learner."""


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
    _RUN.update(exercise=exercise, count=0)  # `_expected` reads this run's answers from the start
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
        except CannotCheck as e:
            status, detail = NOT_ATTEMPTED, f"cannot check here: {e}"
        except Incorrect as e:
            status, detail = INCORRECT, str(e)
        except Exception as e:  # a crash in the learner's code is a wrong answer, shown briefly
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            status, detail = INCORRECT, f"your function raised {last}"
    label = " (hidden cases)" if _MODE.offset else ""
    print(f"{_ICON[status]} {exercise}{label}: {status}" + (f" — {detail}" if detail else ""))
    return status


def unanswered(exercise: str, answers, ask: str) -> bool:
    """True, after printing the not-attempted line with what to do (`ask`), while any of an exercise's
    value answers is still `...` or None: the checkers of exercises answered with numbers start with it."""
    if any(a is ... or a is None for a in answers):
        print(f"{_ICON[NOT_ATTEMPTED]} {exercise}: {NOT_ATTEMPTED} — {ask}")
        return True
    return False


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


# ------------------------------------------------------------- expected answers without the solutions
ANSWERS_FILE = Path(__file__).with_name("answers.json")


class _Mode:
    """How `_expected` answers: from answers.json (the default, what learners get), or during a teacher's
    run from `teacher` (chapter -> module of reference functions) while filling `recording`, or from
    `replay` (a recording in memory). `offset` moves every case seed and adds the hidden cases."""

    teacher: dict | None = None
    recording: dict | None = None
    replay: dict | None = None
    offset: int = 0


_MODE = _Mode()
_RUN = {"exercise": None, "count": 0}
_STORED: dict = {}


def seed(s: int) -> int:
    """A case generator's seed: itself on the public cases, moved on the hidden ones."""
    return s + _MODE.offset


def hidden(n: int, make, salt: int = 0) -> list:
    """`n` extra cases `make(rng)` on a hidden run (none on the public cases)."""
    if not _MODE.offset:
        return []
    rng = random.Random(_MODE.offset * 1009 + salt)
    return [make(rng) for _ in range(n)]


def _stored() -> dict:
    if not _STORED:
        _STORED.update(json.loads(ANSWERS_FILE.read_text(encoding="utf-8")))
    return _STORED


def _numbers(obj) -> list[float]:
    if isinstance(obj, torch.Tensor):
        return obj.detach().double().flatten().tolist()
    if isinstance(obj, bool | int | float):
        return [float(obj)]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in _numbers(k) + _numbers(v)]
    if isinstance(obj, list | tuple):
        return [x for item in obj for x in _numbers(item)]
    return [float(len(obj))] if isinstance(obj, str) else []


def fingerprint(args) -> list[float]:
    """How many numbers the arguments hold, the sum of their magnitudes, of their squares, and a sum
    weighted by position: enough to notice a case that is not the one the answer was recorded for."""
    values = _numbers(args)
    sums = (
        sum(abs(v) for v in values),
        sum(v * v for v in values),
        sum(i % 7 * v for i, v in enumerate(values)),
    )
    return [len(values), *(float(f"{x:.10g}") for x in sums)]


def _same_fingerprint(a, b) -> bool:
    return (
        len(a) == len(b)
        and a[0] == b[0]
        and all(abs(x - y) <= 1e-5 * max(1.0, abs(y)) for x, y in zip(a[1:], b[1:]))
    )


def encode(value):
    """A checker's expected value as JSON (tensors, tuples, dicts with any keys, sets)."""
    if isinstance(value, torch.Tensor):
        return {"tensor": value.tolist(), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, set | frozenset):
        return {"set": [encode(v) for v in sorted(value)]}
    return value


def decode(value):
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if "tensor" in value:
            return torch.tensor(value["tensor"], dtype=getattr(torch, value["dtype"]))
        if "tuple" in value:
            return tuple(decode(v) for v in value["tuple"])
        if "dict" in value:
            return {decode(k): decode(v) for k, v in value["dict"]}
        if "set" in value:
            return {decode(v) for v in value["set"]}
    return value


def _canon(value, decimals) -> list[str]:
    """Every canonical form of a value within the tolerance: a number on a grid of 10**-decimals (the
    nearest point and its two neighbours), text stripped and in lower case, a sequence item by item."""
    if isinstance(value, bool):
        return [str(value)]
    if isinstance(value, int | float) and decimals is not None:
        k = round(float(value) * 10**decimals)
        return [str(k + d) for d in (-1, 0, 1)]
    if isinstance(value, int | float):
        return [repr(value)]
    if isinstance(value, str):
        return [value.strip().lower()]
    if isinstance(value, list | tuple):
        parts = [_canon(v, decimals) for v in value]
        return ["(" + ",".join(combo) + ")" for combo in itertools.product(*parts)]
    return [repr(value)]


def _exact(value, decimals) -> str:
    """The one canonical form of a right (or known wrong) answer: the nearest grid point."""
    if isinstance(value, list | tuple):
        return "(" + ",".join(_exact(v, decimals) for v in value) + ")"
    if isinstance(value, int | float) and not isinstance(value, bool) and decimals is not None:
        return str(round(float(value) * 10**decimals))
    return _canon(value, decimals)[0]


def digest(chapter: str, key: str, form: str) -> str:
    return hashlib.sha256(f"specdec|{chapter}|{key}|{form}".encode()).hexdigest()[:24]


def value_entry(chapter: str, key: str, right, decimals=None, traps=()) -> dict:
    """What answers.json stores of a value question: the digest of the right answer, and of each known
    wrong one with its hint (the teacher's package writes these)."""
    hints = {digest(chapter, key, _exact(v, decimals)): hint for v, hint in traps}
    return {"decimals": decimals, "right": digest(chapter, key, _exact(right, decimals)), "hints": hints}


class Answers:
    """A chapter's expected answers, as its checkers ask for them (see the module docstring)."""

    def __init__(self, chapter: str):
        self.chapter = chapter

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self._case(name, args)

    def _case(self, name: str, args):
        key, i = _RUN["exercise"], _RUN["count"]
        _RUN["count"] += 1
        if _MODE.teacher is not None:
            value = getattr(_MODE.teacher[self.chapter], name)(*args)
            if _MODE.recording is not None:
                runs = _MODE.recording.setdefault(self.chapter, {}).setdefault(key, [])
                runs.append([name, fingerprint(args), encode(value)])
            return value
        source = _MODE.replay if _MODE.replay is not None else _stored()["cases"]
        table = source.get(self.chapter, {}).get(key, [])
        if i >= len(table) or table[i][0] != name or not _same_fingerprint(fingerprint(args), table[i][1]):
            raise CannotCheck(
                f"the stored answers of {key!r} do not fit case {i + 1} as this machine makes it "
                "(another torch version?), or your function read them itself"
            )
        return decode(table[i][2])

    def _entry(self, key: str) -> dict:
        if _MODE.teacher is not None:
            values = getattr(_MODE.teacher[self.chapter], "VALUES", {})
            right, decimals, traps = values[key]
            return value_entry(self.chapter, key, right, decimals, traps)
        return _stored()["values"][self.chapter][key]

    def right(self, key: str, value) -> bool:
        """Whether `value` is the right answer to the value question `key` (within its tolerance)."""
        entry = self._entry(key)
        forms = _canon(value, entry["decimals"])
        return any(digest(self.chapter, key, f) == entry["right"] for f in forms)

    def hint(self, key: str, value) -> str | None:
        """The hint for a known wrong answer to `key`, or None."""
        entry = self._entry(key)
        for f in _canon(value, entry["decimals"]):
            found = entry["hints"].get(digest(self.chapter, key, f))
            if found:
                return found
        return None


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


def options_of(key: str, texts) -> dict[str, str]:
    """A question's options as ``{letter: text}``, ordered by a hash (see `lettered`). `texts` must be listed
    in that order, so that neither the list nor the letters say which option is right."""
    texts = list(texts)
    options = lettered(key, texts[0], texts[1:])
    if list(options.values()) != texts:
        raise ValueError(f"{key}: list the options in their letters' order: {list(options.values())}")
    return options


def expect_choice(answer, options: dict[str, str], answers: Answers, key: str, hint: str) -> None:
    """Incorrect unless `answer` is the letter of the right option of question `key`; a wrong option gets
    its own hint when it has one, else `hint`."""
    letters = list(options)
    expect(isinstance(answer, str), f"answer with one letter among {letters}")
    letter = answer.strip().lower().strip("()")
    expect(letter in options, f"answer with one letter among {letters}")
    text = options[letter]
    expect(answers.right(key, text), f"({letter}) is not it — {answers.hint(key, text) or hint}")
