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
    Work,
    check,
    command,
    copies,
    expect,
    from_rows,
    gpu_for_cuda_index,
    gpu_label,
    gpu_model,
    gpu_row,
    is_geforce,
    routes,
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
        nvml_ok = routes.p2p_status(topology, a.get("index"), b.get("index")) == 0
        expected = copies.p2p_copy_expectation(a, b, pair["access"])
        status, metric = expect.verdict("p2p_copy", pair["gbps"], "GB/s", expected, floor, copies.p2p_peak(a, b))
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
    work=Work(4, {"cuda": 3.0}),
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
        if routes.p2p_status(topology, a.get("index"), b.get("index")) == 0
    ]
    if not reported:
        return Result(
            Status.PASS, f"the driver reports no P2P between the {len(boards)} GeForce boards: NCCL avoids it"
        )
    off = [f"NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']}"] if routes.nccl_int(env.get("NCCL_P2P_DISABLE")) else []
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


# NVML's topology levels, as `topo -m` names them (nvmlGpuTopologyLevel_t).
LEVELS = {10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# NCCL uses GPUDirect RDMA only where the GPU and the NIC are at most PXB apart (one PCIe switch tree): NVIDIA/nccl
# src/graph/paths.cc, ncclTopoCheckGdr, `int netGdrLevel = PATH_PXB` ("GPU Direct RDMA Disabled for GPU ... /
# HCA ... (distance %d > %d)"); NCCL_NET_GDR_LEVEL overrides it.
GDR_LEVEL = 20
GRACE = ("GH200", "GB200", "GB300")  # Grace CPUs: the GPU reaches its NICs over NVLink-C2C, which topo -m shows as SYS


def judge_topology(topology: dict[str, Any], gpus: list[dict[str, Any]]) -> Result:
    """What `topo -m` (or NVML) says of the links: the NVLinks joining each GPU pair against the board's full
    count (every pair of an NVSwitch board at its datasheet's links, else the most this node shows), and each
    GPU's nearest NIC against the distance NCCL takes GPUDirect RDMA over."""
    indexes = topology.get("indexes") or []
    by_index = {g.get("index"): g for g in gpus}
    rows = []
    for position, index in enumerate(indexes):
        gpu = by_index.get(index) or {"index": index}
        problems = [*_nvlink_problems(topology, position, indexes, gpu), *_nic_problems(topology, position, gpu)]
        worst_status = Status.FAIL if any(s == Status.FAIL for s, _ in problems) else Status.WARN
        said = "; ".join(text for _, text in problems)
        rows.append(gpu_row(gpu, worst_status if problems else Status.PASS, said or _fine(topology, position, gpu)))
    return from_rows(
        rows,
        _summary(topology, indexes),
        Remediation(
            "An NVLink pair with fewer links than the board has lost links (a reset or the board's replacement); a "
            "GPU with no NIC under its PCIe switch sends inter-node traffic through host memory (no GPUDirect RDMA).",
            [
                command("nvidia-smi nvlink -s -i {gpu}"),
                "nvidia-smi topo -m",
                "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET,GRAPH python train.py 2>&1 | grep -i 'GPU Direct RDMA'",
            ],
        ),
    )


def _nvlink_problems(
    topology: dict[str, Any], position: int, indexes: list[int], gpu: dict[str, Any]
) -> list[tuple[Status, str]]:
    matrix = topology.get("nvlinks") or []
    row = matrix[position] if position < len(matrix) else []
    counts = [c for c in row if isinstance(c, int)]
    if not counts or not all(counts):  # no NVLink here, or bridged pairs: nothing to hold every pair to
        return []
    full = _full_links(matrix, gpu)
    short = [(indexes[k], c) for k, c in enumerate(row) if isinstance(c, int) and c < full]
    return [
        (Status.FAIL, f"NV{c} to GPU {peer} (NV{full} on this board: {full - c} NVLinks down)") for peer, c in short
    ]


def _full_links(matrix: list[list[Any]], gpu: dict[str, Any]) -> int:
    """What every pair of a fully connected board should show: the datasheet's links where the model is known,
    else the most any pair here shows."""
    model = gpu_model(gpu) or {}
    seen = max((c for row in matrix for c in row if isinstance(c, int)), default=0)
    return int(model.get("nvlink_links") or seen) if seen <= int(model.get("nvlink_links") or seen) else seen


def _nic_problems(topology: dict[str, Any], position: int, gpu: dict[str, Any]) -> list[tuple[Status, str]]:
    nics = topology.get("nics") or []
    levels = [(n["levels"][position], n) for n in nics if position < len(n.get("levels") or [])]
    known = [(level, n) for level, n in levels if isinstance(level, int)]
    if not known or any(g in str(gpu.get("name") or "") for g in GRACE):
        return []
    nearest, nic = min(known, key=lambda pair: pair[0])
    if nearest <= GDR_LEVEL or not (_some_gpu_near(nics) or gpu_model(gpu)):
        return []  # near; or no GPU here has a NIC near and the board is not known (a Grace board shows SYS)
    said = f"nearest NIC {nic.get('device') or nic['name']} is {LEVELS.get(nearest, nearest)} away"
    return [(Status.WARN, f"{said}: no GPUDirect RDMA (NCCL takes it within PXB)")]


def _some_gpu_near(nics: list[dict[str, Any]]) -> bool:
    return any(isinstance(level, int) and level <= GDR_LEVEL for n in nics for level in n.get("levels") or [])


def _fine(topology: dict[str, Any], position: int, gpu: dict[str, Any]) -> str:
    matrix = topology.get("nvlinks") or []
    row = [c for c in (matrix[position] if position < len(matrix) else []) if isinstance(c, int)]
    said = [f"NV{max(row)} to {sum(1 for c in row if c)} GPUs" if any(row) else "no NVLink"]
    levels = [n["levels"][position] for n in topology.get("nics") or [] if position < len(n.get("levels") or [])]
    known = [level for level in levels if isinstance(level, int)]
    if known:
        said.append(f"nearest NIC {LEVELS.get(min(known), min(known))}")
    return ", ".join(said)


def _summary(topology: dict[str, Any], indexes: list[int]) -> str:
    nics = len(topology.get("nics") or [])
    said = f"{len(indexes)} GPU{'s' if len(indexes) != 1 else ''}: links as the topology shows them"
    return said + (f", {nics} NIC{'s' if nics != 1 else ''} placed" if nics else "")


@check("p2p.topology", "NVLinks per GPU pair and the NIC near each GPU", needs=("nvml",), min_gpus=1)
def topology(ctx: CheckContext) -> Result:
    """`nvidia-smi topo -m` (pasted, or NVML's own topology): each GPU pair's NVLinks against the board's full
    count, and each GPU's nearest NIC against the distance NCCL uses GPUDirect RDMA over."""
    found = ctx.nvml.get("topology") or {}
    if not found.get("indexes") or not (found.get("nics") or any(any(r) for r in found.get("nvlinks") or [])):
        return Result(Status.SKIP, "no NVLink or NIC in the topology (add the output of `nvidia-smi topo -m`)")
    return judge_topology(found, ctx.gpus)
