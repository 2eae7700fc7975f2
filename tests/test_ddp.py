"""The reference DDP run, for real on CPU with gloo and 2 ranks: correctness checks pass, and fail when a
rank's gradients or parameters are corrupted on purpose (a DDP comm hook and a parameter nudge, not mocks);
crashes and hangs name the rank; torchrun runs it on its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from helpers.common import gpudoctor

from gpudoctor.checks import ddp
from gpudoctor.checks.ranks import ddp as ddp_ranks
from gpudoctor.judging import ddp as ddp_judging
from gpudoctor.model import Status
from gpudoctor.workloads.launch import Fault, free_port, launch

SETTINGS = {"min_loss_drop": 0.1, "grad_tolerance": 0.0, "floor": 0.75, "min_scaling": 0.85}
FAST = {**ddp_judging.resolve({}, "cpu"), "steps": 8, "warmup": 2}


def run(fault: Fault | None = None, timeout: float = 120) -> tuple[object, dict]:
    outcome = launch("gpudoctor.checks.ranks.ddp:worker", 2, "gloo", FAST, timeout, fault)
    return outcome, {
        r.aspect: r for r in ddp_judging.judge(outcome.data, FAST, "cpu", None, SETTINGS)
    } if outcome.status == "pass" else {}


def test_whole_check_passes_on_cpu_with_every_aspect(tmp_path) -> None:
    proc = gpudoctor("check", "--only", "ddp", "--json")
    checks = {c["check_id"] + ":" + (c["aspect"] or ""): c for c in json.loads(proc.stdout)["checks"]}
    assert set(checks) == {
        f"ddp.train:{a}"
        for a in ("loss-falls", "params-identical", "gradient-matches", "finite", "throughput", "per-gpu", "scaling")
    }
    judged = {label: c["status"] for label, c in checks.items() if label != "ddp.train:throughput"}
    assert set(judged.values()) == {"pass"}, checks
    assert checks["ddp.train:throughput"]["status"] == "skip", "a CPU figure with nothing to judge it: not judged"
    assert checks["ddp.train:throughput"]["summary"].startswith("not judged: ")
    assert "resnet18, batch 8/rank, 64 px, fp32, 12 steps" in checks["ddp.train:loss-falls"]["summary"]
    metrics = {(m["name"], tuple(m["labels"].items())) for m in checks["ddp.train:throughput"]["metrics"]}
    assert {
        ("images_per_s", ()),
        ("images_per_s_per_gpu", ()),
        ("step_time_median", ()),
        ("step_time_iqr", ()),
        ("peak_memory", (("rank", 0),)),
        ("peak_memory", (("rank", 1),)),
    } <= metrics
    assert proc.returncode == 0


@pytest.mark.slow  # the whole DDP check measures each rank's speed in the `not slow` run
def test_each_rank_measures_its_own_speed_in_the_same_run(no_leftovers) -> None:
    """Two passes of steps without synchronisation per rank, after the warm-up and at the end: each GPU's own
    baseline, measured alongside the synchronised steps (no separate one-GPU run on cuda:0)."""
    outcome = launch("gpudoctor.checks.ranks.ddp:worker", 2, "gloo", {**FAST, "local_steps": 2}, 120)
    assert outcome.status == "pass", outcome.message
    for rank in outcome.data:
        assert len(rank["local_step_s"]) == 2 and all(len(times) == 2 for times in rank["local_step_s"])
        assert len(rank["step_s"]) == FAST["steps"] - FAST["warmup"] and rank["warmup_steps"] == FAST["warmup"]
    aspects = [r.aspect for r in ddp.alone([(rank, {}) for rank in outcome.data], FAST, "cpu", SETTINGS)]
    assert aspects == ["per-gpu", "scaling"]


def gpu_ranks(alone_ms: list[float], synced_ms: float) -> list[tuple[dict, dict]]:
    """Eight ranks' figures on an 8-GPU node, each with its GPU: its own step time alone (two passes, 1 %
    apart) and the synchronised steps."""
    from fixtures.nodes import node

    from gpudoctor.facts.identity import with_gpus

    facts = node()
    ranks = [
        {"rank": r, "cuda_index": r, "local_step_s": [[t / 1000] * 4, [t * 1.01 / 1000] * 4]}
        | {"step_s": [synced_ms / 1000] * 10}
        for r, t in enumerate(alone_ms)
    ]
    return with_gpus(ranks, facts["torch"]["devices"], facts["nvml"]["gpus"])


def test_a_slow_gpu_is_named_and_the_all_reduce_not_blamed() -> None:
    """GPU 5 computes at 0.6x: it is named, and scaling (the synchronised step against the slowest GPU's own)
    stays high, where the old cuda:0 baseline called it an all-reduce problem."""
    times = [100.0] * 8
    times[5] = 100 / 0.6
    per_gpu, scaling = ddp.alone(gpu_ranks(times, 175.0), {"batch_size": 256}, "cuda", SETTINGS)
    assert per_gpu.status == Status.FAIL and per_gpu.summary.startswith("GPU 5: ")
    assert [r.index for r in per_gpu.rows if r.status != Status.PASS] == [5]
    assert scaling.status == Status.PASS and "rank 5 alone" in scaling.summary
    healthy = ddp.alone(gpu_ranks([100.0] * 8, 160.0), {"batch_size": 256}, "cuda", SETTINGS)
    assert healthy[0].status == Status.PASS and healthy[1].status == Status.FAIL


def test_warm_up_lasts_until_the_step_time_settles() -> None:
    assert not ddp_ranks.settled([3.0, 0.5, 0.2, 0.1, 0.1, 0.1])
    assert ddp_ranks.settled([3.0, 0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert not ddp_ranks.settled([0.1] * 5)


def test_a_wide_step_time_spread_is_unstable_not_a_verdict() -> None:
    """351 img/s from steps that swing between 40 and 400 ms is not a figure to fail a node on."""
    from gpudoctor.judging.expect import Expectation

    wild = [{"rank": 0, "step_s": [0.04, 0.4, 0.05, 0.35, 0.04, 0.3, 0.05, 0.4], "peak_mib": 1.0}]
    result = ddp_judging._throughput(wild, {"batch_size": 128}, "cuda", Expectation(3000.0, "reference"), 0.75, "run")
    assert result.status == Status.WARN and result.summary.startswith("unstable: step time")
    steady = [{"rank": 0, "step_s": [0.0354] * 8, "peak_mib": 1.0}]
    assert (
        ddp_judging._throughput(steady, {"batch_size": 128}, "cuda", Expectation(3000.0, "ref"), 0.75, "run").status
        == "pass"
    )


def test_corrupted_gradients_fail_the_gradient_check(no_leftovers) -> None:
    outcome, results = run(Fault(1, "corrupt", "grad"))
    assert outcome.status == "pass"
    assert results["gradient-matches"].status.value == "fail"
    assert "relative error" in results["gradient-matches"].summary
    assert results["params-identical"].status.value == "pass"


@pytest.mark.slow  # the judge of drift is tested on figures in the `not slow` run
def test_a_rank_that_drifts_is_named(no_leftovers) -> None:
    _, results = run(Fault(1, "corrupt", "params"))
    result = results["params-identical"]
    assert result.status.value == "fail" and result.summary.startswith("parameters on rank 1 differ")
    assert results["gradient-matches"].status.value == "pass"


def test_non_finite_values_fail() -> None:
    good_rank = {"rank": 0, "finite": True}
    result = ddp_judging._finite([good_rank, {"rank": 1, "finite": False}])
    assert result.status.value == "fail" and result.summary.endswith("on rank 1")
    assert ddp_judging._finite([good_rank, {"rank": 1, "finite": True}]).status.value == "pass"


def test_loss_that_does_not_fall_fails() -> None:
    assert ddp_judging._loss([2.3] * 8, 0.1, "run").status.value == "fail"


@pytest.mark.slow  # the all-reduce crash test names a crashed rank in the `not slow` run
def test_crash_mid_run_names_the_rank(no_leftovers) -> None:
    outcome, _ = run(Fault(1, "crash", "train step 3"))
    assert outcome.status == "error"
    assert outcome.message.startswith("rank 1 crashed (SIGSEGV) during 'train step 3'")


@pytest.mark.slow  # the all-reduce hang tests name a hung rank in the `not slow` run
def test_hang_in_a_collective_times_out_naming_the_rank(no_leftovers) -> None:
    outcome, _ = run(Fault(1, "hang", "train step 2"), timeout=45)
    assert outcome.status == "timeout"
    # Which words name the stuck step depends on when the launcher looked: rank 1 missing, or every rank waiting
    # in the collective rank 1 never joined (a loaded machine); both name the step.
    said = outcome.message
    assert "rank 1 (in 'train step 2') never arrived" in said or "all ranks stuck in 'train step 2'" in said, said


def test_out_of_memory_names_a_batch_that_fits() -> None:
    results = ddp_judging.judge(
        [
            {"rank": 0, "oom": True, "requested": 256, "fits": 64},
            {"rank": 1, "oom": True, "requested": 256, "fits": 128},
        ],
        {**FAST, "batch_size": 256},
        "cuda",
        None,
        SETTINGS,
    )
    assert results[0].summary == "CUDA out of memory at batch 256 per GPU; batch 64 fits"
    assert "batch_size = 64" in results[0].remediation.commands[0]


def test_throughput_is_never_judged_against_figures_measured_otherwise() -> None:
    """NVIDIA's ResNet-50 figures were measured with DALI, batch 256, fp16: not what ddp.train runs. Without a
    baseline the throughput is shown and said to be not judged (never a pass: 45 % of a healthy node's figure
    passed so on a shared H100), whatever the GPU."""
    ranks = [{"rank": r, "step_s": [0.5] * 6, "peak_mib": 1000.0} for r in range(8)]
    result = ddp_judging._throughput(ranks, ddp_judging.resolve({}, "cuda"), "cuda", None, 0.75, "8 ranks")
    assert result.status == Status.SKIP and result.summary.startswith("not judged: ")
    assert ddp_judging.NO_REFERENCE in result.summary
    assert all(m.expected is None for m in result.metrics)
    assert not hasattr(ddp, "reference_figure")


def test_gpu_defaults_are_resnet50_bf16() -> None:
    p = ddp_judging.resolve({}, "cuda", work_factor=4)
    assert (p["model"], p["batch_size"], p["image_size"], p["precision"], p["steps"]) == (
        "resnet50",
        128,
        224,
        "bf16",
        240,
    )
    assert ddp_judging.resolve({"batch_size": 32, "steps": 10}, "cuda", work_factor=4)["steps"] == 10


@pytest.mark.slow  # the cluster tests run gpudoctor under torchrun in the `not slow` run
def test_runs_on_its_own_under_torchrun(no_leftovers) -> None:
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(free_port()),
            "-m",
            "gpudoctor.checks.ranks.ddp",
            "--steps",
            "6",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    results = json.loads(out)
    assert {r["aspect"]: r["status"] for r in results} == {
        "loss-falls": "pass",
        "params-identical": "pass",
        "gradient-matches": "pass",
        "finite": "pass",
        "throughput": "skip",
    }


@pytest.mark.parametrize(
    "error,oom",
    [
        (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), True),
        (RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), True),
        (RuntimeError("CUDA error: out of memory"), True),
        (type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), False),
    ],
)
def test_allocation_failures_from_any_library_count_as_out_of_memory(error: Exception, oom: bool) -> None:
    """cuBLAS and cuDNN report a failed allocation as RuntimeError, not torch.cuda.OutOfMemoryError."""
    assert ddp_ranks.is_out_of_memory(error) is oom


@pytest.mark.slow  # the whole DDP check (fp32 on CPU) runs in the `not slow` run
def test_fp16_trains_with_loss_scaling_and_its_gradient_still_matches(no_leftovers) -> None:
    """fp16 without a GradScaler lets small gradients underflow; with it, the first step's gradient (unscaled)
    still equals the single-process reference. Runs for real: fp16 autocast and GradScaler on the CPU, gloo."""
    p = {**FAST, "precision": "fp16", "image_size": 32, "batch_size": 4, "steps": 6, "warmup": 2}
    outcome = launch("gpudoctor.checks.ranks.ddp:worker", 2, "gloo", p, 240)
    assert outcome.status == "pass", outcome.message
    results = {
        r.aspect: r for r in ddp_judging.judge(outcome.data, p, "cpu", None, {**SETTINGS, "grad_tolerance": 5e-2})
    }
    assert results["gradient-matches"].status.value == "pass", results["gradient-matches"].summary
    assert "fp16 autocast with loss scaling" in ddp_judging.describe(p, "cpu")
    scale = next(m for m in results["loss-falls"].metrics if m.name == "loss_scale")
    assert scale.value >= ddp_ranks.FP16_INIT_SCALE / 2
