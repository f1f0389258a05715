"""Check the built website in a real browser (hand-written support code, not a chapter).

    make check-site                     # after `make book`; SITE=_build/student/_build/html for the student site
    python -m specdec_course.check_site _build/html --mathjax DIR [--screenshots DIR] [--json FILE]

It serves the built pages on localhost and opens every page in headless Chromium (Debian's `chromium` and
`chromium-driver`, driven by Selenium), then checks what a reader sees:

- the page loads (HTTP 200, the article is there), with no JavaScript error and no missing file of the
  site's own (resources on other hosts are counted apart: this machine has no internet);
- every figure in the article loaded (the figures are files next to the page), and every chapter has one;
- MathJax typeset every formula: each `.math` element holds a rendered `mjx-container`, with no TeX error;
- the prose shows no raw markup: TeX delimiters such as `\\(` or `$$`, a `{directive}` or `{role}` that
  MyST did not parse, a code fence, escaped HTML such as `<details>`, or a Markdown table left as pipes;
- chapter pages have the Colab launch button and badge, pointing at that chapter in the repository named
  in `_config.yml`; on a student site (`--student`) they must have neither, since both open the full
  notebooks.

It writes a screenshot of every page (top of the page) and, where a page has maths, one scrolled to its
first displayed formula, prints one line per page, and exits 1 if any check failed (2 if it could not run).

The site loads MathJax from a CDN. Offline (this machine, CI), the local server rewrites that one address to
a local copy of the npm package `mathjax@3`, which `make check-site` installs into `_build/mathjax`; the
published site keeps the CDN.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import shutil
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

from specdec_lib._export import colab_url

MATHJAX_CDN = "https://cdn.jsdelivr.net/npm/mathjax@3/"
LOCAL_MATHJAX = "/__mathjax__/"

# Raw markup that must never reach a reader, searched in the prose (text outside code and maths).
RAW_MARKUP = {
    "TeX delimiter": re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$"),
    "inline TeX": re.compile(r"\$[^$\n]{0,200}?[\\^_{][^$\n]{0,200}?\$"),
    "MyST directive or role": re.compile(
        r"\{(?:cite|ref|doc|numref|eq|math|term|glue|solution|exercise|note|tip|warning|important|"
        r"admonition|figure|image|bibliography|code-cell|dropdown|margin|div)(?::[\w:-]*)?\}"
    ),
    "code fence or colon fence": re.compile(r"(?m)^\s*(?:```|:::)"),
    "escaped HTML": re.compile(r"</?(?:details|summary|div|span|img|br)\b[^>]*>"),
    "Markdown table": re.compile(r"\|\s*:?-{3,}:?\s*\|"),
}

# Console errors every Jupyter Book 1 site logs, with nothing lost for a reader; reported, not failed.
KNOWN_UPSTREAM = {
    # jupyter-book 1.0.4 puts sphinx-thebe's inline configuration in each page twice; the second copy's
    # `const` fails to redeclare. Thebe (live code cells) is not used by this book.
    "Identifier 'THEBE_JS_URL' has already been declared": "sphinx-thebe's config is included twice",
    # pydata-sphinx-theme on a first visit, before a light/dark mode is stored; it then uses 'auto'.
    "Got invalid theme mode": "pydata-sphinx-theme, first visit",
}

MATHJAX_WAIT_S = 20  # how long a page may take to load and typeset

# One round trip into the page: wait for the load and MathJax's first typeset, then report.
WAIT_JS = """
const done = arguments[arguments.length - 1];
const deadline = Date.now() + 1000 * arguments[0];
function ready() {
  if (document.readyState !== 'complete') return false;
  if (document.querySelector('.math') === null) return true;
  return !!(window.MathJax && MathJax.startup && MathJax.startup.promise);
}
(function poll() {
  if (ready()) {
    const p = (window.MathJax && MathJax.startup && MathJax.startup.promise) || Promise.resolve();
    p.then(() => done('ok'), (e) => done('MathJax failed: ' + e));
  } else if (Date.now() > deadline) {
    done('timed out waiting for the page and MathJax');
  } else {
    setTimeout(poll, 100);
  }
})();
"""

REPORT_JS = """
const art = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
const local = (u) => u.startsWith(location.origin);
const imgs = [...art.querySelectorAll('img')].filter((i) => local(i.src));
const maths = [...art.querySelectorAll('.math')];
const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA', 'NOSCRIPT', 'TEMPLATE', 'MJX-CONTAINER']);
const texts = [];
const walker = document.createTreeWalker(art, NodeFilter.SHOW_TEXT);
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  let e = n.parentElement, inCode = false;
  for (; e && e !== art; e = e.parentElement) if (skip.has(e.tagName)) { inCode = true; break; }
  if (!inCode) texts.push(n.textContent);
}
const launch = [...document.querySelectorAll('.dropdown-launch-buttons a[href]')].map((a) => a.href);
const badges = [...art.querySelectorAll('a[href^="https://colab.research.google.com/github/"]')]
  .filter((a) => a.querySelector('img')).map((a) => a.href);
