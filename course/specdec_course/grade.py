"""Grade exercise notebooks (hand-written support code for teachers).

    python -m specdec_course.grade STUDENT/SUBMISSION.ipynb [MORE ...] [--csv gradebook.csv] [--feedback DIR]
        # each student's name is their notebook's folder; two notebooks of one name are refused
    python -m specdec_course.grade --course COURSE_DIR --assignment ch03 [--csv ...] [--feedback ...]
        # every COURSE_DIR/submitted/<student>/ch03/*.ipynb, nbgrader's layout

    # the same in three phases, the students' code where nothing of the teacher's is (grading/Dockerfile):
    python -m specdec_course.grade --write-assignments ch03.json --source notebooks/03_rejection_sampling.ipynb
    python -m specdec_course.grade --assignments ch03.json STUDENT/SUBMISSION.ipynb --records-out runs/
    python -m specdec_course.grade --judge runs/ --assignments ch03.json [--csv ...] [--feedback ...]

What is graded comes from the teacher's side, never from the submission:
- the **chapter** is recognised by its cells' ids against the course's own notebooks (or `--source`); a
  submission of another chapter, or of no chapter, is refused with the reason;
- the **exercises and their points** come from that source notebook: every folded reference cell (tag
  `reference`) is one exercise, worth its nbgrader `points` (1 when absent). An exercise whose cell the
  submission lacks scores 0 ("missing");
- the **notebook that runs** is the source notebook, with only the learner's cells (tag `exercise`) taken
  from the submission (or, in a notebook from `nbgrader_course`'s release, the solution cells): cells a
  student added or changed elsewhere are not run, and every reference cell is left out;
- **nothing decided in the student's kernel counts.** After each learner's cell the grader's cell only
  records the answer (`specdec_course.checks._record`): a value as it is, a function as what it returns on
  the public and the hidden inputs that the teacher's package planned in the grader's own process. The
  kernel runs in an empty folder with the teacher's package off its path. Then the teacher's judge, a
  fresh process that never ran the student's code (`python -m specdec_teacher.judge`), runs the checkers
  again on those records: a patched checker, a fake module or a printed verdict in the kernel changes
  nothing, and a forged record must hold the right answers to pass;
- a learner's cell that names reference answers (the teacher's package `specdec_teacher`, its `REFERENCE`
  or `WRONG`, the checkers' stored answers `_expected`, or the old `_ref_...` names) or defines a
  `check_...` of its own scores 0 for that exercise ("not the student's own answer").

The teacher's package is the repository's `teacher/` folder: the grader imports it in its own process and
in the judge's, never in the kernel's. Do not `pip install` it where the students' code runs.

It runs offline, in a fresh kernel in an empty folder, with a per-cell timeout; a cell that raises
does not stop the run. The grader runs student code with the permissions of whoever starts it: grade in
a container or a throw-away account. It prints one table per submission, and writes every verdict as JSON
(`--json`), a gradebook with a row per student and a column per exercise (`--csv`) and one feedback file
per student (`--feedback DIR/<student>/<chapter>.txt`).
"""

from __future__ import annotations

import argparse
import ast
import copy
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from specdec_course.checks._record import MIME as RECORD_MIME
from specdec_course.student import EXERCISE_TAG, _source, is_reference

ROOT = Path(__file__).resolve().parents[2]  # the clone: course/specdec_course/ -> ../..
NB_DIR = ROOT / "notebooks"
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}
# the teacher's reference answers and planted wrong ones, and the public checkers' stored answers
CHEATS = {"REFERENCE", "WRONG", "specdec_teacher", "_expected", "answers.json"}
TEACHER = ROOT / "teacher"  # the teacher's package, specdec_teacher: not installed with specdec_lib
GRADER_TAG = "grader-check"


def _error(outputs) -> str | None:
    for o in outputs:
        if o.get("output_type") == "error":
            return f"{o.get('ename', 'Error')}: {o.get('evalue', '')}".strip()
    return None


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _parse(source: str):
    try:
        return ast.parse(source)
    except SyntaxError:  # a half-written cell, or IPython syntax
        return None


