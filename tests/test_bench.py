"""The benchmark harness: its definitions and its greedy-equality guard (timings are never asserted)."""

import json

import pytest
from conftest import needs_compiler

from specdec_lib import bench
from specdec_lib.speculative import Stats


def _run(tokens, seconds, passes=1):
    stats = Stats(target_forwards=passes, new_tokens=tokens, time_verify=seconds)
    return bench.Run(list(range(tokens)), seconds, passes, stats)


def test_speedup_is_total_tokens_over_total_time():
    """Spec-Bench's definition, not the mean or median of per-prompt ratios: here the per-prompt ratios are
    4.0 and 1.33 (median 2.67), but the method spent 1 s where plain decoding spent 2 s: exactly 2.0x."""
    base = [[_run(10, 1.0, 10), _run(10, 1.0, 10)]]
    mine = [[_run(10, 0.25, 4), _run(10, 0.75, 4)]]
    out = bench.summarise(mine, base, t1=0.1)  # no prefill in these runs: decoding speedup == speedup
    assert out["speedup"] == pytest.approx(2.0)
    assert out["tokens_per_second"] == pytest.approx(20.0)
    assert out["speedup_per_prompt_range"] == pytest.approx([4 / 3, 4.0])
    assert out["tau"] == pytest.approx(20 / 8)
    # the analytic model: kc = 0 here, verify per round = 1.0 s / 8 rounds against t1 = 0.1 s
    assert out["V"] == pytest.approx(0.125 / 0.1 - 1)
    assert out["predicted_speedup"] == pytest.approx(out["tau"] / (1 + out["V"]))
    assert out["decode_speedup"] == pytest.approx(2.0)
    assert out["efficiency"] == pytest.approx(out["decode_speedup"] / out["predicted_speedup"])


def test_efficiency_takes_the_prefill_out_of_both_sides():
    """The model has no prefill, so neither does the speedup it is compared with: with prefill, a method
    twice as fast per token shows less than 2x; without, exactly 2x."""
    base = [[_run(10, 1.2, 10)]]
    base[0][0].stats.time_prefill = 0.2
    mine = [[_run(10, 0.7, 5)]]
    mine[0][0].stats.time_prefill = 0.2
    out = bench.summarise(mine, base, t1=0.1)
    assert out["speedup"] == pytest.approx(1.2 / 0.7) and out["decode_speedup"] == pytest.approx(2.0)


def test_measure_on_the_zoo_asserts_greedy_equality_and_reports_every_method():
    specs = ["chain:2", "ngram:4", "hf-assisted:2", "hf-lookup:4"]
    report = bench.measure(specs, (0.0, "0.7:0.9"), prompts=2, max_new_tokens=8, repeats=2, quiet=True)
    json.dumps(report)  # plain numbers only
    assert report["errors"] == [] and report["methods"] == ["ar", *specs]
    assert list(report["results"]) == report["temperatures"] == ["0", "0.7:0.9"]
    assert "**T = 0.7, top-p 0.9**" in bench.markdown(report)
    for t, rows in report["results"].items():
        for m in ["ar", *specs]:
            r = rows[m]
            # greedy: exactly plain decoding's tokens; sampled: at most 8 per prompt (an EOS may stop one)
            assert r["new_tokens"] == rows["ar"]["new_tokens"] if t == "0" else r["new_tokens"] <= 2 * 2 * 8
            assert r["tau"] >= 1.0 and len(r["speedup_per_repeat"]) == 2 and len(r["runs"]) == 2
            assert r["greedy_identical"] == (4 if t == "0" else None)
        assert rows["ar"]["tau"] == 1.0 and rows["ar"]["t1_ms"] > 0
        assert set(rows["chain:2"]["ms_per_round"]) == {"draft", "verify", "other"}
        assert rows["ngram:4"]["draft_passes_per_round"] == 0  # prompt lookup runs no model
        assert rows["hf-assisted:2"]["draft_passes_per_round"] > 0  # counted by the hook on the draft
    text = bench.markdown(report)
    assert all(f"| {m} |" in text for m in specs)


