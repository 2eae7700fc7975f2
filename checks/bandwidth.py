"""Copy bandwidth per GPU: pinned host<->device against the PCIe link, device memory against the spec sheet."""

from __future__ import annotations

from typing import Any

from gpudoctor import expect
from gpudoctor.model import Metric, Remediation, Result, Status, from_rows, gpu_row
from gpudoctor.registry import check
from gpudoctor.runner import CheckContext, isolated_failure


def measure_host_device(params: dict[str, Any]) -> dict[str, Any]:
    """One GPU at a time (so GPUs behind one switch do not share the figure): pinned H2D and D2H, verified."""
    import torch

    from gpudoctor.isolate import progress
    from gpudoctor.measure import checksum, summary, time_repeats

    numel = params["bytes"] // 4
    host = torch.randn(numel).pin_memory()
    back = torch.empty(numel).pin_memory()
    results = []
    for index in range(torch.cuda.device_count()):
        progress("bandwidth", f"GPU {index} host<->device")
        device = torch.device("cuda", index)
        with torch.cuda.device(index):
            dev = torch.empty(numel, device=device)
            h2d = summary(
                time_repeats(lambda d=dev: d.copy_(host, non_blocking=True), device, params["warmup"], params["iters"])
            )
            d2h = summary(
                time_repeats(lambda d=dev: back.copy_(d, non_blocking=True), device, params["warmup"], params["iters"])
            )
            torch.cuda.synchronize(device)
        results.append(
            {
                "cuda_index": index,
                "h2d_gbps": params["bytes"] / h2d["median_s"] / 1e9,
                "d2h_gbps": params["bytes"] / d2h["median_s"] / 1e9,
                "verified": checksum(host) == checksum(back),
            }
        )
        del dev
    return {"gpus": results}


def measure_device_memory(params: dict[str, Any]) -> dict[str, Any]:
    """A large device-to-device copy per GPU; bytes read plus bytes written over the median time."""
    import torch

    from gpudoctor.isolate import progress
    from gpudoctor.measure import checksum, summary, time_repeats

    numel = params["bytes"] // 4
    results = []
    for index in range(torch.cuda.device_count()):
        progress("bandwidth", f"GPU {index} device memory")
        device = torch.device("cuda", index)
        with torch.cuda.device(index):
            src = torch.randn(numel, device=device)
            dst = torch.empty_like(src)
            timing = summary(time_repeats(lambda s=src, d=dst: d.copy_(s), device, params["warmup"], params["iters"]))
            results.append(
                {
                    "cuda_index": index,
                    "gbps": 2 * params["bytes"] / timing["median_s"] / 1e9,
                    "verified": checksum(src) == checksum(dst),
                }
            )
            del src, dst
    return {"gpus": results}


def judge_host_device(
    measured: list[tuple[dict[str, Any], dict[str, Any]]],
    floor: float,
    baseline: dict[str, expect.Expectation | None],
) -> Result:
    """Each GPU's (measurement, facts) pair against its PCIe link."""
    rows, metrics = [], []
    for m, gpu in measured:
        expected = expect.pick(baseline.get("h2d"), expect.pcie_copy_expectation(gpu))
        peak = expect.pcie_peak(gpu)
        status, metric = expect.verdict(f"GPU {gpu['index']} h2d", m["h2d_gbps"], "GB/s", expected, floor, peak)
        d2h_status, d2h_metric = expect.verdict(f"GPU {gpu['index']} d2h", m["d2h_gbps"], "GB/s", expected, floor, peak)
        metrics += [metric, d2h_metric]
        text = f"H2D {m['h2d_gbps']:.1f} GB/s, D2H {m['d2h_gbps']:.1f} GB/s"
        if not m["verified"]:
            rows.append(gpu_row(gpu, Status.FAIL, "data copied to the GPU and back differs"))
        elif any(expect.measurement_error(m[k], peak) for k in ("h2d_gbps", "d2h_gbps")):
            rows.append(gpu_row(gpu, Status.FAIL, f"{text}: above the {metric.expected_source}"))
        elif Status.FAIL in (status, d2h_status):
            rows.append(gpu_row(gpu, Status.FAIL, f"{text}, expected {metric.expected} ({metric.expected_source})"))
        else:
            rows.append(
                gpu_row(
                    gpu,
                    Status.PASS if expected else Status.WARN,
                    text if expected else f"{text}; PCIe link unknown, not judged",
                )
            )
    return from_rows(
        "bandwidth.host-device",
        rows,
        f"{len(rows)} GPUs at the PCIe link's speed",
        Remediation(
            "Slow host transfers mean a downtrained or narrow PCIe link, a slot behind a slow switch, or NUMA-remote "
            "memory.",
            ["sudo lspci -vvv -d 10de: | grep -E 'LnkCap|LnkSta'", "nvidia-smi topo -m"],
        ),
        metrics,
    )


