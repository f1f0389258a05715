"""`make student`: student notebooks keep every exercise and checker but no solution text, while the full
notebooks keep their solutions between nbgrader's markers (so `nbgrader generate_assignment` works too)."""

import json
import re
from pathlib import Path

import pytest

from specdec_course.student import (
    BEGIN,
    END,
    EXERCISE_TAG,
    REFERENCE_TITLE,
    is_reference,
    reference_source,
    solution_regions,
    strip_solutions,
    student_notebook,
    sync_exercises,
)

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _src(cell):
    return "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_notebook_has_every_exercise_and_no_solution(path):
    full = json.loads(path.read_text())
    student = student_notebook(full)
    student_text = "\n".join(_src(c) for c in student["cells"])
    exercises = [c for c in full["cells"] if c["cell_type"] == "code" and BEGIN in _src(c)]
    assert len(exercises) >= 3, "a chapter has at least three exercises with reference solutions"
    assert BEGIN not in student_text and END not in student_text
    for cell in exercises:
        assert cell["metadata"]["nbgrader"]["solution"] is True  # what nbgrader's ClearSolutions expects
        assert "hide-input" in cell["metadata"]["tags"]  # folded on the full website
        others = "\n".join(
            _src(c)
            for c in full["cells"]
            if c is not cell and "solution" not in c["metadata"].get("tags", [])
        )
        outside = strip_solutions(_src(cell))
        for region in solution_regions(_src(cell)):
            telling = [
                line.strip()
                for line in region
                if line.strip() and not line.strip().startswith("#") and line.strip() not in others + outside
            ]
            assert telling, f"{path.name}: a solution with no line of its own to look for: {region}"
            leaked = [line for line in telling if line in student_text]
            assert not leaked, f"{path.name}: the student notebook still shows {leaked}"
    for cell in full["cells"]:
        if "solution" in cell["metadata"].get("tags", []):
            body = _src(cell).split("\n", 2)[-1].strip().split("\n")[0]
            assert body and body not in student_text
    calls = lambda cells: re.findall(r"^check_\w+\(", "\n".join(_src(c) for c in cells), re.M)  # noqa: E731
    learners = [c for c in full["cells"] if not is_reference(c)]
    assert calls(student["cells"]) == calls(learners), "every checker call of the learner's cells stays"
    stubs = [c for c in student["cells"] if EXERCISE_TAG in c["metadata"].get("tags", [])]
    assert [c["metadata"]["nbgrader"]["grade_id"] for c in stubs] == [
        c["metadata"]["nbgrader"]["grade_id"] for c in exercises
    ], "each student stub carries its exercise's nbgrader metadata"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_reference_solutions_are_folded_where_learners_run(path):
    """Each exercise is the learner's cell (the stub, visible) followed by its reference, folded in
    JupyterLab / Notebook 7 (metadata jupyter.source_hidden), Colab (cellView form and an @title first
    line) and on the website (tag hide-input); the stub is the reference's, so the two cannot drift."""
    full = json.loads(path.read_text())
    cells = full["cells"]
    exercises = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and BEGIN in _src(c)]
    assert exercises
    for i in exercises:
        ref, learner = cells[i], cells[i - 1]
        assert is_reference(ref), f"{path.name}: exercise cell {ref['id']} is not split (run student --sync)"
        meta = ref["metadata"]
        assert meta["jupyter"]["source_hidden"] is True and meta["cellView"] == "form"
        assert _src(ref).startswith(REFERENCE_TITLE + "\n") and "hide-input" in meta["tags"]
        assert EXERCISE_TAG in learner["metadata"]["tags"], (
            f"{path.name}: no learner's cell before {ref['id']}"
        )
        assert not learner["metadata"].get("jupyter", {}).get("source_hidden")
        assert "hide-input" not in learner["metadata"]["tags"] and "cellView" not in learner["metadata"]
        assert _src(learner) == strip_solutions(reference_source(ref)), (
            f"{path.name}: stale stub before {ref['id']}"
        )
        assert BEGIN not in _src(learner)
    assert sync_exercises(full) == full, "python -m specdec_course.student --sync would change this notebook"


def test_stubs():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\n\ncheck_f(f)"
    assert (
        strip_solutions(src)
        == "def f(x):\n    # your code here\n    raise NotImplementedError\n\n\ncheck_f(f)"
    )
    src = "# a: a number\n### BEGIN SOLUTION\na = 0.7  # because\nb = (1, 2)\na = 0.8\n### END SOLUTION\ncheck(a, b)"
    assert (
        strip_solutions(src) == "# a: a number\na = ...  # your answer\nb = ...  # your answer\ncheck(a, b)"
    )
    for bad in (f"{BEGIN}\nx = 1", f"x = 1\n{END}", f"{BEGIN}\n{BEGIN}\n{END}\n{END}"):
        with pytest.raises(ValueError):
            strip_solutions(bad)


