"""cluster.links: every node against its nearest ring neighbours, both directions, then a re-test of every
suspect against a node measured good; slow nodes and slow links named only when the re-test agrees.

One rank per node. Before measuring, a short probe of every pair sizes its transfers so that even a node a
hundred times slower than the rest finishes within the time budget (and is named for being slow, not for
timing out). Each directed transfer is timed in two passes, the sender timing each delivery up to the
receiver's one-element acknowledgement, every delivery verified on the receiving side; its figure is the
better pass, and the difference between passes is the noise allowance. The judging is checks/pairs.py.
"""

from __future__ import annotations

import math
import time
from typing import Any

from gpudoctor.api import CheckContext, Metric, RankContext, Result, Row, Status, check, compare

from . import pairs

WORKER = "gpudoctor.checks.links:measure_links"
LINK_BYTES = {"cuda": 256 * 2**20, "cpu": 16 * 2**20}  # the largest transfer; a slow pair's is smaller
PROBE_BYTES = 2**20
MIN_BYTES = 64 * 1024
FIRST_SHARE = 0.6  # of the check's time limit: the first look; the re-test gets the rest
BUDGET_SHARE = 0.5  # of an attempt's time: what its transfers may take by the probe's figures
RETEST_ROUNDS_BUDGETED = pairs.MAX_RETEST_ROUNDS + 1  # and a round of good pairs alone
NIC_FLOOR = 0.4  # one rank per node sends through one port: judged at 40 % of its line rate
SETTINGS = {
    "straggler_fraction": 0.8,
    "fail_fraction": 0.5,
    "bytes": 0,
    "warmup": 2,
    "iters": 10,
    "expected_gbps": 0.0,
    "floor": 0.75,
}


# --- on every rank (one per node) ------------------------------------------------------------------------
def measure_links(ctx: RankContext) -> dict[str, Any]:
    """This node's part of the rounds: the probe where no sizes were given, then every pass of every round,
    each pair exchanging its buffer both ways. Transfers are named by the nodes' cluster ranks."""
    import torch
    import torch.distributed as dist

    p = ctx.params
    node_of = {first: int(node) for node, (first, _) in p["spans"].items()}
    me = node_of[ctx.rank]
    at = {node: first for first, node in node_of.items()}
    if p["rounds"]:  # a re-test: the pairs rank 0 chose, less any node that has left since
        rounds = [[(a, b) for a, b in round_pairs if a in at and b in at] for round_pairs in p["rounds"]]
    else:
        rounds = pairs.neighbour_rounds(sorted(at, key=at.get))
    ack = torch.zeros(1, device=ctx.device)
    sizes = {tuple(map(int, k.split("-"))): v for k, v in p["pair_sizes"].items()} if p["pair_sizes"] else None
    if sizes is None:
        sizes = _probe(ctx, rounds, me, at, ack)
    sent: dict[tuple[int, int], list[float]] = {}
    wrong: dict[int, int] = {}
    for number in range(p["passes"]):
        for index, round_pairs in enumerate(rounds):
            ctx.phase(f"links pass {number} round {index}")
            dist.barrier()
            for a, b in round_pairs:
                if me in (a, b):
                    size = sizes[(min(a, b), max(a, b))]
                    _exchange(ctx, (a, b), me, at, size, ack, p["warmup"], p["iters"], sent, wrong)
    dist.barrier()  # nobody leaves (and loads the machine tearing down) while another pair still measures
    return {
        "node": me,
        "sent": [
            {"src": src, "dst": dst, "bytes": sizes[(min(src, dst), max(src, dst))], "passes": v, "gbps": max(v)}
            for (src, dst), v in sent.items()
        ],
        "wrong": wrong,
        "sizes": {f"{a}-{b}": v for (a, b), v in sizes.items()},
    }


def _probe(ctx: RankContext, rounds: list[list[pairs.Pair]], me: int, at: dict[int, int], ack: Any) -> dict:
    """Every pair's speed from a short exchange, gathered on every rank, then each pair's transfer size: the
    largest that lets every pass of every round (and a re-test) end within the budget."""
    import torch.distributed as dist

    p = ctx.params
    probe = min(PROBE_BYTES, p["bytes"])
    found: dict[tuple[int, int], list[float]] = {}
    for index, round_pairs in enumerate(rounds):
        ctx.phase(f"links probe round {index}")
        dist.barrier()
        for a, b in round_pairs:
            if me in (a, b):
                _exchange(ctx, (a, b), me, at, probe, ack, 1, 2, found, {})
    everyone: list[Any] = [None] * ctx.world_size
    mine = {"left_s": ctx.deadline - time.time(), "speeds": {f"{s}-{d}": v for (s, d), v in found.items()}}
    dist.all_gather_object(everyone, mine)
    return plan_sizes(everyone, rounds, p["warmup"] + p["iters"], p["bytes"])


