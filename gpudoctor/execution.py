"""Running a plan: the checks in order under SIGTERM handling and optional progress, the report's metadata,
and the report itself. The Python API (probe), the command line and cluster mode all run plans through here.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudoctor.cluster.context import ClusterContext
    from gpudoctor.cluster.env import ClusterEnv
    from gpudoctor.config import Config
    from gpudoctor.context import Options
    from gpudoctor.model import Result
    from gpudoctor.registry import CheckSpec
    from gpudoctor.runner import Run


@dataclass
class Plan:
    """A run, fully checked before any check runs: what to run, on which facts, judged how."""

    options: Options
    specs: list[CheckSpec]  # in running order
    config: Config
    facts: dict[str, Any]
    source: str  # "live", or "snapshot:PATH"
    strict: bool
    broken: list[tuple[str, str]]  # plugins that failed to load
    cluster: ClusterEnv | None = None  # cluster mode: where this node stands
    cluster_settings: dict[str, Any] = field(default_factory=dict)  # cluster.nodes' settings: waits, fractions


@dataclass
class Report:
    """One run: its results and the JSON report document built from them."""

    results: list[Result]
    document: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return int(self.document["exit_code"])


# Events a run reports as it goes: ("start" or "done", check id, title).
Hook = Callable[[str, str, str], None]


def execute(
    plan: Plan,
    show_progress: bool,
    specs: list[CheckSpec] | None = None,
    cluster: ClusterContext | None = None,
    on_event: Hook | None = None,
) -> Run:
    from rich.console import Console

    from gpudoctor.report.console import LiveProgress
    from gpudoctor.runner import broken_plugin_results, run_checks

    specs = plan.specs if specs is None else specs
    progress = LiveProgress(Console(stderr=True), len(specs))

    def hook(event: str, check_id: str, title: str) -> None:
        if on_event:
            on_event(event, check_id, title)
        if show_progress:
            progress(event, check_id, title)

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        with progress.context() if show_progress else nullcontext():
            run = run_checks(specs, plan.facts, plan.options, plan.config.settings, hook, cluster)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if cluster is None or cluster.leader:
        run.results = broken_plugin_results(plan.broken) + run.results
    if "paste" in plan.facts:
        from gpudoctor.paste.evidence import conflict_results

        run.results = conflict_results(plan.facts) + run.results
    return run


def single_node(plan: Plan, show_progress: bool = False) -> Report:
    """The whole run on this node alone, and its report."""
    from gpudoctor.report import document as doc

    started_at, started = now(), time.monotonic()
    run = execute(plan, show_progress)
    code = doc.exit_code(run.results, plan.strict, run.interrupted)
    return Report(run.results, doc.build(run.results, meta(plan, started_at, started), code, run.interrupted))


def meta(plan: Plan, started_at: str, started: float) -> dict[str, Any]:
    return {
        "host": host(plan.facts),
        "started_at": started_at,
        "duration_s": round(time.monotonic() - started + plan.facts.get("gather_s", 0.0), 3),
        "level": plan.options.level,
        "source": plan.source,
        **({"paste": plan.facts["paste"]} if "paste" in plan.facts else {}),
    }


def host(facts: dict[str, Any]) -> str:
    """The node the facts are from: an nvidia-smi capture names only its file, a paste its file and what it
    held."""
    capture = facts.get("capture")
    if capture and capture.get("format") == "pasted text":
        return f"{capture['file']} (paste: {', '.join(capture['kinds'])})"
    if capture:
        return f"{capture['file']} (nvidia-smi capture)"
    return facts["system"].get("hostname") or os.uname().nodename


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