return {
  title: document.title,
  article: !!document.querySelector('article.bd-article'),
  figures: imgs.length,
  broken_figures: imgs.filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.getAttribute('src')),
  maths: maths.length,
  unrendered_maths: maths.filter((m) => !m.querySelector('mjx-container')).map((m) => m.textContent.slice(0, 60)),
  tex_errors: art.querySelectorAll('mjx-merror').length,
  unparsed_fences: [...art.querySelectorAll('div[class*="highlight-{"]')].map((d) => d.className),
  prose: texts.join(''),
  launch: launch,
  badges: badges,
};
"""


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, site: Path, mathjax: Path | None):
        self.site, self.mathjax, self.log = site, mathjax, []
        super().__init__(("127.0.0.1", 0), functools.partial(_Handler, directory=str(site)))


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the site; the CDN's MathJax address is rewritten in every page to a local copy."""

    def translate_path(self, path):
        p = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
        if p.startswith(LOCAL_MATHJAX) and self.server.mathjax is not None:
            return str(self.server.mathjax / p[len(LOCAL_MATHJAX) :])
        return super().translate_path(path)

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if path.suffix == ".html" and path.is_file():
            html = path.read_text(encoding="utf-8")
            if self.server.mathjax is not None:
                html = html.replace(MATHJAX_CDN, LOCAL_MATHJAX)
            body = html.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_request(self, code="-", size="-"):
        # send_error passes an HTTPStatus (an int; on Python 3.10 its str() is not the number)
        code = int(code) if isinstance(code, int) else int(code) if str(code).isdigit() else 0
        self.server.log.append((urllib.parse.urlsplit(self.path).path, code))

    def log_message(self, *args):  # quiet: the report says what matters
        pass


def raw_markup(prose: str) -> list[str]:
    """Raw markup a reader would see in this prose, as 'kind: «excerpt»' strings."""
    found = []
    for kind, pattern in RAW_MARKUP.items():
        for m in pattern.finditer(prose):
            excerpt = " ".join(prose[max(0, m.start() - 30) : m.end() + 30].split())
            found.append(f"{kind}: «{excerpt}»")
    return found


def expected_launch_url(page: str) -> str | None:
    """The Colab address of a chapter page (notebooks/NN_name.html), from _config.yml; None for other pages."""
    m = re.fullmatch(r"notebooks/(\d\d_\w+)\.html", page)
    if m is None:
        return None
    return colab_url(f"{m.group(1)}.ipynb")


def site_pages(site: Path) -> list[str]:
    """Every HTML page of a built book, as paths relative to its root (theme and source folders excluded)."""
    skip = ("_static/", "_sources/", "_images/", "_sphinx_design_static/", "jupyter_execute/")
    pages = [p.relative_to(site).as_posix() for p in site.rglob("*.html")]
    return sorted(p for p in pages if not p.startswith(skip))


