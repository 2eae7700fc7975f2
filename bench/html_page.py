"""How long the cluster's HTML page takes to load in headless Chromium, by node count, measured in one run.

For each size, a synthetic rank-0 report (tests/helpers/clusterreport.py) rendered as `gpudoctor report --html`
writes it, opened from a file as an admin opens it; the loads alternate between sizes round by round. Prints
each page's size and the median over the rounds of its load time (the navigation's loadEventEnd, wall time) and
of the CPU time of the renderer's main thread (Chromium's ThreadTime: parsing, style, layout, script). Needs
chromium, chromedriver and selenium (the test extra); tests/test_html.py holds the growth, not these figures.

    python bench/html_page.py [--nodes 250 1000 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers import clusterreport

from gpudoctor.report import html

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1300,1500")


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in FLAGS:
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))


def load(session: Any, page: Path) -> tuple[float, float]:
    """Milliseconds to the load event, and the renderer main thread's CPU milliseconds, of one load."""
    session.execute_cdp_cmd("Performance.enable", {})
    session.get(page.as_uri())
    session.find_element("tag name", "h1")
    loaded = session.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd")
    metrics = session.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return loaded, 1000 * next(m["value"] for m in metrics if m["name"] == "ThreadTime")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", nargs="*", type=int, default=[250, 1000, 2000], help="page sizes in nodes")
    parser.add_argument("--rounds", type=int, default=5, help="loads of each page (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        pages = {}
        for n in args.nodes:
            pages[n] = Path(folder) / f"cluster-{n}.html"
            pages[n].write_text(html.render(clusterreport.build(n)))
        session = browser()
        try:
            for page in pages.values():
                load(session, page)  # a cold browser's first load of each is not counted
            took: dict[int, list[tuple[float, float]]] = {n: [] for n in pages}
            for _ in range(args.rounds):
                for n, page in pages.items():
                    took[n].append(load(session, page))
        finally:
            session.quit()
        print(f"{'nodes':>6} {'MB':>5} {'load ms':>8} {'main-thread CPU ms':>19}")
        for n, page in pages.items():
            wall = statistics.median(t for t, _ in took[n])
            cpu = statistics.median(c for _, c in took[n])
            print(f"{n:>6} {page.stat().st_size / 2**20:5.2f} {wall:8.0f} {cpu:19.0f}")


if __name__ == "__main__":
    main()
