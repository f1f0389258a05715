"""Chapter 12's checkers beyond the shared contract in tests/test_checks_common.py."""

import torch

from specdec_lib.checks import ch12
from specdec_lib.recap import PromptLookupProposer


def test_value_exercises():
    for name in ("check_draft_passes", "check_lossless"):
        check = getattr(ch12, name)
        assert check(ch12.REFERENCE[name]) == "correct"
        for wrong in ch12.WRONG[name]:
            assert check(wrong) == "incorrect", wrong
        assert check() == "not attempted" and check(None) == "not attempted"
        assert check(42) == "incorrect" and check("abc") == "incorrect"


def test_every_wrong_lookup_is_caught_by_its_own_case():
    """Each plausible mistake differs from the reference on at least one case (so the checker can say which)."""
    for wrong in ch12.WRONG["check_prompt_lookup"]:
        assert any(wrong(t, k, n) != ch12._ref_lookup(t, k, n) for t, k, n in ch12._LOOKUPS)


def test_the_exercise_reference_is_the_library_proposer():
    """The exercise's rule is what registry entry ngram drafts: PromptLookupProposer on the same texts."""
    g = torch.Generator().manual_seed(0)
    cases = list(ch12._LOOKUPS) + [
        (torch.randint(0, 4, (n,), generator=g).tolist(), k, m)
        for n in (2, 5, 9, 30)
        for k in (1, 3)
        for m in (1, 3)
    ]
    for tokens, k, n in cases:
        tree = PromptLookupProposer(k, n).propose(torch.tensor(tokens), max_depth=k)
        got = [] if tree is None else tree.tokens.tolist()
        assert got == ch12._ref_lookup(tokens, k, n), (tokens, k, n)
        if tree is not None:
            assert tree.is_chain and tree.q is None


def test_two_acceptances_match_a_simulation():
    """The closed forms against Monte Carlo with chapter 03's rule: a draw x ~ q is kept when u < p(x)/q(x);
    a deterministic pick x* is kept when a draw from p equals it (a point mass's rule)."""
    g = torch.Generator().manual_seed(3)
    p, q = torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.3, 0.3, 0.4])
    sampled, pick = ch12._ref_two_acceptances(p, q)
    n = 200_000
    x = torch.multinomial(q, n, replacement=True, generator=g)
    kept = (torch.rand(n, generator=g) < (p[x] / q[x]).clamp(max=1)).float().mean()
    drawn = torch.multinomial(p, n, replacement=True, generator=g)
    assert abs(float(kept) - sampled) < 0.005 and abs(sampled - 0.7) < 1e-6
    assert abs(float((drawn == q.argmax()).float().mean()) - pick) < 0.005 and abs(pick - 0.1) < 1e-6
