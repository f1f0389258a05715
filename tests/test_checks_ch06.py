"""Chapter 06's checkers beyond the shared contract in tests/test_checks_common.py: specific answers
and edge cases."""

from specdec_course.checks import ch06
from specdec_teacher import ch06 as teacher


def test_answers_in_other_types_are_accepted():
    import torch

    pairs, tau = teacher.REFERENCE["check_module_pairs"], teacher.REFERENCE["check_expected_tau"]
    as_tensors = lambda ids, k: tuple(torch.tensor(x) for x in pairs(ids, k))  # noqa: E731
    assert ch06.check_module_pairs(as_tensors) == "correct"
    assert ch06.check_expected_tau(lambda alphas: torch.tensor(tau(alphas))) == "correct"
    assert (
        ch06.check_kept_positions(
            lambda k, n, n_new: float(teacher.REFERENCE["check_kept_positions"](k, n, n_new))
        )
        == "correct"
    )
    assert ch06.check_module_pairs(lambda ids, k: 3) == "incorrect"  # bad output: no crash
    assert ch06.check_kept_positions(lambda k, n, n_new: "many") == "incorrect"
    assert ch06.check_expected_tau(lambda alphas: None) == "incorrect"


def test_deepseek_numbers():
    assert ch06.check_deepseek_numbers(*teacher.REFERENCE["check_deepseek_numbers"]) == "correct"
    assert ch06.check_deepseek_numbers(1.85, 0.028) == "correct"  # rounded
    for answer in teacher.WRONG["check_deepseek_numbers"]:
        assert ch06.check_deepseek_numbers(*answer) == "incorrect", answer
    assert ch06.check_deepseek_numbers() == "not attempted"
    assert ch06.check_deepseek_numbers(tau=1.85) == "not attempted"


def test_kept_positions_reference_matches_the_proposer():
    """The exercise's rule is the one MTPProposer.update applies to sequential module k's cache."""
    import torch

    from specdec_lib.layers import KVCache
    from specdec_lib.mtp import MTPProposer
    from specdec_lib.speculative import Verdict

    class Stub:  # only what update() touches
        feature_layer = -1

    prop = MTPProposer.__new__(MTPProposer)
    prop.mtp, prop.sequential = Stub(), True
    for n in (0, 1, 4, 7):
        for n_new in range(1, 5):
            prop.caches = [KVCache() for _ in range(4)]
            for c in prop.caches:
                c.append(torch.zeros(1, n, 2), torch.zeros(1, n, 2))
            prop.outs = [torch.zeros(n, 2) for _ in range(4)]
            prop.h0 = torch.zeros(n, 2)
            tokens = torch.zeros(n + n_new + 1, dtype=torch.long)  # pending token at index n + n_new
            kept = torch.arange(n_new)  # the root and the n_new - 1 accepted drafts
            verdict = Verdict(None, list(range(n_new - 1)), [0] * n_new, kept, {-1: torch.zeros(n_new, 2)}, n)
            prop.update(tokens, verdict)
            for k, c in enumerate(prop.caches, start=1):
                assert len(c) == teacher.REFERENCE["check_kept_positions"](k, n, n_new), (k, n, n_new)