@needs_compiler
def test_compiled_rows_sit_beside_the_eager_ones(monkeypatch, capsys):
    """bench --compile adds SPEC@compiled for ar and each of ours (not for transformers' peers); a method with
    nothing to compile is skipped with the reason; the compiled rows keep greedy output; the warm-up compiles
    everything, so nothing is compiled while timing."""
    seen = {}
    monkeypatch.setattr(bench, "run", lambda args: seen.setdefault("methods", args.methods) and True)
    with pytest.raises(SystemExit):
        bench.main(["run", "--methods", "chain:2,hf", "--compile"])
    assert seen["methods"] == ["chain:2", "hf", "ar@compiled", "chain:2@compiled"]
    specs = ["ar@compiled", "chain:2@compiled", "ngram:4@compiled"]
    report = bench.measure(specs, (0.0,), prompts=2, max_new_tokens=8, repeats=1, quiet=True)
    assert report["errors"] == [] and "ngram:4@compiled" in report["skipped"]
    rows = report["results"]["0"]
    assert rows["chain:2@compiled"]["greedy_identical"] == rows["ar@compiled"]["greedy_identical"] == 2
    n = report["recompiles_after_warmup"]  # a pass shape first seen while timing (tests/test_runners.py
    assert f"recompilations): {n}" in bench.markdown(report)  # checks that a second pass compiles nothing)


def test_a_compiled_row_is_measured_against_its_own_plain_loop():
    """kc, V, predicted and efficiency of a compiled row come from ar@compiled's step (`step`), the speedup
    and tokens/s still from eager plain decoding: a 2x faster loop halves what a drafter saves against it."""
    eager = [[_run(10, 1.0, 10)]]
    fast = [[_run(10, 0.5, 10)]]  # compiled plain decoding: 0.05 s a step
    mine = [[_run(10, 0.25, 4)]]
    out = bench.summarise(mine, eager, t1=0.1, step=(fast, 0.05))
    assert out["speedup"] == pytest.approx(4.0)  # against eager AR, as every row
    assert out["V"] == pytest.approx(0.25 / 4 / 0.05 - 1)  # a verify of 62.5 ms is 1.25 compiled steps
    assert out["decode_speedup"] == pytest.approx(2.0)  # against the compiled loop
    assert out["efficiency"] == pytest.approx(2.0 / out["predicted_speedup"])


def test_compile_time_pays_back_against_the_eager_twin(monkeypatch):
    """break-even tokens = compile seconds / seconds a token saves against the row's eager twin (ar for
    ar@compiled, hf for hf-static); none where compiling is slower. Cold and warm are two fresh processes."""
    rows = {m: {"tokens_per_second": tps} for m, tps in
            [("ar", 100), ("ar@compiled", 125), ("chain:2", 80), ("chain:2@compiled", 70), ("hf", 100),
             ("hf-static", 200)]}  # fmt: skip
    report = {"preset": "tiny-code", "prompts": 2, "max_new_tokens": 8, "temperatures": ["0"],
              "methods": list(rows), "results": {"0": rows}, "command": "", "device": "cpu", "threads": 1,
              "repeats": 1, "torch": "", "transformers": "", "date": "", "skipped": {}, "errors": [],
              "recompiles_after_warmup": 0}  # fmt: skip
    for r in rows.values():
        r.update(tau=1.0, speedup=1.0, speedup_per_prompt_quartiles=[1, 1, 1], greedy_identical=None, t1_ms=1.0,
                 speedup_vs_compiled_ar=1.0)  # fmt: skip
    calls = []

    def child(call, cache):
        calls.append((call[0], cache))
        return {"first_s": 14.0 if len(calls) % 2 else 5.0, "again_s": 2.0, "graphs": 1}

    monkeypatch.setattr(bench, "_in_fresh_process", child)
    bench.compile_times(report, log=lambda *_: None)
    assert [c[0] for c in calls] == ["ar@compiled"] * 2 + ["chain:2@compiled"] * 2 + ["hf-static"] * 2
    assert calls[0][1] == calls[1][1] != calls[2][1]  # warm reuses the cold run's cache, per method
    assert rows["ar@compiled"]["compile_s"] == {"cold": 12.0, "warm": 3.0}
    assert rows["ar@compiled"]["break_even_tokens"] == pytest.approx({"cold": 6000, "warm": 1500})
    assert rows["hf-static"]["break_even_tokens"] == pytest.approx({"cold": 2400, "warm": 600})
    assert rows["chain:2@compiled"]["break_even_tokens"] == {"cold": None, "warm": None}
    text = bench.markdown(report)
    assert "| ar@compiled | 12.0 | 3.0 | 6000 / 1500 |" in text
    assert "| chain:2@compiled | 12.0 | 3.0 | - / - |" in text