def checker_modules(nb) -> dict[str, str]:
    """{checker name: module} for the checkers a notebook imports from `specdec_course.checks`."""
    out = {}
    for cell in nb["cells"]:
        tree = _parse(_source(cell)) if cell["cell_type"] == "code" else None
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specdec_course.checks"):
                out |= {
                    a.asname or a.name: (node.module, a.name)
                    for a in node.names
                    if a.name.startswith("check_")
                }
    return out


LABELS = (
    ROOT / "course" / "specdec_course" / "checks" / "gradable.json"
)  # written by `python -m specdec_teacher.labels`
COUNTED = ("gradable", "mixed")


def kind_of(module: str, checker: str) -> str:
    """An exercise's kind (gradable, mixed, library, practice; see specdec_teacher.labels); an exercise
    the labels do not know counts as gradable."""
    kinds = json.loads(LABELS.read_text(encoding="utf-8"))["kinds"]
    return kinds.get(module.rsplit(".", 1)[-1], {}).get(checker, "gradable")


def expected_exercises(source) -> list[dict]:
    """The exercises of a teacher's source notebook: for each folded reference cell, its nbgrader id and
    points (0 for a practice or library exercise, whatever the cell says), its kind, the id of the learner's
    cell before it, and that cell's checker call (module, name, arguments)."""
    modules = checker_modules(source)
    cells = source["cells"]
    out = []
    for i, cell in enumerate(cells):
        if not is_reference(cell):
            continue
        learner = cells[i - 1]
        meta = cell["metadata"].get("nbgrader", {})
        tree = _parse(_source(learner)) or ast.Module(body=[])
        calls = [  # the checker call, at the top level or inside a statement (`if check_x(f) == ...:`)
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in modules
        ]
        if EXERCISE_TAG not in _tags(learner) or not calls:
            raise ValueError(
                f"reference cell {cell.get('id')} has no learner's cell with a checker call before it"
            )
        call = max(calls, key=lambda c: (c.lineno, c.col_offset))
        module, name = modules[call.func.id]
        kind = kind_of(module, name)
        out.append(
            {
                "grade_id": meta.get("grade_id", cell.get("id")),
                "points": float(meta.get("points", 1)) if kind in COUNTED else 0.0,
                "kind": kind,
                "cell_id": learner["id"],
                "module": module,
                "checker": name,
                "args": ", ".join(
                    ast.get_source_segment(_source(learner), a) for a in [*call.args, *call.keywords]
                ),
            }
        )
    return out


def _ids(nb) -> set[str]:
    return {c.get("id") for c in nb["cells"] if isinstance(c, dict) and isinstance(c.get("id"), str)}


def _title(nb) -> str:
    """The chapter's title line (the first line of its first Markdown cell), e.g. '# 03 · Rejection sampling'."""
    first = next((c for c in nb["cells"] if isinstance(c, dict) and c.get("cell_type") == "markdown"), None)
    return _source(first).strip().split("\n")[0].strip() if first else ""


def find_source(submission, sources: list[Path]) -> tuple[Path | None, str]:
    """The course notebook a submission was made from (see `_recognise`); or None and why."""
    candidates = []
    for path in sources:
        nb = json.loads(path.read_text(encoding="utf-8"))
        candidates.append({"title": _title(nb), "ids": sorted(_ids(nb)), "chapter": path.name, "path": path})
    found, why = _recognise(submission, candidates)
    return (found["path"] if found else None), why


def own_answer_problem(source: str) -> str | None:
    """Why a learner's cell is not the student's own answer, or None."""
    tree = _parse(source)
    for node in ast.walk(tree) if tree else ():
        names = [getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None)]
        if isinstance(node, ast.alias):
            names = [node.asname, node.name.split(".")[0]]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # importlib.import_module("...")
            names = [c for c in ("specdec_teacher", "answers.json") if c in node.value]
        for name in names:
            if isinstance(name, str) and (name in CHEATS or name.startswith("_ref_")):
                return f"the cell reads reference answers ({name}): not the student's own answer"
        if isinstance(node, ast.FunctionDef | ast.Lambda) and getattr(node, "name", "").startswith("check_"):
            return f"the cell defines its own {node.name}: not the student's own answer"
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", "").startswith("check_") for t in node.targets
        ):
            return "the cell replaces a checker: not the student's own answer"
    return None


