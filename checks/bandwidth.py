"""Copy bandwidth per GPU: pinned host<->device against the PCIe link, device memory against the spec sheet.
The copies run in checks/ranks/bandwidth.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpudoctor.api import (
    Metric,
    Remediation,
    Result,
    Row,
    Status,
    Work,
    check,
    command,
    copies,
    expect,
    gpu_row,
    pci_address,
    worst,
)

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext


def host_device_row(
    m: dict[str, Any], gpu: dict[str, Any], floor: float, baseline: dict[str, expect.Expectation | None]
) -> Row:
    """One GPU's pinned copies both ways against its host link (PCIe, or NVLink-C2C on a Grace part)."""
    peak = copies.pcie_peak(gpu)
    judged = [
        expect.gpu_verdict(
            way,
            m[f"{way}_gbps"],
            "GB/s",
            expect.pick(baseline.get("h2d"), copies.pcie_copy_expectation(gpu, way)),
            floor,
            peak,
        )
        for way in ("h2d", "d2h")
    ]
    metrics = [metric for _, metric in judged]
    where = f"; host memory on NUMA node {m['numa_node']}" if m.get("numa_node") is not None else ""
    text = "; ".join(metric.said() for metric in metrics) + where
    if not m["verified"]:
        wrong = f" in {m['copies_wrong']} of {m['copies_checked']} copies" if "copies_wrong" in m else ""
        return gpu_row(gpu, Status.FAIL, f"data copied to the GPU and back differs{wrong}", metrics, "data")
    if any(expect.measurement_error(m[k], peak) for k in ("h2d_gbps", "d2h_gbps")):
        return gpu_row(gpu, Status.FAIL, text, metrics, "figure")
    if metrics[0].expected is None:
        why = (
            "a MIG slice's share of the copy engines is not published" if gpu.get("mig_slice") else "PCIe link unknown"
        )
        return gpu_row(gpu, Status.WARN, f"{why}: not judged; {text}", metrics, "figure")
    status = worst([s for s, _ in judged])
    if status != Status.PASS:  # the one below its line first
        text = "; ".join(m.said() for _, m in sorted(judged, key=lambda sm: sm[0] == Status.PASS)) + where
    return gpu_row(gpu, status, text, metrics, "figure")


def device_memory_row(
    m: dict[str, Any], gpu: dict[str, Any], floor: float, baseline: dict[str, expect.Expectation | None]
) -> Row:
    """One GPU's device-to-device copy against its datasheet memory bandwidth."""
    expected = expect.pick(baseline.get("copy"), expect.model_expectation(gpu, "hbm_gbps"))
    peak = expect.model_peak(gpu, "hbm_gbps")
    status, metric = expect.gpu_verdict("copy", m["gbps"], "GB/s", expected, floor, peak)
    if not m["verified"]:
        return gpu_row(gpu, Status.FAIL, "device copy does not match its source", [metric], "data")
    if expected is None and not expect.measurement_error(m["gbps"], peak):
        note = expect.unknown_model_note(gpu) or "; no figure"
        return gpu_row(gpu, Status.WARN, f"{metric.said()}{note}", [metric], "figure")
    return gpu_row(gpu, status, metric.said(), [metric], "figure")


@dataclass(frozen=True)
class Copy:
    """One kind of copy: the worker that measures it, how one GPU's figures are judged, what it is called."""

    worker: str
    row: Callable[..., Row]
    figure: str  # the baseline figure: the slowest GPU's `field`
    field: str
    ok: str
    remediation: Remediation


HOST_DEVICE = Copy(
    "gpudoctor.checks.ranks.bandwidth:measure_host_device",
    host_device_row,
    "h2d",
    "h2d_gbps",
    "{n} GPUs at the PCIe link's speed",
    Remediation(
        "Slow host transfers mean a downtrained or narrow PCIe link, a slot behind a slow switch, or NUMA-remote "
        "memory.",
        ["sudo lspci -vvv -d 10de: | grep -E 'LnkCap|LnkSta'", "nvidia-smi topo -m"],
    ),
)
DEVICE_MEMORY = Copy(
    "gpudoctor.checks.ranks.bandwidth:measure_device_memory",
    device_memory_row,
    "copy",
    "gbps",
    "{n} GPUs at their memory bandwidth",
    Remediation(
        "Low device memory bandwidth with no throttling points at a degraded GPU; compare with its peers.",
        [command("nvidia-smi -q -d PERFORMANCE,CLOCK -i {gpu}")],
    ),
)


def judge(
    copy: Copy, measured: expect.Measured, floor: float, baseline: dict[str, expect.Expectation | None]
) -> Result:
    """Each GPU's (measurement, facts) pair judged on its own: against the PCIe link, or the datasheet."""
    return expect.judge_per_gpu(
        measured,
        lambda m, gpu: copy.row(m, gpu, floor, baseline),
        copy.ok.format(n=len(measured)),
        copy.remediation,
    )


SETTINGS = {"bytes": 256 * 2**20, "floor": 0.75, "baseline_tolerance": 0.9, "warmup": 3, "iters": 10}


@check(
    "bandwidth.host-device",
    "Host<->device bandwidth",
    level="standard",
    needs=("gpu", "live", "torch"),
    timeout_s=180,
    settings=SETTINGS,
    work=Work(5, {"cuda": 2.0}),
)
def host_device(ctx: CheckContext) -> Result:
    """Pinned host-to-device and device-to-host bandwidth per GPU, against its PCIe generation and width."""
    return _measure_and_judge(ctx, HOST_DEVICE)


@check(
    "bandwidth.device-memory",
    "Device memory bandwidth",
    level="standard",
    needs=("gpu", "live", "torch"),
    timeout_s=180,
    settings={**SETTINGS, "bytes": 2**30},
    work=Work(6, {"cuda": 1.0}),
)
def device_memory(ctx: CheckContext) -> Result:
    """A large device-to-device copy per GPU (bytes read plus written) against the GPU's specification."""
    return _measure_and_judge(ctx, DEVICE_MEMORY)


def numa_of(ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """Each torch device's NUMA node and that node's CPUs (from the system facts), keyed by cuda index."""
    by_bus = {pci_address(bus): node for bus, node in (ctx.system.get("gpu_numa_nodes") or {}).items()}
    nodes = {str(i): by_bus.get(pci_address(gpu.get("pci_bus_id"))) for i, gpu in enumerate(ctx.used_gpus)}
    cpus = ctx.system.get("numa_nodes") or {}
    return {
        "numa_nodes": {i: n for i, n in nodes.items() if n is not None},
        "numa_cpus": {i: cpus[str(n)] for i, n in nodes.items() if n is not None and str(n) in cpus},
    }


def _measure_and_judge(ctx: CheckContext, copy: Copy) -> Result:
    """Measure in an isolated process, judge against a baseline or the hardware, keep the slowest GPU's
    figure as this node's baseline metric."""
    data = ctx.run_isolated(copy.worker, {**ctx.work("bytes"), **numa_of(ctx)})
    if failed := ctx.failed(data):
        return failed
    result = judge(copy, ctx.with_gpus(data["gpus"]), ctx.settings["floor"], {copy.figure: ctx.baseline(copy.figure)})
    result.metrics.append(Metric(copy.figure, min(g[copy.field] for g in data["gpus"]), "GB/s", baseline=True))
    return result
