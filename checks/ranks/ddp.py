"""On every rank of ddp.train (and cluster.ddp): the reference training run, a ResNet (checks/ranks/cnn.py) trained with
DistributedDataParallel on synthetic batches made on the device, its correctness figures gathered.

Runs on its own under torchrun too:  torchrun --nproc-per-node=8 -m gpudoctor.checks.ranks.ddp --steps 60
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

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from gpudoctor.api import RankContext, init_rank, measure
from gpudoctor.checks.ranks import cnn
from gpudoctor.judging.ddp import DEFAULTS, SETTINGS, judge, resolve

CLASSES = 10
SEED = 20261122


def make_batch(step: int, rank: int, p: dict[str, Any], templates: Any, device: Any) -> tuple[Any, Any]:
    """A learnable batch: each image is its class's fixed template plus noise. Deterministic in (step, rank),
    so rank 0 can rebuild any rank's batch for the reference gradient."""
    gen = torch.Generator(device=device).manual_seed(SEED + 7919 * step + rank)
    labels = torch.randint(0, CLASSES, (p["batch_size"],), generator=gen, device=device)
    noise = torch.randn(p["batch_size"], 3, p["image_size"], p["image_size"], generator=gen, device=device)
    images = templates[labels] + 0.5 * noise
    return images.contiguous(memory_format=_memory_format(device)), labels


def _memory_format(device: Any) -> Any:
    return torch.channels_last if device.type == "cuda" else torch.contiguous_format


def build_model(p: dict[str, Any], device: Any) -> Any:
    torch.manual_seed(SEED)
    model, p["model_from"] = cnn.build(p["model"], CLASSES)
    return model.to(device, memory_format=_memory_format(device))


def autocast(p: dict[str, Any], device: Any) -> Any:
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p["precision"])
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def loss_of(model: Any, images: Any, labels: Any, p: dict[str, Any], device: Any) -> Any:
    with autocast(p, device):
        return torch.nn.functional.cross_entropy(model(images), labels)


def fitting_batch(ctx: RankContext, p: dict[str, Any], templates: Any) -> int:
    """On GPU, the largest batch up to the requested one that fits on every rank (halving on OOM)."""
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
    return torch.amp.GradScaler(device.type, init_scale=FP16_INIT_SCALE) if p["precision"] == "fp16" else None


def reference_gradient_error(
    initial: Any, ddp_model: Any, ctx: RankContext, p: dict[str, Any], templates: Any, scale: float = 1.0
) -> float:
    """Rank 0: the single-process gradient of step 0 (each rank's batch through its own forward, as DDP's
    per-rank BatchNorm sees it, losses averaged) against DDP's all-reduced gradient (unscaled already).
    Under fp16 the reference backward is scaled by the same loss scale, then unscaled."""
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

    def hook(state, bucket):  # type: ignore[no-untyped-def]
        bucket.buffer().add_(1.0)
        return default_hooks.allreduce_hook(state, bucket)

    return hook


def worker(ctx: RankContext) -> dict[str, Any]:
    """Runs on every rank: DDP training with the correctness checks, timed per step."""
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
        "model_from": p["model_from"],
    }


SETTLE_WINDOW = 3  # steps: warm-up ends when the median of the last three is within SETTLE_RATIO of the three before
SETTLE_RATIO = 0.1
MAX_WARMUP_FACTOR = 4  # a step time that never settles ends warm-up at this many times the planned warm-up


def warm_up(ctx: RankContext, train_step: Any, p: dict[str, Any]) -> tuple[list[Any], int]:
    """Untimed training steps: at least `warmup`; on a GPU, until the step time settles (cuDNN autotuning and
    lazy module loading make the first steps many times slower), at most MAX_WARMUP_FACTOR x `warmup`. Every
    rank stops at the same step: each says whether its times settled, and all stop when all have."""
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
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    """Under torchrun: train, gather every rank's figures, and print the verdicts as JSON on rank 0."""
    parser = argparse.ArgumentParser(prog="python -m gpudoctor.checks.ranks.ddp")
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
