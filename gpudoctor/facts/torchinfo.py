"""The torch gateway: what the installed torch build is and what it can see.

It runs as its own process (`python -m gpudoctor.facts.torchinfo`), started first and read last, so
torch's import overlaps the NVML and system facts, and a torch that fails or crashes on import becomes
a finding with its real cause instead of a dead tool.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import warnings
from typing import Any


def start() -> subprocess.Popen[str]:
    from gpudoctor.workloads.isolate import python_module

    return subprocess.Popen(
        python_module("gpudoctor.facts.torchinfo"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def end(proc: subprocess.Popen[str]) -> None:
    """A gateway started that no check wants after all: gone, not left to finish."""
    proc.kill()
    proc.wait()


def collect(proc: subprocess.Popen[str], timeout_s: float = 120.0) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"importable": False, "import_error": f"importing torch did not finish in {timeout_s:.0f} s"}
    if proc.returncode == 0:
        return json.loads(out)
    last = err.strip().splitlines()[-1] if err.strip() else f"exit code {proc.returncode}"
    if proc.returncode < 0:
        last = f"the process crashed with signal {-proc.returncode} while importing torch; {last}"
    return {"importable": False, "import_error": last}


def gather() -> dict[str, Any]:
    started = time.perf_counter()
    try:
        import torch
    except BaseException as exc:  # ImportError, OSError for a missing .so, anything a broken wheel raises
        return {"importable": False, "import_error": f"{type(exc).__name__}: {exc}"}
    facts: dict[str, Any] = {
        "importable": True,
        "import_error": None,
        "import_s": round(time.perf_counter() - started, 3),
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "arch_list": compiled_arch_list(torch) if torch.version.cuda else [],
    }
    facts.update(_cuda(torch))
    facts["cudnn"] = _cudnn(torch)
    facts["nccl"] = _nccl(torch)
    facts["torchvision"] = _torchvision()
    return facts


# What torch.__config__.show() prints of the build's nvcc flags: "-gencode arch=compute_90,code=sm_90" or
# "code=[sm_90,compute_90]" (CMake's cuda_select_nvcc_arch_flags form).
GENCODE = re.compile(r"-gencode[ ;=]arch=compute_\w+,code=\[?([\w,]+)\]?")


def compiled_arch_list(torch: Any) -> list[str]:
    """The architectures this build carries kernels for (sm_XY) and PTX (compute_XY), read without a device.
    torch.cuda.get_arch_list() answered [] whenever CUDA could not start (a hidden GPU, a broken driver) up to
    torch 2.14, though the list is compiled in: torch._C._cuda_getArchFlags() (what get_arch_list reads, torch
    1.5 on) answers it anyway; before it, the build's nvcc flags in torch.__config__.show()."""
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    with contextlib.suppress(Exception):
        listed = flags() if flags else None
        if listed:
            return str(listed).split()
    with contextlib.suppress(Exception):
        codes = [code for group in GENCODE.findall(torch.__config__.show()) for code in group.split(",")]
        return list(dict.fromkeys(codes))
    return []


def _cuda(torch: Any) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
    init_error = "; ".join(str(w.message).split("(Triggered internally")[0].strip() for w in caught) or None
    if not available and torch.version.cuda:
        try:
            torch.cuda.init()
        except Exception as exc:
            init_error = str(exc).strip()
    devices = [_device(torch, i) for i in range(_runtime_count(torch))] if available else []
    return {
        "cuda_available": available,
        "cuda_init_error": init_error,
        "device_count": len(devices),
        "devices": devices,
    }


def _runtime_count(torch: Any) -> int:
    """The devices CUDA gives this process, as `measure.cuda_devices` counts them (for the torch given here):
    uninitialised, torch counts through NVML, on a MIG node every parent GPU where CUDA enumerates one slice.
    A CUDA that does not initialise leaves torch's own count, so each device shows the error."""
    with contextlib.suppress(Exception):
        torch.cuda.init()
    return torch.cuda.device_count()


def _device(torch: Any, index: int) -> dict[str, Any]:
    """One device as torch numbers it; a device that fails to answer is that device's error, not a broken torch."""
    try:
        props = torch.cuda.get_device_properties(index)
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return {"index": index, "error": f"{type(exc).__name__}: {first_line[:300]}"}
    profile = mig_profile(props.name)
    return {
        "index": index,
        "name": props.name,
        "capability": [props.major, props.minor],
        "total_memory_mib": props.total_memory // 2**20,
        "sms": getattr(props, "multi_processor_count", None),
        "mig_profile": profile,
        "pci_bus_id": _pci_bus_id(props),
        "uuid": _uuid(props, "MIG-" if profile else "GPU-"),
    }


