"""Running a plan's checks: in order, under SIGTERM handling and optional progress, with the results the run
itself adds (plugins that did not load); and a single node's whole run. What a paste adds and how it changes a
verdict is the diagnosis's (gpudoctor/diagnosis/revisions.py).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from gpudoctor.engine.report import Report, Started, report

if TYPE_CHECKING:
    from gpudoctor.cluster.context import ClusterContext
    from gpudoctor.engine.planning import Plan
    from gpudoctor.engine.runner import Run
    from gpudoctor.registry import CheckSpec


# Events a run reports as it goes: ("start" or "done", check id, title).
Hook = Callable[[str, str, str], None]


def execute(
    plan: Plan,
    show_progress: bool,
    specs: list[CheckSpec] | None = None,
    cluster: ClusterContext | None = None,
    on_event: Hook | None = None,
) -> Run:
    """Run `specs` (the plan's, by default); Ctrl-C or SIGTERM ends the run with what was judged so far."""
    from rich.console import Console

    from gpudoctor.engine.runner import broken_plugin_results, run_checks
    from gpudoctor.report.console import LiveProgress, fitted

    specs = plan.specs if specs is None else specs
    progress = LiveProgress(fitted(Console(stderr=True)), len(specs))

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
    return run


def single_node(plan: Plan, show_progress: bool = False) -> Report:
    """The whole run on this node alone, and its report."""
    started = Started()
    run = execute(plan, show_progress)
    return report(plan, run.results, started, run.interrupted, observations=run.observations)


def raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
