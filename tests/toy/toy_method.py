"""A toy method in ONE file: its proposer class (with `fresh_draft`, the contract test's reference) and
one `register(...)` are all it takes for the proposer contract test, the benchmark and the zoo trainer to
know it (tests/test_registry.py loads it as a pytest plugin: `-p toy_method`).

It guesses that the text repeats: each drafted token is drawn from q = the processed distribution of
logits that favour the token before it (greedy: k copies of the pending token). Its lying twin, "toy-liar",
reports q shifted by one token id: the slip the contract's exact sampling law must catch (and only it).
tests/test_registry.py runs the contract test on both in one go."""

import torch

from specdec_lib import hf, methods
from specdec_lib.autoregressive import process_logits, sample_token
from specdec_lib.speculative import DraftTree, Proposer


class RepeatProposer(Proposer):
    lie = False

    def __init__(self, k: int):
        self.k = k

    def start(self, target, prompt_ids, sampling, generator, features):
        self.sampling, self.generator, self.vocab = sampling, generator, hf.vocab_size(target)

    def logits(self, token: int) -> torch.Tensor:
        return 2.0 * torch.nn.functional.one_hot(torch.tensor(token), self.vocab).float()

    def propose(self, tokens, max_depth):
        k = min(self.k, max_depth)
        if k < 1:
            return None
        drafted, qs, before = [], [], int(tokens[-1])
        for _ in range(k):
            q = process_logits(self.logits(before), self.sampling)
            before = sample_token(q, self.generator)
            drafted.append(before)
            qs.append(q)
        q = None if self.sampling.greedy else torch.stack(qs)
        if q is not None and self.lie:
            q = q.roll(1, -1)
        self.forwards += 1
        return DraftTree.chain(tokens.new_tensor(drafted), q)

    def fresh_draft(self, target, tokens, tree):
        """The contract's reference: node i is the argmax of the logits after the token before it (the
        pending token for node 0)."""
        before = torch.cat([tokens[-1:], tree.tokens[:-1]])
        return [(self.logits(int(t)), 0) for t in before]


methods.register(
    "toy",
    lambda arg, target, draft, weights: RepeatProposer(int(arg or 2)),
    chapter=12,
    summary="a toy: drafts k copies of the pending token (tests/toy/toy_method.py)",
    example="toy:2",
    bench=("toy:2",),
    samples=True,
)


class LyingRepeatProposer(RepeatProposer):
    lie = True


methods.register(
    "toy-liar",
    lambda arg, target, draft, weights: LyingRepeatProposer(int(arg or 2)),
    chapter=12,
    summary="the toy's lying twin: the right tokens, q shifted by one token id",
    example="toy-liar:2",
    samples=True,
)
