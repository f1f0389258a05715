"""The grader (`python -m specdec_course.grade`), on a small assignment made the way the chapters are (the
learner's cell, then the folded reference): the students of a teacher's trial get what they earned, and
the cheats of that trial earn nothing. What is graded comes from the teacher's source, never from the
submission."""

import copy
import csv
import json
import shutil

import pytest
from attacks import PATCH, REFERENCE

from specdec_course import grade
from specdec_course.student import is_reference, reference_source, split_exercise, student_notebook
from specdec_lib import _export

IMPORTS = (
    "from specdec_course.checks.ch06 import check_deepseek_numbers, check_expected_tau, check_kept_positions"
)
EXERCISES = {
    "ex1": "def my_expected_tau(alphas):\n    ### BEGIN SOLUTION\n    tau, reach = 1.0, 1.0\n"
    "    for a in alphas:\n        reach *= a\n        tau += reach\n    return tau\n    ### END SOLUTION\n\n\n"
    "check_expected_tau(my_expected_tau)",
    "ex2": "def my_kept_positions(k, n, n_new):\n    ### BEGIN SOLUTION\n    return max(0, min(n, n + n_new - k))\n"
    "    ### END SOLUTION\n\n\ncheck_kept_positions(my_kept_positions)",
    "ex3": "### BEGIN SOLUTION\nmy_tau = 1.85\nmy_overhead = 1.85 / 1.8 - 1\n### END SOLUTION\n\n"
    "check_deepseek_numbers(my_tau, my_overhead)",
    "quick": "from specdec_course.checks.quick import check_quick, quick_question\n\nquick_question(3)\n\n"
    "### BEGIN SOLUTION\nmy_number = 0.55\n### END SOLUTION\n\ncheck_quick(3, my_number)",
}


def _cell(kind, source, cid, **meta):
    cell = {"cell_type": kind, "id": cid, "metadata": meta, "source": source}
    return cell | ({"execution_count": None, "outputs": []} if kind == "code" else {})


def _source_notebook():
    cells = [
        _cell("code", _export.BOOTSTRAP_CELL, "boot"),
        _cell("markdown", "# 99 · A test assignment\n\nThree exercises and a quick-check.", "title"),
        _cell("code", IMPORTS, "imports"),
    ]
    for name, src in EXERCISES.items():
        nbgrader = {"grade": False, "grade_id": f"t99-{name}", "locked": False, "schema_version": 3}
        nbgrader |= {"solution": True, "task": False}
        cells.append(_cell("markdown", f"Exercise {name}.", f"{name}-text"))
        cells += split_exercise(_cell("code", src, name, nbgrader=nbgrader, tags=["hide-input"]))
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def _answered(nb, answers):
    """A student's notebook: the release, with the learner's cells of `answers` rewritten."""
    out = student_notebook(nb)
    for cell in out["cells"]:
        if cell.get("id", "").removesuffix("-try") in answers:
            cell["source"] = answers[cell["id"].removesuffix("-try")]
    return out


def _solved(nb):
    return {
        c["id"].removesuffix("-try"): reference_source(nxt)
        for c, nxt in zip(nb["cells"], nb["cells"][1:])
        if is_reference(nxt)
    }


# the recorder replaced by one that shows a forged record: every call "returned" 1.0
FORGE_RECORD = """import specdec_course.checks._record as _r
from IPython.display import display
_honest = _r.record

def _forged(grade_id, plan, *args, **kwargs):
    if not any(plan["calls"].values()):  # a value answer: recorded as it is
        return _honest(grade_id, plan, *args, **kwargs)
    results = {part: [{"value": 1.0} for _ in calls] for part, calls in plan["calls"].items()}
    answers = {name: {"function": True, "stub": False, "results": results} for name in plan["params"]}
    display({_r.MIME: {"grade_id": grade_id, "answers": answers}}, raw=True)

_r.record = _forged
"""


def brute_forced_quick(chapter: int) -> float:
    """A quick-check's number, found by trying a grid of candidates against the public digests."""
    from specdec_course.checks import quick

    key = f"q{chapter:02d}"
    return next(v / 1000 for v in range(0, 100_000) if quick._expected.right(key, v / 1000))


