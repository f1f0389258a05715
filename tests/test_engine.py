"""The decoding engine (chapters 01-03): sampling controls (bad arguments, NaN logits, agreement with
transformers' warpers), bad requests, greedy equality (cached decoding, speculative decoding at any k,
EOS and budget), the target's KV cache after every round, and lossless chain verification computed
EXACTLY (conftest.ExactLaw enumerates every random draw): the law of the first three tokens, a wrong
bonus row that the exact test must catch, and chapter 03's `output_law`. Also the transformers version
check and out-of-order trees."""

import copy
from pathlib import Path

import pytest
import torch
from conftest import ExactLaw, continuation_logits, split_tables, tiny_model

import specdec_lib as sd
from specdec_lib import hf, rejection
from specdec_lib.autoregressive import (
    SamplingParams,
    generate_ar,
    generate_no_cache,
    process_logits,
    sample_token,
)
from specdec_lib.speculative import DraftTree, Proposer, ancestor_mask

PROMPTS = [[1, 2, 3], [5], [7, 7, 7, 7, 0, 3, 9], [15, 14, 13, 12, 11]]


# ------------------------------------------------------------------------------ sampling controls
@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"temperature": 1.0, "top_p": 0.0},
        {"temperature": 1.0, "top_p": 1.5},
        {"temperature": 1.0, "top_k": 0},
    ],
)
def test_bad_sampling_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def broken_model(seed):
    """A model whose scores are NaN after two particular tokens (a model gone wrong mid-generation)."""
    model = tiny_model(seed=seed)
    with torch.no_grad():
        model.get_input_embeddings().weight[[3, 9]] = float("nan")
    return model


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_nan_logits_raise_a_clear_error(temperature):
    """process_logits never reads back from the device (issue 50); the decoding loops check instead: a
    target that scores NaN raises in plain and speculative decoding, and so does a draft whose q is NaN
    under sampling (at T = 0 its drafts are guesses that verification rejects: the output stays exact)."""
    bad, good, prompt = broken_model(0), tiny_model(seed=0), [1, 2, 3]
    with pytest.raises(ValueError, match="NaN"):
        sample_token(torch.tensor([0.5, float("nan"), 0.5]))
    with pytest.raises(ValueError, match="NaN"):
        generate_ar(bad, prompt, 4, SamplingParams(temperature), seed=0)
    with pytest.raises(ValueError, match="NaN"):
        sd.generate(bad, prompt, 4, temperature=temperature, seed=0)
    with pytest.raises(ValueError, match="NaN"):
        sd.generate(bad, prompt, 4, sd.DraftModelProposer(good, 2), temperature=temperature, seed=0)
    draft = sd.DraftModelProposer(broken_model(1), 2)
    if temperature > 0:
        with pytest.raises(ValueError, match="NaN"):
            sd.generate(good, prompt, 4, draft, temperature=temperature, seed=0)
    else:
        assert sd.generate(good, prompt, 8, draft).tokens == generate_ar(good, prompt, 8)


@pytest.mark.parametrize("t,k,p", [(1.0, None, None), (0.7, None, 0.9), (1.3, 5, None), (0.5, 8, 0.8)])
def test_process_logits_matches_transformers_warpers(t, k, p):
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0)) * 3
    warpers = LogitsProcessorList([TemperatureLogitsWarper(t)])
    if k:
        warpers.append(TopKLogitsWarper(k))
    if p:
        warpers.append(TopPLogitsWarper(p))
    ref = warpers(None, logits.clone()).softmax(-1)
    ours = process_logits(logits, SamplingParams(t, k, p))
    torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)


def test_greedy_is_a_point_mass_on_the_argmax():
    logits = torch.randn(4, 10)
    probs = process_logits(logits, SamplingParams(0.0))
    assert torch.equal(probs.argmax(-1), logits.argmax(-1)) and torch.equal(probs.sum(-1), torch.ones(4))


