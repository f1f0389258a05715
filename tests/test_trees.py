"""Draft trees (chapter 04): tree masks and positions (per-path logits on three architectures and the
zoo target), the tree drafter (bad arguments, max_depth, greedy equality, the context and caches of its
draft passes, the q row each sibling records), the exact laws of `draw_children`, and SpecInfer's
multi-step speculative sampling, lossless EXACTLY: every draft outcome and every cell of the verifier's
uniforms enumerated, a known-wrong scheme (siblings drawn without replacement, verified with the
unadjusted q) that the exact test must catch, and chapter 04's `first_token_law`."""

import copy
import itertools

import numpy as np
import pytest
import torch
from conftest import ExactLaw, continuation_logits, split_tables, tiny_model

from specdec_lib import hf, trees
from specdec_lib.autoregressive import SamplingParams, generate_ar, process_logits
from specdec_lib.rejection import residual
from specdec_lib.speculative import DraftTree, decode
from specdec_lib.trees import TreeDraftProposer, ancestor_mask, draw_children, tree_from_paths, verify_tree

PROMPTS = [[1, 2, 3], [5], [7, 7, 7, 7, 0, 3, 9], [15, 14, 13, 12, 11]]


@pytest.fixture(scope="module")
def noisy_pair(tiny_pair):
    """(target, draft): the draft is the target with a noisy output layer, so it is often right but its
    ranking often differs: rounds accept long paths, and sometimes a non-first child."""
    target, _ = tiny_pair
    draft = copy.deepcopy(target)
    with torch.no_grad():
        w = draft.lm_head.weight
        w.add_(0.6 * w.std() * torch.randn(w.shape, generator=torch.Generator().manual_seed(5)))
    return target, draft