def mig_profile(name: str) -> str | None:
    """The MIG profile a device name carries ("NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb"), else None."""
    head, found, profile = name.rpartition(" MIG ")
    return profile.strip() if head and found and profile.strip() else None


def _uuid(props: Any, prefix: str) -> str | None:
    """NVML's form of the device UUID ("GPU-..." or "MIG-..."), which torch prints without the prefix."""
    text = str(getattr(props, "uuid", "") or "")
    if not text:
        return None
    return text if text.startswith(("GPU-", "MIG-")) else f"{prefix}{text}"


def _pci_bus_id(props: Any) -> str | None:
    if hasattr(props, "pci_bus_id"):
        return f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
    return None


def _cudnn(torch: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"available": False, "version": None, "compiled": None, "error": None}
    try:
        info["available"] = bool(torch.backends.cudnn.is_available())
        info["version"] = torch.backends.cudnn.version()
        compiled = torch._C._cudnn.getCompileVersion() if hasattr(torch._C, "_cudnn") else None
        info["compiled"] = list(compiled) if compiled else None
    except Exception as exc:
        info["error"] = str(exc).strip()
    return info


def _nccl(torch: Any) -> dict[str, Any]:
    import torch.distributed as dist

    info: dict[str, Any] = {
        "version": None,
        "error": None,
        "distributed": dist.is_available(),
        "nccl_backend": False,
        "gloo_backend": False,
    }
    if dist.is_available():
        info["nccl_backend"] = dist.is_nccl_available()
        info["gloo_backend"] = dist.is_gloo_available()
    if torch.version.cuda:
        try:
            version = torch.cuda.nccl.version()
            info["version"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        except Exception as exc:
            info["error"] = str(exc).strip()
    return info


def _torchvision() -> dict[str, Any]:
    """What the installed torchvision says of itself and whether its compiled ops load against this torch,
    without importing all of torchvision: the torch release it declares it needs (its Requires-Dist), the
    CUDA it was built with (`torchvision::_cuda_version`, -1 for a CPU build), and one `nms` on the CPU and,
    where CUDA works, on the GPU.

    Loading the extension library is what `import torchvision` does first and where a torchvision built
    for another torch fails ("operator torchvision::nms does not exist"); the rest of its import is slow.
    """
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return {"installed": False, "version": None, "ops_ok": False, "error": "torchvision is not installed"}
    info: dict[str, Any] = {
        "installed": True,
        "version": importlib.metadata.version("torchvision"),
        "requires_torch": _declared_torch(importlib.metadata.requires("torchvision") or []),
        "cuda": None,
        "ops_ok": False,
        "cuda_ops_ok": None,
        "error": None,
    }
    info.update(_torchvision_ops(spec.origin))
    return info


def _declared_torch(requirements: list[str]) -> str | None:
    """The version specifier a distribution's Requires-Dist gives torch (">=2.14.0", "==2.5.1"), "" for a bare
    `torch`, None when it does not name torch."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name.lower() == "torch" and (requirement.marker is None or requirement.marker.evaluate()):
            return str(requirement.specifier)
    return None


def _torchvision_ops(origin: str) -> dict[str, Any]:
    import glob
    import os

    import torch

    libraries = sorted(glob.glob(os.path.join(os.path.dirname(origin), "_C*.so")))
    found: dict[str, Any] = {}
    try:
        if not libraries:
            raise FileNotFoundError("torchvision has no compiled extension (_C*.so)")
        torch.ops.load_library(libraries[0])
        found["cuda"] = _cuda_text(int(torch.ops.torchvision._cuda_version()))
        boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
        torch.ops.torchvision.nms(boxes, torch.tensor([1.0, 0.5]), 0.5)
        found["ops_ok"] = True
    except Exception as exc:
        found["error"] = _first_line(exc)
        return found
    if torch.cuda.is_available():
        try:
            torch.ops.torchvision.nms(boxes.cuda(), torch.tensor([1.0, 0.5]).cuda(), 0.5)
            found["cuda_ops_ok"] = True
        except Exception as exc:
            found["cuda_ops_ok"], found["cuda_error"] = False, _first_line(exc)
    return found


def _cuda_text(version: int) -> str | None:
    """torchvision's CUDA version (12040 -> "12.4"); None for a CPU build (-1)."""
    return None if version <= 0 else f"{version // 1000}.{version % 1000 // 10}"


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


if __name__ == "__main__":
    from gpudoctor.workloads.isolate import die_with_parent

    die_with_parent()
    json.dump(gather(), sys.stdout)
    # The answer is written: leave without torch's interpreter teardown (0.4 s of the quick level's 2.6 s on a
    # 2-core CPU host, measured with bench/startup.py). The process holds nothing that needs closing; the
    # kernel and the driver release its memory and any CUDA context as they do for every ending process.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
