"""What each package installs: the library alone (`pip install .`) carries no grading or browser code, and
the course kit (`pip install course/`) carries the checkers and the teaching tools, not the library."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COURSE_KIT = ("checks", "grade", "student", "nbgrader_course", "nbgrader_judge", "check_site")


def wheel_files(src: Path, out: Path) -> tuple[list[str], str]:
    """The files of the wheel pip builds from `src` (no dependencies, no network), and its METADATA."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    return names, meta


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A copy of what the two pyproject files package (the build writes build/ beside them)."""
    dest = tmp_path_factory.mktemp("clone")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "specdec_lib", dest / "specdec_lib", ignore=skip)
    shutil.copytree(ROOT / "course", dest / "course", ignore=skip)
    return dest


def test_the_library_installs_alone_without_the_course_kit(clone, tmp_path):
    names, meta = wheel_files(clone, tmp_path)
    tops = {n.split("/")[0] for n in names}
    assert tops == {"specdec_lib", "specdec_lib-0.1.0.dist-info"}, tops
    assert "specdec_lib/speculative.py" in names and "specdec_lib/data/reports/bench.json" in names
    assert any(n.startswith("specdec_lib/models/tiny-code/target/") for n in names)  # the zoo ships
    leaked = [n for n in names if Path(n).stem in COURSE_KIT or "/checks/" in n]
    assert not leaked, f"the library's wheel carries the course kit: {leaked}"
    requires = [
        line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert requires and not [r for r in requires if "nbgrader" in r or "selenium" in r], requires


def test_the_course_kit_is_a_package_of_its_own(clone, tmp_path):
    names, meta = wheel_files(clone / "course", tmp_path)
    assert {n.split("/")[0] for n in names} == {"specdec_course", "specdec_course-0.1.0.dist-info"}
    assert "specdec_course/__init__.py" in names and "specdec_course/checks/__init__.py" in names
    modules = {Path(n).stem for n in names if n.startswith("specdec_course/")}
    assert set(COURSE_KIT) - {"checks"} <= modules and {"ch01", "ch12", "quick"} <= modules
    for data in ("answers.json", "gradable.json"):  # the checkers' digests and the gradable labels
        assert f"specdec_course/checks/{data}" in names
    assert "Requires-Dist: specdec-lib" in meta
    assert not [n for n in names if "teacher" in n or "REFERENCE" in n]
