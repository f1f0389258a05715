"""The quick-checks (one conceptual question per chapter, specdec_lib/checks/quick.py): the reference
answer is correct, every other option and every listed trap is incorrect with a hint, junk never
crashes, and every chapter asks its own question."""

import json
from pathlib import Path

import pytest

from specdec_lib.checks.quick import QUICK, REFERENCE, check_quick, quick_question

NOTEBOOKS = {
    int(p.name[:2]): p for p in sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
}


@pytest.mark.parametrize("chapter", sorted(QUICK))
def test_reference_right_everything_else_wrong_with_a_hint(chapter, capsys):
    assert check_quick(chapter, REFERENCE[chapter]) == "correct"
    assert check_quick(chapter) == "not attempted" and check_quick(chapter, ...) == "not attempted"
    q = QUICK[chapter]
    wrong = [x for x in q.get("options", {}) if x != q["answer"]]
    if "options" not in q:
        wrong = list(q["traps"]) + [q["answer"] + 0.1, -1.0]
    for answer in [*wrong, "zz", [1, 2], object()]:
        capsys.readouterr()
        assert check_quick(chapter, answer) == "incorrect", answer
        assert "incorrect — " in capsys.readouterr().out
    if "options" in q:
        assert check_quick(chapter, f" ({q['answer'].upper()}) ") == "correct"  # forgiving about form
    quick_question(chapter)
    assert q["question"] in capsys.readouterr().out


def test_numeric_answers_are_what_the_question_says():
    p, q = (0.6, 0.3, 0.1), (0.3, 0.3, 0.4)
    assert abs(REFERENCE[3] - sum(min(a, b) for a, b in zip(p, q))) < 1e-12
    assert abs(REFERENCE[2] - (1 + sum(0.8**d for d in range(1, 5)))) < 1e-12


@pytest.mark.parametrize("chapter", sorted(NOTEBOOKS))
def test_every_chapter_has_its_quick_check_and_an_open_task(chapter):
    cells = json.loads(NOTEBOOKS[chapter].read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells]
    assert chapter in QUICK, f"chapter {chapter:02d} has no quick-check question in checks/quick.py"
    assert any(f"quick_question({chapter})" in s and f"check_quick({chapter}, " in s for s in sources)
    assert any(s.startswith("**Open task**") for s in sources)
