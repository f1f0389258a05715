"""Chapter 07's checkers beyond the shared contract in tests/test_checks_common.py."""

import torch

from specdec_lib.checks import ch07


def test_feature_uncertainty_question():
    assert ch07.check_feature_uncertainty(*ch07.REFERENCE["check_feature_uncertainty"]) == "correct"
    for answer in ch07.WRONG["check_feature_uncertainty"]:
        assert ch07.check_feature_uncertainty(*answer) == "incorrect", answer
    assert ch07.check_feature_uncertainty() == "not attempted"
    assert ch07.check_feature_uncertainty("b") == "not attempted"

    def stub(f, p):
        raise NotImplementedError

    assert ch07.check_feature_uncertainty("b", stub) == "not attempted"
    assert ch07.check_feature_uncertainty(2, ch07.REFERENCE["check_feature_uncertainty"][1]) == "incorrect"
    assert ch07.check_feature_uncertainty("b", lambda f, p: "junk") == "incorrect"


def test_drafter_cache_reference_matches_the_proposer():
    """The exercise's rule is what EagleProposer does: crop to n, then the catch-up feeds n .. n + accepted."""
    from conftest import tiny_model

    import specdec_lib as sd
    from specdec_lib.eagle import EagleDrafter, EagleProposer
    from specdec_lib.speculative import Verdict

    target = tiny_model(vocab=8, seed=0)
    prop = EagleProposer(EagleDrafter(target), [(0,), (0, 0), (0, 0, 0)])
    d = target.config.hidden_size
    for n in (2, 5):
        for accepted in (0, 1, 3):
            tokens = torch.arange(n + 1) % 8
            prop.start(target, tokens, sd.SamplingParams(0.0), None, {-1: torch.zeros(n, d)})
            tree = prop.propose(tokens, 3)
            assert tree is not None
            new = [0] * (accepted + 1)
            verdict = Verdict(tree, list(range(accepted)), new, None, {-1: torch.zeros(accepted + 1, d)})
            tokens = torch.cat([tokens, torch.tensor(new)])
            prop.update(tokens, verdict)
            kept, fed = ch07.REFERENCE["check_drafter_cache"](n, accepted)
            assert len(prop.cache) == kept and len(prop.f) == len(fed)