def judge(
    page: str, report: dict, missing_local: list[str], js_errors: list[str], wait: str, student: bool = False
) -> list[str]:
    """The problems of one page, from what the browser reported (empty: the page is fine). On a student site
    (`student`), a chapter must have no Colab button or badge: they open the full notebooks."""
    problems = []
    if wait != "ok":
        problems.append(wait)
    if not report["article"] and page not in ("search.html", "genindex.html"):
        problems.append("no article on the page")
    problems += [f"missing file: {p}" for p in missing_local]
    problems += [f"JavaScript error: {e}" for e in js_errors]
    problems += [f"figure did not load: {src}" for src in report["broken_figures"]]
    expected = expected_launch_url(page)
    if expected is not None:
        if report["figures"] == 0:
            problems.append("a chapter page without a figure")
        if student:
            links = [u for u in report["launch"] + report["badges"] if "colab.research.google.com" in u]
            if links:
                problems.append(f"a Colab link on the student site opens the full notebook: {links[0]}")
        elif expected not in report["launch"]:
            problems.append(f"no Colab launch button for {expected} (found {report['launch']})")
        if not student and expected not in report["badges"]:
            problems.append(f"no Open in Colab badge for {expected} (found {report['badges']})")
    problems += [f"maths not typeset: «{t}»" for t in report["unrendered_maths"]]
    if report["tex_errors"]:
        problems.append(f"{report['tex_errors']} TeX error box(es)")
    problems += [f"unparsed fence: {c}" for c in report["unparsed_fences"]]
    problems += raw_markup(report["prose"])
    return problems


def _browser(chromium: str, chromedriver: str, profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    # The network flags keep Chromium from calling home on a machine whose network is closed.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--window-size=1280,900",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromedriver), options=opts)
    driver.set_script_timeout(40)
    driver.set_page_load_timeout(60)
    return driver


def _check_page(driver, server, origin: str, page: str, shots: Path | None, student: bool) -> dict:
    """Load one page, wait for MathJax, judge what the browser reports, take its screenshots."""
    server.log.clear()
    driver.get(f"{origin}/{page}")
    wait = driver.execute_async_script(WAIT_JS, MATHJAX_WAIT_S)
    report = driver.execute_script(REPORT_JS)
    logs = driver.get_log("browser")
    missing = sorted({p for p, code in server.log if code >= 400 and not p.endswith("favicon.ico")})
    js_errors = [e["message"] for e in logs if e["level"] == "SEVERE" and origin in e["message"]]
    js_errors = [e for e in js_errors if "Failed to load resource" not in e]  # counted as missing
    known = [e for e in js_errors if any(k in e for k in KNOWN_UPSTREAM)]
    js_errors = [e for e in js_errors if e not in known]
    external = sum(1 for e in logs if e["level"] == "SEVERE" and origin not in e["message"])
    if shots is not None:
        name = page.removesuffix(".html").replace("/", "__")
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(shots / f"{name}.png"))
        shown = driver.execute_script(
            "const m = document.querySelector('div.math mjx-container')"
            " || document.querySelector('.math mjx-container');"
            "if (m) m.scrollIntoView({block: 'center'});"
            "return !!m;"
        )
        if shown:  # the first displayed formula (or inline, if the page has none)
            driver.save_screenshot(str(shots / f"{name}-maths.png"))
    return {
        "title": report["title"],
        "figures": report["figures"],
        "maths": report["maths"],
        "launch": bool(report["launch"]),
        "external_unreachable": external,
        "known_upstream_errors": len(known),
        "problems": judge(page, report, missing, js_errors, wait, student),
    }


