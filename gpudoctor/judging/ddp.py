"""The reference DDP run's parameters and its verdicts (pure: no torch): shared by ddp.train (one node) and
cluster.ddp (every node at once), and by the ranks' own torchrun entry (checks/ranks/ddp.py)."""

from __future__ import annotations

import statistics
from typing import Any

from gpudoctor.command import command
from gpudoctor.judging import compat, expect
from gpudoctor.judging.commands import fix
from gpudoctor.model import Metric, Remediation, Result, Status

# The models gpudoctor builds itself where torchvision does not import (checks/ranks/cnn.py), torchvision's shapes:
# blocks per stage, "basic" two 3x3 convolutions, "bottleneck" 1x1, 3x3, 1x1 with four times the width out.
RESNETS = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
    "resnet152": ("bottleneck", (3, 8, 36, 3)),
}
DEFAULTS = {
    "cuda": {"model": "resnet50", "batch_size": 128, "image_size": 224, "precision": "bf16", "steps": 60},
    "cpu": {"model": "resnet18", "batch_size": 8, "image_size": 64, "precision": "fp32", "steps": 12},
}
BF16_CAPABILITY = (8, 0)  # bf16 tensor cores arrived with Ampere
# A shortened run keeps its correctness (the first step's gradient, ranks agreeing, the loss falling): on the 2-core
# machine resnet18's loss rose over 4 steps (2.39 -> 2.75) and fell over 6 (2.39 -> 0.99), so 6 at the least.
MIN_STEPS = 6
# The aspect of the loss's trend: a correctness verdict, yet a shortened run's fewer steps may not show the fall
# (diagnosis/shortened.py softens its failure there).
LOSS_FALLS = "loss-falls"
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
    settings: dict[str, Any], device: str, capabilities: list[tuple[int, int]] = (), work_factor: float = 1
) -> dict[str, Any]:
    """The run's parameters: configured values, else this device's defaults; the default step count is
    multiplied by the run's work factor (`--level full`). GPUs without bf16 (compute capability below 8.0:
    Volta, Turing) train in fp16 with loss scaling."""
    base = dict(DEFAULTS[device])
    if device == "cuda" and any(cap < BF16_CAPABILITY for cap in capabilities):
        base["precision"] = "fp16"
    params = {key: settings.get(key) or base[key] for key in base}
    params["steps"] = max(MIN_STEPS, round(params["steps"] * (1 if settings.get("steps") else work_factor)))
    params["warmup"] = max(2, params["steps"] // 5)
    return params


def describe(p: dict[str, Any], device: str) -> str:
    precision = {"bf16": "bf16 autocast", "fp16": "fp16 autocast with loss scaling", "fp32": "fp32"}[p["precision"]]
    own = " (gpudoctor's own: torchvision does not import here)" if p.get("model_from") == "gpudoctor" else ""
    return (
        f"{p['model']}{own}, batch {p['batch_size']}/{'GPU' if device == 'cuda' else 'rank'}, {p['image_size']} px, "
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
                basis="oom",
                remediation=Remediation(
                    "Lower the reference run's batch size in the config file.",
                    [
                        command(
                            "printf '[checks.ddp.train]\\nbatch_size = {count}\\n' >> gpudoctor.toml",
                            count=max(fits, 1),
                        ),
                        "gpudoctor check --config gpudoctor.toml --only ddp",
                    ],
                ),
            )
        ]
    run = describe({**p, "model_from": ranks[0].get("model_from")}, device)
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
            aspect=LOSS_FALLS,
            basis="data",
            metrics=metrics,
        )
    return Result(
        Status.FAIL,
        f"loss did not fall ({first:.3f} -> {last:.3f}) on a learnable task",
        aspect=LOSS_FALLS,
        basis="data",
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
            basis="data",
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
            basis="data",
            metrics=[metric],
        )
    return Result(
        Status.FAIL,
        f"first-step averaged gradient differs from a single-process gradient "
        f"(relative error {error:.2g} > {tolerance:g}): the all-reduce is wrong or data is corrupted",
        aspect="gradient-matches",
        basis="data",
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
            basis="data",
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
    settled = len(steps) // max(1, len(ranks))
    if expected is not None and settled < MIN_SETTLED:
        return Result(
            Status.SKIP,
            f"not judged: {text} over only {settled} settled steps (a shortened run; {MIN_SETTLED} judge it)",
            aspect="throughput",
            basis="figure",
            metrics=metrics,
        )
    if expected is not None and iqr_share > UNSTABLE_SPREAD:
        return Result(
            Status.WARN,
            f"unstable: step time {step * 1000:.1f} ms with an interquartile range of {iqr_share:.0%} of it "
            f"(over {UNSTABLE_SPREAD:.0%}): {text} not judged ({run})",
            aspect="throughput",
            basis="figure",
            metrics=metrics,
            remediation=Remediation(
                "Step times that vary this much come from something else on the GPUs or the CPUs feeding them.",
                ["nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv", "uptime"],
            ),
        )
    if expected is None:
        note = "" if device == "cuda" else "; CPU figures are not judged"
        return Result(
            Status.SKIP,
            f"not judged: {text} ({run}){note or NO_REFERENCE}",
            aspect="throughput",
            basis="figure",
            metrics=metrics,
        )
    if status == Status.FAIL:
        return Result(
            Status.FAIL,
            f"{text}, below {metric.expected} per GPU ({expected.source})",
            aspect="throughput",
            basis="figure",
            metrics=metrics,
            remediation=Remediation(
                "Slow training with healthy collectives points at throttled or degraded GPUs.",
                ["gpudoctor check --level standard --only compute health"],
            ),
        )
    return Result(
        Status.PASS,
        f"{text} (expected {metric.expected} per GPU)",
        aspect="throughput",
        basis="figure",
        metrics=metrics,
    )


# No published ResNet training figure was measured as gpudoctor trains: NVIDIA's DeepLearningExamples figures
# feed the GPUs with DALI at batch 256 in fp16 (PyTorch/Classification/ConvNets/resnet50v1.5 README), gpudoctor
# trains synthetic batches at its own size and precision. Its throughput is judged against a saved baseline and
# each GPU's own speed alone (scaling), never against a table.
NO_REFERENCE = "; no published figure matches this run: judged against a saved baseline (gpudoctor baseline save)"
UNSTABLE_SPREAD = 0.25  # a step-time interquartile range above this fraction of the median is not judged
MIN_SETTLED = 8  # timed steps after the warm-up a throughput is judged on: fewer (a run a --budget shortened) is not
LOCAL_STEPS = 4  # steps a rank runs alone (no synchronisation), after the warm-up and again at the end


def needs_torchvision(model: str, torch: dict[str, Any]) -> Result | None:
    """A configured model gpudoctor does not build itself, where torchvision does not import: the one command that
    installs the torchvision paired with this torch (keeping torch as it is); None where the run can go ahead."""
    vision = torch.get("torchvision") or {}
    if model in RESNETS or (vision.get("installed") and vision.get("ops_ok")):
        return None
    wanted = compat.paired_torchvision(str(torch.get("version", "")))
    why = "not installed" if not vision.get("installed") else "does not load against this torch"
    return Result(
        Status.SKIP,
        f"{model} needs torchvision, which is {why}; gpudoctor builds only {', '.join(RESNETS)} itself",
        remediation=fix(
            f"Install the torchvision built for torch {torch.get('version')}, or train one of {', '.join(RESNETS)}.",
            lambda: [compat.same_build_command(torch, wanted)],
        ),
    )
