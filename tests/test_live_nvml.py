"""The live NVML backend through the real pynvml and ctypes, against a fake libnvidia-ml.so.1 built from C
(tests/fakenvml) that serves each fixture node's recorded calls. The replaying fake skips pynvml's ctypes
layer; this does not: structs go to C by pointer, process lists come back as pynvml's own objects, errors
are the codes a driver returns, and symbols an old driver lacks are missing from the library."""

from __future__ import annotations

import copy
import json
import zlib
from pathlib import Path
from typing import Any

import fakenvml
import pytest
from fixtures.nodes import hide, lost_in_topology, node, not_supported_everywhere, torch_sees
from helpers.common import SNAPSHOTS, judge, load_snapshot
from helpers.occupancy import with_occupancy
from test_node_checks import FAULTS

from gpudoctor.facts.nvml import ERROR_GPU_IS_LOST

ARGUMENT_VERSION_MISMATCH = 25  # nvml.h NVML_ERROR_ARGUMENT_VERSION_MISMATCH
HIDDEN_BY_CGROUP = node(
    calls=hide(range(2, 8)), system={"env": {"CUDA_VISIBLE_DEVICES": "0,1"}}, torch=torch_sees([0, 1])
)
NODES = {
    **{p.stem: load_snapshot(p.stem) for p in SNAPSHOTS.glob("*.json")},
    **{name: fault[0] for name, fault in FAULTS.items()},
    "gpus-hidden-by-cgroup": HIDDEN_BY_CGROUP,
    "gpu-lost-in-topology": node(calls=lost_in_topology(2)),
    "notsupported-gpu": node(calls=not_supported_everywhere(2)),
    "h100-another-process-computing": with_occupancy(load_snapshot("h100-sxm-8x"), "computing"),
    "h100-another-process-holding": with_occupancy(load_snapshot("h100-sxm-8x"), "holding"),
}


