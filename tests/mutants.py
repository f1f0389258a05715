"""Do the tests have teeth? Plant one known bug at a time in a scratch copy of the library and check that
the tests recorded as its catchers fail there (a development tool; `make mutants`).

    python tests/mutants.py              # every mutant against its recorded catchers (= make mutants)
    python tests/mutants.py M6 N1        # the ones whose name starts with these
    python tests/mutants.py --full E1    # the whole behavioural suite per mutant: every test that catches
                                         # it, with its time (to record catchers; ~40 s a mutant)
    python tests/mutants.py --check      # only that every mutant's text is still in the library

Each mutant is a plausible slip, most of them *lossless* ones that greedy equality cannot see. CATCHERS
records, per mutant, the one or two fastest tests that catch it (found with --full). The rule: a mutant
passes when every recorded catcher FAILS on the mutated copy, and every catcher passes on the clean copy
(so a catcher that fails for another reason cannot hide a survivor). `make mutants` exits 1 when a mutant
survives one of its catchers, has none recorded, or its text no longer matches the library (the code
changed: fix the text, keeping the slip's meaning). A fast subset runs in `make test`
(tests/test_mutants_fast.py). A new method or a fixed bug adds its mutant and catchers here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEHAVIOURAL = [
    "tests/test_contract.py",
    "tests/test_engine.py",
    "tests/test_engine_api.py",
    "tests/test_engine_exact_sampling.py",
    "tests/test_sampling_controls.py",
    "tests/test_trees.py",
    "tests/test_medusa_mtp.py",
    "tests/test_eagle.py",
    "tests/test_eagle3.py",
    "tests/test_dflash.py",
    "tests/test_dflash2.py",
]

# name -> (file, [(text, replacement), ...]); each text must occur exactly once in the file.
MUTANTS = {
    "M4a Medusa drafts from h one position early": (
        "specdec_lib/medusa.py",
        [
            (
                "        self.h = prefix[-1] if len(prefix) else None",
                "        self.h = prefix[-2 if len(prefix) > 1 else -1] if len(prefix) else None",
            ),
            (
                "        self.h = verdict.features[-1][-1]",
                "        h = verdict.features[-1]\n        self.h = h[-2] if len(h) > 1 else h[-1]",
            ),
        ],
    ),
    "M4b independent MTP drafts from h one position early": (
        "specdec_lib/mtp.py",
        [
            (
                "                h = self.mtp.heads[k - 1](self.h0[start:n], positions, cache)\n"
                "                logits = self.mtp.logits(k, h[-1])",
                "                h = self.mtp.heads[k - 1](self.h0[start:n], positions, cache)\n"
                "                logits = self.mtp.logits(k, h[-2] if len(h) > 1 else h[-1])",
            )
        ],
    ),
    "M5a top-p computed before top-k": (
        "specdec_lib/autoregressive.py",
        [
            (
                "    if sampling.top_k is not None and sampling.top_k < logits.shape[-1]:\n"
                "        kth = logits.topk(sampling.top_k, dim=-1).values[..., -1:]\n"
                '        logits = logits.masked_fill(logits < kth, float("-inf"))\n',
                "",
            ),
            (
                '        logits = logits.masked_fill(drop, float("-inf"))\n',
                '        logits = logits.masked_fill(drop, float("-inf"))\n'
                "    if sampling.top_k is not None and sampling.top_k < logits.shape[-1]:\n"
                "        kth = logits.topk(sampling.top_k, dim=-1).values[..., -1:]\n"
                '        logits = logits.masked_fill(logits < kth, float("-inf"))\n',
            ),
        ],
    ),
    "M6 bonus token drawn from the wrong row": (
        "specdec_lib/rejection.py",
        [
            (
                "        return list(range(k)), sample_token(p[k], generator)  # bonus token",
                "        return list(range(k)), sample_token(p[k - 1], generator)  # bonus token",
            )
        ],
    ),
    "M6b the sampler forgets that weights need not sum to 1 (u is not scaled by the total)": (
        "specdec_lib/autoregressive.py",
        [
            (
                "    token = int(torch.searchsorted(cdf, u * cdf[-1], right=True))",
                "    token = int(torch.searchsorted(cdf, u, right=True).clamp(max=len(probs) - 1))",
            )
        ],
    ),
    "M7 the engine's target distribution ignores top-k / top-p": (
        "specdec_lib/speculative.py",
        [
            (
                "    p = process_logits(out.logits, sampling)\n    path, nxt",
                "    p = process_logits(out.logits, SamplingParams(sampling.temperature))\n    path, nxt",
            )
        ],
    ),
    "N1 tree verification takes each residual from the node's first p, not the running P": (
        "specdec_lib/trees.py",
        [
            (
                "            P = residual(P, q)  # what q offered is used up",
                "            P = residual(p[node + 1], q)  # what q offered is used up",
            )
        ],
    ),
    "E1 EAGLE leaves the round's tree (guessed features) in the drafter's cache": (
        "specdec_lib/eagle.py",
        [
            (
                "        self.cache.crop(verdict.root)  # back to the positions fed with the target's own features",
                "        pass",
            )
        ],
    ),
    "E2 EAGLE pairs each feature with the token it read, not the token it chose": (
        "specdec_lib/eagle.py",
        [
            (
                "        h = self.drafter(self.unfed, tokens[start + 1 : n + 1], positions, self.cache)",
                "        h = self.drafter(self.unfed, tokens[start:n], positions, self.cache)",
            )
        ],
    ),
    "E3 EAGLE-2 scores each child slot by its own confidence, not the path's": (
        "specdec_lib/eagle2.py",
        [
            (
                "                scores += [scores[i] + s for s in kids[i].scores]",
                "                scores += [s for s in kids[i].scores]",
            )
        ],
    ),
    "E4 EAGLE-3's training-time test forgets to move RoPE by one position per step": (
        "specdec_lib/eagle3.py",
        [
            (
                "        q, k, v = drafter.qkv(h, ids[..., 1 + s : 1 + s + m], torch.arange(s, s + m, device=ids.device))",
                "        q, k, v = drafter.qkv(h, ids[..., 1 + s : 1 + s + m], torch.arange(m, device=ids.device))",
            )
        ],
    ),
    "E5 EAGLE-3's chain scores use the neighbouring position's keys (off by one)": (
        "specdec_lib/eagle3.py",
        [
            (
                "        chain = [(q * keys[t][..., :m, :]).sum(-1, keepdim=True) * scale for t in range(1, s + 1)]",
                "        chain = [(q * keys[t].roll(1, -2)[..., :m, :]).sum(-1, keepdim=True) * scale for t in range(1, s + 1)]",
            )
        ],
    ),
    "E6 EAGLE-3 puts draft id i on target id i (the offset map ignored)": (
        "specdec_lib/eagle3.py",
        [
            (
                "        full[..., self.used] = small",
                "        full[..., : small.shape[-1]] = small",
            )
        ],
    ),
    "D1 DFlash places the block one position too far (its context positions unchanged)": (
        "specdec_lib/dflash.py",
        [
            (
                "ids, torch.arange(n, n + self.pass_rows, device=dev)",
                "ids, torch.arange(n + 1, n + 1 + self.pass_rows, device=dev)",
            )
        ],
    ),
    "D2 DFlash drafts from block rows 0 .. k - 1 instead of 1 .. k": (
        "specdec_lib/dflash.py",
        [("return self.choose(h[1 : k + 1], tokens[-1])", "return self.choose(h[0:k], tokens[-1])")],
    ),
    "D3 DFlash's training mask lets a block see its anchor's own feature": (
        "specdec_lib/dflash.py",
        [
            (
                "torch.arange(length, device=anchors.device) < anchor_of_row[..., None]",
                "torch.arange(length, device=anchors.device) <= anchor_of_row[..., None]",
            )
        ],
    ),
    "D4 DFlash reports each row's q one row off": (
        "specdec_lib/dflash.py",
        [("None if self.sampling.greedy else q)", "None if self.sampling.greedy else q.roll(1, 0))")],
    ),
    "D5 DFlash shrinks the pass to a short chain's block, a block shape the drafter never trained on": (
        "specdec_lib/dflash.py",
        [
            (
                "pass_rows = max(self.block_size, drafter.block_size) if pass_rows is None else pass_rows",
                "pass_rows = self.block_size if pass_rows is None else pass_rows",
            )
        ],
    ),
    "S1 DFlash 2's greedy walk scores every row against the anchor, not the previous pick": (
        "specdec_lib/dflash2.py",
        [
            (
                "                a = int(cand[t, s.argmax()])",
                "                picks.append(int(cand[t, s.argmax()]))\n                continue",
            )
        ],
    ),
    "S2 DFlash 2's mixers read across block starts in training": (
        "specdec_lib/dflash2.py",
        [
            (
                "return torch.cat([torch.zeros_like(inside[..., :1]), inside], -1)",
                "return torch.cat([torch.zeros_like(inside[..., :1]), torch.ones_like(inside)], -1)",
            )
        ],
    ),
    "S3 DFlash 2's walk draws at temperature 1 but reports q at the requested temperature": (
        "specdec_lib/dflash2.py",
        [
            (
                "                a = sample_token(qs[-1], generator)",
                "                a = sample_token(process_logits(logits[t].scatter(-1, cand[t], s), SamplingParams(1.0)), generator)",
            )
        ],
    ),
    "N2 sequential MTP keeps one position too many in its module caches": (
        "specdec_lib/mtp.py",
        [
            (
                "                keep = min(len(cache), max(0, verdict.next_root - k))",
                "                keep = min(len(cache), max(0, verdict.next_root - k + 1))",
            )
        ],
    ),
    "C1 the target's cache is always cropped, never gathered (a tree's accepted branch keeps wrong keys)": (
        "specdec_lib/hf.py",
        [
            (
                "    if bool((slots == torch.arange(m, device=slots.device)).all()):",
                "    if True:",
            )
        ],
    ),
    "C2 the draft model keeps one position too many after a round": (
        "specdec_lib/speculative.py",
        [
            (
                "        self.runner.crop(self.cache, verdict.next_root)",
                "        self.runner.crop(self.cache, verdict.next_root + 1)",
            )
        ],
    ),
    "G1 prompt lookup copies after the earliest occurrence, not the latest": (
        "specdec_lib/ngram.py",
        [("                start = int(hits[-1]) + n", "                start = int(hits[0]) + n")],
    ),
}


# The code before a mutant's first space -> the tests that must catch it (pytest node ids, fastest first).
CATCHERS = {
    "M4a": (
        "tests/test_medusa_mtp.py::test_medusa_tree_holds_each_heads_ranked_guesses",
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[medusa:16-dynamic]",
    ),
    "M4b": (
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[mtp-independent-dynamic]",
    ),
    "M5a": (
        "tests/test_sampling_controls.py::test_top_k_and_top_p_both_cut_on_these_logits",
        "tests/test_engine_exact_sampling.py::test_top_k_and_top_p_both_cut_in_this_case",
    ),
    "M6": ("tests/test_engine.py::test_chain_verification_is_exactly_lossless[sampling0]",),
    "M6b": ("tests/test_engine.py::test_sample_token_draws_each_token_with_its_weight",),
    "M7": (
        "tests/test_engine_exact_sampling.py::test_the_engine_samples_three_tokens_exactly_like_the_target",
    ),
    "N1": (
        "tests/test_trees.py::test_tree_verification_is_exactly_lossless[T1-sample-2 children, each with a child]",
    ),
    "E1": (
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[eagle:8-dynamic]",
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[eagle2:8-dynamic]",
    ),
    "E2": (
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[eagle:8-dynamic]",
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[eagle2:8-dynamic]",
    ),
    "E3": ("tests/test_eagle.py::test_eagle2_tree_is_the_papers_tree[25-4-3]",),
    "E4": (
        "tests/test_eagle3.py::test_training_time_attention_equals_inference_position_by_position[llama]",
    ),
    "E5": (
        "tests/test_eagle3.py::test_training_time_attention_equals_inference_position_by_position[llama]",
    ),
    "E6": ("tests/test_eagle3.py::test_logits_live_on_target_ids_and_nothing_else_is_proposable",),
    "D1": (
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[dflash:8-dynamic]",
    ),
    "D2": (
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[dflash:8-dynamic]",
    ),
    "D3": ("tests/test_dflash.py::test_training_mask_by_its_rules",),
    "D4": (
        "tests/test_contract.py::test_sampling_is_exactly_the_targets_distribution[dflash:8-T=0.7 top-k 3 top-p 0.9]",
    ),
    "D5": ("tests/test_dflash.py::test_a_shorter_chain_runs_the_trained_block_and_keeps_its_first_rows",),
    "S1": (
        "tests/test_dflash2.py::test_greedy_walk_maximises_each_step_given_the_previous_pick",
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[dflash2:4-dynamic]",
    ),
    "S2": ("tests/test_dflash2.py::test_training_pass_equals_inference_block_by_block_with_mixing[llama]",),
    "S3": ("tests/test_dflash2.py::test_sampled_walk_reports_the_distribution_each_token_was_drawn_from",),
    "N2": (
        "tests/test_medusa_mtp.py::test_mtp_caches_match_teacher_forcing[mtp-sequential]",
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[mtp-sequential-dynamic]",
    ),
    "C1": (
        "tests/test_trees.py::test_caches_after_every_round_equal_a_fresh_prefill[topk]",
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[tree:2-2-1-dynamic]",
    ),
    "C2": (
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[chain:3-dynamic]",
    ),
    "G1": (
        "tests/test_contract.py::test_greedy_equals_autoregressive_drafts_are_fresh_and_caches_recompute[ngram:4-dynamic]",
    ),
}


def code(name: str) -> str:
    return name.split(" ", 1)[0]


def snapshot(dest: Path) -> Path:
    """A copy of the repository without its virtual environment, history and builds."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv", ".git", "_build", "__pycache__"))
    return dest


