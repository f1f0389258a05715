"""What students get holds no solutions: the reference solutions, planted mistakes, value answers and
hidden cases live in the teacher's package (teacher/specdec_teacher), which neither the installed
specdec_lib nor the student build contains. The public checkers read expected values from answers.json
(written from the references) and digests; the graded check adds hidden cases."""

import ast
import importlib
import inspect
import json
import pkgutil
from pathlib import Path

import pytest

import specdec_course.checks
import specdec_teacher
from specdec_course.checks import ch02, ch03

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "specdec_lib", ROOT / "course" / "specdec_course")  # what students install
CHECKS = ROOT / "course" / "specdec_course" / "checks"
PUBLIC = sorted(m.name for m in pkgutil.iter_modules(specdec_course.checks.__path__))


def test_answers_json_is_up_to_date():
    """After changing a reference solution or a checker's cases: `python -m specdec_teacher`."""
    assert specdec_teacher.stale() == []


def test_the_installed_package_defines_no_reference_answers():
    bad = []
    for path in sorted(p for package in PACKAGES for p in package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            bad += [
                f"{path.relative_to(ROOT)}: {name}"
                for name in names
                if name in ("REFERENCE", "WRONG")
                or name.startswith("_ref_")
                or (path.parent.name == "checks" and name.endswith("_RIGHT"))  # a right option's text
            ]
            if path.parent.name == "checks" and isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                )
                bad += [f"{path.relative_to(ROOT)}: imports {m}" for m in modules if "teacher" in m]
    assert not bad, "\n".join(bad)


def test_value_answers_are_stored_as_digests_only():
    stored = json.loads((CHECKS / "answers.json").read_text(encoding="utf-8"))
    for chapter, entries in stored["values"].items():
        for key, entry in entries.items():
            assert set(entry) == {"decimals", "right", "hints"}, (chapter, key)
            assert len(entry["right"]) == 24 and int(entry["right"], 16) >= 0, (chapter, key)
    for chapter in stored["values"]:
        for key, (right, _, _) in specdec_teacher.module(chapter).VALUES.items():
            if (
                isinstance(right, str) and len(right) > 12
            ):  # an option's text: only as an option, never as "the answer"
                assert right not in json.dumps(stored, ensure_ascii=False), (chapter, key)


def _public_callables():
    for name in PUBLIC:
        module = importlib.import_module(f"specdec_course.checks.{name}")
        for attr, value in list(vars(module).items()):
            if callable(value) and getattr(value, "__module__", "").startswith("specdec_course.checks"):
                yield f"{name}.{attr}", value


def test_no_public_function_answers_an_exercise(capsys):
    """Nothing a student can import from specdec_course.checks passes a function exercise's checker."""
    passed = []
    for chapter in specdec_teacher.CHAPTERS:
        module = specdec_teacher.public(chapter)
        for checker, ref in specdec_teacher.module(chapter).REFERENCE.items():
            if not callable(ref):
                continue
            for where, fn in _public_callables():
                if getattr(module, checker)(fn) == "correct":
                    passed.append(f"{chapter}.{checker} accepts {where}")
                capsys.readouterr()
    assert not passed, "\n".join(passed)


def test_a_memorised_answer_passes_the_public_cases_only():
    """A table of the public cases' answers fools the self-check, never the graded check's hidden cases."""
    ref = specdec_teacher.module("ch02").alpha_for_tau
    table = {case: ref(*case) for case in ch02._TAU_CASES}

    def memorised(tau, k):
        return table[(tau, k)]

    assert ch02.check_alpha_for_tau(memorised) == "correct"
    assert (
        specdec_teacher.hidden_check("specdec_course.checks.ch02", "check_alpha_for_tau", memorised)
        == "incorrect"
    )


def test_reading_the_checkers_stored_answers_is_not_an_answer(capsys):
    def reads_them(p, q):
        return ch03._expected.colleague_law(p, q)

    assert ch03.check_colleague_law(reads_them) == "not attempted"
    assert "cannot check here" in capsys.readouterr().out
    graded = specdec_teacher.hidden_check("specdec_course.checks.ch03", "check_colleague_law", reads_them)
    assert graded != "correct"


def test_the_package_builds_leave_the_teacher_out():
    """pyproject.toml packages `specdec_lib*`, course/pyproject.toml `specdec_course*` (setuptools finds
    namespace packages too); tests/test_packages.py builds both wheels and reads what they hold."""
    from setuptools import find_namespace_packages

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    for root, package in ((ROOT, "specdec_lib"), (ROOT / "course", "specdec_course")):
        config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
        found = find_namespace_packages(where=str(root), include=config["packages"]["find"]["include"])
        assert package in found and not [p for p in found if "teacher" in p], found
        assert not any("teacher" in glob for globs in config["package-data"].values() for glob in globs)
    assert (
        "specdec_course.checks" in found and "checks/answers.json" in config["package-data"]["specdec_course"]
    )


def test_the_student_build_has_no_teacher_package(tmp_path):
    from specdec_course.student import main

    assert main(["--out", str(tmp_path / "student")]) == 0
    paths = list((tmp_path / "student").rglob("*"))
    assert paths and not [p for p in paths if "teacher" in p.name or p.suffix == ".py"]


def test_the_hidden_cases_are_other_cases(capsys):
    """A hidden run moves every seed and adds cases: the checker sees inputs the public run never showed."""
    ref = specdec_teacher.module("ch03").colleague_law
    seen = {"public": [], "hidden": []}

    def spy(run):
        def fn(p, q):
            seen[run].append(tuple(round(x, 6) for x in p.tolist()))
            return ref(p, q)

        return fn

    assert ch03.check_colleague_law(spy("public")) == "correct"
    graded = specdec_teacher.hidden_check("specdec_course.checks.ch03", "check_colleague_law", spy("hidden"))
    assert graded == "correct" and "(hidden cases): correct" in capsys.readouterr().out
    random_public = set(seen["public"][:6])  # the first six pairs are random, the last two fixed extremes
    assert not random_public & set(seen["hidden"])


def test_every_public_checker_module_has_its_teacher_module():
    for name in PUBLIC:
        if name.startswith("ch"):
            teacher = specdec_teacher.module(name)
            public = importlib.import_module(f"specdec_course.checks.{name}")
            checkers = {
                n for n, f in vars(public).items() if n.startswith("check_") and inspect.isfunction(f)
            }
            assert set(teacher.REFERENCE) == checkers, name
