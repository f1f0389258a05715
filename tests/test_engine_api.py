"""The engine's API (issue: a round as named steps, the verdict, trees, the drafter toolkit) and the
clear errors it owes a learner: every bad input raises a ValueError that says what is wrong."""

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_model

import specdec_lib as sd
from specdec_lib import hf, speculative
from specdec_lib.autoregressive import generate_ar
from specdec_lib.layers import Block, KVCache
from specdec_lib.speculative import DraftTree, Verdict, commit, prefill, verify_greedy, verify_round

PROMPT = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def pair():
    return tiny_model(seed=0, scale=20.0), tiny_model(seed=1, layers=1, scale=20.0)


# ------------------------------------------------------------------------------- the named steps
def test_the_decode_loop_is_short_and_made_of_the_named_steps():
    src = inspect.getsource(speculative.decode)
    body = src[src.index('"""', src.index('"""') + 3) + 3 :].strip().splitlines()
    assert len(body) <= 32, f"the engine's loop grew to {len(body)} lines"  # 32 with the runner seam
    for step in ("prefill(", "verify_round(", "commit(", "proposer.update(tokens, verdict)", "stats.record("):
        assert step in src


def test_one_generate_picks_the_lossless_rule_or_runs_the_given_one(pair):
    """`specdec_lib.generate` is chapter 02's engine (`speculative.decode`) with verify=None the lossless
    rule for the sampling parameters, and a rule passed in used as is, greedy or sampled. The engine on its
    own refuses sampling without a rule: chapter 02 has no lossless sampled rule yet."""
    target, draft = pair
    with pytest.raises(ValueError, match="use specdec_lib.generate, or pass a verify rule"):
        speculative.decode(target, PROMPT, 4, temperature=1.0)
    calls = []

    def spy(rule):
        def verify(tree, p, generator=None):
            calls.append(rule.__name__)
            return rule(tree, p, generator)

        return verify

    chain = sd.DraftModelProposer(draft, 3)
    greedy = sd.generate(target, PROMPT, 12, chain, verify=spy(verify_greedy))
    assert calls and set(calls) == {"verify_greedy"} and greedy.tokens == generate_ar(target, PROMPT, 12)
    calls.clear()
    sampled = {"temperature": 1.0, "seed": 0}
    default = sd.generate(target, PROMPT, 12, chain, **sampled)
    given = sd.generate(target, PROMPT, 12, chain, **sampled, verify=spy(sd.verify_chain))
    assert calls and set(calls) == {"verify_chain"}
    engine = speculative.decode(target, PROMPT, 12, chain, **sampled, verify=sd.verify_chain)
    # a chain's lossless rule is verify_chain: with the same seed, the same draws and the same tokens
    assert given.tokens == default.tokens == engine.tokens


def test_one_round_by_hand_equals_the_engine(pair):
    """prefill -> propose -> verify_round -> commit -> update, called by hand, is one engine round."""
    target, draft = pair
    prompt = torch.tensor(PROMPT)
    sampling = sd.SamplingParams()
    with torch.inference_mode():
        cache, features = prefill(target, prompt, layers=(-1,))
        assert features[-1].shape == (len(prompt) - 1, hf.block_config(target)["hidden"])
        prop = sd.DraftModelProposer(draft, 4)
        prop.start(target, prompt, sampling, None, features)
        tree = prop.propose(prompt, 4)
        verdict = verify_round(target, cache, prompt, tree, sampling, verify_greedy, layers=(-1,), room=9)
        tokens = commit(target, cache, prompt, verdict)
    assert verdict.tokens == generate_ar(target, prompt, len(verdict.tokens))
    assert verdict.kept.tolist() == [0] + [1 + i for i in verdict.path]
    assert verdict.features[-1].shape[0] == len(verdict.path) + 1
    assert hf.cache_length(cache) == len(tokens) - 1 and verdict.next_token == int(tokens[-1])


