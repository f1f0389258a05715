"""Every measured speedup, tau and round cost the chapters' prose quotes agrees with the data it comes from.

A number in a notebook's Markdown that reads as a speedup (``1.32×``), a tau (``τ ≈ 6.5``) or a round's
cost in plain steps (``$kc = 2.19$``, ``$V \approx 0.8$``, chapter 02's model) must be
followed by a hidden source note, an HTML comment that Jupyter, Colab and the website all leave invisible:

    <!-- claim: bench T=0 eagle3:16 speedup -->        book/data/bench.json, results["0"]["eagle3:16"]["speedup"]
    <!-- claim: bench T=1 eagle:16 acceptance_by_position/0 -->
    <!-- claim: card eagle3 experiments/results/eagle3:9/tau -->   specdec_lib/models/tiny-code/eagle3/card.json
    <!-- claim: bench@smollm2-135m T=0 eagle3:16 tau -->  a real preset's report, book/data/bench-smollm2-135m.json
    <!-- claim: bench@compiled T=0 eagle3:16@compiled kc -->  the eager/compiled run, book/data/bench-compiled.json
    <!-- claim: card@smollm2-135m eagle3 validation/tau -->    specdec_lib/models/smollm2-135m/eagle3/card.json
    <!-- claim: paper -->      a published figure: the same Markdown cell cites it ({cite:p} / {cite:t})
    <!-- claim: formula -->    arithmetic on numbers the text states, or a modelling assumption ($V = 0$)

A bench or card claim is checked: the data value, rounded to the quote's decimals, must read as the quote.
So re-running the benchmark or retraining a drafter fails this test until the prose says what the new
data says. Measurements a chapter makes itself are printed by its cells, never typed into its prose.

Comparisons and durations are data too. A sentence that ranks or compares ("fastest", "faster", "slower",
"beats", "as fast as", "about matches", "highest", "ahead of", ...) or states how long something took
("half an hour", "25 minutes") carries a note saying what it rests on:

    <!-- compare: bench T=0 dflash:16 speedup > bench T=0 eagle3:16 speedup -->   each side: a claim's
                                    reference (bench/card, any preset) or a number; < > <= >= or ~ (within 5%)
    <!-- compare: top bench T=0 dflash2:16+selector speedup -->   the largest of its sampling's rows
                                    (ours: not ar or ar@compiled, not transformers' hf peers); bottom: the smallest
    <!-- compare: all bench T=0.7:0.9 * speedup < 1 -->   every one of those rows against the other side
    <!-- compare: card dflash wall_minutes ~ 30 -->       a duration: the card's minutes, within 5%
    <!-- compare: concept -->   no measured data: a rule, a definition, a hypothetical, a design choice
    <!-- compare: paper -->     a published comparison: the same cell cites it

A duration may instead be a claimed number ("46.5 min<!-- claim: card dflash wall_minutes -->"). The run-time
line at the top of a chapter is an estimate for the learner, not a measurement, and needs no note.

    python tests/test_claims.py        # the list of quotes checked, with counts per chapter
    python tests/test_claims.py --fix  # after a re-run: rewrite contradicted numbers, then review the diff
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "book" / "data" / "bench.json"
CARDS = ROOT / "specdec_lib" / "models" / "tiny-code"
PRESET = "tiny-code"  # the zoo preset the committed bench.json and the cards above belong to
NUMBER = r"(\d+(?:\.\d+)?)"
# A speedup: a number with × (or x) right after it, not a product such as 8×256, 0.1 × CE or 2 × `n`.
SPEEDUP = re.compile(rf"(?<![\w.]){NUMBER}(?:×|x\b)(?!\s*\d)")
# A tau: τ (or $\tau$) then a number, unless a formula goes on after it ($\tau = 1 + \alpha_1$).
TAU = re.compile(
    rf"(?:τ|\\tau)\$?\s*(?:=|≈|\\approx|~|of|is|at|rises to|falls to|reaches)?\s*\$?\s*{NUMBER}"
    r"(?!\s*(?:[-+−*/^]|\\cdot|\\times|\\frac))"
)
# A round's costs in plain decoding steps (chapter 02's model): $kc = 2.19$, $V \approx 0.8$.
COST = re.compile(
    rf"(?:\bkc\b|(?<![\w\\])V\b)\$?\s*(?:=|≈|\\approx)\s*\$?\s*{NUMBER}(?![\d.])(?!\s*(?:[-+−*/^]|\\cdot))"
)
CLAIM = re.compile(r"\s*[$*_)\]]*\s*<!--\s*claim:\s*(.*?)\s*-->")
NOTE = re.compile(r"<!--\s*claim:\s*(.*?)\s*-->")
NUMBER_BEFORE = re.compile(rf"{NUMBER}(?:×|x)?\s*[$*_)\]]*\s*\Z")  # the number a source note follows
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")  # `best_k(alpha, c, V=0.0)`, `eagle3:12-4`: code, not quotes


# What makes a sentence a comparison or a duration (the detector; see the docstring).
COMPARISON = re.compile(
    r"\b(?:fastest|faster|slower|slowest|quicker|beats?|outperforms?|as fast|(?:about|roughly|nearly|almost) "
    r"match(?:es)?|(?:highest|lowest)(?= (?:\$?\\tau|τ|speed|of\b|acceptance))|ahead of)\b",
    re.I,
)
DURATION = re.compile(
    r"\b(?:half an hour|an hour|\d+(?:\.\d+)?\s*(?:minutes?|min|hours?|seconds?)|(?:a few|few|two|several) "
    r"(?:minutes|hours))\b",
    re.I,
)
COMPARE = re.compile(r"<!--\s*compare:\s*(.*?)\s*-->")
# A sentence, a bullet or a paragraph: the unit a note must sit in.
UNIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z*$(\[])|\n\s*\n|\n(?=\s*(?:[-*]|\d+\.)\s)")
RUN_TIME = re.compile(r"^\s*\*\*(?:Run|Reading) time:\*\*")
RELATION = re.compile(r"^(.*?)\s+(<=|>=|<|>|~)\s+(.*)$")


def notebooks():
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def quotes(path: Path):
    """(chapter, cell index, quoted number, kind, claim or None, cell text) for every quote in the prose."""
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = CODE_SPAN.sub("", FENCE.sub("", "".join(cell["source"])))
        found = [(m, "speedup") for m in SPEEDUP.finditer(text)] + [(m, "tau") for m in TAU.finditer(text)]
        found += [(m, "cost") for m in COST.finditer(text)]
        for m, kind in sorted(found, key=lambda f: f[0].start()):
            claim = CLAIM.match(text, m.end())
            yield path.name[:2], i, m.group(1), kind, claim.group(1) if claim else None, text
        # Any other number with a source note is checked too ("2.86<!-- claim: card ... -->" with no τ before it)
        seen = {m.start(1) for m, _ in found}
        for note in NOTE.finditer(text):
            before = NUMBER_BEFORE.search(text, 0, note.start())
            if before and before.start(1) not in seen:
                yield path.name[:2], i, before.group(1), "claimed", note.group(1), text


def _walk(data, path: str):
    for key in path.split("/"):
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


def resolve(claim: str):
    """The data value a bench or card claim names (KeyError/IndexError when it names nothing)."""
    kind, *rest = claim.split()
    kind, _, preset = kind.partition("@")  # bench@smollm2-135m: a real preset's report and cards
    if kind == "bench":
        temperature, method, field = rest
        if not temperature.startswith("T="):
            raise KeyError(f"bench claims name a temperature as T=0 or T=1, got {temperature!r}")
        path = BENCH if preset in ("", PRESET) else BENCH.with_name(f"bench-{preset}.json")
        results = json.loads(path.read_text())["results"]
        return _walk(results[temperature[2:]][method], field)
    if kind == "card":
        name, field = rest
        cards = CARDS if preset in ("", PRESET) else CARDS.with_name(preset)
        return _walk(json.loads((cards / name / "card.json").read_text()), field)
    raise KeyError(f"unknown claim kind {kind!r}")


def problem(number: str, claim: str | None, text: str) -> str | None:
    """Why a quote fails, or None."""
    if claim is None:
        return "no <!-- claim: ... --> note after it (see this file's docstring)"
    kind = claim.split()[0]
    if kind == "paper":
        return None if "{cite:" in text else "a paper's figure, but the cell cites no paper"
    if kind == "formula":
        return None
    try:
        value = float(resolve(claim))
    except (KeyError, IndexError, ValueError, TypeError, FileNotFoundError) as e:
        return f"claim {claim!r} names no number in the data ({type(e).__name__}: {e})"
    decimals = len(number.split(".")[1]) if "." in number else 0
    shown = f"{value:.{decimals}f}"
    return None if shown == number else f"the data says {shown} ({value:.4f}), the prose {number}"


def comparisons(path: Path):
    """(chapter, cell index, the sentence, its compare note or None, cell text) for every sentence of the
    prose that compares, ranks or states a duration."""
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = FENCE.sub("", "".join(cell["source"]))
        for unit in UNIT.split(text):
            plain = NOTE.sub("", COMPARE.sub("", CODE_SPAN.sub("", unit)))
            if RUN_TIME.match(unit) or not (COMPARISON.search(plain) or DURATION.search(plain)):
                continue
            notes = COMPARE.findall(unit)
            if not notes and DURATION.search(plain) and not COMPARISON.search(plain) and NOTE.search(unit):
                notes = ["claimed"]  # a duration given as a claimed number: the quotes test checks it
            for note in notes or [None]:
                yield path.name[:2], i, " ".join(unit.split()), note, text


def code_cells(path: Path) -> dict:
    """{cell id: source} of a notebook's code cells (a `compare: cell ID` note names one that asserts)."""
    nb = json.loads(path.read_text())
    return {c.get("id"): "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"}