def gather_all(folder: Path, recordings: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each recording gathered live through a library built with exactly the symbols its driver has."""
    by_library: dict[tuple[str, ...], list[str]] = {}
    for name, recording in recordings.items():
        by_library.setdefault(tuple(fakenvml.missing_symbols(recording)), []).append(name)
    answers = {}
    for missing, names in by_library.items():
        library = fakenvml.build(folder / f"lib{zlib.crc32(','.join(missing).encode())}", list(missing))
        data = [fakenvml.write_data(recordings[n], folder / f"{n}.calls") for n in names]
        answers.update(zip(names, fakenvml.gather(library, data), strict=True))
    return answers


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> dict[str, dict[str, Any]]:
    recordings = {name: snapshot["nvml_calls"] for name, snapshot in NODES.items()}
    return gather_all(tmp_path_factory.mktemp("fakenvml"), recordings)


@pytest.mark.parametrize("name", sorted(NODES))
def test_live_gather_through_pynvml_equals_the_replay(live, name: str) -> None:
    """Every fixture node, gathered through the real ctypes layer, gives exactly the facts its replay gives."""
    answer = live[name]
    assert answer["facts"] == NODES[name]["nvml"]
    json.dumps(answer["recording"])  # what a snapshot writes


def test_fabric_struct_is_filled_through_a_pointer_and_its_state_byte_masked(live) -> None:
    """NVML writes the whole struct, padding included: pynvml reads the one-byte state as four bytes."""
    recorded = live["h100-sxm-8x"]["recording"]["nvmlDeviceGetGpuFabricInfoV(gpu0,3)"]
    assert recorded["state"] == 0xABABAB03, "the fake fills padding with 0xAB, as a struct copy may"
    assert recorded["version"] == 3 << 24 | 40
    assert live["h100-sxm-8x"]["facts"]["gpus"][0]["fabric"]["state"] == "completed"
    degraded = live["fabric-degraded"]["facts"]["gpus"][3]["fabric"]
    assert (degraded["health"]["bandwidth_degraded"], degraded["health"]["summary"]) == (True, "limited_capacity")


def test_a_driver_that_refuses_the_v3_fabric_struct_answers_v2(tmp_path) -> None:
    recording = copy.deepcopy(NODES["fabric-degraded"]["nvml_calls"])
    v3 = recording.pop("nvmlDeviceGetGpuFabricInfoV(gpu3,3)")
    recording["nvmlDeviceGetGpuFabricInfoV(gpu3,3)"] = {"nvml_error": ARGUMENT_VERSION_MISMATCH}
    recording["nvmlDeviceGetGpuFabricInfoV(gpu3,2)"] = {k: v for k, v in v3.items() if k != "healthSummary"}
    fabric = gather_all(tmp_path, {"v2": recording})["v2"]["facts"]["gpus"][3]["fabric"]
    assert fabric["state"] == "completed" and fabric["health"]["summary"] is None
    assert fabric["health"]["bandwidth_degraded"] is True and fabric["health"]["configuration"] == "correct"


def test_process_lists_come_back_as_json_with_every_kind(live) -> None:
    """pynvml returns friendly objects, not dicts; compute and graphics lists are merged by PID, and memory
    NVML cannot report (NVML_VALUE_NOT_AVAILABLE) is unknown, not zero."""
    processes = live["other-process"]["facts"]["gpus"][0]["processes"]
    assert processes == [
        {"pid": 4242, "used_mib": 30720, "kinds": ["compute"], "mig_instance": None, "sm_util": 0},
        {"pid": 2105, "used_mib": None, "kinds": ["graphics"], "mig_instance": None, "sm_util": 0},
    ]
    row = judge(NODES["other-process"])["driver.processes"].rows[0].summary
    assert "pid 2105 (Xorg graphics) holds an unknown amount of memory" in row


def test_handle_lookup_failures_become_rows_not_a_crash(live) -> None:
    hidden = live["gpus-hidden-by-cgroup"]["facts"]["gpus"]
    assert [g["accessible"] for g in hidden] == [True, True] + [False] * 6
    assert hidden[2]["error"] == "not accessible to this process (cgroup / permissions)"
    result = judge(HIDDEN_BY_CGROUP)["driver.gpu-count"]
    assert result.status.value == "pass"
    assert result.summary == (
        "2 GPUs; 6 more not accessible to this process (index 2, 3, 4, 5, 6, 7: cgroup / permissions)"
    )
    assert len(judge(HIDDEN_BY_CGROUP)["health.ecc"].rows) == 2
    lost = live["gpu-lost-at-lookup"]["facts"]["gpus"][3]
    assert (lost["lost"], lost["error_code"]) == (True, ERROR_GPU_IS_LOST)
    assert judge(NODES["gpu-lost-at-lookup"])["driver.gpu-count"].summary.startswith("1 GPU is lost (index 3)")


def test_an_old_driver_without_the_newest_symbols_answers_through_the_older_ones(live) -> None:
    """A 470 library lacks the _v3 process calls (pynvml raises NVMLLibraryMismatchError, not NVMLError), the
    clock-event name and the fabric calls: the older generation answers, the rest is "not available"."""
    answer = live["driver-470-symbols"]
    recording = answer["recording"]
    assert recording["nvmlDeviceGetComputeRunningProcesses(gpu0)"] == {"nvml_error": 13}
    assert recording["nvmlDeviceGetComputeRunningProcesses_v2(gpu0)"] == []
    gpu = answer["facts"]["gpus"][0]
    assert (gpu["processes"], gpu["clock_event_reasons"], gpu["fabric"]) == ([], ["gpu_idle"], None)
    results = judge(NODES["driver-470-symbols"])
    assert results["driver.processes"].status.value == "pass"
    assert results["health.throttle"].status.value == "pass"


def test_a_gpu_lost_during_the_topology_queries_leaves_those_pairs_unknown(live) -> None:
    topology = live["gpu-lost-in-topology"]["facts"]["topology"]
    assert topology["p2p_read"][2] == [None] * 8
    assert [row[2] for row in topology["common_ancestor"]] == [None] * 8
    assert topology["p2p_read"][0][1] == 0


def test_who_computes_comes_back_through_the_two_call_sample_list(live) -> None:
    """nvmlDeviceGetProcessUtilization as pynvml calls it (ask the count, then fill), with the answers an H100
    gave while another process computed and while it only held memory; NOT_FOUND (no sample) is nobody."""
    computing = live["h100-another-process-computing"]["facts"]["gpus"][0]
    assert computing["utilization"] == {"gpu": 99, "memory": 34}
    assert computing["processes"] == [
        {"pid": 452, "used_mib": 9322, "kinds": ["compute"], "mig_instance": None, "sm_util": 100}
    ]
    holding = live["h100-another-process-holding"]["facts"]["gpus"][0]["processes"]
    assert [(p["pid"], p["sm_util"]) for p in holding] == [(591, 0)]
    assert live["h100-sxm-8x"]["facts"]["gpus"][1]["processes"] == []