def test_eos_and_budget_trim_the_verdict():
    """A round that would run past EOS or the budget commits less; the verdict's path, kept slots and
    features shrink with it, so proposers and caches stay consistent."""
    target = tiny_model(vocab=64, seed=0)  # unlike `pair`, its greedy text does not repeat one token
    prompt = [9, 4, 11, 2, 7]
    ref = generate_ar(target, prompt, 7)
    drafts = torch.tensor(ref[1:6])  # the target's own continuation: everything is accepted
    for room, eos in ((3, None), (9, ref[2]), (9, ref[4])):
        want = ref[1:7]
        want = want[: want.index(eos) + 1] if eos in want else want
        want = want[:room]
        with torch.inference_mode():
            cache, _ = prefill(target, torch.tensor(prompt + ref[:1]))
            v = verify_round(target, cache, torch.tensor(prompt + ref[:1]), DraftTree.chain(drafts),
                             sd.SamplingParams(), verify_greedy, room=room, eos=eos)  # fmt: skip
        assert v.tokens == want and v.path == list(range(len(want) - 1))
        assert v.kept.tolist() == list(range(len(want)))
    assert len(set(ref[1:7])) > 2, "pick a prompt whose continuation varies"


def test_one_token_prompt_gives_empty_features(pair):
    target, _ = pair
    cache, features = prefill(target, torch.tensor([3]), layers=(-1, 1))
    assert hf.cache_length(cache) == 0 and all(f.shape[0] == 0 for f in features.values())
    heads = sd.make_proposer("medusa", target, weights="random")
    assert sd.generate(target, [3], 8, heads).tokens == generate_ar(target, [3], 8)


# --------------------------------------------------------------------------------------- trees
def test_tree_helpers_and_any_order_construction():
    # 0:a -> (1:b -> 3:d), 2:c ; given scrambled: the constructor renumbers parents first
    tokens, parents = [13, 10, 12, 11], [3, -1, -1, 1]  # 13's parent is 11 (index 3), 11's is 10
    tree = DraftTree.from_nodes(tokens, parents)
    assert tree.tokens.tolist() == [10, 12, 11, 13] and tree.parents.tolist() == [-1, -1, 0, 2]
    assert tree.children() == {-1: [0, 1], 0: [2], 2: [3]}
    assert tree.path_to(3) == [0, 2, 3] and tree.path_to(-1) == []
    assert tree.depth().tolist() == [1, 1, 2, 3] and not tree.is_chain
    q = torch.eye(16)[tokens]
    assert torch.equal(DraftTree.from_nodes(tokens, parents, q).q, torch.eye(16)[[10, 12, 11, 13]])
    for bad in ([-1, 0, 1, 5], [1, 0, -1, -1], [0, -1, -1, -1]):  # a lost node, a cycle, a self-loop
        with pytest.raises(ValueError):
            DraftTree.from_nodes(tokens, bad)


