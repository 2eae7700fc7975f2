"""Memory test, GEMM and copy measurements run for real on CPU tensors; their judges on fixture measurements
for NVLink, PCIe and no-P2P machines. The CUDA paths run in test_gpu.py where a GPU is present."""

from __future__ import annotations

import pytest
import torch
from conftest import load_snapshot
from gpudoctor.checks import bandwidth, compute, memtest, p2p

from gpudoctor import expect
from gpudoctor.launch import Fault, launch
from gpudoctor.measure import checksum, summary, time_repeats
from gpudoctor.runner import live_gpus

H100 = live_gpus(load_snapshot("h100-sxm-8x"))
L40S = live_gpus(load_snapshot("l40s-pcie-4x"))
RTX = live_gpus(load_snapshot("rtx2080s-consumer-1x"))
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
    outcome = launch("gpudoctor.checks.memtest:worker", 1, "gloo", MEMTEST, 120)
    assert outcome.status == "ok", outcome.message
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
    assert memtest.judge([{"index": 0, **data}], H100[:1]).status.value == "pass"


def test_memtest_counts_a_flipped_bit(no_leftovers) -> None:
    outcome = launch("gpudoctor.checks.memtest:worker", 1, "gloo", MEMTEST, 120, Fault(0, "corrupt", "verify"))
    data = outcome.data[0]
    assert data["bad"]["address in address"] == 1 and sum(data["bad"].values()) == 1
    result = memtest.judge([{"index": 3, **data}], H100)
    assert result.status.value == "fail"
    assert result.summary.startswith("GPU 3: 1 bad words in 12 MiB (address in address: 1)")
    assert "sudo nvidia-smi -i 3 -r" in result.remediation.commands


@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_gemm_measures_and_verifies_on_cpu(precision: str) -> None:
    figures = compute.gemm_on(torch.device("cpu"), 128, precision, warmup=1, iters=3)
    assert figures["tflops"] > 0
    assert figures["rel_error"] < compute.TOLERANCE[precision]


def gemm_row(index: int, bf16: float, tf32: float, error: float = 1e-3) -> dict:
    return {"index": index, "bf16": {"tflops": bf16, "rel_error": error}, "tf32": {"tflops": tf32, "rel_error": error}}


def test_gemm_judged_against_the_datasheet() -> None:
    result = compute.judge([gemm_row(0, 790, 400), gemm_row(1, 300, 400)], H100, 0.75, {})
    assert result.status.value == "fail"
    assert result.rows[0].status.value == "pass"
    assert "bf16 300 (expected >= 519.2)" in result.rows[1].summary
    bf16 = next(m for m in result.metrics if m.name == "GPU 1 bf16")
    assert bf16.expected_source == "0.75 x 692.3 TFLOP/s, H100 SXM datasheet 989 x 0.7"


def test_gemm_wrong_results_fail_and_unknown_models_warn() -> None:
    wrong = compute.judge([gemm_row(0, 790, 400, error=float("nan"))], H100, 0.75, {})
    assert wrong.status.value == "fail" and "WRONG RESULTS" in wrong.summary
    future_gpu = [{"index": 0, "name": "Some Future GPU"}]
    unknown = compute.judge([gemm_row(0, 50, 20)], future_gpu, 0.75, {})
    assert unknown.status.value == "warn"
    wrong_on_unknown = compute.judge([gemm_row(0, 50, 20, error=0.5)], future_gpu, 0.75, {})
    assert wrong_on_unknown.status.value == "fail" and "WRONG RESULTS" in wrong_on_unknown.summary


def test_host_device_judged_against_the_pcie_link() -> None:
    rows = [
        {"index": 0, "h2d_gbps": 25.0, "d2h_gbps": 26.0, "verified": True},
        {"index": 1, "h2d_gbps": 11.0, "d2h_gbps": 26.0, "verified": True},
        {"index": 2, "h2d_gbps": 25.0, "d2h_gbps": 26.0, "verified": False},
    ]
    result = bandwidth.judge_host_device(rows, L40S, 0.75, {})
    assert [r.status.value for r in result.rows] == ["pass", "fail", "fail"]
    assert "expected >= 18.9 (0.75 x 25.2 GB/s, PCIe Gen4 x16 (31.5 GB/s) x 0.8)" in result.rows[1].summary
    assert "differs" in result.rows[2].summary


def test_host_device_on_an_idle_downshifted_link_uses_its_capability() -> None:
    """The RTX 2080 SUPER capture idles at Gen1; expectation comes from its Gen3 capability."""
    assert expect.pcie_copy_expectation(RTX[0]).value == pytest.approx(15.75 * 0.8)


def test_device_memory_against_the_spec_sheet() -> None:
    rows = [{"index": 0, "gbps": 3000.0, "verified": True}, {"index": 1, "gbps": 1500.0, "verified": True}]
    result = bandwidth.judge_device_memory(rows, H100, 0.75, {})
    assert [r.status.value for r in result.rows] == ["pass", "fail"]
    baseline = {"copy": expect.Expectation(1600.0, "baseline b.json", floor=0.9)}
    assert bandwidth.judge_device_memory(rows[1:], H100, 0.75, baseline).status.value == "pass"


def pair(src: int, dst: int, gbps: float, access: bool = True, verified: bool = True) -> dict:
    return {"src": src, "dst": dst, "access": access, "gbps": gbps, "latency_us": 2.0, "verified": verified}


def test_p2p_nvlink_pairs_and_corruption() -> None:
    p2p_matrix = load_snapshot("h100-sxm-8x")["nvml"]["topology"]["p2p_read"]
    good = p2p.judge([pair(0, 1, 380.0), pair(1, 0, 385.0)], H100, p2p_matrix, 0.75)
    assert good.status.value == "pass" and "slowest 380.0 GB/s" in good.summary
    slow = p2p.judge([pair(0, 1, 40.0)], H100, p2p_matrix, 0.75)
    assert slow.status.value == "fail" and "NVLink x18" in slow.rows[0].summary
    corrupt = p2p.judge([pair(0, 1, 380.0, verified=False)], H100, p2p_matrix, 0.75)
    assert corrupt.status.value == "fail" and "iommu=pt" in corrupt.remediation.commands[-1]


def test_p2p_reported_by_nvml_but_not_enabled_fails() -> None:
    matrix = [[None, 0], [0, None]]
    result = p2p.judge([pair(0, 1, 20.0, access=False)], L40S, matrix, 0.75)
    assert result.status.value == "fail" and "NVML reports P2P but CUDA cannot enable it" in result.summary


def test_p2p_without_peer_access_is_judged_as_staged_copies() -> None:
    matrix = [[None, 2], [2, None]]
    result = p2p.judge([pair(0, 1, 11.0, access=False)], L40S, matrix, 0.75)
    assert result.status.value == "pass"
