"""The proposer contract: every method in the registry (`specdec_lib.methods.METHODS`) must

1. decode greedily exactly like plain autoregressive decoding (max_new_tokens 1, 2, 7, 20; held-out
   prompts; the zoo pair and the zoo's trained weights);
2. draft, every round, exactly what its drafter computes from a fresh teacher-forced pass over the
   committed text (so its caches and the features it keeps are right, not merely harmless);
3. leave the target's cache equal to a fresh prefill after every round;
4. sample exactly the target's distribution: the law of the first two tokens, at T = 1 and at T = 0.7
   with top-p 0.9 (and top-k 3), computed EXACTLY by enumerating every random draw of the proposer and
   the verifier (tiny random models, untrained weights).

A new method gets all four by registering; its proposer computes the fresh reference of 2. itself (its
`fresh_draft` method, chapter 02's Proposer), and the entry's flags pick the checks that need them
(`branches`, `reranks`, `samples`). The last tests show that the contract has teeth: broken proposers, a
lying proposer (right tokens, wrong q) and a broken verifier all fail it.
"""

import copy

import pytest
import torch
from conftest import (
    ExactLaw,
    check_target_cache,
    continuation_logits,
    record_drafts,
    split_tables,
    spy,
    tiny_model,
)

import specdec_lib as sd
from specdec_lib import hf, methods, rejection
from specdec_lib.autoregressive import SamplingParams, generate_ar, process_logits
from specdec_lib.eagle2 import Siblings
from specdec_lib.speculative import DraftTree, Proposer

SPECS = [spec for m in methods.METHODS.values() for spec in m.examples]  # every mode of every method
LAW_SPECS = [spec for m in methods.METHODS.values() for spec in m.law_examples]  # small enough to enumerate
BRANCHING = [m.law_examples[0] for m in methods.METHODS.values() if m.branches]  # trees with siblings
RERANKING = [m.name for m in methods.METHODS.values() if m.reranks]  # dynamic trees that keep their best
# Drafts that carry q (each method's smallest law spec; a lying tree:2-1 takes 30 s to enumerate, and one
# level of siblings shows the lie as well), and one tree of top-k picks (point masses, q None).
SMALLER = {"tree": "tree:2"}
LYING = [SMALLER.get(m.name, m.law_examples[0]) for m in methods.METHODS.values() if m.samples]
LYING += ["eagle2:3-2+topk"]

# The fresh, teacher-forced references live beside the proposers: each class's `fresh_draft` method
# (chapter 02's Proposer), which `conftest.spy` checks every greedy round against.


# ------------------------------------------------------------------------------ the greedy contract
@pytest.fixture(scope="module")
def zoo():
    target, draft, tok = sd.load_pair("tiny-code", device="cpu")
    prompts = [torch.tensor(tok.encode(p))[-48:] for p in sd.heldout_prompts(3)]
    refs = [generate_ar(target, p, 20) for p in prompts]
    return target, draft, prompts, refs


# Both target runners (issue 50): transformers' growing cache, and the preallocated one written in place,
# the latter with preallocated drafter caches too. Both start too small for prompt + 20 tokens + a tree, so
# they also grow mid-generation; the static run takes the longest and the shortest-but-one lengths (the
# others only test the engine's room, not the caches).
RUNNERS = {
    "dynamic": ((1, 2, 7, 20), lambda target: target),
    "static": ((2, 20), lambda t: hf.StaticRunner(t, 56)),
}


