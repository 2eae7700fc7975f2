"""All-reduce bandwidth: an nccl-tests style sweep through torch.distributed, every result verified.

On GPUs this is NCCL; on CPU (or --device cpu) gloo runs the same code for real. algbw = bytes / time,
busbw = algbw * 2(n-1)/n (nccl-tests' definitions); the large-message busbw is judged against what
the detected topology should deliver. The ranks' code is checks/ranks/allreduce.py; the judging, shared with
cluster.allreduce, gpudoctor/judging/allreduce.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.api import Result, Work, check, expect, routes

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
from gpudoctor.judging.allreduce import CPU_SIZES, GPU_SIZES, combine, judge


@check(
    "allreduce.bandwidth",
    "All-reduce bandwidth (NCCL, gloo on CPU)",
    level="standard",
    needs=("torch", "live"),
    uses=("nvml", "system"),
    timeout_s=180,
    settings={
        "min_busbw_gbps": 0.0,
        "floor": 0.75,
        "baseline_tolerance": 0.9,
        "cpu_ranks": 2,
        "warmup": 5,
        "iters": 20,
    },
    work=Work(3, {"cpu": 6.5, "cuda": 7.0}),
)
def allreduce(ctx: CheckContext) -> Result:
    """Size sweep of all-reduce across every GPU, verified; large-message busbw against the topology."""
    params = {**ctx.work(), "sizes": GPU_SIZES if ctx.device == "cuda" else CPU_SIZES, "out_of_place": True}
    per_rank = ctx.launch("gpudoctor.checks.ranks.allreduce:worker", params)
    if failed := ctx.failed(per_rank):
        return failed
    rows = combine(per_rank, ctx.world_size)
    baseline = ctx.baseline("busbw")
    expected = (
        baseline
        if ctx.device != "cuda"
        else expect.pick(
            baseline,
            expect.from_setting(ctx.settings["min_busbw_gbps"], "min_busbw_gbps"),
            routes.allreduce_expectation(ctx.used_gpus, ctx.nvml.get("topology", {}), ctx.env),
        )
    )
    nccl = {"nccl_version": (ctx.torch.get("nccl") or {}).get("version")}
    nccl.update({k: v for k, v in ctx.env.items() if k.startswith("NCCL_")})
    return judge(rows, ctx.world_size, ctx.device, expected, ctx.settings["floor"], nccl)