def judge_device_memory(
    measured: list[tuple[dict[str, Any], dict[str, Any]]],
    floor: float,
    baseline: dict[str, expect.Expectation | None],
) -> Result:
    """Each GPU's (measurement, facts) pair against its datasheet memory bandwidth."""
    rows, metrics = [], []
    for m, gpu in measured:
        expected = expect.pick(baseline.get("copy"), expect.model_expectation(gpu, "hbm_gbps", "hbm_copy"))
        peak = expect.model_peak(gpu, "hbm_gbps")
        status, metric = expect.verdict(f"GPU {gpu['index']} copy", m["gbps"], "GB/s", expected, floor, peak)
        metrics.append(metric)
        if not m["verified"]:
            rows.append(gpu_row(gpu, Status.FAIL, "device copy does not match its source"))
        elif expect.measurement_error(m["gbps"], peak):
            rows.append(gpu_row(gpu, Status.FAIL, f"{m['gbps']:.0f} GB/s: {metric.expected_source}"))
        elif expected is None:
            rows.append(
                gpu_row(gpu, Status.WARN, f"{m['gbps']:.0f} GB/s{expect.unknown_model_note(gpu) or '; no figure'}")
            )
        else:
            note = "" if status == Status.PASS else f", expected {metric.expected} ({metric.expected_source})"
            rows.append(gpu_row(gpu, status, f"{m['gbps']:.0f} GB/s{note}"))
    return from_rows(
        "bandwidth.device-memory",
        rows,
        f"{len(rows)} GPUs at their memory bandwidth",
        Remediation(
            "Low device memory bandwidth with no throttling points at a degraded GPU; compare with its peers.",
            ["nvidia-smi -q -d PERFORMANCE,CLOCK -i <GPU>"],
        ),
        metrics,
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
    return _measure_and_judge(ctx, "measure_host_device", judge_host_device, "h2d", "h2d_gbps")


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
    return _measure_and_judge(ctx, "measure_device_memory", judge_device_memory, "copy", "gbps")


def _measure_and_judge(ctx: CheckContext, measure: str, judge: Any, figure: str, field: str) -> Result:
    """Measure in an isolated process, judge against a baseline or the hardware, keep the slowest GPU's
    figure as this node's baseline metric."""
    outcome = ctx.run_isolated(f"gpudoctor.checks.bandwidth:{measure}", _params(ctx))
    if outcome.kind != "ok":
        return isolated_failure(ctx.spec.id, outcome)
    baseline = {figure: ctx.baseline(figure)}
    result = judge(ctx.with_gpus(outcome.data["gpus"]), ctx.settings["floor"], baseline)
    result.metrics.append(Metric(figure, min(g[field] for g in outcome.data["gpus"]), "GB/s", baseline=True))
    return result


def _params(ctx: CheckContext) -> dict[str, Any]:
    scale = 3 if ctx.options.level == "full" else 1
    return {"bytes": ctx.settings["bytes"], "warmup": ctx.settings["warmup"], "iters": ctx.settings["iters"] * scale}