def test_the_site_check_finds_a_solution_through_syntax_highlighting(tmp_path):
    """`make student` greps the built pages for a line unique to each solution; highlighting splits code
    into spans and escapes quotes, so the check reads the text a browser shows."""
    import html

    from specdec_course.student import page_text, site_leaks, solution_witnesses

    nb_dir, site = tmp_path / "notebooks", tmp_path / "html"
    nb_dir.mkdir()
    (site / "notebooks").mkdir(parents=True)
    path = NOTEBOOKS[-1]
    (nb_dir / path.name).write_text(path.read_text())
    full = json.loads(path.read_text())
    witness = solution_witnesses(full)[0]
    spans = "".join(f'<span class="n">{html.escape(w)}</span> ' for w in witness.split(" "))
    page = site / "notebooks" / f"{path.stem}.html"
    page.write_text(f"<html><body><pre>{spans.rstrip()}</pre><script>{witness}</script></body></html>")
    assert witness in page_text(page.read_text())
    assert site_leaks(site, nb_dir) == [f"{page.name}: {witness}"]
    student_text = "\n".join(_src(c) for c in student_notebook(full)["cells"])
    page.write_text(f"<html><body><pre>{html.escape(student_text)}</pre></body></html>")
    assert site_leaks(site, nb_dir) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbgrader_generate_assignment_rules(path):
    """What `nbgrader generate_assignment` (ClearSolutions) requires, checked without nbgrader: it scans every
    line of every cell, prose included, for the two delimiters, so they may appear only as whole comment lines
    of solution cells, alternating BEGIN / END; and each nbgrader cell has its own grade_id."""
    grade_ids = []
    for cell in json.loads(path.read_text())["cells"]:
        lines = _src(cell).split("\n")
        raw = [line.strip() for line in lines if "BEGIN SOLUTION" in line or "END SOLUTION" in line]
        if raw:
            assert cell["cell_type"] == "code", f"{path.name}: nbgrader would cut this prose: {raw[0]!r}"
            assert raw == [BEGIN, END] * (len(raw) // 2) and len(raw) % 2 == 0, f"{path.name}: {raw}"
            assert cell["metadata"].get("nbgrader", {}).get("solution") is True, f"{path.name}: {raw[0]!r}"
        if "solution" in cell["metadata"].get(
            "tags", []
        ):  # a note on why a solution works: nbgrader stubs it too
            assert cell["metadata"].get("nbgrader", {}).get("solution") is True, f"{path.name}: {lines[0]!r}"
        if "nbgrader" in cell["metadata"]:
            grade_ids.append(cell["metadata"]["nbgrader"]["grade_id"])
    assert len(grade_ids) == len(set(grade_ids)), f"{path.name}: duplicate grade_id"


def test_student_build_has_no_colab_link_to_the_full_notebooks(tmp_path):
    """A Colab badge or launch button on the student site would open the repository's full notebooks."""
    from specdec_course.student import COLAB_BADGE, main

    assert main(["--out", str(tmp_path / "student")]) == 0
    config = (tmp_path / "student" / "_config.yml").read_text()
    assert "colab_url" not in config and "launch_buttons:" in config
    for path in NOTEBOOKS:
        full = path.read_text()
        assert COLAB_BADGE.search("".join(json.loads(full)["cells"][1]["source"])), (
            path.name
        )  # the regex still fits
        student = (tmp_path / "student" / "notebooks" / path.name).read_text()
        assert "colab.research.google.com" not in student, path.name


def test_student_notebooks_install_the_packages_and_never_clone():
    from specdec_course.student import student_packages
    from specdec_lib import _export

    nb = json.loads((_export.NB_DIR / "03_rejection_sampling.ipynb").read_text(encoding="utf-8"))
    boot = "".join(next(c for c in student_notebook(nb)["cells"] if c["cell_type"] == "code")["source"])
    assert "git clone" not in boot and 'pip", "install"' in boot
    lib, kit = student_packages()
    assert lib in boot and kit in boot and kit.endswith("#subdirectory=course")
    wheels = (
        "https://example.org/course/specdec_lib-0.1-py3-none-any.whl",
        "https://example.org/course/specdec_course-0.1-py3-none-any.whl",
    )
    boot = "".join(
        next(c for c in student_notebook(nb, wheels)["cells"] if c["cell_type"] == "code")["source"]
    )
    assert all(w in boot for w in wheels) and lib not in boot and kit not in boot
    compile(boot, "bootstrap", "exec")  # still Python


def test_the_package_carries_the_committed_reports():
    """Chapters 08-12 read the committed benchmark reports: a pip-installed package (the student
    notebooks' Colab bootstrap) has them under specdec_lib/data/reports (a link to book/data)."""
    import tomllib

    from specdec_lib import _export

    root = _export.NB_DIR.parent
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "data/reports/*.json" in config["specdec_lib"]
    book = sorted(p.name for p in (root / "book" / "data").glob("*.json"))
    packaged = sorted(p.name for p in (root / "specdec_lib" / "data" / "reports").glob("*.json"))
    assert packaged == book and "bench.json" in packaged
