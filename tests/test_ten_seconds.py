"""A report read in ten seconds: every verdict is one line at 120 columns beside its status and check (the whole
with -v and in the JSON), every summary a sentence well under 200 characters, and the citation one flag away."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.common import FIXTURES, SNAPSHOTS
from test_paste import cut_to_fit

from gpudoctor import probe
from gpudoctor.report import console, formats

INPUTS = [
    *sorted(SNAPSHOTS.glob("*.json")),
    *sorted((FIXTURES / "nvidia-smi-xml").glob("*.xml")),
    *sorted((FIXTURES / "benchmarks").rglob("*.txt"))[:12],
    *sorted((FIXTURES / "pastes" / "errors").glob("*.txt"))[:12],
    FIXTURES / "real" / "H100-80GB-HBM3.snapshot.json",
]


@pytest.fixture(scope="module")
def reports() -> list[tuple[Path, probe.Report]]:
    return [(path, probe.run(from_file=str(path))) for path in INPUTS]


def test_every_summary_is_a_sentence(reports: list) -> None:
    for path, report in reports:
        cut = [c["summary"] for c in report.document["checks"] if cut_to_fit(c)]
        assert not cut, (path.name, cut)


def test_every_verdict_is_one_line_at_120_columns(reports: list) -> None:
    """Each result's verdict stands whole on the line of its status and check: never wrapped onto a second."""
    for path, report in reports:
        screen = formats.text("console", report.document, report.results, verbose=False, width=120)
        lines = screen.splitlines()
        assert all(len(line) <= 120 for line in lines if not line.lstrip().startswith("$ ")), path.name
        for result in report.results:
            if result.status.value == "skip":
                continue
            head = f"{console.badge(result.status).plain:<9}"
            mine = [line for line in lines if line.startswith(head) and f" {result.label[:12]}" in line]
            assert mine, (path.name, result.label)
            said = console.quotation(result.summary, 120 - 11 - 28)
            assert any(said[:60] in line for line in mine), (path.name, said, mine)


def test_the_citation_is_one_flag_away(reports: list) -> None:
    """A judged figure's source is on the screen with -v only."""
    path, report = next((p, r) for p, r in reports if p.name == "H100-80GB-HBM3.snapshot.json")
    sources = {m.reference_source for r in report.results for m in r.metrics if m.reference_source}
    quiet = formats.text("console", report.document, report.results, verbose=False, width=120)
    loud = formats.text("console", report.document, report.results, verbose=True, width=120)
    assert not any(s in quiet for s in sources), path.name
    assert all(s[:40] in loud for s in sources if len(s) > 10), path.name
