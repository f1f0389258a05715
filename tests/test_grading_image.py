"""grading/Dockerfile, the image where students' code runs in the three-phase grading: built where a
Docker engine runs, otherwise checked here for what it may hold and how it runs."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "grading" / "Dockerfile"
INSTRUCTIONS = {"FROM", "ENV", "RUN", "WORKDIR", "COPY", "USER", "ENTRYPOINT", "ARG", "LABEL", "CMD"}


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))  # join continued lines
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return [tuple(ln.split(None, 1)) for ln in lines]


def test_every_line_is_an_instruction_and_every_copy_exists():
    steps = _instructions()
    assert steps[0][0] == "FROM" and all(op in INSTRUCTIONS for op, _ in steps), steps
    for op, rest in steps:
        if op == "COPY":
            *sources, _ = rest.split()
            assert all((ROOT / s).exists() for s in sources), rest


def test_the_image_holds_nothing_of_the_teachers():
    copied = " ".join(rest for op, rest in _instructions() if op == "COPY")
    assert not re.search(r"\b(teacher|notebooks|tests)\b", copied)
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    first_in = next(i for i, ln in enumerate(ignore) if ln.startswith("!"))
    assert "*" in ignore[:first_in]  # everything out, then the few paths let in
    allowed = {ln.removeprefix("!").rstrip("/") for ln in ignore if ln.startswith("!")}
    assert allowed == {"pyproject.toml", "README.md", "specdec_lib", "course", "book/data"}


def test_it_runs_the_students_code_unprivileged_and_records_only():
    steps = _instructions()
    assert ("USER", "grader") in steps and steps.index(("USER", "grader")) > max(
        i for i, (op, _) in enumerate(steps) if op == "RUN"
    )
    assert steps[-1] == ("ENTRYPOINT", '["python", "-m", "specdec_course.grade"]')
    assert "--records-out" in DOCKERFILE.read_text(encoding="utf-8")


def test_its_pins_are_the_ones_ci_runs():
    pins = dict(re.findall(r"^([\w-]+)==([\w.+-]+)", (ROOT / "requirements.txt").read_text(), re.M))
    for name, version in re.findall(r"([\w-]+)==([\w.+-]+)", DOCKERFILE.read_text(encoding="utf-8")):
        assert pins.get(name) == version, (name, version)


def _engine() -> bool:
    return (
        bool(shutil.which("docker"))
        and subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    )


@pytest.mark.skipif(not _engine(), reason="no Docker engine runs here (the client alone cannot build)")
def test_it_builds():
    run = subprocess.run(
        ["docker", "build", "-f", str(DOCKERFILE), "-t", "specdec-grader-test", str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
