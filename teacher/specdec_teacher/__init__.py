"""The teacher's side of the exercise checkers: reference solutions, planted wrong answers, the answers of
value questions, and the hidden cases. Not part of the installed `specdec_lib` (its `pyproject.toml`
packages `specdec_lib*` only) and not in the student build (`make student`): keep it out of students' reach.

    python -m specdec_teacher            # rewrite course/specdec_course/checks/answers.json from the references
    python -m specdec_teacher --check    # exit 1 if answers.json is stale (tests/test_checks_teacher.py)

Put it on the path where you grade: `pip install -e teacher/`, or `PYTHONPATH=CLONE:CLONE/teacher`.

- `chNN.py` / `quick.py`: each chapter's reference solutions (`REFERENCE`, by checker name: a function,
  or the arguments of a value checker), plausible mistakes (`WRONG`, for the tests) and `VALUES`
  (`key: (right answer, decimals, [(known wrong answer, its hint), ...])` for value and choice questions).
- `answers()`: what the public checkers need and nothing more: the expected value of every public case
  (recorded by running each checker on its reference) and salted digests of the value answers.
- `hidden_check(module, checker, *args)`: the checker on hidden cases, for the graded tests of nbgrader
  (`specdec_course.nbgrader_course`) and the course grader (`specdec_course.grade`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import sys

from specdec_course.checks import _core

CHAPTERS = [f"ch{n:02d}" for n in range(1, 13)]
HIDDEN_OFFSET = 7919  # added to every case seed on a hidden run (and seeds the extra cases)


def module(chapter: str):
    """The teacher's module of a chapter ("ch03", or "quick")."""
    return importlib.import_module(f"specdec_teacher.{chapter}")


def public(chapter: str):
    """The public checkers' module of a chapter."""
    return importlib.import_module(f"specdec_course.checks.{chapter}")


class _Modules(dict):
    def __missing__(self, chapter):
        self[chapter] = module(chapter)
        return self[chapter]


@contextlib.contextmanager
def teacher_run(offset: int = 0, recording: dict | None = None, replay: dict | None = None):
    """Checkers answer from the reference functions (or from `replay`), with case seeds moved by `offset`."""
    mode = _core._MODE
    saved = (mode.teacher, mode.recording, mode.replay, mode.offset)
    mode.teacher = None if replay is not None else _Modules()
    mode.recording, mode.replay, mode.offset = recording, replay, offset
    try:
        yield
    finally:
        mode.teacher, mode.recording, mode.replay, mode.offset = saved


def reference_args(chapter: str, checker: str) -> tuple:
    """The arguments that answer `checker` with the reference solution."""
    ref = module(chapter).REFERENCE[checker]
    return ref if isinstance(ref, tuple) else (ref,)


def _run_reference(chapter: str, checker: str, **mode) -> str:
    out = io.StringIO()
    with teacher_run(**mode), contextlib.redirect_stdout(out):
        status = getattr(public(chapter), checker)(*reference_args(chapter, checker))
    if status != "correct":
        raise RuntimeError(f"{chapter}.{checker}: the reference is not correct: {out.getvalue().strip()}")
    return status


def answers() -> dict:
    """The content of course/specdec_course/checks/answers.json."""
    cases: dict = {}
    for chapter in CHAPTERS:
        seen = set()
        for checker in module(chapter).REFERENCE:
            _run_reference(chapter, checker, recording=cases)
            name = _core._RUN["exercise"]  # the key of its recorded answers: unique per chapter
            if name in seen:
                raise ValueError(f"{chapter}: two checkers are both called {name!r}")
            seen.add(name)
    values = {}
    for chapter in [*CHAPTERS, "quick"]:
        entries = getattr(module(chapter), "VALUES", {})
        if entries:
            values[chapter] = {
                key: _core.value_entry(chapter, key, right, decimals, traps)
                for key, (right, decimals, traps) in entries.items()
            }
    return {"cases": cases, "values": values}


def write(path=None) -> None:
    path = path or _core.ANSWERS_FILE
    path.write_text(json.dumps(answers(), ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")


def _same(a, b) -> bool:
    """JSON values equal up to float rounding (another CPU may differ in the last bits)."""
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, int | float)
            and isinstance(b, int | float)
            and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def stale(path=None) -> list[str]:
    """What differs between the committed answers.json and the references' answers."""
    stored = json.loads((path or _core.ANSWERS_FILE).read_text(encoding="utf-8"))
    fresh = answers()
    out = []
    for part in ("cases", "values"):
        for chapter in sorted(set(stored[part]) | set(fresh[part])):
            a, b = stored[part].get(chapter, {}), fresh[part].get(chapter, {})
            out += [
                f"{part} {chapter} {key!r}"
                for key in sorted(set(a) | set(b))
                if not _same(a.get(key), b.get(key))
            ]
    return out


def hidden_check(module_name: str, checker: str, *args, **kwargs) -> str:
    """`checker` of `module_name` (e.g. "specdec_course.checks.ch03") on the hidden cases: other seeds and
    extra random cases. Their answers are recorded from the reference first, then the checker judges the
    learner's answer from that recording (the learner's code never runs while the reference is in reach).
    Value and choice questions have no hidden cases: their public check is the check."""
    chapter = module_name.rsplit(".", 1)[-1]
    check = getattr(importlib.import_module(module_name), checker)
    recording: dict = {}
    if chapter != "quick":
        _run_reference(chapter, checker, offset=HIDDEN_OFFSET, recording=recording)
    if not recording:
        return check(*args, **kwargs)
    with teacher_run(offset=HIDDEN_OFFSET, replay=recording):
        return check(*args, **kwargs)


def classify() -> dict[str, dict[str, str]]:
    """{chapter: {checker: kind}}: "gradable" (a function checked on hidden cases), "practice" (a value
    or a choice, whose checker is an oracle) or "mixed" (a function and a choice)."""
    out = {}
    for chapter in CHAPTERS:
        mod = module(chapter)
        kinds = {}
        for checker in mod.REFERENCE:
            args = reference_args(chapter, checker)
            has_function = any(callable(a) for a in args)
            has_value = any(not callable(a) for a in args)
            kinds[checker] = (
                "mixed" if has_function and has_value else "gradable" if has_function else "practice"
            )
        out[chapter] = kinds
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if answers.json is stale; write nothing")
    args = ap.parse_args(argv)
    if args.check:
        diffs = stale()
        for d in diffs:
            print(f"stale: {d}", file=sys.stderr)
        print("answers.json is up to date" if not diffs else "run `python -m specdec_teacher`")
        return 1 if diffs else 0
    write()
    print(f"wrote {_core.ANSWERS_FILE}")
    return 0
