"""What a cross-node check sees of the cluster: this node's session and, on rank 0, every node of the run.

Rank 0 runs each attempt of a cross-node workload and gets every rank's data with the nodes they ran on (or
the result naming the node that failed it); every other node follows rank 0's plans until rank 0 says the
check is done, and gets the result of its own share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.cluster.session import READY_WAIT_S, Attempt, Member, Session, WorkloadOutcome, attempt_key
from gpudoctor.model import SEVERITY, Result, Row, Status
from gpudoctor.workloads.launch import LaunchResult, caused_elsewhere


@dataclass
class ClusterContext:
    """This node's session; on rank 0, every node of the run (after the roster)."""

    session: Session
    report_wait_s: float  # how long rank 0 waits for the nodes' reports: a node waits that long for a plan
    nodes: list[Member] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    planned: dict[str, list[Member]] = field(default_factory=dict)  # rank 0: each check's last attempt's nodes
    followed: set[str] = field(default_factory=set)

    @property
    def leader(self) -> bool:
        return self.session.env.leader

    @property
    def leader_name(self) -> str:
        env = self.session.env
        return env.expected[0] if env.expected else env.master_addr

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.nodes]

    def node_summaries(self) -> list[dict[str, Any]]:
        """Rank 0: each node's report (see node.node_report), or what is known of a node that sent none."""
        return [
            {**(m.report or {}), "name": m.name, "rank": m.rank, "lost": m.lost or None}
            if m.report and not m.lost
            else {
                "name": m.name,
                "rank": m.rank,
                "lost": m.lost,
                "tampered": m.tampered,
                "exit_code": None,
                "status": "error",
                "checks": [],
            }
            for m in self.nodes
        ]

    def participants(self, check_id: str) -> list[Member]:
        return [m for m in self.nodes if m.alive and m.report and check_id in m.report.get("cluster_checks", [])]

    def run(
        self,
        check_id: str,
        worker: str,
        params: dict[str, Any],
        local_ranks: int,
        backend: str,
        timeout_s: float,
        plan_params: dict[str, Any] | None = None,
    ) -> WorkloadOutcome | Result:
        """Rank 0: one attempt over every node (a later attempt over the nodes of the one before), and its
        outcome, or the result naming the node that failed it. Elsewhere: every attempt rank 0 plans, and the
        result of this node's own share (rank 0 judges the whole)."""
        attempt = self.attempts.get(check_id, 0)
        run = Attempt(check_id, attempt, worker, params, local_ranks, backend, timeout_s, plan_params or {})
        if not self.leader:
            self.followed.add(check_id)
            outcomes = self.session.follow(run, self.report_wait_s + timeout_s + READY_WAIT_S)
            return own_part(outcomes, self.leader_name)
        self.attempts[check_id] = attempt + 1
        members = [m for m in self.planned.get(check_id, self.participants(check_id)) if m.alive]
        self.session.mark(check_id)
        outcome = self.session.lead(run, members)
        self.planned[check_id] = outcome.members
        return outcome if outcome.result.status == Status.PASS else blame(outcome)

    def finish(self, check_id: str) -> None:
        """After a cross-node check ended here. Rank 0 says no attempt follows; a node whose own copy of the
        check never ran (a prerequisite it lacks) says it is absent, so rank 0 does not wait for it."""
        if self.leader:
            self.session.end_check(check_id, self.attempts.get(check_id, 0))
        elif check_id not in self.followed:
            self.session.say_ready(attempt_key(check_id, 0), {"absent": "skipped on this node"})


def own_part(outcomes: list[LaunchResult | None], leader: str) -> Result:
    """A node's view of its share of a cross-node workload, over every attempt it was in: its ranks finished,
    failed on their own (this node's fault), or failed because a peer went away (a warning: rank 0 names the
    node at fault)."""
    results = [_one_part(o, leader) for o in outcomes if o is not None]
    if not results:
        return Result(Status.SKIP, f"not in the cross-node run (rank 0 on {leader} did not plan it, or is gone)")
    return max(results, key=lambda r: SEVERITY[r.status])


def _one_part(outcome: LaunchResult, leader: str) -> Result:
    ranks = f"ranks {outcome.ranks[0].rank}-{outcome.ranks[-1].rank}" if outcome.ranks else "its ranks"
    if outcome.status == Status.PASS:
        return Result(Status.PASS, f"took part with {ranks}; judged by rank 0 on {leader}")
    if caused_elsewhere(outcome):
        return Result(Status.WARN, f"{ranks} lost a peer on another node ({outcome.message}); rank 0 names it")
    return Result(outcome.status, f"this node's {outcome.message}")


def blame(outcome: WorkloadOutcome) -> Result:
    """The failed cross-node workload, naming the node: one that went silent, else the node of the rank that
    caused the failure (with how long the workload ran before it gave up)."""
    rows = [Row(Status.FAIL, f"lost: {m.lost}", node=m.name) for m in outcome.lost]
    message = outcome.result.message
    if not rows:
        culprits = sorted({m.name for m in map(outcome.node_of, _ranks_named(message)) if m})
        message = re.sub(r"rank (\d+)", lambda g: _on_node(outcome, int(g.group(1))), message)
        if outcome.result.status == Status.TIMEOUT:
            message += f" (the workload gave up after {outcome.result.elapsed_s:.0f} s)"
        rows = [Row(outcome.result.status, message, node=name) for name in culprits]
    return Result(outcome.result.status, message, rows=rows)


def _ranks_named(message: str) -> list[int]:
    return [int(n) for n in re.findall(r"rank (\d+)", message)]


def _on_node(outcome: WorkloadOutcome, rank: int) -> str:
    member = outcome.node_of(rank)
    return f"rank {rank} on {member.name}" if member else f"rank {rank}"
