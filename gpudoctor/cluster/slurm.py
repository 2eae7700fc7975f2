"""Act on a report in Slurm: drain the nodes rank 0 named for draining (or the one node a one-node run's
report names, where it failed), with a reason tagged "gpudoctor:", and resume the nodes gpudoctor drained
before that now pass. A node drained (or down) for any other reason is never touched: its reason is an
administrator's, and so is the decision to resume it. Only exact node names (words.KINDS["node"]) reach sinfo
and scontrol.

    gpudoctor drain cluster.json [--dry-run]

Exit 0: every action taken (or none needed). 1: an action failed (draining needs Slurm's SlurmUser, root, or
an operator or administrator account; a job's own user has none of them). 2: the report is not one to act on.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.errors import InputError
from gpudoctor.words import KINDS

TAG = "gpudoctor:"
REASON_CHARS = 120


class ReportError(InputError):
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
    """Rank 0's cluster report, or a one-node run's report as a cluster of one, read and checked as `gpudoctor
    report` reads one."""
    from gpudoctor.report import document

    try:
        report, _ = document.load(path)
    except document.ReportError as exc:
        raise ReportError(f"{exc}; {READS}") from None
    if report.get("cluster") is None:
        report["cluster"] = one_node(report, path)
    return report


READS = "drain reads rank 0's cluster report, or a one-node run's report (their --json)"


def one_node(report: dict[str, Any], path: Path) -> dict[str, Any]:
    """A one-node run's report (a world of one is no cluster run: no cluster part) as a cluster of one: the node
    its `node` names, failed where the run failed. Only a whole live run on that node is a verdict about it."""
    source = str(report.get("source"))
    if not source.startswith("live"):
        raise ReportError(f"{path} judged {shown(source)}, not a live run on a node: nothing to drain; {READS}")
    if report.get("interrupted"):
        raise ReportError(f"{path} is of an interrupted run: it judged too little to drain or resume a node")
    name = report.get("node")
    if not isinstance(name, str):
        raise ReportError(f'{path} names no node (no "node": an older gpudoctor wrote it, or on a host whose name '
                          f"is no node's); {READS}")  # fmt: skip
    node = {"name": name, "lost": None, "checks": report["checks"], "causes": report.get("causes") or []}
    return {"nodes": [node], "failed_nodes": [name] if report["exit_code"] else [], "findings": []}


def local_node(environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """This node's name as Slurm knows it, and why it is not one node's name ("" when it is): SLURMD_NODENAME
    (slurmd sets it for a job's tasks, prologs and health checks), else SLURM_NODENAME, else the host's short
    name (`hostname -s`), as the examples take it."""
    name = environ.get("SLURMD_NODENAME") or environ.get("SLURM_NODENAME") or socket.gethostname().split(".")[0]
    return name, refusal(name)


Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def run_tool(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def refusal(name: Any) -> str:
    """Why `name` must not reach sinfo or scontrol ("" if it is one node's exact name): scontrol expands `ALL`,
    ranges (`gpu[002-512]`) and lists (`a,b`) to many nodes (scontrol(1))."""
    if isinstance(name, str) and name.upper() == "ALL":
        return "Slurm reads ALL as every node"
    if not isinstance(name, str) or not KINDS["node"].fullmatch(name):
        return "not one node's name (Slurm would read [ ] , * or spaces as several nodes, or none)"
    return ""


ARG_CHARS = 32 * 1024  # names per sinfo/scontrol argument: far below Linux's 128 KiB for one argument


def pieces(names: list[str]) -> list[list[str]]:
    """`names` in runs whose comma-joined length stays under ARG_CHARS."""
    out: list[list[str]] = [[]]
    size = 0
    for name in names:
        if out[-1] and size + len(name) + 1 > ARG_CHARS:
            out.append([])
            size = 0
        out[-1].append(name)
        size += len(name) + 1
    return [piece for piece in out if piece]


def node_states(names: list[str], run: Runner = run_tool) -> tuple[dict[str, NodeState], str]:
    """Each named node's state and reason from sinfo (asked in pieces), and what went wrong if sinfo could
    not say. Only exact node names are asked about."""
    states = {}
    for piece in pieces([n for n in dict.fromkeys(names) if not refusal(n)]):
        proc = run(["sinfo", "-h", "-N", "-n", ",".join(piece), "-o", "%N|%T|%E"])
        if proc.returncode:
            said = (proc.stderr or proc.stdout).strip().splitlines()
            return {}, f"sinfo failed: {shown(said[-1]) if said else f'exit {proc.returncode}'}"
        for line in proc.stdout.splitlines():
            name, _, rest = line.partition("|")
            state, _, reason = rest.partition("|")
            states[name.strip()] = NodeState(state.strip().lower(), reason.strip())
    return states, ""


@dataclass(frozen=True)
class Action:
    argv: list[str]  # empty: nothing to run, only to say
    doing: str  # "drain node-2 (gpudoctor: cluster.links)"
    refused: bool = False  # a node rank 0 named that is not acted on: the run did not do all it was asked


def plan(report: dict[str, Any], states: dict[str, NodeState], known: bool = True) -> list[Action]:
    """Drain each failed node unless an administrator holds it already; resume each node gpudoctor drained
    that rank 0 now finds fine. Only exact names sinfo returned (`known`: sinfo answered) are acted on; nodes
    with the same reason go in one scontrol call."""
    failed = set(report["cluster"]["failed_nodes"])
    said: list[Action] = []
    drains: dict[str, list[str]] = {}
    resumes: list[str] = []
    for node in report["cluster"]["nodes"]:
        name, state = node["name"], states.get(node["name"])
        if name not in failed and not (state and state.held and state.ours):
            continue
        refused = refusal(name)
        if refused:
            said.append(Action([], f"refuse {shown(name, quote=True)}: {refused}", True))
        elif known and not state:
            said.append(Action([], f"leave {name} as it is: sinfo does not know a node of that name", True))
        elif name not in failed:
            resumes.append(name)
        elif state and state.held and not state.ours:
            said.append(Action([], f"leave {name} as it is: an administrator holds it ({shown(state.reason)})"))
        else:
            drains.setdefault(f"{TAG} {printable(why(node, report))}"[:REASON_CHARS], []).append(name)
    actions = [
        Action(_update(piece, "State=DRAIN", f"Reason={reason}"), f"drain {','.join(piece)} ({reason})")
        for reason, names in drains.items()
        for piece in pieces(names)
    ]
    actions += [
        Action(_update(piece, "State=RESUME"), f"resume {','.join(piece)} (gpudoctor drained it; it passes now)")
        for piece in pieces(resumes)
    ]
    return said + actions


def _update(names: list[str], *settings: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={','.join(names)}", *settings]


def printable(text: str) -> str:
    """`text` with every control character (a terminal's escape sequences among them) written as an escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(text: Any, quote: bool = False) -> str:
    """Text from a report or sinfo as `drain` prints it: quoted (`quote`, or where it is not plain) with its
    control characters escaped, so no escape sequence reaches the operator's terminal."""
    text = str(text)
    return f"'{printable(text)}'" if quote or printable(text) != text else text


FAILING = ("fail", "error", "timeout")


def why(node: dict[str, Any], report: dict[str, Any]) -> str:
    """A short reason: lost, the causes the diagnosis found on it and its own failing checks, or the cross-node
    results that name it."""
    if node.get("lost"):
        return f"lost: {node['lost']}"
    causes = [f"cause:{c['id']}" for c in node.get("causes") or [] if c.get("status") in FAILING]
    failing = [c["check_id"] for c in node["checks"] if c["status"] in FAILING]
    named = [f["check_id"] for f in report["cluster"]["findings"] if node["name"] in (f["node"], f["peer"])]
    return ", ".join(dict.fromkeys(causes + failing + named)) or "see the cluster report"


def apply(actions: list[Action], dry_run: bool, say: Callable[[str], None], run: Runner = run_tool) -> int:
    """Run (or, dry, print) each action; 1 if any failed, with why."""
    failed = sum(a.refused for a in actions)
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
