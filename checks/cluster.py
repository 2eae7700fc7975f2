"""Cluster checks: every node's own verdict, software skew, the links between nodes, and all-reduce and DDP
across the whole world. They run only in cluster mode (one gpudoctor per node under torchrun or srun);
rank 0 judges, every other node reports its own part.

Links are measured between ring neighbours: node i exchanges a buffer with nodes i-1 and i+1, both ways,
in at most three rounds of disjoint pairs whatever the node count (two for an even ring, three for an odd
one), so the test takes the same time on 3 nodes as on 1,000. A node whose sending or receiving is slow
shows on both of its links while its neighbours' other links stay fast: that is how a slow node is told from
a slow link.
"""

from __future__ import annotations

import statistics
from typing import Any

from gpudoctor.api import (
    CheckContext,
    Metric,
    RankContext,
    Remediation,
    Result,
    Row,
    Status,
    check,
    expect,
    from_rows,
)

from . import allreduce, ddp

FRACTIONS = {"straggler_fraction": 0.8, "fail_fraction": 0.5}
LINK_BYTES = {"cuda": 256 * 2**20, "cpu": 16 * 2**20}
DRAIN = Remediation(
    "Take the failed nodes out of the scheduler until they are fixed; gpudoctor tags the reason so a later "
    "clean run can resume exactly these.",
    ['scontrol update NodeName=<NODE> State=DRAIN Reason="gpudoctor: <CHECK>"'],
)


# --- pure judges -----------------------------------------------------------------------------------------
def judge_nodes(nodes: list[dict[str, Any]]) -> Result:
    """Each node's own verdict: lost or never joined, failed (its failing checks), warned, or fine."""
    rows = []
    for node in nodes:
        if node.get("lost"):
            rows.append(Row(Status.FAIL, f"lost: {node['lost']}", node=node["name"]))
        elif node["exit_code"]:
            failing = ", ".join(node["failing"]) or "its own checks"
            rows.append(Row(Status.FAIL, f"failed {failing}", node=node["name"]))
        elif node["status"] == Status.WARN.value:
            rows.append(Row(Status.WARN, f"warnings in {', '.join(node['warning'])}", node=node["name"]))
        else:
            rows.append(Row(Status.PASS, "all checks passed", node=node["name"]))
    result = from_rows(rows, f"all {len(rows)} nodes passed their own checks")
    bad = [r.node for r in rows if r.status.is_failure]
    if bad:
        result.remediation = Remediation(
            DRAIN.why, [c.replace("<NODE>", ",".join(bad)).replace("<CHECK>", "node checks") for c in DRAIN.commands]
        )
    return result


def judge_stragglers(figures: dict[str, dict[str, float]], straggler_fraction: float, fail_fraction: float) -> Result:
    """Per-node figures (figure -> node -> value, higher is better) against the cluster median of each: below
    `straggler_fraction` of it a node straggles (warn), below `fail_fraction` it fails."""
    worst_by_node: dict[str, tuple[float, str]] = {}
    metrics = []
    for figure, by_node in sorted(figures.items()):
        if len(by_node) < 2:
            continue
        median = statistics.median(by_node.values())
        metrics.append(Metric("figure_median", round(median, 3), labels={"figure": figure}))
        for node, value in by_node.items():
            ratio = value / median if median > 0 else 1.0
            if ratio < worst_by_node.get(node, (1.0, ""))[0]:
                worst_by_node[node] = (ratio, f"{figure} {value:.4g}, {ratio:.2f} x the median {median:.4g}")
    rows = []
    for node, (ratio, text) in sorted(worst_by_node.items()):
        if ratio < straggler_fraction:
            rows.append(Row(Status.FAIL if ratio < fail_fraction else Status.WARN, text, node=node))
    if not rows:
        return Result(Status.PASS, f"no node below {straggler_fraction:g} x the median", metrics=metrics)
    return from_rows(rows, "", metrics=metrics)


