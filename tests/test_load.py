"""Every GPU under load at once (load.concurrent): the worker for real on CPU ranks (gloo), NVML's samples
through the real gateway on replayed answers, and the judge on the node a training job would find."""

from __future__ import annotations

import time

import pytest
from fixtures.nodes import node

from gpudoctor.checks import load
from gpudoctor.facts.fake import ReplayNvml
from gpudoctor.facts.identity import with_gpus
from gpudoctor.facts.nvml import Gateway, Sampler
from gpudoctor.model import Status
from gpudoctor.workloads.launch import launch

BRAKE = 0x80 | 0x4  # hw_power_brake_slowdown and sw_power_cap, as NVML sets the bits


def watched_calls(gpu: int, mhz: int, watts_mw: int, reasons: int) -> dict:
    return {
        f"nvmlDeviceGetClockInfo(gpu{gpu},1)": mhz,
        f"nvmlDeviceGetPowerUsage(gpu{gpu})": watts_mw,
        f"nvmlDeviceGetCurrentClocksEventReasons(gpu{gpu})": reasons,
    }


def test_a_sample_reads_clock_power_temperature_and_why_clocks_fell() -> None:
    calls = node(calls=watched_calls(3, 1410, 699_000, BRAKE))["nvml_calls"]
    sample = Gateway(ReplayNvml(calls)).sample(3)
    assert sample == {
        "gpu": 3,
        "sm_mhz": 1410,
        "power_w": 699.0,
        "temperature_c": 41,
        "reasons": ["sw_power_cap", "hw_power_brake_slowdown"],
    }


def test_the_sampler_reads_every_gpu_until_the_load_ends() -> None:
    calls = node(calls={**watched_calls(0, 1980, 500_000, 0x4), **watched_calls(1, 1980, 510_000, 0x4)})["nvml_calls"]
    with Sampler([0, 1], 0.01, lambda: ReplayNvml(calls)) as sampler:
        time.sleep(0.2)
    per_gpu = {g: [s for s in sampler.samples if s["gpu"] == g] for g in (0, 1)}
    assert all(len(seen) >= 3 for seen in per_gpu.values()) and sampler.error is None
    count = len(sampler.samples)
    time.sleep(0.05)
    assert len(sampler.samples) == count  # stopped with the block


def test_nvml_that_cannot_start_leaves_the_load_judged_on_its_figures() -> None:
    with Sampler([0], 0.01, lambda: ReplayNvml({"nvmlInit()": {"nvml_error": 9}})) as sampler:
        pass
    assert sampler.samples == [] and sampler.error.startswith("NVML could not be read during the load")


def test_the_worker_loads_every_rank_at_once_and_verifies(no_leftovers) -> None:
    """Two CPU ranks (gloo) run the same loop a GPU node does: calibrated windows of bf16 GEMMs for the time
    asked, started together, the last product checked against float64."""
    outcome = launch("gpudoctor.checks.ranks.load:worker", 2, "gloo", {"n": 128, "window_s": 0.05, "seconds": 1.0}, 120)
    assert outcome.status == "pass", outcome.message
    for rank in outcome.data:
        assert len(rank["tflops"]) >= 3 and all(t > 0 for t in rank["tflops"]) and rank["burst_tflops"] > 0
        assert rank["ended"] - rank["started"] >= 1.0 and rank["rel_error"] < 2e-2


def loaded(figures: list[float], start: float = 1000.0) -> list[tuple[dict, dict]]:
    """Eight ranks' windows (a 2 % wobble) over 20 s of load, each with its GPU of an 8-GPU H100 node."""
    facts = node()
    ranks = [
        {"rank": r, "cuda_index": r, "started": start, "ended": start + 20, "rel_error": 1e-3}
        | {"tflops": [f * (1 + 0.02 * (i % 3 - 1)) for i in range(40)]}
        for r, f in enumerate(figures)
    ]
    return with_gpus(ranks, facts["torch"]["devices"], facts["nvml"]["gpus"])


