"""What the hardware should deliver, from the data files in gpudoctor/data (sources are cited there)."""

from __future__ import annotations

import sys
from functools import cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


@cache
def _load(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("gpudoctor.data").joinpath(name).read_text())


def hardware() -> dict[str, Any]:
    return _load("hardware.toml")


def cuda_table() -> dict[str, Any]:
    return _load("cuda.toml")


def gpu_model(name: str | None) -> dict[str, Any] | None:
    """The table entry whose match pattern occurs in the NVML name, or None for an unknown model."""
    if not name:
        return None
    lowered = name.lower()
    for entry in hardware()["gpu"]:
        if any(pattern in lowered for pattern in entry["match"]):
            return entry
    return None


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Theoretical PCIe payload bandwidth per direction for a link generation and width."""
    if not gen or not width:
        return None
    per_x16 = hardware()["pcie_x16_gbps"].get(str(gen))
    return per_x16 * width / 16 if per_x16 else None


def nvlink_gbps(gen: int | None, links: int) -> float | None:
    """Theoretical NVLink bandwidth per direction of `links` links."""
    per_link = hardware()["nvlink_link_gbps"].get(str(gen)) if gen else None
    return per_link * links if per_link and links else None


def efficiency(name: str) -> float:
    return float(hardware()["efficiency"][name])


def cuda_version_text(value: int | None) -> str | None:
    """NVML's CUDA driver version 13010 is CUDA 13.1."""
    return None if value is None else f"{value // 1000}.{value % 1000 // 10}"
