"""The reference training run: a torchvision CNN trained with DistributedDataParallel on every GPU.

It proves this machine trains, and checks that it trains correctly: the loss falls on a learnable
synthetic task, parameters end identical on every rank, the first step's averaged gradient equals a
single-process gradient of the same batches, and nothing is NaN or Inf. Then it measures throughput
and scaling. Synthetic data is made on the device; nothing is downloaded.

Runs on its own under torchrun too:  torchrun --nproc-per-node=8 -m gpudoctor.checks.ddp --steps 60
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import sys
import time
from typing import Any

from gpudoctor.api import (
    CheckContext,
    Metric,
    RankContext,
    Remediation,
    Result,
    Status,
    check,
    compare,
    expect,
    from_rows,
    gpu_row,
)

CLASSES = 10
SEED = 20261122
DEFAULTS = {
    "cuda": {"model": "resnet50", "batch_size": 128, "image_size": 224, "precision": "bf16", "steps": 60},
    "cpu": {"model": "resnet18", "batch_size": 8, "image_size": 64, "precision": "fp32", "steps": 12},
}
BF16_CAPABILITY = (8, 0)  # bf16 tensor cores arrived with Ampere
# The check's settings (config keys); empty values mean the device's defaults above.
SETTINGS = {
    "model": "",
    "batch_size": 0,
    "image_size": 0,
    "precision": "",
    "steps": 0,
    "cpu_ranks": 2,
    "min_loss_drop": 0.1,
    "grad_tolerance": 0.0,
    "floor": 0.75,
    "min_scaling": 0.85,
    "baseline_tolerance": 0.9,
    "scaling": True,
}
GRAD_TOLERANCE = {("cpu", "fp32"): 1e-4, ("cuda", "fp32"): 1e-2, ("cuda", "bf16"): 6e-2, ("cuda", "fp16"): 6e-2}


def resolve(
    settings: dict[str, Any], device: str, capabilities: list[tuple[int, int]] = (), work_factor: int = 1
) -> dict[str, Any]:
    """The run's parameters: configured values, else this device's defaults; the default step count is
    multiplied by the run's work factor (`--level full`). GPUs without bf16 (compute capability below 8.0:
    Volta, Turing) train in fp16 with loss scaling."""
    base = dict(DEFAULTS[device])
    if device == "cuda" and any(cap < BF16_CAPABILITY for cap in capabilities):
        base["precision"] = "fp16"
    params = {key: settings.get(key) or base[key] for key in base}
    params["steps"] *= 1 if settings.get("steps") else work_factor
    params["warmup"] = max(2, params["steps"] // 5)
    return params


def make_batch(step: int, rank: int, p: dict[str, Any], templates: Any, device: Any) -> tuple[Any, Any]:
    """A learnable batch: each image is its class's fixed template plus noise. Deterministic in (step, rank),
    so rank 0 can rebuild any rank's batch for the reference gradient."""
    import torch

    gen = torch.Generator(device=device).manual_seed(SEED + 7919 * step + rank)
    labels = torch.randint(0, CLASSES, (p["batch_size"],), generator=gen, device=device)
    noise = torch.randn(p["batch_size"], 3, p["image_size"], p["image_size"], generator=gen, device=device)
    images = templates[labels] + 0.5 * noise
    return images.contiguous(memory_format=_memory_format(device)), labels


def _memory_format(device: Any) -> Any:
    import torch

    return torch.channels_last if device.type == "cuda" else torch.contiguous_format


def build_model(p: dict[str, Any], device: Any) -> Any:
    import torch
    import torchvision

    torch.manual_seed(SEED)
    model = torchvision.models.get_model(p["model"], weights=None, num_classes=CLASSES)
    return model.to(device, memory_format=_memory_format(device))


def autocast(p: dict[str, Any], device: Any) -> Any:
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p["precision"])
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def loss_of(model: Any, images: Any, labels: Any, p: dict[str, Any], device: Any) -> Any:
    import torch

    with autocast(p, device):
        return torch.nn.functional.cross_entropy(model(images), labels)