# ---------------------------------------------------------------------------- masks and positions
def test_flatten_by_hand():
    tree = tree_from_paths([[5, 7], [5, 9], [6], [5, 7, 2]])
    assert tree.tokens.tolist() == [5, 7, 9, 6, 2] and tree.parents.tolist() == [-1, 0, 0, -1, 1]
    ids, pos, mask = tree.flatten(root=1, prefix_len=10)
    assert ids.tolist() == [1, 5, 7, 9, 6, 2]
    assert pos.tolist() == [10, 11, 12, 12, 11, 13]
    want = [
        [1, 0, 0, 0, 0, 0],  # root
        [1, 1, 0, 0, 0, 0],  # 5
        [1, 1, 1, 0, 0, 0],  # 5 -> 7
        [1, 1, 0, 1, 0, 0],  # 5 -> 9
        [1, 0, 0, 0, 1, 0],  # 6
        [1, 1, 1, 0, 0, 1],  # 5 -> 7 -> 2
    ]
    assert mask.tolist() == [[bool(v) for v in r] for r in want]
    chain = DraftTree.chain(torch.tensor([4, 4, 4]))
    assert chain.flatten(0, 3)[1:] == (None, None)  # a chain is plain causal: no mask, default positions
    assert torch.equal(ancestor_mask(torch.arange(4) - 1), torch.ones(4, 4, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="before"):
        ancestor_mask([-1, 2, 0])


def random_tree(vocab, branching, seed):
    g = torch.Generator().manual_seed(seed)
    tokens, parents, level = [], [], [-1]
    for k in branching:
        new = []
        for parent in level:
            for _ in range(k):
                new.append(len(tokens))
                tokens.append(int(torch.randint(vocab, (1,), generator=g)))
                parents.append(parent)
        level = new
    return DraftTree(torch.tensor(tokens), torch.tensor(parents))


def assert_tree_logits_match_paths(model, vocab):
    prefix = torch.randint(vocab, (7,), generator=torch.Generator().manual_seed(1))
    tree = random_tree(vocab, (3, 2, 2), seed=2)
    root = int(prefix[-1])
    with torch.no_grad():
        cache = hf.new_cache(model)
        hf.forward(model, prefix[:-1], cache)
        ids, pos, mask = tree.flatten(root, len(prefix) - 1)
        got = hf.forward(model, ids, cache, position_ids=pos, tree_mask=mask).logits
        # The same tree fed in two passes, the second with a [n, cached + n] mask (the drafter's way).
        cache2 = hf.new_cache(model)
        hf.forward(model, prefix[:-1], cache2)
        split = 4  # root + the first level
        first = hf.forward(
            model, ids[:split], cache2, position_ids=pos[:split], tree_mask=mask[:split, :split]
        )
        full = torch.cat([torch.ones(len(ids) - split, len(prefix) - 1, dtype=torch.bool), mask[split:]], 1)
        second = hf.forward(model, ids[split:], cache2, position_ids=pos[split:], tree_mask=full)
        two_pass = torch.cat([first.logits, second.logits])
        for i in range(-1, len(tree)):
            seq = torch.cat([prefix, tree.tokens[tree.path_to(i)]]) if i >= 0 else prefix
            want = hf.forward(model, seq).logits[-1]
            assert (got[i + 1] - want).abs().max() <= 1e-4, i
            assert (two_pass[i + 1] - want).abs().max() <= 1e-4, i


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_tree_masked_logits_equal_per_path_logits(arch):
    assert_tree_logits_match_paths(tiny_model(vocab=16, seed=0, arch=arch, scale=5.0), 16)


def test_tree_masked_logits_on_the_zoo_target():
    from specdec_lib.zoo import load_pair

    target, _, _ = load_pair("tiny-code", device="cpu")
    assert_tree_logits_match_paths(target, hf.vocab_size(target))


# ---------------------------------------------------------------------------------- the drafter
def test_bad_arguments_raise(tiny_pair):
    target, draft = tiny_pair
    for branching in [(), (0,), (2, -1), (1.5,)]:
        with pytest.raises(ValueError, match="branching"):
            TreeDraftProposer(draft, branching)
    with pytest.raises(ValueError, match="mode"):
        TreeDraftProposer(draft, (2,), mode="beam")
    with pytest.raises(ValueError, match="vocabularies"):
        decode(target, [1, 2], 5, TreeDraftProposer(tiny_model(vocab=20, seed=3)))


def test_max_depth_is_respected(tiny_pair):
    target, draft = tiny_pair
    proposer, prompt = TreeDraftProposer(draft, (3, 2, 1)), torch.tensor(PROMPTS[0])
    with torch.inference_mode():
        proposer.start(target, prompt, SamplingParams(), None, {})
        assert proposer.propose(prompt, 0) is None
        for depth, size in [(1, 3), (2, 9), (3, 15), (7, 15)]:
            proposer.start(target, prompt, SamplingParams(), None, {})
            before = proposer.forwards  # a running count: the engine reports its growth
            tree = proposer.propose(prompt, depth)
            assert len(tree) == size and int(tree.depth().max()) == min(depth, 3)
            assert proposer.forwards - before == min(depth, 3)  # one pass per level (the first: the prompt)
    for n in (1, 2, 3, 5):
        out = decode(target, PROMPTS[2], n, TreeDraftProposer(draft, (2, 2, 2, 2)))
        assert out.tokens == generate_ar(target, PROMPTS[2], n)
        assert all(d <= n - 1 for d in out.stats.drafted)


SHAPES = [(1,), (2,), (1, 1, 1), (3, 2, 1), (2, 2, 2), (4, 1, 1, 1)]


@pytest.mark.parametrize("branching", SHAPES)
def test_greedy_tree_decoding_equals_autoregressive(tiny_pair, branching):
    target, draft = tiny_pair
    modes = ["topk", "sample"] if branching == (3, 2, 1) else ["topk"]  # at T = 0 every mode takes the top k
    for mode in modes:
        for prompt in PROMPTS:
            out = decode(target, prompt, 30, TreeDraftProposer(draft, branching, mode))
            assert out.tokens == generate_ar(target, prompt, 30)
            assert sum(out.stats.accepted) + len(out.stats.accepted) == 30
    perfect = decode(target, PROMPTS[0], 30, TreeDraftProposer(target, branching)).stats
    assert perfect.accepted[:-1] == perfect.drafted[:-1]  # the target as its own draft: all accepted


def test_draft_passes_see_the_right_context(tiny_pair):
    """With the target as the draft and top-k children, every node's children must be the target's own
    top-k after that node's path: this checks the drafter's tree masks, positions and cache gathers."""
    target, _ = tiny_pair
    seen = []

    class Recording(TreeDraftProposer):
        def propose(self, tokens, max_depth):
            tree = super().propose(tokens, max_depth)
            seen.append((tokens.clone(), tree))
            return tree

    decode(target, PROMPTS[2], 40, Recording(target, (3, 2, 2)))
    for tokens, tree in seen:
        kids = tree.children()
        for node, children in kids.items():
            seq = torch.cat([tokens, tree.tokens[tree.path_to(node)]]) if node >= 0 else tokens
            with torch.no_grad():
                logits = hf.forward(target, seq).logits[-1]
            assert tree.tokens[children].tolist() == logits.topk(len(children)).indices.tolist()


@pytest.mark.parametrize("mode", ["topk", "without_replacement"])
def test_caches_after_every_round_equal_a_fresh_prefill(noisy_pair, mode):
    target, draft = noisy_pair
    proposer = TreeDraftProposer(draft, (3, 2, 2), mode)
    paths = []

    def check(tokens, verdict, cache):
        tree, path = verdict.tree, verdict.path
        if tree is not None:
            kids = tree.children()
            paths.append([c != kids[int(tree.parents[c])][0] for c in path])  # a non-first child accepted?
        assert hf.cache_length(cache) == len(tokens) - 1
        fresh = hf.forward(target, tokens).logits[-1]
        cached = hf.forward(target, tokens[-1:], copy.deepcopy(cache)).logits[-1]
        assert (cached - fresh).abs().max() <= 1e-5
        n = hf.cache_length(proposer.cache)  # the draft's cache: committed tokens only, at most all but one
        assert n <= len(tokens) - 1
        fresh = hf.forward(draft, tokens).logits[-1]
        cached = hf.forward(draft, tokens[n:], copy.deepcopy(proposer.cache)).logits[-1]
        assert (cached - fresh).abs().max() <= 1e-5

    kwargs = {} if mode == "topk" else {"temperature": 1.0, "seed": 0, "verify": verify_tree}
    for prompt in PROMPTS:
        out = decode(target, prompt, 30, proposer, on_round=check, **kwargs)
        if mode == "topk":
            assert out.tokens == generate_ar(target, prompt, 30)
    assert any(any(p) for p in paths), "no round accepted a non-first child: the gather went untested"
    assert any(len(p) >= 2 and any(p) for p in paths)  # ... and deeper than one level


# ------------------------------------------------------------------------- sibling draws (library)
def test_draw_children_modes():
    g = torch.Generator().manual_seed(0)
    q = torch.tensor([0.4, 0.3, 0.2, 0.1, 0.0])
    logits = torch.tensor([0.0, 3.0, 1.0, 2.0, -1.0])
    tokens, rows = draw_children(logits, q, 3, "topk", g)
    assert tokens.tolist() == [1, 3, 2] and rows is None
    assert draw_children(logits, None, 2, "sample", g)[0].tolist() == [1, 3]  # greedy: top k in any mode
    tokens, rows = draw_children(logits, q, 3, "sample", g)
    assert len(tokens) == 3 and torch.equal(rows, q.expand(3, -1))
    assert len(draw_children(logits, q, 9, "without_replacement", g)[0]) == 4  # only 4 tokens possible
    for _ in range(20):
        tokens, rows = draw_children(logits, q, 2, "without_replacement", g)
        a, b = tokens.tolist()
        assert a != b and rows[1, a] == 0
        assert torch.allclose(rows[0], q) and torch.allclose(rows[1], q * (torch.arange(5) != a) / (1 - q[a]))


@pytest.mark.parametrize("mode", ["sample", "without_replacement"])
def test_draw_children_laws_are_exact(mode, monkeypatch):
    """The exact law of the k = 3 siblings, every draw enumerated: i.i.d. draws from q, or draws without
    replacement (each from q with the earlier ones removed)."""
    q = torch.tensor([0.4, 0.3, 0.2, 0.1, 0.0])
    law = ExactLaw(monkeypatch).run(lambda: tuple(draw_children(q.log(), q, 3, mode)[0].tolist()))
    for xs, w in law.items():
        want, left = 1.0, q.double().clone()
        for x in xs:
            want *= float(left[x] / left.sum())
            left[x] = left[x] if mode == "sample" else 0.0
        assert abs(w - want) < 1e-6, (xs, w, want)  # q is fp32
    assert abs(sum(law.values()) - 1) < 1e-9 and len(law) == (64 if mode == "sample" else 24)


# --------------------------------------------------------------- lossless sampling: the set-up
V = 6  # a tiny vocabulary, so every draft outcome can be enumerated


def distributions(sampling, vocab=V, context=(1, 2, 3)):
    """Target p1 [V], p2 [V, V], p3 [V, V, V] and draft q1, q2 (processed) and l1, l2 (raw logits) after
    `context`, for every two-token continuation."""
    target = tiny_model(vocab=vocab, seed=0, scale=3.0)
    draft = tiny_model(vocab=vocab, seed=1, layers=1, scale=3.0)
    t, d = continuation_logits(target, context, vocab), continuation_logits(draft, context, vocab)
    n = len(context)
    p = process_logits(t, sampling).double()
    q = process_logits(d, sampling).double()
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)  # sums of exactly 1 in fp64
    (p1, p2, p3), (q1, q2, _), (l1, l2, _) = (split_tables(x, n, vocab) for x in (p, q, d))
    return {"p1": p1, "p2": p2, "p3": p3, "q1": q1, "q2": q2, "l1": l1, "l2": l2}


