"""Which exercises a grade can count on, found by trying what a student could try.

    python -m specdec_teacher.labels            # print the table; --write: course/specdec_course/checks/gradable.json
                                                # and the table in book/setup.md

An exercise is **gradable** when its answer is a function that the graders run on hidden cases, and no
function a student can import from `specdec_lib` passes those cases: every function of every module of
the library (whatever name it is found under) whose signature takes the checker's arguments is run on
the hidden cases, as a student's answer would be. One that passes makes the exercise **library**: an
import answers it. A value or a choice (and every quick-check) is **practice**: its checker tells anyone
who asks whether an answer is right, and its stored digests are obfuscation, not secrecy. **mixed** is a
function and a choice in one exercise: graded, since the function must be right too.

The graders count points for gradable and mixed exercises only; library and practice exercises are
still checked and reported, worth 0 points.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import json
import pkgutil
import re
import signal
import sys
from pathlib import Path

import specdec_lib
from specdec_course.checks import _core
from specdec_teacher import CHAPTERS, HIDDEN_OFFSET, classify, public, teacher_run

ROOT = Path(specdec_lib.__file__).resolve().parents[1]
LABELS_FILE = ROOT / "course" / "specdec_course" / "checks" / "gradable.json"
SETUP = ROOT / "book" / "setup.md"
BEGIN, END = (
    "<!-- gradable table: python -m specdec_teacher.labels --write -->",
    "<!-- end of gradable table -->",
)
# plumbing a student's answer would not call (it grades, builds, trains or writes files)
SKIP = re.compile(r"^specdec_lib\.(_export|zoo_train|zoo_stages)\b")
COUNTED = ("gradable", "mixed")


def library_functions() -> dict[int, tuple[list[str], object]]:
    """{id: (every name it is importable under, function)} for every function in the library's modules."""
    found = {}
    names = [specdec_lib.__name__] + [
        m.name for m in pkgutil.walk_packages(specdec_lib.__path__, "specdec_lib.") if not SKIP.match(m.name)
    ]
    for name in sorted(names):
        try:
            mod = importlib.import_module(name)
        except Exception:  # a module that needs what this machine lacks (a GPU, a download)
            continue
        for attr, value in sorted(vars(mod).items()):
            if callable(value) and not isinstance(value, type):
                found.setdefault(id(value), ([], value))[0].append(f"{name}.{attr}")
    return found


def _takes(fn, args) -> bool:
    try:
        inspect.signature(fn).bind(*args)
        return True
    except TypeError:
        return False
    except ValueError:  # a builtin without a signature: try it
        return True


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def passes(chapter: str, checker: str, fn, seconds: int = 3) -> bool:
    """Whether `fn`, as a student's answer, passes `checker` on the public and hidden cases."""
    check = getattr(public(chapter), checker)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        for offset in (0, HIDDEN_OFFSET):
            with teacher_run(offset=offset), contextlib.redirect_stdout(io.StringIO()):
                with contextlib.redirect_stderr(io.StringIO()):  # a loader's progress bar
                    status = check(fn)
            if status != _core.CORRECT:
                return False
        return True
    except _Timeout:
        return False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def first_call(chapter: str, checker: str) -> tuple | None:
    """The arguments of the first call the checker makes to a function answer, or None."""
    seen = []

    def spy(*args):
        seen.append(args)
        raise _core.Incorrect("seen")

    with teacher_run(), contextlib.redirect_stdout(io.StringIO()):
        getattr(public(chapter), checker)(spy)
    return seen[0] if seen else None


def library_answers() -> dict[str, dict[str, list[str]]]:
    """{chapter: {checker: [library functions that pass it]}} for the function exercises."""
    functions = library_functions().values()
    out = {}
    for chapter, kinds in classify().items():
        for checker, kind in kinds.items():
            if kind != "gradable":
                continue
            args = first_call(chapter, checker)
            if args is None:
                continue
            hits = [
                n
                for names, fn in functions
                if _takes(fn, args) and passes(chapter, checker, fn)
                for n in names
            ]
            if hits:
                out.setdefault(chapter, {})[checker] = sorted(hits)
    return out


def labels() -> dict:
    """{"kinds": {chapter: {checker: kind}}, "library": {chapter: {checker: [functions]}}}, and the quick-checks
    (practice)."""
    kinds = classify()
    library = library_answers()
    for chapter, hits in library.items():
        for checker in hits:
            kinds[chapter][checker] = "library"
    kinds["quick"] = {"check_quick": "practice"}
    return {"kinds": kinds, "library": library}


def table(data: dict) -> str:
    """setup.md's table: per chapter, the exercises of each kind (the checkers' names without `check_`)."""
    rows = ["| chapter | gradable | mixed | library (practice) | practice |", "|---|---|---|---|---|"]
    for chapter in CHAPTERS:
        kinds = data["kinds"][chapter]
        cells = []
        for kind in ("gradable", "mixed", "library", "practice"):
            names = [f"`{c.removeprefix('check_')}`" for c, k in kinds.items() if k == kind]
            if kind == "library":  # with the functions that answer it
                names = [
                    f"{n} ({', '.join(f'`{f}`' for f in data['library'][chapter]['check_' + n.strip('`')])})"
                    for n in names
                ]
            cells.append(", ".join(names) or "—")
        rows.append(f"| {chapter[2:]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write(data: dict) -> None:
    LABELS_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    text = SETUP.read_text(encoding="utf-8")
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    indent = "  "
    block = "\n".join(indent + line for line in table(data).splitlines())
    SETUP.write_text(text[:start] + "\n" + block + "\n" + indent + text[stop:], encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write gradable.json and setup.md's table")
    args = ap.parse_args(argv)
    data = labels()
    print(table(data))
    if args.write:
        write(data)
        print(f"wrote {LABELS_FILE} and the table in {SETUP}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
