"""Multi-GPU nodes as users run them: 8 GPUs, NVSwitch, MIG slices, CUDA_VISIBLE_DEVICES subsets, NCCL settings.

NVML's side comes from fixture recordings replayed through the real gateway (what NVML returns: codes, not
our reading of them); torch's side from torch facts and the torch.cuda stand-in (tests/helpers/cudastub.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from fixtures.nodes import H100, node
from helpers.common import ROOT, load_snapshot

from gpudoctor.facts.snapshot import upgrade
from gpudoctor.judging import copies, expect, references, routes
from gpudoctor.judging.hardware import gpu_model

PACKAGE = ROOT / "gpudoctor"


def rename(index_count: int, name: str, pci_ids: list[int]):
    """Every GPU's NVML name and PCI ids changed: a model the hardware table does not know."""
    from fixtures.nodes import bus_id, pci_info

    def change(calls: dict) -> dict:
        out = dict(calls)
        for i in range(index_count):
            out[f"nvmlDeviceGetName(gpu{i})"] = name
            out[f"nvmlDeviceGetPciInfo_v3(gpu{i})"] = pci_info(bus_id(i), pci_ids)
        return out

    return change


def test_nvlink_version_is_read_as_nvml_code_not_generation() -> None:
    """NVML answers NVML_NVLINK_VERSION_4_0 (6) on an H100's links: the facts say NVLink 4, and a model the
    table does not know is judged on NVLink 4 rates through NVSwitch, not on PCIe."""
    assert H100["nvlink_version"] == 6
    facts = node(calls=rename(8, "NVIDIA H100 Future", [0x9999_10DE, 0]))
    gpus = facts["nvml"]["gpus"]
    assert {link["version"] for link in gpus[0]["nvlinks"]} == {4}
    expected = routes.allreduce_expectation(gpus, facts["nvml"]["topology"])
    assert expected is not None and expected.source.startswith("NVLink 450 GB/s per GPU x the median"), expected
    copy = copies.p2p_copy_expectation(gpus[0], gpus[1], True)
    assert copy is not None and copy.source.startswith("NVLink x18"), copy


def test_a_saved_snapshot_holding_the_code_is_decoded_on_load() -> None:
    """A version 2 snapshot (before the fix) stored NVML's code as `version`: read today, it is the generation."""
    old = load_snapshot("h100-sxm-8x")
    old["schema_version"], old["nvml_calls"] = 2, {}
    for link in old["nvml"]["gpus"][0]["nvlinks"]:
        link["version"] = 6
    assert {link["version"] for link in upgrade(old)["nvml"]["gpus"][0]["nvlinks"]} == {4}


def imports_of(path: Path) -> set[str]:
    """Every gpudoctor module a file imports, at the top or inside a function."""
    found = set()
    for stmt in ast.walk(ast.parse(path.read_text())):
        if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.module.startswith("gpudoctor"):
            found.add(stmt.module)
            found.update(f"{stmt.module}.{alias.name}" for alias in stmt.names)
        elif isinstance(stmt, ast.Import):
            found.update(alias.name for alias in stmt.names if alias.name.startswith("gpudoctor"))
    return found