# A tree shape: k children of the root; `grand` lists which of them get one child of their own.
TREE_SHAPES = {"3 children, the first with a child": (3, (0,)), "2 children, each with a child": (2, (0, 1))}


def draft_outcomes(mode, k, grand, d):
    """Every tree the drafter can produce in `mode`: (probability, tokens, q rows or None), nodes ordered
    [children of the root..., their children in `grand` order]. Probabilities computed independently of
    the library (successive sampling for without_replacement)."""
    q1, q2 = d["q1"], d["q2"]
    if mode == "topk":
        kids = d["l1"].topk(k).indices.tolist()
        yield 1.0, kids + [int(d["l2"][kids[c]].argmax()) for c in grand], None
        return
    support = [x for x in range(V) if q1[x] > 0]
    tuples = itertools.product(support, repeat=k) if mode == "sample" else itertools.permutations(support, k)
    for xs in tuples:
        w, rows, left = 1.0, [], q1.clone()
        for x in xs:
            row = q1 if mode == "sample" else left / left.sum()
            w *= float(row[x])
            rows.append(row)
            if mode == "without_replacement":
                left = left.clone()
                left[x] = 0
        for ys in itertools.product(range(V), repeat=len(grand)):
            wy = w * float(np.prod([q2[xs[c]][y] for c, y in zip(grand, ys)]))
            if wy > 0:
                yield wy, list(xs) + list(ys), torch.stack(rows + [q2[xs[c]] for c in grand])


