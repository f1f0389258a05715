"""Where the benchmark's reports live and what they are called (hand-written plumbing, not a chapter).

The harness (`specdec_lib.bench`) writes them and chapter 12 (`specdec_lib.recap`) reads them: both ask
this module, so neither imports the other for a file name.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
COMMITTED = PACKAGE.parent / "book" / "data"  # the repository's reports (`bench --out book/data`)
PACKAGED = PACKAGE / "data" / "reports"  # an installed package's copy (pip, the student build)


def report_stem(preset: str) -> str:
    """The report's file name without suffix: bench for the tiny zoo, bench-PRESET for another preset."""
    return "bench" if preset == "tiny-code" else f"bench-{preset}"


def report_path(stem: str) -> Path:
    """The committed report `stem`.json: the repository's book/data copy, else the installed package's."""
    path = COMMITTED / f"{stem}.json"
    return path if path.exists() else PACKAGED / path.name