def preallocated(prop, runner, capacity=8):
    """`prop` with preallocated drafter caches on the static run (methods that keep no cache stay as
    they are: make_proposer refuses static_caches for them)."""
    if runner == "static" and hasattr(prop, "cache_capacity"):
        prop.cache_capacity = capacity
    return prop


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("spec", SPECS)
def test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute(spec, runner, zoo):
    target, draft, prompts, refs = zoo
    name = spec.partition(":")[0]
    lengths, wrap = RUNNERS[runner]
    drafting = 0  # rounds whose tree the spy checked against the fresh reference
    for prompt, ref in zip(prompts, refs, strict=True):
        for n in lengths:
            prop = spy(name, preallocated(sd.make_proposer(spec, target, draft), runner), target)
            run = wrap(target)
            out = sd.generate(run, prompt, n, prop, on_round=check_target_cache(run))
            assert out.tokens == ref[:n], f"{spec}: greedy output differs from plain decoding (n = {n})"
            assert out.stats.new_tokens == n and out.stats.target_forwards == len(out.stats.accepted)
            drafting += sum(1 for depth in out.stats.drafted if depth)
    # A proposer that never drafts decodes exactly too: every decode with room for a draft must have drafted
    # (a count of rounds would instead fail a drafter good enough to need few of them).
    room = len(prompts) * sum(1 for n in lengths if n > 1)
    assert drafting >= room, f"{spec}: suspiciously few rounds drafted anything ({drafting} < {room})"


# ------------------------------------------- the law of the first two tokens, by exact enumeration
def first_two_tokens_law(target, make, sampling, max_new_tokens, monkeypatch):
    """{(y1, y2): exact probability} of the first two tokens of `specdec_lib.generate`, every random
    draw of the proposer and the verifier enumerated (conftest.ExactLaw). `make()` returns a fresh
    (not yet started) proposer: a shallow copy of one built beforehand shares its weights."""
    law = enumerated(target, make, sampling, max_new_tokens, monkeypatch, lambda got: len(got) >= 2, 2)
    assert abs(sum(law.values()) - 1) < 1e-9
    return law


def enumerated(target, make, sampling, max_new_tokens, monkeypatch, enough, n):
    """{the first n tokens: exact probability} of generations from the prompt [1, 2, 3], each stopped
    after the first round at which `enough(tokens so far)` holds."""
    enum = ExactLaw(monkeypatch)

    class Enough(Exception):
        pass

    def run():
        got = []

        def on_round(tokens, verdict, cache):
            got.extend(verdict.tokens)
            if enough(got):
                raise Enough

        try:
            sd.generate(target, torch.tensor([1, 2, 3]), max_new_tokens, make(), sampling.temperature,
                        sampling.top_k, sampling.top_p, on_round=on_round)  # fmt: skip
        except Enough:
            pass
        return tuple(got[:n])

    return enum.run(run)


def target_law(target, sampling):
    V = hf.vocab_size(target)
    p1, p2, _ = split_tables(process_logits(continuation_logits(target, [1, 2, 3], V), sampling), 3, V)
    return (p1.double()[:, None] * p2.double()).numpy()


def law_gap(law, want):
    got = torch.zeros(want.shape, dtype=torch.float64)
    for (a, b), w in law.items():
        got[a, b] += w
    return float((got - torch.as_tensor(want)).abs().max())


EXACT = 1e-5  # the enumeration is exact: a lossless method differs from the target by rounding only
SAMPLINGS = {
    "T=1": (SamplingParams(1.0), 2),
    "T=0.7 top-k 3 top-p 0.9": (SamplingParams(0.7, top_k=3, top_p=0.9), 3),
}


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(vocab=8, seed=0, scale=3.0), tiny_model(vocab=8, seed=1, layers=1, scale=3.0)


@pytest.mark.parametrize("name", list(methods.METHODS))
def test_each_entry_says_what_its_proposer_does(name, tiny):
    """The contract's inputs from each method: its proposer has the fresh reference (`fresh_draft`), and
    its entry's `samples` flag is true exactly when its sampled drafts carry q (the lying-proposer check
    runs on those). The prompt repeats itself, so that prompt lookup drafts too."""
    target, draft = tiny
    method, carried = methods.METHODS[name], []
    prop = sd.make_proposer(method.law_examples[0], target, draft, weights="random")
    assert callable(getattr(prop, "fresh_draft", None)), (
        f"{name}: {type(prop).__name__} needs a fresh_draft(target, tokens, tree) method (chapter 02's Proposer)"
    )
    propose = prop.propose

    def recorded(tokens, max_depth):
        tree = propose(tokens, max_depth)
        carried.extend([] if tree is None else [tree.q is not None])
        return tree

    prop.propose = recorded
    sd.generate(target, torch.tensor([1, 2, 3, 1, 2]), 6, prop, temperature=1.0, seed=0)
    assert carried, f"{name} drafted nothing"
    assert all(carried) == any(carried) == method.samples, (
        f"{name}: samples={method.samples} in its entry, but its sampled drafts carry q: {carried}"
    )