def test_sample_token_draws_each_token_with_its_weight(monkeypatch):
    """Chapter 01's inverse-CDF sampler, exactly (every interval of the cumulative sum is one outcome of the
    enumeration): one draw follows weights / total, unnormalised weights included, and a zero weight,
    first, inside or last, is never drawn."""
    weights = torch.tensor([0.0, 0.3, 0.0, 0.5, 0.2, 0.0]) * 2.5
    law = ExactLaw(monkeypatch).run(lambda: sd.sample_token(weights))
    assert set(law) == {1, 3, 4}
    for token, chance in law.items():
        assert chance == pytest.approx(float(weights[token] / weights.sum()), abs=1e-6)  # fp32 weights


def test_sample_token_with_a_real_generator():
    """The same with torch's generator: seeded draws repeat, zero weights never come up, frequencies match,
    and a point mass returns its token without moving the generator."""
    weights = torch.tensor([0.0, 0.1, 0.0, 0.6, 0.3, 0.0])
    g = torch.Generator().manual_seed(0)
    draws = torch.tensor([sd.sample_token(weights, g) for _ in range(20000)])
    again = torch.Generator().manual_seed(0)
    assert draws[:50].tolist() == [sd.sample_token(weights, again) for _ in range(50)]
    freq = torch.bincount(draws, minlength=6) / len(draws)
    assert freq[[0, 2, 5]].sum() == 0 and (freq - weights).abs().max() < 0.02
    state = g.get_state()
    assert sd.sample_token(torch.tensor([0.0, 0.0, 1.0]), g) == 2 and torch.equal(g.get_state(), state)


# ------------------------------------------------------------------------------------ bad input
def test_bad_requests_raise(tiny_pair):
    target, draft = tiny_pair
    with pytest.raises(ValueError, match="empty"):
        sd.generate(target, [], 5)
    with pytest.raises(ValueError, match="max_new_tokens"):
        sd.generate(target, [1], -1)
    with pytest.raises(ValueError, match="context"):
        sd.generate(target, [1] * 120, 20)
    with pytest.raises(ValueError, match="k"):
        sd.DraftModelProposer(draft, 0)
    with pytest.raises(ValueError, match="vocabularies"):
        sd.generate(target, [1, 2], 5, sd.DraftModelProposer(tiny_model(vocab=20, seed=3), 2))
    with pytest.raises(ValueError, match="temperature"):
        sd.generate(target, [1, 2], 5, temperature=-1.0)
    with pytest.raises(ValueError, match="top_p"):
        sd.generate(target, [1, 2], 5, temperature=1.0, top_p=1.2)


# ---------------------------------------------------------------------------------------- greedy
def test_cached_decoding_matches_recomputation_and_transformers(tiny_pair):
    target, _ = tiny_pair
    for prompt in PROMPTS:
        ours = generate_ar(target, prompt, 25)
        assert ours == generate_no_cache(target, prompt, 25)
        ref = target.generate(torch.tensor([prompt]), max_new_tokens=25, do_sample=False, min_new_tokens=25)
        assert ours == ref[0, len(prompt) :].tolist()


@pytest.mark.parametrize("k", [1, 4, 8])
def test_greedy_speculative_equals_autoregressive(tiny_pair, k):
    target, draft = tiny_pair
    for drafter in (draft, target):  # a poor draft (few accepts) and a perfect one (all accepted)
        for prompt in PROMPTS:
            ref = generate_ar(target, prompt, 30)
            out = sd.generate(target, prompt, 30, sd.DraftModelProposer(drafter, k))
            assert out.tokens == ref
            assert out.stats.new_tokens == 30 and sum(out.stats.accepted) + len(out.stats.accepted) == 30
    perfect = sd.generate(target, PROMPTS[0], 30, sd.DraftModelProposer(target, k)).stats
    assert perfect.accepted == perfect.drafted  # a perfect draft: every drafted token accepted


def test_stops_exactly_at_eos_and_budget(tiny_pair):
    target, _ = tiny_pair
    ref = generate_ar(target, PROMPTS[0], 40)
    eos = ref[17]
    first = ref.index(eos)
    for k in (1, 3, 8):
        out = sd.generate(target, PROMPTS[0], 40, sd.DraftModelProposer(target, k), eos_token_id=eos)
        assert out.tokens == ref[: first + 1]
        for n in (0, 1, 2, 7, 13):
            assert sd.generate(target, PROMPTS[0], n, sd.DraftModelProposer(target, k)).tokens == ref[:n]


