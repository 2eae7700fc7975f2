"""The kernel's IOMMU mode for the GPUs and the RDMA NICs, read from sysfs and procfs without root: the IOMMU units
(/sys/class/iommu), the IOMMU groups (/sys/kernel/iommu_groups), each device's group and that group's default domain
type, and the IOMMU words of the kernel's command line. Read under a root path, so a test points it at a recorded
layout; every name is checked for its shape and every read bounded, so the walk is linear in what it looks at.

A group's `type` (Linux Documentation/ABI/testing/sysfs-kernel-iommu_groups, kernel 5.11+; the values
drivers/iommu/iommu.c iommu_group_show_type writes): "identity" (passthrough: DMA not translated), "DMA", "DMA-FQ",
"DMA-SQ" (translated), "blocked", "unmanaged" (a device given to a VM through VFIO), "unknown"."""

from __future__ import annotations

import os
import re
from itertools import islice
from pathlib import Path
from typing import Any

from gpudoctor.facts.schema import PCI_ADDRESS

MAX_ENTRIES = 4096  # groups, units and RDMA devices looked at
MAX_DEVICES = 64  # GPUs and NICs whose group is read
MAX_READ = 64  # bytes of a group's type
CMDLINE_BYTES = 4096  # the kernel's own limit (COMMAND_LINE_SIZE) is 2048 on x86 and 4096 on arm64
# The kernel parameters that set the IOMMU's mode (Documentation/admin-guide/kernel-parameters.txt).
CMDLINE_KEYS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict")
CMDLINE_VALUE = re.compile(r"[A-Za-z0-9_,.-]{1,32}")
DOMAIN_TYPE = re.compile(r"[A-Za-z][A-Za-z-]{0,15}")
NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
GROUP = re.compile(r"\d{1,9}")


def gather(root: Path, gpus: list[str]) -> dict[str, Any]:
    """The IOMMU units, the number of groups, the command line's IOMMU words, and each GPU's (by its PCI address)
    and RDMA NIC's group and its type."""
    devices = [("gpu", address, address) for address in gpus if PCI_ADDRESS.fullmatch(address)]
    devices += [("nic", name, address) for name, address in _rdma_nics(root)]
    return {
        "units": sorted(n for n in _names(root / "sys/class/iommu") if NAME.fullmatch(n)),
        "groups": sum(1 for n in _names(root / "sys/kernel/iommu_groups") if GROUP.fullmatch(n)),
        "cmdline": _cmdline(root),
        "devices": [_device(root, kind, name, address) for kind, name, address in devices[:MAX_DEVICES]],
    }


def _names(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in islice(entries, MAX_ENTRIES)]
    except OSError:
        return []


def _link_name(link: Path) -> str | None:
    """The last name of the path a sysfs link points at."""
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return None


def _rdma_nics(root: Path) -> list[tuple[str, str]]:
    """Each RDMA device (/sys/class/infiniband/<name>) with the PCI address its `device` link points at."""
    found = []
    for name in sorted(_names(root / "sys/class/infiniband")):
        address = _link_name(root / "sys/class/infiniband" / name / "device")
        if NAME.fullmatch(name) and address and PCI_ADDRESS.fullmatch(address):
            found.append((name, address))
    return found


def _device(root: Path, kind: str, name: str, address: str) -> dict[str, Any]:
    """A device's IOMMU group (its `iommu_group` link) and the group's type; None where it has none."""
    group = _link_name(root / "sys/bus/pci/devices" / address / "iommu_group")
    group = group if group and GROUP.fullmatch(group) else None
    kind_of = _read(root / "sys/kernel/iommu_groups" / group / "type") if group else None
    return {
        "kind": kind,
        "name": name,
        "address": address,
        "group": group,
        "type": kind_of if kind_of and DOMAIN_TYPE.fullmatch(kind_of) else None,
    }


def _read(path: Path, most: int = MAX_READ) -> str | None:
    try:
        with path.open("rb") as file:
            return file.read(most).decode("ascii", "replace").strip()
    except OSError:
        return None


def _cmdline(root: Path) -> list[str]:
    """The IOMMU words of the kernel's command line ("intel_iommu=on", "iommu=pt"), in its order."""
    words = (_read(root / "proc/cmdline", CMDLINE_BYTES) or "").split()
    found = []
    for word in words:
        key, _, value = word.partition("=")
        if key in CMDLINE_KEYS and CMDLINE_VALUE.fullmatch(value):
            found.append(word)
    return found[:8]
