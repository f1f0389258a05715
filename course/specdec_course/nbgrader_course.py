"""An nbgrader course from the chapters (hand-written support code for teachers).

    python -m specdec_course.nbgrader_course COURSE_DIR [--chapters 03 08]
    cd COURSE_DIR && nbgrader generate_assignment ch03      # release/ch03: what students get
    # students' work in COURSE_DIR/submitted/<student>/ch03/03_rejection_sampling.ipynb, then
    nbgrader autograde ch03 && nbgrader export                # grades.csv

For each chapter this writes `COURSE_DIR/source/chNN/NN_name.ipynb`, nbgrader's source notebook, and once
`COURSE_DIR/nbgrader_config.py`. In the source, every exercise is one solution cell (the chapter's
reference, between nbgrader's markers) followed by a **locked, graded test cell** worth one point. In the
release the test runs the public check. When nbgrader autogrades, the config's steps
(`specdec_course.nbgrader_judge`) rebuild the submission from the release with only its answers, turn each
test into a recorder of the answer on the public and hidden inputs, and let the teacher's judge decide
each test in a fresh process: nothing the student's kernel prints or patches counts, and no hidden test
code is in any notebook. The config's code stub is `...` (not nbgrader's
`raise NotImplementedError()`), and every answer that is a value gets a `name = ...` line before its
solution region, so an untouched release runs top to bottom ("Run All") and each checker says "not
attempted". Each "Why it works" note becomes a written-answer cell (0 points, for the teacher to re-weight)
under a locked cell that asks the question.

The chapters' own notebooks stay as learners see them; the course grader (`python -m specdec_course.grade`)
grades the same submissions without nbgrader.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

from specdec_course.grade import expected_exercises
from specdec_course.student import (
    ASSIGNED,
    BEGIN,
    COLAB_BADGE,
    EXERCISE_TAG,
    _lines,
    _source,
    is_reference,
    reference_source,
)

ROOT = Path(__file__).resolve().parents[2]  # the clone: course/specdec_course/ -> ../..
NBGRADER_CONFIG = """\
# nbgrader configuration written by `python -m specdec_course.nbgrader_course` (edit freely).
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "specdec"
# A stub that runs at the top level too, so an untouched release does not stop "Run All"; the checkers
# call a function whose body is only `...` "not attempted".
c.ClearSolutions.code_stub = {"python": "...  # YOUR CODE HERE"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.Execute.timeout = 300  # seconds per cell: the chapters run their models on the CPU

# Grades are decided outside the student's kernel (see course/specdec_course/nbgrader_judge.py): the submission is
# rebuilt from the release, each graded test records the answer, and the teacher's judge decides.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    Execute,
    IgnorePattern,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from specdec_course.nbgrader_judge import JudgeRecords, RebuildFromRelease, RecordAnswers  # noqa: E402

c.Autograde.sanitize_preprocessors = [
    RebuildFromRelease, ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells, CheckCellMetadata,
    RecordAnswers,
]
c.Autograde.autograde_preprocessors = [
    Execute, JudgeRecords, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
    AssignLatePenalties, CheckCellMetadata,
]
# The teacher's package, for the plans and the judge (never installed where the students' code runs):
# c.RecordAnswers.teacher = c.JudgeRecords.teacher = "/path/to/CLONE/teacher"
# A course secret moves the hidden cases (make one: python -c "import secrets; print(secrets.token_hex(16))"):
# c.RecordAnswers.secret_file = c.JudgeRecords.secret_file = "/path/to/course.secret"
"""
SPECDEC = "specdec"  # a graded test's metadata: the exercise it grades
QUESTION = (
    "**In your own words** (not graded unless your teacher says so): why does your answer to the exercise "
    "above work? Write a few sentences in the cell below."
)


def _meta(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3}
    meta |= {"solution": solution, "task": False}
    return meta | ({"points": points} if points is not None else {})


def solution_source(reference: str) -> str:
    """A reference cell's source for nbgrader: each value answered at the top level gets a `name = ...`
    line before its region, so the release (region replaced by `...`) still defines it."""
    out = []
    lines = reference.split("\n")
    for i, line in enumerate(lines):
        if line.strip() == BEGIN and not line[: len(line) - len(line.lstrip())]:
            region = lines[i + 1 : lines.index("### END SOLUTION", i)]
            names = list(dict.fromkeys(m.group(1) for m in map(ASSIGNED.match, region) if m))
            out += [f"{name} = ...  # your answer" for name in names]
        out.append(line)
    return "\n".join(out)


def _worth(ex: dict) -> str:
    if not ex["points"]:
        return f"{ex.get('kind', 'practice')}: 0 points, its checker can be gamed"
    return f"{ex['points']:g} point" + ("s" if ex["points"] != 1 else "")


def test_cell(ex: dict) -> dict:
    """The locked, graded test of one exercise: in the release it runs the public check; when nbgrader
    autogrades, `RecordAnswers` and `JudgeRecords` make it record the answer and judge it outside the
    student's kernel (its `specdec` metadata says which checker, with which arguments)."""
    code = (
        f"# Graded test of {ex['grade_id']} ({_worth(ex)}). Here it runs the public check. When your\n"
        "# teacher grades, your answer is recorded and judged outside this notebook, on hidden cases too.\n"
        f"from {ex['module']} import {ex['checker']} as _check\n\n"
        f'assert _check({ex["args"]}) == "correct", "not correct yet: the message above says why"'
    )
    nbgrader = _meta(f"{ex['grade_id']}-test", grade=True, solution=False, locked=True, points=ex["points"])
    info = {k: ex[k] for k in ("grade_id", "module", "checker", "args")}
    cell = {"cell_type": "code", "execution_count": None, "id": f"{ex['cell_id']}-test"}
    meta = {"nbgrader": nbgrader, SPECDEC: info}
    return cell | {"metadata": meta, "outputs": [], "source": _lines(code)}


def nbgrader_source(nb: dict) -> dict:
    """nbgrader's source notebook of a chapter (see the module docstring)."""
    nb = copy.deepcopy(nb)
    tests = {ex["grade_id"]: ex for ex in expected_exercises(nb)}
    cells = []
    for cell in nb["cells"]:
        meta = cell.setdefault("metadata", {})
        tags = meta.get("tags", [])
        if EXERCISE_TAG in tags:  # the learner's cell: the solution cell below replaces it
            continue
        if cell["cell_type"] == "markdown" and COLAB_BADGE.search(_source(cell)):
            cell["source"] = _lines(COLAB_BADGE.sub("", _source(cell)))  # the badge opens the full notebook
        if is_reference(cell):
            cell["source"] = _lines(solution_source(reference_source(cell)))
            meta.pop("jupyter", None)
            meta.pop("cellView", None)
            meta["tags"] = [t for t in tags if t not in ("hide-input", "reference")]
            cells += [cell, test_cell(tests[meta["nbgrader"]["grade_id"]])]
            continue
        if "solution" in tags and meta.get("nbgrader", {}).get("solution"):  # a "why it works" note
            gid = meta["nbgrader"]["grade_id"]
            ask = {"cell_type": "markdown", "id": f"{cell['id']}-q", "source": _lines(QUESTION)}
            ask["metadata"] = {"nbgrader": _meta(f"{gid}-question", grade=False, solution=False, locked=True)}
            cells += [ask, cell]
            continue
        cells.append(cell)
    nb["cells"] = cells
    return nb


def assignment_name(path: Path) -> str:
    return f"ch{path.name[:2]}"


def write_course(course: Path, chapters: list[str] | None = None) -> list[Path]:
    """The source notebooks (and nbgrader_config.py, unless it exists) of a course folder."""
    course = Path(course)
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(NBGRADER_CONFIG, encoding="utf-8")
    written = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if chapters and path.name[:2] not in chapters:
            continue
        folder = course / "source" / assignment_name(path)
        folder.mkdir(parents=True, exist_ok=True)
        nb = nbgrader_source(json.loads(path.read_text(encoding="utf-8")))
        (folder / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(folder / path.name)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("course", type=Path, help="the nbgrader course folder (created if missing)")
    ap.add_argument("--chapters", nargs="*", help="two-digit chapter numbers (default: all twelve)")
    args = ap.parse_args(argv)
    chapters = [re.sub(r"\D", "", c).zfill(2) for c in args.chapters] if args.chapters else None
    for path in write_course(args.course, chapters):
        print(f"nbgrader source: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