def samples_of(gpu: int, reasons: list[str], mhz: int = 1980, start: float = 1000.0) -> list[dict]:
    return [
        {"t": start + t, "gpu": gpu, "sm_mhz": mhz, "power_w": 690.0, "temperature_c": 70, "reasons": reasons}
        for t in range(1, 20)
    ]


def test_a_gpu_braked_under_load_is_named_with_its_figure_and_why() -> None:
    """GPU 3 of eight falls to 0.6x under the shared load, NVML showing the power brake: named, with the
    figure it reached, its clock and the reason; the others (at their power cap, as healthy GPUs run) pass."""
    figures = [720.0] * 8
    figures[3] = 432.0
    samples = [s for g in range(8) for s in samples_of(g, ["sw_power_cap"])]
    samples += samples_of(3, ["sw_power_cap", "hw_power_brake_slowdown"], mhz=1100)
    result = load.judge(loaded(figures), samples, 0.75)
    assert result.status == Status.FAIL and result.summary.startswith(
        "GPU 3: bf16 under load 432 TFLOP/s: 64 % of a healthy H100 SXM, sustained (676)"
    )
    bad = [r for r in result.rows if r.status != Status.PASS]
    assert [r.index for r in bad] == [3]
    assert "0.60x its peers' median; sm clock min 1100 MHz; clocks held down: hw_power_brake" in bad[0].summary
    assert bad[0].metrics[0].expected == 574.6  # 0.85 x 676, gpu-fryer's sustained H100 figure
    fine = next(r for r in result.rows if r.index == 0)
    assert fine.status == Status.PASS and "clock" not in fine.summary, "a healthy GPU's power cap is not news"
    assert {m.name: m.value for m in fine.metrics}["clocks_held_by"] == "sw_power_cap"


def test_a_brake_alone_fails_even_at_full_speed() -> None:
    """The hardware braking a GPU is a fault even when its figure has not fallen yet (a short load)."""
    samples = samples_of(5, ["hw_slowdown"])
    result = load.judge(loaded([620.0] * 8), samples, 0.75)
    assert [r.index for r in result.rows if r.status == Status.FAIL] == [5]


def test_samples_from_before_the_load_are_not_held_against_it() -> None:
    early = samples_of(2, ["hw_thermal_slowdown"], start=900.0)
    assert load.judge(loaded([720.0] * 8), early, 0.75).status == Status.PASS


def test_sustained_load_is_judged_against_a_sustained_figure_and_said_beside_its_own_burst() -> None:
    """What a healthy H100 at 700 W measured on 2026-11-26 (676.5-684.7 TFLOP/s, clocks held by the SW power
    cap) passed by 0.2-1.4 % against 0.85 x the burst 794.5: judged against gpu-fryer's sustained 676 it passes
    clearly, and each GPU's figure is shown as a share of its own burst figure of the first seconds."""
    ranks = loaded([684.7])
    ranks[0][0]["burst_tflops"] = 797.0
    result = load.judge(ranks, samples_of(0, ["sw_power_cap"]), 0.75)
    row = result.rows[0]
    assert result.status == Status.PASS
    assert row.summary == "bf16 under load 684.7 TFLOP/s: 101 % of a healthy H100 SXM, sustained (676)"
    judged = next(m for m in row.metrics if m.name == "bf16_under_load")
    assert (judged.reference, judged.expected) == (676.0, 574.6) and "gpu-fryer" in judged.reference_source
    ratio = next(m for m in row.metrics if m.name == "sustained_to_burst")
    assert ratio.value == 0.859


def test_a_model_without_a_published_sustained_figure_gets_its_burst_scaled_never_the_burst() -> None:
    from gpudoctor.judging import expect, references

    h200 = expect.sustained_expectation({"name": "NVIDIA H200"})
    burst = references.model_figure("matmul_bf16_tflops", {"model": "H200 SXM"})
    ratio, said = references.sustained_ratio("matmul_bf16_tflops_sustained")
    assert h200.value == pytest.approx(burst.value * ratio) and h200.value < burst.value
    assert "no published sustained measurement" in h200.source and "sustained/burst ratio of 4 models" in said