def ring_rounds(n: int) -> list[list[tuple[int, int]]]:
    """The ring's edges (i, i+1 mod n) in rounds of disjoint pairs: 1 round for 2 nodes, 2 for an even ring,
    3 for an odd one."""
    if n < 3:
        return [[(0, 1)]] if n == 2 else []
    edges = [(i, (i + 1) % n) for i in range(n)]
    if n % 2 == 0:
        return [edges[0::2], edges[1::2]]
    return [edges[0 : n - 1 : 2], edges[1 : n - 1 : 2], [edges[-1]]]


def judge_links(
    transfers: list[dict[str, Any]], names: list[str], straggler_fraction: float, fail_fraction: float
) -> list[Result]:
    """Directed transfers between ring neighbours: a node whose best send or best receive is below the
    fraction of the median is slow itself; a transfer that is slow between two fine nodes is a slow link.
    With two nodes the slow end cannot be told, so the link is named."""
    median = statistics.median(t["gbps"] for t in transfers)
    metrics = [
        Metric("link_bandwidth", round(t["gbps"], 3), "GB/s", labels={"src": names[t["src"]], "dst": names[t["dst"]]})
        for t in transfers
    ]
    wrong = [t for t in transfers if not t["verified"]]
    if wrong:
        text = ", ".join(f"{names[t['src']]} -> {names[t['dst']]}" for t in wrong)
        return [Result(Status.FAIL, f"data arrived corrupted on {text}", metrics=metrics)]
    node_figure = {}
    for rank, name in enumerate(names):
        sends = [t["gbps"] for t in transfers if t["src"] == rank]
        receives = [t["gbps"] for t in transfers if t["dst"] == rank]
        node_figure[name] = min(max(sends, default=median), max(receives, default=median))
        metrics.append(Metric("node_link_bandwidth", round(node_figure[name], 3), "GB/s", labels={"node": name}))
    slow_nodes = {n: v for n, v in node_figure.items() if v < straggler_fraction * median} if len(names) > 2 else {}
    rows = [
        Row(
            Status.FAIL if value < fail_fraction * median else Status.WARN,
            f"{value:.3g} GB/s at best, {value / median:.2f} x the median {median:.3g} GB/s",
            node=name,
        )
        for name, value in sorted(slow_nodes.items())
    ]
    links = [
        t
        for t in transfers
        if t["gbps"] < straggler_fraction * median and not {names[t["src"]], names[t["dst"]]} & set(slow_nodes)
    ]
    text = f"{len(transfers)} transfers between ring neighbours, median {median:.3g} GB/s"
    results = [_stragglers_result(rows, text, metrics)]
    if links:
        results.append(_slow_links(links, names, median, fail_fraction))
    return results


def _stragglers_result(rows: list[Row], text: str, metrics: list[Metric]) -> Result:
    if not rows:
        return Result(Status.PASS, f"{text}; no slow node", metrics=metrics)
    result = from_rows(
        rows,
        text,
        Remediation(
            "A node slow to every neighbour has a degraded NIC, cable, switch port or a rate limit of its own.",
            ["ibstat", "ethtool <IFACE> | grep -i speed", "tc qdisc show"],
        ),
        metrics,
    )
    result.aspect = "stragglers"
    return result


def _slow_links(links: list[dict[str, Any]], names: list[str], median: float, fail_fraction: float) -> Result:
    status = Status.FAIL if any(t["gbps"] < fail_fraction * median for t in links) else Status.WARN
    text = "; ".join(
        f"{names[t['src']]} -> {names[t['dst']]} {t['gbps']:.3g} GB/s ({t['gbps'] / median:.2f} x the median)"
        for t in links
    )
    note = " (with two nodes the slow end cannot be told)" if len(names) == 2 else ""
    return Result(
        status,
        f"slow link {text}{note}",
        aspect="links",
        remediation=Remediation(
            "A link slow between two otherwise fast nodes is a cable, a switch port or a route between them.",
            ["ibdiagnet", "perfquery"],
        ),
    )


