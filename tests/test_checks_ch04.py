"""Chapter 04's checkers beyond the shared contract in tests/test_checks_common.py: specific answers
and edge cases."""

from specdec_course.checks import ch04
from specdec_teacher import ch04 as teacher


def test_answers_in_other_types_are_accepted():
    import torch

    ref_mask, ref_misplaced = (
        teacher.REFERENCE["check_ancestor_mask"],
        teacher.REFERENCE["check_misplaced_nodes"],
    )
    assert ch04.check_ancestor_mask(lambda parents: ref_mask(parents).tolist()) == "correct"
    assert ch04.check_misplaced_nodes(lambda parents: torch.tensor(ref_misplaced(parents))) == "correct"
    assert ch04.check_misplaced_nodes(lambda parents: ref_misplaced(parents)[::-1]) == "correct"  # any order
    assert ch04.check_crop_is_right(lambda p, n: int(teacher.crop_is_right(p, n))) == "correct"  # 0/1 too
    assert ch04.check_crop_is_right(lambda p, n: "yes") == "incorrect"
    assert ch04.check_greedy_walk(lambda *a: tuple(teacher.REFERENCE["check_greedy_walk"](*a))) == "correct"
    assert ch04.check_ancestor_mask(lambda parents: "mask") == "incorrect"  # bad output: no crash
    assert ch04.check_greedy_walk(lambda *a: 3) == "incorrect"


def test_mss_example():
    assert ch04.check_mss_example(*teacher.REFERENCE["check_mss_example"]) == "correct"
    assert ch04.check_mss_example(0.4, 0.3, [0, 0, 0.6667, 0.3333]) == "correct"  # rounded, a list
    for answer in teacher.WRONG["check_mss_example"]:
        assert ch04.check_mss_example(*answer) == "incorrect", answer
    assert ch04.check_mss_example() == "not attempted"
    assert ch04.check_mss_example(accept_a=0.4) == "not attempted"
    assert ch04.check_mss_example(0.4, 0.3, "none") == "incorrect"


def test_sibling_acceptance():
    right = teacher.REFERENCE["check_sibling_acceptance"]
    assert ch04.check_sibling_acceptance(*right) == "correct"
    assert ch04.check_sibling_acceptance(picks=0.6, samples=0.834) == "correct"  # rounded
    assert ch04.check_sibling_acceptance(0.6, 0.8343) == "correct"
    for answer in teacher.WRONG["check_sibling_acceptance"]:
        assert ch04.check_sibling_acceptance(*answer) == "incorrect", answer
    assert ch04.check_sibling_acceptance() == "not attempted"
    assert ch04.check_sibling_acceptance(picks=0.6) == "not attempted"
    assert ch04.check_sibling_acceptance(0.6, None) == "not attempted"
    assert ch04.check_sibling_acceptance(0.6, [0.8, 0.1]) == "incorrect"  # not one number: no crash


def test_sibling_acceptance_hints_name_the_mistake(capsys):
    """The plausible wrong answers get their own hint: q instead of P, no renormalisation, no residual."""
    samples = teacher.REFERENCE["check_sibling_acceptance"][1]
    for picks, says in ((0.8, "TARGET's probability"), (0.52, "renormalised"), (0.7, "by q")):
        assert ch04.check_sibling_acceptance(picks, samples) == "incorrect"
        assert says in capsys.readouterr().out
    for wrong, says in (
        (0.82, "removed AND renormalised"),
        (0.9142857, "residual"),
        (0.8, "first sample alone"),
    ):
        assert ch04.check_sibling_acceptance(0.6, wrong) == "incorrect"
        assert says in capsys.readouterr().out
    assert ch04.check_sibling_acceptance(0.6, 0.5) == "incorrect"  # an unknown wrong number: the general hint
    assert "sum_x min(p(x), q(x))" in capsys.readouterr().out


def test_a_crop_is_right_exactly_when_the_path_is_the_first_nodes():
    """The reference's shortcut (the accepted node is m - 1) against the definition (the crop's slots are
    the path's slots), on every node of every test tree."""
    for parents in ch04._trees():
        for node in range(-1, len(parents)):
            path = teacher._path(parents, node)
            assert teacher.crop_is_right(parents, node) == (path == list(range(len(path))))
