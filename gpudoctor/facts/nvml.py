"""The NVML gateway: the one place that talks to NVML (through nvidia-ml-py, imported as pynvml).

Every call goes through a backend's `call(name, *args)`. The live backend records each call and its
answer, so a snapshot carries a replayable recording; `facts.fake.ReplayNvml` serves the same calls
back in tests. NotSupported / FunctionNotFound on one GPU makes that field `None` ("not available"),
never a crash; a lost GPU is marked lost; init failures become a status the driver check explains.
"""

from __future__ import annotations

import contextlib
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
NOT_AVAILABLE = {ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, ERROR_INVALID_ARGUMENT, ERROR_NOT_FOUND}

INIT_STATUS = {
    ERROR_LIBRARY_NOT_FOUND: "library-not-found",
    ERROR_DRIVER_NOT_LOADED: "driver-not-loaded",
    ERROR_LIB_RM_VERSION_MISMATCH: "version-mismatch",
    ERROR_NO_PERMISSION: "no-permission",
}


class NvmlCallError(Exception):
    """An NVML call answered with an error code."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"NVML error {code}")
        self.code = code


class Backend(Protocol):
    def call(self, name: str, *args: Any) -> Any: ...


class Dev(int):
    """A GPU index passed where NVML wants a device handle; backends turn it into a handle."""

    def __str__(self) -> str:
        return f"gpu{int(self)}"


def call_key(name: str, args: tuple[Any, ...]) -> str:
    return f"{name}({','.join(str(a) for a in args)})"


class LiveNvml:
    """Calls the real NVML through pynvml, recording every answer for the snapshot."""

    # Calls that fill a struct passed last: the struct's pynvml name, and for a versioned struct the name of
    # its version constant; "{}" is the version asked for, passed here as the call's last argument.
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
        real_args = [self._handle(a) if isinstance(a, Dev) else a for a in args]
        try:
            if name in self.OUT_STRUCTS:
                real_args.append(self._out_struct(name, real_args))
            answer = getattr(self.lib, name)(*real_args)
            if name in self.OUT_STRUCTS:
                answer = real_args[-1]
        except self.lib.NVMLError as exc:
            self.recording[key] = {"nvml_error": exc.value}
            raise NvmlCallError(exc.value, str(exc)) from None
        except AttributeError:
            self.recording[key] = {"nvml_error": ERROR_FUNCTION_NOT_FOUND}
            raise NvmlCallError(ERROR_FUNCTION_NOT_FOUND, f"{name} not in this nvidia-ml-py") from None
        value = to_jsonable(answer)
        self.recording[key] = value
        return value

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
    """ctypes structs become dicts, arrays lists, bytes text: what a snapshot can hold."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if hasattr(value, "_fields_"):
        return {f[0]: to_jsonable(getattr(value, f[0])) for f in value._fields_}
    if isinstance(value, (list, tuple)) or type(value).__name__.endswith("_Array"):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, (int, float, str)):
        return value.value
    return value


class GpuLost(Exception):
    pass


