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
def load_data(name: str) -> dict[str, Any]:
    """A TOML table shipped in gpudoctor/data (each names its sources)."""
    return tomllib.loads(resources.files("gpudoctor.data").joinpath(name).read_text())


def hardware() -> dict[str, Any]:
    return load_data("hardware.toml")


NVIDIA_VENDOR_ID = 0x10DE
CONSUMER_BRANDS = ("geforce", "titan")


def is_geforce(name: str | None) -> bool:
    """A consumer board (GeForce, TITAN) by its NVML name: no peer-to-peer support (NVIDIA/nccl-tests#287)."""
    return any(brand in str(name or "").lower() for brand in CONSUMER_BRANDS)


def gpu_model(gpu: dict[str, Any]) -> dict[str, Any] | None:
    """The table entry for this exact GPU: its PCI device id where NVML gave one, else its full NVML name.
    Never a substring: "NVIDIA L40" is not an L4, "A10G" not an A10, "GH200" not an H200."""
    table = hardware()["gpu"]
    pci_id = gpu.get("pci_device_id") or 0
    if pci_id & 0xFFFF == NVIDIA_VENDOR_ID:
        hit = next((entry for entry in table if pci_id >> 16 in entry["pci_ids"]), None)
        if hit:
            return hit
    name = normal_name(gpu.get("name"))
    return next((entry for entry in table if name in {normal_name(n) for n in entry["names"]}), None) if name else None


def normal_name(name: str | None) -> str:
    """NVML names with and without the "NVIDIA " older drivers leave off, in one spelling."""
    text = " ".join((name or "").lower().split())
    return text.removeprefix("nvidia ")


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Theoretical PCIe payload bandwidth per direction for a link generation and width."""
    if not gen or not width:
        return None
    per_x16 = hardware()["pcie_x16_gbps"].get(str(gen))
    return per_x16 * width / 16 if per_x16 else None


def nvlink_gbps(gen: int | None, links: int, link_gbps: float | None = None) -> float | None:
    """Theoretical NVLink bandwidth per direction of `links` links: the model's own link rate where the table
    gives one (GA102's 14.0625 GB/s), else the generation's."""
    per_link = link_gbps or (hardware()["nvlink_link_gbps"].get(str(gen)) if gen else None)
    return per_link * links if per_link and links else None


def efficiency(name: str) -> float:
    return float(hardware()["efficiency"][name])


def cuda_version_text(value: int | None) -> str | None:
    """NVML's CUDA driver version 13010 is CUDA 13.1."""
    return None if value is None else f"{value // 1000}.{value % 1000 // 10}"
