"""The network between nodes: what NCCL chose (its log, pasted or captured by cluster mode), what the node has (RDMA
ports, the peer memory module, the devices a container sees), what an all-reduce between nodes should reach on
each, and the interfaces NCCL's and gloo's sockets are told to use. The judges are gpudoctor/judging/network.py;
the causes they find lead the report (gpudoctor/diagnosis/network.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.api import Metric, Remediation, Result, Row, Status, check, nics, worst
from gpudoctor.judging import net_warnings, network, sockets

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
    from gpudoctor.judging.expect import Expectation

SHOW = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ... 2>&1 | grep -E 'Using network|NET/|GPU Direct RDMA'"


@check("network.nccl", "NCCL's network between nodes, and what it should reach")
def nccl(ctx: CheckContext) -> Result:
    """What NCCL chose between nodes (its log: the transport, the NICs, GPUDirect RDMA, channels), what this node
    has (RDMA ports), the all-reduce figure each should give, and why they differ."""
    return judge_nccl(ctx.facts)


def judge_nccl(facts: dict[str, Any]) -> Result:
    """The verdict over a node's facts or a paste's: the causes network.causes finds (the first leads), then the
    WARN lines NCCL's network code or a plugin printed (net_warnings: each a finding, quoted), else what NCCL chose
    and the figure it should reach; skipped where neither an NCCL log nor an RDMA port is there."""
    found = network.fabric(facts)
    causes = network.causes(facts)
    warned = net_warnings.warned(facts, causes)
    own = net_warnings.findings(warned)
    if found.chosen is None and not found.ports and not causes and not own:
        said = (
            "NCCL's log here names no network between nodes (no 'Using network' line)"
            if facts.get("nccl")
            else "no NCCL log and no RDMA port: nothing to judge the network between nodes by"
        )
        return Result(
            Status.SKIP,
            said,
            remediation=Remediation("NCCL says what it chose with NCCL_DEBUG=INFO: add its output.", [SHOW]),
        )
    said, whole = described(found), "; ".join(filter(None, [described(found, whole=True), nearest(facts)]))
    metrics, quotes = figures(found), [w.quote for w in warned]
    if not causes and not own:
        return Result(Status.PASS, said, metrics=metrics, detail=whole)
    rows = [Row(c.status, c.summary, name=c.id) for c in causes]
    rows += [Row(w.status, w.said(), name=f"line {w.line}") for w in own]
    return Result(
        worst([row.status for row in rows]),
        causes[0].summary if causes else net_warnings.summary(own),
        rows=rows,
        metrics=metrics,
        remediation=causes[0].remediation if causes else own[0].remediation,
        detail=whole,
        quotes=quotes,
    )


def described(found: network.Fabric, whole: bool = False) -> str:
    """What NCCL chose and what the node has, with the figure each should reach; `whole` with every detail."""
    parts = []
    if found.chosen:
        parts.append(f"NCCL chose {found.chosen.said(whole)}")
    if found.ports:
        gbits = sum(float(p["gbits"]) for p in found.ports)
        kind = network.FABRICS.get(found.best or "", "RDMA")
        parts.append(f"{len(found.ports)} {kind} port{'s' if len(found.ports) != 1 else ''} here ({gbits:g} Gb/s)")
    chosen, best = found.expected_chosen, found.expected_best
    if chosen:
        parts.append(f"healthy ~{chosen.value:.4g} GB/s busbw between nodes" + (f" ({chosen.source})" if whole else ""))
    if best and best is not chosen:
        over = network.FABRICS.get(found.best or "", "RDMA")
        parts.append(f"~{best.value:.4g} GB/s over {over}" + (f" ({best.source})" if whole else ""))
    elif found.chosen and not chosen:
        parts.append(unknown_figure(found.chosen))
    return "; ".join(parts)


def nearest(facts: dict[str, Any]) -> str:
    """Each GPU's nearest NIC and its PCIe distance, where `topo -m` (or NVML) gives them: "nearest NIC: GPU 0
    mlx5_0 PIX, GPU 1 mlx5_0 NODE"."""
    found = nics.nearest_nics((facts.get("nvml") or {}).get("topology") or {})
    said = ", ".join(f"GPU {n['gpu']} {n['nic']} {n['distance']}" for n in found)
    return f"nearest NIC: {said}" if said else ""


def unknown_figure(chosen: network.Choice) -> str:
    """Why no figure is given for what NCCL chose: nothing published for the fabric, or its line rate unknown."""
    if network.fabric_share(chosen.fabric) is None:
        return f"no published all-reduce figure for {network.FABRICS.get(chosen.fabric or '', chosen.net)}"
    if chosen.fabric == "socket":
        return "the interfaces' speed is not shown (run it on the node, or add `ethtool <interface>`)"
    return "the NICs' speed is not shown (add `ibstat`)"


def figures(found: network.Fabric) -> list[Metric]:
    """The expected bus bandwidth between nodes on the transport NCCL chose and on the best the node has."""
    metrics = []
    for which, expected, fabric in (
        ("chosen", found.expected_chosen, found.chosen.fabric if found.chosen else None),
        ("best", found.expected_best, found.best),
    ):
        if expected is not None:
            metrics.append(metric(which, expected, fabric))
    return metrics


def metric(which: str, expected: Expectation, fabric: str | None) -> Metric:
    return Metric(
        "expected_busbw",
        round(expected.value, 2),
        "GB/s",
        labels={"transport": which, "fabric": fabric or "unknown"},
        reference_source=expected.source,
    )


@check("network.interfaces", "The interfaces NCCL's and gloo's sockets are told to use", uses=("system",))
def interfaces(ctx: CheckContext) -> Result:
    """NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME against the node's interfaces: one that is down, a container or
    VM bridge (docker0), the loopback or without an address is unreachable from other nodes."""
    spans = ctx.cluster is not None or network.spans_nodes(ctx.system.get("env") or {})
    return judge_interfaces(ctx.system, spans_nodes=spans)


def judge_interfaces(system: dict[str, Any], spans_nodes: bool = False) -> Result:
    env = system.get("env") or {}
    settings = {s: env[s] for s in sockets.SOCKET_SETTINGS if str(env.get(s) or "").strip()}
    if not settings:
        return Result(Status.SKIP, "neither NCCL_SOCKET_IFNAME nor GLOO_SOCKET_IFNAME is set: each chooses")
    problems = [sockets.interface_cause(p, spans_nodes) for p in sockets.interface_problems(system)]
    if not problems:
        said = ", ".join(f"{k}={v!r}" for k, v in settings.items())
        return Result(Status.PASS, f"{said}: up, with an address other nodes can reach")
    return Result(
        worst([p.status for p in problems]),
        "; ".join(p.summary for p in problems),
        rows=[Row(p.status, p.summary, name=p.id) for p in problems],
        remediation=problems[0].remediation,
    )
