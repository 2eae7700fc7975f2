"""Dense matrix-multiply throughput per GPU (bf16, and fp32 through TF32 set explicitly; fp16 on GPUs before
Ampere, which have neither), results verified. The products run in checks/ranks/compute.py."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gpudoctor.api import Metric, Remediation, Result, Row, Status, Work, check, command, expect, gpu_row, worst

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
from gpudoctor.judging.gemm import TOLERANCE

# The datasheet figure each precision is judged against (hardware.toml, and its published measurements).
DATASHEET_KEY = {"bf16": "bf16_tflops", "tf32": "tf32_tflops", "fp16": "fp16_tflops"}


def gemm_row(
    m: dict[str, Any], gpu: dict[str, Any], floor: float, baseline: dict[str, expect.Expectation | None]
) -> Row:
    """One GPU's figures (bf16 and TF32, or fp16): verified first, then against the published healthy figure."""
    parts, statuses, metrics, basis = [], [], [], "figure"
    for precision, key in ((p, k) for p, k in DATASHEET_KEY.items() if p in m):
        figure = m[precision]
        expected = expect.pick(baseline.get(precision), expect.model_expectation(gpu, key))
        peak = expect.model_peak(gpu, key)
        status, metric = expect.gpu_verdict(precision, figure["tflops"], "TFLOP/s", expected, floor, peak)
        metrics.append(metric)
        if figure["rel_error"] > TOLERANCE[precision] or math.isnan(figure["rel_error"]):
            status, basis = Status.FAIL, "data"
            parts.append(f"{precision} WRONG RESULTS (relative error {figure['rel_error']:.2g})")
        else:
            parts.append(metric.said())
        statuses.append(status if expected or status == Status.FAIL else Status.WARN)
    unknown = expect.unknown_model_note(gpu, "bf16_tflops").removeprefix("; ")
    text = "; ".join(([*parts, unknown] if basis == "data" else [unknown, *parts]) if unknown else parts)
    return gpu_row(gpu, worst(statuses), text, metrics, basis)


def judge(measured: expect.Measured, floor: float, baseline: dict[str, expect.Expectation | None]) -> Result:
    """Each GPU's (measurement, facts) pair: verified first, then against its datasheet."""
    return expect.judge_per_gpu(
        measured,
        lambda m, gpu: gemm_row(m, gpu, floor, baseline),
        f"{len(measured)} GPUs at their matrix throughput",
        Remediation(
            "Low throughput with correct results means clocks held down (power cap, thermal) or a degraded GPU; "
            "wrong results mean a failing GPU.",
            [command("nvidia-smi -q -d PERFORMANCE,CLOCK,POWER -i {gpu}")],
        ),
    )


@check(
    "compute.gemm",
    "Matrix-multiply throughput",
    level="standard",
    needs=("gpu", "live", "torch"),
    timeout_s=180,
    settings={"n": 8192, "floor": 0.75, "baseline_tolerance": 0.9, "warmup": 3, "iters": 10},
    work=Work(1, {"cuda": 1.5}),
)
def gemm(ctx: CheckContext) -> Result:
    """Dense bf16 and TF32 (fp16 before Ampere) GEMM per GPU against the published healthy figure, verified
    against a float64 reference."""
    data = ctx.run_isolated("gpudoctor.checks.ranks.compute:measure_gemm", ctx.work("n"))
    if failed := ctx.failed(data):
        return failed
    measured = [p for p in DATASHEET_KEY if all(p in g for g in data["gpus"])]
    baseline = {precision: ctx.baseline(precision) for precision in measured}
    result = judge(ctx.with_gpus(data["gpus"]), ctx.settings["floor"], baseline)
    for precision in measured:
        result.metrics.append(
            Metric(precision, min(g[precision]["tflops"] for g in data["gpus"]), "TFLOP/s", baseline=True)
        )
    return result
