"""The one-line formats monitoring systems parse: Nagios plugins, Kubernetes node-problem-detector custom
plugins, and JUnit XML for CI dashboards. Each reads the report document only."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from gpudoctor.model import SEVERITY, Status

NAGIOS = {Status.PASS: (0, "OK"), Status.WARN: (1, "WARNING"), Status.SKIP: (0, "OK")}
NAGIOS_UNKNOWN = 3
NPD_LINE = 80  # node-problem-detector's default max_output_length
PERF_UNITS = {"s": "s", "ms": "ms", "us": "us", "%": "%"}  # the units Nagios knows; others are plain numbers
PERFDATA_CHARS = 7000  # Nagios keeps 8 KB of a plugin's output; figures past this are left to --prom-file


def worst_finding(document: dict[str, Any]) -> dict[str, Any] | None:
    """The most severe non-passing result, first in run order among equals."""
    bad = [r for r in document["checks"] if r["status"] not in ("pass", "skip")]
    return max(bad, key=lambda r: SEVERITY[Status(r["status"])], default=None)


def _label(result: dict[str, Any]) -> str:
    return result["check_id"] + (f":{result['aspect']}" if result["aspect"] else "")


def nagios(document: dict[str, Any]) -> tuple[str, int]:
    """`GPUDOCTOR STATE - summary | perfdata`, and the plugin exit code: 0 OK, 1 WARNING, 2 CRITICAL."""
    status = Status(document["status"])
    code, state = NAGIOS.get(status, (2, "CRITICAL"))
    finding = worst_finding(document)
    counts = document["counts"]
    summary = f"{counts['pass']} passed, {counts['warn']} warned, " + (
        f"{counts['fail'] + counts['error'] + counts['timeout']} failed"
    )
    if finding:
        summary = f"{_label(finding)}: {finding['summary']} ({summary})"
    return f"GPUDOCTOR {state} - {_one_line(summary)} | {perfdata(document)}".rstrip(" |"), code


def perfdata(document: dict[str, Any]) -> str:
    """`'label'=value[UOM];warn;crit;min;max` for every numeric figure (Nagios plugin guidelines)."""
    items = []
    for result in document["checks"]:
        for where, metric in _figures(result):
            value = metric["value"]
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            label = "_".join([metric["name"], *where, *(str(v) for v in metric["labels"].values())])
            items.append(f"'{label}'={value:g}{PERF_UNITS.get(metric['unit'], '')};;;;")
    text = " ".join(items)
    return text if len(text) <= PERFDATA_CHARS else text[: text.rfind(" ", 0, PERFDATA_CHARS)]


def _figures(result: dict[str, Any]) -> list[tuple[list[str], dict[str, Any]]]:
    figures = [([], m) for m in result["metrics"]]
    for row in result["rows"]:
        place = [f"gpu{row['index']}"] if row["index"] is not None else [row.get("node") or ""]
        figures += [(place, m) for m in row["metrics"]]
    return figures


def npd(document: dict[str, Any]) -> tuple[str, int]:
    """A node-problem-detector custom plugin's answer: exit 0 healthy, 1 a problem (the run's own exit code
    says which, so --strict counts warnings); one line of at most 80 characters naming the worst finding."""
    finding = worst_finding(document)
    if document["exit_code"] == 0:
        line = f"gpudoctor: {document['counts']['pass']} checks passed"
        return _fit(line + (f"; warning {_label(finding)}" if finding else "")), 0
    return _fit(f"{_label(finding)}: {finding['summary']}" if finding else "gpudoctor: a problem"), 1


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().replace("|", "/")


def _fit(text: str, limit: int = NPD_LINE) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def junit(document: dict[str, Any]) -> str:
    """JUnit XML: one testcase per result (fail -> failure, error and timeout -> error, skip -> skipped)."""
    counts = document["counts"]
    suite = ET.Element(
        "testsuite",
        name="gpudoctor",
        tests=str(len(document["checks"])),
        failures=str(counts["fail"]),
        errors=str(counts["error"] + counts["timeout"]),
        skipped=str(counts["skip"]),
        time=f"{document['duration_s']:.3f}",
        timestamp=document["started_at"],
        hostname=document["host"],
    )
    for result in document["checks"]:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"gpudoctor.{result['check_id'].split('.')[0]}",
            name=_label(result),
            time=f"{result['duration_s']:.3f}",
        )
        status, text = result["status"], result["summary"]
        if status == "fail":
            ET.SubElement(case, "failure", message=text, type="fail").text = _details(result)
        elif status in ("error", "timeout"):
            ET.SubElement(case, "error", message=text, type=status).text = _details(result)
        elif status == "skip":
            ET.SubElement(case, "skipped", message=text)
        else:
            ET.SubElement(case, "system-out").text = text
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _details(result: dict[str, Any]) -> str:
    fix = result["remediation"]
    lines = [result["summary"], *(f"{r['summary']}" for r in result["rows"] if r["status"] != "pass")]
    if fix:
        lines += [fix["why"], *(f"$ {c}" for c in fix["commands"])]
    return "\n".join(lines)
