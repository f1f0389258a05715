"""The target runners (issue 50): the engine reaches the target only through a runner's five calls, and the
preallocated `hf.StaticRunner` computes exactly what transformers' growing cache (`hf.Runner`) does.

The contract test runs every method on both runners (greedy equality, fresh caches, the exact law); these
tests pin the runner's own calls: a tree's in-place compaction, crops, growth, bf16, grouped-query and
QK-norm targets, the errors, and a broken runner that the cache check catches.
"""

import copy

import pytest
import torch
from conftest import check_target_cache, gqa_model, needs_compiler, spy, tiny_model

import specdec_lib as sd
from specdec_lib import hf
from specdec_lib.autoregressive import generate_ar
from specdec_lib.layers import KVCache, StaticKVCache
from specdec_lib.speculative import DraftTree


def models():
    return {
        "llama": tiny_model(vocab=16, seed=0, scale=5.0),
        "gqa": gqa_model("llama"),
        "qwen3": gqa_model("qwen3"),
    }


@pytest.fixture(scope="module")
def targets():
    return models()


def tree_pass(runner, prefix, nodes, parents):
    """Prefill `prefix`, then one tree pass as the engine makes it (`DraftTree.flatten`: the root, which is
    prefix's last token, then `nodes`): the logits and the cache."""
    cache = runner.new_cache()
    runner.forward(prefix[:-1], cache)
    ids, positions, mask = DraftTree(nodes, torch.tensor(parents)).flatten(int(prefix[-1]), len(prefix) - 1)
    return runner.forward(ids, cache, positions, mask).logits, cache


@pytest.mark.parametrize("arch", ["llama", "gqa", "qwen3"])
def test_a_tree_pass_and_its_compaction_match_the_growing_cache(arch, targets):
    target = targets[arch]
    V = hf.vocab_size(target)
    torch.manual_seed(1)
    prefix, nodes = torch.randint(V, (9,)), torch.randint(V, (5,))
    parents = [-1, 0, -1, 2, 1]  # two branches from the root: 0 -> 1 -> 4 and 2 -> 3
    got, static = tree_pass(hf.StaticRunner(target, capacity=6), prefix, nodes, parents)  # grows once
    want, dynamic = tree_pass(hf.Runner(target), prefix, nodes, parents)
    assert (got - want).abs().max() < 1e-4
    kept = torch.tensor([0, 3, 4])  # the root, then nodes 2 and 3: a gather, not a crop
    hf.StaticRunner(target).keep(static, len(prefix) - 1, kept)
    hf.Runner(target).keep(dynamic, len(prefix) - 1, kept)
    assert hf.StaticRunner(target).length(static) == hf.cache_length(dynamic) == len(prefix) + 2
    text = torch.cat([prefix, nodes[[2, 3]]])
    nxt = torch.randint(V, (1,))
    after_static = hf.StaticRunner(target).forward(nxt, static).logits[-1]
    after_dynamic = hf.Runner(target).forward(nxt, dynamic).logits[-1]
    fresh = hf.forward(target, torch.cat([text, nxt])).logits[-1]
    assert (after_static - fresh).abs().max() < 1e-4 and (after_dynamic - fresh).abs().max() < 1e-4


def test_crop_then_write_over_the_stale_slots(targets):
    target = targets["llama"]
    runner = hf.StaticRunner(target, capacity=32)
    text = torch.arange(12) % hf.vocab_size(target)
    cache = runner.new_cache()
    runner.forward(text, cache)
    runner.crop(cache, 5)  # slots 5.. still hold the old keys: the mask must hide them
    other = torch.tensor([3, 1, 4])
    got = runner.forward(other, cache).logits
    want = hf.forward(target, torch.cat([text[:5], other])).logits[5:]
    assert runner.length(cache) == 8 and (got - want).abs().max() < 1e-4
    runner.crop(cache, 20)  # a crop never lengthens
    assert runner.length(cache) == 8


@pytest.mark.parametrize("spec", ["chain:3", "tree:2-2-1", "eagle3:8"])
def test_generation_on_the_static_runner_equals_plain_decoding_in_bf16(spec):
    target, draft, tok = sd.load_pair("tiny-code", device="cpu")
    target, draft = copy.deepcopy(target).to(torch.bfloat16), copy.deepcopy(draft).to(torch.bfloat16)
    prompt = torch.tensor(tok.encode(sd.heldout_prompts(1)[0]))[-40:]
    runner = hf.StaticRunner(target, capacity=48)
    plain = sd.generate(runner, prompt, 24)
    assert plain.tokens == generate_ar(target, prompt, 24)
    out = sd.generate(runner, prompt, 24, sd.make_proposer(spec, target, draft))
    assert out.tokens == plain.tokens


