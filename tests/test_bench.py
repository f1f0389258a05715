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
