"""The Nagios plugin format: `GPUDOCTOR STATE - summary | perfdata`, one line a monitoring agent parses, with
the plugin guidelines' exit codes (exits.nagios_code). The perfdata follows the guidelines' grammar exactly,
stays within Nagios's 8 KB, and gives the figures of failing and warning checks first."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from gpudoctor.model import SEVERITY, Status
from gpudoctor.report.exits import NAGIOS_CRITICAL, NAGIOS_OK, NAGIOS_UNKNOWN, NAGIOS_WARNING, nagios_code
from gpudoctor.report.monitoring import cut, label, one_line, worst_finding

STATES = {NAGIOS_OK: "OK", NAGIOS_WARNING: "WARNING", NAGIOS_CRITICAL: "CRITICAL", NAGIOS_UNKNOWN: "UNKNOWN"}
PERF_UNITS = {"s": "s", "ms": "ms", "us": "us", "%": "%"}  # the units Nagios knows; others are plain numbers
# Nagios 4 keeps MAX_PLUGIN_OUTPUT_LENGTH (8192) bytes of a plugin's output: the line stays under it, and the
# figures that do not fit (the passing checks' last) are left to --prom-file.
NAGIOS_BYTES = 8000
SUMMARY_BYTES = 1000


def render(document: dict[str, Any]) -> str:
    """The plugin's answer as stdout carries it."""
    return line(document) + "\n"


def line(document: dict[str, Any]) -> str:
    """`GPUDOCTOR STATE - summary | perfdata`: the worst finding first, then the counts."""
    finding = worst_finding(document)
    counts = document["counts"]
    summary = f"{counts['pass']} passed, {counts['warn']} warned, " + (
        f"{counts['fail'] + counts['error'] + counts['timeout']} failed"
    )
    if finding:
        summary = f"{label(finding)}: {finding['summary']} ({summary})"
    head = f"GPUDOCTOR {STATES[nagios_code(document)]} - {cut(one_line(summary), SUMMARY_BYTES)}"
    figures = perfdata(document, NAGIOS_BYTES - len(head.encode()) - len(" | "))
    return head + (f" | {figures}" if figures else "")


def unjudged(said: str) -> tuple[str, int]:
    """The plugin's answer when nothing was judged (bad input, a bug, an interruption): UNKNOWN, saying why."""
    return f"GPUDOCTOR {STATES[NAGIOS_UNKNOWN]} - {said}", NAGIOS_UNKNOWN


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
            name = "_".join([metric["name"], *where, *(str(v) for v in metric["labels"].values())])
            item = f"'{perf_label(name)}'={perf_value(value)}{PERF_UNITS.get(metric['unit'], '')};;;;"
            used += len(item.encode()) + (1 if kept else 0)
            if used > budget:
                return " ".join(kept)
            kept.append(item)
    return " ".join(kept)


def perf_label(text: str) -> str:
    """A label as the guidelines allow it inside quotes: no `=`, a quote written twice, one line, no `|`."""
    return one_line(text).replace("=", "_").replace("'", "''")


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
