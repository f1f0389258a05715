"""Student notebooks and a student website, without solutions (hand-written support code for teachers).

    python -m specdec_lib.student [--out _build/student]   # the notebooks and a copy of the book sources
    python -m specdec_lib.student --check-site _build/student/_build/html   # does a built site leak?
    make student                                            # ... then builds the student website

Every exercise cell holds its reference solution between nbgrader's markers, so `nbgrader
generate_assignment` works on the notebooks as they are:

    def my_rerank(parents, logp, total):
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

This module does the same without nbgrader. A region inside a function body becomes `# your code here`
and `raise NotImplementedError`; a region at the top level (answers that are values) becomes
`name = ...  # your answer` for each name it assigns. Markdown cells tagged `solution` (why a solution
works) are dropped, and exercise cells lose the `hide-input` tag that folds the solution away on the
full website. The checkers stay, so a student notebook runs and reports "not attempted" everywhere.

The student site has no Colab launch button and the student notebooks no "Open in Colab" badge: both would
open the full notebooks of the repository, solutions included. (The copied landing and setup pages still
describe them; a teacher who wants Colab for students hosts the student notebooks and links to them.)
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
# The badge under a chapter's title (with the blank line after it), and the site's Colab launch button.
COLAB_BADGE = re.compile(r"^\[!\[Open in Colab\]\([^)]*\)\]\([^)]*\)\n\n?", re.M)
COLAB_LAUNCH = re.compile(r"^([ \t]+colab_url:.*\n)", re.M)
ASSIGNED = re.compile(r"^(\w+)\s*=")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def solution_regions(source: str) -> list[list[str]]:
    """The lines between each pair of markers in a cell's source (markers excluded)."""
    regions, current = [], None
    for line in source.split("\n"):
        if line.strip() == BEGIN:
            if current is not None:
                raise ValueError("nested ### BEGIN SOLUTION")
            current = []
        elif line.strip() == END:
            if current is None:
                raise ValueError("### END SOLUTION without a BEGIN")
            regions.append(current)
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        raise ValueError("### BEGIN SOLUTION without an END")
    return regions


def strip_solutions(source: str) -> str:
    """The cell's source with every solution region replaced by a stub (see the module docstring)."""
    solution_regions(source)  # refuse unbalanced markers
    out, inside = [], False
    for line in source.split("\n"):
        if line.strip() == BEGIN:
            inside, indent, names = True, line[: len(line) - len(line.lstrip())], []
            continue
        if line.strip() == END:
            inside = False
            if indent:
                out += [f"{indent}# your code here", f"{indent}raise NotImplementedError"]
            else:
                out += [f"{name} = ...  # your answer" for name in names] or ["# your code here"]
            continue
        if inside:
            m = ASSIGNED.match(line)
            if m and not indent and m.group(1) not in names:
                names.append(m.group(1))
            continue
        out.append(line)
    return "\n".join(out)


def student_notebook(nb: dict) -> dict:
    """A copy of a chapter notebook for students: stubs instead of solutions, no solution notes."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if "solution" in tags:
            continue
        if cell["cell_type"] == "markdown" and COLAB_BADGE.search(_source(cell)):
            cell["source"] = _lines(COLAB_BADGE.sub("", _source(cell)))
        if cell["cell_type"] == "code" and BEGIN in _source(cell):
            cell["source"] = _lines(strip_solutions(_source(cell)))
            cell["metadata"]["tags"] = [t for t in tags if t != "hide-input"]
            if not cell["metadata"]["tags"]:
                del cell["metadata"]["tags"]
        cells.append(cell)
    nb["cells"] = cells
    return nb


def solution_witnesses(nb: dict) -> list[str]:
    """For every solution region of a notebook, its first line (stripped, 8+ characters) that appears
    nowhere else in the notebook: a page showing it shows the solution (generic lines such as
    `score = []` could come from the chapter's own code)."""
    regions, rest = [], []
    for cell in nb["cells"]:
        src = _source(cell)
        if cell["cell_type"] == "code" and BEGIN in src:
            regions += solution_regions(src)
            rest.append(strip_solutions(src))
        elif "solution" not in cell.get("metadata", {}).get("tags", []):
            rest.append(src)
    elsewhere = "\n".join(rest)
    witnesses = []
    for region in regions:
        unique = [ln.strip() for ln in region if len(ln.strip()) >= 8 and ln.strip() not in elsewhere]
        if unique:
            witnesses.append(unique[0])
    return witnesses


def page_text(html: str) -> str:
    """The text a browser shows of a built page: tags removed (syntax highlighting splits code into many
    spans), entities decoded."""
    import html as html_lib

    text = re.sub(r"<script\b.*?</script>|<style\b.*?</style>", " ", html, flags=re.S)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", text))


def site_leaks(html_dir: Path, nb_dir: Path = ROOT / "notebooks") -> list[str]:
    """Solution lines of the chapters (the full notebooks) that a built site still shows, per page."""
    leaks = []
    for path in sorted(Path(nb_dir).glob("[0-9][0-9]_*.ipynb")):
        page = Path(html_dir) / "notebooks" / f"{path.stem}.html"
        if not page.exists():
            leaks.append(f"{page}: missing (was the site built?)")
            continue
        text = page_text(page.read_text(encoding="utf-8"))
        leaks += [
            f"{page.name}: {line}"
            for line in solution_witnesses(json.loads(path.read_text()))
            if line in text
        ]
    return leaks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "student")
    ap.add_argument(
        "--check-site",
        type=Path,
        metavar="HTML_DIR",
        help="exit 1 if the built site in HTML_DIR shows any solution",
    )
    args = ap.parse_args(argv)
    if args.check_site:
        leaks = site_leaks(args.check_site)
        for leak in leaks:
            print(f"solution visible: {leak}", file=sys.stderr)
        if not leaks:
            print(f"no solution text in the pages of {args.check_site}")
        return 1 if leaks else 0
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "_toc.yml", out / "_toc.yml")
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    if not COLAB_LAUNCH.search(config):
        raise ValueError("_config.yml: launch_buttons has no colab_url line to remove for the student site")
    (out / "_config.yml").write_text(COLAB_LAUNCH.sub("", config), encoding="utf-8")
    shutil.copytree(ROOT / "book", out / "book")
    count = 0
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = student_notebook(json.loads(path.read_text()))
        (out / "notebooks" / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        count += 1
    print(f"{count} student notebooks (solutions removed) and the book sources in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
