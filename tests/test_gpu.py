"""The CUDA paths, on a real GPU. Skipped where torch sees none; docs/VALIDATION.md records where they ran."""

from __future__ import annotations

import json
import os

import pytest
import torch
from helpers.common import gpudoctor

from gpudoctor.checks.ranks import bandwidth, compute, memtest, p2p
from gpudoctor.judging import expect
from gpudoctor.judging.gemm import TOLERANCE
from gpudoctor.workloads.launch import Fault, launch

pytestmark = pytest.mark.gpu  # one test at a time on the GPU: timings


def test_standard_level_runs_every_workload_on_the_gpus() -> None:
    proc = gpudoctor("check", "--level", "standard", "--json", timeout=1200)
    document = json.loads(proc.stdout)
    by_id = {}
    for check in document["checks"]:
        by_id.setdefault(check["check_id"], []).append(check)
    for check_id in (
        "allreduce.bandwidth",
        "bandwidth.host-device",
        "bandwidth.device-memory",
        "compute.gemm",
        "compute.sdc",
        "memory.test",
        "ddp.train",
        "load.concurrent",
    ):
        statuses = {c["status"] for c in by_id[check_id]}
        assert statuses.isdisjoint({"error", "timeout"}), by_id[check_id]
        assert statuses != {"skip"}, by_id[check_id]
    ddp = {c["aspect"]: c["status"] for c in by_id["ddp.train"]}
    for aspect in ("loss-falls", "params-identical", "gradient-matches", "finite"):
        assert ddp[aspect] == "pass"
    assert ddp["throughput"] in ("pass", "warn"), by_id["ddp.train"]  # settled, or said to be unstable


def test_every_gpu_loaded_at_once_is_watched_through_nvml() -> None:
    """The concurrent load on every GPU with NVML read throughout: each GPU's row carries its settled figure
    and the clock, power and temperature NVML saw."""
    proc = gpudoctor("check", "--level", "standard", "--only", "load.concurrent", "--json", timeout=600)
    (check,) = json.loads(proc.stdout)["checks"]
    assert check["status"] in ("pass", "warn", "fail") and len(check["rows"]) == torch.cuda.device_count()
    for row in check["rows"]:
        names = {m["name"] for m in row["metrics"]}
        assert {"bf16_under_load", "sm_clock_min", "power_max", "temperature_max"} <= names, row


def test_copy_measurements_are_verified_and_plausible() -> None:
    host = bandwidth.measure_host_device({"bytes": 64 * 2**20, "warmup": 2, "iters": 5})["gpus"]
    assert all(g["verified"] and 1 < g["h2d_gbps"] < 200 for g in host)
    device = bandwidth.measure_device_memory({"bytes": 2**30, "warmup": 2, "iters": 5})["gpus"]
    assert all(g["verified"] and 100 < g["gbps"] < 20000 for g in device)


def test_gemm_on_every_gpu_is_correct_and_below_its_datasheet_peak() -> None:
    """Each GPU timed on its own stream: a figure above the datasheet peak would mean the events timed an idle
    stream (another GPU's), as they did before every timed region ran with its own device current."""
    results = compute.measure_gemm({"n": 4096, "warmup": 2, "iters": 5})["gpus"]
    assert [r["cuda_index"] for r in results] == list(range(torch.cuda.device_count()))
    for result in results:
        gpu = {"name": torch.cuda.get_device_name(result["cuda_index"])}
        for precision, key in (("bf16", "bf16_tflops"), ("tf32", "tf32_tflops")):
            assert result[precision]["tflops"] > 10
            assert result[precision]["rel_error"] < TOLERANCE[precision]
            peak = expect.model_peak(gpu, key)
            if peak is not None:
                assert not expect.measurement_error(result[precision]["tflops"], peak), (gpu, result)


def test_memtest_on_a_slice_of_every_gpu() -> None:
    results = memtest.measure_memory({"share": 0.02, "walking_bits": 2, "seed": 1})["gpus"]
    assert len(results) == torch.cuda.device_count()
    assert all(r["words"] > 0 and sum(r["bad"].values()) == 0 for r in results)


def test_rows_name_the_physical_gpu_they_measured() -> None:
    """Every per-GPU row of a workload carries the NVML index, UUID and bus id of the GPU torch measured."""
    document = json.loads(gpudoctor("check", "--only", "bandwidth.device-memory", "--json", timeout=600).stdout)
    rows = document["checks"][0]["rows"]
    torch_bus_ids = {
        f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
        for p in map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
    }
    assert {r["pci_bus_id"] for r in rows} == torch_bus_ids
    assert all(r["index"] is not None and r["uuid"] for r in rows)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_peer_copies_are_verified() -> None:
    pairs = p2p.measure_pairs({"bytes": 64 * 2**20, "warmup": 2, "iters": 5})["pairs"]
    assert pairs and all(pair["verified"] for pair in pairs)


def test_nccl_all_reduce_with_two_ranks_sharing_one_gpu(monkeypatch) -> None:
    """NCCL 2.30+ lets two ranks share a GPU, which runs the real NCCL path on a one-GPU machine."""
    if tuple(torch.cuda.nccl.version()) < (2, 30, 0):
        pytest.skip("NCCL_MULTI_RANK_GPU_ENABLE needs NCCL 2.30 or newer")
    monkeypatch.setitem(os.environ, "NCCL_MULTI_RANK_GPU_ENABLE", "1")
    params = {"sizes": [2**20, 64 * 2**20], "warmup": 2, "iters": 5, "out_of_place": True}
    outcome = launch("gpudoctor.checks.ranks.allreduce:worker", 2, "nccl", params, 180)
    assert outcome.status == "pass", outcome.message
    assert all(row["wrong"] == 0 for rank in outcome.data for row in rank["rows"])


def test_a_hung_rank_under_nccl_is_named_not_the_rank_the_watchdog_aborted(monkeypatch) -> None:
    """NCCL's watchdog aborts the waiting rank with SIGABRT and records nothing: still a timeout naming rank 1."""
    if tuple(torch.cuda.nccl.version()) < (2, 30, 0) and torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs, or NCCL >= 2.30 to put two ranks on one")
    monkeypatch.setitem(os.environ, "NCCL_MULTI_RANK_GPU_ENABLE", "1")
    params = {"sizes": [2**20], "warmup": 2, "iters": 5, "out_of_place": False}
    outcome = launch("gpudoctor.checks.ranks.allreduce:worker", 2, "nccl", params, 90, Fault(1, "hang", "all_reduce"))
    assert outcome.status == "timeout", outcome.message
    assert outcome.message.startswith("rank 1 (in 'all_reduce 1024 KiB in-place') never arrived")