def test_the_package_has_no_import_circle() -> None:
    modules = {
        ".".join(("gpudoctor", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph = {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}
    graph = {name: {m for m in deps if not name.startswith(m + ".")} for name, deps in graph.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False

    circles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if reaches(b, a, set()))
    assert circles == []


# ---- A node is the devices torch can use (items 1, 2, 5) ----


def visible_only(indexes: list[int], env: str):
    from fixtures.nodes import torch_sees

    return {"torch": torch_sees(indexes), "system": lambda facts: {**facts, "env": {"CUDA_VISIBLE_DEVICES": env}}}


def live_context(facts: dict, check: str):
    """The check's context as a live run on this node would build it."""
    from gpudoctor.config import Config
    from gpudoctor.context import CheckContext, Options
    from gpudoctor.registry import discover

    spec = next(s for s in discover(entry_points=False).specs if s.id == check)
    return spec, CheckContext(facts, Options(), Config().settings(spec), spec)


def test_p2p_skips_when_torch_sees_one_gpu_of_two() -> None:
    """CUDA_VISIBLE_DEVICES=0 on a node NVML shows two GPUs: the prerequisite counts torch's devices."""
    from gpudoctor.engine.runner import unmet

    facts = node("a6000-2x", **visible_only([0], "0"))
    spec, ctx = live_context(facts, "p2p.access")
    assert unmet(spec, ctx) == "needs at least 2 GPUs torch can use, found 1; NVML sees 2 (CUDA_VISIBLE_DEVICES=0)"
    assert ctx.world_size == 1


def test_p2p_judge_with_no_pair_says_so() -> None:
    from gpudoctor.checks import p2p

    result = p2p.judge([], [], [], {}, 0.75)
    assert result.status.value == "skip" and "fewer than 2 GPUs" in result.summary


def test_allreduce_expectation_follows_the_gpus_torch_uses() -> None:
    """An H100 NVL node of four (bridged pairs 0-1, 2-3) run with CUDA_VISIBLE_DEVICES=0,1: the ring is one
    NVLink bridge, not the PCIe hop between the pairs that all four would cross."""
    facts = node("h100-nvl-4x", **visible_only([0, 1], "0,1"))
    _, ctx = live_context(facts, "allreduce.bandwidth")
    used = routes.allreduce_expectation(ctx.used_gpus, facts["nvml"]["topology"])
    every = routes.allreduce_expectation(ctx.gpus, facts["nvml"]["topology"])
    assert used is not None and used.source.startswith("NVLink"), used
    assert every is not None and every.source.startswith("PCIe"), every
    assert [g["index"] for g in ctx.used_gpus] == [0, 1]


def test_a_mig_node_is_one_slice_not_eight_gpus() -> None:
    """Eight H100s in MIG mode: CUDA gives the process one 1g.10gb slice. Workloads run one rank, p2p skips
    with the reason, and the slice is the GPU they are judged on."""
    from gpudoctor.engine.runner import unmet

    facts = node("h100-mig-8x")
    spec, ctx = live_context(facts, "p2p.access")
    assert (
        unmet(spec, ctx)
        == "needs at least 2 GPUs torch can use, found 1; NVML sees 8 (MIG: CUDA gives a process one slice)"
    )
    assert ctx.world_size == 1
    assert ctx.used_gpus[0]["mig_slice"] == {"profile": "1g.10gb", "memory_mib": 9984, "sms": 16}


PEAKS = (("bf16", 989), ("tf32", 494))


def test_a_mig_slice_is_judged_as_a_slice() -> None:
    """A 3g.40gb slice's figures against its share of the H100 (60 of 132 SMs, 40448 of 81559 MiB), never
    failed for being a fraction of the whole GPU."""
    from gpudoctor.checks import bandwidth, compute

    facts = node("h100-mig-1x")
    _, ctx = live_context(facts, "compute.gemm")
    slice_gpu = ctx.used_gpus[0]
    bf16 = expect.model_expectation(slice_gpu, "bf16_tflops")
    healthy = references.model_figure("matmul_bf16_tflops", gpu_model(slice_gpu))
    assert bf16 is not None and bf16.value == pytest.approx(healthy.value * 60 / 132)
    assert "MIG 3g.40gb slice: 60/132 SMs" in bf16.source
    gemm = compute.judge(
        ctx.with_gpus(
            [{"cuda_index": 0, **{p: {"tflops": peak * 0.7 * 60 / 132, "rel_error": 1e-3} for p, peak in PEAKS}}]
        ),
        0.75,
        {},
    )
    assert gemm.status.value == "pass", gemm.summary
    copy = bandwidth.judge(
        bandwidth.DEVICE_MEMORY, ctx.with_gpus([{"cuda_index": 0, "gbps": 1400.0, "verified": True}]), 0.75, {}
    )
    assert copy.status.value == "pass" and "40448/81559 MiB" in copy.rows[0].metrics[0].reference_source, copy.summary
    h2d = bandwidth.judge(
        bandwidth.HOST_DEVICE,
        ctx.with_gpus([{"cuda_index": 0, "h2d_gbps": 20.0, "d2h_gbps": 20.0, "verified": True}]),
        0.75,
        {},
    )
    assert h2d.status.value == "warn" and "MIG slice's share of the copy engines" in h2d.summary, h2d.summary


def test_a_mig_slice_of_a_gpu_without_an_sm_count_is_unjudged_not_failed() -> None:
    from gpudoctor.checks import compute

    gpu = {
        "name": "NVIDIA H20",
        "pci_device_id": 0,
        "mig_slice": {"profile": "1g.12gb", "sms": 10, "memory_mib": 12000},
    }
    row = compute.gemm_row(
        {p: {"tflops": 5.0, "rel_error": 1e-3} for p in ("bf16", "tf32")}, {**gpu, "index": 0}, 0.75, {}
    )
    assert row.status.value == "warn" and "MIG 1g.12gb slice: its share of the GPU is unknown" in row.summary


def test_b200_memory_bandwidth_is_the_hgx_table_figure() -> None:
    from gpudoctor.judging.hardware import gpu_model

    assert gpu_model({"name": "NVIDIA B200"})["hbm_gbps"] == 7700


def test_torch_facts_on_a_mig_node_count_the_slice_cuda_gives(monkeypatch) -> None:
    """torch counts 8 parents through NVML before CUDA starts; the facts hold the one slice CUDA enumerates,
    named by its profile with a MIG UUID, and no device that fails to answer."""
    from helpers.cudastub import mig_node

    from gpudoctor.facts import torchinfo

    cuda = mig_node()
    cuda.install(monkeypatch)
    facts = torchinfo._cuda(torch)
    assert facts["device_count"] == 1 and not any("error" in d for d in facts["devices"])
    device = facts["devices"][0]
    assert (device["mig_profile"], device["sms"], device["total_memory_mib"]) == ("1g.10gb", 16, 9984)
    assert device["uuid"].startswith("MIG-")


def test_workloads_loop_over_the_devices_cuda_gives(monkeypatch) -> None:
    """The memory test on a MIG node tests the one slice, never cuda:1..7 (which do not exist)."""
    from helpers.cudastub import mig_node

    from gpudoctor.checks.ranks import memtest

    cuda = mig_node()
    cuda.install(monkeypatch)
    monkeypatch.setattr(memtest, "test_device", lambda device, words, *rest: {"words": words, "bad": {}})
    monkeypatch.setattr(memtest, "progress", lambda *a: None)
    result = memtest.measure_memory({"share": 0.5, "walking_bits": False, "seed": 1})
    assert [g["cuda_index"] for g in result["gpus"]] == [0] and cuda.touched == [0]


# ---- Every copy verified (items 7, 8) ----


def test_a_copy_that_corrupts_once_in_ten_is_caught() -> None:
    """The destination is cleared before each copy and every copy checked: one bad copy of thirteen, not the
    last, is found (checking only the last copy passed it)."""
    from gpudoctor.workloads.measure import checked_repeats, checksum

    src, dst = torch.randn(1024), torch.empty(1024)
    calls = []

    def copy() -> None:
        calls.append(1)
        dst.copy_(src)
        if len(calls) == 5:
            dst[7] += 1.0

    want = checksum(src)
    run = checked_repeats(
        copy, torch.device("cpu"), 3, 10, clear=lambda: dst.fill_(float("nan")), verify=lambda: checksum(dst) == want
    )
    assert (len(run.times), run.checked, run.wrong) == (10, 13, 1) and checksum(dst) == want


def test_a_cleared_destination_shows_a_copy_that_never_happened() -> None:
    from gpudoctor.workloads.measure import checked_repeats, checksum

    src, dst = torch.randn(64), torch.empty(64)
    dst.copy_(src)
    want = checksum(src)
    run = checked_repeats(
        lambda: None, torch.device("cpu"), 1, 3, clear=dst.zero_, verify=lambda: checksum(dst) == want
    )
    assert run.wrong == 4


def test_wrong_copies_are_counted_in_the_verdicts() -> None:
    from gpudoctor.checks import bandwidth, p2p

    snap = load_snapshot("a6000-2x")
    gpus = snap["nvml"]["gpus"]
    pair = {"src": 0, "dst": 1, "access": True, "gbps": 40.0, "latency_us": 2.0, "verified": False}
    pair |= {"copies_checked": 26, "copies_wrong": 1}
    result = p2p.judge([pair], snap["torch"]["devices"], gpus, snap["nvml"]["topology"], 0.75)
    assert result.status.value == "fail" and "data of 1 of 26 copies differs" in result.rows[0].summary
    measured = {"cuda_index": 0, "h2d_gbps": 20.0, "d2h_gbps": 20.0, "verified": False}
    measured |= {"copies_checked": 26, "copies_wrong": 2, "numa_node": 1}
    row = bandwidth.host_device_row(measured, gpus[0], 0.75, {})
    assert row.status.value == "fail" and row.summary.endswith("differs in 2 of 26 copies")


def test_host_copies_run_from_the_gpus_numa_node() -> None:
    """Each device's NUMA node and its CPUs go to the workload (from the facts), and the row says which node
    the host memory was on."""
    from gpudoctor.checks import bandwidth

    facts = node("l40s-pcie-4x")
    _, ctx = live_context(facts, "bandwidth.host-device")
    numa = bandwidth.numa_of(ctx)
    assert numa["numa_nodes"] == {"0": 0, "1": 0, "2": 1, "3": 1}
    assert numa["numa_cpus"]["2"] == list(range(56, 112))
    gpu = ctx.used_gpus[2]
    row = bandwidth.host_device_row(
        {"cuda_index": 2, "h2d_gbps": 24.0, "d2h_gbps": 24.0, "verified": True, "numa_node": 1}, gpu, 0.75, {}
    )
    assert row.status.value == "pass" and "host memory on NUMA node 1" in row.summary


# ---- The transport NCCL will really use (item 4) ----


def ring(base: str, env: dict[str, str], calls=None):
    facts = node(base, calls=calls)
    return routes.allreduce_expectation(facts["nvml"]["gpus"], facts["nvml"]["topology"], env)


def test_nccl_p2p_disable_means_host_memory_not_nvlink() -> None:
    """NCCL_P2P_DISABLE=1 on an NVSwitch node: NCCL goes through host memory (SHM), so the expectation is the
    staged PCIe figure and says why; the remediation's `NCCL_P2P_DISABLE=1` re-run can now pass."""
    nvlink = ring("h100-sxm-8x", {})
    staged = ring("h100-sxm-8x", {"NCCL_P2P_DISABLE": "1"})
    assert nvlink is not None and nvlink.source.startswith("H100 SXM, 8 GPUs, Ring")
    assert staged is not None and "P2P off (NCCL_P2P_DISABLE=1): SHM" in staged.source
    assert staged.value < nvlink.value / 5
    assert ring("h100-sxm-8x", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}) is None


def test_nccl_p2p_level_is_judged_against_the_pcie_path() -> None:
    """L40S pairs behind one PCIe switch tree (NVML: MULTIPLE, NCCL's PXB): P2P at NCCL's default level,
    staged through host memory at NCCL_P2P_LEVEL=PIX (or 2)."""
    a, b = node("l40s-pcie-4x")["nvml"]["gpus"][:2]
    topology = node("l40s-pcie-4x")["nvml"]["topology"]
    assert routes.nccl_route(a, b, topology, {}).said == "P2P on (path PXB, NCCL's default level PXB)"
    for level in ("PIX", "2"):
        route = routes.nccl_route(a, b, topology, {"NCCL_P2P_LEVEL": level})
        assert route.kind == "SHM" and route.said.startswith("path PXB beyond NCCL_P2P_LEVEL="), route
    assert routes.nccl_route(a, b, topology, {"NCCL_P2P_LEVEL": "SYS"}).p2p


def test_an_unanswered_p2p_status_is_off_in_both_checks() -> None:
    """NVML that does not answer the P2P status: the all-reduce expectation assumes host memory (as the P2P
    check does), and says the status is unknown."""
    from fixtures.nodes import NA

    unanswered = {f"nvmlDeviceGetP2PStatus(gpu{a},gpu{b},0)": NA for a in range(4) for b in range(4) if a != b}
    facts = node("l40s-pcie-4x", calls=unanswered)
    a, b = facts["nvml"]["gpus"][:2]
    route = routes.nccl_route(a, b, facts["nvml"]["topology"], {})
    assert route.kind == "SHM" and route.said.startswith("P2P status unknown")


def test_cuda_13_3_needs_the_r610_driver() -> None:
    """CUDA 13.3 and 13.3 Update 1 need driver 610.43.02 (the 13.3 release notes' table); 13.4, whose exact
    minimum is not in the table, falls back to nothing more than the CUDA 13 family minimum."""
    from gpudoctor.judging.compat import toolkit_minimum

    assert toolkit_minimum("13.3") == toolkit_minimum("13.3.1") == "610.43.02"
    assert toolkit_minimum("13.4.1") is None


def test_a_copy_into_a_destination_the_cpu_never_writes_is_still_every_copy_verified() -> None:
    """D2H's pinned destination is filled from two sources in turn and never cleared by the CPU (whose dirty
    cache lines slowed the DMA over them): a copy that did nothing leaves the other pattern, one that corrupts
    is caught, and the CPU writes nothing into the destination but the copies."""
    from gpudoctor.workloads.measure import alternating_repeats

    sources, dst = [torch.randn(256), torch.randn(256)], torch.empty(256)
    done: list[int] = []

    def copy(n: int) -> None:
        done.append(n)
        if len(done) != 4:  # the fourth copy never happens
            dst.copy_(sources[n])
        if len(done) == 7:
            dst[3] += 1.0

    run = alternating_repeats(copy, torch.device("cpu"), 2, 8, verify=lambda n: torch.equal(dst, sources[n]))
    assert done == [0, 1, 0, 1, 0, 1, 0, 1, 0, 1] and (len(run.times), run.checked, run.wrong) == (8, 10, 2)
