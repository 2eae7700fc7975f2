"""The versioned JSON report: one document with every result, the overall status and the exit code."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.errors import InputError
from gpudoctor.model import (
    SEVERITY,
    Cause,
    Result,
    Row,
    Status,
    cause_from_dict,
    finite_number,
    result_from_dict,
    worst,
)
from gpudoctor.report.exits import EXIT_FAIL, EXIT_OK, exit_code

# 2: metric labels, per-row metrics, the cluster object. 3: rows name a link's peer and whether a suspicion was
# confirmed; the cluster object lists the unconfirmed nodes, the slow links and every finding worst first.
# 5: the causes the diagnosis found, and on results (rows too) what a verdict rests on, the cause that explains
# it and its raw detail.
SCHEMA_VERSION = 5


def overall_status(results: list[Result], causes: list[Cause] | tuple[Cause, ...] = ()) -> Status:
    judged = [r.status for r in results if r.status != Status.SKIP] + [c.status for c in causes]
    return worst(judged) if judged else Status.SKIP


def report_status(
    results: list[Result], interrupted: bool, drains: bool = False, causes: list[Cause] | tuple[Cause, ...] = ()
) -> str:
    """A report's status: `error` when interrupted (not every check was judged), else the worst judged result or
    cause, and at least `fail` where rank 0 names nodes to drain."""
    if interrupted:
        return Status.ERROR.value
    status = overall_status(results, causes)
    return Status.FAIL.value if drains and status in (Status.PASS, Status.WARN, Status.SKIP) else status.value


def counts(results: list[Result]) -> dict[str, int]:
    return {s.value: sum(r.status == s for r in results) for s in Status}


def build(
    results: list[Result],
    meta: dict[str, Any],
    code: int,
    interrupted: bool,
    causes: list[Cause] | tuple[Cause, ...] = (),
) -> dict[str, Any]:
    """The report: the causes the diagnosis found first, then every result. An interrupted run's status is
    `error` whatever ran before: not every check was judged. Every string in it is harmless to a terminal
    (vetting.harmless), as a saved one is when read back."""
    from gpudoctor.vetting import harmless_strings

    return harmless_strings(
        {
            "schema_version": SCHEMA_VERSION,
            "tool": "gpudoctor",
            "tool_version": __version__,
            **meta,
            "status": report_status(results, interrupted, causes=causes),
            "exit_code": code,
            "interrupted": interrupted,
            "counts": counts(results),
            "causes": [c.to_dict() for c in causes],
            "checks": [r.to_dict() for r in results],
        }
    )


def build_cluster(
    results: list[Result],
    nodes: list[dict[str, Any]],
    meta: dict[str, Any],
    strict: bool,
    interrupted: bool,
    launcher: str,
    credential: str = "none",
    causes: list[Cause] | tuple[Cause, ...] = (),
) -> dict[str, Any]:
    """Rank 0's document: the cross-node results, and a `cluster` object with every node and what the results
    say of them. `busy`: nodes whose GPUs another process used (their own diagnosis says so): named, never
    drained for it, and their figures not judged as hardware. Drained (`failed_nodes`): lost, failed their own
    checks, or named by a failing row whose suspicion was not refuted by a re-test; never a node whose message
    a stranger replaced (`tampered`: such a node is not judged, and the run says someone outside it writes to
    its store). `stragglers`: named slow (a figure judged against a reference). `unconfirmed`: slow once, fine
    when re-tested; never drained. `links`: slow links whose suspicion held (never a node's fault; an unconfirmed
    one stays among the findings). It exits 1 if any node is to be drained, else by the usual rules over the
    cross-node results and the causes."""
    findings = _findings(results, nodes)
    on_node = [f for f in findings if f["node"] and not f["peer"]]
    held = [f for f in on_node if f["confirmed"] is not False]
    tampered = {n["name"] for n in nodes if n.get("tampered")}  # not judged: never drained for a stranger's doing
    failed = {n["name"] for n in nodes if (n.get("lost") or n.get("exit_code")) and n["name"] not in tampered}
    failed |= {f["node"] for f in held if Status(f["status"]).is_failure} - tampered
    stragglers = {f["node"] for f in held if f["figure"] and f["status"] in (Status.WARN.value, Status.FAIL.value)}
    unconfirmed = {f["node"] for f in on_node if f["confirmed"] is False} - failed - stragglers
    code = exit_code(results, strict, interrupted, causes)
    if failed and code == EXIT_OK:
        code = EXIT_FAIL
    if strict and code == EXIT_OK and any(n.get("status") == Status.WARN.value for n in nodes):
        code = EXIT_FAIL
    document = build(results, meta, code, interrupted, causes)
    document["status"] = report_status(results, interrupted, drains=bool(failed), causes=causes)
    named: dict[str, list[str]] = {}
    for finding in findings:
        for node in {finding["node"], finding["peer"]} - {None}:
            named.setdefault(node, []).append(f"{finding['check_id']}: {finding['summary']}")
    busy = {n["name"]: said for n in nodes if (said := busy_with(n))} if nodes else {}
    for name, said in busy.items():
        named.setdefault(name, []).append(said)
    warned = stragglers | unconfirmed | tampered | set(busy)
    document["cluster"] = {
        "world_size": len(nodes),
        "launcher": launcher,
        "credential": credential,
        "tampered": sorted(tampered),
        "nodes": [
            {
                "name": n["name"],
                "rank": n["rank"],
                "status": n.get("status") or Status.ERROR.value,
                "exit_code": n.get("exit_code"),
                "lost": n.get("lost") or None,
                "verdict": _verdict(n["name"], failed, warned, named),
                "causes": n.get("causes") or [],
                "checks": n.get("checks") or [],
            }
            for n in nodes
        ],
        "failed_nodes": sorted(failed),
        "busy": sorted(busy),
        "stragglers": sorted(stragglers),
        "unconfirmed": sorted(unconfirmed),
        "links": list(
            dict.fromkeys(f"{f['node']} -> {f['peer']}" for f in findings if f["peer"] and f["confirmed"] is not False)
        ),
        "findings": findings,
        "checks": document["checks"],
    }
    return document


# The causes of a node's own diagnosis that say another process used its GPUs.
BUSY_CAUSES = ("gpu-in-use", "gpu-memory-held")


def busy_with(node: dict[str, Any]) -> str:
    """What another process did on a node's GPUs, as its own diagnosis said it ("" where nothing)."""
    causes = [c for c in node.get("causes") or [] if isinstance(c, dict)]
    return "; ".join(f"{c['id']}: {c['summary']}" for c in causes if str(c.get("id", "")).startswith(BUSY_CAUSES))