# ----------------------------------------------------------------------------------- KV rollback
class ScriptedProposer(Proposer):
    """Drafts the target's own greedy tokens but breaks position j (j = 0..k cycling), so round after
    round every accepted length 0..k occurs."""

    def __init__(self, target, k):
        self.target, self.k, self.round = target, k, 0

    def start(self, target, prompt_ids, sampling, generator, features=None):
        self.round = 0

    def propose(self, tokens, max_depth):
        k = min(self.k, max_depth)
        good = generate_no_cache(self.target, tokens, k)
        j = self.round % (self.k + 1)
        self.round += 1
        if j < k:
            good[j] = (good[j] + 1) % hf.vocab_size(self.target)
        return DraftTree.chain(torch.tensor(good))


def test_target_cache_after_every_round_equals_fresh_prefill(tiny_pair):
    target, _ = tiny_pair
    k, seen = 4, []

    def check(tokens, verdict, cache):
        seen.append(len(verdict.path))
        assert hf.cache_length(cache) == len(tokens) - 1
        fresh = hf.forward(target, tokens).logits[-1]
        cached = hf.forward(target, tokens[-1:], copy.deepcopy(cache)).logits[-1]
        torch.testing.assert_close(cached, fresh, atol=1e-5, rtol=0)

    out = sd.generate(target, PROMPTS[2], 40, ScriptedProposer(target, k), on_round=check)
    assert out.tokens == generate_ar(target, PROMPTS[2], 40)
    assert set(seen) == set(range(k + 1))  # every accepted length 0..k was exercised


# ---------------------------------------------------------------- lossless sampling, exactly
def two_step_distributions(target, draft, context, sampling):
    """Processed distributions for every 2-token draft after `context` (vocabulary V):
    q1 [V], q2 [V, V] (draft after x1), p1 [V], p2 [V, V], p3 [V, V, V] (target)."""
    V = hf.vocab_size(target)
    n = len(context)
    p1, p2, p3 = split_tables(process_logits(continuation_logits(target, context, V), sampling), n, V)
    q1, q2, _ = split_tables(process_logits(continuation_logits(draft, context, V), sampling), n, V)
    return q1, q2, p1, p2, p3


def exact_round_law(verify, q1, q2, p1, p2, p3, monkeypatch):
    """P(y1, y2, y3) of a verification round with a 2-token draft, every random draw (the draft's and
    the verifier's) enumerated exactly. A round that emits fewer than three tokens is completed with the
    target's own next-token tables: the next round starts afresh from the committed text."""
    V = len(p1)

    def one_round():
        a = int(torch.multinomial(q1, 1))
        b = int(torch.multinomial(q2[a], 1))
        tree = DraftTree.chain(torch.tensor([a, b]), torch.stack([q1, q2[a]]))
        path, nxt = verify(tree, torch.stack([p1, p2[a], p3[a, b]]))
        return tuple([a, b][: len(path)] + [nxt])

    law = torch.zeros(V, V, V, dtype=torch.float64)
    for emitted, w in ExactLaw(monkeypatch).run(one_round).items():
        if len(emitted) == 3:  # both drafts accepted, then the bonus token
            law[emitted] += w
        elif len(emitted) == 2:
            law[emitted] += w * p3[emitted].double()
        else:
            law[emitted] += w * p2[emitted].double()[:, None] * p3[emitted].double()
    return law


@pytest.mark.parametrize(
    "sampling", [SamplingParams(1.0), SamplingParams(0.7, top_p=0.9), SamplingParams(1.0, 4)]
)
def test_chain_verification_is_exactly_lossless(sampling, monkeypatch):
    """The law of the first THREE tokens, so the bonus token after two accepted drafts is checked too."""
    target, draft = tiny_model(vocab=8, seed=0, scale=3.0), tiny_model(vocab=8, seed=1, layers=1, scale=3.0)
    q1, q2, p1, p2, p3 = two_step_distributions(target, draft, [1, 2, 3], sampling)
    got = exact_round_law(rejection.verify_chain, q1, q2, p1, p2, p3, monkeypatch)
    want = p1.double()[:, None, None] * p2.double()[:, :, None] * p3.double()
    assert (got - want).abs().max() < 1e-6


