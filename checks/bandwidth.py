"""Copy bandwidth per GPU: pinned host<->device against the PCIe link, device memory against the spec sheet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpudoctor.api import (
    CheckContext,
    Metric,
    Remediation,
    Result,
    Row,
    Status,
    check,
    expect,
    gpu_row,
    pci_address,
    worst,
)


def measure_host_device(params: dict[str, Any]) -> dict[str, Any]:
    """One GPU at a time (so GPUs behind one switch do not share the figure), as nvbandwidth measures: pinned
    buffers of its own, first touched from the CPUs of the GPU's NUMA node (`numa_cpus`: cuda index -> CPUs)
    so the pages live there; every H2D and D2H copy verified against the source."""
    import os

    from gpudoctor.api import measure, progress

    results = []
    everywhere = os.sched_getaffinity(0)
    for index in range(measure.cuda_devices()):
        progress("bandwidth", f"GPU {index} host<->device")
        cpus = set(params.get("numa_cpus", {}).get(str(index), [])) & everywhere
        os.sched_setaffinity(0, cpus or everywhere)
        try:
            results.append({"cuda_index": index, **host_copies(index, params), "numa_node": numa_node(params, index)})
        finally:
            os.sched_setaffinity(0, everywhere)
    return {"gpus": results}


def numa_node(params: dict[str, Any], index: int) -> int | None:
    return params.get("numa_nodes", {}).get(str(index))


def host_copies(index: int, params: dict[str, Any]) -> dict[str, Any]:
    """Pinned H2D and D2H on cuda:`index`, each copy's data checked (the destination cleared before it)."""
    import torch

    from gpudoctor.api import measure

    numel = params["bytes"] // 4
    device = torch.device("cuda", index)
    host = torch.randn(numel).pin_memory()
    back = torch.empty(numel).pin_memory()
    expected = measure.checksum(host)
    runs = params["warmup"], params["iters"]
    with torch.cuda.device(index):
        dev = torch.empty(numel, device=device)
        h2d = measure.checked_repeats(
            lambda: dev.copy_(host, non_blocking=True),
            device,
            *runs,
            clear=dev.zero_,
            verify=lambda: measure.checksum(dev) == expected,
        )
        d2h = measure.checked_repeats(
            lambda: back.copy_(dev, non_blocking=True),
            device,
            *runs,
            clear=back.zero_,
            verify=lambda: sync_equal(device, back, host),
        )
    wrong = h2d.wrong + d2h.wrong
    return {
        "h2d_gbps": params["bytes"] / measure.summary(h2d.times)["median_s"] / 1e9,
        "d2h_gbps": params["bytes"] / measure.summary(d2h.times)["median_s"] / 1e9,
        "verified": wrong == 0,
        "copies_checked": h2d.checked + d2h.checked,
        "copies_wrong": wrong,
    }


def sync_equal(device: Any, got: Any, want: Any) -> bool:
    """A non-blocking copy into host memory is read only once the GPU has finished it."""
    import torch

    torch.cuda.synchronize(device)
    return bool(torch.equal(got, want))


def measure_device_memory(params: dict[str, Any]) -> dict[str, Any]:
    """A large device-to-device copy per GPU; bytes read plus bytes written over the median time."""
    import torch

    from gpudoctor.api import measure, progress

    numel = params["bytes"] // 4
    results = []
    for index in range(measure.cuda_devices()):
        progress("bandwidth", f"GPU {index} device memory")
        device = torch.device("cuda", index)
        with torch.cuda.device(index):
            src = torch.randn(numel, device=device)
            dst = torch.empty_like(src)
            timing = measure.summary(
                measure.time_repeats(lambda s=src, d=dst: d.copy_(s), device, params["warmup"], params["iters"])
            )
            results.append(
                {
                    "cuda_index": index,
                    "gbps": 2 * params["bytes"] / timing["median_s"] / 1e9,
                    "verified": measure.checksum(src) == measure.checksum(dst),
                }
            )
            del src, dst
    return {"gpus": results}


