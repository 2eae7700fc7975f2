"""Memory test, GEMM and copy measurements run for real on CPU tensors; their judges on fixture measurements
for NVLink, PCIe and no-P2P machines. The CUDA paths run in test_gpu.py where a GPU is present."""

from __future__ import annotations

import pytest
import torch
from helpers.common import load_snapshot, usable_gpus

from gpudoctor.checks import bandwidth, compute, memtest, p2p
from gpudoctor.checks.ranks import compute as compute_ranks
from gpudoctor.facts.identity import with_gpus
from gpudoctor.judging import copies, expect, references
from gpudoctor.workloads.launch import Fault, launch
from gpudoctor.workloads.measure import checksum, summary, time_repeats

RTX = usable_gpus(load_snapshot("rtx2080s-consumer-1x"))


def on(fixture: str, measured: list[dict]) -> list[tuple[dict, dict]]:
    """Measurements keyed by torch's cuda index, paired with the GPUs of a fixture node as a check pairs them."""
    snap = load_snapshot(fixture)
    return with_gpus(measured, snap["torch"]["devices"], usable_gpus(snap))


MEMTEST = {"words": 3 * 2**20 + 17, "walking_bits": 4, "seed": 7}


def test_timing_takes_the_median_after_warmup() -> None:
    calls = []
    times = time_repeats(lambda: calls.append(1), torch.device("cpu"), warmup=3, iters=7)
    assert len(calls) == 10 and len(times) == 7
    stats = summary([3.0, 1.0, 2.0])
    assert stats == {"median_s": 2.0, "min_s": 1.0, "max_s": 3.0}


def test_checksum_sees_swapped_words() -> None:
    data = torch.randn(1000)
    swapped = data.clone()
    swapped[[10, 20]] = swapped[[20, 10]]
    assert checksum(data) == checksum(data.clone())
    assert checksum(data)[0] == checksum(swapped)[0] and checksum(data) != checksum(swapped)


def test_memtest_patterns_pass_on_good_memory(no_leftovers) -> None:
    outcome = launch("gpudoctor.checks.ranks.memtest:worker", 1, "gloo", MEMTEST, 120)
    assert outcome.status == "pass", outcome.message
    data = outcome.data[0]
    assert data["words"] == MEMTEST["words"]
    assert set(data["bad"]) == {
        "walking bit 0",
        "walking bit 8",
        "walking bit 16",
        "walking bit 24",
        "seeded random",
        "address in address",
    }
    assert sum(data["bad"].values()) == 0
    assert memtest.judge(on("h100-sxm-8x", [{"cuda_index": 0, **data}])).status.value == "pass"


def test_memtest_counts_a_flipped_bit(no_leftovers) -> None:
    outcome = launch("gpudoctor.checks.ranks.memtest:worker", 1, "gloo", MEMTEST, 120, Fault(0, "corrupt", "verify"))
    data = outcome.data[0]
    assert data["bad"]["address in address"] == 1 and sum(data["bad"].values()) == 1
    result = memtest.judge(on("h100-sxm-8x", [{"cuda_index": 3, **data}]))
    assert result.status.value == "fail"
    assert result.summary.startswith("GPU 3: 1 bad words in 12 MiB (address in address: 1)")
    assert "sudo nvidia-smi -i 3 -r" in result.remediation.commands


@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_gemm_measures_and_verifies_on_cpu(precision: str) -> None:
    figures = compute_ranks.gemm_on(torch.device("cpu"), 128, precision, warmup=1, iters=3)
    assert 1e-6 < figures["tflops"] < 10, "two CPU cores reach neither zero nor ten TFLOP/s"
    assert 0 < figures["rel_error"] < compute.TOLERANCE[precision], "checked against float64, and not trivially"


def gemm_row(index: int, bf16: float, tf32: float, error: float = 1e-3) -> dict:
    return {
        "cuda_index": index,
        "bf16": {"tflops": bf16, "rel_error": error},
        "tf32": {"tflops": tf32, "rel_error": error},
    }


def test_gemm_judged_against_the_published_healthy_figure() -> None:
    """H100 SXM bf16: the best achievable matmul published for it (794.5 TFLOP/s, stas00/ml-engineering); pass
    at 0.85 of it, warn down to 0.75, fail below."""
    rows = [gemm_row(0, 790, 400), gemm_row(1, 300, 400), gemm_row(2, 640, 400)]
    result = compute.judge(on("h100-sxm-8x", rows), 0.75, {})
    assert [r.status.value for r in result.rows] == ["pass", "fail", "warn"]
    bf16 = next(m for m in result.rows[1].metrics if m.name == "bf16")
    assert (bf16.reference, bf16.expected, bf16.comparison) == (794.5, round(794.5 * 0.85, 4), ">=")
    assert "stas00/ml-engineering" in bf16.reference_source and "H100 SXM" in bf16.reference_source
    assert result.rows[1].summary.startswith("bf16 300 TFLOP/s: 38 % of a healthy H100 SXM (794.5); tf32 400")
    assert result.summary == "GPU 1: bf16 300 TFLOP/s: 38 % of a healthy H100 SXM (794.5); and 1 more"