def fixed_args(ex: dict) -> dict:
    """The arguments of the source's checker call that are constants (a quick-check's question number),
    by position or keyword: the judge takes them from the teacher's notebook, never from the record."""
    call = _parse(f"_f({ex['args']})")
    out = {}
    if call is None:
        return out
    node = call.body[0].value
    for key, arg in [*enumerate(node.args), *((k.arg, k.value) for k in node.keywords)]:
        try:
            value = ast.literal_eval(arg)
        except ValueError:
            continue
        if isinstance(value, int | float | str):  # a question's number or name, not an answer
            out[key] = value
    return out


def grader_cell(ex: dict, plan: dict) -> dict:
    """The grader's cell after a learner's cell: it records the answer (a function: what it returns on the
    plan's public and hidden inputs) and decides nothing; the judge does, in another process."""
    inputs = json.dumps({"params": plan["params"], "calls": plan["calls"]}, separators=(",", ":"))
    code = (
        f"# the grader: records your answer to {ex['grade_id']}; it is judged outside this notebook\n"
        "import json as _g_json\n"
        "from specdec_course.checks._record import record as _g_record\n\n"
        f'_g_record("{ex["grade_id"]}", _g_json.loads({inputs!r}), {ex["args"]})\n'
    )
    meta = {"tags": [GRADER_TAG], "grade_id": ex["grade_id"]}
    cell = {"cell_type": "code", "id": f"grader-{ex['grade_id']}", "metadata": meta, "source": code}
    return cell | {"outputs": [], "execution_count": None}


def graded_notebook(submission, source, exercises, plans) -> tuple[dict, dict]:
    """The notebook to run (the source, the learner's cells from the submission, a grader's cell recording
    the answer after each) and {grade_id: a reason it is not graded by running (missing, not the
    student's own)}."""
    by_id = {c.get("id"): c for c in submission["cells"]}
    by_cell = {ex["cell_id"]: ex for ex in exercises}
    cells, skipped = [], {}
    for cell in copy.deepcopy(source["cells"]):
        if is_reference(cell) or "solution" in _tags(cell):
            continue
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        ex = by_cell.get(cell.get("id"))
        if ex is None:
            cells.append(cell)
            continue
        mine = by_id.get(ex["cell_id"])
        if mine is None:  # an nbgrader release: the exercise is the solution cell, under the reference's id
            ref_id = ex["cell_id"].removesuffix("-try")
            mine = by_id.get(ref_id) if not is_reference(by_id.get(ref_id, {})) else None
        if mine is None or mine.get("cell_type") != "code":
            skipped[ex["grade_id"]] = "missing: the submission has no cell for this exercise"
            continue
        problem = own_answer_problem(_source(mine))
        if problem:
            skipped[ex["grade_id"]] = problem
            continue
        cell["source"] = _source(mine)
        cells += [cell, grader_cell(ex, plans[ex["grade_id"]])]
    nb = copy.deepcopy(source)
    nb["cells"] = cells
    return nb, skipped


MAX_RECORD = 20_000_000  # characters: a record larger than this is not read


def record_in(outputs, grade_id: str) -> dict | None:
    """The record of `grade_id` a grader's cell showed (the last one in its outputs), or None."""
    found = None
    for o in outputs:
        rec = o.get("data", {}).get(RECORD_MIME) if o.get("output_type") == "display_data" else None
        if isinstance(rec, dict) and rec.get("grade_id") == grade_id and len(json.dumps(rec)) <= MAX_RECORD:
            found = rec
    return found


def records(nb) -> dict[str, dict]:
    """{grade_id: the record its grader's cell showed}."""
    out = {}
    for cell in nb["cells"]:
        if GRADER_TAG in _tags(cell):
            rec = record_in(cell.get("outputs", []), cell["metadata"]["grade_id"])
            if rec is not None:
                out[cell["metadata"]["grade_id"]] = rec
    return out


