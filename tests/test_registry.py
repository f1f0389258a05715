"""One place to add a method: a `register(...)` call carries what the rest of the library reads.

A toy method written in one file (tests/toy/toy_method.py) is picked up by the proposer contract test,
the benchmark's defaults and the zoo trainer's stage check, and a broken variant of it fails the
contract."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specdec_lib import methods

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "toy"


def test_a_toy_method_in_one_file_is_picked_up_by_the_contract_test_and_its_lying_twin_fails_it():
    """One run of the contract test on the two methods tests/toy/toy_method.py registers: the toy passes
    every test, its lying twin fails exactly the exact sampling law."""
    env = {**os.environ, "PYTHONPATH": f"{TOY}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-p", "toy_method", "-k", "toy",
           "tests/test_contract.py"]  # fmt: skip
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    failed = re.findall(r"^FAILED (\S+)", run.stdout, re.M)
    assert failed and all(
        "test_sampling_is_exactly_the_targets_distribution" in f and "toy-liar" in f for f in failed
    ), run.stdout[-3000:]
    passed = int(re.search(r"(\d+) passed", run.stdout).group(1))
    per_method = (passed + len(failed)) / 2  # the toy and its twin run the same tests
    assert per_method >= 3, f"the contract ran only {per_method} tests on each toy:\n{run.stdout[-2000:]}"


@pytest.fixture
def toy(monkeypatch):
    """The toy registered in this process, and removed again after the test."""
    monkeypatch.setattr(methods, "METHODS", dict(methods.METHODS))
    monkeypatch.syspath_prepend(str(TOY))
    sys.modules.pop("toy_method", None)
    import toy_method  # noqa: F401  (registers "toy" and "toy-liar")

    yield methods.METHODS["toy"]
    sys.modules.pop("toy_method", None)


def test_the_registry_feeds_the_benchmark_and_the_zoo_trainer(toy, monkeypatch):
    from specdec_lib import zoo_train

    assert "toy:2" in methods.bench_defaults()
    zoo_train.check_stages()  # no weights: nothing to train
    methods.register("toy", toy.build, chapter=12, summary="x", zoo_weights="toy", zoo_stage="toy")
    assert methods.zoo_stages()["toy"] == ["toy"]
    with pytest.raises(SystemExit, match="add the missing trainer"):
        zoo_train.check_stages()


def test_register_refuses_an_incomplete_entry(toy):
    args = {"chapter": 12, "summary": "x"}
    with pytest.raises(ValueError, match="zoo_train stage"):
        methods.register("toy", toy.build, zoo_weights="toy", **args)
    with pytest.raises(ValueError, match="its own"):
        methods.register("toy", toy.build, bench=("chain:4",), **args)
    with pytest.raises(ValueError, match="callable"):
        methods.register("toy", None, **args)
    with pytest.raises(TypeError):
        methods.register("toy", toy.build, chapter=12)  # no summary: no entry


def test_a_proposer_without_its_fresh_reference_fails_the_contract_clearly(toy):
    """The contract's check of fresh drafts reads only the proposer's `fresh_draft` method: a proposer
    without one is refused with a message that names it (test_contract also checks every entry has one)."""
    import torch
    import toy_method

    from specdec_lib.contract import check_draft_is_fresh
    from specdec_lib.speculative import DraftTree

    class NoReference(toy_method.RepeatProposer):
        fresh_draft = None  # a proposer class that never defined its reference

    tree = DraftTree.chain(torch.tensor([3, 3]))
    with pytest.raises(TypeError, match="fresh_draft"):
        check_draft_is_fresh(NoReference(2), None, torch.tensor([1, 3]), tree, name="toy")