def apply(name: str, repo: Path) -> None:
    """Plant mutant `name` in the copy `repo` (each text must occur exactly once)."""
    path, edits = MUTANTS[name]
    source = (repo / path).read_text()
    for old, new in edits:
        if source.count(old) != 1:
            raise SystemExit(f"{name}: the text to replace is not in {path} exactly once: {old[:60]!r}")
        source = source.replace(old, new)
    (repo / path).write_text(source)


def pytest_run(repo: Path, tests) -> tuple[set[str], dict[str, float], str]:
    """Run `tests` in `repo`: (failed node ids, seconds per test, the last line)."""
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{repo / 'course'}", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-vv", "-rf", "-p", "no:cacheprovider", "--durations=0"]
    out = subprocess.run(cmd + list(tests), cwd=repo, capture_output=True, text=True, env=env).stdout
    failed = set(re.findall(r"^FAILED (.+?)(?: - .*)?$", out, re.M))
    seconds = {m[2].strip(): float(m[1]) for m in re.finditer(r"^([\d.]+)s call\s+(.+)$", out, re.M)}
    lines = out.strip().splitlines()
    return failed, seconds, lines[-1].strip("= ") if lines else ""


def run_mutated(name: str, clean: Path, tests) -> tuple[set[str], dict[str, float], str]:
    """`tests` on a fresh copy of `clean` with mutant `name` planted (pytest_run's results)."""
    with tempfile.TemporaryDirectory() as tmp:
        mutated = Path(tmp) / "repo"
        shutil.copytree(clean, mutated)
        apply(name, mutated)
        return pytest_run(mutated, tests)