@pytest.mark.parametrize("config", SAMPLINGS)
@pytest.mark.parametrize("spec", LAW_SPECS)
def test_sampling_is_exactly_the_targets_distribution(spec, config, tiny, monkeypatch):
    """Every mode of every method, under both samplings. The filtered one runs on the preallocated target
    cache and drafter caches (issue 50), which both grow during the first round's prefill and tree: a
    runner changes how the target's cache is kept (a crop for a chain, an in-place gather for a tree),
    not the rule, so each sampling runs on one runner and each runner keeps the law of every mode."""
    target, draft = tiny
    sampling, max_new = SAMPLINGS[config]
    base = sd.make_proposer(spec, target, draft, weights="random")  # built before randomness is scripted
    runner = target
    if sampling.top_p is not None:
        base, runner = preallocated(base, "static", capacity=2), hf.StaticRunner(target, capacity=4)
    law = first_two_tokens_law(runner, lambda: copy.copy(base), sampling, max_new, monkeypatch)
    assert law_gap(law, target_law(target, sampling)) < EXACT, f"{spec} under {config} is lossy"


@pytest.mark.parametrize("config", SAMPLINGS)
def test_a_reduced_draft_vocabulary_stays_exact(config, tiny, monkeypatch):
    """EAGLE-3's drafter can propose only 3 of the 8 ids (its reduced vocabulary): the other 5 are never
    drafted, and the law is still exactly the target's, since the target's own draws supply them."""
    from specdec_lib.eagle2 import Eagle2Proposer
    from specdec_lib.eagle3 import Eagle3Drafter, draft_vocabulary

    target, _ = tiny
    sampling, max_new = SAMPLINGS[config]
    d2t, t2d = draft_vocabulary(torch.tensor([0, 5, 0, 0, 5, 0, 5, 0]), 3)  # ids 1, 4 and 6
    drafter = Eagle3Drafter(target, d2t, feature_layers=(0, 1, -1)).eval()
    base = Eagle2Proposer(drafter, total_tokens=4, depth=2, top_k=2)
    drafted = []
    law = first_two_tokens_law(
        target, lambda: record_drafts(copy.copy(base), drafted), sampling, max_new, monkeypatch
    )
    assert drafted and set(drafted) <= {1, 4, 6}
    assert law_gap(law, target_law(target, sampling)) < EXACT


# ------------------------------------------- deep trees: one round, its law completed by the target
def one_round_law(target, make, sampling, n, max_new_tokens, monkeypatch):
    """{(y1 .. yn): exact probability} when the FIRST round of `specdec_lib.generate` emits what it emits
    (every draw enumerated) and, if that is fewer than n tokens, the target itself samples the rest (its
    exact conditional probabilities). A lossless round gives the target's law of n tokens; enumerating
    only one round is what makes a deep tree affordable (the law test above runs whole generations)."""
    law = {}
    for emitted, w in enumerated(target, make, sampling, max_new_tokens, monkeypatch, bool, n).items():
        for rest, v in target_sequences(target, sampling, [1, 2, 3, *emitted], n - len(emitted)).items():
            law[emitted + rest] = law.get(emitted + rest, 0.0) + w * v
    return law


def first_round_gap(target, make, sampling, max_new_tokens, monkeypatch):
    """How far the law of the first two tokens is from the target's, with only the first round enumerated
    (`one_round_law`): for the checks of what a proposer drafts in a round, whose broken variants all
    show in round one. The law test above enumerates whole generations."""
    law = one_round_law(target, make, sampling, 2, max_new_tokens, monkeypatch)
    return sequence_gap(law, target_sequences(target, sampling, [1, 2, 3], 2))