def test_a_runner_that_crops_instead_of_gathering_is_caught(targets):
    """The deliberately broken variant: keep = crop to the same length. Right whenever the accepted
    nodes are a chain from the first child, wrong when a later sibling wins: the cache check fails."""

    class CropRunner(hf.StaticRunner):
        def keep(self, cache, start, slots):
            self.crop(cache, start + slots.numel())

    target, draft, tok = sd.load_pair("tiny-code", device="cpu")
    prompts = [torch.tensor(tok.encode(p))[-40:] for p in sd.heldout_prompts(3)]
    broken = CropRunner(target)
    with pytest.raises(AssertionError, match="differs from a fresh prefill"):
        for prompt in prompts:
            sd.generate(broken, prompt, 30, sd.make_proposer("tree:3-2-1", target, draft),
                        on_round=check_target_cache(broken))  # fmt: skip


def test_runner_errors_are_clear(targets):
    target = targets["llama"]
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        hf.StaticRunner(target, capacity=0)
    with pytest.raises(ValueError, match="wraps a causal language model"):
        hf.StaticRunner("a string")
    runner = hf.StaticRunner(target)
    with pytest.raises(ValueError, match="cache from its own new_cache"):
        runner.forward(torch.tensor([1, 2]), hf.new_cache(target))
    cache = runner.new_cache()
    runner.forward(torch.tensor([1, 2, 3]), cache)
    with pytest.raises(ValueError, match=r"tree_mask must be \[2, 2\] or \[2, 5\]"):
        runner.forward(torch.tensor([1, 2]), cache, tree_mask=torch.ones(3, 3, dtype=torch.bool))
    assert hf.runner(runner) is runner and hf.runner(target).model is target


# ------------------------------------------------------------------ the drafters' preallocated caches
def test_the_static_drafter_cache_equals_the_growing_one():
    """The same random sequence of appends, crops and tree compactions on both: the same keys and values."""
    g = torch.Generator().manual_seed(0)
    grow, static = KVCache(), StaticKVCache(capacity=3)  # small: it must grow on the way
    for _ in range(40):
        op = int(torch.randint(3, (1,), generator=g))
        if op == 0 or len(grow) == 0:
            n = int(torch.randint(1, 6, (1,), generator=g))
            k, v = torch.randn(2, n, 4, generator=g), torch.randn(2, n, 4, generator=g)
            got, want = static.append(k, v), grow.append(k, v)
            assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
        elif op == 1:
            length = int(torch.randint(len(grow) + 2, (1,), generator=g))
            static.crop(length), grow.crop(length)
        else:
            start = int(torch.randint(len(grow), (1,), generator=g))
            slots = (
                torch.randperm(len(grow) - start, generator=g)[: max(0, len(grow) - start - 1)].sort().values
            )
            static.keep(start, slots), grow.keep(start, slots)
        assert len(static) == len(grow)
        if len(grow):
            assert torch.equal(static.k, grow.k) and torch.equal(static.v, grow.v)


def test_make_proposer_preallocates_only_where_there_is_a_cache():
    target, draft, _ = sd.load_pair("tiny-code", device="cpu")
    prop = sd.make_proposer("eagle3:8", target, draft, static_caches=32)
    assert prop.cache_capacity == 32 and sd.make_proposer("eagle3:8", target, draft).cache_capacity is None
    for spec, bad, match in [
        ("ngram:4", 32, "keeps no drafter cache"),
        ("medusa:8", 32, "keeps no drafter cache"),
        ("chain:2", 0, "an int >= 1"),
        ("chain:2", True, "an int >= 1"),
    ]:
        with pytest.raises(ValueError, match=match):
            sd.make_proposer(spec, target, draft, static_caches=bad)
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        StaticKVCache(0)


@pytest.mark.parametrize("spec", ["eagle3:8", "dflash:8", "mtp-sequential"])
def test_a_drafter_cache_that_loses_values_when_it_grows_is_caught(spec, monkeypatch):
    """The deliberately broken variant: a preallocated drafter cache that forgets to copy the old values
    into its bigger buffer. Shapes stay right, the drafts go wrong: the contract's fresh-draft check
    (conftest.spy) must fail on it."""
    append = StaticKVCache.append

    def forgetful(self, k, v):
        before, grows = self.length, self.keys is not None and self.length + k.shape[-2] > self.keys.shape[-2]
        out = append(self, k, v)
        if grows:
            self.values[..., :before, :] = 0
        return out

    monkeypatch.setattr(StaticKVCache, "append", forgetful)
    target, draft, tok = sd.load_pair("tiny-code", device="cpu")
    prompts = [torch.tensor(tok.encode(p))[-40:] for p in sd.heldout_prompts(3)]
    with pytest.raises(AssertionError, match="fresh|differ"):
        for prompt in prompts:
            prop = sd.make_proposer(spec, target, draft, static_caches=8)
            sd.generate(target, prompt, 30, spy(spec.partition(":")[0], prop, target))


# --------------------------------------------------------------------------- the compiled runner


class ForgetfulPadding(hf.CompiledRunner):
    """The deliberately broken variant: a crop that only ever shortens. After a padded pass the length
    is already right, so the write position (where the padding ended) is never moved back."""

    def crop(self, cache, length):
        if length < cache.length:
            super().crop(cache, length)


