"""Which exercises count points (`specdec_teacher.labels`): recomputed by trying every function of the
library on every function exercise's hidden cases, and the committed labels and setup.md's table follow."""

import json

from specdec_course import grade
from specdec_course.checks.ch04 import check_ancestor_mask
from specdec_teacher import classify, labels

COMMITTED = json.loads(labels.LABELS_FILE.read_text(encoding="utf-8"))


def test_the_committed_labels_are_what_the_library_answers():
    """A new library function that answers an exercise, or a changed exercise, fails here until
    `python -m specdec_teacher.labels --write` is run (about a minute)."""
    fresh = labels.labels()
    assert fresh["library"] == COMMITTED["library"]
    assert fresh["kinds"] == COMMITTED["kinds"]


def test_a_library_answer_is_found_under_each_of_its_names():
    import specdec_lib.speculative

    found = COMMITTED["library"]["ch04"]["check_ancestor_mask"]
    assert "specdec_lib.speculative.ancestor_mask" in found
    assert check_ancestor_mask(specdec_lib.speculative.ancestor_mask) == "correct"  # the flag is real


def test_every_exercise_has_a_label_and_only_function_exercises_count():
    kinds = COMMITTED["kinds"]
    for chapter, checkers in classify().items():
        assert set(kinds[chapter]) == set(checkers), chapter
        for checker, kind in checkers.items():
            assert kinds[chapter][checker] == (
                "library" if checker in COMMITTED["library"].get(chapter, {}) else kind
            )
    assert grade.kind_of("specdec_course.checks.quick", "check_quick") == "practice"


def test_setup_shows_the_generated_table():
    text = labels.SETUP.read_text(encoding="utf-8")
    block = text[text.index(labels.BEGIN) + len(labels.BEGIN) : text.index(labels.END)]
    assert [line.strip() for line in block.strip().splitlines()] == labels.table(COMMITTED).splitlines()


def test_library_and_practice_exercises_are_worth_nothing_in_both_graders():
    """(d') an import of the library answers chapter 04's ancestor_mask, and the digests of value answers
    are public: those exercises are still checked, for 0 points, in the course grader and in nbgrader."""
    from specdec_course import nbgrader_course
    from specdec_lib import _export

    nb = json.loads((_export.NB_DIR / "04_draft_trees.ipynb").read_text(encoding="utf-8"))
    ex = {e["checker"]: e for e in grade.expected_exercises(nb)}
    assert (ex["check_ancestor_mask"]["kind"], ex["check_ancestor_mask"]["points"]) == ("library", 0)
    assert (ex["check_mss_example"]["kind"], ex["check_mss_example"]["points"]) == ("practice", 0)
    assert ex["check_greedy_walk"]["points"] == 1
    source = nbgrader_course.nbgrader_source(nb)
    points = {
        c["metadata"]["specdec"]["checker"]: c["metadata"]["nbgrader"]["points"]
        for c in source["cells"]
        if "specdec" in c["metadata"]
    }
    assert (
        points["check_ancestor_mask"] == points["check_mss_example"] == 0 and points["check_greedy_walk"] == 1
    )
