"""cluster.links: every node against its nearest ring neighbours, both directions, then a re-test of every
suspect against a node measured good; slow nodes and slow links named only when the re-test agrees.

One rank per node. Before measuring, a short probe of every pair sizes its transfers so that even a node a
hundred times slower than the rest finishes within the time budget (and is named for being slow, not for
timing out). Each directed transfer is timed in two passes, the sender timing each delivery up to the
receiver's one-element acknowledgement, every delivery verified on the receiving side; its figure is the
better pass, and the difference between passes is the noise allowance. The ranks' code is
checks/ranks/links.py; the judging, shared with cluster.allreduce, gpudoctor/judging/pairs.py.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gpudoctor.api import Result, Work, check, compare, nics, references

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
from gpudoctor.judging import pairs, sockets

WORKER = "gpudoctor.checks.ranks.links:measure_links"
LINK_BYTES = {"cuda": 256 * 2**20, "cpu": 16 * 2**20}  # the largest transfer; a slow pair's is smaller
SETTINGS = {
    "straggler_fraction": 0.8,
    "fail_fraction": 0.5,
    "bytes": 0,
    "warmup": 2,
    "iters": 10,
    "expected_gbps": 0.0,
    "floor": 0.75,
}


def absolute_reference(ctx: CheckContext) -> tuple[compare.Reference | None, float]:
    """What one node's link should carry regardless of the others, and the fraction judged against it: a
    configured figure, a saved baseline, else (NCCL on GPUs) the published figure of one GPU sending through
    one NIC (references.one_gpu_per_node), scaled to the slowest node's fastest active RDMA port, failing below
    the rule's floor of it. gloo over TCP is judged against the other nodes only."""
    if ctx.settings["expected_gbps"]:
        return compare.Reference(ctx.settings["expected_gbps"], "expected_gbps (config)"), ctx.settings["floor"]
    saved = ctx.baseline("node_link_bandwidth")
    if saved:
        return compare.Reference(saved.value, saved.source), saved.floor
    if ctx.device != "cuda":
        return None, 0.0
    fastest = [_fastest_port(node) for node in ctx.cluster.node_summaries()]
    if not fastest or None in fastest:
        return None, 0.0
    gbits, name = min(fastest)
    one = references.one_gpu_per_node()
    if one is None:
        return None, 0.0
    said = f"{name}'s fastest active RDMA port, {gbits:g} Gb/s, x {one.value:g} GB/s per 400 Gb/s ({one.cite()})"
    return compare.Reference(gbits / 400 * one.value, said), references.FAIL_BELOW


def _fastest_port(node: dict[str, Any]) -> tuple[float, str] | None:
    rates = [nics.port_gbits(p) for p in node.get("infiniband") or [] if "ACTIVE" in str(p.get("state", ""))]
    return (max(rates), node["name"]) if rates else None


@check(
    "cluster.links",
    "Links between nodes",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=300,
    settings=SETTINGS,
    work=Work(9, {"cpu": 4.0, "cuda": 6.0}),
)
def links(ctx: CheckContext) -> list[Result] | Result:
    """Every node against its nearest ring neighbours, both directions; every suspect re-tested against a
    good node; slow nodes and slow links named only when the re-test agrees."""
    params = {
        **ctx.work(),
        "bytes": ctx.settings["bytes"] or LINK_BYTES[ctx.device],
        "rounds": None,
        "pair_sizes": None,
        "passes": pairs.PASSES,
    }
    params["iters"] = max(1, math.ceil(params["iters"] / pairs.PASSES))  # the repetitions, over both passes
    first = ctx.run_across(WORKER, params, local_ranks=1, timeout_s=ctx.timeout_s * pairs.FIRST_SHARE)
    if failed := ctx.failed(first):
        return failed  # elsewhere than rank 0: this node's own part; on rank 0: the node that failed it

    def again(plan: dict[str, Any]) -> Any:
        limit = ctx.timeout_s * (1 - pairs.FIRST_SHARE)
        return ctx.run_across(WORKER, params, local_ranks=1, plan_params=plan, timeout_s=limit)

    fractions = compare.Fractions(ctx.settings["straggler_fraction"], ctx.settings["fail_fraction"])
    what = "transfers with the nearest ring neighbours"
    return sockets.with_transport(pairs.confirmed_pairs(first, again, fractions, absolute_reference(ctx), what), first)