@needs_compiler
def test_the_compiled_runner_pads_to_fixed_shapes_keeps_greedy_output_and_compiles_once():
    target, draft, tok = sd.load_pair("tiny-code", device="cpu")
    prompts = [torch.tensor(tok.encode(p))[-40:] for p in sd.heldout_prompts(2)]
    # the capacity generate(compile=True) picks for these requests: the graphs compiled here are the ones
    # the compiled-drafting test below needs (torch keeps compiled graphs on disk, keyed by their shapes)
    runner = hf.CompiledRunner(target, capacity=512)
    assert [runner.padded(n, 9) for n in (1, 2, 3, 4, 5, 6, 17, 18)] == [1, 2, 3, 5, 5, 9, 17, 33]
    assert runner.padded(7, 0) == 7  # the prefill runs eagerly, at its own length
    want = [generate_ar(target, p, 24) for p in prompts]

    def run(r, spec):
        outs = []
        for prompt in prompts:
            prop = (
                None
                if spec == "ar"
                else spy(spec.split(":")[0], sd.make_proposer(spec, target, draft), target)
            )
            outs.append(sd.generate(r, prompt, 24, prop, on_round=check_target_cache(r)).tokens)
        return outs

    for spec in ["ar", "chain:3", "tree:2-2-1"]:
        assert run(runner, spec) == want, f"{spec}: compiled greedy output differs from plain decoding"
        graphs = hf.compiled_graphs()
        assert run(runner, spec) == want and hf.compiled_graphs() == graphs, f"{spec} recompiled"
    with pytest.raises(AssertionError):  # a broken padding is caught: by the cache check or the tokens
        for prompt in prompts:
            broken = ForgetfulPadding(target, capacity=512)
            out = sd.generate(broken, prompt, 24, sd.make_proposer("chain:3", target, draft),
                              on_round=check_target_cache(broken))  # fmt: skip
            assert out.tokens == generate_ar(target, prompt, 24)


@needs_compiler
@pytest.mark.parametrize("spec", ["chain:3", "tree:2-1"])
def test_the_compiled_runner_keeps_the_law(spec, monkeypatch):
    from test_contract import SAMPLINGS, first_two_tokens_law, law_gap, target_law

    target = tiny_model(vocab=8, seed=0, scale=3.0)
    draft = tiny_model(vocab=8, seed=1, layers=1, scale=3.0)
    sampling, max_new = SAMPLINGS["T=1"]
    base = sd.make_proposer(spec, target, draft, weights="random")
    runner = hf.CompiledRunner(target, capacity=64)
    for seed in range(4):  # compile first: dynamo must not start up inside the enumeration's patched torch
        sd.generate(runner, [1, 2, 3], max_new, copy.copy(base), temperature=1.0, seed=seed)
    law = first_two_tokens_law(runner, lambda: copy.copy(base), sampling, max_new, monkeypatch)
    assert law_gap(law, target_law(target, sampling)) < 1e-5, f"{spec} on the compiled runner is lossy"


def test_compile_is_one_switch_with_clear_errors(targets):
    with pytest.raises(ValueError, match="pass the model, not a runner"):
        sd.generate(hf.StaticRunner(targets["llama"]), [1, 2], 2, compile=True)


@needs_compiler
def test_compiled_drafting_keeps_greedy_output_and_leaves_the_zoo_drafter_eager():
    target, draft, tok = sd.load_pair("tiny-code", device="cpu")
    prompts = [torch.tensor(tok.encode(p))[-40:] for p in sd.heldout_prompts(2)]
    want = [generate_ar(target, p, 24) for p in prompts]
    for spec in ["chain:3", "eagle3:8", "dflash:8"]:
        for _ in range(2):  # the second pass over the prompts builds no new graph
            graphs = hf.compiled_graphs()
            got = [sd.generate(target, p, 24, sd.make_proposer(spec, target, draft, compile=True),
                               compile=True).tokens for p in prompts]  # fmt: skip
            assert got == want, f"{spec}: compiled greedy output differs from plain decoding"
        assert hf.compiled_graphs() == graphs, f"{spec} recompiled"
    eager = sd.make_proposer("eagle3:8", target, draft)
    assert "forward" not in vars(eager.drafter), "compile=True changed the zoo's shared drafter"
    with pytest.raises(ValueError, match="no draft model or feature drafter to compile"):
        sd.make_proposer("ngram:4", target, draft, compile=True)


@needs_compiler
def test_a_compiled_feature_drafter_keeps_the_law(monkeypatch):
    from test_contract import SAMPLINGS, first_two_tokens_law, law_gap, target_law

    target = tiny_model(vocab=8, seed=0, scale=3.0)
    sampling, max_new = SAMPLINGS["T=1"]
    base = sd.make_proposer("eagle:4", target, weights="random", compile=True)
    runner = hf.CompiledRunner(target, capacity=64)
    for seed in range(4):  # compile first: dynamo must not start up inside the enumeration's patched torch
        sd.generate(runner, [1, 2, 3], max_new, copy.copy(base), temperature=1.0, seed=seed)
    law = first_two_tokens_law(runner, lambda: copy.copy(base), sampling, max_new, monkeypatch)
    assert law_gap(law, target_law(target, sampling)) < 1e-5, "compiled EAGLE drafting is lossy"
