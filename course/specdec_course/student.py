"""Student notebooks and a student website, without solutions (hand-written support code for teachers).

    python -m specdec_course.student [--out _build/student]   # the notebooks and a copy of the book sources
    python -m specdec_course.student --sync                    # after editing an exercise: its learner's cell
    python -m specdec_course.student --check-site _build/student/_build/html   # does a built site leak?
    make student                                            # ... then builds the student website

Every exercise has two cells in the chapters. The learner's cell comes first: the stub to replace and the
checker call. The reference solution follows in a folded cell (`split_exercise` makes the pair): its
source is hidden in JupyterLab and Jupyter Notebook (cell metadata `jupyter.source_hidden`), in Colab (a
`# @title` first line with `cellView: form`) and on the website (tag `hide-input`), so a learner sees it
only by choosing to open it. The reference holds its solution between nbgrader's markers, so `nbgrader
generate_assignment` works on the notebooks as they are:

    def my_rerank(parents, logp, total):
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

The learner's cell is exactly that cell's stub (`strip_solutions`; a test keeps the two in step), and
a student notebook is the chapter without the reference cells (the stub inherits their nbgrader
metadata). The stub rule: A region inside a function body becomes `# your code here`
and `raise NotImplementedError`; a region at the top level (answers that are values) becomes
`name = ...  # your answer` for each name it assigns. Markdown cells tagged `solution` (why a solution
works) are dropped, and exercise cells lose the `hide-input` tag that folds the solution away on the
full website. The checkers stay, so a student notebook runs and reports "not attempted" everywhere.

The student site has no Colab launch button and the student notebooks no "Open in Colab" badge: both would
open the full notebooks of the repository, solutions included. On Colab, the student notebooks' first cell
pip-installs the packages (`--package`, once per package: a wheel's URL; by default the library and the course
kit, built by pip from the repository in a temporary folder) instead of cloning the repository. (The copied landing and setup pages still
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

ROOT = Path(__file__).resolve().parents[2]  # the clone: course/specdec_course/ -> ../..
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
# The badge under a chapter's title (with the blank line after it), and the site's Colab launch button.
COLAB_BADGE = re.compile(r"^\[!\[Open in Colab\]\([^)]*\)\]\([^)]*\)\n\n?", re.M)
COLAB_LAUNCH = re.compile(r"^([ \t]+colab_url:.*\n)", re.M)
ASSIGNED = re.compile(r"^(\w+)\s*=")
# The learner's cell of an exercise, and the folded reference solution after it.
EXERCISE_TAG, REFERENCE_TAG = "exercise", "reference"
REFERENCE_TITLE = "# @title Reference solution: open it once you have tried (your cell is the one above)"


# What the student notebooks pip-install on Colab: the library (its models and reports) and the course kit
# (the checkers), built from the repository, never a clone of it with its solutions and teacher/.
def student_packages() -> tuple[str, ...]:
    from specdec_lib._export import BRANCH, REPO_URL

    return (
        f"specdec_lib @ git+{REPO_URL}@{BRANCH}",
        f"specdec_course @ git+{REPO_URL}@{BRANCH}#subdirectory=course",
    )


def student_bootstrap(packages: tuple[str, ...] | None = None) -> str:
    """The bootstrap cell of the student notebooks: on Colab, `pip install *packages` (wheels' URLs, or
    the default: pip builds the library and the course kit from the repository in a temporary folder and
    keeps only them)."""
    from specdec_lib._export import BOOTSTRAP_CELL

    packages = tuple(packages or student_packages())
    start = 'if _root is None and "google.colab" in sys.modules:\n'
    colab = BOOTSTRAP_CELL[
        BOOTSTRAP_CELL.index(start) + len(start) : BOOTSTRAP_CELL.index("\nif _root is None:  #")
    ]
    install = f"""\
    import importlib.util
    if any(importlib.util.find_spec(m) is None for m in ("specdec_lib", "specdec_course")):
        # the packages only (the library, its models and reports; the checkers), never the repository's
        # solutions; and never a new torch: the constraint keeps the runtime's own CUDA build
        from importlib.metadata import version
        Path("/tmp/specdec-keep-torch.txt").write_text(f"torch=={{version('torch')}}\\n")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", "/tmp/specdec-keep-torch.txt", *{list(packages)!r}], check=True)
        importlib.invalidate_caches()
    _root = None"""
    cell = BOOTSTRAP_CELL.replace(colab, install)
    return cell.replace("# specdec bootstrap: ", "# specdec bootstrap (student notebooks): ", 1)


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


def is_reference(cell) -> bool:
    return REFERENCE_TAG in cell.get("metadata", {}).get("tags", [])


def reference_source(cell) -> str:
    """A reference cell's source without its Colab title line (what the stub is made from)."""
    src = _source(cell)
    return src.split("\n", 1)[1] if src.startswith(REFERENCE_TITLE) else src