def judge_skew(software: dict[str, dict[str, Any]]) -> Result:
    """Versions and NCCL_*/GLOO_*/TORCH_* settings compared across nodes: every difference is a warning that
    names the setting and which nodes have which value."""
    findings = []
    for kind in ("versions", "settings"):
        keys = sorted({k for s in software.values() for k in s.get(kind, {})})
        for key in keys:
            values: dict[str, list[str]] = {}
            for node, facts in sorted(software.items()):
                values.setdefault(str(facts.get(kind, {}).get(key, "unset")), []).append(node)
            if len(values) > 1:
                spread = "; ".join(f"{v} on {', '.join(nodes)}" for v, nodes in sorted(values.items()))
                findings.append(f"{key}: {spread}")
    if not findings:
        return Result(Status.PASS, f"same versions and distributed settings on all {len(software)} nodes")
    return Result(
        Status.WARN,
        " | ".join(findings),
        remediation=Remediation(
            "Different driver, CUDA, NCCL or torch builds, or different NCCL settings, make collectives fail or "
            "run at the slowest node's pace; install and configure every node from one image.",
            ["gpudoctor check --only cluster.skew --json  # every node's values"],
        ),
    )


# --- checks ----------------------------------------------------------------------------------------------
@check(
    "cluster.nodes",
    "Every node's own checks",
    needs=("cluster",),
    settings={**FRACTIONS, "join_timeout": 120.0, "report_timeout": 0.0},
)
def nodes(ctx: CheckContext) -> list[Result] | Result:
    """Rank 0: each node's verdict (lost ones included), then nodes whose own figures straggle."""
    if not ctx.cluster.leader:
        return Result(Status.SKIP, f"judged by rank 0 ({ctx.cluster.leader_name})")
    reports = ctx.cluster.node_summaries()
    figures: dict[str, dict[str, float]] = {}
    for node in reports:
        for figure, value in node.get("figures", {}).items():
            figures.setdefault(figure, {})[node["name"]] = value
    stragglers = judge_stragglers(figures, ctx.settings["straggler_fraction"], ctx.settings["fail_fraction"])
    stragglers.aspect = "stragglers"
    return [judge_nodes(reports), stragglers]


@check("cluster.skew", "Same software on every node", needs=("cluster",))
def skew(ctx: CheckContext) -> Result:
    """Driver, CUDA, torch, NCCL, cuDNN, torchvision and every NCCL_*/GLOO_*/TORCH_* setting, node by node."""
    if not ctx.cluster.leader:
        return Result(Status.SKIP, f"judged by rank 0 ({ctx.cluster.leader_name})")
    return judge_skew({n["name"]: n["software"] for n in ctx.cluster.node_summaries() if n.get("software")})


def measure_links(ctx: RankContext) -> dict[str, Any]:
    """One rank per node: for each round, this rank's pair exchanges the buffer both ways (sender timed up
    to the receiver's one-element acknowledgement; every delivery verified on the receiving side)."""
    import torch
    import torch.distributed as dist

    numel = ctx.params["bytes"] // 4
    buffer = torch.empty(numel, device=ctx.device)
    ack = torch.zeros(1, device=ctx.device)
    sent, wrong = [], 0
    for number, pairs in enumerate(ring_rounds(ctx.world_size)):
        ctx.phase(f"links round {number}")
        dist.barrier()
        for a, b in pairs:
            for src, dst in ((a, b), (b, a)):
                if ctx.rank == src:
                    sent.append({"src": src, "dst": dst, "gbps": _send(ctx, buffer, ack, dst)})
                elif ctx.rank == dst:
                    wrong += _receive(ctx, buffer, ack, src)
    dist.barrier()  # nobody leaves (and loads the machine tearing down) while another pair still measures
    return {"rank": ctx.rank, "sent": sent, "wrong": wrong}


def _send(ctx: RankContext, buffer: Any, ack: Any, dst: int) -> float:
    import torch.distributed as dist

    from gpudoctor.api import measure

    buffer.fill_(ctx.rank + 1)

    def exchange() -> None:
        dist.send(buffer, dst)
        dist.recv(ack, dst)

    times = measure.time_repeats(exchange, ctx.device, ctx.params["warmup"], ctx.params["iters"])
    return buffer.numel() * 4 / measure.summary(times)["median_s"] / 1e9


