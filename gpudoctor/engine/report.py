"""A run's report: the one place the engine assembles the JSON document (report.document holds its format).

A node's report (alone, or its own part of a cluster run) and rank 0's cluster report are two branches of
`report`; every run, single-node or cluster, reaches its document through it.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudoctor.engine.planning import Plan
    from gpudoctor.model import Result


@dataclass
class Report:
    """One run: its results and the JSON report document built from them."""

    results: list[Result]
    document: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return int(self.document["exit_code"])


@dataclass(frozen=True)
class Started:
    """When a run started: the wall-clock time the report shows, and the monotonic one its duration is from."""

    at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    monotonic: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class NodesPart:
    """What rank 0's cluster report adds: every node's summary, the launcher, how the run's store was sealed."""

    summaries: list[dict[str, Any]]
    launcher: str
    credential: str = "none"


def report(
    plan: Plan,
    results: list[Result],
    started: Started,
    interrupted: bool,
    nodes: NodesPart | None = None,
    observations: list[dict[str, Any]] | None = None,
) -> Report:
    """The report of a run: this node's (alone, or its part of a cluster run), or with `nodes` rank 0's cluster
    report, whose exit code also says whether any node is to be drained. The diagnosis reads the results first
    (with who used the GPUs around each workload, `observations`) and is the one place they are rewritten (a
    paste's evidence, a shortened run's verdicts, findings folded beneath their cause): the causes lead the report.
    It rewrites a copy: `results` stay as the checks returned them, so a node of a cluster run, which reports twice
    from the same results, gets the same diagnosis both times."""
    from gpudoctor.diagnosis import Evidence, diagnose
    from gpudoctor.report import document as doc
    from gpudoctor.report.exits import exit_code
    from gpudoctor.vetting import gated

    stamp = meta(plan, started)
    live = plan.source.startswith("live")
    results = [fresh(r) for r in results]
    evidence = Evidence(results, plan.facts, observations or [], nodes.summaries if nodes else [], live)
    results, causes = gated(results, diagnose(evidence))
    if nodes is None:
        code = exit_code(results, plan.strict, interrupted, causes)
        return Report(results, doc.build(results, stamp, code, interrupted, causes))
    built = doc.build_cluster(
        results, nodes.summaries, stamp, plan.strict, interrupted, nodes.launcher, nodes.credential, causes
    )
    return Report(results, built)


def fresh(result: Result) -> Result:
    """A copy of `result` the diagnosis may rewrite: the result, its rows, their figures and its lists of text are
    its own (what the diagnosis changes); a remediation is replaced there, never changed, so it is shared."""
    copied = copy.copy(result)
    copied.rows = [copy.copy(row) for row in result.rows]
    for row in copied.rows:
        row.metrics = [copy.copy(m) for m in row.metrics]
    copied.metrics = [copy.copy(m) for m in result.metrics]
    copied.quotes, copied.revised_by = [*result.quotes], [*result.revised_by]
    return copied


def meta(plan: Plan, started: Started) -> dict[str, Any]:
    """The report's account of the run: where, when, how long (fact gathering included), at which level, on
    which facts."""
    return {
        "host": host(plan.facts),
        **({"node": plan.node} if plan.node else {}),
        "started_at": started.at,
        "duration_s": round(time.monotonic() - started.monotonic + plan.facts.get("gather_s", 0.0), 3),
        "level": plan.options.level,
        "source": plan.source,
        **({"paste": plan.facts["paste"]} if "paste" in plan.facts else {}),
    }


def host(facts: dict[str, Any]) -> str:
    """The node the facts are from: an nvidia-smi capture names only its file, a paste its file and what it
    held."""
    capture = facts.get("capture")
    if capture and capture.get("format") == "pasted text":
        return f"{capture['file']} (paste: {', '.join(capture['kinds']) or 'nothing read'})"
    if capture:
        return f"{capture['file']} (nvidia-smi capture)"
    return facts["system"].get("hostname") or os.uname().nodename