def budget_blocks(rounds: list[list[pairs.Pair]]) -> int:
    """The transfers one pair makes in an attempt's budget: each pass of each round, and a re-test's, both ways."""
    return (pairs.PASSES * len(rounds) + pairs.RETEST_PASSES * RETEST_ROUNDS_BUDGETED) * 2


def plan_sizes(
    everyone: list[dict[str, Any]], rounds: list[list[pairs.Pair]], reps: int, largest: int
) -> dict[pairs.Pair, int]:
    """Each pair's transfer size from what every rank gathered (its probe speeds and its time left): the same
    on every rank, as both ends of a pair must send and receive the same bytes, so the time left is the least
    any rank had, not this rank's own clock."""
    speeds = {tuple(map(int, k.split("-"))): max(v) for rank in everyone for k, v in rank["speeds"].items()}
    block_s = min(rank["left_s"] for rank in everyone) * BUDGET_SHARE / budget_blocks(rounds)
    return {
        (min(a, b), max(a, b)): transfer_size(min(speeds[(a, b)], speeds[(b, a)]), block_s, reps, largest)
        for round_pairs in rounds
        for a, b in round_pairs
    }


def transfer_size(gbps: float, block_s: float, reps: int, largest: int) -> int:
    """The bytes per transfer that make `reps` of them take `block_s` at `gbps`, between MIN_BYTES and the
    largest, in whole 4 KiB pages."""
    fits = int(gbps * 1e9 * block_s / reps) // 4096 * 4096
    return max(MIN_BYTES, min(largest, fits))


