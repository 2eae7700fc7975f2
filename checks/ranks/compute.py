"""In compute.gemm's isolated process (and on load.concurrent's ranks): matrix products timed on every GPU,
each checked against float64."""

from __future__ import annotations

from typing import Any

import torch

from gpudoctor.api import measure, progress


def precisions(capability: tuple[int, int]) -> tuple[str, ...]:
    """bf16 and TF32 from Ampere (compute capability 8.0) on; fp16 tensor cores before it (Volta, Turing)."""
    return ("bf16", "tf32") if capability >= (8, 0) else ("fp16",)


def gemm_on(device: Any, n: int, precision: str, warmup: int, iters: int) -> dict[str, Any]:
    """TFLOP/s of an n x n x n product on random data, and its error against a float64 reference block."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        timing = measure.summary(measure.time_repeats(lambda: torch.matmul(a, b, out=out), device, warmup, iters))
        error = gemm_error(a, b, out)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return {"tflops": 2 * n**3 / timing["median_s"] / 1e12, "rel_error": error}


def gemm_error(a: Any, b: Any, out: Any) -> float:
    """The relative error of `out` = a @ b on a corner block, against float64."""
    block = min(a.shape[0], 128)
    reference = a[:block].double() @ b[:, :block].double()
    return float((out[:block, :block].double() - reference).norm() / reference.norm())


def measure_gemm(params: dict[str, Any]) -> dict[str, Any]:
    """Every GPU's n x n products in each precision it has tensor cores for, timed and checked."""
    results = []
    for index in range(measure.cuda_devices()):
        row: dict[str, Any] = {"cuda_index": index}
        for precision in precisions(torch.cuda.get_device_capability(index)):
            progress("gemm", f"GPU {index} {precision}")
            row[precision] = gemm_on(
                torch.device("cuda", index), params["n"], precision, params["warmup"], params["iters"]
            )
        results.append(row)
    return {"gpus": results}