def build(tokens, qrows, k, grand, d):
    """The Tree and its target rows p: row 0 after the root, then one row after every node."""
    parents = [-1] * k + list(grand)
    rows = [d["p1"]] + [d["p2"][x] for x in tokens[:k]]
    rows += [d["p3"][tokens[c], y] for c, y in zip(grand, tokens[k:])]
    return DraftTree(torch.tensor(tokens), torch.tensor(parents), qrows), torch.stack(rows)


def mss_cells(tree, p):
    """Every sequence of accept/reject decisions MSS can take on this tree: (uniforms that realise it,
    its probability). Thresholds min(1, P(x)/q(x)) are computed here, residual-updated between siblings."""
    kids, out = tree.children(), []

    def walk(node, us, w):
        P = p[node + 1]
        for c in kids.get(node, []):
            x = int(tree.tokens[c])
            q = torch.zeros_like(P).index_fill_(0, torch.tensor([x]), 1.0) if tree.q is None else tree.q[c]
            t = min(1.0, float(P[x] / q[x]))
            if t > 0:
                walk(c, us + [t / 2], w * t)
            if t == 1:
                return
            us, w, P = us + [(1 + t) / 2], w * (1 - t), residual(P, q)
        out.append((us, w))

    walk(-1, [], 1.0)
    return out


