"""nbgrader end to end on a real chapter: `python -m specdec_course.nbgrader_course`, then nbgrader's own
generate_assignment, autograde and gradebook, with the students of a teacher's trial: the release handed in
unchanged, the reference solutions pasted in, wrong and raising answers, and a cheater.

    python tests/test_nbgrader.py 03 [08 ...]     # the same trial on other chapters, with timings

Skipped where nbgrader is not installed (it is a test-only dependency, pinned in requirements.txt).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attacks import PATCH, REFERENCE  # noqa: E402

from specdec_course.nbgrader_course import write_course  # noqa: E402
from specdec_course.student import BEGIN, solution_regions  # noqa: E402

SPOOF = "def {checker}(*args, **kwargs):\n    print('✅ spoofed: correct')\n    return 'correct'\n\n\n"


def _env():
    bin_dir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from the same environment
    # the kernel's path holds specdec_lib only: the judge finds the teacher's package in the clone itself
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'course'}",
    }


def nbgrader(course: Path, *args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=_env(), capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return run.stdout + run.stderr


def _solutions(source_nb) -> dict[str, str]:
    return {
        c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
        for c in source_nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("solution") and c["cell_type"] == "code"
    }


def _wrong(solution: str) -> str:
    """A wrong answer: the reference's returned value (or the answer's first value) off by a little."""
    lines = solution.split("\n")
    region = solution_regions(solution)[0]
    last = next(ln for ln in reversed(region) if ln.strip())
    i = len(lines) - 1 - lines[::-1].index(last)
    indent = last[: len(last) - len(last.lstrip())]
    if last.strip().startswith("return "):
        lines[i] = f"{indent}return 0.123456  # wrong"
    else:
        name = last.split("=")[0].strip()
        lines[i] = f"{indent}{name} = -1  # wrong"
    return "\n".join(lines)


def students(source_nb, release_nb, chapter="ch01") -> dict[str, tuple[dict, int]]:
    """{student: (notebook, points they earned)} like the teacher's trial, and the attacks on the grader."""
    solved = _solutions(source_nb)
    ids = list(solved)
    functions = [g for g in ids if "def " in solved[g]]
    counted = sum(
        c["metadata"]["nbgrader"]["points"]
        for c in source_nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id", "").endswith("-test")
    )

    def handed_in(answers):
        nb = json.loads(json.dumps(release_nb))
        for cell in nb["cells"]:
            gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
            if gid in answers:
                cell["source"] = answers[gid]
        return nb

    first_checker = next(c for c in solved[ids[0]].split("\n")[::-1] if c.startswith("check_")).split("(")[0]
    cheats = {
        # a spoofed checker defined in the solution cell, and a wrong answer under it
        ids[0]: SPOOF.format(checker=first_checker) + _wrong(solved[ids[0]]),
        # the checker call and the answer deleted
        ids[1]: "# nothing here",
        ids[2]: solved[ids[2]],  # the one exercise this student solved
        # (a') then the checkers, importlib.reload, the recorder and the teacher's package patched, over a
        # wrong answer
        functions[-1]: PATCH.format(chapter=chapter) + _wrong(solved[functions[-1]]),
    }
    stolen = functions[-1]  # (d) the reference, imported under a spelled-apart name
    steal = f"{_defined(solved[stolen])} = answers[{_checker_of(solved[stolen])!r}]"
    partial = handed_in(
        {
            ids[0]: solved[ids[0]],  # right, under rewritten metadata (below)
            ids[1]: _wrong(solved[ids[1]]),
            ids[2]: 'raise RuntimeError("my notebook broke")',
            functions[-2]: solved[functions[-2]],  # right, with its test cell deleted (below)
            stolen: REFERENCE.format(chapter=chapter) + steal,
        }
    )
    # the deleted test and the rewritten metadata (another grade id, 100 points, not graded) come back as
    # released: the two right answers under them score
    partial["cells"] = [c for c in partial["cells"] if _grade_id(c) != f"{functions[-2]}-test"]
    for cell in partial["cells"]:
        if _grade_id(cell) in (ids[0], f"{ids[0]}-test"):
            cell["metadata"]["nbgrader"].update(grade_id=_grade_id(cell) + "-hacked", points=100, grade=False)
    return {
        "pasted": (handed_in(solved), counted),  # practice exercises (the quick-check) are worth 0
        "unchanged": (handed_in({}), 0),
        "partial": (partial, 2),
        "cheater": (handed_in(cheats), 1),
    }


def _grade_id(cell) -> str:
    return cell["metadata"].get("nbgrader", {}).get("grade_id", "")


def _defined(solution: str) -> str:
    return next(ln.split("(")[0].removeprefix("def ") for ln in solution.split("\n") if ln.startswith("def "))


def _checker_of(solution: str) -> str:
    return next(ln for ln in solution.split("\n")[::-1] if ln.startswith("check_")).split("(")[0]


def trial(chapter: str, course: Path) -> dict[str, tuple[float, int, float]]:
    """Run the trial on one chapter; {student: (score, expected, seconds)}."""
    from nbgrader.api import Gradebook

    [source] = write_course(course, [chapter])
    assignment = source.parent.name
    nbgrader(course, "generate_assignment", assignment, "--force")
    release = json.loads((course / "release" / assignment / source.name).read_text())
    assert BEGIN not in json.dumps(release), "the release shows a solution"
    assert "specdec_teacher" not in json.dumps(release) and "HIDDEN" not in source.read_text()
    expected = {}
    for name, (nb, points) in students(json.loads(source.read_text()), release, f"ch{chapter}").items():
        folder = course / "submitted" / name / assignment
        folder.mkdir(parents=True)
        (folder / source.name).write_text(json.dumps(nb))
        expected[name] = points
    seconds = {}
    for name in expected:
        t0 = time.perf_counter()
        nbgrader(course, "autograde", assignment, "--student", name, "--force")
        seconds[name] = time.perf_counter() - t0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {name: gb.find_submission(assignment, name).score for name in expected}
    graded = json.loads((course / "autograded" / "pasted" / assignment / source.name).read_text())
    tests = [
        c
        for c in graded["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"
    ]
    hidden = ["(hidden cases): correct" in json.dumps(c["outputs"], ensure_ascii=False) for c in tests]
    assert any(hidden), "autograde judged no hidden case"
    # what a student gets back shows the released tests, neither the plan nor the teacher's package
    nbgrader(course, "generate_feedback", assignment, "--student", "pasted", "--force")
    [html] = (course / "feedback" / "pasted" / assignment).glob("*.html")
    text = html.read_text(encoding="utf-8")
    assert '"calls"' not in text and "specdec_teacher" not in text and "_record" not in text
    return {name: (scores[name], expected[name], seconds[name]) for name in expected}


@pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None, reason="nbgrader is not installed")
def test_nbgrader_awards_what_each_student_earned(tmp_path):
    result = trial(
        "01", tmp_path / "course"
    )  # chapter 01: the quickest to run, five exercises and a quick-check
    for name, (score, expected, _) in result.items():
        assert score == expected, f"{name}: nbgrader gave {score}, they earned {expected}"


if __name__ == "__main__":
    import tempfile

    for chapter in sys.argv[1:] or ["03"]:
        result = trial(chapter.zfill(2), Path(tempfile.mkdtemp()) / "course")
        for name, (score, expected, seconds) in result.items():
            print(
                f"chapter {chapter}: {name:10s} nbgrader {score:g} points (earned {expected}), autograde {seconds:.0f} s"
            )
