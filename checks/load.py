"""Every GPU loaded at once, as a training job loads a node: a node that passes one GPU at a time can still
throttle, or fall below its peers, with all of them at full power. bf16 GEMMs on every GPU together for a
while (short at `standard`, four times longer at `full`), NVML read throughout: the GPU that slows down is
named with the figure it reached, the clocks it fell to and why NVML says they fell. A settled figure is judged
against a published sustained one (a minute of load, settled under the power limit: gpu-fryer's), never a burst
one, and shown beside its own burst figure of the first seconds. The load runs in checks/ranks/load.py.
"""

from __future__ import annotations

import math
import statistics
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
    compare,
    expect,
    from_rows,
    gpu_row,
    worst,
)

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
from gpudoctor.judging.gemm import TOLERANCE

# Why clocks fall, as NVML names it, graded: the hardware braking a GPU is a fault; thermal software slowdown
# a warning; a software power cap under full load is how a healthy GPU runs (said, not judged).
BRAKES = {
    "hw_slowdown": Status.FAIL,
    "hw_thermal_slowdown": Status.FAIL,
    "hw_power_brake_slowdown": Status.FAIL,
    "sw_thermal_slowdown": Status.WARN,
}
SAID = ("sw_power_cap",)


def settled_figure(windows: list[float]) -> float:
    """The figure a GPU holds under load: the median of the second half of its windows (once it is hot)."""
    return statistics.median(windows[len(windows) // 2 :])


def during(samples: list[dict[str, Any]], gpu: int | None, rank: dict[str, Any]) -> list[dict[str, Any]]:
    """NVML's samples of one GPU taken while its rank loaded it."""
    return [s for s in samples if s["gpu"] == gpu and rank["started"] <= s["t"] <= rank["ended"]]


def watched(seen: list[dict[str, Any]]) -> tuple[str, list[Metric], Status]:
    """What NVML saw of one GPU under load, in words and figures, and the worst clock-event grade."""
    if not seen:
        return "", [], Status.PASS
    if any(s.get("lost") for s in seen):
        return "; the GPU was lost during the load", [], Status.FAIL
    reasons = sorted({r for s in seen for r in s.get("reasons") or [] if r in BRAKES or r in SAID})
    grade = worst([BRAKES.get(r, Status.PASS) for r in reasons])
    figures = {
        "sm_clock_min": (min, "sm_mhz", "MHz"),
        "power_max": (max, "power_w", "W"),
        "temperature_max": (max, "temperature_c", "C"),
    }
    metrics = []
    for name, (pick, key, unit) in figures.items():
        values = [s[key] for s in seen if s.get(key) is not None]
        if values:
            metrics.append(Metric(name, pick(values), unit))
    if reasons:
        metrics.append(Metric("clocks_held_by", ", ".join(reasons)))
    if grade == Status.PASS:
        return "", metrics, grade
    clock = next((f"; sm clock min {m.value:g} MHz" for m in metrics if m.name == "sm_clock_min"), "")
    return f"{clock}; clocks held down: {', '.join(reasons)}", metrics, grade


def judge(measured: expect.Measured, samples: list[dict[str, Any]], floor: float) -> Result:
    """Each GPU's (rank's figures, facts) pair under the shared load: verified, its settled bf16 figure against
    the median of its peers (the allowance from the spread of its windows) and a published sustained figure (never
    a burst one: a healthy GPU settles under its power limit), with what NVML
    saw while it ran."""
    values = [settled_figure(rank["tflops"]) for rank, _ in measured]
    reference = compare.median_reference(values, "GPUs under the same load")
    spread = [compare.robust_spread([x - statistics.median(logs) for x in logs]) for logs in log_windows(measured)]
    allow = compare.allowance(statistics.median(spread), len(values), f"across the load windows of {len(values)} GPUs")
    peers = (reference, allow) if len(values) > 1 else None
    rows = [
        gpu_row_for(rank, gpu, value, peers, samples, floor)
        for (rank, gpu), value in zip(measured, values, strict=True)
    ]
    head = f"{len(values)} GPUs under bf16 load at once: median {reference.value:.4g} TFLOP/s; {allow.describe()}"
    return from_rows(
        rows,
        head,
        Remediation(
            "A GPU that slows down only when every GPU works is short of power or cooling (a power brake, a "
            "thermal slowdown) or weaker than its peers.",
            [command("nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE -i {gpu}"), "ipmitool sdr type Temperature"],
        ),
    )


def log_windows(measured: expect.Measured) -> list[list[float]]:
    return [[math.log(t) for t in rank["tflops"] if t > 0] for rank, _ in measured]


def gpu_row_for(
    rank: dict[str, Any],
    gpu: dict[str, Any],
    value: float,
    peers: tuple[compare.Reference, compare.Allowance] | None,
    samples: list[dict[str, Any]],
    floor: float,
) -> Row:
    """One GPU's row: wrong results first, then its figure against the sustained figure and its peers (none with one
    GPU), and what NVML saw of it during its load."""
    said, nvml_figures, grade = watched(during(samples, gpu.get("index"), rank))
    if rank["rel_error"] > TOLERANCE["bf16"]:
        wrong = f"WRONG RESULTS under load (relative error {rank['rel_error']:.2g})"
        return gpu_row(gpu, Status.FAIL, wrong, [], "data")
    expected = expect.sustained_expectation(gpu)
    status, datasheet = expect.verdict("bf16_under_load", value, "TFLOP/s", expected, floor)
    parts = [datasheet.said()]
    against_peers = Status.PASS
    if peers is not None:
        against_peers, ratio = compare.judge(value, *peers, compare.PEER_GPUS)
        nvml_figures.append(Metric("to_peers_median", round(ratio, 3)))
        if against_peers != Status.PASS:
            parts.append(f"{ratio:.2f}x its peers' median")
    burst = rank.get("burst_tflops")
    if burst:
        nvml_figures += [
            Metric("bf16_burst", round(burst, 3), "TFLOP/s"),
            Metric("sustained_to_burst", round(value / burst, 3)),
        ]
    row = gpu_row(gpu, worst([status, against_peers, grade]), "; ".join(parts) + said, [datasheet], "figure")
    row.metrics += nvml_figures
    return row


@check(
    "load.concurrent",
    "Every GPU under load at once",
    level="standard",
    needs=("gpu", "live", "torch"),
    uses=("nvml",),
    timeout_s=300,
    settings={"seconds": 20, "n": 8192, "window_s": 0.5, "sample_s": 0.5, "floor": 0.75},
    work=Work(8, {"cuda": 21.0}),
)
def concurrent(ctx: CheckContext) -> Result:
    """bf16 GEMMs on every GPU at once for `seconds` (x4 at `full`), NVML read every `sample_s` throughout:
    each GPU's settled figure against its peers and a published sustained figure, its ratio to its own burst
    figure, and why its clocks fell."""
    params = {k: ctx.settings[k] for k in ("n", "window_s")} | {"seconds": ctx.settings["seconds"] * ctx.work_factor}
    with ctx.watch_gpus(ctx.settings["sample_s"]) as sampler:
        ranks = ctx.launch("gpudoctor.checks.ranks.load:worker", params)
    if failed := ctx.failed(ranks):
        return failed
    measured = ctx.with_gpus([{**rank, "cuda_index": rank["rank"]} for rank in ranks])
    result = judge(measured, sampler.samples, ctx.settings["floor"])
    if sampler.error:
        result.summary += f" ({sampler.error})"
    return result