def target_sequences(target, sampling, context, n):
    """{(x1 .. xn): the target's exact probability of sampling them after `context`} (processed p)."""
    if n <= 0:
        return {(): 1.0}
    with torch.no_grad():
        p = process_logits(hf.forward(target, torch.tensor(context)).logits[-1].float(), sampling).double()
    p = p / p.sum()  # float64 from here, so that the law sums to 1 up to float64 rounding
    out = {}
    for x in p.nonzero().flatten().tolist():
        for rest, v in target_sequences(target, sampling, context + [x], n - 1).items():
            out[(x,) + rest] = float(p[x]) * v
    return out


def sequence_gap(law, want):
    return max(abs(law.get(y, 0.0) - want.get(y, 0.0)) for y in set(law) | set(want))


class TokenCache:
    """PathDrafter's cache: the token each fed position read, in the order they were fed."""

    def __init__(self):
        self.tokens = []

    def __len__(self):
        return len(self.tokens)

    def crop(self, n):
        del self.tokens[n:]


class PathDrafter:
    """A stand-in feature drafter (chapter 07's FeatureDrafter protocol) for the deep-tree law. Its q is
    the target's own distribution after the text the drafter has read, sharpened (temperature 0.35) and
    without the text's first token (no position reads it): close enough to p that nodes three deep get
    verified, different enough that they are also rejected, and confident enough that some trees grow
    three deep while others stop early. A position's "feature" is that text, written as token
    ids in a row of floats; its cache keeps the token each position read, and a tree row reads the
    committed positions and its ancestors through the mask, as a drafter's attention does."""

    feature_layers = (-1,)
    width = 32  # the longest text a feature row holds
    temperature = 0.35

    def __init__(self, target):
        self.target, self.vocab = target, hf.vocab_size(target)

    def fuse(self, hidden):
        return hidden[-1]  # the target's features: only their number matters here

    def new_cache(self, capacity=None):
        return TokenCache()

    def __call__(self, feats, ahead, positions, cache=None, mask=None):
        start = len(cache)
        cache.tokens += ahead.tolist()
        rows = torch.zeros(len(ahead), self.width)
        for r in range(len(ahead)):
            if mask is None:  # the committed text, causally
                read = cache.tokens[: start + r + 1]
            else:  # the committed positions and the node's ancestors, in the order they were fed
                read = [t for t, seen in zip(cache.tokens, mask[r].tolist()) if seen]
            rows[r, : len(read)] = torch.tensor(read, dtype=torch.float32) + 1
        return rows

    def logits(self, h):
        rows = h.reshape(-1, self.width)
        out = torch.stack([
            hf.forward(self.target, (row[row > 0] - 1).long()).logits[-1].float() / self.temperature for row in rows
        ])  # fmt: skip
        return out.reshape(*h.shape[:-1], self.vocab)


class DrawnBelowTheRoot:
    """EAGLE-2 broken only below the root: the root's slots are ranked before their draws, as they must
    be, but every deeper node's slots are drawn first and scored by their drawn tokens' own confidence,
    so that the frontier and the re-rank at depth >= 2 keep the confident draws."""

    def propose(self, tokens, max_depth):
        self.nodes_seen = 0
        return super().propose(tokens, max_depth)

    def siblings(self, logits):
        self.nodes_seen += 1
        exact = super().siblings(logits)
        if self.nodes_seen == 1 or exact.q is None:
            return exact
        return DrawnSiblings(exact.q.log(), exact.q, self.top_k, self.generator)


DEEP = SamplingParams(1.0, top_k=3)  # three tokens per draw keep the enumeration of a depth-3 tree small


