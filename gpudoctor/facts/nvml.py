"""The NVML gateway: the one place that talks to NVML (through nvidia-ml-py, imported as pynvml).

Every call goes through a backend's `call(name, *args)`. The live backend records each call and its
answer, so a snapshot carries a replayable recording; `facts.fake.ReplayNvml` serves the same calls
back in tests. NotSupported / FunctionNotFound on one GPU makes that field `None` ("not available"),
never a crash; a lost GPU is marked lost; init failures become a status the driver check explains.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

NVML_MAX_LINKS = 18  # NVLink 4 on Hopper has 18 links; NVML answers NotSupported past a GPU's count

# NVML return codes (nvml.h), so judging code never needs pynvml.
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NO_PERMISSION = 4
ERROR_NOT_FOUND = 6
ERROR_DRIVER_NOT_LOADED = 9
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_CORRUPTED_INFOROM = 14
ERROR_GPU_IS_LOST = 15
ERROR_LIB_RM_VERSION_MISMATCH = 18
ERROR_UNKNOWN = 999
NOT_AVAILABLE = {ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, ERROR_INVALID_ARGUMENT, ERROR_NOT_FOUND}

INIT_STATUS = {
    ERROR_LIBRARY_NOT_FOUND: "library-not-found",
    ERROR_DRIVER_NOT_LOADED: "driver-not-loaded",
    ERROR_LIB_RM_VERSION_MISMATCH: "version-mismatch",
    ERROR_NO_PERMISSION: "no-permission",
}


HANDLE_LOOKUP = "nvmlDeviceGetHandleByIndex"


# pynvml's wording of the codes a gather reports, so a replay says what the live call said.
ERROR_TEXT = {
    ERROR_NOT_SUPPORTED: "Not Supported",
    ERROR_NO_PERMISSION: "Insufficient Permissions",
    ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
    ERROR_GPU_IS_LOST: "GPU is lost",
    ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
}


class NvmlCallError(Exception):
    """An NVML call answered with an error code."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or ERROR_TEXT.get(code, f"NVML error {code}"))
        self.code = code


class Backend(Protocol):
    def call(self, name: str, *args: Any) -> Any: ...


class Dev(int):
    """A GPU index passed where NVML wants a device handle; backends turn it into a handle."""

    def __str__(self) -> str:
        return f"gpu{int(self)}"


class Since(int):
    """A lastSeenTimeStamp argument: microseconds since the epoch, `seconds` ago when the call is made. It records
    as what it means ("last2s"), so a recorded call replays whatever the time of the replay."""

    seconds: float

    def __new__(cls, seconds: float) -> Since:
        stamp = super().__new__(cls, max(0, int((time.time() - seconds) * 1e6)))
        stamp.seconds = seconds
        return stamp

    def __str__(self) -> str:
        return f"last{self.seconds:g}s"


def call_key(name: str, args: tuple[Any, ...]) -> str:
    return f"{name}({','.join(str(a) for a in args)})"


