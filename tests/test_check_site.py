"""The browser check of the built site (`make check-site`, course/specdec_course/check_site.py).

The judging and the local server are tested everywhere; the end-to-end test opens a small planted site in
headless Chromium and runs only where Debian's chromium, chromedriver, selenium and the local MathJax copy
are present (`make check-site` installs the last one; CI has no browser).
"""

import json
import shutil
import threading
import urllib.request
from pathlib import Path

import pytest

from specdec_course import check_site as cs
from specdec_lib._export import BRANCH, REPO_URL

ROOT = Path(__file__).resolve().parents[1]
MATHJAX = ROOT / "_build" / "mathjax" / "node_modules" / "mathjax"

CLEAN_PROSE = (
    "The target scores every draft in one pass; keep x with probability min(1, p(x)/q(x)). "
    "Costs 5 dollars? No: it costs one pass. A | B means either. Use {k} drafts."
)


def test_clean_prose_has_no_raw_markup():
    assert cs.raw_markup(CLEAN_PROSE) == []


@pytest.mark.parametrize(
    "planted, kind",
    [
        (r"so \(\beta = 1 - TV\) holds", "TeX delimiter"),
        ("the residual $$ r(x) = p - q $$ renormalised", "TeX delimiter"),
        (r"accept with $\min(1, p/q)$ here", "inline TeX"),
        ("as {cite:t}leviathan2023 showed", "MyST directive or role"),
        ("```{note}\nunparsed\n```", "MyST directive or role"),
        ("text\n::: hint\nmore", "code fence or colon fence"),
        ("<details><summary>Why it works</summary>", "escaped HTML"),
        ("| method | tau |\n|---|---|\n| ar | 1.00 |", "Markdown table"),
    ],
)
def test_raw_markup_is_found(planted, kind):
    found = cs.raw_markup(CLEAN_PROSE + " " + planted)
    assert any(f.startswith(kind) for f in found), found


def test_launch_url_comes_from_the_book_config():
    url = cs.expected_launch_url("notebooks/03_rejection_sampling.html")
    repo = REPO_URL.removeprefix("https://github.com/")
    assert (
        url
        == f"https://colab.research.google.com/github/{repo}/blob/{BRANCH}/notebooks/03_rejection_sampling.ipynb"
    )
    assert cs.expected_launch_url("book/setup.html") is None
    assert cs.expected_launch_url("index.html") is None


