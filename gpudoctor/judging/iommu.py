"""An IOMMU that translates the GPUs' or the RDMA NICs' DMA (`system.iommu`, gpudoctor/facts/iommu.py): GPUDirect RDMA
and peer-to-peer between devices rely on every PCI device seeing the same physical addresses, so a translated group
slows them or blocks them. A cause where the IOMMU translates and peer-to-peer or the network between nodes is slow,
failing, or without GPUDirect RDMA; the cure is passthrough (iommu=pt). Pure functions of facts."""

from __future__ import annotations

from typing import Any

from gpudoctor.judging.network import NetCause
from gpudoctor.model import Remediation, Status

# The default domain types whose DMA the IOMMU translates (drivers/iommu/iommu.c iommu_domain_type_str: DMA, DMA-FQ
# and DMA-SQ are "Translated"); "identity" is passthrough.
TRANSLATED = ("DMA", "DMA-FQ", "DMA-SQ")
RHEL_LIKE = ("rhel", "rocky", "almalinux", "centos", "fedora", "amzn", "ol")
SOURCE = (
    "NVIDIA, Developing a Linux Kernel Module using GPUDirect RDMA, 3.4 Supported Systems, 'IOMMUs': GPUDirect RDMA "
    "'relies upon all physical addresses being the same from the different PCI devices' point of view ... "
    "incompatible with IOMMUs performing any form of translation other than 1:1, hence they must be disabled or "
    "configured for pass-through translation' (https://docs.nvidia.com/cuda/gpudirect-rdma/); NCCL troubleshooting, "
    "'PCI Access Control Services (ACS)': IO virtualization (VT-d or IOMMU) can interfere with GPU Direct, a "
    "significant performance reduction or a hang (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/"
    "troubleshooting.html); Linux Documentation/ABI/testing/sysfs-kernel-iommu_groups (a group's type: DMA, DMA-FQ "
    "translated, identity not) and Documentation/admin-guide/kernel-parameters.txt (iommu=pt, iommu.passthrough=1)"
)


def translated(iommu: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs and RDMA NICs whose IOMMU group translates their DMA."""
    return [d for d in iommu.get("devices") or [] if isinstance(d, dict) and d.get("type") in TRANSLATED]


def gdr_off(nccl: dict[str, Any]) -> bool:
    """Whether NCCL's log says GPUDirect RDMA is off (or off on some channels) between nodes."""
    return nccl.get("gdrdma") in ("off", "partial") or bool(nccl.get("gdr_disabled"))


def cause(facts: dict[str, Any], symptoms: bool) -> NetCause | None:
    """Translated GPUs or NICs where `symptoms` (peer-to-peer or the network between nodes slow or failing) or NCCL's
    log has GPUDirect RDMA off; None otherwise."""
    system = facts.get("system") or {}
    held = system.get("iommu") if isinstance(system.get("iommu"), dict) else {}
    found = translated(held)
    if not found or not (symptoms or gdr_off(facts.get("nccl") or {})):
        return None
    named = [f"{'GPU' if d.get('kind') == 'gpu' else 'NIC'} {d.get('name')}" for d in found]
    types = ", ".join(dict.fromkeys(str(d.get("type")) for d in found))
    listed = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
    words = [str(w) for w in held.get("cmdline") or []]
    return NetCause(
        "iommu-translated",
        Status.WARN,
        f"the IOMMU translates DMA for {listed} (IOMMU group type {types}, not passthrough): peer-to-peer and "
        "GPUDirect RDMA traffic is remapped, slow or blocked",
        Remediation(
            "GPUDirect RDMA and PCIe peer-to-peer need the IOMMU off or in passthrough for the GPUs and NICs. Boot "
            "with iommu=pt (beside intel_iommu=on on Intel, or amd_iommu where it is set): the IOMMU stays on for "
            "what needs it (VFIO, SR-IOV) and no longer translates the devices' DMA. Or turn VT-d / AMD-Vi off in the "
            "firmware where nothing on the node needs it. Then reboot, and check every group reads identity.",
            ["cat /sys/kernel/iommu_groups/*/type", "cat /proc/cmdline", boot_fix(system)],
        ),
        [f"{d.get('name')}: IOMMU group {d.get('group')}, type {d.get('type')}" for d in found[:8]]
        + [f"kernel command line: {' '.join(words) if words else 'no IOMMU setting (the kernel default)'}"],
        SOURCE,
    )


def boot_fix(system: dict[str, Any]) -> str:
    """The command that adds iommu=pt to the kernel's command line, by the node's distribution."""
    distro = (system.get("os_release") or {}).get("id") or ""
    if distro in RHEL_LIKE:
        return "sudo grubby --update-kernel=ALL --args=iommu=pt && sudo reboot"
    return "sudo update-grub && sudo reboot  # after adding iommu=pt to GRUB_CMDLINE_LINUX in /etc/default/grub"
