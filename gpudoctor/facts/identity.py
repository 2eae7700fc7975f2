"""Which physical GPU a torch device is. torch numbers devices by CUDA_VISIBLE_DEVICES (indexes or UUIDs) and
CUDA_DEVICE_ORDER (FASTEST_FIRST by default), NVML and nvidia-smi by PCI order over every GPU; after a lost
GPU, or in MIG mode, the numbers drift further. Only the PCI bus id (or the UUID) names the same GPU in both,
so every per-GPU figure a workload measures is reported against the GPU it was measured on.
"""

from __future__ import annotations

from typing import Any


def pci_address(text: str | None) -> tuple[int, ...]:
    """(domain, bus, device) of any spelling of a PCI address: NVML's 00000000:3B:00.0, sysfs's 0000:3b:00.0,
    the kernel log's 0000:3b:00."""
    if not text:
        return ()
    parts = text.split(".")[0].split(":")
    try:
        return tuple(int(p, 16) for p in parts[-3:])
    except ValueError:
        return ()


def same_pci(a: str | None, b: str | None) -> bool:
    address = pci_address(a)
    return bool(address) and address == pci_address(b)


def nvml_gpu_for(device: dict[str, Any], gpus: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The NVML GPU that torch `device` is: the same PCI bus id, else the same UUID; None when NVML has none."""
    for gpu in gpus:
        if same_pci(device.get("pci_bus_id"), gpu.get("pci_bus_id")):
            return gpu
    uuid = device.get("uuid")
    return next((g for g in gpus if uuid and g.get("uuid") == uuid), None)


def gpu_for_cuda_index(cuda_index: int, devices: list[dict[str, Any]], gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The facts of the GPU behind cuda:`cuda_index`, or a stand-in naming the torch device when NVML does
    not know it (index None, so no command names a wrong GPU)."""
    device = next((d for d in devices if d.get("index") == cuda_index), {"index": cuda_index})
    gpu = nvml_gpu_for(device, gpus)
    if gpu is not None:
        return with_slice(gpu, device)
    return {"index": None, "name": f"cuda:{cuda_index}", "pci_bus_id": device.get("pci_bus_id"), "uuid": None}


def with_slice(gpu: dict[str, Any], device: dict[str, Any]) -> dict[str, Any]:
    """The parent GPU's facts, and where torch's device is a MIG slice of it, the slice: its profile, memory
    and SMs (what its figures are judged by, never the whole GPU's datasheet)."""
    if not device.get("mig_profile"):
        return gpu
    share = {"profile": device["mig_profile"], "memory_mib": device.get("total_memory_mib"), "sms": device.get("sms")}
    return {**gpu, "mig_slice": share}


def used_gpus(devices: list[dict[str, Any]], gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPUs workloads run on, in torch's order (cuda:0, cuda:1...): a CUDA_VISIBLE_DEVICES subset, a
    container's share, the one MIG slice CUDA enumerates. A device that failed to answer is not one."""
    return [gpu_for_cuda_index(d["index"], devices, gpus) for d in devices if not d.get("error")]


def with_gpus(
    measured: list[dict[str, Any]], devices: list[dict[str, Any]], gpus: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each per-device measurement (keyed by its `cuda_index`) paired with the facts of that physical GPU."""
    return [(m, gpu_for_cuda_index(m["cuda_index"], devices, gpus)) for m in measured]
