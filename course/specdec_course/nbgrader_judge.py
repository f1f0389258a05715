"""nbgrader's autograde, judged outside the student's kernel (hand-written support code for teachers).

`python -m specdec_course.nbgrader_course` writes an `nbgrader_config.py` that adds three steps to
`nbgrader autograde` (this module needs nbgrader, so only that config imports it):

- `RebuildFromRelease` (first, before nbgrader's own sanitising): the submission is rebuilt from the
  release the students were handed, taking only the answers from it: each solution cell's source, found
  by its grade id (or, when a student changed the metadata, by its cell id). A deleted or edited test
  cell comes back as released, tampered metadata cannot crash autograde, and cells a student added are
  dropped;
- `RecordAnswers` (last of the sanitising): each graded test cell becomes a recorder: it calls the
  student's answer on the inputs that the teacher's package plans (public and hidden cases, in its own
  process) and shows what it returned;
- `JudgeRecords` (right after execution): the teacher's judge, a fresh process, decides each test from
  its record. The test cell gets the verdict as its output (an error when it is not correct, so nbgrader
  scores it 0) and its released source back, so the feedback shows neither the plan nor hidden code.

Nothing the student's kernel prints, patches or raises decides a grade. The teacher's package is found
at `JudgeRecords.teacher` / `RecordAnswers.teacher` (default: the clone's `teacher/`); do not install it
where autograde's kernel runs. The hidden cases are seeded by the student's id and a course secret
(`secret_file`), so each student's are their own.
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbformat import from_dict
from nbgrader.preprocessors.base import NbGraderPreprocessor
from traitlets import Unicode

from specdec_course import grade
from specdec_course.nbgrader_course import SPECDEC

ICON = {"correct": "✅", "incorrect": "❌", "not attempted": "⏳"}


def _course(resources) -> Path:
    db = resources.get("nbgrader", {}).get("db_url", "")
    return Path(db.removeprefix("sqlite:///")).parent if db.startswith("sqlite:///") else Path.cwd()


def _nbgrader_meta(cell) -> dict:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


class _Teacher(NbGraderPreprocessor):
    teacher = Unicode("", help="the folder that holds specdec_teacher (default: the clone's teacher/)").tag(
        config=True
    )
    secret_file = Unicode("", help="a file with the course's secret (moves the hidden cases)").tag(
        config=True
    )

    def _teacher(self) -> Path | None:
        return Path(self.teacher) if self.teacher else None

    def _secret(self, resources) -> str | None:
        """The course's secret and the student's id: each student's hidden cases are their own."""
        course = Path(self.secret_file).read_text(encoding="utf-8").strip() if self.secret_file else None
        return grade.student_secret(course, resources.get("nbgrader", {}).get("student"))


class RebuildFromRelease(NbGraderPreprocessor):
    """The released notebook with the submission's answers (solution cells' sources) in it."""

    release_dir = Unicode("", help="the course's release folder (default: COURSE/release)").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        folder = Path(self.release_dir) if self.release_dir else _course(resources) / "release"
        path = folder / info["assignment"] / f"{info['notebook']}.ipynb"
        release = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)  # sources as strings
        cells = [c for c in nb.get("cells", []) if isinstance(c, dict)]
        by_grade_id = {_nbgrader_meta(c).get("grade_id"): c for c in cells}
        by_id = {c.get("id"): c for c in cells}
        rebuilt, missing = [], []
        for cell in release["cells"]:
            meta = _nbgrader_meta(cell)
            if meta.get("solution"):
                mine = by_grade_id.get(meta.get("grade_id")) or by_id.get(cell.get("id"))
                if mine is not None and mine.get("cell_type") == cell["cell_type"]:
                    cell = copy.deepcopy(cell)
                    source = mine.get("source", "")
                    cell["source"] = "".join(source) if isinstance(source, list) else str(source)
                else:
                    missing.append(meta.get("grade_id"))
            rebuilt.append(cell)
        if missing:
            self.log.warning("%s: no answer cell for %s (the released stub is graded)", path.name, missing)
        release.cells = [from_dict(c) for c in rebuilt]
        return release, resources


class RecordAnswers(_Teacher):
    """Each graded test becomes a recorder of the student's answer on the planned inputs."""

    def preprocess(self, nb, resources):
        tests = [c for c in nb.cells if SPECDEC in c.metadata]
        exercises = [dict(c.metadata[SPECDEC]) for c in tests]
        plans = grade.plans_for(exercises, self._secret(resources), self._teacher())
        for cell, ex in zip(tests, exercises):
            plan = plans[ex["grade_id"]]
            cell.metadata[SPECDEC] = {**ex, "plan": plan, "released": cell.source}
            cell.source = grade._source(grade.grader_cell(ex, plan))
        return nb, resources


class JudgeRecords(_Teacher):
    """The teacher's judge decides each graded test from its record, in a fresh process."""

    def preprocess(self, nb, resources):
        tests = [c for c in nb.cells if "plan" in c.metadata.get(SPECDEC, {})]
        plans, recs = {}, {}
        for cell in tests:
            info = cell.metadata[SPECDEC]
            plans[info["grade_id"]] = info["plan"]
            rec = grade.record_in(cell.outputs, info["grade_id"])
            if rec is not None:
                recs[info["grade_id"]] = rec
        verdicts = grade.judged(plans, recs, self._secret(resources), self._teacher())
        for cell in tests:
            info = cell.metadata[SPECDEC]
            v = verdicts[info["grade_id"]]
            line = f"{ICON.get(v['verdict'], '❌')} {v['title']}: {v['verdict']}"
            line += f" — {v['detail']}" if v["detail"] else ""
            outputs = [{"output_type": "stream", "name": "stdout", "text": line + "\n"}]
            if v["verdict"] != "correct":
                why = (
                    "no answer was recorded: did the answer's cell run?"
                    if info["grade_id"] not in recs
                    else line
                )
                outputs.append(
                    {"output_type": "error", "ename": "AssertionError", "evalue": why, "traceback": []}
                )
            cell.outputs = [from_dict(o) for o in outputs]
            cell.source = info["released"]
            cell.metadata[SPECDEC] = {k: info[k] for k in ("grade_id", "module", "checker", "args")}
        return nb, resources
