"""Chapter 12's checkers beyond the shared contract in tests/test_checks_common.py."""

import pytest
import torch

from specdec_course.checks import ch12
from specdec_lib.recap import load_report
from specdec_teacher import ch12 as teacher


def test_value_exercises():
    for name in ("check_draft_passes", "check_lossless"):
        check = getattr(ch12, name)
        assert check(teacher.REFERENCE[name]) == "correct"
        for wrong in teacher.WRONG[name]:
            assert check(wrong) == "incorrect", wrong
        assert check() == "not attempted" and check(None) == "not attempted"
        assert check(42) == "incorrect" and check("abc") == "incorrect"


def test_value_exercises_give_a_hint_for_each_mistake(capsys):
    for name in ("check_draft_passes", "check_lossless"):
        check = getattr(ch12, name)
        for wrong in teacher.WRONG[name]:
            check(wrong)
            out = capsys.readouterr().out
            assert len(out.split("incorrect — ", 1)[1].strip()) > 20, out


def test_medusa_takes_one_drafter_pass_as_the_benchmark_counts():
    """Exercise 5's answer for Medusa agrees with the committed benchmark: about one drafter pass a round."""
    report = load_report()
    for t in ("0", "1"):
        assert abs(report["results"][t]["medusa:16"]["draft_passes_per_round"] - 1) < 0.1
    assert teacher.REFERENCE["check_draft_passes"]["medusa"] == "1"
    check = ch12.check_draft_passes
    for answer in ("0", "depth"):
        assert check({**teacher.REFERENCE["check_draft_passes"], "medusa": answer}) == "incorrect"


def test_lossless_options_are_stored_by_content_and_balanced():
    options = ch12.LOSSLESS_OPTIONS
    assert set(options.values()) == set(teacher._LOSSLESS_WHY)
    assert {options[x] for x in teacher.REFERENCE["check_lossless"]} == {
        t for t, (lossless, _) in teacher._LOSSLESS_WHY.items() if lossless
    }
    lengths = [len(t) for t in options.values()]
    assert max(lengths) < 1.3 * min(lengths)


def test_tau_needed_inverts_the_round_model():
    """The tau exercise 3 asks for is the one chapter 02's model turns back into the requested speedup, on
    the committed benchmark's own (kc, V) for every method and both temperatures."""
    ref = teacher.REFERENCE["check_tau_needed"]
    for rows in load_report()["results"].values():
        for m, r in rows.items():
            if "kc" in r and m != "ar":
                tau = ref(r["kc"], r["V"], r["speedup"])
                assert abs(tau / (1 + r["kc"] + r["V"]) - r["speedup"]) < 1e-9
                assert ref(r["kc"], r["V"], r["predicted_speedup"]) == pytest.approx(r["tau"], rel=1e-3)
    assert ch12.check_tau_needed(lambda kc, V, s: "junk") == "incorrect"


def test_two_acceptances_match_a_simulation():
    """The closed forms against Monte Carlo with chapter 03's rule: a draw x ~ q is kept when u < p(x)/q(x);
    a deterministic pick x* is kept when a draw from p equals it (a point mass's rule)."""
    g = torch.Generator().manual_seed(3)
    p, q = torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.3, 0.3, 0.4])
    sampled, pick = teacher.two_acceptances(p, q)
    n = 200_000
    x = torch.multinomial(q, n, replacement=True, generator=g)
    kept = (torch.rand(n, generator=g) < (p[x] / q[x]).clamp(max=1)).float().mean()
    drawn = torch.multinomial(p, n, replacement=True, generator=g)
    assert abs(float(kept) - sampled) < 0.005 and abs(sampled - 0.7) < 1e-6
    assert abs(float((drawn == q.argmax()).float().mean()) - pick) < 0.005 and abs(pick - 0.1) < 1e-6