CODE = {path.name[:2]: code_cells(path) for path in notebooks()}


def _values(ref: str) -> dict:
    """{row: value} for a reference with * in its method slot, else {"": value} (a number or one datum)."""
    try:
        return {"": float(ref)}
    except ValueError:
        pass
    words = ref.split()
    if words[0].split("@")[0] == "bench" and len(words) == 4 and words[2] == "*":
        kind, _, preset = words[0].partition("@")
        path = BENCH if preset in ("", PRESET) else BENCH.with_name(f"bench-{preset}.json")
        rows = json.loads(path.read_text())["results"][words[1][2:]]
        return {  # ours: not plain decoding (ar, ar@compiled), not transformers' peers
            m: float(_walk(r, words[3])) for m, r in rows.items() if not m.startswith(("ar", "hf"))
        }
    value = resolve(ref)
    if isinstance(value, list):  # a card's per-depth list: compared position by position
        return {f"[{i}]": float(v) for i, v in enumerate(value) if v is not None}
    return {"": float(value)}


def compare_problem(note: str | None, text: str, cells: dict | None = None) -> str | None:
    """Why a comparison's note fails, or None. `cells`: the notebook's code cells by id (for `cell ID`)."""
    if note is None:
        return "a comparison or a duration with no <!-- compare: ... --> note (see this file's docstring)"
    if note in ("concept", "claimed"):
        return None
    if note.startswith("cell "):
        source = (cells or {}).get(note.split()[1])
        if source is None:
            return f"compare note {note!r}: the notebook has no code cell with that id"
        return (
            None
            if re.search(r"^\s*assert\b", source, re.M)
            else f"code cell {note.split()[1]} asserts nothing"
        )
    if note == "paper":
        return None if "{cite:" in text else "a published comparison, but the cell cites no paper"
    try:
        if note.split()[0] in ("top", "bottom"):
            ref = note.split(None, 1)[1]
            words = ref.split()
            method = words[2]
            rows = _values(" ".join([*words[:2], "*", *words[3:]]))
            value = float(resolve(ref))
            best = max(rows.values()) if note.startswith("top") else min(rows.values())
            if value != best:
                winner = [m for m, v in rows.items() if v == best]
                return f"{method} is not the {note.split()[0]} ({value:.3f}): {winner} has {best:.3f}"
            return None
        m = RELATION.match(note)
        if not m:
            return f"compare note {note!r} is not 'A op B', 'top REF', 'bottom REF', concept or paper"
        left, op, right = m.group(1).removeprefix("all "), m.group(2), m.group(3)
        lhs, rhs = _values(left), _values(right)
    except (KeyError, IndexError, ValueError, TypeError, FileNotFoundError) as e:
        return f"compare note {note!r} names no data ({type(e).__name__}: {e})"
    holds = {
        "<": lambda a, b: a < b,
        ">": lambda a, b: a > b,
        "<=": lambda a, b: a <= b,
        ">=": lambda a, b: a >= b,
        "~": lambda a, b: abs(a - b) <= 0.05 * max(abs(a), abs(b)),
    }[op]
    pairs = [(ka, a, kb, b) for ka, a in lhs.items() for kb, b in rhs.items()]
    if set(lhs) == set(rhs) and "" not in lhs:  # two lists (or two sets of rows): position by position
        pairs = [(k, lhs[k], k, rhs[k]) for k in lhs]
    wrong = [(ka, a, kb, b) for ka, a, kb, b in pairs if not holds(a, b)]
    if wrong:
        ka, a, kb, b = wrong[0]
        return f"the data say {ka or left} = {a:.3f}, {kb or right} = {b:.3f}: not {op}"
    return None


