"""The HTML page and `gpudoctor report`: a pure function of the document, self-contained and escaped; any
saved report rendered again in every format; and the pages in a real headless Chromium (the distribution's
chromium and chromedriver, driven by selenium): no console error, the failing node and the slow link shown,
filter and search working, and hostile host names and plugin text running nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from helpers import clusterreport
from helpers.common import PLUGINS, SNAPSHOTS, gpudoctor
from helpers.growth import K, growth_of

from gpudoctor import probe
from gpudoctor.report import html

FAILING = str(SNAPSHOTS / "fault-xid-79.json")
# Set to a folder to keep the cluster page's screenshot there (the README's docs/html-cluster.png is one).
SHOTS = os.environ.get("GPUDOCTOR_SCREENSHOTS")
# What `report` says it wrote, in the order it writes them (none where stdout is a monitoring plugin's answer).
WROTE = {"xml": "the JUnit XML report", "prom": "the node_exporter metrics", "html": "the HTML report"}


@pytest.fixture(scope="module")
def cluster_doc() -> dict[str, Any]:
    return clusterreport.build(1000)


@pytest.fixture(scope="module")
def node_doc() -> dict[str, Any]:
    """A failing 8-GPU node, its host name and one check's text written to attack the page."""
    doc = probe.run(from_file=FAILING).document
    doc["host"] = clusterreport.HOSTILE_NAME
    xid = next(c for c in doc["checks"] if c["check_id"] == "health.xid")
    xid["rows"][3]["summary"] += " " + clusterreport.HOSTILE_TEXT
    return doc


# --- the page, without a browser -----------------------------------------------------------------------------
def test_the_page_escapes_every_text_from_a_node(cluster_doc: dict[str, Any], node_doc: dict[str, Any]) -> None:
    for page in (html.render(cluster_doc), html.render(node_doc)):
        assert "<img" not in page and "onerror=" not in page.replace("onerror=&quot;", "")
        assert "<script>window.pwned" not in page and "<b onmouseover" not in page
        assert page.count("<script>") == 1  # the page's own, whose hash the policy names
        assert "&lt;script&gt;window.pwned=" in page


def test_the_policy_allows_only_the_inline_style_and_script(cluster_doc: dict[str, Any]) -> None:
    import base64
    import hashlib

    page = html.render(cluster_doc)
    policy = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)[1])
    assert "default-src 'none'" in policy and "unsafe" not in policy
    for tag, directive in (("style", "style-src"), ("script", "script-src")):
        body = re.search(rf"<{tag}>(.*?)</{tag}>", page, re.S)[1]
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in policy
    assert not re.search(r"(src|href)=\"?(https?:|//)", page) and "<link" not in page and "@import" not in page


def test_a_thousand_node_page_is_under_two_megabytes(cluster_doc: dict[str, Any]) -> None:
    page = html.render(cluster_doc)
    assert len(page.encode()) < 2_000_000
    assert page.count('data-status="fail"') == len(cluster_doc["cluster"]["failed_nodes"]) == 3


def test_a_report_without_a_cluster_or_figures_still_renders() -> None:
    doc = probe.run(from_file=FAILING, only=["driver.nvml"]).document
    doc["checks"] = []
    assert "None: every check that ran passed." in html.render(doc)


# --- gpudoctor report: any saved report, every format ---------------------------------------------------------
def test_a_saved_report_renders_again_as_the_run_rendered_it(tmp_path: Path) -> None:
    first = {name: tmp_path / f"first.{name}" for name in ("json", "prom", "xml", "html")}
    run = gpudoctor("check", "--from", FAILING, "--checks-dir", str(PLUGINS), "--format", "nagios",
                    "-o", str(first["json"]), "--prom-file", str(first["prom"]), "--junit", str(first["xml"]),
                    "--html", str(first["html"]))  # fmt: skip
    (tmp_path / "again").mkdir()  # one gpudoctor .prom file a folder
    again = {name: tmp_path / "again" / f"again.{name}" for name in ("prom", "xml", "html")}
    for fmt in ("console", "json", "nagios", "npd"):
        proc = gpudoctor("report", str(first["json"]), "--format", fmt, "--prom-file", str(again["prom"]),
                         "--junit", str(again["xml"]), "--html", str(again["html"]))  # fmt: skip
        assert proc.returncode == {"nagios": 2}.get(fmt, 1), (fmt, proc.stderr)
        wrote = [f"gpudoctor: wrote {what} to {again[name]}" for name, what in WROTE.items()]
        assert proc.stderr.splitlines() == ([] if fmt in ("nagios", "npd") else wrote), (fmt, proc.stderr)
        for name, path in again.items():
            assert path.read_text() == first[name].read_text(), (fmt, name)
        if fmt == "nagios":
            assert proc.stdout == run.stdout
        if fmt == "json":
            assert json.loads(proc.stdout) == json.loads(first["json"].read_text())