def test_compiled_plain_decoding_shows_where_it_parts_from_eager():
    """near_ties: for a prompt whose two greedy outputs part, the first differing position and the eager
    target's logit gap between the two tokens there; nothing for prompts that agree."""
    import torch

    from specdec_lib import zoo
    from specdec_lib.autoregressive import generate_ar

    target, _, tok = zoo.load_pair("tiny-code", device="cpu")
    prompts = bench.load_prompts("tiny-code", tok, 2, torch.device("cpu"))
    eager = [bench.Run(generate_ar(target, p, 6), 1.0, 6) for p in prompts]
    other = [bench.Run(list(r.tokens), 1.0, 6) for r in eager]
    other[1].tokens[3] = (other[1].tokens[3] + 1) % 100
    ties = bench.near_ties(target, prompts, [eager, eager], [eager, other])  # parts in repeat 2 only
    assert [(t["prompt"], t["position"], t["compiled"]) for t in ties] == [(1, 3, other[1].tokens[3])]
    with torch.inference_mode():
        ids = torch.cat([prompts[1], torch.tensor(eager[1].tokens[:3])])
        logits = target(input_ids=ids[None]).logits[0, -1]
    a, b = eager[1].tokens[3], other[1].tokens[3]
    assert ties[0]["logit_gap"] == pytest.approx(float(logits[a] - logits[b]))
    assert ties[0]["logit_gap"] > 0  # greedy took the eager token: the gap is the argmax's margin
    assert bench.near_ties(target, prompts, [eager], [eager]) == []


def test_the_static_cache_peer_counts_a_pass_a_token_and_must_compile(monkeypatch):
    """hf-static (transformers' static cache, compiled by transformers) is not hooked (a hook inside a
    compiled step would recompile it): it counts plain decoding's one pass a token, the prefill's included,
    which a hook on an uncompiled decode confirms. Its greedy tokens are counted against ours, a difference
    is no error; but a run where transformers compiled nothing is, since the row would not be the compiled
    peer it claims to be. Here transformers' compilation is switched off: the peer's plumbing, not the
    compiler."""
    from specdec_lib import zoo

    settings = bench._peer_settings

    def uncompiled(spec, draft):
        kwargs, cfg = settings(spec, draft)
        if spec == "hf-static":
            kwargs["compile_config"]._compile_all_devices = None
        return kwargs, cfg

    monkeypatch.setattr(bench, "_peer_settings", uncompiled)
    target, draft, tok = zoo.load_pair("tiny-code")
    ids = bench.load_prompts("tiny-code", tok, 1, target.device)[0]
    with bench.PassCounter(target) as counter:  # what the peer's count stands for, counted
        run = bench.make_runner("hf-static", target, draft, tok.eos_token_id)(ids, 6, (0.0, 1.0), None)
    assert run.passes == len(run.tokens) == counter.calls == 6
    make = bench.make_runner

    def off_by_one(spec, *args):
        run = make(spec, *args)

        def changed(*a):
            out = run(*a)
            out.tokens[-1] = (out.tokens[-1] + 1) % 100
            return out

        return changed if spec == "hf-static" else run

    monkeypatch.setattr(bench, "make_runner", off_by_one)
    report = bench.measure(["hf-static"], (0.0,), prompts=2, max_new_tokens=6, repeats=1, quiet=True)
    assert report["results"]["0"]["hf-static"]["greedy_identical"] == 0
    assert len(report["errors"]) == 1 and "compiled nothing" in report["errors"][0]  # not the greedy mismatch


def test_which_greedy_differences_fail_a_compiled_run(monkeypatch):
    """At T = 0 a compiled row of ours must equal ar@compiled's tokens (an error otherwise), while
    ar@compiled is only counted against eager ar, with where it parts (near_ties). The compiled runners
    are swapped for their eager twins, so no compiler runs."""
    make = bench.make_runner

    def eager(spec, *args):
        run = make(spec.removesuffix(bench.COMPILED), *args)
        if spec not in ("ar@compiled", "chain:4@compiled"):
            return run

        def changed(*a):
            out = run(*a)
            out.tokens[-1] = (out.tokens[-1] + 1) % 100
            return out

        return changed

    monkeypatch.setattr(bench, "make_runner", eager)
    report = bench.measure(["chain:4@compiled", "chain:2@compiled"], (0.0,), prompts=2, max_new_tokens=6,
                           repeats=1, quiet=True)  # fmt: skip
    rows = report["results"]["0"]
    assert rows["ar@compiled"]["greedy_identical"] == 0 and len(rows["ar@compiled"]["near_ties"]) == 2
    # chain:2@compiled now differs from ar@compiled (which was changed) on every prompt: an error; the
    # changed chain:4@compiled equals ar@compiled's changed tokens: none
    assert (
        rows["chain:2@compiled"]["greedy_identical"] == 0
        and rows["chain:4@compiled"]["greedy_identical"] == 2
    )
    assert len(report["errors"]) == 2 and all("chain:2@compiled" in e for e in report["errors"])