ALL = [q for path in notebooks() for q in quotes(path)]
ALL_COMPARISONS = [c for path in notebooks() for c in comparisons(path)]


@pytest.mark.parametrize("chapter, cell, number, kind, claim, text", ALL, ids=lambda v: str(v)[:24])
def test_quote_matches_its_data(chapter, cell, number, kind, claim, text):
    why = problem(number, claim, text)
    assert why is None, f"notebook {chapter}, cell {cell}: {kind} {number}: {why}"


@pytest.mark.parametrize("chapter, cell, sentence, note, text", ALL_COMPARISONS, ids=lambda v: str(v)[:24])
def test_comparison_matches_its_data(chapter, cell, sentence, note, text):
    why = compare_problem(note, text, CODE[chapter])
    assert why is None, f"notebook {chapter}, cell {cell}: {why}\n  {sentence}"


def test_a_wrong_comparison_is_caught():
    results = json.loads(BENCH.read_text())["results"]["0"]
    ours = {m: r["speedup"] for m, r in results.items() if m != "ar" and not m.startswith("hf")}
    fast, slow = max(ours, key=ours.get), min(ours, key=ours.get)
    assert compare_problem(f"top bench T=0 {fast} speedup", "") is None
    assert compare_problem(f"top bench T=0 {slow} speedup", "") is not None
    assert compare_problem(f"bottom bench T=0 {slow} speedup", "") is None
    assert compare_problem(f"bench T=0 {fast} speedup > bench T=0 {slow} speedup", "") is None
    assert compare_problem(f"bench T=0 {fast} speedup < bench T=0 {slow} speedup", "") is not None
    assert compare_problem(f"all bench T=0 * speedup <= {ours[fast]}", "") is None
    assert compare_problem(f"all bench T=0 * speedup < {ours[fast]}", "") is not None
    assert compare_problem(f"bench T=0 {fast} speedup ~ {ours[fast] * 1.04}", "") is None
    assert compare_problem(f"bench T=0 {fast} speedup ~ {ours[fast] * 1.2}", "") is not None
    assert compare_problem(None, "") is not None and compare_problem("concept", "") is None
    assert compare_problem("paper", "no citation") is not None
    assert compare_problem("bench T=0 no-such speedup > 1", "") is not None
    assert compare_problem("faster than it", "") is not None
    assert compare_problem("cell c1", "", {"c1": "x = 1\nassert x > 0"}) is None
    assert compare_problem("cell c1", "", {"c1": "print(1)"}) is not None
    assert compare_problem("cell c2", "", {"c1": "assert True"}) is not None
    depths = json.loads((CARDS / "mtp-sequential" / "card.json").read_text())["validation_accuracy"]["top1"]
    same = "card mtp-sequential validation_accuracy/top1"
    assert (
        compare_problem(f"{same} ~ {same}", "") is None
        and compare_problem(f"{same} > {same}", "") is not None
    )
    assert compare_problem(f"{same} <= {max(depths)}", "") is None
    found = list(
        comparisons_of("EAGLE-3 is the fastest. It is red. It took 25 minutes<!-- compare: concept -->.")
    )
    assert found == [
        ("EAGLE-3 is the fastest.", None),
        ("It took 25 minutes<!-- compare: concept -->.", "concept"),
    ]