def test_deep_trees_are_exact_and_a_re_rank_of_deep_draws_is_caught(tiny, monkeypatch):
    """EAGLE-2's tree (EAGLE-3 grows the same one: Eagle3Proposer only names its drafter) three levels
    deep: 3 slots per node, a frontier of 3 chosen among 9 nodes, 4 of up to 21 recorded nodes kept;
    trees three deep, trees whose third level lost the re-rank, and trees stopped early are all among
    the enumerated rounds. The law of the first 3 tokens is exactly the target's (one round enumerated,
    the rest completed by the target), and the variant that ranks the drawn tokens below the root, which
    no depth-1 tree shows, is caught."""
    from specdec_lib.eagle2 import Eagle2Proposer

    target, _ = tiny
    want = target_sequences(target, DEEP, [1, 2, 3], 3)
    base = Eagle2Proposer(PathDrafter(target), total_tokens=4, depth=3, top_k=3)
    rounds = set()  # (depth, drafter passes) of every first round

    def make():
        prop = copy.copy(base)
        propose = prop.propose

        def recorded(tokens, max_depth):
            passes = prop.forwards
            tree = propose(tokens, max_depth)
            rounds.add((int(tree.depth().max()), prop.forwards - passes))
            return tree

        prop.propose = recorded
        return prop

    law = one_round_law(target, make, DEEP, 3, 4, monkeypatch)
    assert abs(sum(law.values()) - 1) < 1e-9
    assert sequence_gap(law, want) < EXACT, "EAGLE-2's deep tree is lossy"
    assert {(3, 3), (2, 3), (2, 2)} <= rounds, f"(depth, drafter passes) of the trees: {sorted(rounds)}"

    # The broken variant draws every slot below the root before ranking them: too many draws to enumerate
    # in the tree above, so it runs in a smaller one (2 slots per node, 3 of the 6 nodes kept, depth 2),
    # where the exact rule is exact too.
    small = Eagle2Proposer(PathDrafter(target), total_tokens=3, depth=2, top_k=2)
    want = target_sequences(target, DEEP, [1, 2, 3], 2)
    assert (
        sequence_gap(one_round_law(target, lambda: copy.copy(small), DEEP, 2, 3, monkeypatch), want) < EXACT
    )
    broken = type("Broken", (DrawnBelowTheRoot, Eagle2Proposer), {})(PathDrafter(target), 3, 2, 2)
    gap = sequence_gap(one_round_law(target, lambda: copy.copy(broken), DEEP, 2, 3, monkeypatch), want)
    assert gap > 10 * EXACT, f"the deep-tree check missed a re-rank of deep draws (gap {gap:.1e})"


# ------------------------------------------------------------------------------ the contract's teeth
class LyingProposer(Proposer):
    """Right tokens, wrong q: draws exactly as the wrapped proposer does, then reports q sharpened
    (q^2, renormalised) -- the bug of a drafter that samples at one temperature and reports another."""

    def __init__(self, inner):
        self.inner, self.feature_layers = inner, inner.feature_layers

    def start(self, *args):
        self.inner.start(*args)

    def propose(self, tokens, max_depth):
        tree = self.inner.propose(tokens, max_depth)
        if tree is not None and tree.q is not None:
            tree = DraftTree(tree.tokens, tree.parents, tree.q**2 / (tree.q**2).sum(-1, keepdim=True))
        return tree

    def update(self, tokens, verdict):
        self.inner.update(tokens, verdict)


class LyingTopK(LyingProposer):
    """Deterministic top-k picks reported as if drawn uniformly among their siblings (q = 1/m on each of
    the m sibling tokens) instead of as point masses: the slip of a tree drafter that forgets how its
    nodes were chosen."""

    def propose(self, tokens, max_depth):
        tree = self.inner.propose(tokens, max_depth)
        if tree is None or tree.q is not None:
            return tree
        q = torch.zeros(len(tree), hf.vocab_size(self.target))
        for kids in tree.children().values():
            q[kids] = torch.zeros(hf.vocab_size(self.target)).index_fill(0, tree.tokens[kids], 1 / len(kids))
        return DraftTree(tree.tokens, tree.parents, q)