def _receive(ctx: RankContext, buffer: Any, ack: Any, src: int) -> int:
    """Counts deliveries that are not the sender's values (the buffer is cleared before each one)."""
    import torch.distributed as dist

    from gpudoctor.api import measure

    wrong = [0]

    def exchange() -> None:
        dist.recv(buffer, src)
        dist.send(ack, src)

    def verify() -> None:
        wrong[0] += int((buffer != src + 1).any())

    measure.time_repeats(
        exchange, ctx.device, ctx.params["warmup"], ctx.params["iters"], prepare=buffer.zero_, check=verify
    )
    return wrong[0]


@check(
    "cluster.links",
    "Links between nodes",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=300,
    settings={**FRACTIONS, "bytes": 0, "warmup": 2, "iters": 10},
)
def links(ctx: CheckContext) -> list[Result] | Result:
    """Every node against its ring neighbours, both directions; slow nodes and slow links named."""
    params = {**ctx.work("bytes"), "bytes": ctx.settings["bytes"] or LINK_BYTES[ctx.device]}
    outcome = ctx.run_across("gpudoctor.checks.cluster:measure_links", params, local_ranks=1)
    if isinstance(outcome, Result):
        return outcome
    names = [m.name for m in outcome.members]
    wrong = {r.data["rank"]: r.data["wrong"] for r in outcome.ranks}
    transfers = [{**t, "verified": not wrong[t["dst"]]} for r in outcome.ranks for t in r.data["sent"]]
    return judge_links(transfers, names, ctx.settings["straggler_fraction"], ctx.settings["fail_fraction"])


def network_expectation(summaries: list[dict[str, Any]]) -> expect.Expectation | None:
    """The slowest node's active InfiniBand ports, summed: what an all-reduce across nodes can reach per node
    (nccl-tests: multi-node busbw approaches the network's bandwidth), at 0.8 of the line rate."""
    per_node = []
    for node in summaries:
        ports = [p for p in node.get("infiniband") or [] if "ACTIVE" in str(p.get("state", ""))]
        gbits = sum(float(str(p.get("rate", "0")).split()[0]) for p in ports)
        if not gbits:
            return None
        per_node.append((gbits, node["name"], len(ports)))
    if not per_node:
        return None
    gbits, name, count = min(per_node)
    return expect.Expectation(gbits / 8 * 0.8, f"{name}: {count} active InfiniBand ports, {gbits:g} Gb/s x 0.8")


@check(
    "cluster.allreduce",
    "All-reduce across every node",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=300,
    settings={"floor": 0.75, "baseline_tolerance": 0.9, "cpu_ranks": 1, "warmup": 3, "iters": 10},
)
def allreduce_across(ctx: CheckContext) -> Result:
    """Every GPU of every node in one all-reduce sweep, verified; busbw against the slowest node's network."""
    sizes = allreduce.GPU_SIZES if ctx.device == "cuda" else allreduce.CPU_SIZES
    outcome = ctx.run_across("gpudoctor.checks.allreduce:worker", {**ctx.work(), "sizes": sizes, "out_of_place": False})
    if isinstance(outcome, Result):
        return outcome
    world = len(outcome.ranks)
    rows = allreduce.combine([r.data for r in outcome.ranks], world)
    expected = expect.pick(ctx.baseline("busbw"), network_expectation(ctx.cluster.node_summaries()))
    result = allreduce.judge(rows, world, ctx.device, expected, ctx.settings["floor"], {})
    result.summary = f"{len(outcome.members)} nodes, {result.summary}"
    return result


@check(
    "cluster.ddp",
    "DDP training across every node",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=600,
    settings={**{k: v for k, v in ddp.SETTINGS.items() if k != "scaling"}, "cpu_ranks": 1},
)
def ddp_across(ctx: CheckContext) -> list[Result] | Result:
    """The reference DDP run on every GPU of every node: loss falls, replicas identical, gradient right."""
    capabilities = [tuple(g["compute_capability"]) for g in ctx.gpus if g.get("compute_capability")]
    p = ddp.resolve(ctx.settings, ctx.device, capabilities, ctx.work_factor)
    outcome = ctx.run_across("gpudoctor.checks.ddp:worker", p)
    if isinstance(outcome, Result):
        return outcome
    return ddp.judge([r.data for r in outcome.ranks], None, p, ctx.device, None, ctx.settings)
