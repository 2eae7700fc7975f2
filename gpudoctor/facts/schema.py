"""The shape of a node's facts, as judges read them. Plain JSON in a snapshot; these types say what is there.

Every field may be None: "not available" (NVML answered NotSupported, the driver lacks the call, or a
capture does not hold it), never a guess. Enums and bitmasks are decoded to names at the gateway.
"""

from __future__ import annotations

import math
import re
import types
import typing
from typing import Any, Literal, TypedDict, Union

from gpudoctor.facts.sources import SOURCES as SOURCES  # where facts come from, named apart for the registry

SCHEMA = "gpudoctor.snapshot"
# 2: NVML enums and bitmasks decoded to names; sources gathered on demand. 3: an NVLink's `version` is the
# NVLink generation (NVML's nvmlNvlinkVersion_t code decoded), not the code.
SCHEMA_VERSION = 3


class Process(TypedDict, total=False):
    pid: int
    used_mib: int | None  # None: NVML cannot say (WDDM, some vGPU)
    kinds: list[str]  # "compute", "graphics", "mps"
    mig_instance: list[int] | None
    name: str | None  # a capture: the process name nvidia-smi read on the node
    sm_util: int | None  # its highest SM utilisation (%) in NVML's samples of the last seconds; None: not said
    own: bool  # gpudoctor's own process (the torch gateway it started), never another's


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
    cluster_uuid: str | None  # the multi-node NVLink domain (an NVL72 rack) the GPU belongs to
    clique_id: int | None  # its partition within that domain


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
    utilization: dict[str, int] | None  # NVML's last sample period: "gpu" (a kernel ran, %), "memory" (%)
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
    topology: dict[str, list]  # indexes, p2p_read and common_ancestor matrices in `indexes` order (a pasted
    # `topo -m` adds nvlinks: the NVLinks joining each pair)


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
    import_s: float  # seconds `import torch` took in the gateway: a budget's probe of what a workload's start costs


class KernelLog(TypedDict, total=False):
    readable: bool
    reason: str | None
    source: str | None  # "dmesg" or "journalctl -k"
    xids: list[dict]  # pci, xid, count, first_time, last_time, first_line, last_line
    sxids: list[dict]  # pci, sxid, fatal, count, ...


# What a PciFunction's fields and Devices' file names must be to be shown or judged (a snapshot is text somebody
# else wrote): an address as the kernel names a function (domain:bus:device.function), an id as sysfs writes it, a
# driver's module name.
PCI_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
HEX_ID = re.compile(r"0x[0-9a-f]{4,6}")
DRIVER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
DEVICE_FILE = re.compile(r"nvidia[A-Za-z0-9_-]{0,32}")  # a name in /dev: nvidiactl, nvidia0, nvidia-uvm


class PciFunction(TypedDict, total=False):
    address: str  # as sysfs names it: "0000:01:00.0"
    device: str | None  # the device id: "0x2330"
    class_code: str | None  # "0x030200": a 3D controller
    driver: str | None  # the driver bound to it: "nvidia", "nouveau", "vfio-pci"; None: none bound


class Devices(TypedDict, total=False):
    """What the machine says about NVIDIA GPUs without NVIDIA's driver (facts/devices.py). A snapshot taken before
    gpudoctor read them has no `devices`: not captured, never "no GPU"."""

    pci_functions: int  # functions sysfs lists on the PCI bus (0: the bus is not readable here)
    nvidia_gpus: list[PciFunction]  # NVIDIA's (vendor 0x10de) VGA, 3D and other display controllers
    device_files: list[str]  # /dev/nvidia*: "nvidiactl", "nvidia0", "nvidia-uvm"
    module_loaded: bool  # /proc/driver/nvidia/version or /sys/module/nvidia exists


class IommuDevice(TypedDict, total=False):
    kind: str  # "gpu" or "nic" (an RDMA device of /sys/class/infiniband)
    name: str  # the GPU's PCI address, the NIC's RDMA name ("mlx5_0")
    address: str  # its PCI address
    group: str | None  # its IOMMU group; None: none (no IOMMU, or not under one)
    type: str | None  # the group's default domain: "identity" (passthrough), "DMA", "DMA-FQ" (translated)...