@pytest.mark.parametrize("spec", LYING)
def test_a_lying_proposer_is_caught(spec, tiny, monkeypatch):
    target, draft = tiny
    sampling, max_new = SAMPLINGS["T=0.7 top-k 3 top-p 0.9"]
    base = sd.make_proposer(spec, target, draft, weights="random")
    liar = LyingTopK if spec.endswith("+topk") else LyingProposer

    def make():
        lying = liar(copy.copy(base))
        lying.target = target
        return lying

    gap = law_gap(
        first_two_tokens_law(target, make, sampling, max_new, monkeypatch), target_law(target, sampling)
    )
    assert gap > 10 * EXACT, f"the exact sampling check missed a lying {spec} proposer (gap {gap:.1e})"


class UnconditionedSiblings(LyingProposer):
    """Siblings drawn without replacement, but every one reported with its parent's whole distribution
    (the first sibling's row) instead of the distribution left after its elder siblings were drawn."""

    def propose(self, tokens, max_depth):
        tree = self.inner.propose(tokens, max_depth)
        if tree is None or tree.q is None:
            return tree
        first = {parent: kids[0] for parent, kids in tree.children().items()}
        q = torch.stack([tree.q[first[int(parent)]] for parent in tree.parents])
        return DraftTree(tree.tokens, tree.parents, q)


@pytest.mark.parametrize("spec", BRANCHING)
def test_siblings_q_must_be_conditioned_on_the_earlier_siblings(spec, tiny, monkeypatch):
    target, draft = tiny
    sampling, max_new = SAMPLINGS["T=1"]
    base = sd.make_proposer(spec, target, draft, weights="random")
    gap = first_round_gap(
        target, lambda: UnconditionedSiblings(copy.copy(base)), sampling, max_new, monkeypatch
    )
    assert gap > 10 * EXACT, (
        f"the exact sampling check missed {spec}'s unconditioned sibling q (gap {gap:.1e})"
    )


class DrawnSiblings:
    """The naive port of EAGLE-2 to sampling: draw a node's k children first, then score each by its
    drawn token's own log-probability, so that the re-rank keeps the confident draws."""

    def __init__(self, logp, q, k, generator=None, worth=None):
        exact = Siblings(logp, q, k, generator)  # the same draws, in the same order
        self.q, self.drawn = q, [exact.take(j) for j in range(len(exact.scores))]
        self.scores = [float(q[t].log()) for t, _ in self.drawn]  # the drawn tokens' own confidences

    def take(self, j):
        return self.drawn[j]


@pytest.mark.parametrize("spec", RERANKING)
def test_sample_then_rerank_is_caught_and_slot_ranking_is_exact(spec, tiny, monkeypatch):
    """EAGLE-2's tree (EAGLE-3 grows the same one) with 3 child slots per node and a budget of 2 nodes:
    the re-rank drops one. Ranking the slots by what is known before the draw is exact; ranking the
    drawn tokens (keep the confident ones) is not, and the enumeration sees it (at T = 1; the law test
    above runs the exact rule under both samplings)."""
    from specdec_lib import eagle2

    target, draft = tiny
    sampling, max_new = SAMPLINGS["T=1"]
    base = sd.make_proposer(f"{spec}:2-2", target, draft, weights="random")  # before randomness is scripted
    base.top_k = 3  # 3 slots per node, 2 kept: the re-rank must drop one

    def round_gap():
        return first_round_gap(target, lambda: copy.copy(base), sampling, max_new, monkeypatch)

    assert round_gap() < EXACT
    monkeypatch.setattr(eagle2, "Siblings", DrawnSiblings)
    gap = round_gap()
    assert gap > 10 * EXACT, f"the exact sampling check missed {spec}'s sample-then-rerank (gap {gap:.1e})"


