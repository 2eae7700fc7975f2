"""Who else used each GPU, read off what NVML said (pure): from the node's facts (the processes on each GPU when
the facts were gathered, with their SM utilisation) and from the readings taken around each workload
(gpudoctor/facts/occupancy.py).

A process is another's when it is not gpudoctor's own (the facts mark the torch gateway, the watch marks the
workload's processes). It computes when NVML gives it SM utilisation of at least BUSY_SM % in a reading; where the
driver cannot give per-process figures, a GPU whose own utilisation read at least BUSY_SM % before the workload
started, with another process on it, was computed on by that process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpudoctor.facts.nvml import usable

# NVML's per-process smUtil of a process that only holds memory reads 0 (recorded on an H100 with another process
# holding 60 GiB idle); one computing reads 99-100. Anything at or above this share of the sample period is work.
BUSY_SM = 5


@dataclass
class Other:
    """Another process on a GPU: the most memory it held and the most SM time it took in any reading."""

    pid: int
    name: str | None = None
    user: str | None = None
    status: str | None = None
    ppid: int | None = None
    used_mib: int | None = None
    sm_util: int | None = None  # None: the driver gives no per-process figure

    @property
    def computing(self) -> bool:
        return self.sm_util is not None and self.sm_util >= BUSY_SM

    def describe(self) -> str:
        """`pid 452 (python3, user alice): SM 99 %, 9.1 GiB`."""
        who = ", ".join(str(p) for p in (self.name or "not visible from here", self.user and f"user {self.user}") if p)
        zombie = " ZOMBIE" if self.status == "zombie" else ""
        said = [f"SM {self.sm_util} %" if self.sm_util is not None else "", _mib(self.used_mib)]
        figures = ", ".join(s for s in said if s)
        return f"pid {self.pid} ({who}{zombie})" + (f": {figures}" if figures else "")


@dataclass
class Use:
    """What other processes did on one GPU (NVML's index) over a stretch of time."""

    gpu: int
    others: dict[int, Other] = field(default_factory=dict)
    busy_before: bool = False  # the GPU read busy before the workload started, with another process on it
    utilization: int | None = None  # the GPU's own utilisation (%) then

    @property
    def computing(self) -> bool:
        return self.busy_before or any(o.computing for o in self.others.values())

    @property
    def held_mib(self) -> int:
        return sum(o.used_mib or 0 for o in self.others.values())

    def note(self, proc: dict[str, Any]) -> None:
        other = self.others.setdefault(proc["pid"], Other(proc["pid"]))
        for key in ("name", "user", "status", "ppid"):
            setattr(other, key, proc.get(key) or getattr(other, key))
        other.used_mib = _larger(other.used_mib, proc.get("used_mib"))
        other.sm_util = _larger(other.sm_util, proc.get("sm_util"))


def from_facts(facts: dict[str, Any]) -> dict[int, Use]:
    """Other processes on each GPU when the node's facts were gathered (names from the system facts)."""
    described = (facts.get("system") or {}).get("gpu_processes") or {}
    found: dict[int, Use] = {}
    for gpu in (facts.get("nvml") or {}).get("gpus") or []:
        if not usable(gpu) or gpu.get("index") is None:
            continue
        for proc in gpu.get("processes") or []:
            if not proc.get("own") and not desktop(proc):
                seen = described.get(str(proc["pid"])) or {}
                found.setdefault(gpu["index"], Use(gpu["index"])).note({**seen, **proc, "name": _name(proc, seen)})
        if gpu["index"] in found:
            found[gpu["index"]].busy_before = _busy(gpu, found[gpu["index"]])
    return found


def from_watch(observation: dict[str, Any]) -> dict[int, Use]:
    """Other processes on each GPU while one workload ran (its first reading was taken before it started)."""
    found: dict[int, Use] = {}
    first: dict[int, dict[str, Any]] = {}
    for sample in observation.get("samples") or []:
        if sample.get("lost") or "gpu" not in sample:
            continue
        first.setdefault(sample["gpu"], sample)
        for proc in sample.get("processes") or []:
            if not proc.get("own") and not desktop(proc):
                found.setdefault(sample["gpu"], Use(sample["gpu"])).note(proc)
    for gpu, sample in first.items():
        if gpu in found and any(not p.get("own") for p in sample.get("processes") or []):
            found[gpu].busy_before = _busy(sample, found[gpu])
    return found


def desktop(proc: dict[str, Any]) -> bool:
    """A graphics context only (Xorg, a compositor: nvidia-smi's type G): the display, not another job; never
    a process to end."""
    return proc.get("kinds") == ["graphics"]


def _busy(reading: dict[str, Any], use: Use) -> bool:
    """A GPU busy with another process on it, where the driver gives no per-process figure to say whose work
    it was (no reading of NVML's gives gpudoctor's own work before it starts)."""
    utilization = (reading.get("utilization") or {}).get("gpu")
    unknown = all(o.sm_util is None for o in use.others.values())
    busy = unknown and isinstance(utilization, int) and utilization >= BUSY_SM
    if busy:
        use.utilization = utilization
    return busy


def _name(proc: dict[str, Any], seen: dict[str, Any]) -> str | None:
    return seen.get("name") or proc.get("name")


def _larger(a: int | None, b: Any) -> int | None:
    if not isinstance(b, int) or isinstance(b, bool):
        return a
    return b if a is None else max(a, b)


def _mib(mib: int | None) -> str:
    if mib is None:
        return ""
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib} MiB"