@pytest.mark.parametrize("shape", list(TREE_SHAPES))
@pytest.mark.parametrize("mode", trees.SIBLING_MODES)
@pytest.mark.parametrize("sampling", [SamplingParams(1.0), SamplingParams(0.8, top_k=4)], ids=["T1", "T08k4"])
def test_tree_verification_is_exactly_lossless(mode, shape, sampling, monkeypatch):
    """P(first two emitted tokens) of one round (plus the next round's target token when the round emits
    only one) summed over every draft outcome and every cell of the verifier's uniforms == p1 x p2."""
    d = distributions(sampling)
    k, grand = TREE_SHAPES[shape]
    recorded = {}

    def record(probs, generator=None):
        recorded["probs"] = probs.double()
        return -1

    monkeypatch.setattr(trees, "sample_token", record)
    got = torch.zeros(V, V, dtype=torch.float64)
    total = 0.0
    for w_draft, tokens, qrows in draft_outcomes(mode, k, grand, d):
        total += w_draft
        tree, p = build(tokens, qrows, k, grand, d)
        for us, w in mss_cells(tree, p):
            queue = list(us)
            monkeypatch.setattr(torch, "rand", lambda *a, _q=queue, **kw: torch.tensor([_q.pop(0)]))
            path, _ = verify_tree(tree, p)
            assert not queue, "verify_tree used fewer uniforms than this cell's decisions"
            r, emitted, ww = recorded["probs"], tree.tokens[path].tolist(), w_draft * w
            if len(emitted) >= 2:
                got[emitted[0], emitted[1]] += ww
            elif len(emitted) == 1:
                got[emitted[0]] += ww * r
            else:  # the first token from P, the second from the target in the next round
                got += ww * r[:, None] * d["p2"]
    assert abs(total - 1) < 1e-9
    want = d["p1"][:, None] * d["p2"]
    assert (got - want).abs().max() < 1e-6


def test_the_exact_test_has_teeth(monkeypatch):
    """Known-wrong (d): siblings drawn without replacement but verified with the unadjusted q. The same
    enumeration gives a first-token law that is measurably not p1."""
    d = distributions(SamplingParams(1.0))
    k, grand = TREE_SHAPES["3 children, the first with a child"]
    recorded = {}

    def record(probs, generator=None):
        recorded["probs"] = probs.double()
        return -1

    monkeypatch.setattr(trees, "sample_token", record)
    got = torch.zeros(V, dtype=torch.float64)  # P(first emitted token)
    for w_draft, tokens, qrows in draft_outcomes("without_replacement", k, grand, d):
        tree, p = build(tokens, torch.stack([d["q1"]] * k + list(qrows[k:])), k, grand, d)  # the mistake
        for us, w in mss_cells(tree, p):
            queue = list(us)
            monkeypatch.setattr(torch, "rand", lambda *a, _q=queue, **kw: torch.tensor([_q.pop(0)]))
            path, _ = verify_tree(tree, p)
            if path:
                got[int(tree.tokens[path[0]])] += w_draft * w
            else:
                got += w_draft * w * recorded["probs"]
    assert abs(float(got.sum()) - 1) < 1e-9 and (got - d["p1"]).abs().max() > 1e-3