def test_a_fresh_process_measures_what_compiling_costs():
    """compile-time's child, for real: a fresh interpreter decodes the run's prompts twice (here eager plain
    decoding, so nothing compiles: the first pass costs about what the second does)."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        r = bench._in_fresh_process(["ar", "tiny-code", 1, 4, ["0"], 1, "cpu"], cache)
    assert set(r) == {"first_s", "again_s", "graphs"} and r["graphs"] == 0
    assert r["first_s"] > 0 and r["again_s"] > 0


def test_a_greedy_mismatch_is_an_error(monkeypatch, tmp_path):
    """A method whose T = 0 output differs from plain decoding fails the run (exit code 1)."""
    make = bench.make_runner

    def broken(spec, *args):
        run = make(spec, *args)
        if spec != "ngram:4":
            return run

        def wrong(*a):
            out = run(*a)
            out.tokens = out.tokens[:-1] + [(out.tokens[-1] + 1) % 4096]
            return out

        return wrong

    monkeypatch.setattr(bench, "make_runner", broken)
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--methods", "ngram:4", "--temperature", "0", "--prompts", "1", "--max-new-tokens", "4",
                    "--repeats", "1", "--quiet", "--out", str(tmp_path)])  # fmt: skip
    assert exit_.value.code == 1
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["errors"] and "ngram:4" in report["errors"][0]
    assert report["results"]["0"]["ngram:4"]["greedy_identical"] == 0


def test_bad_arguments_are_refused():
    bad = ("-1", "0.7:0", "0.7:1.5", "0:0.9", "x", ",")
    for argv in [["--temperature", t] for t in bad] + [["--prompts", "0"], ["--max-new-tokens", "0"]]:
        with pytest.raises(SystemExit) as exit_:
            bench.main(argv)
        assert exit_.value.code == 2
    with pytest.raises(ValueError, match="hf-assisted"):
        bench._peer_settings("hf-assisted:0", draft=object())
    assert [bench.setting_key(x) for x in (0, 1.0, "0.7:0.9", (0.7, 1.0))] == ["0", "1", "0.7:0.9", "0.7"]


def test_cost_curve_is_written_for_every_size(tmp_path):
    """`bench costs`: V(n) for n = 1 .. 32 of one verification pass as the engine runs it (V(1) = 0 by
    definition), with the machine it ran on."""
    with pytest.raises(SystemExit) as e:
        bench.main(["costs", "--preset", "tiny-code", "--repeats", "1", "--out", str(tmp_path)])
    assert e.value.code == 0
    report = json.loads((tmp_path / "costs-tiny-code.json").read_text())
    assert list(report["V"]) == [str(n) for n in range(1, 33)] and report["V"]["1"] == 0
    assert all(report["ms"][n] > 0 for n in report["ms"]) and report["threads"] >= 1


def test_tree_budgets_follow_the_round_model():
    """recap.tree_budgets (chapter 12): tau(n) of the best n-node tree from acc[d][r], its depth, and
    S = tau / (1 + D c + V[n + 1]) with the pass over the n nodes and the pending token."""
    from specdec_lib.recap import tree_budgets

    acc = [[0.6, 0.2, 0.1], [0.5, 0.2, 0.1], [0.4, 0.1, 0.05]]
    V = {n: 0.05 * (n - 1) for n in range(1, 9)}
    rows = tree_budgets(acc, 0.1, V)
    assert [r["n"] for r in rows] == list(range(1, 8))
    assert rows[0]["tau"] == pytest.approx(1.6) and rows[0]["depth"] == 1  # one node: the rank-0 guess
    assert rows[1]["tau"] == pytest.approx(1.6 + 0.3) and rows[1]["depth"] == 2  # then its child, 0.6 x 0.5
    assert all(a["tau"] < b["tau"] for a, b in zip(rows, rows[1:]))
    for r in rows:
        assert r["V"] == V[r["n"] + 1]
        assert r["speedup"] == pytest.approx(r["tau"] / (1 + r["depth"] * 0.1 + r["V"]))
