"""Chapter 05's checkers beyond the shared contract in tests/test_checks_common.py: specific answers
and edge cases."""

import torch

from specdec_course.checks import ch05
from specdec_teacher import ch05 as teacher


def test_answers_in_other_types_are_accepted():
    ref = teacher.REFERENCE
    labels = ref["check_head_labels"]
    assert ch05.check_head_labels(lambda tokens, k: list(labels(tokens, k).items())) == "correct"
    expected = ref["check_expected_accepted"]
    assert ch05.check_expected_accepted(lambda acc, ch: torch.tensor(expected(acc, ch))) == "correct"
    accept = ref["check_typical_accept"]
    assert ch05.check_typical_accept(lambda *a: torch.tensor(accept(*a))) == "correct"
    law = ref["check_typical_law"]
    assert ch05.check_typical_law(lambda *a: law(*a).float().tolist()) == "correct"
    # malformed answers are reported, not raised
    assert ch05.check_head_labels(lambda tokens, k: 3) == "incorrect"
    assert ch05.check_expected_accepted(lambda acc, ch: "long") == "incorrect"
    assert ch05.check_typical_law(lambda *a: "p") == "incorrect"
    assert ch05.check_typical_accept(lambda *a: torch.ones(2)) == "incorrect"


def test_the_notebook_solutions_are_correct():
    """The solutions printed in the notebook, verbatim."""
    import math

    def my_head_labels(tokens, k):
        return {t: tokens[t + 1 + k] for t in range(len(tokens) - 1 - k)}

    def my_expected_accepted(acc, choices):
        total = 0.0
        for node in choices:
            prob = 1.0
            for j, r in enumerate(node):
                prob *= float(acc[j, r])
            total += prob
        return total

    def my_typical_accept(p, x, epsilon=0.09, delta=0.3):
        entropy = -(p * p.clamp_min(1e-30).log()).sum()
        threshold = min(epsilon, delta * math.exp(-float(entropy)))
        return bool(p[x] > threshold)

    def my_first_token_law(p, children, epsilon=0.09, delta=0.3):
        entropy = -(p * p.clamp_min(1e-30).log()).sum()
        threshold = min(epsilon, delta * math.exp(-float(entropy)))
        accepted = [x for x in children if p[x] > threshold]
        if not accepted:
            return p.clone()
        best = max(accepted, key=lambda x: float(p[x]))
        law = torch.zeros_like(p)
        law[best] = 1.0
        return law

    assert ch05.check_head_labels(my_head_labels) == "correct"
    assert ch05.check_expected_accepted(my_expected_accepted) == "correct"
    assert ch05.check_typical_accept(my_typical_accept) == "correct"
    assert ch05.check_typical_law(my_first_token_law) == "correct"
