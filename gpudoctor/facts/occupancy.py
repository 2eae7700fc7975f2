"""Who else uses the GPUs while a workload runs: NVML read once before the workload starts and then every few
tenths of a second until it ends, each process on a GPU marked as this run's own (gpudoctor and the processes its
workload started) or another's, with its name and owner where this machine can see it.

What NVML answers here (recorded on an H100, shared/reference/h100-2026-11-26): while another process computes,
`nvmlDeviceGetUtilizationRates` reads 99-100 % and `nvmlDeviceGetProcessUtilization` gives that PID an smUtil of
99-100; while it only holds memory, its smUtil is 0; with no process at all the per-process call answers
NOT_FOUND. Judging what was seen is the diagnosis' (gpudoctor/diagnosis/occupancy.py); this only reads.
"""

from __future__ import annotations

import os
from typing import Any

import psutil

from gpudoctor.facts.nvml import Gateway, LiveNvml, Sampler
from gpudoctor.facts.system import describe_process

WATCH_S = 0.5  # how often a workload's GPUs are read while it runs


class Watch(Sampler):
    """NVML's view of who uses `indexes` around a workload: `samples` (see Gateway.occupancy), each process with
    `own` (this process or one it started, not there before the workload began), `before` (there before it
    began: never this run's), and `name`, `user` and `status` where this machine can see it. In a container NVML
    answers with host PIDs this machine may not see: an unseen PID that was not there before is taken as the
    workload's own (never blamed)."""

    def __init__(self, indexes: list[int], every_s: float = WATCH_S, backend: Any = LiveNvml) -> None:
        super().__init__(indexes, every_s, backend, read=Gateway.occupancy)
        self.before: set[int] = set()
        self.described: dict[int, dict[str, Any]] = {}

    def take(self, gateway: Gateway) -> None:
        first = not self.samples
        taken = len(self.samples)
        super().take(gateway)
        ours = _own_tree()
        for sample in self.samples[taken:]:
            for proc in sample.get("processes") or []:
                pid = proc["pid"]
                if first:
                    self.before.add(pid)
                seen = self.described.setdefault(pid, describe_process(pid))
                proc.update(
                    before=pid in self.before,
                    own=pid not in self.before and (pid in ours or seen.get("name") is None),
                    **{k: seen.get(k) for k in ("name", "user", "status", "ppid")},
                )

    def observation(self, check_id: str) -> dict[str, Any]:
        """What was seen around one check's workload, as the diagnosis reads it."""
        return {"check": check_id, "gpus": list(self.indexes), "samples": self.samples, "error": self.error}


def _own_tree() -> set[int]:
    """This process and every process below it (a workload's session leader and its ranks are its children)."""
    try:
        me = psutil.Process()
        return {os.getpid(), *(child.pid for child in me.children(recursive=True))}
    except psutil.Error:
        return {os.getpid()}
