"""nvidia-smi's one-line answers about NVML itself, whatever command was run: that NVML did not start, and why
(`nvml.status`, `nvml.error`, `nvml.error_code`), or that it started and counts no GPU."""

from __future__ import annotations

from gpudoctor.facts.nvml import (
    ERROR_DRIVER_NOT_LOADED,
    ERROR_LIB_RM_VERSION_MISMATCH,
    ERROR_LIBRARY_NOT_FOUND,
    ERROR_NO_PERMISSION,
    ERROR_UNKNOWN,
    INIT_STATUS,
)
from gpudoctor.paste.nvsmi.state import Paste

# What nvidia-smi prints when NVML does not start: the message, the gateway's status, NVML's return code (the
# text after "Failed to initialize NVML: " is nvmlErrorString of that code). Reported in public threads, e.g.
# NVIDIA/nvidia-docker#988 and #1163, lyulyul/shine-cluster#50.
FAILURES = (
    ("NVIDIA-SMI has failed because it couldn", "driver-not-loaded", ERROR_DRIVER_NOT_LOADED),
    ("couldn't find libnvidia-ml.so", "library-not-found", ERROR_LIBRARY_NOT_FOUND),
)
NVML_INIT = "Failed to initialize NVML: "
NVML_ERRORS = {
    "driver/library version mismatch": ERROR_LIB_RM_VERSION_MISMATCH,
    "driver not loaded": ERROR_DRIVER_NOT_LOADED,
    "insufficient permissions": ERROR_NO_PERMISSION,
    "unknown error": ERROR_UNKNOWN,
}
NO_DEVICES = "No devices were found"  # NVML started and counts no GPU: the whole line, nothing else on it


def smi_failure(paste: Paste, i: int, line: str) -> bool:
    """nvidia-smi's own failure message on a line that names NVIDIA-SMI, recorded; False where it holds none."""
    for needle, status, code in FAILURES:
        if needle in line:
            failure(paste, i, line[line.index("NVIDIA-SMI") :].strip(), status, code)
            return True
    return False


def nvml_failure(paste: Paste, i: int, line: str) -> None:
    """ "Failed to initialize NVML: <nvmlErrorString>", with the status and code that string stands for."""
    message = line[line.index(NVML_INIT) :].strip()
    code = NVML_ERRORS.get(message[len(NVML_INIT) :].strip().rstrip(".").lower())
    failure(paste, i, message, INIT_STATUS.get(code, "error") if code is not None else "error", code)


def failure(paste: Paste, i: int, message: str, status: str, code: int | None) -> None:
    paste.fact("nvml.status", status, i)
    paste.fact("nvml.error", message, i)
    if code is not None:
        paste.fact("nvml.error_code", code, i)


def no_devices(paste: Paste, i: int) -> None:
    paste.fact("nvml.status", "ok", i)
    paste.fact("nvml.attached_gpus", 0, i)
