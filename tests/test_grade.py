"""The grader (`python -m specdec_lib.grade`): one submission with a correct, a not-attempted, a wrong
and a raising exercise, graded by executing it; unreadable files never crash it."""

import json

import nbformat
import pytest

from specdec_lib import _export, grade

CELLS = [
    _export.BOOTSTRAP_CELL,
    "from specdec_lib.checks.ch06 import check_deepseek_numbers, check_expected_tau, check_kept_positions\n"
    "from specdec_lib.checks.ch07 import check_eagle_pairs",
    "def my_expected_tau(alphas):\n    tau, reach = 1.0, 1.0\n    for a in alphas:\n        reach *= a\n"
    "        tau += reach\n    return tau\n\n\ncheck_expected_tau(my_expected_tau)",
    "def my_kept_positions(k, n, n_new):\n    # your code here\n    raise NotImplementedError\n\n\n"
    "check_kept_positions(my_kept_positions)",
    "def my_eagle_pairs(ids):\n    return ids[:-2], ids[1:-1]  # no shift\n\n\ncheck_eagle_pairs(my_eagle_pairs)",
    'raise RuntimeError("my notebook broke")\ncheck_deepseek_numbers(1.85, 0.028)',
    "# check_this_is_only_a_comment(",
    "def check_request(x):  # a library-style validator, not an exercise checker\n    return x\n\n\n"
    "check_request(3)\nclass P:\n    def start(self):\n        self.check_vocab(1)",
]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    path = tmp_path_factory.mktemp("sub") / "submission.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbformat.write(nb, str(path))
    return grade.grade(path, timeout=120)


def test_each_exercise_gets_its_verdict(graded):
    got = {r["checker"]: (r["verdict"], r["detail"]) for r in graded["exercises"]}
    assert set(got) == {
        "check_expected_tau",
        "check_kept_positions",
        "check_eagle_pairs",
        "check_deepseek_numbers",
    }
    assert got["check_expected_tau"][0] == "correct"
    assert got["check_kept_positions"][0] == "not attempted"
    assert got["check_eagle_pairs"][0] == "incorrect" and "shift" in got["check_eagle_pairs"][1]
    assert got["check_deepseek_numbers"] == ("incorrect", "the cell raised RuntimeError: my notebook broke")
    assert (graded["correct"], graded["total"], graded["error"]) == (1, 4, None)
    text = grade.table(graded)
    assert "1/4 correct" in text and "not attempted" in text


def test_unreadable_submissions_and_the_command_line(tmp_path, capsys):
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json")
    result = grade.grade(broken)
    assert result["total"] == 0 and "cannot read" in result["error"]
    out = tmp_path / "grades.json"
    assert grade.main([str(broken), str(tmp_path / "missing.ipynb"), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["error"] is not None for r in rows] == [True, True]
    assert "cannot read" in capsys.readouterr().out


def test_verdicts_of_a_notebook_that_stopped_early():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("check_ece(my_ece)")])
    rows = grade.verdicts_of(nb, stopped="the notebook stopped before this cell ran: CellTimeoutError")
    assert rows[0]["verdict"] == "incorrect" and "stopped" in rows[0]["detail"]
