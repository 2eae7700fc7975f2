"""The versioned JSON report: one document with every result, the overall status and the exit code."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gpudoctor import __version__
from gpudoctor.model import Result, Status, worst

SCHEMA_VERSION = 2  # 2: metric labels, per-row metrics, the cluster object
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def overall_status(results: list[Result]) -> Status:
    judged = [r.status for r in results if r.status != Status.SKIP]
    return worst(judged) if judged else Status.SKIP


def exit_code(results: list[Result], strict: bool, interrupted: bool) -> int:
    """0 no failures (warnings allowed), 1 any fail/error/timeout (or warning with --strict), 130 interrupted."""
    if interrupted:
        return EXIT_INTERRUPTED
    if any(r.status.is_failure for r in results):
        return EXIT_FAIL
    if strict and any(r.status == Status.WARN for r in results):
        return EXIT_FAIL
    return EXIT_OK


def build(results: list[Result], meta: dict[str, Any], code: int, interrupted: bool) -> dict[str, Any]:
    counts = {s.value: sum(r.status == s for r in results) for s in Status}
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "gpudoctor",
        "tool_version": __version__,
        **meta,
        "status": overall_status(results).value,
        "exit_code": code,
        "interrupted": interrupted,
        "counts": counts,
        "checks": [r.to_dict() for r in results],
    }


def build_cluster(
    results: list[Result],
    nodes: list[dict[str, Any]],
    meta: dict[str, Any],
    strict: bool,
    interrupted: bool,
    launcher: str,
) -> dict[str, Any]:
    """Rank 0's document: the cross-node results, and a `cluster` object with every node, the nodes to drain
    (lost, failed their own checks, or named by a failed cross-node result) and the stragglers. It exits 1 if
    any node failed or was lost, else by the usual rules over the cross-node results and the nodes' verdicts."""
    failed = {n["name"] for n in nodes if n.get("lost") or n.get("exit_code")}
    failed |= {row.node for r in results for row in r.rows if row.node and row.status.is_failure}
    stragglers = {row.node for r in results if r.aspect == "stragglers" for row in r.rows if row.status != Status.PASS}
    code = exit_code(results, strict, interrupted)
    if failed and code == EXIT_OK:
        code = EXIT_FAIL
    if strict and code == EXIT_OK and any(n.get("status") == Status.WARN.value for n in nodes):
        code = EXIT_FAIL
    document = build(results, meta, code, interrupted)
    if failed and document["status"] in (Status.PASS.value, Status.WARN.value, Status.SKIP.value):
        document["status"] = Status.FAIL.value
    document["cluster"] = {
        "world_size": len(nodes),
        "launcher": launcher,
        "nodes": [
            {
                "name": n["name"],
                "rank": n["rank"],
                "status": n.get("status") or Status.ERROR.value,
                "exit_code": n.get("exit_code"),
                "lost": n.get("lost") or None,
                "checks": n.get("checks") or [],
            }
            for n in nodes
        ],
        "failed_nodes": sorted(failed),
        "stragglers": sorted(stragglers),
        "checks": document["checks"],
    }
    return document


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


def schema() -> dict[str, Any]:
    """The JSON Schema every report validates against; it ships in the package."""
    return json.loads(resources.files("gpudoctor.data").joinpath("report.schema.json").read_text())
