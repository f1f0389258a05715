"""Chapter 10's checkers beyond the shared contract in tests/test_checks_common.py."""

import torch

from specdec_lib.checks import ch10
from specdec_lib.dflash import dflash_training_mask


def test_what_dflash_changes_question():
    check = ch10.check_what_dflash_changes
    assert check(*ch10.REFERENCE["check_what_dflash_changes"]) == "correct"
    for answer in ch10.WRONG["check_what_dflash_changes"]:
        assert check(*answer) == "incorrect", answer
    assert check() == "not attempted" and check("b") == "not attempted"

    def stub(k, block_size):
        raise NotImplementedError

    assert check("b", stub) == "not attempted"
    assert check(2, ch10._ref_rounds) == "incorrect"
    assert check("b", lambda k, B: "junk") == "incorrect"


def test_the_exercise_mask_is_the_library_mask():
    """The exercise's rule is exactly what training uses (dflash_training_mask, tested against inference)."""
    for anchors, length, B in (([0], 4, 2), ([1, 5], 10, 3), ([0, 2, 6, 9], 14, 4)):
        want = dflash_training_mask(torch.tensor(anchors), length, B)
        assert torch.equal(ch10.REFERENCE["check_training_mask"](anchors, length, B), want)


def test_the_exercise_loss_is_the_library_weighting():
    draft, target = torch.randn(6, 5), torch.randn(6, 5)
    ce = -(torch.softmax(target, -1) * torch.log_softmax(draft, -1)).sum(-1)
    w = torch.tensor([2.718281828 ** (-(k - 1) / 3.0) for k in range(1, 7)])
    assert (
        abs(ch10.REFERENCE["check_block_loss"](draft, target, 3.0) - float((w * ce).sum() / w.sum())) < 1e-5
    )