def test_site_pages_skip_theme_folders(tmp_path):
    for rel in ("index.html", "book/setup.html", "notebooks/01_x.html", "_static/a.html", "_sources/b.html"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("<html></html>")
    assert cs.site_pages(tmp_path) == ["book/setup.html", "index.html", "notebooks/01_x.html"]


def _report(**changes):
    page = "notebooks/02_draft_and_verify.html"
    url = cs.expected_launch_url(page)
    report = dict(
        title="02",
        article=True,
        figures=3,
        broken_figures=[],
        maths=10,
        unrendered_maths=[],
        tex_errors=0,
        unparsed_fences=[],
        prose=CLEAN_PROSE,
        launch=[url],
        badges=[url],
    )
    report.update(changes)
    return page, report


def test_judge_passes_a_good_chapter_and_names_each_fault():
    page, report = _report()
    assert cs.judge(page, report, [], [], "ok") == []
    faults = {
        "figure did not load": dict(broken_figures=["../_images/x.png"]),
        "without a figure": dict(figures=0),
        "maths not typeset": dict(unrendered_maths=[r"\(x\)"]),
        "TeX error": dict(tex_errors=2),
        "launch button": dict(launch=[]),
        "badge": dict(badges=[]),
        "TeX delimiter": dict(prose=CLEAN_PROSE + r" \(x\)"),
        "no article": dict(article=False),
    }
    for words, change in faults.items():
        page, bad = _report(**change)
        problems = cs.judge(page, bad, [], [], "ok")
        assert any(words in p for p in problems), (words, problems)
    page, report = _report()
    assert cs.judge(page, report, ["/_static/x.css"], [], "ok") == ["missing file: /_static/x.css"]
    assert cs.judge(page, report, [], [], "timed out")[0] == "timed out"


def test_server_rewrites_only_the_mathjax_address(tmp_path):
    site, mathjax = tmp_path / "site", tmp_path / "mathjax"
    (site / "notebooks").mkdir(parents=True)
    (mathjax / "es5").mkdir(parents=True)
    (mathjax / "es5" / "tex-mml-chtml.js").write_text("/* local mathjax */")
    (site / "notebooks" / "a.html").write_text(
        f'<script src="{cs.MATHJAX_CDN}es5/tex-mml-chtml.js"></script><a href="https://example.org/">x</a>'
    )
    server = cs._Server(site, mathjax)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        page = urllib.request.urlopen(f"{base}/notebooks/a.html").read().decode()
        assert f'src="{cs.LOCAL_MATHJAX}es5/tex-mml-chtml.js"' in page and cs.MATHJAX_CDN not in page
        assert "https://example.org/" in page
        script = urllib.request.urlopen(f"{base}{cs.LOCAL_MATHJAX}es5/tex-mml-chtml.js").read().decode()
        assert script == "/* local mathjax */"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{base}/missing.png")
        assert ("/missing.png", 404) in server.log
    finally:
        server.shutdown()


_HAVE_BROWSER = (
    shutil.which("chromium")
    and shutil.which("chromedriver")
    and (MATHJAX / "es5" / "tex-mml-chtml.js").is_file()
)


@pytest.mark.skipif(
    not _HAVE_BROWSER, reason="needs Debian's chromium + chromium-driver and make check-site's MathJax"
)
def test_browser_end_to_end_on_a_planted_site(tmp_path):
    pytest.importorskip("selenium")
    site = tmp_path / "site"
    (site / "notebooks").mkdir(parents=True)
    (site / "_images").mkdir()
    png = ROOT / "book" / "data" / "bench.png"
    shutil.copy(png, site / "_images" / "fig.png")
    url = cs.expected_launch_url("notebooks/01_good.html")
    # As Jupyter Book writes it: MathJax typesets only elements of class `math`, so raw dollars stay raw.
    config = '{"options": {"processHtmlClass": "tex2jax_process|mathjax_process|math|output_area"}}'
    head = (
        f"<script>window.MathJax = {config}</script>"
        f'<script defer src="{cs.MATHJAX_CDN}es5/tex-mml-chtml.js"></script>'
    )
    launch = f'<div class="dropdown-launch-buttons"><a href="{url}">Colab</a></div>'
    badge = f'<a href="{url}"><img src="https://colab.research.google.com/assets/colab-badge.svg"></a>'
    good = (
        f"<html><head>{head}</head><body>{launch}<article class='bd-article tex2jax_ignore mathjax_ignore'>{badge}"
        "<p>Keep x with probability <span class='math'>\\(\\min(1, p/q)\\)</span>.</p>"
        "<div class='math'>\\[\\beta = \\sum_x \\min(p, q)\\]</div>"
        "<img src='../_images/fig.png'></article></body></html>"
    )
    (site / "index.html").write_text(
        "<html><body><article class='bd-article'><p>Welcome</p></article></body></html>"
    )
    (site / "notebooks" / "01_good.html").write_text(good)
    # The same chapter page with four planted faults: raw $$, a broken TeX formula, a missing figure, no launch.
    bad = (
        good.replace(launch, "")
        .replace("01_good", "02_bad")
        .replace("<p>Keep", "<p>so $$ r(x) $$ and Keep")
        .replace("\\sum_x", "x^^2")
        .replace("fig.png", "nothere.png")
    )
    (site / "notebooks" / "02_bad.html").write_text(bad)
    results = cs.check_site(
        site, MATHJAX, tmp_path / "shots", shutil.which("chromium"), shutil.which("chromedriver")
    )
    print(json.dumps(results, indent=1))
    assert results["notebooks/01_good.html"]["problems"] == []
    assert results["notebooks/01_good.html"]["maths"] == 2
    assert results["index.html"]["problems"] == []
    problems = " | ".join(results["notebooks/02_bad.html"]["problems"])
    for words in ("TeX delimiter", "TeX error", "nothere.png", "launch button"):
        assert words in problems, (words, problems)
    assert (tmp_path / "shots" / "notebooks__01_good-maths.png").stat().st_size > 1000


def test_a_student_site_must_not_link_to_the_full_notebooks():
    page, with_links = _report()
    problems = cs.judge(page, with_links, [], [], "ok", student=True)
    assert any("student site opens the full notebook" in p for p in problems), problems
    page, without = _report(launch=[], badges=[])
    assert cs.judge(page, without, [], [], "ok", student=True) == []


@pytest.mark.skipif(
    not _HAVE_BROWSER, reason="needs Debian's chromium + chromium-driver and make check-site's MathJax"
)
def test_without_mathjax_every_formula_is_reported_and_the_run_goes_on(tmp_path, monkeypatch):
    """No MathJax (offline, no local copy): each page fails with its formulas listed; no crash, screenshots
    of the pages still written."""
    pytest.importorskip("selenium")
    monkeypatch.setattr(cs, "MATHJAX_WAIT_S", 2)
    site = tmp_path / "site"
    site.mkdir()
    head = f'<script defer src="{cs.MATHJAX_CDN}es5/tex-mml-chtml.js"></script>'
    body = "<article class='bd-article'><p>a <span class='math'>\\(x^2\\)</span></p></article>"
    (site / "index.html").write_text(f"<html><head>{head}</head><body>{body}</body></html>")
    (site / "other.html").write_text(f"<html><head>{head}</head><body>{body}</body></html>")
    shots = tmp_path / "shots"
    results = cs.check_site(site, None, shots, shutil.which("chromium"), shutil.which("chromedriver"))
    for page in ("index.html", "other.html"):
        problems = " | ".join(results[page]["problems"])
        assert "maths not typeset" in problems and "timed out" in problems, problems
        assert (shots / page.replace(".html", ".png")).is_file()