def host_device_row(
    m: dict[str, Any], gpu: dict[str, Any], floor: float, baseline: dict[str, expect.Expectation | None]
) -> Row:
    """One GPU's pinned copies both ways against its host link (PCIe, or NVLink-C2C on a Grace part)."""
    peak = expect.pcie_peak(gpu)
    judged = [
        expect.gpu_verdict(
            way,
            m[f"{way}_gbps"],
            "GB/s",
            expect.pick(baseline.get("h2d"), expect.pcie_copy_expectation(gpu, way)),
            floor,
            peak,
        )
        for way in ("h2d", "d2h")
    ]
    metrics = [metric for _, metric in judged]
    where = f" (host memory on NUMA node {m['numa_node']})" if m.get("numa_node") is not None else ""
    text = f"H2D {m['h2d_gbps']:.1f} GB/s, D2H {m['d2h_gbps']:.1f} GB/s{where}"
    if not m["verified"]:
        wrong = f" in {m['copies_wrong']} of {m['copies_checked']} copies" if "copies_wrong" in m else ""
        return gpu_row(gpu, Status.FAIL, f"data copied to the GPU and back differs{wrong}", metrics)
    if any(expect.measurement_error(m[k], peak) for k in ("h2d_gbps", "d2h_gbps")):
        return gpu_row(gpu, Status.FAIL, f"{text}: above the {metrics[0].expected_source}", metrics)
    if metrics[0].expected is None:
        why = (
            "a MIG slice's share of the copy engines is not published" if gpu.get("mig_slice") else "PCIe link unknown"
        )
        return gpu_row(gpu, Status.WARN, f"{text}; {why}, not judged", metrics)
    status = worst([s for s, _ in judged])
    if status != Status.PASS:
        low = next(metric for s, metric in judged if s == status)
        text += f", {low.name.upper()} {expect.shortfall(low)}"
    return gpu_row(gpu, status, text, metrics)


def device_memory_row(
    m: dict[str, Any], gpu: dict[str, Any], floor: float, baseline: dict[str, expect.Expectation | None]
) -> Row:
    """One GPU's device-to-device copy against its datasheet memory bandwidth."""
    expected = expect.pick(baseline.get("copy"), expect.model_expectation(gpu, "hbm_gbps"))
    peak = expect.model_peak(gpu, "hbm_gbps")
    status, metric = expect.gpu_verdict("copy", m["gbps"], "GB/s", expected, floor, peak)
    if not m["verified"]:
        return gpu_row(gpu, Status.FAIL, "device copy does not match its source", [metric])
    if expect.measurement_error(m["gbps"], peak):
        return gpu_row(gpu, Status.FAIL, f"{m['gbps']:.0f} GB/s: {metric.expected_source}", [metric])
    if expected is None:
        note = expect.unknown_model_note(gpu) or "; no figure"
        return gpu_row(gpu, Status.WARN, f"{m['gbps']:.0f} GB/s{note}", [metric])
    note = "" if status == Status.PASS else f", {expect.shortfall(metric)}"
    return gpu_row(gpu, status, f"{m['gbps']:.0f} GB/s{note}", [metric])


@dataclass(frozen=True)
class Copy:
    """One kind of copy: the worker that measures it, how one GPU's figures are judged, what it is called."""

    measure: str
    row: Callable[..., Row]
    figure: str  # the baseline figure: the slowest GPU's `field`
    field: str
    ok: str
    remediation: Remediation


HOST_DEVICE = Copy(
    "measure_host_device",
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
    "measure_device_memory",
    device_memory_row,
    "copy",
    "gbps",
    "{n} GPUs at their memory bandwidth",
    Remediation(
        "Low device memory bandwidth with no throttling points at a degraded GPU; compare with its peers.",
        ["nvidia-smi -q -d PERFORMANCE,CLOCK -i <GPU>"],
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
    data = ctx.run_isolated(f"gpudoctor.checks.bandwidth:{copy.measure}", {**ctx.work("bytes"), **numa_of(ctx)})
    if isinstance(data, Result):
        return data
    result = judge(copy, ctx.with_gpus(data["gpus"]), ctx.settings["floor"], {copy.figure: ctx.baseline(copy.figure)})
    result.metrics.append(Metric(copy.figure, min(g[copy.field] for g in data["gpus"]), "GB/s", baseline=True))
    return result
