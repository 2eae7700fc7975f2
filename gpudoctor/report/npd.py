"""The Kubernetes node-problem-detector custom plugin format: one line of at most NPD_LINE bytes naming the
worst finding, and the plugin's exit code (exits.npd_code: 0 healthy, 1 a problem)."""

from __future__ import annotations

from typing import Any

from gpudoctor.report.exits import NPD_OK, npd_code
from gpudoctor.report.monitoring import cut, label, one_line, worst_finding

NPD_LINE = 80  # node-problem-detector's default max_output_length, in bytes (it cuts a Go string)


def render(document: dict[str, Any]) -> str:
    """The plugin's answer as stdout carries it."""
    return line(document) + "\n"


def line(document: dict[str, Any]) -> str:
    """The passing count (and the worst warning) when healthy, else the worst finding: within NPD_LINE bytes."""
    finding = worst_finding(document)
    if npd_code(document) == NPD_OK:
        said = f"gpudoctor: {document['counts']['pass']} checks passed"
        said += f"; warning {label(finding)}" if finding else ""
    else:
        said = f"{label(finding)}: {finding['summary']}" if finding else "gpudoctor: a problem"
    return cut(one_line(said), NPD_LINE)
