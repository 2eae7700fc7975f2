"""Every judged figure shown with its pass line and the healthy figure that line is a fraction of: in the JSON
report (numbers that validate and round-trip), on the console (a passing check's figures too, without -v) and
on the HTML page (a bar per figure, a tick for each line, the source on hover and in text).

The results are built by hand (the renderers are pure functions of them). Their figures are written for these
tests; the references they name are published ones: 480 GB/s all-reduce busBw on 8 H100 with NVLink SHARP is
the NCCL maintainer's figure (https://github.com/NVIDIA/nccl-tests/issues/212, sjeaugey, 2024-05-06), 989.4
TFLOP/s is NVIDIA's H100 SXM datasheet figure for dense BF16 (1,979 with sparsity, halved). The all-reduce time
is what 480 GB/s busBw means for 1 GiB on 8 ranks (busBw = algBw x 2 x 7/8)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from rich.console import Console

from gpudoctor.model import Metric, Result, Row, Status
from gpudoctor.report import console, exits, html
from gpudoctor.report import document as doc

NVLS = "8x H100 SXM, NVLS, 1 GiB: NCCL maintainer, github.com/NVIDIA/nccl-tests/issues/212, 2024-05; busBw"
DATASHEET = "NVIDIA H100 SXM datasheet, dense BF16 (1,979 with sparsity); peak, not a measurement"
GIB = 1073741824
HEALTHY_US = round(GIB / (480e9 / (2 * 7 / 8)) * 1e6, 1)  # 3914.7 us for 1 GiB at 480 GB/s busBw
META = {"host": "gpu0", "started_at": "2026-01-05T10:00:00+00:00", "duration_s": 12.0, "level": "full",
        "source": "live"}  # fmt: skip


def busbw(value: float) -> Metric:
    return Metric("busbw", value, "GB/s", expected=408.0, expected_source="0.85 x healthy 480 GB/s",
                  comparison=">=", reference=480.0, reference_source=NVLS, labels={"bytes": GIB})  # fmt: skip


def tflops(value: float) -> Metric:
    return Metric("bf16", value, "TFLOP/s", expected=593.6, expected_source="0.6 x peak 989.4 TFLOP/s",
                  comparison=">=", reference=989.4, reference_source=DATASHEET)  # fmt: skip


def gpu(index: int, value: float) -> Row:
    status = Status.PASS if value >= 593.6 else Status.FAIL
    return Row(status, f"bf16 {value} TFLOP/s", index=index, name="NVIDIA H100 80GB HBM3", metrics=[tflops(value)])


def results() -> list[Result]:
    """A passing check with its figures on rows, a warning, a failure, a text expectation and a `<=` figure."""
    time = Metric("time", 4800.0, "us", expected=round(HEALTHY_US / 0.85, 1), expected_source="healthy / 0.85",
                  comparison="<=", reference=HEALTHY_US, reference_source=NVLS, labels={"bytes": GIB})  # fmt: skip
    shm = Metric("shm", 256.0, "GiB", expected=">= 1.0", expected_source="config min_gib")
    found = [
        Result(Status.PASS, "8 GPUs at >= 0.6x peak", rows=[gpu(i, 712.0 + i) for i in range(8)]),
        Result(Status.WARN, "busbw 380 GB/s is 0.79x healthy", metrics=[busbw(380.0)], aspect="warn"),
        Result(Status.FAIL, "busbw 300 GB/s is 0.62x healthy", metrics=[busbw(300.0)], aspect="fail"),
        Result(Status.WARN, "1 GiB all-reduce takes 4800 us", metrics=[time]),
        Result(Status.PASS, "256 GiB of /dev/shm", metrics=[shm]),
    ]
    for result, check_id in zip(found, ("compute.matmul", "allreduce.nccl", "allreduce.nccl", "allreduce.time",
                                        "system.shm"), strict=True):  # fmt: skip
        result.check_id = check_id
    return found


def report(found: list[Result]) -> dict[str, Any]:
    return doc.build(found, META, exits.exit_code(found, False, False), False)


def console_text(found: list[Result], verbose: bool = False) -> str:
    out = Console(record=True, width=250, file=io.StringIO())
    console.render(out, report(found), found, verbose)
    return out.export_text()


# --- JSON ------------------------------------------------------------------------------------------------------
def test_the_report_validates_and_its_figures_round_trip_as_numbers(tmp_path: Path) -> None:
    found = results()
    document = report(found)
    jsonschema.validate(document, doc.schema())
    saved = tmp_path / "report.json"
    saved.write_text(doc.dumps(document))
    loaded, again = doc.load(saved)
    assert loaded["checks"] == document["checks"] and again == found
    figure = loaded["checks"][0]["rows"][3]["metrics"][0]
    assert figure == {"name": "bf16", "value": 715.0, "unit": "TFLOP/s", "expected": 593.6,
                      "expected_source": "0.6 x peak 989.4 TFLOP/s", "comparison": ">=", "reference": 989.4,
                      "reference_source": DATASHEET, "reference_of": None, "baseline": False, "labels": {}}  # fmt: skip


def test_a_report_written_before_the_reference_fields_still_loads(tmp_path: Path) -> None:
    document = report(results())
    for check in document["checks"]:
        for metric in check["metrics"] + [m for r in check["rows"] for m in r["metrics"]]:
            for key in ("comparison", "reference", "reference_source"):
                del metric[key]
    jsonschema.validate(document, doc.schema())
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(document))
    _, found = doc.load(saved)
    assert found[1].metrics[0].expected == 408.0 and found[1].metrics[0].reference is None
    assert "busbw{bytes=1073741824}: 380 GB/s (expected 408 GB/s)" in console_text(found)
    whole = "busbw{bytes=1073741824}: 380 GB/s (expected 408 GB/s, 0.85 x healthy 480 GB/s)"
    assert whole in console_text(found, verbose=True), "where the line came from, with -v"


def cluster_report(figure: Metric) -> dict[str, Any]:
    row = Row(Status.FAIL, "slow", node="node7", metrics=[figure])
    result = Result(Status.FAIL, "node7 slow", rows=[row], check_id="cluster.allreduce")
    nodes = [{"name": f"node{i}", "rank": i, "status": "pass", "exit_code": 0, "checks": []} for i in (0, 7)]
    return doc.build_cluster([result], nodes, META, False, False, "slurm")


def test_a_findings_figure_carries_its_reference_and_loads_without_one(tmp_path: Path) -> None:
    document = cluster_report(busbw(300.0))
    jsonschema.validate(document, doc.schema())
    figure = document["cluster"]["findings"][0]["figure"]
    assert (figure["comparison"], figure["reference"], figure["reference_source"]) == (">=", 480.0, NVLS)
    for key in ("comparison", "reference", "reference_source"):
        del figure[key]
    saved = tmp_path / "rank0.json"
    saved.write_text(json.dumps(document))
    loaded, _ = doc.load(saved)
    assert loaded["cluster"]["findings"][0]["figure"]["reference"] is None


def test_the_finding_of_a_lower_is_better_figure_reads_its_line() -> None:
    time = Metric("time", 9000.0, "us", expected=4605.4, comparison="<=", reference=HEALTHY_US, reference_source=NVLS)
    out = Console(record=True, width=250, file=io.StringIO())
    found = cluster_report(time)
    console.render_cluster(out, found, [])
    assert f"time 9000 us: 2.3x its healthy figure ({HEALTHY_US:.4g})" in out.export_text()
    loud = Console(record=True, width=250, file=io.StringIO())
    console.render_cluster(loud, found, [], verbose=True)
    assert f"time 9000 us (pass <= 4605, healthy {HEALTHY_US:.4g}: 8x H100 SXM" in loud.export_text()


# --- console ---------------------------------------------------------------------------------------------------
def test_a_judged_figure_reads_its_pass_line_and_healthy_reference() -> None:
    assert console.format_metric(busbw(452.1)) == f"busbw{{bytes={GIB}}}: 452.1 GB/s (pass >= 408, healthy 480: {NVLS})"
    short = console.format_metric(busbw(452.1), whole=False)
    assert short == f"busbw{{bytes={GIB}}}: 452.1 GB/s (pass >= 408, healthy 480: {NVLS.split(';')[0]} ...)"
    no_reference = Metric("gpus_nvml", 8, expected=8, expected_source="--expect-gpus", comparison=">=")
    assert console.format_metric(no_reference) == "gpus_nvml: 8 (pass >= 8: --expect-gpus)"
    assert console.format_metric(Metric("shm", 256.0, "GiB", expected=">= 1.0")) == "shm: 256 GiB (expected >= 1.0 GiB)"


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("short and whole", "short and whole"),
        ("first clause; second", "first clause ..."),
        ("no clause after;  ", "no clause after"),
        ("8x H100 SXM, NVLS: NCCL maintainer, 2024-05", "8x H100 SXM, NVLS: NCCL maintainer, 2024-05"),
    ],
)
def test_a_long_source_is_cut_to_its_first_clause(source: str, shown: str) -> None:
    assert console.first_clause(source) == shown


def test_the_console_shows_a_passing_checks_figures_without_v() -> None:
    text = console_text(results())
    first = DATASHEET.split(";")[0]
    for index in range(8):
        share = round((712 + index) / 989.4 * 100)
        assert f"GPU {index} bf16 {712 + index} TFLOP/s: {share} % of its healthy figure (989.4)" in text
    assert f"busbw (bytes={GIB}) 380 GB/s: 79 % of its healthy figure (480)" in text
    assert f"busbw (bytes={GIB}) 300 GB/s: 62 % of its healthy figure (480)" in text
    assert f"time (bytes={GIB}) 4800 us: {4800 / HEALTHY_US:.2g}x its healthy figure ({HEALTHY_US:.4g})" in text
    assert "shm: 256 GiB" not in text, "a passing figure judged against text is for -v"
    assert "shm: 256 GiB (expected >= 1.0 GiB, config min_gib)" in console_text(results(), verbose=True)
    assert first not in text and "pass >=" not in text, "the citation and the pass line are for -v"
    verbose = console_text(results(), verbose=True)
    assert "GPU 0 bf16 712 TFLOP/s: 72 % of its healthy figure (989.4)" in verbose
    assert "0.6 x peak 989.4 TFLOP/s; healthy figure: NVIDIA H100 SXM datasheet" in verbose, "the citation on -v"


def test_the_rows_figures_are_capped_the_failing_gpus_first() -> None:
    check = Result(Status.FAIL, "GPU 15: slow", rows=[gpu(i, 500.0 if i == 15 else 700.0) for i in range(16)])
    check.check_id = "compute.matmul"
    text = console_text([check])
    assert f"... and {16 - console.SHOWN} more figures (-v, or the JSON report)" in text
    assert "GPU 15 bf16 500 TFLOP/s: 51 % of its healthy figure (989.4)" in text and "GPU 11 bf16" not in text
    assert "GPU 11 bf16" in console_text([check], verbose=True)


# --- HTML ------------------------------------------------------------------------------------------------------
def figure_rows(page: str) -> list[str]:
    section = page[page.index("<h2>Figures against their expectations</h2>") :]
    return re.findall(r"<tr>.*?</tr>", section[: section.index("</table>")])


def test_the_page_draws_a_bar_per_judged_figure_with_both_ticks() -> None:
    page = html.render(report(results()))
    rows = figure_rows(page)
    assert len(rows) == 8 + 3, "each GPU's figure, two busbw and the time; the text expectation has no bar"
    for row in rows:
        assert row.count("<svg") == 1 and row.count("<line") == 2, row
        assert re.search(r'<td title="[^"]*(NCCL maintainer|datasheet)', row), "the source on hover"
    assert "healthy 480 GB/s: 8x H100 SXM, NVLS, 1 GiB: NCCL maintainer" in page
    assert "healthy 989.4 TFLOP/s: NVIDIA H100 SXM datasheet" in page
    assert "shm" not in "".join(rows) and 'style="' not in page, "styles only from the hashed sheet"


def bar(row: str) -> dict[str, float]:
    """Where the bar's parts stand: the pass zone's left edge and width, the figure's width, both ticks."""
    zone, figure = re.findall(r'<rect x="([\d.]+)" y="\d+" width="([\d.]+)"', row)
    ticks = [float(x) for x in re.findall(r'<line x1="([\d.]+)"', row)]
    return {"zone_x": float(zone[0]), "zone_w": float(zone[1]), "figure": float(figure[1]), "pass": ticks[0],
            "healthy": ticks[1]}  # fmt: skip


def test_more_is_better_passes_right_of_its_line_and_less_left_of_it() -> None:
    rows = figure_rows(html.render(report(results())))
    warn, time = bar(rows[8]), bar(rows[10])
    assert warn["zone_x"] == warn["pass"] < warn["healthy"] and warn["figure"] + 2 < warn["pass"]
    assert "#f9a825" in rows[8] and "#c62828" in rows[9] and "#2e7d32" in rows[0]
    assert time["zone_x"] == 2 and time["zone_x"] + time["zone_w"] == time["pass"], "the pass zone is below the line"
    assert time["healthy"] < time["pass"] < time["figure"] + 2 <= 202


def test_an_old_figure_keeps_its_bar_and_a_hostile_source_is_escaped() -> None:
    found = results()
    old = Metric("link_gbps", 9.0, "GB/s", expected=10.0, expected_source="upper quartile")
    found[4].metrics.append(old)
    found[1].metrics[0].reference_source = '"><script>window.pwned=1</script>'
    page = html.render(report(found))
    rows = figure_rows(page)
    assert rows[-1].count("<line") == 1 and "9 GB/s of 10" in rows[-1]
    assert "<script>window" not in page and "&quot;&gt;&lt;script&gt;window.pwned=1" in page
