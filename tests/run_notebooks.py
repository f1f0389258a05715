"""Run every chapter under nbval, JOBS at a time (`make nbval`), and print each chapter's result and time.

The chapters set torch to one thread (tiny models), so one notebook keeps one core busy: on a 2-core
machine two at a time take about half the time of one after the other. The later, slower chapters go
first so that a short one fills the last gap. A chapter's log is printed whole when it ends, never
interleaved with another's.

    python tests/run_notebooks.py [--jobs 2] [notebooks/05_medusa.ipynb ...]
"""

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Offline, quiet, the repo on the path, and the fake CUDA of tests/fake_cuda: torch.cuda.is_available() is
# True and any real CUDA use fails, so a chapter that moves things to CUDA just because it exists fails
# here, not on a learner's Colab. No MPLBACKEND=Agg: the inline backend keeps the book's figures.
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "PYTHONPATH": os.pathsep.join(map(str, (ROOT, ROOT / "course", ROOT / "tests" / "fake_cuda"))),
}


def run(notebook: Path) -> tuple[Path, bool, float, str]:
    """One chapter under nbval in its own pytest process: (notebook, passed, seconds, its output)."""
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
           "--nbval-current-env", "--nbval-cell-timeout=300", str(notebook)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **ENV}, capture_output=True, text=True)
    return notebook, done.returncode == 0, time.monotonic() - t0, done.stdout + done.stderr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/NN_*.ipynb")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 2)))
    args = ap.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    if not notebooks:
        print("nbval: no notebooks in notebooks/, nothing to run")
        return 0
    t0, failed = time.monotonic(), []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for done in as_completed([pool.submit(run, nb) for nb in sorted(notebooks, reverse=True)]):
            notebook, ok, seconds, log = done.result()
            name = notebook.name
            if not ok:
                failed.append(name)
                print(log, end="")
            print(f"nbval: {name} {'passed' if ok else 'FAILED'} in {seconds:.0f} s", flush=True)
    print(f"nbval: {len(notebooks)} notebooks, {args.jobs} at a time, in {time.monotonic() - t0:.0f} s")
    if failed:
        print("nbval: failed: " + " ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
