"""The quick-checks (one conceptual question per chapter, course/specdec_course/checks/quick.py): the reference
answer is correct, every other option and every listed trap is incorrect with a hint, junk never
crashes, and every chapter asks its own question."""

import json
from pathlib import Path

import pytest

from specdec_course.checks.quick import QUICK, check_quick, quick_question
from specdec_teacher.quick import ANSWERS, REFERENCE

NOTEBOOKS = {
    int(p.name[:2]): p for p in sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
}


@pytest.mark.parametrize("chapter", sorted(QUICK))
def test_reference_right_everything_else_wrong_with_a_hint(chapter, capsys):
    assert check_quick(chapter, REFERENCE[chapter]) == "correct"
    assert check_quick(chapter) == "not attempted" and check_quick(chapter, ...) == "not attempted"
    q = QUICK[chapter]
    wrong = [x for x in q.get("options", {}) if x != REFERENCE[chapter]]
    if "options" not in q:
        answer, traps = ANSWERS[chapter]
        wrong = list(traps) + [answer + 0.1, -1.0]
    for answer in [*wrong, "zz", [1, 2], object()]:
        capsys.readouterr()
        assert check_quick(chapter, answer) == "incorrect", answer
        assert "incorrect — " in capsys.readouterr().out
    if "options" in q:
        assert check_quick(chapter, f" ({REFERENCE[chapter].upper()}) ") == "correct"  # forgiving about form
    quick_question(chapter)
    assert q["question"] in capsys.readouterr().out


def test_numeric_answers_are_what_the_question_says():
    p, q = (0.7, 0.1, 0.1, 0.1), (0.25,) * 4
    assert abs(REFERENCE[3] - sum(min(a, b) for a, b in zip(p, q))) < 1e-12
    assert abs(REFERENCE[2] - (1 + sum(0.8**d for d in range(1, 5)))) < 1e-12


@pytest.mark.parametrize("chapter", sorted(NOTEBOOKS))
def test_every_chapter_has_its_quick_check_and_an_open_task(chapter):
    cells = json.loads(NOTEBOOKS[chapter].read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells]
    assert chapter in QUICK, f"chapter {chapter:02d} has no quick-check question in checks/quick.py"
    assert any(f"quick_question({chapter})" in s and f"check_quick({chapter}, " in s for s in sources)
    assert any(s.startswith("**Open task**") for s in sources)


def test_multiple_choice_answers_are_not_guessable_from_their_form():
    # the right option is stored by its text and placed by a hash: it must not sit under one letter, nor be
    # the longest option, question after question
    mc = {n: q for n, q in QUICK.items() if "options" in q}
    letters = [REFERENCE[n] for n in mc]
    assert max(letters.count(x) for x in set(letters)) <= len(mc) // 2, letters
    longest = [
        n
        for n, q in mc.items()
        if all(len(ANSWERS[n]) > len(w) for w in q["options"].values() if w != ANSWERS[n])
    ]
    assert len(longest) <= len(mc) // 4, f"the right option is the longest in questions {longest}"
    for n, q in mc.items():
        assert q["options"][REFERENCE[n]] == ANSWERS[n] and len(q["options"]) >= 4


@pytest.mark.parametrize("chapter", sorted(NOTEBOOKS))
def test_the_notebooks_reference_answer_is_the_right_one(chapter, capsys):
    # the letters move when an option's text changes: the reference in the notebook must follow
    from specdec_course.student import solution_regions

    cells = json.loads(NOTEBOOKS[chapter].read_text())["cells"]
    [cell] = [
        c
        for c in cells
        if f"check_quick({chapter}, " in "".join(c["source"]) and "BEGIN" in "".join(c["source"])
    ]
    namespace = {}
    for region in solution_regions("".join(cell["source"])):
        exec("\n".join(region), namespace)  # a literal: my_choice = 'b' or my_number = 0.7
    answers = [v for k, v in namespace.items() if k.startswith("my_")]
    assert len(answers) == 1 and check_quick(chapter, answers[0]) == "correct", capsys.readouterr().out
