"""What NVML really answered about another process on a GPU (an H100, 2026-11-26: tests/fixtures/real/
h100-2026-11-26, recorded by its busy/record.py through nvidia-ml-py), turned into the recordings gpudoctor's
gateway replays: the node's facts with it on the GPU, and the readings a workload's watch takes."""

from __future__ import annotations

import copy
import json
from typing import Any

from gpudoctor.context import Observer
from gpudoctor.facts.fake import ReplayNvml
from gpudoctor.facts.nvml import Gateway
from helpers.common import FIXTURES

REAL = FIXTURES / "real" / "h100-2026-11-26"
RECORDED = {
    "idle": REAL / "nvml-no-process.json",
    "computing": REAL / "busy" / "nvml-other-process-computing.json",
    "holding": REAL / "busy" / "nvml-other-process-holding-memory-idle.json",
}
H100_MIB = 81559  # nvidia-smi's total on that H100 (81559MiB)
MIB = 2**20


def readings(state: str, pid: int | None = None) -> list[dict[str, Any]]:
    """The recorded readings of one state: utilisation, process utilisation, compute processes, clocks; with
    `pid`, the recorded process is that one of this machine's (so this machine can see it)."""
    found = json.loads(RECORDED[state].read_text())
    for reading in found if pid is not None else []:
        for proc in [
            *reading["compute_procs"],
            *(reading["process_utilization"] if isinstance(reading["process_utilization"], list) else []),
        ]:
            proc["pid"] = pid
    return found


def occupancy_calls(reading: dict[str, Any], gpu: int = 0) -> dict[str, Any]:
    """One recorded reading as the gateway's calls for GPU `gpu` (an error the recorder wrote as text becomes
    NVML's code: NotFound is 6)."""
    held = sum(p["usedGpuMemory"] for p in reading["compute_procs"])
    samples = reading["process_utilization"]
    d = f"gpu{gpu}"
    return {
        f"nvmlDeviceGetHandleByIndex({gpu})": None,
        f"nvmlDeviceGetMemoryInfo({d})": {"total": H100_MIB * MIB, "used": held, "free": H100_MIB * MIB - held},
        f"nvmlDeviceGetUtilizationRates({d})": reading["utilization"],
        f"nvmlDeviceGetComputeRunningProcesses({d})": reading["compute_procs"],
        f"nvmlDeviceGetGraphicsRunningProcesses({d})": [],
        f"nvmlDeviceGetMPSComputeRunningProcesses({d})": [],
        f"nvmlDeviceGetProcessUtilization({d},last2s)": samples if isinstance(samples, list) else {"nvml_error": 6},
    }


def replay(state: str, gpus: int = 1, at: int = 1, pid: int | None = None) -> ReplayNvml:
    """NVML answering every GPU's reading as in the recorded state (its reading number `at`)."""
    calls: dict[str, Any] = {"nvmlInit()": None, "nvmlShutdown()": None}
    for gpu in range(gpus):
        calls |= occupancy_calls(readings(state, pid)[at], gpu)
    return ReplayNvml(calls)


def observer(state: str, gpus: int = 1, pid: int | None = None) -> Observer:
    """A run's observer whose NVML answers as in the recorded state, read every hundredth of a second."""
    return Observer(backend=lambda: replay(state, gpus, pid=pid), every_s=0.01)


def watched(check: str, state: str, gpus: int = 1, pid: int | None = None) -> dict[str, Any]:
    """The observation a workload's watch makes on `gpus` GPUs in the recorded state: a reading before and one
    while it ran (what facts.occupancy.Watch records)."""
    watch = observer(state, gpus, pid)
    with watch.watching(check, list(range(gpus))):
        pass
    return watch.observations[0]


def with_occupancy(snapshot: dict[str, Any], state: str, pid: int | None = None) -> dict[str, Any]:
    """A node's snapshot whose GPU 0 NVML reads as in the recorded state, its facts derived again through the
    gateway (the recorded process is another's: nothing marks it gpudoctor's own), and the host's description
    of the processes as a gather makes it."""
    from gpudoctor.facts.system import gpu_context

    changed = copy.deepcopy(snapshot)
    calls = {**changed["nvml_calls"], **occupancy_calls(readings(state, pid)[1], 0)}
    changed["nvml_calls"] = calls
    changed["nvml"] = Gateway(ReplayNvml(calls)).gather()
    changed["system"]["gpu_processes"] = gpu_context(changed["nvml"]["gpus"])["gpu_processes"]
    return changed
