"""A node's whole part in a cluster run: the engine's entry (engine.perform) calls `run_node` for a plan made
in cluster mode, for the command line and the Python API alike.

Every node runs its own checks and sends its report to rank 0; then every node takes part in the cross-node
checks at once. Rank 0 builds the cluster report and tells every node its verdict before it ends the run;
every other node's report carries that verdict (`cluster.verdict`) and exits by it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from gpudoctor import __version__
from gpudoctor.cluster.context import ClusterContext
from gpudoctor.cluster.env import ClusterEnvError
from gpudoctor.cluster.node import node_report, verdict_result, verdicts
from gpudoctor.cluster.session import Session
from gpudoctor.cluster.store import STORE_ERRORS
from gpudoctor.engine.budget import seconds_left
from gpudoctor.engine.execution import execute
from gpudoctor.engine.report import NodesPart, Report, Started, report

if TYPE_CHECKING:
    from gpudoctor.engine.planning import Plan
    from gpudoctor.model import Result

# How long rank 0 waits for every node's own report (nodes that stop beating are not waited for).
REPORT_WAIT_S = {"quick": 120.0, "standard": 1800.0, "full": 3600.0}


def report_wait(plan: Plan) -> float:
    """How long rank 0 waits for the nodes' reports: never past what a --budget leaves (at least JOIN_S)."""
    wait = plan.cluster_settings["report_timeout"] or plan.options.timeout or REPORT_WAIT_S[plan.options.level]
    left = seconds_left(plan.options.budget, plan.options.budget_from)
    return wait if left is None else max(JOIN_S, min(wait, left))


JOIN_S = 5.0  # under a --budget, the least rank 0 waits for a node's report


def run_node(plan: Plan) -> Report:
    """This node's part. Rank 0 returns the cluster report; any other node its own report with rank 0's
    verdict about it. Raises ClusterEnvError (bad input: exit 2) when the cluster's store cannot be reached,
    CredentialError when the run's credential cannot be had."""
    env, settings = plan.cluster, plan.cluster_settings
    assert env is not None, "run_node needs a plan made in cluster mode"
    local = [s for s in plan.specs if "cluster" not in s.needs]
    across = [s for s in plan.specs if "cluster" in s.needs]
    try:
        session = Session(env, settings["join_timeout"])
    except STORE_ERRORS as exc:
        raise ClusterEnvError(f"cannot reach the cluster store at {env.master_addr}:{env.master_port}: {exc}") from None
    session.join({"version": __version__, "cluster_checks": [s.id for s in across]})
    started = Started()  # the run's time, and its budget's, count from here: the launch and rendezvous were before
    plan = replace(plan, options=replace(plan.options, budget_from=time.time()))
    context = ClusterContext(session, report_wait(plan))
    cross_node = {s.id for s in across}

    def on_event(event: str, check_id: str, title: str) -> None:
        if event == "start":
            session.mark(check_id)
        elif check_id in cross_node:
            context.finish(check_id)

    mine = replace(plan, options=replace(plan.options, budget_after=tuple(across)))
    try:
        own = execute(mine, False, specs=local, on_event=on_event)
        shared = report(plan, own.results, started, own.interrupted, observations=own.observations).document
        session.share(node_report(env, shared, plan.facts, sorted(cross_node)))
        if env.leader:
            context.nodes = session.roster(settings["join_timeout"], report_wait(plan))
        joint = execute(plan, False, specs=across, cluster=context, on_event=on_event)
        interrupted = own.interrupted or joint.interrupted
        if env.leader:
            return _lead(plan, context, joint.results, started, interrupted)
        verdict = None if interrupted else session.verdict()
        results = [*own.results, *joint.results, verdict_result(verdict, context.leader_name)]
        return report(plan, results, started, interrupted, observations=own.observations + joint.observations)
    finally:
        session.close()


def _lead(plan: Plan, context: ClusterContext, results: list[Result], started: Started, interrupted: bool) -> Report:
    """Rank 0: the cluster report, and every node's verdict posted before the run ends."""
    env = plan.cluster
    assert env is not None
    credential = context.session.control.credential.kind
    nodes = NodesPart(context.node_summaries(), env.launcher, credential)
    built = report(plan, results, started, interrupted, nodes)
    by_name = verdicts(built.document)
    context.session.announce({m.rank: by_name[m.name] for m in context.nodes if m.rank != env.rank})
    return built