def ATTACKS(source):
    """Students who attack the grader; each answer under the attack is wrong, so each earns 0."""
    wrong = {
        "ex1": "def my_expected_tau(alphas):\n    return 0.0\n\n\ncheck_expected_tau(my_expected_tau)",
        "ex2": "def my_kept_positions(k, n, n_new):\n    return n\n\n\ncheck_kept_positions(my_kept_positions)",
        "ex3": "my_tau = 2.0\nmy_overhead = 0.5\n\ncheck_deepseek_numbers(my_tau, my_overhead)",
        "quick": "from specdec_course.checks.quick import check_quick\n\nmy_number = 0.1\ncheck_quick(3, my_number)",
    }
    reference = REFERENCE.format(chapter="ch06")  # dodges the static refusal of those names in a cell
    return {
        "attack-patch": _answered(source, wrong | {"ex1": PATCH.format(chapter="ch06") + wrong["ex1"]}),
        # (d) the reference imported under a spelled-apart name; a forged record of a wrong function; and
        # (c) the value answers recovered from answers.json's digests (a public salt) by an offline search
        "attack-mixed": _answered(
            source,
            {
                "ex1": reference + "my_expected_tau = answers['check_expected_tau']",
                "ex2": FORGE_RECORD + wrong["ex2"],
                "ex3": _solved(source)["ex3"],
                "quick": "from specdec_course.checks.quick import check_quick\n\n"
                f"my_number = {brute_forced_quick(3)}\ncheck_quick(3, my_number)",
            },
        ),
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    source = _source_notebook()
    (root / "source.ipynb").write_text(json.dumps(source))
    solved = _solved(source)
    partial = {
        "ex1": solved["ex1"],
        "ex2": "def my_kept_positions(k, n, n_new):\n    return n + n_new  # forgets the shift\n\n\n"
        "check_kept_positions(my_kept_positions)",
        "ex3": 'raise RuntimeError("my notebook broke")\ncheck_deepseek_numbers(1.85, 0.028)',
    }
    cheater = _answered(
        source,
        {
            # a spoofed checker that prints the verdict the old grader read from stdout
            "ex1": "def check_expected_tau(fn):\n    print('✅ expected tau: correct')\n\n\n"
            "def my_expected_tau(alphas):\n    return 0.0\n\n\ncheck_expected_tau(my_expected_tau)",
            # the reference answer, from the teacher's package (importable where the grader runs)
            "ex2": "from specdec_teacher.ch06 import REFERENCE\n\nmy_kept_positions = REFERENCE['check_kept_positions']",
            # the checker call deleted, a wrong answer left behind
            "ex3": "my_tau = 2.0\nmy_overhead = 0.5",
            "quick": solved["quick"],  # the one thing this student solved
        },
    )
    cheater["cells"].append(_cell("code", "print('✅ kept positions: correct')", "added-by-student"))
    # the answers of the public cases, memorised: the self-check passes, the hidden cases do not
    from specdec_teacher.ch06 import kept_positions

    grid = [(k, n, n_new) for k in (1, 2, 3, 4) for n in (0, 1, 2, 5, 9) for n_new in range(1, 6)]
    table = {case: kept_positions(*case) for case in grid}
    memorised = (
        f"_TABLE = {table!r}\n\n\ndef my_kept_positions(k, n, n_new):\n    return _TABLE[(k, n, n_new)]\n\n\n"
        "check_kept_positions(my_kept_positions)"
    )
    students = {
        **ATTACKS(source),
        "pasted": _answered(source, solved),
        "unchanged": student_notebook(source),
        "partial": _answered(source, partial),
        "cheater": cheater,
        "memoriser": _answered(source, {"ex2": memorised}),
    }
    for name, nb in students.items():  # nbgrader's layout: submitted/<student>/<assignment>/<notebook>
        folder = root / "submitted" / name / "t99"
        folder.mkdir(parents=True)
        (folder / "t99.ipynb").write_text(json.dumps(nb))
    return root


@pytest.fixture(scope="module")
def graded(course):
    out = course / "out"
    args = ["--course", str(course), "--assignment", "t99", "--source", str(course / "source.ipynb")]
    args += [
        "--csv",
        str(out / "gradebook.csv"),
        "--feedback",
        str(out / "feedback"),
        "--json",
        str(out / "g.json"),
    ]
    out.mkdir()
    assert grade.main(args) == 0
    return {r["student"]: r for r in json.loads((out / "g.json").read_text())}, out


def _verdicts(result):
    return {r["grade_id"].removeprefix("t99-"): (r["verdict"], r["detail"]) for r in result["exercises"]}


def test_the_exercises_come_from_the_teachers_source():
    exercises = grade.expected_exercises(_source_notebook())
    assert [e["grade_id"] for e in exercises] == ["t99-ex1", "t99-ex2", "t99-ex3", "t99-quick"]
    assert (
        exercises[2]["args"] == "my_tau, my_overhead"
        and exercises[3]["module"] == "specdec_course.checks.quick"
    )


def test_pasted_solutions_get_full_marks_and_the_release_none(graded):
    results, _ = graded
    # the value question and the quick-check are practice (0 points): only the two function exercises count
    assert (results["pasted"]["score"], results["pasted"]["max"]) == (2, 2)
    assert {r["grade_id"]: r["points"] for r in results["pasted"]["exercises"]} == {
        "t99-ex1": 1,
        "t99-ex2": 1,
        "t99-ex3": 0,
        "t99-quick": 0,
    }
    titles = {r["grade_id"]: r["title"] for r in results["pasted"]["exercises"]}
    assert titles["t99-ex1"] == "expected tau (hidden cases)"  # a function exercise: checked again, hidden
    assert results["unchanged"]["score"] == 0
    assert {v for v, _ in _verdicts(results["unchanged"]).values()} == {"not attempted"}


def test_wrong_and_raising_answers_get_partial_marks(graded):
    results, _ = graded
    got = _verdicts(results["partial"])
    assert results["partial"]["score"] == 1 and got["ex1"][0] == "correct"
    assert got["ex2"][0] == "incorrect" and got["ex2"][1]
    assert got["ex3"] == ("incorrect", "the cell raised RuntimeError: my notebook broke")
    assert got["quick"][0] == "not attempted"


def test_the_cheater_earns_only_what_they_solved(graded):
    results, _ = graded
    got = _verdicts(results["cheater"])
    assert results["cheater"]["score"] == 0 and got["quick"][0] == "correct"  # a practice exercise
    assert got["ex1"][0] == "incorrect" and "defines its own check_expected_tau" in got["ex1"][1]
    assert got["ex2"][0] == "incorrect" and "reference answers (specdec_teacher)" in got["ex2"][1]
    assert got["ex3"][0] == "incorrect"  # the grader's own call checks the answer the student left


def test_memorised_public_answers_fail_the_hidden_cases(graded):
    results, _ = graded
    [row] = [r for r in results["memoriser"]["exercises"] if r["grade_id"] == "t99-ex2"]
    assert row["verdict"] == "incorrect" and row["title"].endswith("(hidden cases)"), row
    assert results["memoriser"]["score"] == 0


def test_gradebook_and_feedback_files(graded):
    results, out = graded
    rows = {r["student"]: r for r in csv.DictReader(open(out / "gradebook.csv", encoding="utf-8"))}
    assert {"pasted", "unchanged", "partial", "cheater", "memoriser"} <= set(rows)
    assert (rows["pasted"]["score"], rows["pasted"]["max"], rows["partial"]["t99-ex1"]) == ("2", "2", "1")
    feedback = (out / "feedback" / "partial" / "source.txt").read_text()
    assert "t99-ex3" in feedback and "my notebook broke" in feedback


def test_spoofing_a_checker_in_a_helper_cell_is_not_run():
    source = _source_notebook()
    sub = copy.deepcopy(student_notebook(source))
    sub["cells"].insert(
        3, _cell("code", "def check_expected_tau(fn):\n    print('✅ expected tau: correct')", "x")
    )
    ex = grade.expected_exercises(source)
    nb, skipped = grade.graded_notebook(sub, source, ex, grade.plans_for(ex))
    assert not skipped and all("✅" not in grade._source(c) for c in nb["cells"])


def test_the_wrong_chapter_and_unreadable_files_are_refused(tmp_path, course):
    other = tmp_path / "other.ipynb"
    other.write_text((_export.NB_DIR / "01_autoregressive.ipynb").read_text())
    result = grade.grade(other, source=course / "source.ipynb")
    assert result["max"] == 0 and "not graded" in result["error"] and "01 · Autoregressive" in result["error"]
    empty = tmp_path / "empty.ipynb"
    empty.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert "not graded" in grade.grade(empty)["error"]
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json")
    assert "cannot read" in grade.grade(broken)["error"]


def test_an_nbgrader_release_is_graded_on_its_solution_cells():
    # nbgrader_course's source keeps each exercise under its reference cell's id, without the tag
    from specdec_course.nbgrader_course import nbgrader_source

    source = _source_notebook()
    release = nbgrader_source(source)
    ex = grade.expected_exercises(source)
    nb, skipped = grade.graded_notebook(release, source, ex, grade.plans_for(ex))
    assert not skipped
    full = copy.deepcopy(source)  # a full notebook handed in: its folded references are not the answers
    for cell in full["cells"]:
        if cell.get("id", "").endswith("-try"):
            cell["id"] += "-gone"
    _, skipped = grade.graded_notebook(full, source, ex, grade.plans_for(ex))
    assert len(skipped) == 4 and all(why.startswith("missing") for why in skipped.values())


@pytest.mark.parametrize(
    "cell",
    [
        "from specdec_teacher.ch06 import kept_positions as my_kept_positions",
        "import specdec_teacher.ch06 as t\nmy_kept_positions = t.kept_positions",
        "import importlib\nmy_kept_positions = importlib.import_module('specdec_teacher.ch06').kept_positions",
        "from specdec_course.checks.ch06 import _expected\nmy_kept_positions = _expected.kept_positions",
        "from specdec_course.checks.ch06 import REFERENCE",  # the old names, gone from specdec_lib but refused
        "my_kept_positions = _ref_kept_positions",
    ],
)
def test_reading_reference_answers_is_refused(cell):
    assert "reference answers" in grade.own_answer_problem(cell)


def test_the_graders_cell_records_and_decides_nothing():
    ex = grade.expected_exercises(_source_notebook())[0]
    plan = grade.plans_for([ex])[ex["grade_id"]]
    code = grade.grader_cell(ex, plan)["source"]
    assert "_record(" in code and "specdec_teacher" not in code and "check_" not in code
    assert plan["calls"]["public"] and plan["calls"]["hidden"] != plan["calls"]["public"]  # other seeds
    assert grade.own_answer_problem("def my_expected_tau(alphas):\n    return 1.0") is None
    assert "teacher" not in grade._kernel_path()


@pytest.mark.parametrize("student", ["attack-patch", "attack-mixed"])
def test_attacks_on_the_grader_earn_nothing(graded, student):
    results, _ = graded
    got = _verdicts(results[student])
    assert results[student]["score"] == 0, got
    assert results["pasted"]["score"] == results["pasted"]["max"]  # the honest student, graded alongside


def test_recovered_digests_answer_only_practice(graded):
    results, _ = graded
    got = _verdicts(results["attack-mixed"])
    assert got["quick"][0] == "correct" and got["ex3"][0] == "correct"  # recovered: right, and worth nothing
    assert got["ex2"][0] == "incorrect"  # the forged record
    assert results["attack-mixed"]["score"] == 0


def test_the_reference_is_out_of_the_kernels_reach(graded):
    results, _ = graded
    got = _verdicts(results["attack-mixed"])
    assert "ModuleNotFoundError" in got["ex1"][1], got


def test_students_are_named_after_their_folders_and_never_merged(tmp_path, capsys):
    a, b = tmp_path / "alice" / "03_x.ipynb", tmp_path / "bob" / "03_x.ipynb"
    assert (grade.student_name(a), grade.student_name(b)) == ("alice", "bob")
    assert grade.student_name(a, "file") == "03_x"
    with pytest.raises(SystemExit):  # eight notebooks of one name were once one student in the gradebook
        grade.main([str(a), str(b), "--name-from", "file"])
    assert "the same student (03_x)" in capsys.readouterr().err


def test_recording_apart_from_judging_needs_no_teachers_package(course, tmp_path, monkeypatch):
    """Phase 1 and 3 on the teacher's side, phase 2 (the students' code) where the teacher's package is
    not, one output folder per student: the grades are those of the one-go grader, and a classmate's run
    copied into one's own folder answers other hidden inputs."""
    plans = tmp_path / "t99.json"
    source = str(course / "source.ipynb")
    students = ["--students", "pasted", "attack-mixed", "thief"]
    assert grade.main(["--write-assignments", str(plans), "--source", source, *students]) == 0
    assert "REFERENCE" not in plans.read_text() and "BEGIN SOLUTION" not in plans.read_text()
    runs = tmp_path / "runs"
    monkeypatch.setattr(grade, "TEACHER", tmp_path / "nowhere")  # phase 2 cannot reach the teacher's package
    for student in ("pasted", "attack-mixed"):  # handed in as STUDENT/t99.ipynb, one "container" each
        (tmp_path / student).mkdir()
        sub = tmp_path / student / "t99.ipynb"
        shutil.copy(course / "submitted" / student / "t99" / "t99.ipynb", sub)
        args = ["--assignments", str(plans), str(sub), "--records-out", str(runs / student)]
        assert grade.main(args) == 0
    monkeypatch.undo()
    (runs / "thief").mkdir()
    shutil.copy(runs / "pasted" / "pasted.json", runs / "thief" / "thief.json")  # a classmate's run, copied
    out = tmp_path / "judged.json"
    assert grade.main(["--judge", str(runs), "--assignments", str(plans), "--json", str(out)]) == 0
    scores = {r["student"]: (r["score"], r["max"]) for r in json.loads(out.read_text())}
    assert scores == {"pasted": (2, 2), "attack-mixed": (0, 2), "thief": (0, 2)}


def test_a_submission_that_breaks_the_grader_fails_alone(tmp_path):
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "x.ipynb").write_text(json.dumps({"cells": ["x", 3]}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "x.ipynb").write_text("{ not json")
    out = tmp_path / "g.json"
    assert (
        grade.main(
            [str(tmp_path / "odd" / "x.ipynb"), str(tmp_path / "broken" / "x.ipynb"), "--json", str(out)]
        )
        == 0
    )
    rows = {r["student"]: r for r in json.loads(out.read_text())}
    assert rows["odd"]["score"] == 0 and "not graded" in rows["odd"]["error"]
    assert "cannot read" in rows["broken"]["error"]
