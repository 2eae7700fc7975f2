"""The CUDA paths, on a real GPU. Skipped where torch sees none; docs/VALIDATION.md records where they ran."""

from __future__ import annotations

import json
import os

import pytest
import torch
from conftest import gpudoctor
from gpudoctor.checks import bandwidth, compute, memtest, p2p

from gpudoctor.launch import launch

pytestmark = pytest.mark.gpu


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
        "memory.test",
        "ddp.train",
    ):
        statuses = {c["status"] for c in by_id[check_id]}
        assert statuses.isdisjoint({"error", "timeout"}), by_id[check_id]
        assert statuses != {"skip"}, by_id[check_id]
    ddp = {c["aspect"]: c["status"] for c in by_id["ddp.train"]}
    for aspect in ("loss-falls", "params-identical", "gradient-matches", "finite"):
        assert ddp[aspect] == "pass"


def test_copy_measurements_are_verified_and_plausible() -> None:
    host = bandwidth.measure_host_device({"bytes": 64 * 2**20, "warmup": 2, "iters": 5})["gpus"]
    assert all(g["verified"] and 1 < g["h2d_gbps"] < 200 for g in host)
    device = bandwidth.measure_device_memory({"bytes": 2**30, "warmup": 2, "iters": 5})["gpus"]
    assert all(g["verified"] and 100 < g["gbps"] < 20000 for g in device)


def test_gemm_is_fast_and_correct() -> None:
    result = compute.measure({"n": 4096, "warmup": 2, "iters": 5})["gpus"][0]
    for precision in ("bf16", "tf32"):
        assert result[precision]["tflops"] > 10
        assert result[precision]["rel_error"] < compute.TOLERANCE[precision]


def test_memtest_on_a_slice_of_memory() -> None:
    result = memtest.measure({"share": 0.02, "walking_bits": 2, "seed": 1})["gpus"][0]
    assert result["words"] > 0 and sum(result["bad"].values()) == 0


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_peer_copies_are_verified() -> None:
    pairs = p2p.measure({"bytes": 64 * 2**20, "warmup": 2, "iters": 5})["pairs"]
    assert pairs and all(pair["verified"] for pair in pairs)


def test_nccl_all_reduce_with_two_ranks_sharing_one_gpu(monkeypatch) -> None:
    """NCCL 2.30+ lets two ranks share a GPU, which runs the real NCCL path on a one-GPU machine."""
    if tuple(torch.cuda.nccl.version()) < (2, 30, 0):
        pytest.skip("NCCL_MULTI_RANK_GPU_ENABLE needs NCCL 2.30 or newer")
    monkeypatch.setitem(os.environ, "NCCL_MULTI_RANK_GPU_ENABLE", "1")
    params = {"sizes": [2**20, 64 * 2**20], "warmup": 2, "iters": 5, "out_of_place": True}
    outcome = launch("gpudoctor.checks.allreduce:worker", 2, "nccl", params, 180)
    assert outcome.status == "ok", outcome.message
    assert all(row["wrong"] == 0 for rank in outcome.data for row in rank["rows"])