def test_gemm_wrong_results_fail_and_unknown_models_warn() -> None:
    wrong = compute.judge(on("h100-sxm-8x", [gemm_row(0, 790, 400, error=float("nan"))]), 0.75, {})
    assert wrong.status.value == "fail" and "WRONG RESULTS" in wrong.summary
    future_gpu = {"index": 0, "name": "Some Future GPU"}
    unknown = compute.judge([(gemm_row(0, 50, 20), future_gpu)], 0.75, {})
    assert unknown.status.value == "warn"
    wrong_on_unknown = compute.judge([(gemm_row(0, 50, 20, error=0.5), future_gpu)], 0.75, {})
    assert wrong_on_unknown.status.value == "fail" and "WRONG RESULTS" in wrong_on_unknown.summary


def test_host_device_judged_against_the_pcie_link() -> None:
    rows = [
        {"cuda_index": 0, "h2d_gbps": 25.0, "d2h_gbps": 26.0, "verified": True},
        {"cuda_index": 1, "h2d_gbps": 11.0, "d2h_gbps": 26.0, "verified": True},
        {"cuda_index": 2, "h2d_gbps": 25.0, "d2h_gbps": 26.0, "verified": False},
    ]
    result = bandwidth.judge(bandwidth.HOST_DEVICE, on("l40s-pcie-4x", rows), 0.75, {})
    assert [r.status.value for r in result.rows] == ["pass", "fail", "fail"]
    h2d = result.rows[1].metrics[0]
    ratio = references.theory_ratio("h2d_gbps", copies._pcie_theory)
    assert h2d.reference == pytest.approx(31.5 * ratio[0], abs=1e-3) and h2d.expected == round(h2d.reference * 0.85, 4)
    assert result.rows[1].summary.startswith(f"h2d 11 GB/s: 43 % of a healthy PCIe Gen4 x16 link ({h2d.reference:.4g})")
    assert "PCIe Gen4 x16 (31.5 GB/s) x the median of" in h2d.reference_source
    assert "differs" in result.rows[2].summary


def test_host_device_on_an_idle_downshifted_link_uses_its_capability() -> None:
    """The RTX 2080 SUPER capture idles at Gen1; expectation comes from its Gen3 capability."""
    ratio = references.theory_ratio("h2d_gbps", copies._pcie_theory)[0]
    assert copies.pcie_copy_expectation(RTX[0]).value == pytest.approx(15.75 * ratio)


def test_device_memory_against_the_spec_sheet() -> None:
    rows = [{"cuda_index": 0, "gbps": 3000.0, "verified": True}, {"cuda_index": 1, "gbps": 1500.0, "verified": True}]
    result = bandwidth.judge(bandwidth.DEVICE_MEMORY, on("h100-sxm-8x", rows), 0.75, {})
    assert [r.status.value for r in result.rows] == ["pass", "fail"]
    baseline = {"copy": expect.Expectation(1600.0, "baseline b.json", floor=0.9)}
    assert bandwidth.judge(bandwidth.DEVICE_MEMORY, on("h100-sxm-8x", rows[1:]), 0.75, baseline).status.value == "pass"


def pair(src: int, dst: int, gbps: float, access: bool = True, verified: bool = True) -> dict:
    return {"src": src, "dst": dst, "access": access, "gbps": gbps, "latency_us": 2.0, "verified": verified}


def judge_p2p(fixture: str, pairs: list[dict], p2p_read: list[list] | None = None):
    snap = load_snapshot(fixture)
    topology = snap["nvml"]["topology"]
    if p2p_read is not None:
        topology = {"indexes": [0, 1], "p2p_read": p2p_read}
    return p2p.judge(pairs, snap["torch"]["devices"], usable_gpus(snap), topology, 0.75)


def test_p2p_nvlink_pairs_and_corruption() -> None:
    good = judge_p2p("h100-sxm-8x", [pair(0, 1, 380.0), pair(1, 0, 385.0)])
    assert good.status.value == "pass" and "slowest 380.0 GB/s" in good.summary
    slow = judge_p2p("h100-sxm-8x", [pair(0, 1, 40.0)])
    assert slow.status.value == "fail" and "11 % of a healthy H100 SXM over NVLink (380)" in slow.rows[0].summary
    assert "H100 SXM, 8 GPUs, nvlink" in slow.rows[0].metrics[0].reference_source, "the citation is in the metric"
    corrupt = judge_p2p("h100-sxm-8x", [pair(0, 1, 380.0, verified=False)])
    assert corrupt.status.value == "fail" and "iommu=pt" in corrupt.remediation.commands[-1]


def test_p2p_reported_by_nvml_but_not_enabled_fails() -> None:
    result = judge_p2p("l40s-pcie-4x", [pair(0, 1, 20.0, access=False)], [[None, 0], [0, None]])
    assert result.status.value == "fail" and "NVML reports P2P but CUDA cannot enable it" in result.summary