def _verdict(name: str, failed: set[str], warned: set[str], named: dict[str, list[str]]) -> dict[str, Any]:
    """Rank 0's verdict about one node: fail (drain it), warn (named, never drained) or pass, with the
    findings that name it (a node is also named by a slow link it is one end of)."""
    status = Status.FAIL if name in failed else Status.WARN if name in warned else Status.PASS
    return {"status": status.value, "findings": named.get(name, []) if status != Status.PASS else []}


def _findings(results: list[Result], nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row that names a node or a link and is not a pass, and every lost node no row names; worst
    first (by status, then by how far its figure is below its reference)."""
    found = [
        {
            "check_id": result.check_id,
            "node": row.node,
            "peer": row.peer,
            "status": row.status.value,
            "confirmed": row.confirmed,
            "summary": row.summary,
            "figure": _judged_figure(row),
        }
        for result in results
        for row in result.rows
        if row.node and row.status not in (Status.PASS, Status.SKIP)
    ]
    named = {f["node"] for f in found}
    found += [
        {
            "check_id": "cluster.nodes",
            "node": n["name"],
            "peer": None,
            "status": Status.FAIL.value,
            "confirmed": None,
            "summary": f"lost: {n['lost']}",
            "figure": None,
        }
        for n in nodes
        if n.get("lost") and n["name"] not in named
    ]
    return sorted(found, key=_worst_first)


def _worst_first(finding: dict[str, Any]) -> tuple[int, float, str, str]:
    return (-SEVERITY[Status(finding["status"])], _ratio(finding["figure"]), finding["node"], finding["peer"] or "")


def _judged_figure(row: Row) -> dict[str, Any] | None:
    judged = [m for m in row.metrics if m.expected is not None] or row.metrics
    return asdict(judged[0]) if judged else None


def _ratio(figure: dict[str, Any] | None) -> float:
    """How far a figure stands from its pass line, below 1 the worse side: value over line, or line over value
    for a figure that must stay at or under its line (a time, an error count)."""
    if not figure or not finite_number(figure["value"]) or not finite_number(figure["expected"]):
        return 1.0
    value, expected = figure["value"], figure["expected"]
    if figure.get("comparison") == "<=":
        return expected / value if value > 0 else 1.0
    return value / expected if expected else 1.0


class ReportError(InputError):
    """A file that is not a report gpudoctor can read; the message names the file and why."""


REQUIRED = ("status", "exit_code", "counts", "checks", "host", "level", "started_at", "duration_s")


def load(path: Path) -> tuple[dict[str, Any], list[Result]]:
    """A saved report (`--json`, `-o`) and its results, checked as a check's answer is; the document's results
    rewritten from them, so a report of an older schema reads as this one's."""
    from gpudoctor.files import read_json
    from gpudoctor.vetting import NotAResult, harmless_strings, vetted

    document = harmless_strings(read_json(path, "report", ReportError))
    if not isinstance(document, dict) or document.get("tool") != "gpudoctor":
        raise ReportError(f'{path} is not a gpudoctor report (no "tool": "gpudoctor")')
    if not isinstance(document.get("schema_version"), int) or document["schema_version"] > SCHEMA_VERSION:
        raise ReportError(f"{path} has schema_version {document.get('schema_version')!r}; this gpudoctor reads up to "
                          f"{SCHEMA_VERSION}: render it with the gpudoctor that wrote it")  # fmt: skip
    missing = [key for key in REQUIRED if key not in document]
    if missing:
        raise ReportError(f"{path} is not a whole gpudoctor report: no {', '.join(missing)}")
    wrong = _field_problem(document) or ("" if isinstance(document["checks"], list) else "checks is not a list")
    if wrong:
        raise ReportError(f"{path} is not a gpudoctor report as it wrote it: {wrong}")
    cluster = document.get("cluster")
    problem = _cluster_problem(cluster) if cluster is not None else ""
    if problem:
        raise ReportError(f"{path} is not a whole cluster report: {problem}")
    try:
        results = [vetted(result_from_dict(c))[0] for c in document["checks"]]
        document["checks"] = [r.to_dict() for r in results]
        causes = read_causes(document.get("causes", []))
        document["causes"] = [c.to_dict() for c in causes]
        for node in cluster["nodes"] if cluster else []:
            node["checks"] = [vetted(result_from_dict(c))[0].to_dict() for c in node["checks"]]
            node["causes"] = [c.to_dict() for c in read_causes(node.get("causes", []))]
    except (NotAResult, TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ReportError(f"{path}: a check or cause in it cannot be read: {exc}") from None
    if cluster:
        cluster["checks"] = document["checks"]  # as build_cluster writes it
        cluster.setdefault("busy", [])
    _recount(document, results, causes)
    return document, results


def read_causes(saved: Any) -> list[Cause]:
    """The causes a saved report holds (none before schema 5), checked as a check's answer is."""
    from gpudoctor.vetting import NotAResult, vetted_cause

    if not isinstance(saved, list):
        raise NotAResult(f"causes that are {type(saved).__name__}, not a list")
    return [vetted_cause(cause_from_dict(c)) for c in saved]


NAME_LISTS = ("failed_nodes", "stragglers", "unconfirmed", "links")  # unconfirmed and links: schema 3 on


def _cluster_problem(cluster: Any) -> str:
    """What is wrong with a saved report's cluster part, as far as the renderers and drain read it; a part of
    schema 2 (no unconfirmed nodes, links, findings or verdicts) is filled in as this schema writes it."""
    if not isinstance(cluster, dict):
        return "its cluster part is not an object"
    if not isinstance(cluster.get("nodes"), list):
        return "cluster.nodes is not a list"
    for key in (*NAME_LISTS, "findings"):
        if not isinstance(cluster.setdefault(key, []), list):
            return f"cluster.{key} is not a list"
    odd = next((key for key in NAME_LISTS if not all(isinstance(name, str) for name in cluster[key])), None)
    if odd:
        return f"cluster.{odd} holds something that is not a node name"
    if not all(isinstance(f, dict) and isinstance(f.get("check_id"), str) for f in cluster["findings"]):
        return "cluster.findings holds something that is not a finding"
    for finding in cluster["findings"]:
        for key in ("node", "peer", "confirmed", "figure"):
            finding.setdefault(key, None)
        if not _finding_ok(finding):
            return f"cluster.findings holds a {finding['check_id']!r:.40} finding of the wrong shape"
    return next(filter(None, (_node_problem(node, cluster) for node in cluster["nodes"])), "")


def _finding_ok(finding: dict[str, Any]) -> bool:
    return (
        _figure_ok(finding["figure"])
        and finding.get("status") in STATUS_WORDS
        and isinstance(finding.get("summary"), str)
        and all(isinstance(finding[key], str | None) for key in ("node", "peer"))
        and isinstance(finding["confirmed"], bool | None)
    )


def _figure_ok(figure: Any) -> bool:
    """A finding's figure as the renderers read it: a number, its pass line (a number, or text as older checks
    and plugins wrote it), and, from reports that carry them, how it must stand against that line and the
    healthy figure with its source (filled with None where a report written before them lacks them)."""
    if figure is None:
        return True
    if not isinstance(figure, dict):
        return False
    for key in ("expected", "expected_source", "comparison", "reference", "reference_source"):
        figure.setdefault(key, None)
    return (
        isinstance(figure.get("name"), str)
        and isinstance(figure.get("unit", ""), str)
        and finite_number(figure.get("value"))
        and (figure["expected"] is None or isinstance(figure["expected"], str) or finite_number(figure["expected"]))
        and figure["comparison"] in (None, ">=", "<=")
        and (figure["reference"] is None or finite_number(figure["reference"]))
        and all(isinstance(figure[key], str | None) for key in ("expected_source", "reference_source"))
    )


def _node_problem(node: Any, cluster: dict[str, Any]) -> str:
    if not isinstance(node, dict) or not isinstance(node.get("name"), str):
        return "cluster.nodes holds a node without a name"
    node.setdefault("lost", None)
    if not isinstance(node.setdefault("checks", []), list):
        return f"node {node['name']}'s checks are not a list"
    verdict = node.setdefault("verdict", _schema_2_verdict(node["name"], cluster))
    if not isinstance(verdict, dict) or verdict.get("status") not in ("pass", "warn", "fail"):
        return f"node {node['name']}'s verdict is not a verdict"
    if not isinstance(verdict.setdefault("findings", []), list) or not all(
        isinstance(f, str) for f in verdict["findings"]
    ):
        return f"node {node['name']}'s verdict.findings is not a list of text"
    if node.setdefault("status", "error") not in STATUS_WORDS:
        return f"node {node['name']}'s status {node['status']!r} is not a status"
    if not isinstance(node["lost"], str | None) or not isinstance(node.setdefault("exit_code", None), int | None):
        return f"node {node['name']}'s lost or exit_code is of the wrong type"
    return ""


STATUS_WORDS = tuple(s.value for s in Status)
FIELD_TYPES: dict[str, Any] = {
    "host": str,
    "started_at": str,
    "level": str,
    "duration_s": int | float,
    "interrupted": bool,
    "source": str,
}


def _field_problem(document: dict[str, Any]) -> str:
    """The first top-level field of a saved report that is of the wrong type ("" if none is)."""
    document.setdefault("interrupted", False)
    document.setdefault("source", "live")  # reports before the field was written were all live runs
    for key, kind in FIELD_TYPES.items():
        value = document[key]
        if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
            return f"{key} is {value!r:.40} (type {type(value).__name__})"
    try:
        datetime.fromisoformat(document["started_at"])
    except ValueError:
        return f"started_at is {document['started_at']!r:.40}, not a date and time"
    return ""


def _recount(document: dict[str, Any], results: list[Result], causes: list[Cause]) -> None:
    """Status, counts and exit code from the results and causes themselves: a saved figure is not trusted. A
    saved exit code of 1 over warnings stands (that run was --strict); a cluster report with nodes to drain
    exits 1."""
    interrupted = document["interrupted"]
    warned = any(r.status == Status.WARN for r in results) or any(c.status == Status.WARN for c in causes)
    strict = document.get("exit_code") == EXIT_FAIL and warned
    code = exit_code(results, strict, interrupted, causes)
    drains = bool(document.get("cluster") and document["cluster"]["failed_nodes"])
    document.update(
        status=report_status(results, interrupted, drains, causes),
        counts=counts(results),
        exit_code=EXIT_FAIL if drains and code == EXIT_OK else code,
    )


def _schema_2_verdict(name: str, cluster: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 node's verdict from what that report named: drained, straggling or neither."""
    status = "fail" if name in cluster["failed_nodes"] else "warn" if name in cluster["stragglers"] else "pass"
    return {"status": status, "findings": []}


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


def schema() -> dict[str, Any]:
    """The JSON Schema every report validates against; it ships in the package."""
    return json.loads(resources.files("gpudoctor.data").joinpath("report.schema.json").read_text())