def test_a_later_slot_kept_without_the_earlier_one_is_still_exact(tiny, monkeypatch):
    """Why ranking slots is enough, even when the table is not monotone: with a budget of ONE node and a
    second slot worth more than the first (no cummin), the tree is slot 1 alone, its token drawn after a
    slot-0 draw the verifier never sees, and reported with the q left after that draw. Given the unseen
    draw, that row is exactly the law of the token, so every verification is exact and so is the mixture:
    what must never happen is a slot kept or dropped because of its OWN token (sample-then-rerank)."""
    target, draft = tiny
    sampling, max_new = SAMPLINGS["T=1"]
    base = sd.make_proposer("eagle2:1-2", target, draft, weights="random")
    base.top_k = 3
    base.slot_worth = torch.tensor([[0.4, 0.44, 0.04]] * 10).log()  # rising, as a noisy row could be
    law = first_two_tokens_law(target, lambda: copy.copy(base), sampling, max_new, monkeypatch)
    assert law_gap(law, target_law(target, sampling)) < EXACT


def test_a_broken_verifier_is_caught(tiny, monkeypatch):
    """After a rejection, sampling the correction from p instead of the residual max(0, p - q)."""
    target, draft = tiny
    sampling, max_new = SAMPLINGS["T=1"]
    monkeypatch.setattr(rejection, "residual", lambda p, q: p)
    base = sd.make_proposer("chain:3", target, draft, weights="random")
    make = lambda: copy.copy(base)  # noqa: E731
    gap = law_gap(
        first_two_tokens_law(target, make, sampling, max_new, monkeypatch), target_law(target, sampling)
    )
    assert gap > 10 * EXACT, f"the exact sampling check missed a broken verifier (gap {gap:.1e})"


class CroppingTree(sd.TreeDraftProposer):
    """Rolls its cache back as if the tree were a chain: a crop to the accepted length instead of a
    gather of the accepted nodes, so a path through a non-first child keeps the wrong keys/values."""

    def update(self, tokens, verdict):
        kept = [node for node in verdict.path if node < self.fed]
        hf.crop_cache(self.cache, len(tokens) - len(verdict.tokens) + len(kept))


class EarlyMedusa(sd.MedusaProposer):
    """Keeps the hidden state one position too early (lossless, so greedy equality cannot see it)."""

    def update(self, tokens, verdict):
        h = verdict.features[-1]
        self.h = h[-2] if len(h) > 1 else self.h


@pytest.mark.parametrize("broken", ["tree cache cropped, not gathered", "Medusa features one position early"])
def test_broken_proposers_are_caught(broken, zoo):
    target, draft, prompts, _ = zoo
    if broken.startswith("tree"):
        name, prop = "tree", CroppingTree(draft, (3, 2, 1))
    else:
        real = sd.make_proposer("medusa:16", target)
        name, prop = "medusa", EarlyMedusa(real.heads, real.choices)
    with pytest.raises(AssertionError, match="fresh teacher-forced"):
        sd.generate(target, prompts[0], 20, spy(name, prop, target))


# ----------------------------------------------------------------------------------- the registry
def test_registry_specs_and_errors(tiny):
    target, draft = tiny
    assert {
        "chain",
        "tree",
        "medusa",
        "mtp-independent",
        "mtp-sequential",
        "eagle",
        "eagle2",
        "eagle3",
    } <= set(methods.METHODS)
    assert sd.make_proposer("chain:5", target, draft).k == 5
    assert sd.make_proposer("tree:3-1", target, draft).branching == (3, 1)
    assert len(sd.make_proposer("eagle:5", target, weights="random").choices) == 5
    assert sd.make_proposer("eagle2:24", target, weights="random").total_tokens == 24
    e3 = sd.make_proposer("eagle3:12-4", target, weights="random")
    assert (e3.total_tokens, e3.depth) == (12, 4)
    bad_specs = ("nope", "chain:0", "chain:x", "tree:2--1", 3, "eagle:0", "eagle2:-3", "eagle2:x", "eagle3:0")
    for bad in bad_specs + ("eagle3:12-", "eagle2:8-0", "eagle3:1-2-3"):
        with pytest.raises(ValueError):
            sd.make_proposer(bad, target, draft)
    with pytest.raises(ValueError, match="needs a draft model"):
        sd.make_proposer("chain:2", target)
    with pytest.raises(ValueError, match="weights"):
        sd.make_proposer("medusa", target, weights="pretrained")
