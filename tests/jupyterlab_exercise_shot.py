"""Open a chapter in a real JupyterLab, in headless Chromium, and photograph one exercise: the learner's
cell shows its stub and the reference solution after it stays folded (`jupyter.source_hidden`).

    python tests/jupyterlab_exercise_shot.py [notebooks/03_rejection_sampling.ipynb] [--out shot.png]

Needs Debian's `chromium chromium-driver` (as `make check-site`); run by hand, not in CI. Exits 1 when the
reference cell's code is visible or the learner's cell is missing, and prints what it found.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    import shutil
    import tempfile

    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(ROOT))
    from specdec_course.check_site import _browser
    from specdec_course.student import is_reference, solution_regions

    ap = argparse.ArgumentParser()
    ap.add_argument("notebook", nargs="?", default="notebooks/03_rejection_sampling.ipynb")
    ap.add_argument("--out", default=str(ROOT / "_build" / "jupyterlab-exercise.png"))
    args = ap.parse_args(argv)
    nb = json.loads((ROOT / args.notebook).read_text())
    index = next(i for i, c in enumerate(nb["cells"]) if is_reference(c))
    solution_line = next(
        ln.strip()
        for r in solution_regions("".join(nb["cells"][index]["source"]))
        for ln in r
        if len(ln.strip()) > 12
    )

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--allow-root",
            f"--ServerApp.root_dir={ROOT}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    driver = None
    try:
        for _ in range(60):  # wait for the server
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        driver = _browser(
            chromium, shutil.which("chromedriver") or "/usr/bin/chromedriver", tempfile.mkdtemp()
        )
        driver.get(f"http://127.0.0.1:{port}/lab/tree/{args.notebook}")
        time.sleep(12)  # JupyterLab's first load builds its shell, then the notebook
        cells = driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")
        for _ in range(60):  # the notebook renders lazily: scroll until the reference cell exists
            if len(cells) > index:
                break
            driver.execute_script("arguments[0].scrollIntoView()", cells[-1])
            time.sleep(0.5)
            cells = driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")
        ref, learner = cells[index], cells[index - 1]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", learner)
        time.sleep(2)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(args.out)
        # folded: JupyterLab shows a placeholder ("…") in place of the cell's editor
        editors = ref.find_elements(By.CSS_SELECTOR, ".jp-InputArea-editor")
        hidden = not any(e.is_displayed() for e in editors) and bool(
            ref.find_elements(By.CSS_SELECTOR, ".jp-Placeholder")
        )
        shown = solution_line in driver.find_element(By.CSS_SELECTOR, ".jp-Notebook").text
        stub = "NotImplementedError" in learner.text or "your answer" in learner.text
        print(
            f"{args.notebook}: reference cell {index} folded={hidden}, solution text shown={shown}, "
            f"learner's stub visible={stub}; screenshot {args.out}"
        )
        return 0 if hidden and not shown and stub else 1
    finally:
        if driver:
            driver.quit()
        server.terminate()


if __name__ == "__main__":
    sys.exit(main())
