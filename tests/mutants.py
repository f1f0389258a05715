"""Do the tests have teeth? Plant one known bug at a time in a scratch copy of the library, run the
behavioural tests there, and report which tests catch it (a development tool, not collected by pytest).

    python tests/mutants.py            # every mutant (about 40 s each on 2 cores)
    python tests/mutants.py M6 N1      # the ones whose name starts with these

Each mutant is a plausible slip, most of them *lossless* ones that greedy equality cannot see. A new
method or a fixed bug should add its mutant here; every mutant must be caught by a fast test.
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
                "        self.cache.crop(len(tokens) - len(verdict.tokens) - 1)",
                "        pass",
            )
        ],
    ),
    "E2 EAGLE pairs each feature with the token it read, not the token it chose": (
        "specdec_lib/eagle.py",
        [
            (
                "        h = self.drafter(self.f, tokens[start + 1 : n + 1], positions, self.cache)",
                "        h = self.drafter(self.f, tokens[start:n], positions, self.cache)",
            )
        ],
    ),
    "E3 EAGLE-2 picks its frontier by each child's own confidence, not the path's": (
        "specdec_lib/eagle2.py",
        [
            (
                "            frontier = [first + int(j) for j in cumulative.flatten().topk(k).indices]",
                "            frontier = [first + int(j) for j in child.values.flatten().topk(k).indices]",
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
                "ids, torch.arange(n, n + self.block_size, device=dev)",
                "ids, torch.arange(n + 1, n + 1 + self.block_size, device=dev)",
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
                "                keep = min(len(cache), max(0, pending - k))",
                "                keep = min(len(cache), max(0, pending - k + 1))",
            )
        ],
    ),
}


def run(name: str, path: str, edits, snapshot: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "repo"
        shutil.copytree(snapshot, scratch)
        source = (scratch / path).read_text()
        for old, new in edits:
            if source.count(old) != 1:
                raise SystemExit(f"{name}: the text to replace is not in {path} exactly once: {old[:60]!r}")
            source = source.replace(old, new)
        (scratch / path).write_text(source)
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(scratch), "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-m", "pytest", "-q", "-vv", "-rf", "-p", "no:cacheprovider", "--durations=0"]
        out = subprocess.run(cmd + BEHAVIOURAL, cwd=scratch, capture_output=True, text=True, env=env).stdout
    failed = sorted(set(re.findall(r"^FAILED (.+?)(?: - .*)?$", out, re.M)))
    seconds = {m[2].strip(): float(m[1]) for m in re.finditer(r"^([\d.]+)s call\s+(.+)$", out, re.M)}
    print(
        f"\n{name}: {out.strip().splitlines()[-1].strip('= ')} (whole run {time.perf_counter() - t0:.0f} s)"
    )
    for test in failed:
        print(f"    caught by {test} ({seconds.get(test, 0.0):.2f} s)")
    if not failed:
        print("    NOT CAUGHT")
    sys.stdout.flush()


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:  # one snapshot, so edits made meanwhile cannot leak in
        snapshot = Path(tmp) / "snapshot"
        shutil.copytree(
            ROOT, snapshot, ignore=shutil.ignore_patterns(".venv", ".git", "_build", "__pycache__")
        )
        for name, (path, edits) in MUTANTS.items():
            if not argv or any(name.startswith(a) for a in argv):
                run(name, path, edits, snapshot)


if __name__ == "__main__":
    main(sys.argv[1:])