class LiveNvml:
    """Calls the real NVML through pynvml, recording every answer for the snapshot. Nothing pynvml raises
    escapes: every failure becomes an `NvmlCallError` with NVML's code."""

    # Calls that fill a struct passed last, by pointer (pynvml forwards that argument to C unchanged, and a
    # ctypes struct passed without byref() reaches NVML by value: a garbage pointer). The struct's pynvml
    # name, and for a versioned struct the name of its version constant; "{}" is the version asked for,
    # passed here as the call's last argument.
    OUT_STRUCTS: ClassVar[dict[str, tuple[str, str | None]]] = {
        "nvmlDeviceGetGpuFabricInfo": ("c_nvmlGpuFabricInfo_t", None),
        "nvmlDeviceGetGpuFabricInfoV": ("c_nvmlGpuFabricInfo_v{}_t", "nvmlGpuFabricInfo_v{}"),
    }

    def __init__(self) -> None:
        import pynvml

        self.lib = pynvml
        self.handles: dict[int, Any] = {}
        self.recording: dict[str, Any] = {}

    def call(self, name: str, *args: Any) -> Any:
        key = call_key(name, args)
        try:
            value = to_jsonable(self._call(name, args))
        except NvmlCallError as exc:
            self.recording[key] = {"nvml_error": exc.code}
            raise
        self.recording[key] = value
        return value

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        lib = self.lib
        try:
            if name == HANDLE_LOOKUP:
                self.handles[args[0]] = lib.nvmlDeviceGetHandleByIndex(args[0])
                return None
            real_args = [self._handle(a) if isinstance(a, Dev) else a for a in args]
            if name in self.OUT_STRUCTS:
                struct = self._out_struct(name, real_args)
                getattr(lib, name)(*real_args, ctypes.byref(struct))
                return struct
            return getattr(lib, name)(*real_args)
        except lib.NVMLError as exc:
            raise NvmlCallError(exc.value, str(exc)) from None
        except (lib.NVMLLibraryMismatchError, AttributeError) as exc:
            # pynvml's unversioned wrappers raise NVMLLibraryMismatchError where the driver lacks the newest
            # symbol (an older driver), not an NVMLError.
            raise NvmlCallError(ERROR_FUNCTION_NOT_FOUND, f"{name}: {exc}") from None
        except Exception as exc:  # a ctypes or pynvml failure must not end the gather
            raise NvmlCallError(ERROR_UNKNOWN, f"{name}: {type(exc).__name__}: {exc}") from None

    def _out_struct(self, name: str, real_args: list[Any]) -> Any:
        struct_name, version_name = self.OUT_STRUCTS[name]
        if version_name is None:
            return getattr(self.lib, struct_name)()
        version = real_args.pop()
        struct = getattr(self.lib, struct_name.format(version))()
        struct.version = getattr(self.lib, version_name.format(version))
        return struct

    def _handle(self, index: int) -> Any:
        if index not in self.handles:
            self.handles[index] = self.lib.nvmlDeviceGetHandleByIndex(index)
        return self.handles[index]


def to_jsonable(value: Any) -> Any:
    """ctypes structs become dicts, arrays lists, bytes text, pynvml's friendly objects (process lists)
    dicts: what a snapshot can hold."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if hasattr(value, "_fields_"):
        return {f[0]: to_jsonable(getattr(value, f[0])) for f in value._fields_}
    if isinstance(value, (list, tuple, ctypes.Array)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, ctypes._SimpleCData):
        return value.value
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if hasattr(value, "__dict__"):
        return {k: to_jsonable(v) for k, v in vars(value).items()}
    return value


class GpuLost(Exception):
    pass


# The three process lists NVML keeps per GPU; each falls back to its _v2 symbol on drivers without _v3.
PROCESS_LISTS = (
    ("compute", "nvmlDeviceGetComputeRunningProcesses"),
    ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
    ("mps", "nvmlDeviceGetMPSComputeRunningProcesses"),
)
NO_MIG_INSTANCE = 0xFFFFFFFF
NVML_CLOCK_SM = 1  # nvmlClockType_t
# nvmlNvlinkVersion_t: NVML's code for an NVLink's version -> the NVLink generation (2.2 is NVLink 2, 3.1 is
# NVLink 3). nvml.h: NVML_NVLINK_VERSION_1_0 = 1, 2_0 = 2, 2_2 = 3, 3_0 = 4, 3_1 = 5, 4_0 = 6, 5_0 = 7, 6_0 = 8.
NVLINK_GENERATIONS = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}


def nvlink_generation_of_code(code: int | None) -> int | None:
    """The NVLink generation of NVML's version code; None for NVML_NVLINK_VERSION_INVALID or a newer code."""
    return NVLINK_GENERATIONS.get(code) if code is not None else None


# nvmlIntNvLinkDeviceType_t: what the far end of an NVLink is.
NVLINK_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}


# How far back NVML's per-process samples are read: its sampling buffer holds the last few seconds
# (nvmlDeviceGetProcessUtilization: "samples ... since lastSeenTimeStamp").
UTIL_WINDOW_S = 2.0


