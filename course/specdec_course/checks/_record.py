"""What a grader keeps of an answer in the student's kernel: the answer, never a verdict.

A grader (the course grader, or nbgrader's autograde) runs a student's notebook in a kernel the student's
code controls: a student can patch any checker, plant a fake module, print any line. So nothing decided in
that kernel is trusted. After each exercise the grader's cell calls `record(grade_id, plan, *answer)`: a
value answer is kept as it is; a function answer is called on the inputs of the `plan` (the public and the
hidden cases, made by the teacher's package in the grader's own process) and what it returned, or raised,
is kept. The record is shown as the cell's output (`MIME`), and the teacher's package judges it in a fresh
process (`specdec_teacher.judge`) that never runs the student's code. A forged record gains nothing: to
get "correct" it must hold the right outputs of the hidden cases, which is solving the exercise.

Everything here is JSON (`_core.encode`), so the judge reads a record without unpickling anything.
"""

from __future__ import annotations

import json

from specdec_course.checks._core import decode, encode, is_stub

MIME = "application/vnd.specdec.record+json"
MAX_TEXT = 300  # characters kept of a raised exception's message


def encode_answer(value):
    """A returned value as JSON: tensors, numbers, strings, None, `...` and containers of them; numpy
    arrays and scalars as tensors and numbers; anything else as its type's name (never a right answer)."""
    if value is ...:
        return {"ellipsis": True}
    if type(value).__module__ == "numpy":  # an array or a numpy scalar, without importing numpy here
        import torch

        value = torch.as_tensor(value) if hasattr(value, "shape") and value.shape else value.item()
    if isinstance(value, list | tuple | dict | set | frozenset):
        try:
            if isinstance(value, dict):
                inner = {"dict": [[encode_answer(k), encode_answer(v)] for k, v in value.items()]}
            elif isinstance(value, tuple):
                inner = {"tuple": [encode_answer(v) for v in value]}
            elif isinstance(value, list):
                inner = [encode_answer(v) for v in value]
            else:
                inner = {"set": [encode_answer(v) for v in sorted(value, key=repr)]}
            return inner
        except RecursionError:
            return {"opaque": "a container that holds itself"}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    try:
        out = encode(value)  # tensors
        json.dumps(out)
        return out
    except (TypeError, ValueError, OverflowError):
        return {"opaque": type(value).__name__}


def decode_answer(value):
    """The inverse of `encode_answer` (an opaque value comes back as `Opaque`, which equals nothing)."""
    if isinstance(value, dict):
        if value.get("ellipsis") is True and len(value) == 1:
            return ...
        if "opaque" in value and len(value) == 1:
            return Opaque(str(value["opaque"]))
        if "dict" in value:
            return {_hashable(decode_answer(k)): decode_answer(v) for k, v in value["dict"]}
        if "tuple" in value:
            return tuple(decode_answer(v) for v in value["tuple"])
        if "set" in value:
            return {_hashable(decode_answer(v)) for v in value["set"]}
    if isinstance(value, list):
        return [decode_answer(v) for v in value]
    return decode(value)


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


class Opaque:
    """A returned object the record could not keep (a generator, a custom class): it is not an answer."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self):
        return f"<a {self.type_name} object>"


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _call(fn, args, kwargs) -> dict:
    """What one call returned (or raised), and every argument the function changed in place (a checker
    that forbids that must see it): {"value"} or {"raised"}, with {"changed": {position: new value}}."""
    args, kwargs = decode(args), decode(kwargs)
    before = [encode_answer(a) for a in args]
    try:
        out = {"value": encode_answer(fn(*args, **kwargs))}
    except (Exception, SystemExit) as e:  # a crash is the student's answer too: the checker says so
        out = {"raised": [type(e).__name__, str(e)[:MAX_TEXT]]}
    changed = {}
    for i, (a, was) in enumerate(zip(args, before)):
        now = encode_answer(a)
        if not _same(now, was):
            changed[str(i)] = now
    return out | ({"changed": changed} if changed else {})


def record(grade_id: str, plan: dict, *args, **kwargs) -> dict:
    """The answer to one exercise, as the judge needs it: each argument the student passed to the checker,
    by the checker's parameter name; a function as what it returns on the plan's calls."""
    params = plan["params"]
    given = dict(zip(params, args)) | kwargs
    answers = {}
    for name, value in given.items():
        if callable(value) and not isinstance(value, type):
            entry = {"function": True, "stub": is_stub(value), "results": {}}
            if not entry["stub"]:
                for part, calls in plan["calls"].items():
                    entry["results"][part] = [_call(value, a, k) for param, a, k in calls if param == name]
            answers[name] = entry
        else:
            answers[name] = {"value": encode_answer(value)}
    out = {"grade_id": grade_id, "answers": answers}
    try:
        from IPython.display import display

        display({MIME: out, "text/plain": f"answer to {grade_id} recorded for the grader"}, raw=True)
    except ImportError:  # outside a kernel (tests): the caller keeps the return value
        pass
    return out