def fitting_batch(ctx: RankContext, p: dict[str, Any], templates: Any) -> int:
    """On GPU, the largest batch up to the requested one that fits on every rank (halving on OOM)."""
    import torch
    import torch.distributed as dist

    batch = p["batch_size"]
    if ctx.device.type == "cuda":
        model = build_model(p, ctx.device)
        while batch >= 1:
            try:
                images, labels = make_batch(0, ctx.rank, {**p, "batch_size": batch}, templates, ctx.device)
                loss_of(model, images, labels, p, ctx.device).backward()
                break
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                batch //= 2
            finally:
                model.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(ctx.device)
    agreed = torch.tensor([batch], device=ctx.device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
    return int(agreed.item())


# What an allocation failure looks like when it does not come as torch.cuda.OutOfMemoryError: cuBLAS and cuDNN
# report theirs through RuntimeError ("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)").
OOM_MARKERS = ("out of memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed")
# fp16 loss scaling starts here rather than GradScaler's 2**16, so the first step (the one whose gradient is
# checked) does not overflow and get skipped; the scaler grows it as training goes.
FP16_INIT_SCALE = 1024.0


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation, whichever library raised it."""
    text = f"{type(exc).__name__}: {exc}".lower()
    return type(exc).__name__ == "OutOfMemoryError" or any(marker in text for marker in OOM_MARKERS)


def grad_scaler(p: dict[str, Any], device: Any) -> Any:
    """fp16 needs loss scaling or small gradients underflow to zero; bf16 and fp32 do not."""
    import torch

    return torch.amp.GradScaler(device.type, init_scale=FP16_INIT_SCALE) if p["precision"] == "fp16" else None


def reference_gradient_error(
    initial: Any, ddp_model: Any, ctx: RankContext, p: dict[str, Any], templates: Any, scale: float = 1.0
) -> float:
    """Rank 0: the single-process gradient of step 0 (each rank's batch through its own forward, as DDP's
    per-rank BatchNorm sees it, losses averaged) against DDP's all-reduced gradient (unscaled already).
    Under fp16 the reference backward is scaled by the same loss scale, then unscaled."""
    import torch

    for r in range(ctx.world_size):
        images, labels = make_batch(0, r, p, templates, ctx.device)
        (loss_of(initial, images, labels, p, ctx.device) * scale / ctx.world_size).backward()
    ref = torch.cat([q.grad.detach().float().flatten() for q in initial.parameters()]) / scale
    got = torch.cat([q.grad.detach().float().flatten() for q in ddp_model.module.parameters()])
    return float((got - ref).norm() / ref.norm())


def corrupting_hook() -> Any:
    """A DDP comm hook that adds 1 to this rank's gradients before the real all-reduce (a test hook).

    DDP checks a hook's `bucket` annotation at run time, so the hook carries none.
    """
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def hook(state, bucket):  # type: ignore[no-untyped-def]
        bucket.buffer().add_(1.0)
        return default_hooks.allreduce_hook(state, bucket)

    return hook


def worker(ctx: RankContext) -> dict[str, Any]:
    """Runs on every rank: DDP training with the correctness checks, timed per step."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from gpudoctor.api import measure

    p = dict(ctx.params)
    gen = torch.Generator(device=ctx.device).manual_seed(SEED)
    templates = torch.randn(CLASSES, 3, p["image_size"], p["image_size"], generator=gen, device=ctx.device)
    ctx.phase("probe batch size")
    fits = fitting_batch(ctx, p, templates)
    if fits < p["batch_size"]:
        return {"rank": ctx.rank, "oom": True, "requested": p["batch_size"], "fits": fits}
    model = build_model(p, ctx.device)
    initial = copy.deepcopy(model) if ctx.rank == 0 else None
    ddp = DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
    if ctx.fault_here("grad", "corrupt"):
        ddp.register_comm_hook(dist.group.WORLD, corrupting_hook())
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    scaler = grad_scaler(p, ctx.device)
    pool = [make_batch(step, ctx.rank, p, templates, ctx.device) for step in range(4)]
    grad_error = None

    def train_step(step: int) -> Any:
        nonlocal initial, grad_error
        ctx.phase(f"train step {step}")
        images, labels = pool[step % len(pool)]
        loss = loss_of(ddp, images, labels, p, ctx.device)
        optimizer.zero_grad(set_to_none=True)
        (scaler.scale(loss) if scaler else loss).backward()
        if step == 0 and initial is not None:
            scale = scaler.get_scale() if scaler else 1.0
            if scaler:
                scaler.unscale_(optimizer)
            grad_error = reference_gradient_error(initial, ddp, ctx, p, templates, scale)
            initial = None
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        return loss.detach().float()

    losses, warmed = warm_up(ctx, train_step, p)
    local = [local_steps(ctx, ddp, p, pool)] if p.get("local_steps") else []
    marks = []
    for step in range(warmed, warmed + p["steps"] - p["warmup"]):
        started = measure.mark(ctx.device)
        losses.append(train_step(step))
        marks.append((started, measure.mark(ctx.device)))
    if p.get("local_steps"):
        local.append(local_steps(ctx, ddp, p, pool))
    ctx.phase("gather results")
    if ctx.fault_here("params", "corrupt"):
        with torch.no_grad():
            next(ddp.module.parameters()).view(-1)[0] += 1.0
    every_loss = torch.stack(losses)
    dist.all_reduce(every_loss)
    params = torch.cat([q.detach().float().flatten() for q in ddp.module.parameters()])
    return {
        "rank": ctx.rank,
        "oom": False,
        "losses": (every_loss / ctx.world_size).tolist(),
        "params_checksum": measure.checksum(params),
        "finite": bool(torch.isfinite(params).all()) and bool(torch.isfinite(every_loss).all()),
        "grad_rel_error": grad_error,
        "step_s": measure.seconds_between(marks, ctx.device),
        "warmup_steps": warmed,
        "peak_mib": _peak_mib(ctx.device),
        "batch_size": p["batch_size"],
        "loss_scale": scaler.get_scale() if scaler else None,
        "local_step_s": local,
    }


SETTLE_WINDOW = 3  # steps: warm-up ends when the median of the last three is within SETTLE_RATIO of the three before
SETTLE_RATIO = 0.1
MAX_WARMUP_FACTOR = 4  # a step time that never settles ends warm-up at this many times the planned warm-up


def warm_up(ctx: RankContext, train_step: Any, p: dict[str, Any]) -> tuple[list[Any], int]:
    """Untimed training steps: at least `warmup`; on a GPU, until the step time settles (cuDNN autotuning and
    lazy module loading make the first steps many times slower), at most MAX_WARMUP_FACTOR x `warmup`. Every
    rank stops at the same step: each says whether its times settled, and all stop when all have."""
    import torch
    import torch.distributed as dist

    from gpudoctor.api import measure

    losses, times = [], []
    limit = p["warmup"] * (MAX_WARMUP_FACTOR if ctx.device.type == "cuda" else 1)
    for step in range(limit):
        started = measure.mark(ctx.device)
        losses.append(train_step(step))
        times += measure.seconds_between([(started, measure.mark(ctx.device))], ctx.device)
        if step + 1 < p["warmup"]:
            continue
        agreed = torch.tensor([int(settled(times))], device=ctx.device)
        dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
        if agreed.item():
            return losses, step + 1
    return losses, limit


def settled(times: list[float]) -> bool:
    """The last SETTLE_WINDOW step times' median within SETTLE_RATIO of the window before."""
    if len(times) < 2 * SETTLE_WINDOW:
        return False
    last = statistics.median(times[-SETTLE_WINDOW:])
    before = statistics.median(times[-2 * SETTLE_WINDOW : -SETTLE_WINDOW])
    return abs(last - before) <= SETTLE_RATIO * before


def local_steps(ctx: RankContext, ddp: Any, p: dict[str, Any], pool: list[tuple[Any, Any]]) -> list[float]:
    """Seconds per forward and backward pass with DDP's gradient synchronisation off (`no_sync`): this
    rank's own compute speed, which lockstep training hides behind the slowest rank. Nothing is stepped.
    Run twice, after the warm-up and after the last step, so each node's figure has two passes."""
    from gpudoctor.api import measure

    marks = []
    with ddp.no_sync():
        for step in range(p["local_steps"]):
            ctx.phase(f"local step {step}")
            images, labels = pool[step % len(pool)]
            started = measure.mark(ctx.device)
            loss_of(ddp, images, labels, p, ctx.device).backward()
            marks.append((started, measure.mark(ctx.device)))
    ddp.zero_grad(set_to_none=True)
    return measure.seconds_between(marks, ctx.device)


def _peak_mib(device: Any) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def describe(p: dict[str, Any], device: str) -> str:
    precision = {"bf16": "bf16 autocast", "fp16": "fp16 autocast with loss scaling", "fp32": "fp32"}[p["precision"]]
    return (
        f"{p['model']}, batch {p['batch_size']}/{'GPU' if device == 'cuda' else 'rank'}, {p['image_size']} px, "
        f"{precision}, {p['steps']} steps"
    )


def judge(
    ranks: list[dict[str, Any]],
    p: dict[str, Any],
    device: str,
    expected: expect.Expectation | None,
    settings: dict[str, Any],
) -> list[Result]:
    """Each correctness property its own result, then throughput and scaling."""
    if any(r.get("oom") for r in ranks):
        fits = min(r["fits"] for r in ranks)
        return [
            Result(
                Status.FAIL,
                f"CUDA out of memory at batch {p['batch_size']} per GPU; batch {fits} fits"
                if fits
                else "CUDA out of memory even at batch 1",
                remediation=Remediation(
                    "Lower the reference run's batch size in the config file.",
                    [
                        f"printf '[checks.ddp.train]\\nbatch_size = {max(fits, 1)}\\n' >> gpudoctor.toml",
                        "gpudoctor check --config gpudoctor.toml --only ddp",
                    ],
                ),
            )
        ]
    run = describe(p, device)
    tolerance = settings.get("grad_tolerance") or GRAD_TOLERANCE.get((device, p["precision"]), 6e-2)
    return [
        _loss(ranks[0]["losses"], settings["min_loss_drop"], run, ranks[0].get("loss_scale")),
        _sync(ranks),
        _gradient(ranks[0], tolerance),
        _finite(ranks),
        _throughput(ranks, p, device, expected, settings["floor"], run),
    ]


def _loss(losses: list[float], min_drop: float, run: str, loss_scale: float | None = None) -> Result:
    quarter = max(1, len(losses) // 4)
    first, last = statistics.mean(losses[:quarter]), statistics.mean(losses[-quarter:])
    metrics = [
        Metric("loss_first", round(first, 4)),
        Metric("loss_last", round(last, 4), expected=f"<= {first * (1 - min_drop):.4g}"),
    ]
    if loss_scale is not None:
        metrics.append(Metric("loss_scale", loss_scale, expected_source="fp16 GradScaler, final scale"))
    if last <= first * (1 - min_drop):
        return Result(
            Status.PASS,
            f"loss fell {first:.3f} -> {last:.3f} ({run})",
            aspect="loss-falls",
            metrics=metrics,
        )
    return Result(
        Status.FAIL,
        f"loss did not fall ({first:.3f} -> {last:.3f}) on a learnable task",
        aspect="loss-falls",
        metrics=metrics,
        remediation=Remediation(
            "A model that does not learn an easy task on this machine points at wrong gradients or "
            "corrupted data: see the gradient and finite results.",
            ["gpudoctor check --only ddp -v"],
        ),
    )


def _sync(ranks: list[dict[str, Any]]) -> Result:
    reference = ranks[0]["params_checksum"]
    differ = [r["rank"] for r in ranks if r["params_checksum"] != reference]
    if differ:
        return Result(
            Status.FAIL,
            f"parameters on rank {', '.join(map(str, differ))} differ from rank 0 after training",
            aspect="params-identical",
            remediation=Remediation(
                "DDP keeps replicas bit-identical; a rank that drifts has a faulty GPU or memory.",
                ["gpudoctor check --only memory health"],
            ),
        )
    return Result(Status.PASS, f"parameters identical on all {len(ranks)} ranks", aspect="params-identical")


def _gradient(rank0: dict[str, Any], tolerance: float) -> Result:
    error = rank0["grad_rel_error"]
    metric = Metric(
        "grad_rel_error",
        error,
        expected=f"<= {tolerance:g}",
        expected_source="relative L2 error against a single-process gradient",
    )
    if error is not None and error <= tolerance:
        return Result(
            Status.PASS,
            f"first-step averaged gradient matches a single-process gradient (relative error {error:.2g})",
            aspect="gradient-matches",
            metrics=[metric],
        )
    return Result(
        Status.FAIL,
        f"first-step averaged gradient differs from a single-process gradient "
        f"(relative error {error:.2g} > {tolerance:g}): the all-reduce is wrong or data is corrupted",
        aspect="gradient-matches",
        metrics=[metric],
        remediation=Remediation(
            "Gradients that do not average correctly mean a broken collective path (P2P, NVLink) or "
            "silent data corruption.",
            ["gpudoctor check --only allreduce p2p memory"],
        ),
    )


def _finite(ranks: list[dict[str, Any]]) -> Result:
    bad = [r["rank"] for r in ranks if not r["finite"]]
    if bad:
        return Result(
            Status.FAIL,
            f"NaN or Inf in the loss or parameters on rank {', '.join(map(str, bad))}",
            aspect="finite",
            remediation=Remediation(
                "Non-finite values on an easy task point at a failing GPU or memory.",
                ["gpudoctor check --only memory compute health"],
            ),
        )
    return Result(Status.PASS, "no NaN or Inf in losses or parameters", aspect="finite")


def _throughput(
    ranks: list[dict[str, Any]],
    p: dict[str, Any],
    device: str,
    expected: expect.Expectation | None,
    floor: float,
    run: str,
) -> Result:
    steps = [s for r in ranks for s in r["step_s"]]
    step = statistics.median(steps)
    spread = statistics.quantiles(steps, n=4) if len(steps) > 1 else [step, step, step]
    per_gpu = p["batch_size"] / step
    total = per_gpu * len(ranks)
    status, metric = expect.verdict("images_per_s_per_gpu", per_gpu, "img/s", expected, floor)
    metric.baseline = True
    metrics = [
        metric,
        Metric("images_per_s", round(total, 1), "img/s"),
        Metric("step_time_median", round(step * 1000, 2), "ms"),
        Metric("step_time_iqr", round((spread[2] - spread[0]) * 1000, 2), "ms"),
        *[Metric("peak_memory", round(r["peak_mib"], 1), "MiB", labels={"rank": r["rank"]}) for r in ranks],
    ]
    text = f"{total:.0f} img/s ({per_gpu:.0f} per {'GPU' if device == 'cuda' else 'rank'}), step {step * 1000:.1f} ms"
    iqr_share = (spread[2] - spread[0]) / step
    if expected is not None and iqr_share > UNSTABLE_SPREAD:
        return Result(
            Status.WARN,
            f"unstable: step time {step * 1000:.1f} ms with an interquartile range of {iqr_share:.0%} of it "
            f"(over {UNSTABLE_SPREAD:.0%}): {text} not judged ({run})",
            aspect="throughput",
            metrics=metrics,
            remediation=Remediation(
                "Step times that vary this much come from something else on the GPUs or the CPUs feeding them.",
                ["nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv", "uptime"],
            ),
        )
    if expected is None:
        note = "" if device == "cuda" else "; CPU figures are not judged"
        return Result(
            Status.PASS,
            f"{text} ({run}){note or NO_REFERENCE}",
            aspect="throughput",
            metrics=metrics,
        )
    if status == Status.FAIL:
        return Result(
            Status.FAIL,
            f"{text}, below {metric.expected} per GPU ({expected.source})",
            aspect="throughput",
            metrics=metrics,
            remediation=Remediation(
                "Slow training with healthy collectives points at throttled or degraded GPUs.",
                ["gpudoctor check --level standard --only compute health"],
            ),
        )
    return Result(Status.PASS, f"{text} (expected {metric.expected} per GPU)", aspect="throughput", metrics=metrics)


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
        rows.append(
            gpu_row(gpus[rank], status, f"{value:.4g} img/s alone, {ratio:.2f}x the median of its peers", [metric])
        )
    result = from_rows(
        rows,
        f"{head}; {allow.describe()}",
        Remediation(
            "A GPU slower than its peers on the same work holds every synchronous step back: throttled (power, "
            "thermal), a degraded GPU, or a slow PCIe link for its data.",
            ["nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE", "gpudoctor check --level standard --only compute"],
        ),
    )
    result.aspect = "per-gpu"
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
        return Result(Status.PASS, f"{text}; ranks share the CPU, so not judged", aspect="scaling", metrics=[metric])
    if efficiency < minimum:
        return Result(
            Status.FAIL,
            f"{text}, below {minimum:.0%}",
            aspect="scaling",
            metrics=[metric],
            remediation=Remediation(
                "Synchronised steps much slower than every GPU alone mean the gradient all-reduce is slow.",
                ["gpudoctor check --level standard --only allreduce p2p"],
            ),
        )
    return Result(Status.PASS, text, aspect="scaling", metrics=[metric])


@check(
    "ddp.train",
    "Reference DDP training run",
    level="standard",
    needs=("torch", "live"),
    uses=("nvml", "system"),
    timeout_s=300,
    settings=SETTINGS,
)
def ddp_train(ctx: CheckContext) -> list[Result]:
    """ResNet DDP on every GPU (gloo on CPU): loss falls, replicas identical, gradients right, throughput;
    each GPU's own speed (steps without synchronisation) is its baseline for naming a slow GPU and for
    scaling."""
    capabilities = [tuple(g["compute_capability"]) for g in ctx.used_gpus if g.get("compute_capability")]
    p = resolve(ctx.settings, ctx.device, capabilities, ctx.work_factor)
    if ctx.settings["scaling"] and ctx.world_size > 1:
        p["local_steps"] = LOCAL_STEPS
    ranks = ctx.launch("gpudoctor.checks.ddp:worker", p)
    if isinstance(ranks, Result):
        return [ranks]
    results = judge(ranks, p, ctx.device, ctx.baseline("images_per_s_per_gpu"), ctx.settings)
    if ranks[0].get("local_step_s"):
        results += alone(ctx.with_gpus([{**r, "cuda_index": r["rank"]} for r in ranks]), p, ctx.device, ctx.settings)
    return results


# No published ResNet training figure was measured as gpudoctor trains: NVIDIA's DeepLearningExamples figures
# feed the GPUs with DALI at batch 256 in fp16 (PyTorch/Classification/ConvNets/resnet50v1.5 README), gpudoctor
# trains synthetic batches at its own size and precision. Its throughput is judged against a saved baseline and
# each GPU's own speed alone (scaling), never against a table.
NO_REFERENCE = "; no published figure matches this run: judged against a saved baseline (gpudoctor baseline save)"
UNSTABLE_SPREAD = 0.25  # a step-time interquartile range above this fraction of the median is not judged
LOCAL_STEPS = 4  # steps a rank runs alone (no synchronisation), after the warm-up and again at the end


def main(argv: list[str] | None = None) -> int:
    """Under torchrun: train, gather every rank's figures, and print the verdicts as JSON on rank 0."""
    import torch
    import torch.distributed as dist

    from gpudoctor.api import init_rank

    parser = argparse.ArgumentParser(prog="python -m gpudoctor.checks.ddp")
    for key, value in DEFAULTS["cpu"].items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value))
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    p = resolve({k: v for k, v in vars(args).items() if v}, device)
    ctx = init_rank("nccl" if device == "cuda" else "gloo", time.time() + 1500, p)
    data = worker(ctx)
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, data)
    if ctx.rank == 0:
        results = judge(gathered, p, device, None, SETTINGS)
        json.dump([r.to_dict() for r in results], sys.stdout, indent=2)
        print()
    # Tear down together: a rank leaving while rank 0 still judges can abort the other (gloo). NCCL is told
    # the rank's GPU, as torch asks.
    dist.barrier(device_ids=[torch.cuda.current_device()] if device == "cuda" else None)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