def test_the_exact_chain_test_checks_the_bonus_token(monkeypatch):
    """Teeth: drawing the bonus token from the last draft's row instead of the row after it is caught."""
    target, draft = tiny_model(vocab=8, seed=0, scale=3.0), tiny_model(vocab=8, seed=1, layers=1, scale=3.0)
    q1, q2, p1, p2, p3 = two_step_distributions(target, draft, [1, 2, 3], SamplingParams(1.0))

    def wrong_bonus_row(tree, p, generator=None):
        return rejection.verify_chain(tree, torch.cat([p[:-1], p[-2:-1]]), generator)

    got = exact_round_law(wrong_bonus_row, q1, q2, p1, p2, p3, monkeypatch)
    want = p1.double()[:, None, None] * p2.double()[:, :, None] * p3.double()
    assert (got - want).abs().max() > 1e-3


def test_output_law_is_what_verify_chain_does(monkeypatch):
    """Chapter 03's exported `output_law` (its notebook's asserts rely on it) equals the exact law of
    the first token verify_chain emits, every random draw enumerated: honest, sparse and lying q."""
    g, V, cases = torch.Generator().manual_seed(0), 6, []
    for trial in range(12):  # drawn before ExactLaw takes over torch's random functions
        p, q_drawn = torch.rand(V, generator=g) ** 3, torch.rand(V, generator=g) ** 3
        if trial % 3 == 1:
            p[:2], q_drawn[3:5] = 0.0, 0.0
        p, q_drawn = p / p.sum(), q_drawn / q_drawn.sum()
        cases.append((p, q_drawn, q_drawn if trial % 2 == 0 else (q_drawn**2) / (q_drawn**2).sum()))
    exact = ExactLaw(monkeypatch)
    for trial, (p, q_drawn, q_reported) in enumerate(cases):
        rows = torch.stack([p, rejection.point_mass(0, V)])

        def first_token(q_drawn=q_drawn, q_reported=q_reported, rows=rows):
            x = int(torch.multinomial(q_drawn, 1))
            path, nxt = rejection.verify_chain(DraftTree.chain(torch.tensor([x]), q_reported[None]), rows)
            return x if path else nxt

        law = torch.zeros(V, dtype=torch.float64)
        for token, w in exact.run(first_token).items():
            law[token] += w
        want = rejection.output_law(p.double(), q_drawn.double(), q_reported.double())
        assert (law - want).abs().max() < 1e-6, trial


def test_unsupported_transformers_is_refused_with_the_fix():
    from specdec_lib import hf

    for ok in ("4.56.0", "5.23.0", "5.99.1"):
        hf.check_transformers_version(ok)
    for old in ("4.40.2", "4.55.9", "6.0.0", None):
        with pytest.raises(ImportError, match=r"pip install 'transformers>=4.56,<6'"):
            hf.check_transformers_version(old)


def test_import_specdec_lib_refuses_an_old_installed_transformers(tmp_path):
    """`import specdec_lib` itself (lazy chapters, no transformers import) checks the installed release:
    a fake `transformers-4.40.2.dist-info` placed first on the path stands in for an old install."""
    import subprocess
    import sys

    dist = tmp_path / "transformers-4.40.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 4.40.2\n")
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import specdec_lib"
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]
    )
    assert run.returncode != 0
    assert "transformers 4.40.2" in run.stderr and "pip install 'transformers>=4.56,<6'" in run.stderr
    ok = subprocess.run(
        [sys.executable, "-c", "import specdec_lib"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert ok.returncode == 0, ok.stderr


def test_a_tree_out_of_order_is_refused_not_looped_forever():
    """Nodes must come after their parents: a cycle (or a self-parent) is an error in depth, flatten and
    the ancestor mask, never an endless climb towards a root it cannot reach."""
    for parents in ([1, 0], [0], [-1, 2, 1]):
        tree = DraftTree(torch.arange(len(parents)), torch.tensor(parents))
        with pytest.raises(ValueError, match="parent must come before"):
            tree.depth()
        with pytest.raises(ValueError, match="parent must come before"):
            tree.flatten(root=5, prefix_len=3)
        with pytest.raises(ValueError, match="parent must come before"):
            ancestor_mask(parents)