def test_p2p_without_peer_access_is_judged_as_staged_copies() -> None:
    result = judge_p2p("l40s-pcie-4x", [pair(0, 1, 11.0, access=False)], [[None, 2], [2, None]])
    assert result.status.value == "pass"


def test_gemm_above_the_datasheet_peak_is_a_measurement_error_not_a_pass() -> None:
    """Events recorded on another GPU's idle stream time nothing and give absurd figures: never a pass."""
    result = compute.judge(on("h100-sxm-8x", [gemm_row(0, 790, 400), gemm_row(1, 9000, 4000)]), 0.75, {})
    assert [r.status.value for r in result.rows] == ["pass", "fail"]
    assert result.rows[1].summary.startswith("bf16 9000 TFLOP/s: 9.1x the hardware's peak: a measurement error (989)")
    copy = bandwidth.judge(
        bandwidth.DEVICE_MEMORY, on("h100-sxm-8x", [{"cuda_index": 0, "gbps": 9000.0, "verified": True}]), 0.75, {}
    )
    assert copy.status.value == "fail" and "measurement error" in copy.summary
    link = bandwidth.judge(
        bandwidth.HOST_DEVICE,
        on("l40s-pcie-4x", [{"cuda_index": 0, "h2d_gbps": 60.0, "d2h_gbps": 26.0, "verified": True}]),
        0.75,
        {},
    )
    assert link.status.value == "fail" and "measurement error" in link.summary


class FakeCuda:
    """Just enough of torch.cuda to see which device is current and which stream each event is recorded on."""

    def __init__(self) -> None:
        self.current = 0
        self.ran_on: list[int] = []
        self.recorded_on: list[int] = []
        fake = self

        class Device:
            def __init__(self, device) -> None:
                self.index = device.index

            def __enter__(self) -> None:
                self.saved, fake.current = fake.current, self.index

            def __exit__(self, *exc) -> None:
                fake.current = self.saved

        class Event:
            def __init__(self, enable_timing: bool) -> None:
                self.at = len(fake.recorded_on)

            def record(self, stream=None) -> None:
                fake.recorded_on.append(stream if stream is not None else fake.current)

            def elapsed_time(self, end) -> float:
                return 1.0

        self.Device, self.Event = Device, Event

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "device", self.Device)
        monkeypatch.setattr(torch.cuda, "Event", self.Event)
        monkeypatch.setattr(
            torch.cuda, "current_stream", lambda device=None: self.current if device is None else device.index
        )
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)


def test_every_timed_region_runs_with_its_own_gpu_current(monkeypatch) -> None:
    """On GPU 3, the timed calls run with GPU 3 current and every event is recorded on GPU 3's stream."""
    cuda = FakeCuda()
    cuda.install(monkeypatch)
    times = time_repeats(lambda: cuda.ran_on.append(cuda.current), torch.device("cuda", 3), warmup=2, iters=4)
    assert times == [0.001] * 4
    assert cuda.ran_on == [3] * 6
    assert cuda.recorded_on == [3] * 8
    assert cuda.current == 0


def test_measurements_are_reported_against_the_physical_gpu() -> None:
    """CUDA_VISIBLE_DEVICES=4,6 (or FASTEST_FIRST on a mixed node): cuda:0 is NVML's GPU 4; rows, metrics and
    fixes name GPU 4 and GPU 6, never 0 and 1."""
    snap = load_snapshot("h100-sxm-8x")
    devices = [{**snap["torch"]["devices"][nvml], "index": cuda} for cuda, nvml in enumerate((4, 6))]
    gpus = usable_gpus(snap)
    measured = [gemm_row(0, 790, 400), gemm_row(1, 300, 400)]
    result = compute.judge(with_gpus(measured, devices, gpus), 0.75, {})
    assert [r.index for r in result.rows] == [4, 6]
    assert result.summary.startswith("GPU 6: bf16 300")
    assert "nvidia-smi -q -d PERFORMANCE,CLOCK,POWER -i 6" in result.remediation.commands
    assert result.rows[0].index == 4 and [m.name for m in result.rows[0].metrics] == ["bf16", "tf32"]
    pairs = p2p.judge([pair(0, 1, 20.0, verified=False)], devices, gpus, snap["nvml"]["topology"], 0.75)
    assert pairs.rows[0].index == 4 and pairs.rows[0].summary == "-> GPU 6: copied data differs from the source"


def test_a_device_nvml_does_not_know_is_named_as_torch_sees_it() -> None:
    devices = [{"index": 0, "pci_bus_id": "00000000:99:00.0", "uuid": "GPU-unknown"}]
    result = memtest.judge(with_gpus([{"cuda_index": 0, "words": 2**20, "bad": {"x": 3}}], devices, []))
    assert result.summary.startswith("cuda:0: 3 bad words") and result.rows[0].index is None
    assert result.remediation.commands[0] == "sudo nvidia-smi -i 00000000:99:00.0 -r"
