"""Chapter 11's checkers beyond the shared contract in tests/test_checks_common.py."""

import torch

from specdec_course.checks import ch11
from specdec_lib.dflash2 import PathSelector, TwoTapMixer
from specdec_teacher import ch11 as teacher


def test_what_dflash2_addresses_question(capsys):
    check = ch11.check_dflash2_problems
    right, fixes = teacher.REFERENCE["check_dflash2_problems"]
    assert ch11.DFLASH2_OPTIONS[right] == teacher.DFLASH2_RIGHT
    assert check(right, fixes) == "correct"
    capsys.readouterr()
    for answer in teacher.WRONG["check_dflash2_problems"]:
        assert check(*answer) == "incorrect", answer
        out = capsys.readouterr().out
        assert len(out.split("incorrect — ", 1)[1].strip()) > 20, out  # a hint, not just "wrong"
    assert (
        check() == "not attempted"
        and check(right) == "not attempted"
        and check(None, fixes) == "not attempted"
    )
    assert check(2, fixes) == "incorrect" and check(right, "coordination") == "incorrect"


def test_the_options_are_balanced():
    """The right option is stored by its text, is not the longest, and each near miss has its own hint."""
    options = ch11.DFLASH2_OPTIONS
    lengths = sorted(len(t) for t in options.values())
    assert len(teacher.DFLASH2_RIGHT) < lengths[-1] and lengths[-1] < 1.3 * lengths[0]
    assert set(options.values()) == {teacher.DFLASH2_RIGHT, *teacher._DFLASH2_WHY}


def test_selector_walk_by_hand():
    check = ch11.check_selector_walk
    assert check(teacher.REFERENCE["check_selector_walk"]) == "correct"
    for answer in teacher.WRONG["check_selector_walk"]:
        assert check(answer) == "incorrect", answer
    assert check() == "not attempted" and check(...) == "not attempted" and check(42) == "incorrect"


def test_the_hand_example_is_the_library_walk():
    """The example's walk is PathSelector.walk's: a rank-1 selector whose bilinear term reproduces the
    table (A(a) = compat row of a, H = 1, B(b) = one-hot of b) walks the same path; and the selector
    really changes the drafter's own picks ("( ( )" becomes "( self )")."""
    ex = ch11.SELECTOR_EXAMPLE
    vocab = ["__init__", "(", "self", ")", ":"]
    idx = {t: i for i, t in enumerate(vocab)}
    sel = PathSelector(len(vocab), 1, rank=len(vocab), top_k=3)
    with torch.no_grad():
        sel.gate.weight.fill_(1.0)
        sel.successor.weight.copy_(torch.eye(len(vocab)))
        sel.predecessor.weight.zero_()
        for a, row in ex["compat"].items():
            for b, c in row.items():
                sel.predecessor.weight[idx[a], idx[b]] = c
    logits = torch.full((3, len(vocab)), -10.0)
    for t, (cand, unary) in enumerate(zip(ex["candidates"], ex["unary"], strict=True)):
        for b, u in zip(cand, unary, strict=True):
            logits[t, idx[b]] = u
    path, _ = sel.walk(logits, torch.ones(3, 1), anchor=idx["__init__"])
    assert [vocab[i] for i in path.tolist()] == teacher.REFERENCE["check_selector_walk"] == ["(", "self", ")"]
    assert [vocab[i] for i in logits.argmax(-1).tolist()] == ["(", "(", ")"]


def test_the_exercise_mixing_is_the_library_mixer():
    """With the dynamic part off, TwoTapMixer's input side is the exercise's formula with k0 = base tap 0
    and k1 = base tap 1, blocks read from the keep mask."""
    torch.manual_seed(0)
    mix = TwoTapMixer(4, group_size=2)
    with torch.no_grad():
        mix.base.normal_()
    x, B = torch.randn(6, 4), 3
    keep = torch.arange(6) % B != 0
    y, _ = mix.prepare(x, keep)
    k0, k1 = mix.base[0, 0].expand(6, 4), mix.base[0, 1].expand(6, 4)
    assert torch.allclose(y, teacher.REFERENCE["check_two_tap"](x, k0, k1, B).to(y.dtype), atol=1e-6)