@pytest.mark.parametrize("mode", ["sample", "without_replacement"])
def test_each_sibling_records_the_distribution_it_was_drawn_from(noisy_pair, mode):
    """The drafter's q rows, checked against separate draft passes over every node's path: q for i.i.d.
    siblings; for siblings without replacement, q with the earlier siblings removed, renormalised."""
    target, draft = noisy_pair
    sampling, seen = SamplingParams(0.8, top_p=0.95), []

    class Recording(TreeDraftProposer):
        def propose(self, tokens, max_depth):
            tree = super().propose(tokens, max_depth)
            seen.append((tokens.clone(), tree))
            return tree

    decode(
        target, PROMPTS[2], 20, Recording(draft, (3, 2), mode), 0.8, None, 0.95, seed=0, verify=verify_tree
    )
    for tokens, tree in seen:
        for node, kids in tree.children().items():
            seq = torch.cat([tokens, tree.tokens[tree.path_to(node)]]) if node >= 0 else tokens
            with torch.no_grad():
                q = process_logits(hf.forward(draft, seq).logits[-1], sampling)
            left = q.clone()
            for c in kids:
                want = q if mode == "sample" else left / left.sum()
                assert (tree.q[c] - want).abs().max() < 1e-5 and want[tree.tokens[c]] > 0
                left[tree.tokens[c]] = 0
            if mode == "without_replacement":
                assert len(set(tree.tokens[kids].tolist())) == len(kids)


@pytest.mark.parametrize("mode", ["topk", "sample", "without_replacement"])
def test_first_token_law_is_what_verify_tree_does(mode, monkeypatch):
    """Chapter 04's exported `first_token_law` (its notebook's and chapter 05's asserts rely on it)
    equals the exact law of the first token verify_tree emits for one level of siblings drawn by
    `draw_children`, every random draw enumerated -- and so does p itself: MSS is lossless."""
    g = torch.Generator().manual_seed(3)
    p, q = torch.rand(6, generator=g) ** 2, torch.rand(6, generator=g) ** 2
    p, q = (p / p.sum()).double(), (q / q.sum()).double()
    exact = ExactLaw(monkeypatch)

    def draw():
        tokens, rows = draw_children(q.log(), q, 3, mode)
        return tuple(tokens.tolist()), None if rows is None else rows

    def first_token():
        tokens, rows = draw()
        tree = DraftTree(torch.tensor(tokens), torch.full((len(tokens),), -1), rows)
        path, nxt = verify_tree(tree, torch.cat([p[None], torch.eye(6, dtype=p.dtype)[: len(tokens)]]))
        return tokens, int(tree.tokens[path[0]]) if path else nxt

    joint = exact.run(first_token)
    law = torch.zeros(6, dtype=torch.float64)
    by_draw = {}
    for (tokens, first), w in joint.items():
        law[first] += w
        by_draw.setdefault(tokens, torch.zeros(6, dtype=torch.float64))[first] += w
    assert (law - p).abs().max() < 1e-6
    for tokens, part in by_draw.items():  # per draw of the siblings: first_token_law, weighted
        rows = [trees.point_mass(x, 6).double() for x in tokens] if mode == "topk" else None
        if rows is None:
            left, rows = q.clone(), []
            for x in tokens:
                rows.append(left / left.sum())
                left = left if mode == "sample" else left.index_fill(0, torch.tensor([x]), 0.0)
        weight = float(part.sum())
        torch.testing.assert_close(
            part / weight, trees.first_token_law(p, list(tokens), rows), atol=1e-6, rtol=0
        )


