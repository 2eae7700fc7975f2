"""Peer access between GPUs: the access matrix (torch and NVML), copy bandwidth and latency per pair, and
the data of every peer copy verified (IOMMU/ACS setups corrupt or crawl while reporting P2P available). The
copies run in checks/ranks/p2p.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.api import (
    Metric,
    Remediation,
    Result,
    Status,
    check,
    expect,
    gpu_for_cuda_index,
    gpu_label,
    gpu_row,
    is_geforce,
)

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext


def wrong_copies(measured: dict[str, Any]) -> str:
    """How many of the checked copies came out wrong, in words."""
    if "copies_wrong" in measured:
        return f"data of {measured['copies_wrong']} of {measured['copies_checked']} copies"
    return "copied data"


def judge(
    pairs: list[dict[str, Any]],
    devices: list[dict[str, Any]],
    gpus: list[dict[str, Any]],
    topology: dict[str, Any],
    floor: float,
) -> Result:
    """Each ordered pair of torch devices (`src`, `dst`), judged and reported as the physical GPUs they are."""
    rows, worst_pair = [], None
    for pair in pairs:
        a = gpu_for_cuda_index(pair["src"], devices, gpus)
        b = gpu_for_cuda_index(pair["dst"], devices, gpus)
        nvml_ok = expect.p2p_status(topology, a.get("index"), b.get("index")) == 0
        expected = expect.p2p_copy_expectation(a, b, pair["access"])
        status, metric = expect.verdict("p2p_copy", pair["gbps"], "GB/s", expected, floor, expect.p2p_peak(a, b))
        metric.labels = {"peer": b.get("index", pair["dst"])}
        latency = Metric("p2p_latency", round(pair["latency_us"], 2), "us", labels=metric.labels)
        target = gpu_label(b)
        text = f"-> {target}: {metric.said()}; latency {pair['latency_us']:.1f} us"
        if not pair["verified"]:
            status, text = Status.FAIL, f"-> {target}: {wrong_copies(pair)} differs from the source"
        elif nvml_ok and not pair["access"]:
            status, text = Status.FAIL, f"-> {target}: NVML reports P2P but CUDA cannot enable it"
        basis = "data" if not pair["verified"] or (nvml_ok and not pair["access"]) else "figure"
        rows.append(gpu_row(a, status, text, [metric, latency], basis))
        if worst_pair is None or pair["gbps"] < worst_pair["gbps"]:
            worst_pair = pair
    if worst_pair is None:
        return Result(Status.SKIP, "no GPU pair to test: torch can use fewer than 2 GPUs")
    failed = [r for r in rows if r.status == Status.FAIL]
    metrics = [Metric("p2p_copy_slowest", round(worst_pair["gbps"], 2), "GB/s")]
    access = sum(p["access"] for p in pairs)
    if failed:
        return Result(
            Status.FAIL,
            f"{len(failed)} of {len(pairs)} GPU pairs fail: {failed[0].where} {failed[0].summary}",
            rows=rows,
            metrics=metrics,
            remediation=Remediation(
                "P2P that is reported but slow or corrupting usually means the IOMMU or PCIe ACS "
                "redirects peer traffic through the root complex.",
                [
                    "sudo dmesg | grep -iE 'dmar|iommu'",
                    "sudo lspci -vvv | grep -i acsctl",
                    "add iommu=pt (or intel_iommu=off / amd_iommu=off) to the kernel command line",
                ],
            ),
        )
    slow = [r for r in rows if r.status == Status.WARN]
    return Result(
        Status.WARN if slow else Status.PASS,
        f"{len(pairs)} GPU pairs verified, {access} with peer access; slowest {worst_pair['gbps']:.1f} GB/s"
        + (f"; {len(slow)} slower than healthy: {slow[0].where} {slow[0].summary}" if slow else ""),
        rows=rows,
        metrics=metrics,
    )


@check(
    "p2p.access",
    "Peer access and copies between GPUs",
    level="standard",
    needs=("gpu", "live", "torch"),
    min_gpus=2,
    timeout_s=180,
    settings={"bytes": 256 * 2**20, "floor": 0.75, "warmup": 3, "iters": 10},
)
def p2p(ctx: CheckContext) -> Result:
    """Access matrix (torch and NVML), copy bandwidth and latency per pair, every peer copy verified."""
    data = ctx.run_isolated("gpudoctor.checks.ranks.p2p:measure_pairs", ctx.work("bytes"))
    if failed := ctx.failed(data):
        return failed
    return judge(data["pairs"], ctx.devices, ctx.gpus, ctx.nvml.get("topology", {}), ctx.settings["floor"])


P2P_LEVEL_OFF = ("LOC", "0")


def judge_consumer_p2p(gpus: list[dict[str, Any]], topology: dict[str, Any], env: dict[str, str]) -> Result:
    """GeForce boards whose driver reports peer-to-peer between them. NVIDIA: "GeForce cards do not support
    P2P" (NVIDIA/nccl-tests#287); NCCL has no GeForce rule of its own and trusts the driver (NVML's P2P status
    and cudaDeviceCanAccessPeer, src/graph/paths.cc, src/transport/p2p.cc at v2.30.7-1), so where a driver
    reports it anyway the first collective hangs or returns wrong data (NVIDIA/nccl-tests#117, NVIDIA/nccl#1127,
    deepspeedai/DeepSpeed#4433). Where the driver reports no P2P, NCCL goes through host memory by itself."""
    boards = [g for g in gpus if is_geforce(g.get("name"))]
    if len(boards) < 2:
        return Result(Status.SKIP, "fewer than two GeForce boards")
    reported = [
        (a, b)
        for i, a in enumerate(boards)
        for b in boards[i + 1 :]
        if expect.p2p_status(topology, a.get("index"), b.get("index")) == 0
    ]
    if not reported:
        return Result(
            Status.PASS, f"the driver reports no P2P between the {len(boards)} GeForce boards: NCCL avoids it"
        )
    off = [f"NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']}"] if expect.nccl_int(env.get("NCCL_P2P_DISABLE")) else []
    off += [f"NCCL_P2P_LEVEL={env['NCCL_P2P_LEVEL']}"] if env.get("NCCL_P2P_LEVEL", "").upper() in P2P_LEVEL_OFF else []
    pairs = ", ".join(f"{gpu_label(a)}-{gpu_label(b)}" for a, b in reported[:3])
    if off:
        return Result(
            Status.PASS, f"the driver reports P2P between GeForce boards ({pairs}); {off[0]} keeps NCCL off it"
        )
    return Result(
        Status.WARN,
        f"the driver reports P2P between GeForce boards ({pairs}), which GeForce does not support: NCCL will use it "
        "and may hang or return wrong data",
        remediation=Remediation(
            "NVIDIA: GeForce cards do not support P2P (NVIDIA/nccl-tests#287); drivers that report it anyway make "
            "NCCL's first collective hang or corrupt data. Keep NCCL off P2P (it goes through host memory).",
            ["export NCCL_P2P_DISABLE=1", "nvidia-smi topo -p2p r"],
        ),
    )


@check("p2p.geforce", "GeForce boards and peer-to-peer", needs=("nvml",), uses=("system",), min_gpus=2)
def geforce(ctx: CheckContext) -> Result:
    """Peer-to-peer the driver reports between GeForce boards, which NCCL trusts and GeForce does not support."""
    if lacking := ctx.lacks("nvml", "topology.p2p_read", would_give="add the output of `nvidia-smi topo -p2p r`"):
        return Result(Status.SKIP, lacking)
    return judge_consumer_p2p(ctx.gpus, ctx.nvml.get("topology", {}), ctx.env)