class Gateway:
    """Turns NVML answers into plain facts. One instance per gather; no NVML failure escapes it. A process in
    `own` (gpudoctor itself and the torch gateway it started) is marked as its own, never another's."""

    def __init__(self, backend: Backend, own: frozenset[int] = frozenset()) -> None:
        self.backend = backend
        self.own = own

    def q(self, name: str, *args: Any, convert: Callable[[Any], Any] = lambda v: v) -> Any:
        """One query with the default "not available" (None); a lost GPU stops that GPU's gather."""
        value, code = self.attempt(name, *args)
        if code == ERROR_GPU_IS_LOST:
            raise GpuLost(f"{name}: GPU is lost")
        return None if code is not None else convert(value)

    def attempt(self, name: str, *args: Any) -> tuple[Any, int | None]:
        """The answer and None, or None and NVML's error code."""
        try:
            return self.backend.call(name, *args), None
        except NvmlCallError as exc:
            return None, exc.code

    def gather(self) -> dict[str, Any]:
        try:
            self.backend.call("nvmlInit")
        except NvmlCallError as exc:
            return {
                "status": INIT_STATUS.get(exc.code, "error"),
                "error": str(exc),
                "error_code": exc.code,
                "gpus": [],
                "topology": {},
            }
        facts = {
            "status": "ok",
            "error": None,
            "error_code": None,
            "driver_version": self.attempt("nvmlSystemGetDriverVersion")[0],
            "cuda_driver_version": self.attempt("nvmlSystemGetCudaDriverVersion")[0],
            "nvml_version": self.attempt("nvmlSystemGetNVMLVersion")[0],
            "gpus": [self.gpu(i) for i in range(self.attempt("nvmlDeviceGetCount")[0] or 0)],
        }
        facts["topology"] = self.topology([g["index"] for g in facts["gpus"] if usable(g)])
        return facts

    def gpu(self, index: int) -> dict[str, Any]:
        """One GPU's facts; a GPU NVML counts but cannot open (lost, or hidden by a cgroup) is a row saying so."""
        _, code = self.attempt(HANDLE_LOOKUP, index)
        if code is not None:
            return unreachable_gpu(index, code)
        d = Dev(index)
        try:
            return {
                "index": index,
                "lost": False,
                "accessible": True,
                **self._identity(d),
                **self._state(d),
                **self._health(d),
            }
        except GpuLost as exc:
            return unreachable_gpu(index, ERROR_GPU_IS_LOST, str(exc))

    def _identity(self, d: Dev) -> dict[str, Any]:
        mem = self.q("nvmlDeviceGetMemoryInfo", d)
        pci = self.q("nvmlDeviceGetPciInfo_v3", d) or {}
        return {
            "name": self.q("nvmlDeviceGetName", d),
            "uuid": self.q("nvmlDeviceGetUUID", d),
            "pci_bus_id": pci.get("busId"),
            "pci_device_id": pci.get("pciDeviceId"),
            "compute_capability": self.q("nvmlDeviceGetCudaComputeCapability", d),
            "memory_total_mib": mem["total"] // 2**20 if mem else None,
            "memory_used_mib": mem["used"] // 2**20 if mem else None,
            "utilization": self._utilization(d),
        }

    def _state(self, d: Dev) -> dict[str, Any]:
        mig = self.q("nvmlDeviceGetMigMode", d)
        return {
            "persistence_mode": self.q("nvmlDeviceGetPersistenceMode", d, convert=bool),
            "compute_mode": self.q("nvmlDeviceGetComputeMode", d, convert=COMPUTE_MODES.get),
            "mig_mode": {"current": bool(mig[0]), "pending": bool(mig[1])} if mig else None,
            "inforom_valid": self._inforom_valid(d),
            "fabric": self._fabric(d),
            "processes": self._processes(d),
        }

    def _fabric(self, d: Dev) -> dict[str, Any] | None:
        """NVSwitch fabric registration, and its health where the driver reports it: the versioned struct
        (v3 adds a health summary to v2's health mask), else the original one with state and status only.
        State and summary are one byte in nvml.h (pynvml reads the state as four): mask the padding off."""
        info = (
            self.q("nvmlDeviceGetGpuFabricInfoV", d, 3)
            or self.q("nvmlDeviceGetGpuFabricInfoV", d, 2)
            or self.q("nvmlDeviceGetGpuFabricInfo", d)
        )
        if info is None:
            return None
        summary = info.get("healthSummary")
        return {
            "state": FABRIC_STATES.get(info["state"] & 0xFF),
            "status": info["status"],
            "health": decode_fabric_health(info.get("healthMask"), None if summary is None else summary & 0xFF),
            "cluster_uuid": fabric_uuid(info.get("clusterUuid")),
            "clique_id": info.get("cliqueId") if fabric_uuid(info.get("clusterUuid")) else None,
        }

    def _inforom_valid(self, d: Dev) -> bool | None:
        _, code = self.attempt("nvmlDeviceValidateInforom", d)
        if code == ERROR_GPU_IS_LOST:
            raise GpuLost("nvmlDeviceValidateInforom: GPU is lost")
        if code is None:
            return True
        return False if code == ERROR_CORRUPTED_INFOROM else None

    def _processes(self, d: Dev) -> list[dict[str, Any]] | None:
        """Compute, graphics and MPS processes holding this GPU, one entry per PID, each with its SM utilisation
        of the last seconds; None when NVML lists none of them on this driver."""
        lists = [(kind, self._process_list(d, name)) for kind, name in PROCESS_LISTS]
        if all(procs is None for _, procs in lists):
            return None
        merged: dict[int, dict[str, Any]] = {}
        for kind, procs in lists:
            for p in procs or []:
                entry = merged.setdefault(p["pid"], process_entry(p, p["pid"] in self.own))
                if kind not in entry["kinds"]:
                    entry["kinds"].append(kind)
        busy = self._sm_use(d)
        for entry in merged.values():
            entry["sm_util"] = None if busy is None else busy.get(entry["pid"], 0)
        return list(merged.values())

    def _utilization(self, d: Dev) -> dict[str, int] | None:
        """How busy the GPU was over NVML's last sample period: the share of time a kernel ran, and the memory
        controller's."""
        return self.q("nvmlDeviceGetUtilizationRates", d, convert=lambda u: {"gpu": u["gpu"], "memory": u["memory"]})

    def _sm_use(self, d: Dev) -> dict[int, int] | None:
        """Each process's highest SM utilisation (%) in NVML's samples of the last UTIL_WINDOW_S seconds: {} where
        NVML holds no sample (NOT_FOUND: nothing ran a kernel), None where the driver cannot say."""
        value, code = self.attempt("nvmlDeviceGetProcessUtilization", d, Since(UTIL_WINDOW_S))
        if code == ERROR_GPU_IS_LOST:
            raise GpuLost("nvmlDeviceGetProcessUtilization: GPU is lost")
        if code == ERROR_NOT_FOUND:
            return {}
        if code is not None or not isinstance(value, list):
            return None
        highest: dict[int, int] = {}
        for sample in value:
            pid, sm = sample.get("pid"), sample.get("smUtil")
            if isinstance(pid, int) and isinstance(sm, int):
                highest[pid] = max(highest.get(pid, 0), sm)
        return highest

    def occupancy(self, index: int) -> dict[str, Any]:
        """Who uses a GPU now, as a workload is watched: its utilisation, its memory, and every process on it
        with the memory it holds and its SM utilisation; a GPU lost meanwhile says so."""
        d = Dev(index)
        try:
            mem = self.q("nvmlDeviceGetMemoryInfo", d)
            return {
                "gpu": index,
                "utilization": self._utilization(d),
                "memory_used_mib": mem["used"] // 2**20 if mem else None,
                "memory_total_mib": mem["total"] // 2**20 if mem else None,
                "processes": self._processes(d),
            }
        except GpuLost:
            return {"gpu": index, "lost": True}

    def _process_list(self, d: Dev, name: str) -> list[dict[str, Any]] | None:
        return self.newest(d, name, f"{name}_v2")

    def _reasons(self, d: Dev) -> list[str] | None:
        """Why the clocks are held down now (nvmlClocksEventReason*, or the older throttle reasons), by name."""
        names = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
        return decode_bits(self.newest(d, *names), CLOCK_EVENT_REASONS)

    def sample(self, index: int) -> dict[str, Any]:
        """What a GPU is doing now, as a load is watched: SM clock, power draw, temperature, and why the clocks
        are held down; a GPU lost meanwhile says so."""
        d = Dev(index)
        try:
            return {
                "gpu": index,
                "sm_mhz": self.q("nvmlDeviceGetClockInfo", d, NVML_CLOCK_SM),
                "power_w": self.q("nvmlDeviceGetPowerUsage", d, convert=_milli),
                "temperature_c": self.q("nvmlDeviceGetTemperature", d, 0),
                "reasons": self._reasons(d),
            }
        except GpuLost:
            return {"gpu": index, "lost": True}

    def newest(self, d: Dev, *names: str) -> Any:
        """The first of several generations of one query that this driver has (FunctionNotFound moves on)."""
        code = None
        for name in names:
            value, code = self.attempt(name, d)
            if code != ERROR_FUNCTION_NOT_FOUND:
                break
        if code == ERROR_GPU_IS_LOST:
            raise GpuLost(f"{names[0]}: GPU is lost")
        return value if code is None else None

    def _health(self, d: Dev) -> dict[str, Any]:
        return {
            "ecc_mode": self.q(
                "nvmlDeviceGetEccMode", d, convert=lambda m: {"current": bool(m[0]), "pending": bool(m[1])}
            ),
            "ecc_errors": self._ecc(d),
            "retired_pages": self._retired(d),
            "remapped_rows": self.q(
                "nvmlDeviceGetRemappedRows",
                d,
                convert=lambda r: {
                    "correctable": r[0],
                    "uncorrectable": r[1],
                    "pending": bool(r[2]),
                    "failure": bool(r[3]),
                },
            ),
            "clock_event_reasons": self._reasons(d),
            "temperature_c": self.q("nvmlDeviceGetTemperature", d, 0),
            "temperature_slowdown_c": self.q("nvmlDeviceGetTemperatureThreshold", d, 1),
            "temperature_shutdown_c": self.q("nvmlDeviceGetTemperatureThreshold", d, 0),
            "temperature_margin_c": self.q("nvmlDeviceGetMarginTemperature", d),
            "power_limit_w": self.q("nvmlDeviceGetEnforcedPowerLimit", d, convert=_milli),
            "power_default_limit_w": self.q("nvmlDeviceGetPowerManagementDefaultLimit", d, convert=_milli),
            "pcie": self._pcie(d),
            "nvlinks": self._nvlinks(d),
        }

    def _ecc(self, d: Dev) -> dict[str, int | None]:
        names = {
            (1, 0): "volatile_uncorrected",
            (0, 0): "volatile_corrected",
            (1, 1): "aggregate_uncorrected",
            (0, 1): "aggregate_corrected",
        }
        return {
            name: self.q("nvmlDeviceGetTotalEccErrors", d, kind, counter) for (kind, counter), name in names.items()
        }

    def _retired(self, d: Dev) -> dict[str, Any] | None:
        sbe = self.q("nvmlDeviceGetRetiredPages", d, 0)
        dbe = self.q("nvmlDeviceGetRetiredPages", d, 1)
        pending = self.q("nvmlDeviceGetRetiredPagesPendingStatus", d)
        if sbe is None and dbe is None and pending is None:
            return None
        return {"sbe": len(sbe or []), "dbe": len(dbe or []), "pending": bool(pending)}

    def _pcie(self, d: Dev) -> dict[str, int | None]:
        return {
            "gen": self.q("nvmlDeviceGetCurrPcieLinkGeneration", d),
            "max_gen": self.q("nvmlDeviceGetMaxPcieLinkGeneration", d),
            "gpu_max_gen": self.q("nvmlDeviceGetGpuMaxPcieLinkGeneration", d),
            "width": self.q("nvmlDeviceGetCurrPcieLinkWidth", d),
            "max_width": self.q("nvmlDeviceGetMaxPcieLinkWidth", d),
            "replays": self.q("nvmlDeviceGetPcieReplayCounter", d),
        }

    def _nvlinks(self, d: Dev) -> list[dict[str, Any]]:
        links = []
        for link in range(NVML_MAX_LINKS):
            active = self.q("nvmlDeviceGetNvLinkState", d, link)
            if active is None:
                break
            counters = {
                name: self.q("nvmlDeviceGetNvLinkErrorCounter", d, link, code)
                for code, name in enumerate(("replay", "recovery", "crc_flit", "crc_data"))
            }
            links.append(
                {
                    "link": link,
                    "active": bool(active),
                    "version": self.q("nvmlDeviceGetNvLinkVersion", d, link, convert=nvlink_generation_of_code),
                    "remote_type": self.q(
                        "nvmlDeviceGetNvLinkRemoteDeviceType", d, link, convert=NVLINK_REMOTE_TYPES.get
                    ),
                    "remote_pci_bus_id": self.q(
                        "nvmlDeviceGetNvLinkRemotePciInfo", d, link, convert=lambda p: p["busId"]
                    ),
                    **counters,
                }
            )
        return links

    def topology(self, indexes: list[int]) -> dict[str, Any]:
        """P2P read status and the common PCIe ancestor for every GPU pair (None on the diagonal, and where a
        GPU was lost after its own facts were read)."""
        p2p = [[None if a == b else self._pair("nvmlDeviceGetP2PStatus", a, b, 0) for b in indexes] for a in indexes]
        ancestor = [
            [None if a == b else self._pair("nvmlDeviceGetTopologyCommonAncestor", a, b) for b in indexes]
            for a in indexes
        ]
        return {"indexes": indexes, "p2p_read": p2p, "common_ancestor": ancestor}

    def _pair(self, name: str, a: int, b: int, *args: Any) -> Any:
        return self.attempt(name, Dev(a), Dev(b), *args)[0]