def comparisons_of(markdown: str):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "00_x.ipynb"
        path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": [markdown]}]}))
        return [(sentence, note) for _, _, sentence, note, _ in comparisons(path)]


def test_the_detector_finds_quotes_and_skips_products():
    text = (
        "EAGLE-3 gains 1.32× and τ ≈ 6.5, $\\tau = 2.7$; batches of 8×256, 20 prompts x 64 tokens, "
        "regression + 0.1 × soft CE, $\\tau = 1 + \\alpha_1$, 3x faster."
    )
    speedups = [m.group(1) for m in SPEEDUP.finditer(text)]
    taus = [m.group(1) for m in TAU.finditer(text)]
    assert speedups == ["1.32", "3"] and taus == ["6.5", "2.7"]
    costs = "drafting costs $kc = 3.56$ and $V \\approx 0.8$; assume $V = 0$, a round of $1 + kc + V$ steps"
    assert [m.group(1) for m in COST.finditer(costs)] == ["3.56", "0.8", "0"]


def test_a_wrong_or_missing_claim_is_caught():
    results = json.loads(BENCH.read_text())["results"]
    true = results["0"]["eagle3:16"]["speedup"]
    assert problem(f"{true:.2f}", "bench T=0 eagle3:16 speedup", "") is None
    assert problem(f"{true + 0.05:.2f}", "bench T=0 eagle3:16 speedup", "") is not None
    assert problem("1.3", None, "") is not None
    assert problem("1.3", "bench T=0 no-such-method speedup", "") is not None
    assert problem("3.05", "paper", "no citation here") is not None
    assert problem("3.05", "paper", "as {cite:t}`li2024eagle2` report") is None
    assert problem("1.3", "bench@no-such-preset T=0 eagle3:16 speedup", "") is not None
    # a real preset's report is read from its own file (chapter 12 section 8's), never from bench.json
    real = json.loads(BENCH.with_name("bench-smollm2-135m.json").read_text())["results"]["0"]["eagle3:16"]
    assert problem(f"{real['tau']:.2f}", "bench@smollm2-135m T=0 eagle3:16 tau", "") is None
    assert (
        problem(f"{results['0']['eagle3:16']['tau']:.2f}", "bench@smollm2-135m T=0 eagle3:16 tau", "")
        is not None
    )