# ------------------------------------------------ acceptance at one node, and SpecTr's K-SEQ (chapter 04)
@pytest.mark.parametrize("mode", trees.SIBLING_MODES)
def test_acceptance_of_is_what_verify_tree_does(mode, monkeypatch):
    """`acceptance_of` (the notebook's acceptance tables rely on it) equals the exact probability that
    verify_tree accepts one of three siblings drawn by `draw_children`, per draw of the siblings, every random
    draw enumerated; for top-k picks it is the target's mass on them. A wrong variant that never replaces P
    by the residual is measurably off."""
    g = torch.Generator().manual_seed(4)
    p, q = torch.rand(6, generator=g).double() ** 2, torch.rand(6, generator=g).double() ** 2
    p, q = p / p.sum(), q / q.sum()  # sums of exactly 1 in fp64
    exact = ExactLaw(monkeypatch)

    def accepted():
        tokens, rows = draw_children(q.log(), q, 3, mode)
        rows = [trees.point_mass(int(x), 6).double() for x in tokens] if rows is None else list(rows)
        tree = DraftTree(tokens, torch.full((len(tokens),), -1), torch.stack(rows))
        path, _ = verify_tree(tree, torch.cat([p[None], torch.eye(6, dtype=p.dtype)[: len(tokens)]]))
        return tuple(tokens.tolist()), bool(path)

    by_draw = {}
    for (tokens, yes), w in exact.run(accepted).items():
        by_draw.setdefault(tokens, [0.0, 0.0])[yes] += w
    worst_wrong = 0.0
    for tokens, (no, yes) in by_draw.items():
        left, rows = q.clone(), []
        for x in tokens:
            rows.append(trees.point_mass(x, 6).double() if mode == "topk" else left / left.sum())
            left = left if mode == "sample" else left.index_fill(0, torch.tensor([x]), 0.0)
        got = trees.acceptance_of(p, list(tokens), rows)
        assert abs(yes / (yes + no) - got) < 1e-9, (tokens, yes / (yes + no), got)
        never_updated = 1 - np.prod([1 - min(1.0, float(p[x] / r[x])) for x, r in zip(tokens, rows)])
        worst_wrong = max(worst_wrong, abs(never_updated - got))
    if mode == "topk":
        (tokens,) = by_draw
        assert abs(trees.acceptance_of(p, list(tokens), rows) - float(p[list(tokens)].sum())) < 1e-12
    assert worst_wrong > 1e-3


def test_kseq_rho_is_the_smallest_lossless_constant():
    g = torch.Generator().manual_seed(2)
    p, q = torch.rand(4, 9, generator=g).double() ** 3, torch.rand(4, 9, generator=g).double() ** 3
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)

    def s(rho, k, row):  # s(rho) = sum_{i<k} (1 - beta)^i, beta = sum min(q, p / rho)
        beta = float(torch.minimum(q[row], p[row] / rho).sum())
        return sum((1 - beta) ** i for i in range(k))

    assert torch.equal(trees.kseq_rho(p, q, 1), torch.ones(4, dtype=torch.float64))
    for k in (2, 3, 5):
        rho = trees.kseq_rho(p, q, k, steps=50)
        assert rho.shape == (4,) and bool(((rho >= 1) & (rho <= k)).all())
        for row in range(4):
            r = float(rho[row])
            assert s(r, k, row) <= r  # lossless
            assert s(r - 1e-9, k, row) > r - 1e-9  # and the smallest such constant
            assert abs(float(trees.kseq_rho(p[row], q[row], k, steps=50)) - r) < 1e-12  # one row alone
    assert float(trees.kseq_rho(p[0], p[0], 3)) < 1 + 1e-6  # q = p: no need to weaken the tries


