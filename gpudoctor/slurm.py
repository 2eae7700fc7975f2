"""Act on a cluster report in Slurm: drain the nodes rank 0 named for draining, with a reason tagged
"gpudoctor:", and resume the nodes gpudoctor drained before that now pass. A node drained (or down) for any
other reason is never touched: its reason is an administrator's, and so is the decision to resume it.

    gpudoctor drain cluster.json [--dry-run]

Exit 0: every action taken (or none needed). 1: an action failed (draining needs Slurm's SlurmUser, root, or
an operator or administrator account; a job's own user has none of them). 2: the report is not a cluster
report.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAG = "gpudoctor:"
REASON_CHARS = 120


class ReportError(ValueError):
    """The file is not a gpudoctor cluster report."""


@dataclass(frozen=True)
class NodeState:
    state: str  # sinfo's %T: idle, drained, draining, down, ...
    reason: str  # sinfo's %E, "none" when there is none

    @property
    def held(self) -> bool:
        """Drained, draining or down."""
        return any(word in self.state for word in ("drain", "down", "fail"))

    @property
    def ours(self) -> bool:
        return self.reason.startswith(TAG)


def load_report(path: Path) -> dict[str, Any]:
    """Rank 0's cluster report, read and checked as `gpudoctor report` reads one."""
    from gpudoctor.report import document

    try:
        report, _ = document.load(path)
    except document.ReportError as exc:
        raise ReportError(f"{exc}; {READS}") from None
    if report.get("cluster") is None:
        raise ReportError(f"{path} is not a gpudoctor cluster report: it has no cluster part; {READS}")
    return report


READS = "drain reads rank 0's cluster report (its --json)"


Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def run_tool(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def node_states(names: list[str], run: Runner = run_tool) -> tuple[dict[str, NodeState], str]:
    """Each named node's state and reason from sinfo, and what went wrong if sinfo could not say."""
    proc = run(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", "%N|%T|%E"])
    if proc.returncode:
        return {}, f"sinfo failed: {(proc.stderr or proc.stdout).strip() or f'exit {proc.returncode}'}"
    states = {}
    for line in proc.stdout.splitlines():
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        states[name.strip()] = NodeState(state.strip().lower(), reason.strip())
    return states, ""


@dataclass(frozen=True)
class Action:
    node: str
    argv: list[str]  # empty: nothing to run, only to say
    doing: str  # "drain node-2 (gpudoctor: cluster.links)"


def plan(report: dict[str, Any], states: dict[str, NodeState]) -> list[Action]:
    """Drain each failed node unless an administrator holds it already; resume each node gpudoctor drained
    that rank 0 now finds fine."""
    failed = set(report["cluster"]["failed_nodes"])
    actions = []
    for node in report["cluster"]["nodes"]:
        name, state = node["name"], states.get(node["name"])
        if name in failed:
            if state and state.held and not state.ours:
                actions.append(Action(name, [], f"leave {name} as it is: an administrator holds it ({state.reason})"))
                continue
            reason = f"{TAG} {why(node, report)}"[:REASON_CHARS]
            argv = ["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"]
            actions.append(Action(name, argv, f"drain {name} ({reason})"))
        elif state and state.held and state.ours:
            argv = ["scontrol", "update", f"NodeName={name}", "State=RESUME"]
            actions.append(Action(name, argv, f"resume {name} (gpudoctor drained it; it passes now)"))
    return actions


def why(node: dict[str, Any], report: dict[str, Any]) -> str:
    """A short reason: lost, its own failing checks, or the cross-node results that name it."""
    if node.get("lost"):
        return f"lost: {node['lost']}"
    failing = [c["check_id"] for c in node["checks"] if c["status"] in ("fail", "error", "timeout")]
    named = [f["check_id"] for f in report["cluster"]["findings"] if node["name"] in (f["node"], f["peer"])]
    return ", ".join(dict.fromkeys(failing + named)) or "see the cluster report"


def apply(actions: list[Action], dry_run: bool, say: Callable[[str], None], run: Runner = run_tool) -> int:
    """Run (or, dry, print) each action; 1 if any failed, with why."""
    failed = 0
    for action in actions:
        if not action.argv or dry_run:
            say(shlex.join(action.argv) if action.argv else action.doing)
            continue
        proc = run(action.argv)
        if proc.returncode:
            failed += 1
            said = (proc.stderr or proc.stdout).strip().splitlines()
            error = said[-1] if said else f"exit {proc.returncode}"
            say(
                f"could not {action.doing}: {error} (draining and resuming need Slurm's SlurmUser, root, or an "
                "operator or administrator account)"
            )
        else:
            say(action.doing)
    return 1 if failed else 0