def fix(path: Path) -> list[str]:
    """Rewrite each bench or card quote of one notebook that its data contradicts to the data's value, at
    the quote's decimals; return what changed. For after a re-run: the prose around every changed number
    still needs a reader (a comparison may have flipped), so review the diff before committing."""
    nb, changes = json.loads(path.read_text()), []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for note in reversed(list(NOTE.finditer(text))):  # from the end: earlier spans stay valid
            m = NUMBER_BEFORE.search(text, 0, note.start())
            if not m or problem(m.group(1), note.group(1), "{cite:") is None:
                continue
            try:
                value = float(resolve(note.group(1)))
            except (KeyError, IndexError, ValueError, TypeError, FileNotFoundError):
                continue  # names nothing: the test reports it, a person fixes it
            number = m.group(1)
            shown = f"{value:.{len(number.split('.')[1]) if '.' in number else 0}f}"
            text = text[: m.start(1)] + shown + text[m.end(1) :]
            changes.append(f"{path.name[:2]} cell {i}: {number} -> {shown}  ({note.group(1)})")
        lines = text.split("\n")
        cell["source"] = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changes


if __name__ == "__main__":
    if sys.argv[1:] == ["--fix"]:  # python tests/test_claims.py --fix: after a re-run, then read the diff
        for path in notebooks():
            print("\n".join(fix(path)) or f"{path.name}: nothing to change")
        sys.exit(0)
    for chapter, cell, sentence, note, text in ALL_COMPARISONS:
        why = compare_problem(note, text, CODE[chapter])
        if why or "-v" in sys.argv:
            print(f"{chapter} cell {cell:3d} compare {why or 'ok'}\n    {sentence[:300]}")
    counts = Counter()
    for chapter, cell, number, kind, claim, text in ALL:
        counts[chapter] += 1
        why = problem(number, claim, text)
        print(f"{chapter} cell {cell:3d} {kind:7s} {number:>6s}  {claim or '-':55s} {why or 'ok'}")
    print("quotes per chapter:", dict(sorted(counts.items())), "total", sum(counts.values()))
    sys.exit(0)
