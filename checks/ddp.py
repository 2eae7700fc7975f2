"""The reference training run: a ResNet trained with DistributedDataParallel on every GPU (torchvision's where it
imports, else gpudoctor's own of the same shape: checks/ranks/cnn.py).

It proves this machine trains, and checks that it trains correctly: the loss falls on a learnable
synthetic task, parameters end identical on every rank, the first step's averaged gradient equals a
single-process gradient of the same batches, and nothing is NaN or Inf. Then it measures throughput
and scaling. Synthetic data is made on the device; nothing is downloaded. The training runs in
checks/ranks/ddp.py (also on its own under torchrun); its verdicts, shared with cluster.ddp, are
gpudoctor/judging/ddp.py.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from gpudoctor.api import (
    Metric,
    Remediation,
    Result,
    Status,
    Work,
    check,
    compare,
    expect,
    from_rows,
    gpu_row,
)

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
from gpudoctor.judging.ddp import LOCAL_STEPS, SETTINGS, judge, needs_torchvision, resolve


def alone(measured: expect.Measured, p: dict[str, Any], device: str, settings: dict[str, Any]) -> list[Result]:
    """Each GPU's own speed (its rank's steps with DDP's synchronisation off, two passes in the same run; the
    ranks paired with their GPUs' facts) as its baseline: a GPU slower than its peers is named as such, and
    scaling is the synchronised step against the slowest GPU's own, so the all-reduce is blamed only for what
    it costs."""
    ranks = [rank for rank, _ in measured]
    own = {r["rank"]: [statistics.median(times) for times in r["local_step_s"]] for r in ranks}
    gpus = {rank["rank"]: gpu for rank, gpu in measured}
    return [_per_gpu(own, p["batch_size"], device, gpus), _scaling(ranks, own, device, settings["min_scaling"])]


def _per_gpu(own: dict[int, list[float]], batch: int, device: str, gpus: dict[int, dict[str, Any]]) -> Result:
    """Every GPU's images per second alone (the better of two passes) against the median of its peers'; the
    allowance from the difference between the passes."""
    passes = {rank: tuple(batch / t for t in times) for rank, times in own.items()}
    values = {rank: max(pair) for rank, pair in passes.items()}
    reference = compare.median_reference(list(values.values()), "GPUs' own speeds")
    sigma = compare.sigma_between([pair for pair in passes.values() if len(pair) == 2])
    allow = compare.allowance(sigma, len(values), f"between the two passes of {len(values)} ranks")
    head = f"{len(values)} ranks' own speed without synchronisation: median {reference.value:.4g} img/s"
    if device != "cuda":
        return Result(Status.PASS, f"{head}; ranks share the CPU, so not judged", aspect="per-gpu")
    rows = []
    for rank, value in sorted(values.items()):
        status, ratio = compare.judge(value, reference, allow, compare.PEER_GPUS)
        metric = compare.figure("images_per_s_alone", value, "img/s", reference, allow, {"rank": rank})
        text = f"{value:.4g} img/s alone, {ratio:.2f}x the median of its peers"
        rows.append(gpu_row(gpus[rank], status, text, [metric], "figure"))
    result = from_rows(
        rows,
        f"{head}; {allow.describe()}",
        Remediation(
            "A GPU slower than its peers on the same work holds every synchronous step back: throttled (power, "
            "thermal), a degraded GPU, or a slow PCIe link for its data.",
            ["nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE", "gpudoctor check --level standard --only compute"],
        ),
    )
    result.aspect, result.basis = "per-gpu", "figure"
    return result


def _scaling(ranks: list[dict[str, Any]], own: dict[int, list[float]], device: str, minimum: float) -> Result:
    many = statistics.median(s for r in ranks for s in r["step_s"])
    slowest_rank, slowest = max(((rank, min(times)) for rank, times in own.items()), key=lambda item: item[1])
    efficiency = slowest / many
    metric = Metric(
        "scaling_efficiency",
        round(efficiency, 3),
        expected=f">= {minimum}" if device == "cuda" else None,
        expected_source="config min_scaling, against the slowest rank's own speed" if device == "cuda" else None,
    )
    text = (
        f"{len(ranks)} ranks at {efficiency:.0%} of the slowest rank's own speed (rank {slowest_rank} alone "
        f"{slowest * 1000:.1f} ms a step, synchronised {many * 1000:.1f} ms)"
    )
    if device != "cuda":
        return Result(
            Status.PASS,
            f"{text}; ranks share the CPU, so not judged",
            aspect="scaling",
            basis="figure",
            metrics=[metric],
        )
    if efficiency < minimum:
        return Result(
            Status.FAIL,
            f"{text}, below {minimum:.0%}",
            aspect="scaling",
            basis="figure",
            metrics=[metric],
            remediation=Remediation(
                "Synchronised steps much slower than every GPU alone mean the gradient all-reduce is slow.",
                ["gpudoctor check --level standard --only allreduce p2p"],
            ),
        )
    return Result(Status.PASS, text, aspect="scaling", basis="figure", metrics=[metric])


@check(
    "ddp.train",
    "Reference DDP training run",
    level="standard",
    needs=("torch", "live"),
    uses=("nvml", "system"),
    timeout_s=300,
    settings=SETTINGS,
    work=Work(7, {"cpu": 11.0, "cuda": 9.0}, least=0.5),
)
def ddp_train(ctx: CheckContext) -> list[Result]:
    """ResNet DDP on every GPU (gloo on CPU): loss falls, replicas identical, gradients right, throughput;
    each GPU's own speed (steps without synchronisation) is its baseline for naming a slow GPU and for
    scaling."""
    capabilities = [tuple(g["compute_capability"]) for g in ctx.used_gpus if g.get("compute_capability")]
    p = resolve(ctx.settings, ctx.device, capabilities, ctx.work_factor)
    if blocked := needs_torchvision(p["model"], ctx.torch):
        return [blocked]
    if ctx.settings["scaling"] and ctx.world_size > 1:
        p["local_steps"] = LOCAL_STEPS
    ranks = ctx.launch("gpudoctor.checks.ranks.ddp:worker", p)
    if failed := ctx.failed(ranks):
        return [failed]
    results = judge(ranks, p, ctx.device, ctx.baseline("images_per_s_per_gpu"), ctx.settings)
    if ranks[0].get("local_step_s"):
        results += alone(ctx.with_gpus([{**r, "cuda_index": r["rank"]} for r in ranks]), p, ctx.device, ctx.settings)
    return results