def check_catchers(name: str, clean: Path) -> tuple[bool, str, float]:
    """Mutant `name` against its recorded catchers: (caught by all of them, a one-line report, seconds)."""
    catchers = CATCHERS.get(code(name), ())
    if not catchers:
        return False, "no catchers recorded (run --full and add them to CATCHERS)", 0.0
    t0 = time.perf_counter()
    failed, _, _ = run_mutated(name, clean, catchers)
    missed = [c for c in catchers if c not in failed]
    took = time.perf_counter() - t0
    if missed:
        return False, f"SURVIVED {', '.join(missed)}", took
    return True, "caught by " + ", ".join(catchers), took


def run_full(name: str, clean: Path) -> None:
    """The whole behavioural suite on mutant `name`: every catcher with its time (to record CATCHERS)."""
    t0 = time.perf_counter()
    failed, seconds, last = run_mutated(name, clean, BEHAVIOURAL)
    print(f"\n{name}: {last} (whole run {time.perf_counter() - t0:.0f} s)")
    for test in sorted(failed, key=lambda t: seconds.get(t, 0.0)):
        print(f"    caught by {test} ({seconds.get(test, 0.0):.2f} s)")
    if not failed:
        print("    NOT CAUGHT")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    full, check_only = "--full" in argv, "--check" in argv
    prefixes = [a for a in argv if not a.startswith("--")]
    chosen = [n for n in MUTANTS if not prefixes or any(n.startswith(a) for a in prefixes)]
    with tempfile.TemporaryDirectory() as tmp:  # one snapshot, so edits made meanwhile cannot leak in
        clean = snapshot(Path(tmp) / "snapshot")
        for name in chosen:  # every text first: a stale one fails in a second, not after an hour
            with tempfile.TemporaryDirectory() as t2:
                probe = Path(t2)
                for path in {MUTANTS[name][0]}:
                    (probe / path).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(clean / path, probe / path)
                apply(name, probe)
        if check_only:
            print(f"{len(chosen)} mutant texts match the library")
            return 0
        if full:
            for name in chosen:
                run_full(name, clean)
            return 0
        catchers = sorted({c for n in chosen for c in CATCHERS.get(code(n), ())})
        failed, _, last = pytest_run(clean, catchers) if catchers else (set(), {}, "")
        if failed:
            print(f"the clean library fails catchers {sorted(failed)}: fix those tests first ({last})")
            return 1
        bad = 0
        print(f"{'mutant':80s} {'s':>5s}  result")
        for name in chosen:
            ok, report, took = check_catchers(name, clean)
            bad += not ok
            print(f"{name[:80]:80s} {took:5.0f}  {report}", flush=True)
        print(f"{len(chosen) - bad} of {len(chosen)} mutants caught by their recorded catchers")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