def _exchange(
    ctx: RankContext,
    pair: pairs.Pair,
    me: int,
    at: dict[int, int],
    size: int,
    ack: Any,
    warmup: int,
    iters: int,
    sent: dict[tuple[int, int], list[float]],
    wrong: dict[int, int],
) -> None:
    """Both directions of one pair: this rank sends (timed) then receives (verified), or the other way."""
    import torch

    a, b = pair
    buffer = torch.empty(size // 4, device=ctx.device)
    for src, dst in ((a, b), (b, a)):
        if me == src:
            sent.setdefault((src, dst), []).append(_send(ctx, buffer, ack, at[dst], warmup, iters))
        elif me == dst:
            wrong[src] = wrong.get(src, 0) + _receive(ctx, buffer, ack, at[src], src, warmup, iters)


def _send(ctx: RankContext, buffer: Any, ack: Any, peer: int, warmup: int, iters: int) -> float:
    import torch.distributed as dist

    from gpudoctor.api import measure

    buffer.fill_(ctx.rank + 1)

    def exchange() -> None:
        dist.send(buffer, peer)
        dist.recv(ack, peer)

    times = measure.time_repeats(exchange, ctx.device, warmup, iters)
    return buffer.numel() * 4 / measure.summary(times)["median_s"] / 1e9


def _receive(ctx: RankContext, buffer: Any, ack: Any, peer: int, src: int, warmup: int, iters: int) -> int:
    """Deliveries that are not the sender's values (the buffer is cleared before each one)."""
    import torch.distributed as dist

    from gpudoctor.api import measure

    wrong = [0]

    def exchange() -> None:
        dist.recv(buffer, peer)
        dist.send(ack, peer)

    def verify() -> None:
        wrong[0] += int((buffer != peer + 1).any())

    measure.time_repeats(exchange, ctx.device, warmup, iters, prepare=buffer.zero_, check=verify)
    return wrong[0]


# --- rank 0 ----------------------------------------------------------------------------------------------
def absolute_reference(ctx: CheckContext) -> tuple[compare.Reference | None, float]:
    """What one node's link should carry regardless of the others, and the fraction judged against it: a
    configured figure, a saved baseline, else (NCCL on GPUs) the slowest node's fastest active InfiniBand
    port. gloo over TCP is judged against the other nodes only."""
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
    return compare.Reference(gbits / 8, f"{name}'s fastest active InfiniBand port, {gbits:g} Gb/s"), NIC_FLOOR


def _fastest_port(node: dict[str, Any]) -> tuple[float, str] | None:
    rates = [
        float(str(p.get("rate", "0")).split()[0])
        for p in node.get("infiniband") or []
        if "ACTIVE" in str(p.get("state", ""))
    ]
    return (max(rates), node["name"]) if rates else None


def retest_sizes(sizes: dict[str, int], rounds: list[list[pairs.Pair]]) -> dict[str, int]:
    """A re-tested pair's transfer size: the smaller of its two nodes' sizes in the first look."""
    own: dict[int, int] = {}
    for key, size in sizes.items():
        for node in map(int, key.split("-")):
            own[node] = min(own.get(node, size), size)
    return {f"{min(a, b)}-{max(a, b)}": min(own[a], own[b]) for pairs_ in rounds for a, b in pairs_}


def gathered(outcome: Any) -> tuple[list[dict[str, Any]], dict[str, int], list[tuple[int, int]]]:
    """Every transfer, the sizes used, and the (src, dst) of every delivery that arrived wrong."""
    transfers = [t for r in outcome.ranks for t in r.data["sent"]]
    sizes = next(r.data["sizes"] for r in outcome.ranks)
    wrong = [(int(src), r.data["node"]) for r in outcome.ranks for src, n in r.data["wrong"].items() if n]
    return transfers, sizes, wrong


@check(
    "cluster.links",
    "Links between nodes",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=300,
    settings=SETTINGS,
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
    first = ctx.run_across(WORKER, params, local_ranks=1, timeout_s=ctx.timeout_s * FIRST_SHARE)
    if isinstance(first, Result):
        return first  # elsewhere than rank 0: this node's own part; on rank 0: the node that failed it
    what = "transfers with the nearest ring neighbours"
    return confirmed_pairs(ctx, first, WORKER, params, 1, absolute_reference(ctx), what)


def confirmed_pairs(
    ctx: CheckContext,
    first: Any,
    worker: str,
    params: dict[str, Any],
    local_ranks: int | None,
    reference: tuple[compare.Reference | None, float],
    what: str,
    metrics: tuple[str, str] = ("node_link_bandwidth", "link_bandwidth"),
) -> list[Result] | Result:
    """Rank 0: a pair measurement over every node (`first`, the outcome of a worker that returns `node`,
    `sent`, `wrong` and `sizes` as measure_links does) judged against the nodes' figures and `reference`
    (an absolute one, and the fraction of it that passes); its suspects re-tested in a second attempt of the
    same worker; the verdicts. `metrics` name a node's figure and one transfer's."""
    names = {m.rank: m.name for m in first.members}
    transfers, sizes, wrong = gathered(first)
    if wrong:
        return corrupted(wrong, names)
    fractions = compare.Fractions(ctx.settings["straggler_fraction"], ctx.settings["fail_fraction"])
    look = pairs.first_look(transfers, names, fractions, *reference)
    rounds = pairs.retest_rounds(look)
    failed: list[Result] = []
    retest: list[dict[str, Any]] = []
    if rounds:
        plan = {"rounds": rounds, "pair_sizes": retest_sizes(sizes, rounds), "passes": pairs.RETEST_PASSES}
        limit = ctx.timeout_s * (1 - FIRST_SHARE)
        again = ctx.run_across(worker, params, local_ranks, plan_params=plan, timeout_s=limit)
        if isinstance(again, Result):
            failed.append(again)  # the suspects stay unconfirmed; the node that failed the re-test is named
        else:
            retest, _, wrong = gathered(again)
            if wrong:
                return corrupted(wrong, names)
    nodes, slow_links = pairs.confirm(look, retest)
    said = f"{len(transfers)} {what}" + (f", {len(retest)} re-tested" if retest else "")
    results = pairs.results(look, nodes, slow_links, said, metrics[0])
    results[0].metrics = [_transfer_metric(metrics[1], t, names, "first") for t in transfers] + [
        _transfer_metric(metrics[1], t, names, "retest") for t in retest
    ]
    return results + failed


def _transfer_metric(name: str, t: dict[str, Any], names: dict[int, str], stage: str) -> Metric:
    labels = {"src": names[t["src"]], "dst": names[t["dst"]], "stage": stage}
    return Metric(name, round(t["gbps"], 4), "GB/s", labels=labels)


def corrupted(wrong: list[tuple[int, int]], names: dict[int, str]) -> Result:
    """Deliveries that arrived wrong: the link between the two (sender, wire or receiver) corrupts data."""
    rows = [
        Row(Status.FAIL, "data arrived corrupted", node=names[src], peer=names[dst], confirmed=None)
        for src, dst in sorted(set(wrong))
    ]
    text = ", ".join(f"{names[s]} -> {names[d]}" for s, d in sorted(set(wrong)))
    return Result(Status.FAIL, f"data arrived corrupted on {text}", aspect="links", rows=rows)
