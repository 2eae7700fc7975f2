"""The one-line formats monitoring systems parse: Nagios plugins, Kubernetes node-problem-detector custom
plugins, and JUnit XML for CI dashboards. Each reads the report document only, and whatever a check says,
writes what its consumer takes: Nagios perfdata by the plugin guidelines' grammar, exact and within Nagios's
8 KB, the figures of failing and warning checks first; NPD's limit counted in bytes; XML 1.0 characters only."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from decimal import Decimal
from typing import Any

from gpudoctor.model import SEVERITY, Status

NAGIOS = {Status.PASS: (0, "OK"), Status.WARN: (1, "WARNING"), Status.SKIP: (0, "OK")}
NAGIOS_UNKNOWN = 3
NPD_LINE = 80  # node-problem-detector's default max_output_length, in bytes (it cuts a Go string)
PERF_UNITS = {"s": "s", "ms": "ms", "us": "us", "%": "%"}  # the units Nagios knows; others are plain numbers
# Nagios 4 keeps MAX_PLUGIN_OUTPUT_LENGTH (8192) bytes of a plugin's output: the line stays under it, and the
# figures that do not fit (the passing checks' last) are left to --prom-file.
NAGIOS_BYTES = 8000
SUMMARY_BYTES = 1000
# What XML 1.0 allows (its Char production); anything else a check says is dropped from the JUnit file.
NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


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
    head = f"GPUDOCTOR {state} - {_cut(_one_line(summary), SUMMARY_BYTES)}"
    figures = perfdata(document, NAGIOS_BYTES - len(head.encode()) - len(" | "))
    return head + (f" | {figures}" if figures else ""), code


def perfdata(document: dict[str, Any], budget: int = NAGIOS_BYTES) -> str:
    """`'label'=value[UOM];;;;` for every numeric figure (Nagios plugin guidelines), failing checks' first,
    then warning ones', then the rest in run order, as many as fit `budget` bytes."""
    kept: list[str] = []
    used = 0
    for result in sorted(document["checks"], key=lambda r: -SEVERITY[Status(r["status"])]):
        for where, metric in _figures(result):
            value = metric["value"]
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            label = "_".join([metric["name"], *where, *(str(v) for v in metric["labels"].values())])
            item = f"'{perf_label(label)}'={perf_value(value)}{PERF_UNITS.get(metric['unit'], '')};;;;"
            used += len(item.encode()) + (1 if kept else 0)
            if used > budget:
                return " ".join(kept)
            kept.append(item)
    return " ".join(kept)


def perf_label(text: str) -> str:
    """A label as the guidelines allow it inside quotes: no `=`, a quote written twice, one line, no `|`."""
    return _one_line(text).replace("=", "_").replace("'", "''")


def perf_value(value: float) -> str:
    """The figure exactly, in the guidelines' `[-0-9.]` (no exponent: 1234567 stays 1234567, 1.2e-06 is
    0.0000012); `U` where there is no number (NaN, infinity)."""
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "U"
    if value.is_integer():
        return str(int(value))
    return format(Decimal(repr(value)), "f")


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
    return _cut(_one_line(text), limit)


def _cut(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, cut between characters, `...` where it was cut."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode(errors="ignore") + "..."


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
        hostname=_xml(document["host"]),
    )
    for result in document["checks"]:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_xml(f"gpudoctor.{result['check_id'].split('.')[0]}"),
            name=_xml(_label(result)),
            time=f"{result['duration_s']:.3f}",
        )
        status, text = result["status"], _xml(result["summary"])
        if status == "fail":
            ET.SubElement(case, "failure", message=text, type="fail").text = _xml(_details(result))
        elif status in ("error", "timeout"):
            ET.SubElement(case, "error", message=text, type=status).text = _xml(_details(result))
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
    while fix:
        lines += [fix["why"], *(f"$ {c}" for c in fix["commands"])]
        fix = fix.get("instead")
        if fix:
            lines.append("or:")
    return "\n".join(lines)


def _xml(text: str) -> str:
    """Text as XML 1.0 may hold it: control characters (a terminal colour, a bell, NUL) and lone surrogates
    dropped; markup characters are escaped by the writer."""
    return NOT_XML.sub("", text)