def test_a_cluster_report_renders_again_in_every_format(tmp_path: Path, cluster_doc: dict[str, Any]) -> None:
    saved = tmp_path / "rank0.json"
    saved.write_text(json.dumps(cluster_doc))
    report = probe.load(str(saved))
    assert "node0417" in probe.render(report, "console") and "node0417" in probe.render(report, "html")
    assert probe.render(report, "npd").startswith("cluster.links")
    assert 'node="node0733"' in probe.render(report, "prometheus")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read report"),
        ("{not json", "is not valid JSON"),
        ('{"tool": "other"}', "is not a gpudoctor report"),
        ('{"tool": "gpudoctor", "schema_version": 99}', "this gpudoctor reads up to 5"),
        ('{"tool": "gpudoctor", "schema_version": 3, "checks": []}', "is not a whole gpudoctor report: no status"),
        ("BROKEN_CHECK", "a check or cause in it cannot be read"),
    ],
)
def test_a_file_that_is_not_a_report_is_one_line_and_exit_2(tmp_path: Path, content: str | None, said: str) -> None:
    path = tmp_path / "report.json"
    if content == "BROKEN_CHECK":
        doc = probe.run(from_file=FAILING, only=["driver.nvml"]).document
        doc["checks"][0]["status"] = "splendid"
        content = json.dumps(doc)
    if content is not None:
        path.write_text(content)
    proc = gpudoctor("report", str(path), "--html", str(tmp_path / "page.html"))
    assert proc.returncode == 2 and proc.stdout == "" and said in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "page.html").exists()


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda c: c.pop("nodes"), "cluster.nodes is not a list"),
        (lambda c: c["nodes"][0].pop("name"), "cluster.nodes holds a node without a name"),
        (lambda c: c["failed_nodes"].append(7), "cluster.failed_nodes holds something that is not a node name"),
        (lambda c: c.update(findings=["cluster.links"]), "cluster.findings holds something that is not a finding"),
        (lambda c: c["nodes"][1].update(verdict="fail"), "node node0001's verdict is not a verdict"),
    ],
    ids=["no-nodes", "nameless-node", "failed-not-name", "finding-not-object", "verdict-not-object"],
)
def test_a_damaged_cluster_report_is_one_line_in_every_format(
    tmp_path: Path, cluster_doc: dict[str, Any], damage: Any, said: str
) -> None:
    """An edited or truncated rank-0 report: every format, and the HTML page, say what is wrong in one line
    (exit 2, Nagios' UNKNOWN 3; no page written); never a traceback."""
    document = json.loads(json.dumps(cluster_doc))
    damage(document["cluster"])
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(document))
    for fmt in ("console", "json", "nagios", "npd"):
        proc = gpudoctor("report", str(path), "--format", fmt, "--html", str(tmp_path / "page.html"))
        unknown = 3 if fmt == "nagios" else 2  # a Nagios plugin that cannot tell says UNKNOWN
        assert proc.returncode == unknown and "Traceback" not in proc.stderr, (fmt, proc.stderr)
        assert proc.stderr.count("\n") == 1 and said in proc.stderr, (fmt, proc.stderr)
        assert not (tmp_path / "page.html").exists()


