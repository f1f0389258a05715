"""Grade exercise notebooks (hand-written support code for teachers).

    python -m specdec_lib.grade SUBMISSION.ipynb [MORE.ipynb ...] [--timeout 300] [--json grades.json]

Each submission is executed offline, top to bottom, in a fresh kernel started at the repository root
(where the notebooks' first cell finds `specdec_lib`), with a per-cell timeout; a cell that raises does
not stop the run. Every code cell that calls a checker (`check_...(`) is one exercise, graded by what the
checker printed: correct, incorrect (with its hint) or not attempted. A cell that raised before its
checker could report is "incorrect" with the exception; a notebook that cannot be read, or whose kernel
dies or times out, marks its remaining exercises "incorrect" with the reason. The grader itself never
crashes on a submission: it prints one table per submission and, with --json, writes every verdict.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK_CALL = re.compile(r"^(check_\w+)\s*\(", re.M)
VERDICT = re.compile(
    r"^(?:✅|❌|⏳) (?P<title>.+?): (?P<verdict>correct|incorrect|not attempted)(?: — (?P<detail>.*))?$"
)
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


def _text(outputs, name="stdout") -> str:
    return "".join(
        o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == name
    )


def _error(outputs) -> str | None:
    for o in outputs:
        if o.get("output_type") == "error":
            return f"{o.get('ename', 'Error')}: {o.get('evalue', '')}".strip()
    return None


def checkers_imported(nb) -> set[str]:
    """The names a notebook imports from `specdec_lib.checks` (its exercise checkers)."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # a half-written cell, or IPython syntax: it imports nothing we can see
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specdec_lib.checks"):
                names |= {alias.asname or alias.name for alias in node.names}
    return names


def exercises_of(nb) -> list[tuple[int, str]]:
    """(cell index, checker name) of every code cell that calls an imported checker at the top level
    (a line that starts with `check_...(`); library helpers such as `self.check_vocab(...)` do not count,
    nor do the chapters' folded reference-solution cells (tag "reference"): a full notebook handed in is
    graded on the learner's own cells."""
    imported = checkers_imported(nb)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "reference" not in cell.get("metadata", {}).get("tags", []):
            found = [name for name in CHECK_CALL.findall(cell.source) if not imported or name in imported]
            if found:
                out.append((i, found[-1]))
    return out


def verdicts_of(nb, stopped: str | None = None) -> list[dict]:
    """One verdict per exercise cell of an executed notebook. `stopped`: why execution ended early."""
    rows = []
    for i, checker in exercises_of(nb):
        outputs = nb.cells[i].get("outputs", [])
        printed = [VERDICT.match(line) for line in _text(outputs).splitlines()]
        printed = [m for m in printed if m]
        error = _error(outputs)
        if printed:
            m = printed[-1]
            row = {"verdict": m["verdict"], "title": m["title"], "detail": m["detail"] or ""}
        elif error:
            row = {"verdict": "incorrect", "title": checker, "detail": f"the cell raised {error}"}
        else:
            reason = stopped or "the checker printed no verdict (was the call removed?)"
            row = {"verdict": "incorrect", "title": checker, "detail": reason}
        rows.append({"cell": i, "checker": checker, **row})
    return rows


def grade(path: Path, timeout: int = 300) -> dict:
    """Execute one submission and return {"submission", "exercises": [...], "correct", "total", "error"}."""
    import nbformat
    from nbclient import NotebookClient

    result = {"submission": str(path), "exercises": [], "correct": 0, "total": 0, "error": None}
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as e:  # not a notebook, or broken JSON
        result["error"] = f"cannot read the notebook: {type(e).__name__}: {e}"
        return result
    for cell in nb.cells:  # grade what the submission computes, not what it was saved with
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    stopped = None
    env_before = dict(os.environ)
    os.environ.update(OFFLINE)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(ROOT)}},
        )
        client.execute()
    except Exception as e:  # a timeout or a dead kernel: grade what ran, the rest is incorrect
        stopped = f"the notebook stopped before this cell ran: {type(e).__name__}: {str(e).strip()[:200]}"
        result["error"] = stopped
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    result["exercises"] = verdicts_of(nb, stopped)
    result["total"] = len(result["exercises"])
    result["correct"] = sum(r["verdict"] == "correct" for r in result["exercises"])
    return result


def table(result: dict) -> str:
    lines = [f"{result['submission']}: {result['correct']}/{result['total']} correct"]
    if result["error"]:
        lines.append(f"  note: {result['error']}")
    for r in result["exercises"]:
        detail = f" — {r['detail']}" if r["detail"] else ""
        lines.append(f"  {r['checker']:28s} {r['verdict']:14s} {r['title']}{detail}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    ap.add_argument("--json", type=Path, default=None, help="also write every verdict to this file")
    args = ap.parse_args(argv)
    results = []
    for path in args.submissions:
        results.append(grade(path, args.timeout))
        print(table(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
