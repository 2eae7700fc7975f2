"""What the machine itself says about NVIDIA GPUs, whether or not NVIDIA's driver answers: the functions on the PCI
bus (sysfs), the device files in /dev and whether the nvidia kernel module is loaded. Read under a root path, so a
test points it at a recorded layout. Standard library only: the health probe imports it and never torch.

Where NVML does not load, these tell a machine with no GPU from a GPU with no driver, and a container started
without its GPUs from one started without the driver's capabilities (gpudoctor.judging.nogpu)."""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path
from typing import Any

from gpudoctor.facts.schema import DEVICE_FILE, DRIVER_NAME, HEX_ID, PCI_ADDRESS

NVIDIA_VENDOR = "0x10de"
# PCI class codes of a GPU (PCI-SIG, PCI Code and ID Assignment Specification: base class 03h, display
# controller): 0300 VGA compatible (GeForce, workstation boards), 0302 3D controller (data-centre GPUs: A100,
# H100), 0380 other display controller. Read as sysfs writes them: 0x030000, 0x030200, 0x038000.
GPU_CLASSES = ("0x0300", "0x0302", "0x0380")
# Bounds that keep every read linear in a bounded input: the names taken (schema: PCI_ADDRESS, HEX_ID,
# DRIVER_NAME, DEVICE_FILE), the number of functions and /dev entries walked, the bytes read per file.
MAX_FUNCTIONS = 4096
MAX_DEV_ENTRIES = 16384
MAX_READ = 64


def gather(root: Path = Path("/")) -> dict[str, Any]:
    """The NVIDIA functions on the PCI bus, /dev/nvidia*, and whether the nvidia module is loaded."""
    functions = _functions(root / "sys/bus/pci/devices")
    gpus = [f for f in functions if f.pop("vendor") == NVIDIA_VENDOR and _is_gpu(f["class_code"])]
    return {
        "pci_functions": len(functions),
        "nvidia_gpus": gpus,
        "device_files": _device_files(root / "dev"),
        "module_loaded": (root / "proc/driver/nvidia/version").is_file() or (root / "sys/module/nvidia").is_dir(),
    }


def _functions(bus: Path) -> list[dict[str, Any]]:
    """Every function sysfs lists (its address, vendor, device, class and bound driver), up to MAX_FUNCTIONS; none
    where the bus is not readable (no sysfs, a sandbox that hides it)."""
    found = []
    for name in sorted(_names(bus, MAX_FUNCTIONS)):
        if not PCI_ADDRESS.fullmatch(name):
            continue
        function = bus / name
        found.append(
            {
                "address": name,
                "vendor": _read_id(function / "vendor"),
                "device": _read_id(function / "device"),
                "class_code": _read_id(function / "class"),
                "driver": _driver(function / "driver"),
            }
        )
    return found


def _read_id(path: Path) -> str | None:
    """A sysfs id file ("0x10de\\n") as its text, where it is one."""
    try:
        with path.open("rb") as file:
            text = file.read(MAX_READ).decode("ascii", "replace").strip().lower()
    except OSError:
        return None
    return text if HEX_ID.fullmatch(text) else None


def _driver(link: Path) -> str | None:
    """The name of the driver bound to a function (its `driver` link points at /sys/bus/pci/drivers/<name>);
    None where none is bound."""
    try:
        name = os.path.basename(os.readlink(link))
    except OSError:
        return None
    return name if DRIVER_NAME.fullmatch(name) else "unknown"


def _is_gpu(class_code: str | None) -> bool:
    return class_code is not None and class_code[:6] in GPU_CLASSES


def _device_files(dev: Path) -> list[str]:
    """The names of /dev/nvidia* (nvidiactl, nvidia0.., nvidia-uvm, nvidia-caps), up to MAX_DEV_ENTRIES looked at."""
    return sorted(name for name in _names(dev, MAX_DEV_ENTRIES) if DEVICE_FILE.fullmatch(name))


def _names(folder: Path, most: int) -> list[str]:
    """The first `most` names in a folder, none where it cannot be read."""
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in islice(entries, most)]
    except OSError:
        return []
