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

from gpudoctor.api import CheckContext, Metric, RankContext, Remediation, Result, Status, check, expect, gpu_model

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
    losses = torch.zeros(p["steps"], device=ctx.device)
    grad_error = None
    marks = []
    local: list[list[float]] = []
    for step in range(p["steps"]):
        ctx.phase(f"train step {step}")
        started = measure.mark(ctx.device)
        images, labels = pool[step % len(pool)]
        loss = loss_of(ddp, images, labels, p, ctx.device)
        optimizer.zero_grad(set_to_none=True)
        (scaler.scale(loss) if scaler else loss).backward()
        if step == 0 and initial is not None:
            scale = scaler.get_scale() if scaler else 1.0
            if scaler:
                scaler.unscale_(optimizer)
            grad_error = reference_gradient_error(initial, ddp, ctx, p, templates, scale)
            del initial
            initial = None
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        losses[step] = loss.detach().float()
        marks.append((started, measure.mark(ctx.device)))
        if p.get("local_steps") and step in (p["warmup"] - 1, p["steps"] - 1):
            local.append(local_steps(ctx, ddp, p, pool))
    ctx.phase("gather results")
    if ctx.fault_here("params", "corrupt"):
        with torch.no_grad():
            next(ddp.module.parameters()).view(-1)[0] += 1.0
    dist.all_reduce(losses)
    params = torch.cat([q.detach().float().flatten() for q in ddp.module.parameters()])
    return {
        "rank": ctx.rank,
        "oom": False,
        "losses": (losses / ctx.world_size).tolist(),
        "params_checksum": measure.checksum(params),
        "finite": bool(torch.isfinite(params).all()) and bool(torch.isfinite(losses).all()),
        "grad_rel_error": grad_error,
        "step_s": measure.seconds_between(marks, ctx.device)[p["warmup"] :],
        "peak_mib": _peak_mib(ctx.device),
        "batch_size": p["batch_size"],
        "loss_scale": scaler.get_scale() if scaler else None,
        "local_step_s": local,
    }


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
    single: list[dict[str, Any]] | Result | None,
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
        *([_scaling(ranks, single, device, settings["min_scaling"])] if single is not None else []),
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
    if expected is None:
        note = "" if device == "cuda" else "; CPU figures are not judged"
        return Result(
            Status.PASS,
            f"{text} ({run}){note or '; no reference figure: save a baseline'}",
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


def _scaling(ranks: list[dict[str, Any]], single: list[dict[str, Any]] | Result, device: str, minimum: float) -> Result:
    if isinstance(single, Result):
        return Result(single.status, f"the one-GPU comparison run: {single.summary}", aspect="scaling")
    many = statistics.median(s for r in ranks for s in r["step_s"])
    one = statistics.median(single[0]["step_s"])
    efficiency = one / many
    metric = Metric(
        "scaling_efficiency",
        round(efficiency, 3),
        expected=f">= {minimum}" if device == "cuda" else None,
        expected_source="config min_scaling" if device == "cuda" else None,
    )
    text = f"{len(ranks)} ranks at {efficiency:.0%} of one rank's per-rank speed (same batch per rank)"
    if device != "cuda":
        return Result(Status.PASS, f"{text}; ranks share the CPU, so not judged", aspect="scaling", metrics=[metric])
    if efficiency < minimum:
        return Result(
            Status.FAIL,
            f"{text}, below {minimum:.0%}",
            aspect="scaling",
            metrics=[metric],
            remediation=Remediation(
                "Poor scaling means gradient all-reduce is slow: see allreduce.",
                ["gpudoctor check --level standard --only allreduce p2p"],
            ),
        )
    return Result(Status.PASS, text, aspect="scaling", metrics=[metric])


def reference_figure(gpus: list[dict[str, Any]], p: dict[str, Any], world: int) -> expect.Expectation | None:
    """NVIDIA DeepLearningExamples ResNet-50 v1.5 AMP figures for the model, per GPU (see hardware.toml)."""
    if p["model"] != "resnet50" or p["precision"] == "fp32" or not gpus or gpus[0].get("mig_slice"):
        return None  # a MIG slice has no published figure: judged against a saved baseline only
    model = gpu_model(gpus[0]) or {}
    key = "resnet50_amp_8gpu" if world >= 8 else "resnet50_amp_1gpu"
    if key not in model:
        return None
    scale = 8 if key.endswith("8gpu") else 1
    return expect.Expectation(
        model[key] / scale,
        f"DeepLearningExamples ResNet-50 v1.5 AMP on {model['model']}, "
        f"{model[key]} img/s on {scale} GPU{'s' if scale > 1 else ''} (batch 256)",
    )


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
    """ResNet DDP on every GPU (gloo on CPU): loss falls, replicas identical, gradients right, throughput.
    Both runs share the check's one time budget: the full run up to MAIN_RUN_SHARE of it, the one-rank
    comparison (half the steps) what is left; a comparison that fails or finds no time says so."""
    deadline = time.monotonic() + ctx.timeout_s
    capabilities = [tuple(g["compute_capability"]) for g in ctx.used_gpus if g.get("compute_capability")]
    p = resolve(ctx.settings, ctx.device, capabilities, ctx.work_factor)
    ranks = ctx.launch("gpudoctor.checks.ddp:worker", p, timeout_s=ctx.timeout_s * MAIN_RUN_SHARE)
    if isinstance(ranks, Result):
        return [ranks]
    single = None
    if ctx.settings["scaling"] and ctx.world_size > 1 and not ranks[0].get("oom"):
        single = comparison_run(ctx, p, deadline - time.monotonic())
    expected = expect.pick(
        ctx.baseline("images_per_s_per_gpu"),
        reference_figure(ctx.used_gpus, p, ctx.world_size) if ctx.device == "cuda" else None,
    )
    return judge(ranks, single, p, ctx.device, expected, ctx.settings)


MAIN_RUN_SHARE = 0.65
MIN_COMPARISON_S = 10.0


def comparison_run(ctx: CheckContext, p: dict[str, Any], left_s: float) -> list[dict[str, Any]] | Result:
    """The same training on one rank, half as long, within what is left of the budget."""
    if left_s < MIN_COMPARISON_S:
        return Result(Status.SKIP, f"no time left in the {ctx.timeout_s:g} s budget (raise `timeout`)")
    steps = max(p["warmup"] + 3, p["steps"] // 2)
    return ctx.launch("gpudoctor.checks.ddp:worker", {**p, "steps": steps}, world_size=1, timeout_s=left_s)


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
        results = judge(gathered, None, p, device, None, SETTINGS)
        json.dump([r.to_dict() for r in results], sys.stdout, indent=2)
        print()
    # Tear down together: a rank leaving while rank 0 still judges can abort the other (gloo). NCCL is told
    # the rank's GPU, as torch asks.
    dist.barrier(device_ids=[torch.cuda.current_device()] if device == "cuda" else None)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