class Gateway:
    """Turns NVML answers into plain facts. One instance per gather; `unavailable` lists what NVML lacked."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def q(self, name: str, *args: Any, convert: Callable[[Any], Any] = lambda v: v) -> Any:
        """One query with the default "not available" (None); a lost GPU stops that GPU's gather."""
        try:
            return convert(self.backend.call(name, *args))
        except NvmlCallError as exc:
            if exc.code == ERROR_GPU_IS_LOST:
                raise GpuLost(str(exc)) from None
            return None

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
        count = self.q("nvmlDeviceGetCount") or 0
        facts = {
            "status": "ok",
            "error": None,
            "error_code": None,
            "driver_version": self.q("nvmlSystemGetDriverVersion"),
            "cuda_driver_version": self.q("nvmlSystemGetCudaDriverVersion"),
            "nvml_version": self.q("nvmlSystemGetNVMLVersion"),
            "gpus": [self.gpu(i) for i in range(count)],
        }
        facts["topology"] = self.topology([g["index"] for g in facts["gpus"] if not g["lost"]])
        return facts

    def gpu(self, index: int) -> dict[str, Any]:
        d = Dev(index)
        try:
            return {"index": index, "lost": False, **self._identity(d), **self._state(d), **self._health(d)}
        except GpuLost as exc:
            return {"index": index, "lost": True, "error": str(exc), "name": None, "uuid": None, "pci_bus_id": None}

    def _identity(self, d: Dev) -> dict[str, Any]:
        mem = self.q("nvmlDeviceGetMemoryInfo", d)
        return {
            "name": self.q("nvmlDeviceGetName", d),
            "uuid": self.q("nvmlDeviceGetUUID", d),
            "pci_bus_id": self.q("nvmlDeviceGetPciInfo_v3", d, convert=lambda p: p["busId"]),
            "compute_capability": self.q("nvmlDeviceGetCudaComputeCapability", d),
            "memory_total_mib": mem["total"] // 2**20 if mem else None,
            "memory_used_mib": mem["used"] // 2**20 if mem else None,
        }

    def _state(self, d: Dev) -> dict[str, Any]:
        mig = self.q("nvmlDeviceGetMigMode", d)
        return {
            "persistence_mode": self.q("nvmlDeviceGetPersistenceMode", d, convert=bool),
            "compute_mode": self.q("nvmlDeviceGetComputeMode", d),
            "mig_mode": {"current": bool(mig[0]), "pending": bool(mig[1])} if mig else None,
            "inforom_valid": self._inforom_valid(d),
            "fabric": self._fabric(d),
            "processes": self._processes(d),
        }

    def _fabric(self, d: Dev) -> dict[str, Any] | None:
        """NVSwitch fabric registration, and its health where the driver reports it: the versioned struct
        (v3 adds a health summary to v2's health mask), else the original one with state and status only."""
        info = (
            self.q("nvmlDeviceGetGpuFabricInfoV", d, 3)
            or self.q("nvmlDeviceGetGpuFabricInfoV", d, 2)
            or self.q("nvmlDeviceGetGpuFabricInfo", d)
        )
        if info is None:
            return None
        return {
            "state": info["state"],
            "status": info["status"],
            "health_mask": info.get("healthMask"),
            "health_summary": info.get("healthSummary"),
        }

    def _inforom_valid(self, d: Dev) -> bool | None:
        try:
            self.backend.call("nvmlDeviceValidateInforom", d)
            return True
        except NvmlCallError as exc:
            if exc.code == ERROR_GPU_IS_LOST:
                raise GpuLost(str(exc)) from None
            return False if exc.code == ERROR_CORRUPTED_INFOROM else None

    def _processes(self, d: Dev) -> list[dict[str, Any]] | None:
        procs = self.q("nvmlDeviceGetComputeRunningProcesses", d)
        if procs is None:
            return None
        return [{"pid": p["pid"], "used_mib": (p["usedGpuMemory"] or 0) // 2**20} for p in procs]

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
            "clock_event_reasons": self.q("nvmlDeviceGetCurrentClocksEventReasons", d),
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
                    "version": self.q("nvmlDeviceGetNvLinkVersion", d, link),
                    **counters,
                }
            )
        return links

    def topology(self, indexes: list[int]) -> dict[str, Any]:
        """P2P read status and the common PCIe ancestor for every GPU pair (None on the diagonal)."""
        p2p = [
            [None if a == b else self.q("nvmlDeviceGetP2PStatus", Dev(a), Dev(b), 0) for b in indexes] for a in indexes
        ]
        ancestor = [
            [None if a == b else self.q("nvmlDeviceGetTopologyCommonAncestor", Dev(a), Dev(b)) for b in indexes]
            for a in indexes
        ]
        return {"indexes": indexes, "p2p_read": p2p, "common_ancestor": ancestor}


def _milli(value: int) -> float:
    return value / 1000.0


def gather_live() -> tuple[dict[str, Any], dict[str, Any]]:
    """Facts from the real NVML, and the recording that replays them."""
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
    facts = Gateway(backend).gather()
    if facts["status"] == "ok":
        with contextlib.suppress(backend.lib.NVMLError):
            backend.lib.nvmlShutdown()
    return facts, backend.recording
