"""The shape of a node's facts, as judges read them. Plain JSON in a snapshot; these types say what is there.

Every field may be None: "not available" (NVML answered NotSupported, the driver lacks the call, or a
capture does not hold it), never a guess. Enums and bitmasks are decoded to names at the gateway.
"""

from __future__ import annotations

from typing import Any, TypedDict

SCHEMA = "gpudoctor.snapshot"
# Where facts come from. Gathering one costs: "torch" imports torch (seconds), "kernel_log" and "nvcc" run a
# program. Checks declare which they need (registry), and only those are gathered.
SOURCES = ("nvml", "torch", "system", "kernel_log", "nvcc")
# 2: NVML enums and bitmasks decoded to names; sources gathered on demand. 3: an NVLink's `version` is the
# NVLink generation (NVML's nvmlNvlinkVersion_t code decoded), not the code.
SCHEMA_VERSION = 3


class Process(TypedDict, total=False):
    pid: int
    used_mib: int | None  # None: NVML cannot say (WDDM, some vGPU)
    kinds: list[str]  # "compute", "graphics", "mps"
    mig_instance: list[int] | None
    name: str | None  # a capture: the process name nvidia-smi read on the node


class NvLink(TypedDict, total=False):
    link: int
    active: bool
    version: int | None  # the NVLink generation (1..6), decoded from NVML's NVML_NVLINK_VERSION_* code
    remote_type: str | None  # "gpu", "switch", "ibmnpu"
    remote_pci_bus_id: str | None
    replay: int | None
    recovery: int | None
    crc_flit: int | None
    crc_data: int | None


class Pcie(TypedDict, total=False):
    gen: int | None
    max_gen: int | None
    gpu_max_gen: int | None
    width: int | None
    max_width: int | None
    replays: int | None


class Fabric(TypedDict, total=False):
    state: str | None  # "not_supported", "not_started", "in_progress", "completed"
    status: int | None  # NVML's return code of the registration, once completed
    health: dict[str, bool | str | None]  # decoded health mask and summary, see nvml.decode_fabric_health


class GpuFacts(TypedDict, total=False):
    index: int  # NVML's index, as nvidia-smi numbers GPUs
    lost: bool
    accessible: bool
    error: str | None  # why it is lost or not accessible
    error_code: int | None  # NVML's return code for it
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    pci_device_id: int | None  # (device id << 16) | vendor id
    compute_capability: list[int] | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    persistence_mode: bool | None
    compute_mode: str | None  # "default", "exclusive_thread", "prohibited", "exclusive_process"
    mig_mode: dict[str, bool] | None
    inforom_valid: bool | None
    fabric: Fabric | None
    processes: list[Process] | None
    ecc_mode: dict[str, bool] | None
    ecc_errors: dict[str, int | None]
    retired_pages: dict[str, int | bool] | None
    remapped_rows: dict[str, int | bool] | None
    clock_event_reasons: list[str] | None  # decoded names, e.g. ["gpu_idle", "hw_slowdown"]
    temperature_c: int | None
    temperature_slowdown_c: int | None
    temperature_shutdown_c: int | None
    temperature_margin_c: int | None
    power_limit_w: float | None
    power_default_limit_w: float | None
    pcie: Pcie
    nvlinks: list[NvLink]
    # Read from an nvidia-smi capture only:
    not_captured: list[str]  # fields the capture does not hold (FACT_NAMES): "not in this capture", not zero
    mig_devices: list[dict] | None  # MIG instances: index, gpu_instance_id, compute_instance_id, memory
    virtualization_mode: str | None  # "Pass-Through", "VGPU", "Host VGPU"
    driver_model: str | None  # Windows: "WDDM" or "TCC"


class NvmlFacts(TypedDict, total=False):
    status: str  # "ok", "library-not-found", "driver-not-loaded", "version-mismatch", "no-permission", "error"
    error: str | None
    error_code: int | None
    driver_version: str | None
    attached_gpus: int | None  # a capture: GPUs on the node, which may be more than it lists (nvidia-smi -i)
    cuda_driver_version: int | None  # 13010 is CUDA 13.1
    nvml_version: str | None
    gpus: list[GpuFacts]
    topology: dict[str, list]  # indexes, p2p_read and common_ancestor matrices in `indexes` order


class TorchFacts(TypedDict, total=False):
    importable: bool
    import_error: str | None
    version: str
    cuda: str | None  # the CUDA version torch was built with
    hip: str | None  # ROCm builds
    arch_list: list[str]
    cuda_available: bool
    cuda_init_error: str | None
    device_count: int
    devices: list[dict]  # index (torch's), name, capability, pci_bus_id, uuid; or index and error
    cudnn: dict
    nccl: dict
    torchvision: dict


class KernelLog(TypedDict, total=False):
    readable: bool
    reason: str | None
    source: str | None  # "dmesg" or "journalctl -k"
    xids: list[dict]  # pci, xid, count, first_time, last_time, first_line, last_line
    sxids: list[dict]  # pci, sxid, fatal, count, ...


class SystemFacts(TypedDict, total=False):
    hostname: str
    kernel: str
    machine: str  # "x86_64", "aarch64"
    os: str  # platform.system(): "Linux", "Windows"
    os_release: dict[str, str]  # id, id_like, version_id, version_codename (os-release(5))
    shm_bytes: int | None
    memory_bytes: int
    cpu_count: int
    cpu_affinity: list[int]
    numa_nodes: dict[str, list[int]]
    limits: dict[str, int | None]
    container: str | None
    kernel_modules: list[str]
    nvidia_module_version: str | None
    interfaces: list[str]
    interface_addresses: list[dict]  # name, family (4/6), address, up, virtual; in getifaddrs order
    infiniband: list[dict]
    env: dict[str, str]
    kernel_log: KernelLog
    euid: int
    nvcc: dict
    gpu_processes: dict[str, dict]
    gpu_numa_nodes: dict[str, int | None]


# GpuFacts fields an nvidia-smi capture may lack (GpuFacts.not_captured), in words for a judge.
FACT_NAMES = {
    "compute_capability": "compute capability",
    "persistence_mode": "persistence mode",
    "compute_mode": "compute mode",
    "mig_mode": "MIG mode",
    "inforom_valid": "infoROM validity",
    "fabric": "NVSwitch fabric state",
    "processes": "process list",
    "ecc_mode": "ECC mode",
    "ecc_errors": "ECC counters",
    "retired_pages": "retired pages",
    "remapped_rows": "remapped rows",
    "clock_event_reasons": "clock event reasons",
    "temperature_c": "temperature",
    "temperature_slowdown_c": "slowdown temperature",
    "temperature_shutdown_c": "shutdown temperature",
    "temperature_margin_c": "T.Limit margin",
    "power_limit_w": "power limit",
    "power_default_limit_w": "default power limit",
    "pcie": "PCIe link",
    "pcie_max": "PCIe maximum link",
    "nvlinks": "NVLink state",
    "memory_total_mib": "memory size",
}
NOT_CAPTURED = "not in this capture"


def not_captured(gpu: dict[str, Any], *facts: str) -> str | None:
    """ "ECC mode: not in this capture" where an nvidia-smi capture lacks the first of `facts` that it lacks
    for this GPU; None where every one was read (always, on a live node)."""
    missing = gpu.get("not_captured") or []
    lacking = next((fact for fact in facts if fact in missing), None)
    return f"{FACT_NAMES.get(lacking, lacking)}: {NOT_CAPTURED}" if lacking else None