def test_the_engine_verifies_a_branching_plain_draft_tree(pair):
    """A proposer may hand over a plain DraftTree that branches (EAGLE-2, DFlash 2 build them so)."""
    target, draft = pair

    class Scrambled(sd.Proposer):
        def propose(self, tokens, max_depth):
            top = hf.forward(target, tokens).logits[-1].topk(3).indices.tolist()
            # nodes given children first; from_nodes reorders
            return DraftTree.from_nodes([top[1], top[0], top[2]], [1, -1, -1])

    assert sd.generate(target, PROMPT, 12, Scrambled()).tokens == generate_ar(target, PROMPT, 12)


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"prompt_ids": [[1, 2], [3, 4]]}, "one prompt"),
        ({"prompt_ids": [1.7, 2.9]}, "integers"),
        ({"prompt_ids": torch.tensor([1.0, 2.0])}, "integers"),
        ({"eos_token_id": 16}, "eos_token_id"),
        ({"eos_token_id": -1}, "eos_token_id"),
        ({"max_new_tokens": True}, "max_new_tokens"),
        ({"max_new_tokens": 2.0}, "max_new_tokens"),
        ({"seed": 1.5}, "seed"),
        ({"seed": "0"}, "seed"),
    ],
)
def test_bad_requests_raise_clearly(pair, kwargs, match):
    target, _ = pair
    request = {"prompt_ids": PROMPT, "max_new_tokens": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        sd.generate(target, **request)


def test_good_unusual_requests_are_accepted(pair):
    target, _ = pair
    want = generate_ar(target, PROMPT, 4)
    assert sd.generate(target, [PROMPT], 4).tokens == want  # a [1, n] batch of one, as tokenizers return
    assert sd.generate(target, np.array(PROMPT), np.int64(4), seed=np.int64(3)).tokens == want


def test_bad_proposers_raise_clearly(pair):
    target, draft = pair
    with pytest.raises(ValueError, match="not a proposer"):
        sd.generate(target, PROMPT, 4, draft)  # the draft model itself, not wrapped
    with pytest.raises(ValueError, match="not a Proposer"):
        sd.generate(target, PROMPT, 4, object())

    class ModuleProposer(torch.nn.Module, sd.Proposer):  # a proposer may well be a torch module
        def propose(self, tokens, max_depth):
            return None

    assert sd.generate(target, PROMPT, 3, ModuleProposer()).tokens == generate_ar(target, PROMPT, 3)
    L = hf.num_layers(target)
    for layers, forwards, match in [
        ([-1], 0, "tuple of layer numbers"),  # a list: the engine hands features over per tuple entry
        ((True,), 0, "tuple of layer numbers"),
        ((L + 1,), 0, f"0 \\(embeddings\\) .. {L}"),
        ((-2,), 0, "not \\[-2\\]"),  # Python would index it, but it is no layer of the course's numbering
        ((), None, "forwards must count"),
        ((), -1, "forwards must count"),
    ]:
        bad = ModuleProposer()
        bad.feature_layers, bad.forwards = layers, forwards
        with pytest.raises(ValueError, match=match):
            sd.generate(target, PROMPT, 3, bad)
    counted = sd.make_proposer("chain:2", target, draft)
    first = sd.generate(target, PROMPT, 6, counted).stats.draft_forwards
    assert (
        first > 0 and sd.generate(target, PROMPT, 6, counted).stats.draft_forwards == first
    )  # per generation
    with pytest.raises(ValueError, match="branching"):
        sd.TreeDraftProposer(draft, 3)  # a bare int
    with pytest.raises(ValueError):
        sd.TreeDraftProposer(3, (2, 1))  # arguments swapped
    with pytest.raises(ValueError):
        sd.DraftModelProposer(4, draft)
    heads = sd.make_proposer("medusa", target, weights="random").heads
    for bad in ([(-1,)], [(0,), (0, 16)], [(0,), (0, 99)]):
        with pytest.raises(ValueError, match="ranks"):
            sd.MedusaProposer(heads, bad)


# --------------------------------------------------------------------- dtypes and architectures
@pytest.mark.parametrize("spec", ["medusa:6", "mtp-independent", "mtp-sequential"])
def test_proposers_follow_a_bf16_target(spec):
    """The GPU presets load bf16 targets: proposer modules are built in the target's dtype (their
    matrix products would fail otherwise), and probabilities stay fp32."""
    target = tiny_model(seed=0, scale=20.0).to(torch.bfloat16)
    prop = sd.make_proposer(spec, target, weights="random")
    module = getattr(prop, "heads", None) or prop.mtp
    assert {p.dtype for p in module.parameters()} == {torch.bfloat16}
    out = sd.generate(target, PROMPT, 12, prop)
    assert len(out.tokens) == 12 and out.stats.tau >= 1
    sampled = sd.generate(target, PROMPT, 12, sd.make_proposer(spec, target, weights="random"), 1.0, seed=0)
    assert len(sampled.tokens) == 12


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_toolkit_block_reproduces_a_target_layer_with_a_cache(arch):
    """Block.like loads a Llama or Qwen3 (QK-norm) layer; with its own cache, appended to in two
    steps, it reproduces the layer's output on the target's features."""
    target = tiny_model(seed=0, arch=arch)
    ids = torch.tensor([[1, 5, 2, 7, 3, 3, 9]])
    hidden = hf.hidden_states(target, ids, (0, 1))
    block = Block.like(target, copy_layer=0)
    positions = torch.arange(ids.shape[1])
    with torch.no_grad():
        torch.testing.assert_close(block(hidden[0][0], positions), hidden[1][0], atol=1e-5, rtol=0)
        cache = KVCache()
        first = block(hidden[0][0, :4], positions[:4], cache)
        rest = block(hidden[0][0, 4:], positions[4:], cache)
    torch.testing.assert_close(torch.cat([first, rest]), hidden[1][0], atol=1e-5, rtol=0)


def test_toolkit_cache_takes_keys_of_other_states_and_any_mask():
    """DFlash's pattern: keys/values projected from other hidden states are written into a block's
    cache (`Block.kv`), then a block of new tokens attends to them and to each other bidirectionally."""
    target = tiny_model(seed=0, arch="qwen3")
    block = Block.like(target)
    d = hf.block_config(target)["hidden"]
    g = torch.Generator().manual_seed(0)
    context, noise = torch.randn(5, d, generator=g), torch.randn(3, d, generator=g)
    with torch.no_grad():
        cache = KVCache()
        cache.append(*block.kv(block.input_layernorm(context), torch.arange(5)))
        out = block(noise, torch.arange(5, 8), cache, mask=torch.ones(3, 8, dtype=torch.bool))
        # the same as running context + block together with a mask that lets the block see everything
        joint = torch.ones(8, 8, dtype=torch.bool).tril()
        joint[5:, 5:] = True
        both = block(torch.cat([context, noise]), torch.arange(8), None, mask=joint)
    torch.testing.assert_close(out, both[5:], atol=1e-5, rtol=0)
    cache.keep(2, torch.tensor([1, 5]))  # a tree's gather: keep 0, 1, then slots 3 and 7
    assert len(cache) == 4


def test_verdict_is_what_update_receives(pair):
    target, draft = pair
    seen = []

    class Recorder(sd.DraftModelProposer):
        def update(self, tokens, verdict):
            assert isinstance(verdict, Verdict) and tokens[-len(verdict.tokens) :].tolist() == verdict.tokens
            seen.append(verdict)
            super().update(tokens, verdict)

    out = sd.generate(target, PROMPT, 16, Recorder(draft, 3))
    assert sum(len(v.tokens) for v in seen) == 16 == len(out.tokens)
    assert [len(v.path) for v in seen] == out.stats.accepted


# ------------------------------------------------------------------------- the lazy package names
PKG = Path(sd.__file__).resolve().parent


def generated_exports() -> dict[str, list[str]]:
    """{module: its __all__} for every generated module (`# AUTOGENERATED from` first, as the exporter's
    --check decides), read with ast: no chapter is imported."""
    found = {}
    for path in sorted(PKG.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.startswith("# AUTOGENERATED from"):
            alls = [
                ast.literal_eval(node.value)
                for node in ast.parse(text).body
                if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "__all__" for t in node.targets)
            ]
            found[path.stem] = list(alls[-1]) if alls else []
    return found


def test_every_public_name_of_every_chapter_is_a_lazy_package_name():
    """`specdec_lib._EXPORTS` is each generated module's `__all__`, in chapter order: a new public name
    (or a new chapter module) cannot be forgotten. Every name resolves to its module's object: no name is
    exported by two modules, and no chapter exports `generate` (chapter 02's engine is `decode`; the
    package's own `generate` is the one public `generate`)."""
    exports = generated_exports()
    table = {m: names.split() for m, names in sd._EXPORTS.items()}
    stale = {m: names for m, names in exports.items() if table.get(m) != names}
    paste = "".join(f'\n    "{m}": "{" ".join(names)}",' for m, names in stale.items())
    assert not stale, f"specdec_lib/__init__.py: _EXPORTS lags behind these modules' __all__:{paste}"
    assert set(table) - set(exports) == {"methods", "zoo"}, "a module in _EXPORTS is no generated module"

    def chapter(module):  # from the header: "# AUTOGENERATED from notebooks/NN_name.ipynb ..."
        return int(re.search(r"notebooks/(\d\d)_", (PKG / f"{module}.py").read_text()).group(1))

    in_table = [chapter(m) for m in table if m in exports]
    assert in_table == sorted(in_table), "_EXPORTS is not in chapter order"
    owners = {}
    for m, names in table.items():
        for name in names:
            owners.setdefault(name, []).append(m)
    twice = {name: mods for name, mods in owners.items() if len(mods) > 1}
    assert not twice, (
        f"exported by two modules, so left out of specdec_lib.NAME (say so in __init__): {twice}"
    )
    assert "generate" not in owners, "a chapter exports a second `generate` (chapter 02's engine is `decode`)"
    assert set(owners) == set(sd._NAMES) and sd.generate.__module__ == "specdec_lib"
    modules = {p.stem for p in PKG.iterdir()}
    for name, module in sd._NAMES.items():
        assert name not in modules, f"{name} is also a submodule's name"
        assert getattr(sd, name) is getattr(importlib.import_module(f"specdec_lib.{module}"), name), name
    assert set(sd._NAMES) <= set(dir(sd))


def test_import_specdec_lib_imports_no_chapter():
    """A fresh interpreter: `import specdec_lib` and dir() import no chapter (nor torch), only the supported
    transformers' check (specdec_lib._supported, which imports nothing); a lazy name imports its own chapter
    only."""
    code = (
        "import sys, specdec_lib\n"
        "dir(specdec_lib)\n"
        "print(sorted(m for m in sys.modules if m.startswith('specdec_lib.')), 'torch' in sys.modules)\n"
        "specdec_lib.SamplingParams\n"
        "print('specdec_lib.autoregressive' in sys.modules, 'specdec_lib.dflash2' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["['specdec_lib._supported'] False", "True False"], run.stdout