def student_secret(secret: str | None, student: str | None) -> str | None:
    """The secret that seeds one student's hidden cases: the course's and the student's name, so that a
    classmate's record (or a copied answer table) answers other inputs than one's own."""
    return f"{secret or ''}|{student}" if student else secret


def teacher_call(request: dict, teacher: Path | None = None) -> list:
    """Ask the teacher's package, in a fresh process (`python -m specdec_teacher.judge`), for plans or
    verdicts: the teacher's package is imported there only, never here nor in a student's kernel."""
    teacher = Path(teacher or TEACHER)
    if not (teacher / "specdec_teacher").is_dir():
        raise FileNotFoundError(f"the teacher's package is not in {teacher}: grade from a clone, or name it")
    env = {**os.environ, **OFFLINE, "PYTHONPATH": os.pathsep.join([str(ROOT), str(teacher)])}
    run = subprocess.run(
        [sys.executable, "-m", "specdec_teacher.judge"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    if run.returncode != 0:
        raise RuntimeError(f"the teacher's judge failed: {run.stderr[-2000:]}")
    return json.loads(run.stdout)


def plans_for(exercises, secret: str | None = None, teacher: Path | None = None) -> dict[str, dict]:
    """{grade_id: the judge's plan}: the inputs each checker hands a function answer (made by the
    teacher's package from the reference, in its own process)."""
    asks = [
        {
            "module": ex["module"],
            "checker": ex["checker"],
            "fixed": {str(k): v for k, v in fixed_args(ex).items()},
        }
        for ex in exercises
    ]
    if not asks:
        return {}
    return dict(
        zip([ex["grade_id"] for ex in exercises], teacher_call({"plan": asks, "secret": secret}, teacher))
    )


def judged(
    plans: dict, recs: dict, secret: str | None = None, teacher: Path | None = None
) -> dict[str, dict]:
    """{grade_id: verdict} from the teacher's judge, in a fresh process that never ran the student's code."""
    if not plans:
        return {}
    items = [{"plan": plans[g], "record": recs.get(g)} for g in plans]
    return dict(zip(plans, teacher_call({"items": items, "secret": secret}, teacher)))


def verdicts(run: dict, exercises, judgements) -> list[dict]:
    """One row per expected exercise: the judge's verdict, with why when the answer was never recorded
    (missing, not the student's own, the learner's cell raised, the notebook stopped)."""
    rows = []
    for ex in exercises:
        gid = ex["grade_id"]
        row = {"grade_id": gid, "checker": ex["checker"], "points": ex["points"], "kind": ex.get("kind")}
        seen = run["answers"].get(gid, {})
        judged_row = judgements.get(gid)
        if gid in run["skipped"]:
            row |= {"verdict": "incorrect", "title": ex["checker"], "detail": str(run["skipped"][gid])}
        elif judged_row["verdict"] == "correct" or (seen.get("record") and not seen.get("raised")):
            row |= {k: str(judged_row[k]) for k in ("verdict", "title", "detail")}
        elif seen.get("raised"):
            row |= {
                "verdict": "incorrect",
                "title": ex["checker"],
                "detail": f"the cell raised {seen['raised']}",
            }
        else:
            error = seen.get("record_error")
            fallback = run.get("stopped") or (judged_row or {}).get("detail") or "no answer was recorded"
            why = f"the answer could not be recorded: {error}" if error else fallback
            row |= {"verdict": "incorrect", "title": ex["checker"], "detail": str(why)}
        row["score"] = row["points"] if row["verdict"] == "correct" else 0.0
        rows.append(row)
    return rows


def _kernel_path() -> str:
    """The kernel's PYTHONPATH: the repository, and nothing that holds the teacher's package."""
    parts = [str(ROOT), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    keep = [p for p in parts if p and not (Path(p) / "specdec_teacher").is_dir()]
    return os.pathsep.join(dict.fromkeys(keep))


def _execute(nb, timeout: int) -> str | None:
    """Run a notebook in place (its cells get their outputs) in a fresh kernel whose path does not hold
    the teacher's package, in an empty folder; returns why it stopped early, or None."""
    import nbformat
    from nbclient import NotebookClient

    node = nbformat.reads(json.dumps(nb), as_version=4)
    env_before = dict(os.environ)
    os.environ.update(OFFLINE)
    os.environ["PYTHONPATH"] = _kernel_path()
    try:
        with tempfile.TemporaryDirectory(prefix="specdec-grade-") as work:
            client = NotebookClient(
                node,
                timeout=timeout,
                kernel_name="python3",
                allow_errors=True,
                resources={"metadata": {"path": work}},
            )
            client.execute()
        return None
    except Exception as e:  # a timeout or a dead kernel: grade what ran, the rest is incorrect
        return f"the notebook stopped before this check ran: {type(e).__name__}: {str(e).strip()[:200]}"
    finally:
        nb["cells"] = json.loads(nbformat.writes(node))["cells"]
        os.environ.clear()
        os.environ.update(env_before)


# ------------------------------------------------------------------------ the three phases of grading
def assignment(source: Path, secret: str | None = None, teacher: Path | None = None) -> dict:
    """What recording a chapter's submissions needs (the teacher's side, once per chapter): its title and
    cell ids (to recognise a submission), its exercises, their plans (inputs, never answers) and the
    notebook to run, without its reference solutions and notes."""
    nb = json.loads(Path(source).read_text(encoding="utf-8"))
    exercises = expected_exercises(nb)
    skeleton = copy.deepcopy(nb)
    skeleton["cells"] = [c for c in nb["cells"] if not is_reference(c) and "solution" not in _tags(c)]
    return {
        "chapter": Path(source).stem,
        "title": _title(nb),
        "ids": sorted(_ids(nb)),
        "exercises": exercises,
        "plans": plans_for(exercises, secret, teacher),
        "notebook": skeleton,
    }


def _recognise(submission, assignments: list[dict]) -> tuple[dict | None, str]:
    """The chapter a submission was made from: the same title, and at least half of the chapter's cells
    (by id) still there; or None and why."""
    title, ids = _title(submission), _ids(submission)
    for a in assignments:
        if a["title"] == title and len(set(a["ids"]) & ids) >= len(a["ids"]) / 2:
            return a, ""
    names = (
        ", ".join(a["chapter"] for a in assignments) if len(assignments) < 3 else "any chapter of the course"
    )
    return None, f"it is not {names}: its title is {title[:60]!r}"


def record_submission(
    path: Path, assignments: list[dict], timeout: int = 300, student: str | None = None
) -> dict:
    """Run one submission and keep what the judge needs (the student's side: needs no teacher's package):
    {"student", "submission", "chapter", "error", "skipped", "answers": {grade_id: {"record", "raised",
    "record_error"}}}."""
    path = Path(path)
    run = {"student": student or path.stem, "submission": str(path), "chapter": None, "error": None}
    run |= {"skipped": {}, "answers": {}}
    try:
        submission = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(submission.get("cells"), list)
    except Exception as e:  # not a notebook, or broken JSON
        run["error"] = f"cannot read the notebook: {type(e).__name__}: {e}"
        return run
    found, why = _recognise(submission, assignments)
    if found is None:
        run["error"] = f"not graded: {why}"
        return run
    run["chapter"] = found["chapter"]
    nb, run["skipped"] = graded_notebook(submission, found["notebook"], found["exercises"], found["plans"])
    run["error"] = run["stopped"] = _execute(nb, timeout)
    recs = records(nb)
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if GRADER_TAG in _tags(cell):
            gid = cell["metadata"]["grade_id"]
            run["answers"][gid] = {
                "record": recs.get(gid),
                "raised": _error(cells[i - 1].get("outputs", [])),
                "record_error": _error(cell.get("outputs", [])),
            }
    return run


def judge_submission(
    run: dict, assignments: list[dict], secret: str | None = None, teacher: Path | None = None
):
    """The grade of one recorded submission (the teacher's side): {"student", "submission", "chapter",
    "exercises", "score", "max", "error"}. The run is data from where the student's code ran: only its
    records are judged, by the teacher's package in a fresh process, against the teacher's own plans."""
    result = {k: run.get(k) for k in ("student", "submission", "chapter", "error")}
    result |= {"exercises": [], "score": 0.0, "max": 0.0}
    found = next((a for a in assignments if a["chapter"] == run.get("chapter")), None)
    if found is None:
        result["error"] = run.get("error") or "not graded: no such chapter in the assignments"
        return result
    exercises, skipped = found["exercises"], run.get("skipped") or {}
    result["max"] = sum(ex["points"] for ex in exercises)
    todo = {g: p for g, p in found["plans"].items() if g not in skipped}
    recs = {g: a.get("record") for g, a in (run.get("answers") or {}).items() if isinstance(a, dict)}
    judgements = judged(todo, {g: r for g, r in recs.items() if r}, secret, teacher)
    clean = {"skipped": skipped, "answers": run.get("answers") or {}, "stopped": run.get("stopped")}
    result["exercises"] = verdicts(clean, exercises, judgements)
    result["score"] = sum(r["score"] for r in result["exercises"])
    return result


def grade(
    path: Path,
    timeout: int = 300,
    source: Path | None = None,
    student: str | None = None,
    secret: str | None = None,
    teacher: Path | None = None,
) -> dict:
    """Grade one submission, the three phases in one go (see `main` for running them apart)."""
    path = Path(path)
    run = {"student": student or path.stem, "submission": str(path), "chapter": None, "error": None}
    try:
        submission = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(submission.get("cells"), list)
    except Exception as e:  # not a notebook, or broken JSON
        run["error"] = f"cannot read the notebook: {type(e).__name__}: {e}"
        return judge_submission(run, [], secret, teacher)
    sources = [Path(source)] if source else sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
    found, why = find_source(submission, sources)
    if found is None:
        run["error"] = f"not graded: {why}" + (f" (expected {Path(source).name})" if source else "")
        return judge_submission(run, [], secret, teacher)
    mine = student_secret(secret, run["student"])
    chapter = assignment(found, mine, teacher)
    return judge_submission(record_submission(path, [chapter], timeout, student), [chapter], mine, teacher)


def table(result: dict) -> str:
    chapter = f" [{result['chapter']}]" if result["chapter"] else ""
    lines = [
        f"{result['student']}{chapter}: {result['score']:g}/{result['max']:g} points ({result['submission']})"
    ]
    if result["error"]:
        lines.append(f"  note: {result['error']}")
    for r in result["exercises"]:
        detail = f" — {r['detail']}" if r["detail"] else ""
        kind = f" [{r['kind']}: 0 points]" if r.get("kind") in ("practice", "library") else ""
        lines.append(
            f"  {r['grade_id']:14s} {r['score']:g}/{r['points']:g} {r['verdict']:14s} {r['title']}{detail}{kind}"
        )
    return "\n".join(lines)


def write_gradebook(results: list[dict], path: Path) -> None:
    """A CSV with a row per submission and a column per exercise (its score)."""
    ids = list(dict.fromkeys(r["grade_id"] for res in results for r in res["exercises"]))
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["student", "chapter", "score", "max", *ids, "note"])
        for res in results:
            scores = {r["grade_id"]: f"{r['score']:g}" for r in res["exercises"]}
            row = [res["student"], res["chapter"] or "", f"{res['score']:g}", f"{res['max']:g}"]
            out.writerow(row + [scores.get(i, "") for i in ids] + [res["error"] or ""])


def write_feedback(result: dict, folder: Path) -> Path:
    """The student's feedback: each exercise's verdict, with the checker's hint."""
    path = Path(folder) / result["student"] / f"{result['chapter'] or 'submission'}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table(result) + "\n", encoding="utf-8")
    return path


def student_name(path: Path, name_from: str = "folder") -> str:
    """A submission's student: its folder's name (alice/03_rejection_sampling.ipynb is alice's), or its
    file's name without the extension."""
    path = Path(path).resolve()
    return path.parent.name if name_from == "folder" else path.stem


def course_submissions(course: Path, assignment: str) -> list[tuple[str, Path]]:
    """(student, notebook) for nbgrader's layout COURSE/submitted/<student>/<assignment>/*.ipynb."""
    return [(p.parents[1].name, p) for p in sorted(Path(course).glob(f"submitted/*/{assignment}/*.ipynb"))]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", nargs="*", type=Path)
    ap.add_argument("--course", type=Path, help="an nbgrader course folder (with submitted/<student>/...)")
    ap.add_argument("--assignment", help="with --course: the assignment's folder name")
    ap.add_argument(
        "--source", type=Path, help="the teacher's notebook (default: recognised among notebooks/)"
    )
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    ap.add_argument("--json", type=Path, default=None, help="also write every verdict to this file")
    ap.add_argument("--csv", type=Path, default=None, help="a gradebook: a row per student")
    ap.add_argument("--feedback", type=Path, default=None, help="a folder for one feedback file per student")
    ap.add_argument(
        "--name-from",
        choices=["folder", "file"],
        default="folder",
        help="a named submission's student: its folder's name (default; STUDENT/03_x.ipynb) or its file's",
    )
    ap.add_argument(
        "--secret-file", type=Path, help="a file with the course's secret: it moves the hidden cases"
    )
    ap.add_argument(
        "--teacher", type=Path, help="the folder that holds specdec_teacher (default: the clone's)"
    )
    ap.add_argument(
        "--write-assignments",
        type=Path,
        help="phase 1 (teacher's side): write the plans of --source (default: every chapter) for --students",
    )
    ap.add_argument(
        "--students",
        nargs="+",
        help="with --write-assignments: the students, each with hidden cases of their own",
    )
    ap.add_argument(
        "--assignments", type=Path, help="the file of --write-assignments: record without the teacher"
    )
    ap.add_argument(
        "--records-out",
        type=Path,
        help="phase 2 (where students' code runs): write each run here, judge nothing",
    )
    ap.add_argument("--judge", type=Path, help="phase 3 (teacher's side): judge the runs in this folder")
    return ap


def _need_teacher(ap, teacher: Path) -> None:
    if not (teacher / "specdec_teacher").is_dir():
        ap.error(
            f"the teacher's package is missing ({teacher / 'specdec_teacher'}): grade from a clone, or --teacher"
        )


def _assignments_of(ap, args, student: str) -> list[dict]:
    """A student's plans from --assignments (phase 1's file)."""
    if not args.assignments:
        ap.error("--records-out and --judge need --assignments (the file of --write-assignments)")
    per_student = json.loads(args.assignments.read_text(encoding="utf-8"))["students"]
    if student not in per_student:
        ap.error(f"{student} is not among the students of {args.assignments}: write it with --students")
    return per_student[student]


def _write_assignments(ap, args, teacher: Path, secret: str | None) -> int:
    """Phase 1 (the teacher's side): each student's plans of --source (default: every chapter)."""
    _need_teacher(ap, teacher)
    if not args.students:
        ap.error("--write-assignments needs --students: each student's hidden cases are their own")
    sources = [args.source] if args.source else sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
    data = {
        "students": {
            name: [assignment(p, student_secret(secret, name), teacher) for p in sources]
            for name in args.students
        }
    }
    args.write_assignments.write_text(json.dumps(data, ensure_ascii=False) + "\n", encoding="utf-8")
    chapters = ", ".join(p.stem for p in sources)
    print(f"wrote {args.write_assignments}: the plans of {chapters} for {len(args.students)} students")
    return 0


def _judge_folder(ap, args, teacher: Path, secret: str | None) -> int:
    """Phase 3 (the teacher's side): judge the runs phase 2 wrote into --judge."""
    _need_teacher(ap, teacher)
    results = []
    for student, files in judged_runs(args.judge).items():
        try:
            if len(files) != 1:
                raise ValueError(f"{len(files)} run files in its folder, one expected: record it again")
            run = json.loads(files[0].read_text(encoding="utf-8")) | {"student": student}
            mine = student_secret(secret, student)
            results.append(judge_submission(run, _assignments_of(ap, args, student), mine, teacher))
        except Exception as e:  # a run file that is not what phase 2 writes: that student only
            results.append(_failed(student, files[0], e))
    return _report(results, args)


def _submissions(ap, args) -> list[tuple[str, Path]]:
    """(student, notebook) for each named submission and each of --course's, one per student."""
    todo = [(student_name(p, args.name_from), p) for p in args.submissions]
    if args.course:
        if not args.assignment:
            ap.error("--course needs --assignment")
        todo += course_submissions(args.course, args.assignment)
    if not todo:
        ap.error("nothing to grade: name submissions, or --course and --assignment")
    names = [s for s, _ in todo]
    twice = sorted({s for s in names if names.count(s) > 1})
    if twice:
        ap.error(
            f"two submissions would be graded as the same student ({', '.join(twice)}): put each student's "
            "notebook in a folder of its own, named after them (or use --name-from file)"
        )
    return todo


def _record_only(ap, args, todo) -> int:
    """Phase 2 alone (where students' code runs): record one submission, judge nothing, no teacher's
    package needed."""
    if len(todo) != 1:
        ap.error("--records-out records one submission: run one container per student (book/setup.md)")
    args.records_out.mkdir(parents=True, exist_ok=True)
    for student, path in todo:
        try:
            run = record_submission(path, _assignments_of(ap, args, student), args.timeout, student)
        except Exception as e:
            run = _failed(student, path, e) | {"skipped": {}, "answers": {}}
        out = args.records_out / f"{student}.json"
        out.write_text(json.dumps(run, ensure_ascii=False) + "\n", encoding="utf-8")
        errors = f" ({run['error']})" if run["error"] else ""
        print(f"{student}: recorded {len(run['answers'])} answers in {out}{errors}")
    return 0


def _grade_here(ap, args, todo, teacher: Path, secret: str | None) -> int:
    """Record and judge each submission on this machine (with --assignments: by the three phases' plans)."""
    _need_teacher(ap, teacher)
    results = []
    for student, path in todo:
        try:
            if args.assignments:
                mine, plans = student_secret(secret, student), _assignments_of(ap, args, student)
                run = record_submission(path, plans, args.timeout, student)
                results.append(judge_submission(run, plans, mine, teacher))
            else:
                results.append(grade(path, args.timeout, args.source, student, secret, teacher))
        except Exception as e:  # a submission that breaks the grader fails alone, with the reason
            results.append(_failed(student, path, e))
        print(table(results[-1]), flush=True)
        if args.feedback:
            write_feedback(results[-1], args.feedback)
    _write(results, args)
    return 0


def main(argv=None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    teacher = args.teacher or TEACHER
    secret = args.secret_file.read_text(encoding="utf-8").strip() if args.secret_file else None
    if args.write_assignments:
        return _write_assignments(ap, args, teacher, secret)
    if args.judge:
        return _judge_folder(ap, args, teacher, secret)
    todo = _submissions(ap, args)
    if args.records_out:
        return _record_only(ap, args, todo)
    return _grade_here(ap, args, todo, teacher, secret)


def judged_runs(folder: Path) -> dict[str, list[Path]]:
    """{student: run files} of phase 2's output: one folder per student (what a container per student,
    with only its own folder mounted, writes: the student is the folder's name, whatever the file says),
    or the runs side by side (student = file name)."""
    folder = Path(folder)
    out: dict[str, list[Path]] = {}
    for path in sorted(folder.rglob("*.json")):
        student = path.stem if path.parent == folder else path.relative_to(folder).parts[0]
        out.setdefault(student, []).append(path)
    return out


def _failed(student: str, path, error: Exception) -> dict:
    why = f"cannot grade this submission: {type(error).__name__}: {str(error)[:200]}"
    return {"student": student, "submission": str(path), "chapter": None, "exercises": [], "score": 0.0} | {
        "max": 0.0,
        "error": why,
    }


def _report(results, args) -> int:
    for result in results:
        print(table(result), flush=True)
        if args.feedback:
            write_feedback(result, args.feedback)
    _write(results, args)
    return 0


def _write(results, args) -> None:
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    if args.csv:
        write_gradebook(results, args.csv)


if __name__ == "__main__":
    sys.exit(main())
