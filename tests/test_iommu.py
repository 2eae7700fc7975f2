"""The kernel's IOMMU mode as a fact (gpudoctor/facts/iommu.py: sysfs and procfs, no root) and the cause it gives
(issue 50: "GPUDirect RDMA off ... ACS/IOMMU"): GPUs or RDMA NICs in translated IOMMU groups where peer-to-peer or
GPUDirect RDMA is slow, blocked or off. Recorded sysfs layouts in temporary folders, as the kernel writes them
(Documentation/ABI/testing/sysfs-kernel-iommu_groups; drivers/iommu/iommu.c, iommu_group_show_type)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpudoctor.diagnosis import Evidence, diagnose
from gpudoctor.diagnosis.network import RULES
from gpudoctor.facts import iommu, schema
from gpudoctor.judging import iommu as judge
from gpudoctor.model import Result, Status

GPU, NIC = "0000:17:00.0", "0000:18:00.0"


def layout(root: Path, types: dict[str, str], cmdline: str = "BOOT_IMAGE=/vmlinuz ro quiet", unit: bool = True) -> Path:
    """A host whose GPU sits in IOMMU group 12 and whose NIC mlx5_0 in group 40, each group of `types`' domain
    type (an absent type: no IOMMU group at all, as on a host without an IOMMU)."""
    if unit:
        (root / "sys/class/iommu/dmar0").mkdir(parents=True)
    (root / "proc").mkdir()
    (root / "proc/cmdline").write_text(cmdline + "\n")
    for address, group in ((GPU, "12"), (NIC, "40")):
        device = root / "sys/bus/pci/devices" / address
        device.mkdir(parents=True)
        if group in types:
            folder = root / "sys/kernel/iommu_groups" / group
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "type").write_text(types[group] + "\n")
            os.symlink(f"../../../kernel/iommu_groups/{group}", device / "iommu_group")
    (root / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    os.symlink(f"../../../bus/pci/devices/{NIC}", root / "sys/class/infiniband/mlx5_0/device")
    return root


def test_translated_groups_are_read_for_the_gpus_and_the_rdma_nics(tmp_path: Path) -> None:
    """A GPU in a DMA-FQ group, its NIC in an identity one, intel_iommu=on on the command line: each device with its
    group and type, the IOMMU unit, the group count and the command line's IOMMU words; a fact of the schema."""
    root = layout(tmp_path, {"12": "DMA-FQ", "40": "identity"}, "BOOT_IMAGE=/vmlinuz intel_iommu=on quiet")
    found = iommu.gather(root, [GPU])
    assert found["units"] == ["dmar0"] and found["groups"] == 2
    assert found["cmdline"] == ["intel_iommu=on"]
    assert found["devices"] == [
        {"kind": "gpu", "name": GPU, "address": GPU, "group": "12", "type": "DMA-FQ"},
        {"kind": "nic", "name": "mlx5_0", "address": NIC, "group": "40", "type": "identity"},
    ]
    assert schema.problem({"system": {"iommu": found}}) is None


def test_a_host_without_an_iommu_has_no_groups(tmp_path: Path) -> None:
    found = iommu.gather(layout(tmp_path, {}, unit=False), [GPU])
    assert found["units"] == [] and found["groups"] == 0 and found["cmdline"] == []
    assert [d["group"] for d in found["devices"]] == [None, None]
    assert judge.translated(found) == []


def test_hostile_files_are_not_taken(tmp_path: Path) -> None:
    """A type that is no domain type, a group link that is no number, a command line of megabytes: nothing of them
    is kept, and the command line is read only to its bound."""
    root = layout(tmp_path, {"12": "\x1b]0;owned\x07DMA", "40": "identity"}, "intel_iommu=" + "x" * 5_000_000)
    found = iommu.gather(root, [GPU, "../../etc"])
    assert found["devices"][0]["type"] is None and found["cmdline"] == []
    assert [d["name"] for d in found["devices"]] == [GPU, "mlx5_0"]


def facts(types: dict[str, str], nccl: dict[str, Any] | None = None) -> dict[str, Any]:
    devices = [
        {"kind": "gpu", "name": GPU, "address": GPU, "group": "12", "type": types.get("12")},
        {"kind": "nic", "name": "mlx5_0", "address": NIC, "group": "40", "type": types.get("40")},
    ]
    system = {"iommu": {"units": ["dmar0"], "groups": 2, "cmdline": [], "devices": devices}}
    return {"system": system, "nccl": nccl or {}}


def slow_p2p() -> Result:
    found = Result(Status.WARN, "GPU 0 -> GPU 1: 3.1 GB/s, expected ~25 GB/s")
    found.check_id = "p2p.access"
    return found


def test_translated_groups_lead_where_peer_to_peer_is_slow() -> None:
    """P2P slow between GPUs whose IOMMU groups translate: the IOMMU leads, P2P's finding folded beneath it, with
    the commands that show the mode and the kernel parameter that cures it."""
    p2p = slow_p2p()
    (first,) = diagnose(Evidence([p2p], facts({"12": "DMA-FQ", "40": "DMA"})), RULES)
    assert first.id == "iommu-translated" and first.status == Status.WARN, first
    assert GPU in first.summary and "mlx5_0" in first.summary and "DMA-FQ" in first.summary
    assert p2p.explained_by == "iommu-translated"
    commands = first.remediation.commands
    assert "cat /sys/kernel/iommu_groups/*/type" in commands and "cat /proc/cmdline" in commands
    assert "iommu=pt" in first.remediation.why and "GPUDirect RDMA" in first.source


def test_translated_groups_are_a_cause_where_nccl_has_gpudirect_rdma_off() -> None:
    """NCCL's log says GPUDirect RDMA is off on the channels between nodes and the NIC's group translates."""
    nccl = {"net": "IB", "gdrdma": "off", "ib_devices": ["mlx5_0:1/IB"]}
    found = judge.cause(facts({"12": "identity", "40": "DMA"}, nccl), symptoms=False)
    assert found is not None and "mlx5_0" in found.summary and GPU not in found.summary


def test_passthrough_or_nothing_wrong_is_no_cause() -> None:
    """Identity groups where P2P is slow (another cause), and translated groups where nothing is slow: no cause."""
    assert diagnose(Evidence([slow_p2p()], facts({"12": "identity", "40": "identity"})), RULES) == []
    assert judge.cause(facts({"12": "DMA", "40": "DMA"}, {"net": "IB", "gdrdma": "on"}), symptoms=False) is None