# nvml.h enums and bitmasks, decoded here so that judges read names.
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
CLOCK_EVENT_REASONS = {  # nvmlClocksEventReason*
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
# NVML_GPU_FABRIC_HEALTH_MASK_*: two-bit flags (0 not supported, 1 true, 2 false) at these shifts, and a
# four-bit incorrect-configuration field at shift 8; NVML_GPU_FABRIC_HEALTH_SUMMARY_*.
FABRIC_HEALTH_FLAGS = {
    "bandwidth_degraded": 0,
    "route_recovery": 2,
    "route_unhealthy": 4,
    "access_timeout_recovery": 6,
}
FABRIC_CONFIGURATION = {
    1: "correct",
    2: "incorrect SysGUID",
    3: "incorrect chassis serial number",
    4: "no partition",
    5: "insufficient NVLinks",
    6: "incompatible GPU firmware",
    7: "invalid location",
    8: "GPU state invalid",
}
FABRIC_SUMMARY = {1: "healthy", 2: "unhealthy", 3: "limited_capacity"}


def decode_bits(mask: int | None, names: dict[int, str]) -> list[str] | None:
    """The names of the bits set in `mask`, in bit order (an unknown bit keeps its number)."""
    if mask is None:
        return None
    known = [name for bit, name in names.items() if mask & bit]
    unknown = [f"bit_{bit}" for bit in range(64) if mask & (1 << bit) and (1 << bit) not in names]
    return known + unknown


def fabric_uuid(raw: Any) -> str | None:
    """The NVLink domain's cluster UUID (nvmlGpuFabricInfo_t.clusterUuid, 16 bytes) as text; None where the
    driver gives none or zeros (a GPU in no multi-node NVLink domain)."""
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    if isinstance(raw, list):
        raw = bytes(int(b) & 0xFF for b in raw)
    if not isinstance(raw, bytes | bytearray) or len(raw) != 16 or not any(raw):
        return None
    import uuid

    return str(uuid.UUID(bytes=bytes(raw)))


def decode_fabric_health(mask: int | None, summary: int | None) -> dict[str, bool | str | None]:
    """The fabric manager's health report as named fields; None for what the driver does not report (drivers
    before the versioned fabric struct, GPUs without a fabric manager)."""
    flags: dict[str, bool | str | None] = {
        name: {1: True, 2: False}.get((mask >> shift) & 0x3) if mask is not None else None
        for name, shift in FABRIC_HEALTH_FLAGS.items()
    }
    flags["configuration"] = FABRIC_CONFIGURATION.get((mask >> 8) & 0xF) if mask is not None else None
    flags["summary"] = FABRIC_SUMMARY.get(summary) if summary is not None else None
    return flags


def unreachable_gpu(index: int, code: int, error: str = "") -> dict[str, Any]:
    """A GPU NVML counts but this process cannot read: lost (fell off the bus, hung), or not accessible
    (NO_PERMISSION: hidden by a Slurm or container cgroup, or /dev/nvidiaN permissions)."""
    lost = code == ERROR_GPU_IS_LOST
    reason = error or ("GPU is lost" if lost else NOT_ACCESSIBLE.get(code, f"NVML error {code} opening it"))
    return {
        "index": index,
        "lost": lost,
        "accessible": False,
        "error": reason,
        "error_code": code,
        "name": None,
        "uuid": None,
        "pci_bus_id": None,
    }


NOT_ACCESSIBLE = {ERROR_NO_PERMISSION: "not accessible to this process (cgroup / permissions)"}


def usable(gpu: dict[str, Any]) -> bool:
    """A GPU this process can read: not lost, not hidden from it."""
    return not gpu.get("lost") and gpu.get("accessible", True)


def process_entry(p: dict[str, Any], own: bool = False) -> dict[str, Any]:
    """One NVML process record as a fact: memory unknown (None) where NVML cannot say (WDDM, some vGPU); `own`
    where it is gpudoctor's own process."""
    used = p.get("usedGpuMemory")
    instances = [p.get(k) for k in ("gpuInstanceId", "computeInstanceId")]
    mig = None if any(i in (None, NO_MIG_INSTANCE) for i in instances) else instances
    entry = {"pid": p["pid"], "used_mib": None if used is None else used // 2**20, "kinds": [], "mig_instance": mig}
    return {**entry, "own": True} if own else entry


def _milli(value: int) -> float:
    return value / 1000.0


def gather_live(own: frozenset[int] = frozenset()) -> tuple[dict[str, Any], dict[str, Any]]:
    """Facts from the real NVML, and the recording that replays them; processes in `own` are gpudoctor's."""
    try:
        backend = LiveNvml()
    except ImportError as exc:
        return {
            "status": "library-not-found",
            "error": f"nvidia-ml-py is not installed: {exc}",
            "error_code": None,
            "gpus": [],
            "topology": {},
        }, {}
    facts = Gateway(backend, own).gather()
    if facts["status"] == "ok":
        with contextlib.suppress(backend.lib.NVMLError):
            backend.lib.nvmlShutdown()
    return facts, backend.recording


class Sampler:
    """NVML read in a thread of its own while a load runs: every `every_s` seconds, each GPU's `sample` (or what
    `read` reads), with the wall-clock time it was taken. Use as a context manager around the load; `samples`
    holds what was read (nothing when NVML cannot start: the load is then judged on its figures alone)."""

    def __init__(
        self,
        indexes: list[int],
        every_s: float,
        backend: Callable[[], Backend] = LiveNvml,
        read: Callable[[Gateway, int], dict[str, Any]] = Gateway.sample,
    ) -> None:
        self.indexes = indexes
        self.every_s = every_s
        self.backend = backend
        self.read = read
        self.samples: list[dict[str, Any]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._open: Backend | None = None

    def __enter__(self) -> Sampler:
        try:
            backend = self.backend()
            backend.call("nvmlInit")
        except (ImportError, NvmlCallError) as exc:
            self.error = f"NVML could not be read during the load: {exc}"
            return self
        gateway = Gateway(backend)
        self.take(gateway)  # a first reading before the watched work starts
        self._thread = threading.Thread(target=self._run, args=(gateway,), daemon=True)
        self._thread.start()
        self._open = backend
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None and self._open is not None:
            self._thread.join()
            with contextlib.suppress(NvmlCallError):
                self._open.call("nvmlShutdown")

    def _run(self, gateway: Gateway) -> None:
        while not self._stop.wait(self.every_s):
            self.take(gateway)

    def take(self, gateway: Gateway) -> None:
        """One reading of every GPU, stamped with the wall-clock time."""
        taken = time.time()
        self.samples += [{"t": taken, **self.read(gateway, i)} for i in self.indexes]
