"""Judging recorded answers in a process the student's code never ran in.

The graders work in three steps:

1. **plan** (the grader's process): `plan(module, checker)` runs the checker on the reference and keeps
   the inputs it hands the function answer: the public cases and the hidden ones (other seeds, extra
   random cases; the seed offset comes from the course's secret). Inputs only, no answer.
2. **record** (the student's kernel): `specdec_course.checks._record.record` calls the student's function on
   those inputs and shows what it returned. Nothing there is trusted.
3. **judge** (this module, in a fresh process: `python -m specdec_teacher.judge < request.json`): the
   public checker, imported here from disk, runs again with the reference answers and the same case
   seeds, and each call of the student's function is answered from the record. The checker's verdict
   is the grade: first on the public cases, then, when those pass, on the hidden ones.

A record that does not follow the plan (another number of calls, other inputs) is judged incorrect.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import io
import json
import sys

import torch

from specdec_course.checks import _core
from specdec_course.checks._record import decode_answer
from specdec_teacher import HIDDEN_OFFSET, reference_args, teacher_run

PARTS = ("public", "hidden")
VERDICT_LINE = "{icon} {title}: {status}"


def offset_for(secret: str | None) -> int:
    """The hidden cases' seed offset: the teacher's package default, or one drawn from a course's secret
    (so a course's hidden cases are not the ones anyone can compute from the public package)."""
    if not secret:
        return HIDDEN_OFFSET
    return 1000 + int(hashlib.sha256(secret.strip().encode()).hexdigest(), 16) % 10**6


def _checker(module_name: str, name: str):
    return getattr(importlib.import_module(module_name), name)


def _chapter(module_name: str) -> str:
    return module_name.rsplit(".", 1)[-1]


class _Capture:
    """The reference, called through this, keeps the inputs of every call."""

    def __init__(self, fn, param: str, calls: list):
        self.fn, self.param, self.calls = fn, param, calls

    def __call__(self, *args, **kwargs):
        self.calls.append([self.param, _core.encode(list(args)), _core.encode(kwargs)])
        return self.fn(*args, **kwargs)


def plan(module_name: str, checker: str, secret: str | None = None, fixed: dict | None = None) -> dict:
    """The inputs `checker` hands a function answer, on the public and on the hidden cases; the checker's
    parameter names (how the record names what the student passed); and `fixed`, the arguments the
    teacher's notebook passes as constants (a quick-check's question number), which no record changes."""
    check = _checker(module_name, checker)
    params = list(inspect.signature(check).parameters)
    chapter = _chapter(module_name)
    calls = {}
    for part, offset in zip(PARTS, (0, offset_for(secret))):
        calls[part] = []
        if chapter == "quick":  # a quick-check's answer is a value: nothing to call
            continue
        args = [
            _Capture(a, params[i], calls[part]) if callable(a) else a
            for i, a in enumerate(reference_args(chapter, checker))
        ]
        out = io.StringIO()
        with teacher_run(offset=offset), contextlib.redirect_stdout(out):
            status = check(*args)
        if status != _core.CORRECT:
            raise RuntimeError(f"{module_name}.{checker}: the reference is not correct: {out.getvalue()}")
    fixed = {params[k] if isinstance(k, int) else k: _core.encode(v) for k, v in (fixed or {}).items()}
    return {"module": module_name, "checker": checker, "params": params, "calls": calls, "fixed": fixed}


class _Replay:
    """The student's function, as recorded: each call is answered from the record, in order, once its
    inputs are checked against the plan's."""

    def __init__(self, param: str, results: list, planned: list):
        self.results, self.planned = results, [c for c in planned if c[0] == param]
        self.i = 0

    def __call__(self, *args, **kwargs):
        i, self.i = self.i, self.i + 1
        if i >= len(self.results) or i >= len(self.planned):
            raise _core.Incorrect("the record does not answer this call: grade it again")
        # compared as values: a JSON writer may have sorted the encoded dicts' keys on the way
        want = _core.fingerprint([_core.decode(self.planned[i][1]), _core.decode(self.planned[i][2])])
        got = _core.fingerprint([list(args), kwargs])
        if not _core._same_fingerprint(got, want):
            raise _core.Incorrect("the record answers other inputs than this check's")
        result = self.results[i]
        _change(args, result.get("changed"))
        if "raised" in result:
            name, message = (list(result["raised"]) + ["", ""])[:2]
            kind = NotImplementedError if name == "NotImplementedError" else type(str(name), (Exception,), {})
            raise kind(message)
        return decode_answer(result.get("value"))


def _change(args, changed) -> None:
    """Do to the checker's arguments what the student's function did to its own (a checker that forbids
    changing the inputs then sees it)."""
    for key, value in (changed or {}).items():
        i = int(key)
        if i >= len(args):
            continue
        arg, new = args[i], decode_answer(value)
        if isinstance(arg, torch.Tensor):
            try:
                new = torch.as_tensor(new) if not isinstance(new, torch.Tensor) else new
                arg.resize_(new.shape).copy_(new.to(arg.dtype))
            except (RuntimeError, TypeError, ValueError) as e:
                raise _core.Incorrect(
                    "your function changed its input tensor in place: work on a copy"
                ) from e
        elif isinstance(arg, list):
            arg[:] = list(new) if isinstance(new, list | tuple) else [new]
        elif isinstance(arg, dict | set):
            arg.clear()
            arg.update(new if isinstance(new, type(arg)) else {})


def _stub(*args, **kwargs): ...


def _answers(record: dict, part: str, plan_: dict) -> dict:
    kwargs = {}
    for name, entry in record.get("answers", {}).items():
        if name not in plan_["params"]:
            raise ValueError(f"the record answers {name!r}, which the checker does not take")
        if entry.get("function"):
            if entry.get("stub"):
                kwargs[name] = _stub
            else:
                results = entry.get("results", {}).get(part, [])
                kwargs[name] = _Replay(name, results, plan_["calls"][part])
        else:
            kwargs[name] = decode_answer(entry.get("value"))
    return kwargs | {name: _core.decode(v) for name, v in plan_.get("fixed", {}).items()}


def judge(plan_: dict, record: dict | None, secret: str | None = None) -> dict:
    """The verdict on one recorded answer: {"verdict", "title", "detail"} as the checker prints it, on
    the public cases and, when they pass, on the hidden ones."""
    if not record:
        return {"verdict": _core.INCORRECT, "title": plan_["checker"], "detail": "no answer was recorded"}
    check = _checker(plan_["module"], plan_["checker"])
    result = None
    # a value or a choice has no hidden cases: its public check is the check
    parts = PARTS if any(plan_["calls"].values()) else PARTS[:1]
    for part, offset in zip(parts, (0, offset_for(secret))):
        try:
            kwargs = _answers(record, part, plan_)
        except (ValueError, TypeError, AttributeError) as e:
            return {"verdict": _core.INCORRECT, "title": plan_["checker"], "detail": f"a broken record: {e}"}
        out = io.StringIO()
        with teacher_run(offset=offset), contextlib.redirect_stdout(out):
            status = check(**kwargs)
        line = next((ln for ln in reversed(out.getvalue().splitlines()) if ln.strip()), "")
        title, _, rest = line[2:].partition(": ")
        detail = rest.partition(" — ")[2]
        result = {"verdict": status, "title": title or plan_["checker"], "detail": detail}
        if status != _core.CORRECT:
            break
    return result


def main() -> int:
    """Read a request as JSON on stdin, write the answer as JSON on stdout:
    {"plan": [{"module", "checker", "fixed"}, ...], "secret"} -> the plans;
    {"items": [{"plan", "record"}, ...], "secret"} -> the verdicts."""
    request = json.loads(sys.stdin.read())
    secret = request.get("secret")
    if "plan" in request:
        out = [
            plan(p["module"], p["checker"], secret, {_key(k): v for k, v in p.get("fixed", {}).items()})
            for p in request["plan"]
        ]
        sys.stdout.write(json.dumps(out, ensure_ascii=False))
        return 0
    verdicts = []
    for item in request["items"]:
        try:
            verdicts.append(judge(item["plan"], item.get("record"), secret))
        except Exception as e:  # a record that breaks the judge is not an answer
            detail = f"the record could not be judged: {type(e).__name__}: {str(e)[:200]}"
            verdicts.append({"verdict": _core.INCORRECT, "title": item["plan"]["checker"], "detail": detail})
    sys.stdout.write(json.dumps(verdicts, ensure_ascii=False))
    return 0


def _key(k: str):
    """A fixed argument's key from JSON: a position ("0") or a keyword."""
    return int(k) if k.isdigit() else k


if __name__ == "__main__":
    sys.exit(main())
