"""On every rank of load.concurrent (one per GPU): bf16 products window after window, every GPU at once."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from gpudoctor.api import RankContext, measure

from .compute import gemm_error


def worker(ctx: RankContext) -> dict[str, Any]:
    """One rank per GPU: calibrate a window of GEMMs (about `window_s`), start with every rank, then time
    window after window until `seconds` have passed; the last product is verified."""
    p, device = ctx.params, ctx.device
    a, b = (torch.randn(p["n"], p["n"], device=device, dtype=torch.bfloat16) for _ in range(2))
    out = torch.empty_like(a)
    ctx.phase("calibrate")
    once = statistics.median(measure.time_repeats(lambda: torch.matmul(a, b, out=out), device, 2, 3))
    burst = 2 * p["n"] ** 3 / once / 1e12  # before the GPU settles under its power limit
    per_window = max(1, round(p["window_s"] / once))
    flops = 2 * p["n"] ** 3 * per_window
    dist.barrier()
    ctx.phase("load")
    started, windows = time.time(), []
    while time.time() - started < p["seconds"]:
        start = measure.mark(device)
        for _ in range(per_window):
            torch.matmul(a, b, out=out)
        windows.append(flops / measure.seconds_between([(start, measure.mark(device))], device)[0] / 1e12)
    return {
        "rank": ctx.rank,
        "started": started,
        "ended": time.time(),
        "tflops": windows,
        "burst_tflops": burst,
        "rel_error": gemm_error(a, b, out),
    }
