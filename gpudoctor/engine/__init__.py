"""The engine: a Request in, a Report out. The command line, the Python API (gpudoctor.probe) and `baseline
save` all run checks through `run` (or its two steps, `plan` then `perform`, where the caller needs the plan).

    request.py     Request: what was asked for (frozen; nobody below the command line sees argparse)
    planning.py    plan(request) -> Plan: config merged, checks selected, facts gathered, input checked
    runner.py      selection, prerequisites, one check run (knows no check by name)
    execution.py   a plan's checks in order, under SIGTERM and progress; a single node's run
    cluster_run.py a node's part in a cluster run (rank 0 builds the cluster report)
    report.py      Report, and `report`: the one function that assembles a run's document

Imports are lazy: importing the engine imports neither torch, pynvml nor the checks.
"""

from __future__ import annotations

from gpudoctor.engine.execution import single_node
from gpudoctor.engine.planning import Plan, plan
from gpudoctor.engine.report import Report
from gpudoctor.engine.request import Request

__all__ = ["Plan", "Report", "Request", "perform", "plan", "run"]


def run(request: Request, show_progress: bool = False) -> Report:
    """Plan the request and run it: this node alone, or this node's part of a cluster run."""
    return perform(plan(request), show_progress)


def perform(chosen: Plan, show_progress: bool = False) -> Report:
    """Run a plan: this node alone (with the live progress line if asked for), or this node's part of the
    cluster run the plan was made for (no progress line: every node's stderr is merged)."""
    if chosen.cluster is None:
        return single_node(chosen, show_progress)
    from gpudoctor.engine.cluster_run import run_node

    return run_node(chosen)