def test_a_schema_2_cluster_report_renders(tmp_path: Path, cluster_doc: dict[str, Any]) -> None:
    """Schema 2 (before verdicts): no unconfirmed nodes, links, findings, or a verdict per node. Read as this
    schema: the lists empty, and each node's verdict from the failed nodes and stragglers it named."""
    document = json.loads(json.dumps(cluster_doc))
    document["schema_version"] = 2
    for key in ("unconfirmed", "links", "findings"):
        del document["cluster"][key]
    for node in document["cluster"]["nodes"]:
        del node["verdict"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    report = probe.load(str(path))
    verdicts = {n["name"]: n["verdict"]["status"] for n in report.document["cluster"]["nodes"]}
    assert {n for n, v in verdicts.items() if v == "fail"} == set(document["cluster"]["failed_nodes"])
    for fmt in ("console", "html", "nagios", "npd", "prometheus", "json"):
        assert probe.render(report, fmt)
    proc = gpudoctor("report", str(path), "--html", str(tmp_path / "page.html"))
    assert "Traceback" not in proc.stderr and (tmp_path / "page.html").exists(), proc.stderr


# --- in a real browser -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra has it)")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("chromium and chromedriver are not installed (Debian: chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1300,1500",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.webdriver.chrome.service import Service

    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    yield session
    session.quit()


def open_page(browser: Any, tmp_path: Path, document: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The page loaded from a file (as an admin opens it), and what the browser logged."""
    page = tmp_path / name
    page.write_text(html.render(document))
    browser.get(page.as_uri())
    browser.find_element("tag name", "h1")
    return browser.get_log("browser")


def loading_cpu_s(browser: Any, page: Path) -> float:
    """CPU seconds the renderer's main thread spent on `page` once loaded (parsing, style, layout, script):
    Chromium's ThreadTime, which starts again at each navigation, whatever else the machine runs."""
    browser.execute_cdp_cmd("Performance.enable", {})
    browser.get(page.as_uri())
    browser.find_element("tag name", "h1")
    metrics = browser.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "ThreadTime")


def visible(browser: Any) -> list[str]:
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('#grid button')).filter(b => !b.hidden).map(b => b.dataset.name)"
    )


def test_the_cluster_page_loads_in_linear_time(browser: Any, tmp_path: Path) -> None:
    """K times the nodes is at most about K times the renderer's work (tests/helpers/growth.py: 250 and 2,000 nodes,
    each the best of three loads; 5 times here, the page's header, style and script being the same at any size),
    where a script that visited every node for each node grows about 25 times. The 1,000-node page's load time is
    bench/html_page.py's (docs/REPORTS.md)."""
    pages = []
    for n in (2000 // K, 2000):
        pages.append(tmp_path / f"cluster-{n}.html")
        pages[-1].write_text(html.render(clusterreport.build(n)))
    grew = growth_of(lambda page: loading_cpu_s(browser, page), *pages)
    assert grew < 2 * K, f"{grew:.0f} times the renderer's work for {K} times the nodes"


def test_the_cluster_page_in_a_browser(browser: Any, tmp_path: Path, cluster_doc: dict[str, Any]) -> None:
    logs = open_page(browser, tmp_path, cluster_doc, "cluster.html")
    assert [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")] == []
    assert len(visible(browser)) == 1000
    assert "node0120 -> node0121" in browser.find_element("tag name", "table").text
    if SHOTS:
        browser.save_screenshot(str(Path(SHOTS) / "html-cluster.png"))
    find = browser.find_element
    find("css selector", '#filters input[value="pass"]').click()
    assert sorted(visible(browser)) == ["node0417", "node0733", "node0999"]
    find("css selector", "#search").send_keys("0417")
    assert visible(browser) == ["node0417"] and "1 of 1000 nodes shown" in find("id", "shown").text
    find("css selector", '#grid button[data-name="node0417"]').click()
    detail = find("id", "node-417")
    assert detail.is_displayed() and "slow both ways" in detail.text and not find("id", "node-733").is_displayed()
    find("css selector", "#search").clear()
    find("css selector", '#filters input[value="pass"]').click()
    find("css selector", "#grid button[data-i='3']").click()
    assert find("id", "node-3").text.startswith(clusterreport.HOSTILE_NAME)
    assert browser.execute_script("return window.pwned") is None


def test_the_node_page_in_a_browser(browser: Any, tmp_path: Path, node_doc: dict[str, Any]) -> None:
    logs = open_page(browser, tmp_path, node_doc, "node.html")
    assert [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")] == []
    title = browser.find_element("tag name", "h1").text
    assert clusterreport.HOSTILE_NAME in title
    problem = browser.find_element("css selector", ".problem").text
    assert "health.xid" in problem and clusterreport.HOSTILE_TEXT in problem and "Fix:" in problem
    rows = browser.find_elements("css selector", ".gpugrid tr")
    assert len(rows) == 1 + 8
    assert browser.execute_script("return window.pwned") is None
