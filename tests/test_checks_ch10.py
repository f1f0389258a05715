"""Chapter 10's checkers (all take values, or a value and a function), beyond tests/test_checks_common.py."""

import json
from pathlib import Path

import pytest

from specdec_course.checks import ch10
from specdec_teacher import ch10 as teacher

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "specdec_lib" / "models" / "tiny-code" / "dflash" / "card.json"


def _contract(check, capsys):
    assert check(*teacher.REFERENCE[check.__name__]) == "correct"
    capsys.readouterr()
    for answer in teacher.WRONG[check.__name__]:
        assert check(*answer) == "incorrect", answer
        out = capsys.readouterr().out
        assert "incorrect — " in out and len(out.split("incorrect — ", 1)[1].strip()) > 10, out


def stub(*args):
    raise NotImplementedError


def test_what_dflash_changes_question(capsys):
    check = ch10.check_what_dflash_changes
    _contract(check, capsys)
    right = teacher.REFERENCE["check_what_dflash_changes"][0]
    assert check() == "not attempted" and check(right) == "not attempted"
    assert check(right, stub) == "not attempted"
    assert check(2, teacher.rounds) == "incorrect"
    assert check(right, lambda k, B: "junk") == "incorrect"


def test_block_tau_question(capsys):
    check = ch10.check_block_tau
    _contract(check, capsys)
    right = teacher.REFERENCE["check_block_tau"][1]
    assert check() == "not attempted" and check(teacher.block_tau) == "not attempted"
    assert check(stub, right) == "not attempted" and check(None, right) == "not attempted"
    assert check(lambda a, B: "junk", right) == "incorrect"
    assert check(teacher.block_tau, "z") == "incorrect"


def test_needed_c_question(capsys):
    check = ch10.check_needed_c
    _contract(check, capsys)
    assert check() == "not attempted" and check(None) == "not attempted"
    assert check("junk") == "incorrect" and check(-1.0) == "incorrect"


@pytest.mark.parametrize("name", ["DFLASH", "WHY"])
def test_the_options_are_balanced(name):
    options = getattr(ch10, f"{name}_OPTIONS")
    right, wrong = (getattr(teacher, f"{name}_{part}") for part in ("RIGHT", "WRONG"))
    assert set(options.values()) == {right, *wrong}
    assert len(right) < max(len(t) for t in options.values()), "the right option is the longest"


def test_the_card_says_what_exercise_2_predicts():
    """The chain formula on the corpus-trained drafter's acceptance per row (block 16, the card's ablation)
    predicts its measured tau at B = 4, 8 and 16, and rows 8 to 15 add almost nothing: the exercise's story
    holds for that drafter. For the shipped drafter (trained on the target's own text) the predicted tau
    keeps growing well past B = 8, as the solution's closing remark says, and the measured one too."""
    card = json.loads(CARD.read_text())
    taus = card["ablation"]["corpus"]["tau_greedy"]
    alphas = taus["16"]["acceptance_by_position"]
    predicted = {B: teacher.block_tau(alphas, B) for B in (4, 8, 16)}
    for B, tau in predicted.items():
        assert abs(tau - taus[str(B)]["tau"]) < 0.1, (B, tau)
    assert predicted[16] - predicted[8] < 0.1 and taus["16"]["tau"] - taus["8"]["tau"] < 0.1
    ours = card["tau_greedy"]
    assert (
        teacher.block_tau(ours["16"]["acceptance_by_position"], 16)
        - teacher.block_tau(ours["16"]["acceptance_by_position"], 8)
        > 0.5
        and ours["16"]["tau"] - ours["8"]["tau"] > 0.25
    )


def test_exercise_3_asks_for_a_cheaper_pass_than_today():
    dflash = json.loads((ROOT / "book" / "data" / "bench.json").read_text())["results"]["0"]["dflash:4"]
    assert 0 < teacher.needed_c() < dflash["c_per_draft_pass"]


@pytest.mark.parametrize("checker", ["check_what_dflash_changes", "check_block_tau"])
def test_the_notebook_reference_letters_are_the_right_options(checker):
    """The chapter's reference solutions name the right options by letter: they must follow the options' order."""
    import re

    nb = json.loads((ROOT / "notebooks" / "10_dflash.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    refs = [s for s in sources if "### BEGIN SOLUTION" in s and f"{checker}(" in s]
    letter = [a for a in teacher.REFERENCE[checker] if isinstance(a, str)][0]
    assert refs
    for src in refs:
        assert re.search(r'^my_choice = "(\w)"', src, re.M).group(1) == letter