def split_exercise(cell: dict) -> list[dict]:
    """An exercise cell (its reference solution between the markers) as the learner's cell, holding the
    stub and the checker call, followed by the reference cell, folded in Jupyter, Colab and on the site."""
    if cell["cell_type"] != "code" or BEGIN not in _source(cell) or is_reference(cell):
        return [cell]
    learner = {
        "cell_type": "code",
        "execution_count": None,
        "id": f"{cell['id']}-try",
        "metadata": {"tags": [EXERCISE_TAG]},
        "outputs": [],
        "source": _lines(strip_solutions(_source(cell))),
    }
    reference = copy.deepcopy(cell)
    meta = reference["metadata"]
    tags = [t for t in meta.get("tags", []) if t not in ("hide-input", REFERENCE_TAG)]
    meta["tags"] = [*tags, "hide-input", REFERENCE_TAG]  # hide-input: folded on the website
    meta["jupyter"] = {**meta.get("jupyter", {}), "source_hidden": True}  # JupyterLab, Notebook 7
    meta["cellView"] = "form"  # Colab: with the @title line, shows the title and hides the code
    reference["source"] = _lines(f"{REFERENCE_TITLE}\n{_source(cell)}")
    return [learner, reference]


def sync_exercises(nb: dict) -> dict:
    """The notebook with every exercise as its (learner, reference) pair: a new exercise cell is split,
    and each learner's cell is rewritten as the stub of the reference after it (edit the reference, then
    run `python -m specdec_course.student --sync`)."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb["cells"]:
        if is_reference(cell) and cells and EXERCISE_TAG in cells[-1]["metadata"].get("tags", []):
            cells[-1]["source"] = _lines(strip_solutions(reference_source(cell)))
            cells.append(cell)
        else:
            cells += split_exercise(cell)
    nb["cells"] = cells
    return nb


def student_notebook(nb: dict, packages: tuple[str, ...] | None = None) -> dict:
    """A copy of a chapter notebook for students: stubs instead of solutions, no solution notes, and a
    bootstrap that on Colab pip-installs `packages` (default: the library and the course kit from the
    repository) instead of cloning the repository."""
    from specdec_lib import _export

    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and _source(cell).rstrip("\n") == _export.BOOTSTRAP_CELL:
            cell["source"] = _lines(student_bootstrap(packages))
        tags = cell.get("metadata", {}).get("tags", [])
        if is_reference(cell):  # the learner's cell before it is its stub: it takes the nbgrader metadata
            if not cells or EXERCISE_TAG not in cells[-1]["metadata"].get("tags", []):
                raise ValueError(f"reference cell {cell.get('id')} does not follow its exercise cell")
            cells[-1]["metadata"]["nbgrader"] = cell["metadata"]["nbgrader"]
            continue
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
    ap.add_argument(
        "--package",
        action="append",
        help="what the student notebooks pip-install on Colab, once per package: a wheel's URL or a pip "
        "requirement (default: the library and the course kit from the repository, built by pip in a "
        "temporary folder)",
    )
    ap.add_argument(
        "--sync",
        action="store_true",
        help="split new exercise cells into the learner's cell and a folded reference, and rewrite every "
        "learner's cell as the stub of its reference (in notebooks/, in place)",
    )
    args = ap.parse_args(argv)
    if args.sync:
        for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
            text = path.read_text(encoding="utf-8")
            new = json.dumps(sync_exercises(json.loads(text)), indent=1, ensure_ascii=False) + "\n"
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(f"synced {path.name}")
        return 0
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
        nb = student_notebook(json.loads(path.read_text()), args.package)
        (out / "notebooks" / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        count += 1
    print(f"{count} student notebooks (solutions removed) and the book sources in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
