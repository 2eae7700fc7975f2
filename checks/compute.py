"""Dense matrix-multiply throughput per GPU (bf16, and fp32 through TF32 set explicitly), results verified."""

from __future__ import annotations

import math
from typing import Any

from gpudoctor import expect
from gpudoctor.model import Metric, Remediation, Result, Status, from_rows, gpu_row, worst
from gpudoctor.registry import check
from gpudoctor.runner import CheckContext, isolated_failure

TOLERANCE = {"bf16": 2e-2, "tf32": 5e-3}


def gemm_on(device: Any, n: int, precision: str, warmup: int, iters: int) -> dict[str, Any]:
    """TFLOP/s of an n x n x n product on random data, and its error against a float64 reference block."""
    import torch

    from gpudoctor.measure import summary, time_repeats

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        timing = summary(time_repeats(lambda: torch.matmul(a, b, out=out), device, warmup, iters))
        block = min(n, 128)
        reference = a[:block].double() @ b[:, :block].double()
        error = float((out[:block, :block].double() - reference).norm() / reference.norm())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return {"tflops": 2 * n**3 / timing["median_s"] / 1e12, "rel_error": error}


def measure(params: dict[str, Any]) -> dict[str, Any]:
    import torch

    from gpudoctor.isolate import progress

    results = []
    for index in range(torch.cuda.device_count()):
        row: dict[str, Any] = {"cuda_index": index}
        for precision in ("bf16", "tf32"):
            progress("gemm", f"GPU {index} {precision}")
            row[precision] = gemm_on(
                torch.device("cuda", index), params["n"], precision, params["warmup"], params["iters"]
            )
        results.append(row)
    return {"gpus": results}


def judge(
    measured: list[tuple[dict[str, Any], dict[str, Any]]],
    floor: float,
    baseline: dict[str, expect.Expectation | None],
) -> Result:
    """Each GPU's (measurement, facts) pair: verified first, then against its datasheet."""
    rows, metrics = [], []
    for m, gpu in measured:
        parts, statuses = [], []
        for precision, key in (("bf16", "bf16_tflops"), ("tf32", "tf32_tflops")):
            figure = m[precision]
            expected = expect.pick(baseline.get(precision), expect.model_expectation(gpu, key, "gemm"))
            peak = expect.model_peak(gpu, key)
            status, metric = expect.verdict(
                f"GPU {gpu['index']} {precision}", figure["tflops"], "TFLOP/s", expected, floor, peak
            )
            metrics.append(metric)
            if figure["rel_error"] > TOLERANCE[precision] or math.isnan(figure["rel_error"]):
                status = Status.FAIL
                parts.append(f"{precision} WRONG RESULTS (relative error {figure['rel_error']:.2g})")
            elif expect.measurement_error(figure["tflops"], peak):
                parts.append(f"{precision} {figure['tflops']:.0f} is above the {peak.value:g} peak: measurement error")
            else:
                parts.append(
                    f"{precision} {figure['tflops']:.0f}"
                    + ("" if status == Status.PASS else f" (expected {metric.expected})")
                )
            statuses.append(status if expected or status == Status.FAIL else Status.WARN)
        rows.append(gpu_row(gpu, worst(statuses), ", ".join(parts) + " TFLOP/s" + expect.unknown_model_note(gpu)))
    return from_rows(
        "compute.gemm",
        rows,
        f"{len(rows)} GPUs at their matrix throughput",
        Remediation(
            "Low throughput with correct results means clocks held down (power cap, thermal) or a degraded GPU; "
            "wrong results mean a failing GPU.",
            ["nvidia-smi -q -d PERFORMANCE,CLOCK,POWER -i <GPU>"],
        ),
        metrics,
    )


@check(
    "compute.gemm",
    "Matrix-multiply throughput",
    level="standard",
    needs=("gpu", "live", "torch"),
    timeout_s=180,
    settings={"n": 8192, "floor": 0.75, "baseline_tolerance": 0.9, "warmup": 3, "iters": 10},
)
def gemm(ctx: CheckContext) -> Result:
    """Dense bf16 and TF32 GEMM per GPU against the datasheet, verified against a float64 reference."""
    iters = ctx.settings["iters"] * (5 if ctx.options.level == "full" else 1)
    params = {"n": ctx.settings["n"], "warmup": ctx.settings["warmup"], "iters": iters}
    outcome = ctx.run_isolated("gpudoctor.checks.compute:measure", params)
    if outcome.kind != "ok":
        return isolated_failure("compute.gemm", outcome)
    baseline = {precision: ctx.baseline(precision) for precision in ("bf16", "tf32")}
    result = judge(ctx.with_gpus(outcome.data["gpus"]), ctx.settings["floor"], baseline)
    for precision in ("bf16", "tf32"):
        result.metrics.append(
            Metric(precision, min(g[precision]["tflops"] for g in outcome.data["gpus"]), "TFLOP/s", baseline=True)
        )
    return result