class Iommu(TypedDict, total=False):
    """The kernel's IOMMU mode (facts/iommu.py, sysfs and procfs without root)."""

    units: list[str]  # /sys/class/iommu: "dmar0", "ivhd0"; none: no IOMMU in use
    groups: int  # IOMMU groups in /sys/kernel/iommu_groups
    cmdline: list[str]  # the kernel command line's IOMMU words: "intel_iommu=on", "iommu=pt"
    devices: list[IommuDevice]


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
    devices: Devices  # the PCI bus, /dev/nvidia* and the module; with `container` and env's NVIDIA_VISIBLE_DEVICES
    # and NVIDIA_DRIVER_CAPABILITIES (NVIDIA Container Toolkit), what tells the causes of "no GPU" apart
    interfaces: list[str]
    interface_addresses: list[dict]  # name, family (4/6), address, up, virtual; in getifaddrs order
    links: list[dict]  # every interface: name, up, virtual, bridge, bridge_physical, speed_mbps
    infiniband: list[dict]
    rdma_devices: list[str] | None  # what /dev/infiniband holds; None where it does not exist
    iommu: Iommu  # the GPUs' and RDMA NICs' IOMMU groups and their translation
    env: dict[str, str]
    kernel_log: KernelLog
    euid: int
    nvcc: dict
    gpu_processes: dict[str, dict]
    gpu_numa_nodes: dict[str, int | None]
    # Read from a paste only (collect_env):
    python: str  # "3.10.12"
    cudnn_libraries: list[str]  # versions of the libcudnn files found on the system, not what torch loads


class NcclFacts(TypedDict, total=False):
    """What an NCCL_DEBUG=INFO log (a paste) says NCCL chose; never gathered live."""

    version: str
    cuda: str
    net: str  # "IB", "Socket" or a network plugin's name
    plugin: str  # the network plugin loaded ("NCCL RDMA Plugin v8", "aws-ofi-nccl 1.11.0-aws"), or "internal"
    ofi_provider: str  # aws-ofi-nccl's libfabric provider: "efa", "cxi"
    ofi_nics: int
    interfaces: list[str]
    bootstrap: list[str]  # the interfaces NCCL's bootstrap uses
    ib_devices: list[str]
    transports: list[str]  # "NET/IB/GDRDMA", "P2P/IPC", "SHM"
    net_devices: list[int]  # the NIC indexes the channels between nodes use ("via NET/IB/3")
    gdrdma: str  # "on", "off" or "partial": the channels between nodes with /GDRDMA
    gdr_disabled: list[dict]  # {hca} (no peer memory), {gpu, hca, distance, limit} (too far apart)
    no_rdma: list[str]  # why NCCL found no RDMA network: "no IB device", "no libibverbs", "no OFI provider", ...
    channels: int
    trees: bool
    nodes: int  # nNodes, localRanks (2.19+)
    local_ranks: int
    launch_nodes: int  # the nodes a pasted launch command asks for (torchrun --nnodes, --num_nodes, --num_machines)
    nvls: bool
    ranks: int
    warnings: list[str]
    net_warnings: list[dict]  # {line, source, text, plugin}: the WARNs NCCL's network code or a plugin printed
    net_warnings_left_out: int  # cluster mode: a rank's network WARNs not sent (net_warnings.cut keeps 5)


class NcclTestsDevice(TypedDict, total=False):
    rank: int
    host: str
    device: int | None
    bus_id: str | None
    name: str | None


class NcclTestsRun(TypedDict, total=False):
    """One nccl-tests run a file shows (gpudoctor/paste/nccl_tests.py, run_dict)."""

    line: int
    format: str  # "text" or "json"
    collective: str | None
    ranks: int | None
    hosts: list[str]
    devices: list[NcclTestsDevice]
    rows: list[dict]  # sizes and each side's time and bandwidths
    avg_busbw: float | None
    out_of_bounds: int | None
    version: str | None
    nccl_version: str | None
    env: dict[str, str]  # NCCL's settings on its command line
    max_bytes: int | None
    failure: str | None  # nccl-tests' line for a failed NCCL or CUDA call ("Test NCCL failure common.cu:..."), if any


class Benchmarks(TypedDict, total=False):
    """Benchmark outputs a user's file holds (gpudoctor/paste: nccl_tests, nvbandwidth, dcgm_diag readers)."""

    nccl_tests: list[NcclTestsRun]  # one per run
    nvbandwidth: dict  # devices and test cases with their matrices
    dcgm_diag: dict  # DCGM's tests with their results, messages and stated figures


class Origin(TypedDict):
    """Where a paste's fact or error was read (gpudoctor.paste.found.Origin): the reader, the 1-based line, the
    line. Every key is there: a report quotes them."""

    reader: str
    line: int
    text: str


class Sighting(Origin):
    """An error signature seen in a paste: its id (gpudoctor/data/signatures), where, and what it carried."""

    id: str
    values: dict[str, Any]


class Stated(Origin):
    value: Any  # one of the values a paste states a fact as


