"""A stand-in for torch.cuda on a node this machine does not have: which devices CUDA gives a process, and
how torch counts them. Before CUDA is initialised, torch.cuda.device_count() counts through NVML (every
parent GPU of a MIG node, the CUDA_VISIBLE_DEVICES list); initialised, it asks the CUDA runtime, which on a
MIG node enumerates one slice. Only the calls gpudoctor's device discovery makes are modelled."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch


@dataclass
class CudaNode:
    """`devices`: what the CUDA runtime enumerates (name, memory MiB, SMs, PCI bus); `nvml_count`: what torch
    counts before initialising."""

    devices: list[dict[str, Any]]
    nvml_count: int
    initialised: bool = False
    touched: list[int] = field(default_factory=list)

    def device_count(self) -> int:
        return len(self.devices) if self.initialised else self.nvml_count

    def init(self) -> None:
        self.initialised = True

    def properties(self, index: int) -> Any:
        self.initialised = True
        if index >= len(self.devices):
            raise RuntimeError("CUDA error: invalid device ordinal")
        d = self.devices[index]
        return SimpleNamespace(
            name=d["name"],
            major=9,
            minor=0,
            total_memory=d["memory_mib"] * 2**20,
            multi_processor_count=d["sms"],
            pci_domain_id=0,
            pci_bus_id=d["bus"],
            pci_device_id=0,
            uuid=d.get("uuid", f"{index:08x}-0000-0000-0000-000000000000"),
        )

    def mem_get_info(self, index: int = 0) -> tuple[int, int]:
        self.touched.append(index)
        if index >= len(self.devices):
            raise RuntimeError("CUDA error: invalid device ordinal")
        return self.devices[index]["memory_mib"] * 2**20, self.devices[index]["memory_mib"] * 2**20

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", self.device_count)
        monkeypatch.setattr(torch.cuda, "init", self.init)
        monkeypatch.setattr(torch.cuda, "get_device_properties", self.properties)
        monkeypatch.setattr(torch.cuda, "mem_get_info", self.mem_get_info)


def mig_node(parents: int = 8) -> CudaNode:
    """H100s in MIG mode: CUDA gives the process the first 1g.10gb slice of GPU 0."""
    slice_ = {"name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "memory_mib": 9984, "sms": 16, "bus": 0x18}
    return CudaNode([slice_], nvml_count=parents)