def kseq_first_two_law(mode, k, grand, d, monkeypatch):
    """P(first two emitted tokens) of one round of verify_tree_kseq (plus the next round's target token when
    the round emits only one), every tree the drafter can make and every draw of the verifier enumerated."""
    exact = ExactLaw(monkeypatch)
    got, total = torch.zeros(V, V, dtype=torch.float64), 0.0
    for w_draft, tokens, qrows in draft_outcomes(mode, k, grand, d):
        total += w_draft
        tree, p = build(tokens, qrows, k, grand, d)

        def verify(tree=tree, p=p):
            path, nxt = trees.verify_tree_kseq(tree, p)
            return tuple(tree.tokens[path].tolist()), nxt

        for (emitted, nxt), w in exact.run(verify).items():
            if len(emitted) >= 2:
                got[emitted[0], emitted[1]] += w_draft * w
            elif len(emitted) == 1:
                got[emitted[0], nxt] += w_draft * w
            else:  # the first token is the correction, the second the target's in the next round
                got[nxt] += w_draft * w * d["p2"][nxt]
    assert abs(total - 1) < 1e-9
    return got


KSEQ_SHAPES = {"3 children": (3, ()), "2 children, the first with a child": (2, (0,))}


@pytest.mark.parametrize(
    "mode, sampling, shape",
    [
        ("sample", SamplingParams(1.0), "2 children, the first with a child"),  # K-SEQ k = 2, then k = 1
        ("sample", SamplingParams(0.8, top_k=4), "3 children"),  # K-SEQ k = 3
        ("without_replacement", SamplingParams(1.0), "3 children"),  # not i.i.d.: MSS at the root
        ("topk", SamplingParams(1.0), "2 children, the first with a child"),  # point masses: MSS
    ],
    ids=["sample-T1-two-levels", "sample-T08k4-3", "without_replacement-T1-3", "topk-T1-two-levels"],
)
def test_kseq_verification_is_exactly_lossless(mode, sampling, shape, monkeypatch):
    """verify_tree_kseq: K-SEQ at i.i.d. nodes, MSS elsewhere; the law of the first two emitted tokens is
    exactly p1 x p2."""
    d = distributions(sampling)
    k, grand = KSEQ_SHAPES[shape]
    got = kseq_first_two_law(mode, k, grand, d, monkeypatch)
    assert (got - d["p1"][:, None] * d["p2"]).abs().max() < 1e-6


def test_the_kseq_exact_test_has_teeth(monkeypatch):
    """Known-wrong: K-SEQ with rho = 1 (every i.i.d. try at full strength, the correction clipped at 0).
    The same enumeration must find its first tokens measurably off p1."""
    d = distributions(SamplingParams(1.0))
    monkeypatch.setattr(trees, "kseq_rho", lambda p, q, k: torch.ones((), dtype=p.dtype))
    got = kseq_first_two_law("sample", 3, (), d, monkeypatch)
    assert (got.sum(1) - d["p1"]).abs().max() > 1e-3


def test_kseq_in_the_engine(tiny_pair):
    """Greedy: verify_tree_kseq is verify_tree's greedy walk (point masses, MSS), so the output is plain greedy
    decoding; sampled: it runs trees of i.i.d. siblings through the engine and emits exactly max_new_tokens."""
    target, draft = tiny_pair
    for ids in PROMPTS[:2]:
        want = generate_ar(target, torch.tensor(ids), 12)
        out = decode(target, ids, 12, TreeDraftProposer(draft, (3, 2)), verify=trees.verify_tree_kseq)
        assert out.tokens == want
    out = decode(
        target,
        PROMPTS[2],
        16,
        TreeDraftProposer(draft, (3, 2), "sample"),
        1.0,
        seed=0,
        verify=trees.verify_tree_kseq,
    )
    assert len(out.tokens) == 16