def check_site(
    site: Path,
    mathjax: Path | None,
    shots: Path | None,
    chromium: str,
    chromedriver: str,
    student: bool = False,
) -> dict:
    """Open every page of the site in the browser; return {page: {"problems": [...], ...}}."""
    server = _Server(site, mathjax)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    if shots is not None:  # clear only what an earlier run wrote there
        shots.mkdir(parents=True, exist_ok=True)
        for old in [*shots.glob("*.png"), shots / "report.json"]:
            old.unlink(missing_ok=True)
    results = {}
    with tempfile.TemporaryDirectory() as profile:
        driver = _browser(chromium, chromedriver, profile)
        try:
            for page in site_pages(site):
                try:
                    results[page] = _check_page(driver, server, origin, page, shots, student)
                except Exception as e:  # a page that breaks the browser session fails; the run goes on
                    problem = f"the browser failed on this page: {type(e).__name__}: {e}".strip()
                    results[page] = dict(
                        title="",
                        figures=0,
                        maths=0,
                        launch=False,
                        external_unreachable=0,
                        known_upstream_errors=0,
                        problems=[problem],
                    )
        finally:
            driver.quit()
            server.shutdown()
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("site", type=Path, help="the built site, e.g. _build/html")
    ap.add_argument(
        "--mathjax", type=Path, help="a local copy of the npm package mathjax@3 (offline MathJax)"
    )
    ap.add_argument("--screenshots", type=Path, help="write a screenshot of every page here")
    ap.add_argument("--json", type=Path, help="write the whole report here")
    ap.add_argument(
        "--student", action="store_true", help="a student site: chapters must have no Colab button or badge"
    )
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    args = ap.parse_args(argv)

    if not (args.site / "index.html").is_file():
        print(f"check-site: {args.site}/index.html not found: build the site first (make book)")
        return 2
    if args.mathjax is not None and not (args.mathjax / "es5" / "tex-mml-chtml.js").is_file():
        print(f"check-site: {args.mathjax} is not the npm package mathjax@3 (no es5/tex-mml-chtml.js)")
        return 2
    for exe in (args.chromium, args.chromedriver):
        if not Path(exe).is_file():
            print(f"check-site: {exe} not found: install Debian's chromium and chromium-driver")
            return 2
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("check-site: selenium is not installed: pip install -r requirements.txt")
        return 2

    try:
        results = check_site(
            args.site, args.mathjax, args.screenshots, args.chromium, args.chromedriver, args.student
        )
    except Exception as e:  # the browser or its driver did not start: nothing was checked
        print(f"check-site: could not run the browser: {type(e).__name__}: {e}")
        return 2
    width = max(len(p) for p in results)
    print(f"{'page':<{width}}  figures  maths  launch  external*  result")
    for page, r in results.items():
        verdict = "ok" if not r["problems"] else f"FAILED ({len(r['problems'])})"
        launch = "yes" if r["launch"] else "-"
        print(
            f"{page:<{width}}  {r['figures']:>7}  {r['maths']:>5}  {launch:>6}  {r['external_unreachable']:>9}  {verdict}"
        )
        for problem in r["problems"][:10]:
            print(f"    {problem}")
    print(
        "* requests to other hosts that failed (this machine is offline): badges' images, fonts, widget scripts"
    )
    known = sum(r["known_upstream_errors"] for r in results.values())
    if known:
        print(f"{known} console errors ignored as known upstream ones: " + "; ".join(KNOWN_UPSTREAM.values()))
    failed = [p for p, r in results.items() if r["problems"]]
    maths = sum(r["maths"] for r in results.values())
    figures = sum(r["figures"] for r in results.values())
    print(
        f"check-site: {len(results)} pages, {figures} figures, {maths} formulas typeset by MathJax"
        f"{' (local copy)' if args.mathjax else ''}: "
        + ("all ok" if not failed else f"{len(failed)} page(s) FAILED: {', '.join(failed)}")
    )
    if args.screenshots is not None:
        print(f"check-site: screenshots in {args.screenshots}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
