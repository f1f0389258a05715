"""A fast subset of tests/mutants.py in every `make test`: three lossless slips, each planted in a scratch
copy of the repository, must make their recorded catcher tests fail there, while the same catchers pass
on the clean copy (so the check cannot pass vacuously). `make mutants` runs every mutant."""

import importlib.util
import tempfile
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("mutants", Path(__file__).with_name("mutants.py"))
mutants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutants)

FAST = ["C2", "G1", "M6"]  # the draft model's crop, prompt lookup's occurrence, the bonus token's row


@pytest.fixture(scope="module")
def clean():
    with tempfile.TemporaryDirectory() as tmp:
        yield mutants.snapshot(Path(tmp) / "repo")


def test_the_fast_catchers_pass_on_the_clean_library(clean):
    catchers = sorted({c for m in FAST for c in mutants.CATCHERS[m]})
    failed, _, last = mutants.pytest_run(clean, catchers)
    assert not failed, f"catchers fail on the clean library: {sorted(failed)} ({last})"


@pytest.mark.parametrize("short", FAST)
def test_a_planted_bug_is_caught(short, clean):
    name = next(n for n in mutants.MUTANTS if mutants.code(n) == short)
    caught, report, _ = mutants.check_catchers(name, clean)
    assert caught, f"{name}: {report}"