class Conflict(TypedDict):
    fact: str  # the fact's path: "nvml.driver_version"
    values: list[Stated]


class Paste(TypedDict, total=False):
    """What a snapshot made from a paste says of it (gpudoctor.paste.summary)."""

    kinds: dict[str, int]  # lines read by each reader: {"nvidia-smi": 31, "error": 4}
    facts_from: dict[str, Origin]  # where each fact was read
    conflicts: list[Conflict]  # facts the paste states more than one way
    signatures: list[Sighting]
    script: str  # the program a traceback ran
    package: str  # the installed package whose import the error broke (a traceback's innermost frame, a pip install)


class _Capture(TypedDict):
    format: Literal["nvidia-smi -q -x"]
    file: str  # the file's name: the report's host


class SmiCapture(_Capture, total=False):
    """An `nvidia-smi -q -x` capture (facts/nvsmi_xml.py)."""

    dtd_version: int | None


class PastedCapture(TypedDict):
    """Pasted text (gpudoctor.paste.to_snapshot)."""

    format: Literal["pasted text"]
    file: str
    kinds: list[str]  # the readers that read something


class Snapshot(TypedDict, total=False):
    schema: str
    schema_version: int
    tool_version: str
    taken_at: str | None
    sources: list[str]
    capture: SmiCapture | PastedCapture  # a file's facts: what the file was
    nvml: NvmlFacts
    nvml_calls: dict
    torch: TorchFacts
    system: SystemFacts
    nccl: NcclFacts
    benchmarks: Benchmarks
    paste: Paste
    gather_s: float | None


def problem(value: Any, shape: Any = Snapshot, where: str = "") -> str | None:
    """The first place where `value` is not of `shape` (these TypedDicts, and the types in them), said as
    `system.hostname is 5 (an int), not str`; None where it is. Fields a shape does not name are not judged; a key
    a TypedDict requires (one declared with total=True) must be there."""
    origin = typing.get_origin(shape)
    if shape is Any:
        return None
    if origin is Literal:
        allowed = typing.get_args(shape)
        return None if value in allowed else _wrong(value, " or ".join(map(repr, allowed)), where)
    if origin in (Union, types.UnionType):
        options = [option for option in typing.get_args(shape) if option is not type(None)]
        if value is None and len(options) < len(typing.get_args(shape)):
            return None
        options = [option for option in options if _chosen(value, option)] or options
        answers = [problem(value, option, where) for option in options]
        return None if None in answers else answers[0]
    if isinstance(shape, type) and issubclass(shape, dict) and hasattr(shape, "__annotations__"):
        return _dict_problem(value, shape, where)
    return _plain_problem(value, origin or shape, typing.get_args(shape), where)


def _chosen(value: Any, option: Any) -> bool:
    """Whether `value` is what a union's TypedDict option says by its Literal keys (a capture's `format`): the
    option that judges it."""
    if not (isinstance(value, dict) and isinstance(option, type) and hasattr(option, "__required_keys__")):
        return True
    literals = {key: hint for key, hint in typing.get_type_hints(option).items() if typing.get_origin(hint) is Literal}
    return all(value.get(key) in typing.get_args(hint) for key, hint in literals.items())


def _dict_problem(value: Any, shape: Any, where: str) -> str | None:
    if not isinstance(value, dict):
        return _wrong(value, "an object", where)
    hints = typing.get_type_hints(shape)
    missing = next((key for key in hints if key in shape.__required_keys__ and key not in value), None)
    if missing:
        return f"{where}.{missing} is missing" if where else f"{missing} is missing"
    for key, item in value.items():
        if key in hints:
            found = problem(item, hints[key], f"{where}.{key}" if where else key)
            if found:
                return found
    return None


def _plain_problem(value: Any, kind: Any, args: tuple[Any, ...], where: str) -> str | None:
    if kind is None or kind is type(None):
        return None if value is None else _wrong(value, "null", where)
    if kind is float:
        good = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return None if good else _wrong(value, "a finite number", where)
    if kind is int:
        good = isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
        return None if good else _wrong(value, "a whole number", where)
    if not isinstance(value, kind):
        return _wrong(value, kind.__name__, where)
    if kind is list and args:
        return next((p for i, v in enumerate(value) if (p := problem(v, args[0], f"{where}[{i}]"))), None)
    if kind is dict and len(args) == 2:
        return next((p for k, v in value.items() if (p := problem(v, args[1], f"{where}.{k}"))), None)
    return None


def _wrong(value: Any, wanted: str, where: str) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{where or 'the snapshot'} is {shown} (type {type(value).__name__}), not {wanted}"


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
