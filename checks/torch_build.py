"""The installed torch build against this machine: driver, compute capability, cuDNN, NCCL, torchvision, nvcc."""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.facts.identity import gpu_for_cuda_index
from gpudoctor.facts.nvml import usable
from gpudoctor.hardware import cuda_table, cuda_version_text
from gpudoctor.model import Metric, Remediation, Result, Status, from_rows, gpu_row
from gpudoctor.registry import check
from gpudoctor.runner import CheckContext, live_gpus

WHEEL_INDEX = "https://download.pytorch.org/whl"


def wheel_for(driver: str | None = None, capabilities: list[tuple[int, int]] = ()) -> str:
    """The newest torch CUDA wheel this driver runs (minor-version compatibility: the driver must reach
    the wheel's CUDA family minimum) that has code for every GPU."""
    table = cuda_table()
    for wheel in table["wheel"]:
        family_min = table["family_minimum"][wheel["tag"][2:-1]]
        if (driver is None or not _older(driver, family_min)) and all(
            arch_supported(cap, wheel["arches"]) for cap in capabilities
        ):
            return wheel["tag"]
    return table["wheel"][-1]["tag"]


def pip_command(tag: str) -> str:
    return f"pip install --force-reinstall torch torchvision --index-url {WHEEL_INDEX}/{tag}"


def arch_supported(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """torch's loading rule: a cubin sm_XY runs on X.Z for Z >= Y; PTX compute_XY JIT-compiles for any newer GPU.

    Arch-specific cubins (sm_90a) run only on exactly that GPU.
    """
    major, minor = capability
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        specific = digits.endswith(("a", "f"))
        number = int(digits.rstrip("af"))
        arch_major, arch_minor = divmod(number, 10)
        if kind == "sm" and arch_major == major and (arch_minor == minor or (not specific and arch_minor <= minor)):
            return True
        if kind == "compute" and (arch_major, arch_minor) <= (major, minor):
            return True
    return False


def judge_import(torch: dict[str, Any]) -> Result:
    if torch.get("importable"):
        build = f"CUDA {torch['cuda']}" if torch.get("cuda") else "CPU-only"
        return Result(
            "torch.import",
            Status.PASS,
            f"torch {torch['version']} ({build})",
            metrics=[Metric("torch_version", torch["version"]), Metric("torch_cuda", torch.get("cuda"))],
        )
    error = torch.get("import_error") or "unknown error"
    return Result("torch.import", Status.FAIL, f"torch does not import: {error}", remediation=_import_fix(error))


def _import_fix(error: str) -> Remediation:
    if "No module named 'torch'" in error:
        return Remediation("torch is not installed in this Python environment.", [pip_command("cu130")])
    if "undefined symbol" in error or "cannot open shared object" in error or ".so" in error:
        return Remediation(
            "A CUDA library that torch loads is missing or shadowed by another copy (often a "
            "system CUDA on LD_LIBRARY_PATH ahead of pip's nvidia-* packages).",
            ["echo $LD_LIBRARY_PATH", "env -u LD_LIBRARY_PATH python -c 'import torch'", pip_command("cu130")],
        )
    return Remediation(
        "Reinstall torch into a clean virtual environment.",
        ["python -m venv fresh && . fresh/bin/activate", pip_command("cu130")],
    )


def judge_cuda_driver(torch: dict[str, Any], nvml: dict[str, Any]) -> Result:
    built = torch.get("cuda")
    driver = nvml.get("driver_version")
    if not built:
        return Result("torch.cuda-driver", Status.SKIP, "CPU-only torch build (see torch.cuda-available)")
    table = cuda_table()
    major = built.split(".")[0]
    family_min = table["family_minimum"].get(major)
    toolkit_min = table["toolkit_minimum"].get(built, family_min)
    metrics = [
        Metric("driver_version", driver, expected=f">= {toolkit_min}", expected_source=f"CUDA {built} release notes")
    ]
    if not family_min or not driver:
        return Result("torch.cuda-driver", Status.WARN, f"no minimum driver known for CUDA {built}", metrics=metrics)
    driver_cuda = cuda_version_text(nvml.get("cuda_driver_version"))
    if _older(driver, family_min):
        return Result(
            "torch.cuda-driver",
            Status.FAIL,
            f"torch is built for CUDA {built}, which needs driver >= {family_min}; this node has {driver}",
            metrics=metrics,
            remediation=Remediation(
                f"Upgrade the driver to >= {toolkit_min}, or install the torch build for the CUDA "
                f"release this driver supports ({driver_cuda}).",
                [pip_command(wheel_for(driver)), "nvidia-smi | head -4"],
            ),
        )
    if toolkit_min and _older(driver, toolkit_min):
        return Result(
            "torch.cuda-driver",
            Status.WARN,
            f"driver {driver} runs CUDA {built} only through minor-version compatibility "
            f"(full support from {toolkit_min}): no PTX JIT for newer code",
            metrics=metrics,
            remediation=Remediation(
                "Upgrade the driver for full CUDA support.",
                [f"sudo apt install nvidia-driver-{toolkit_min.split('.')[0]}-server"],
            ),
        )
    return Result("torch.cuda-driver", Status.PASS, f"driver {driver} supports torch's CUDA {built}", metrics=metrics)


def _older(found: str, minimum: str) -> bool:
    try:
        return Version(found) < Version(minimum)
    except InvalidVersion:
        return False


def judge_cuda_available(torch: dict[str, Any], nvml: dict[str, Any], env: dict[str, str]) -> Result:
    gpus = [g for g in nvml.get("gpus", []) if usable(g)]
    if not gpus:
        detail = "" if not torch.get("cuda") else " (a CUDA build, but this machine has no usable NVIDIA GPU)"
        return Result("torch.cuda-available", Status.SKIP, f"NVML sees no GPU{detail}")
    if not torch.get("cuda"):
        caps = [tuple(g["compute_capability"]) for g in gpus if g.get("compute_capability")]
        return Result(
            "torch.cuda-available",
            Status.FAIL,
            f"torch {torch.get('version')} is a CPU-only build on a machine with {len(gpus)} NVIDIA GPUs",
            remediation=Remediation(
                "Install a CUDA build of torch.", [pip_command(wheel_for(nvml.get("driver_version"), caps))]
            ),
        )
    broken = [d for d in torch.get("devices") or [] if d.get("error")]
    if broken:
        return Result(
            "torch.cuda-available",
            Status.FAIL,
            "; ".join(f"torch cannot read cuda:{d['index']}: {d['error']}" for d in broken),
            remediation=Remediation(
                "A GPU CUDA lists but cannot query is failing or wedged; the kernel log says which.",
                ["sudo dmesg | grep -iE 'nvrm|xid'", "nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER"],
            ),
        )
    if torch.get("cuda_available"):
        return Result("torch.cuda-available", Status.PASS, f"torch sees {torch.get('device_count')} GPUs")
    error = torch.get("cuda_init_error") or "no error message"
    why, commands = _cuda_init_cause(error, env)
    return Result(
        "torch.cuda-available",
        Status.FAIL,
        f"NVML sees {len(gpus)} GPUs but torch.cuda.is_available() is False: {error}",
        remediation=Remediation(why, commands),
    )


def _cuda_init_cause(error: str, env: dict[str, str]) -> tuple[str, list[str]]:
    text = error.lower()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and ("no cuda-capable device" in text or "invalid device" in text or visible == ""):
        return (f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from CUDA.", ["unset CUDA_VISIBLE_DEVICES"])
    if "too old" in text or "insufficient" in text:
        return ("The driver is older than the CUDA release torch was built with.", ["nvidia-smi | head -4"])
    if "802" in text or "system not yet initialized" in text:
        return (
            "Error 802 on NVSwitch systems means the fabric manager is not running.",
            ["sudo systemctl enable --now nvidia-fabricmanager"],
        )
    if "found no nvidia driver" in text:
        return (
            "NVML works but CUDA finds no driver: libcuda.so is missing from this environment "
            "(a container without the CUDA driver library mounted).",
            ["ldconfig -p | grep libcuda"],
        )
    return ("CUDA could not initialise; the kernel log usually says why.", ["sudo dmesg | grep -iE 'nvrm|xid'"])


def device_capabilities(torch: dict[str, Any], gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each GPU with its compute capability: torch's devices where it sees them, each reported as the physical
    GPU it is (CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER renumber them), else NVML's GPUs."""
    devices = [d for d in torch.get("devices") or [] if "capability" in d]
    if devices:
        return [
            {**gpu_for_cuda_index(d["index"], devices, gpus), "compute_capability": d["capability"]} for d in devices
        ]
    return [g for g in gpus if g.get("compute_capability")]


def judge_arch(torch: dict[str, Any], gpus: list[dict[str, Any]], driver: str | None) -> Result:
    if not torch.get("cuda"):
        return Result("torch.arch", Status.SKIP, "CPU-only torch build")
    arch_list = torch.get("arch_list") or []
    rows = []
    for gpu in device_capabilities(torch, gpus):
        cap = tuple(gpu["compute_capability"])
        ok = arch_supported(cap, arch_list)
        rows.append(
            gpu_row(
                gpu,
                Status.PASS if ok else Status.FAIL,
                f"sm_{cap[0]}{cap[1]} {'covered' if ok else 'has no kernels in this build'}",
            )
        )
    caps = [tuple(g["compute_capability"]) for g in device_capabilities(torch, gpus)]
    tag = wheel_for(driver, caps)
    return from_rows(
        "torch.arch",
        rows,
        f"every GPU's compute capability is in torch's arch list ({' '.join(arch_list)})",
        Remediation(
            f"This torch ships kernels for {' '.join(arch_list)} only; training fails with 'no kernel "
            f"image is available'. The {tag} build covers these GPUs.",
            [pip_command(tag)],
        ),
    )


def cudnn_version_tuple(version: int) -> tuple[int, int, int]:
    """cuDNN 9 encodes 9.24.0 as 92400; cuDNN 8 encodes 8.9.7 as 8907."""
    if version >= 90000:
        return version // 10000, version % 10000 // 100, version % 100
    return version // 1000, version % 1000 // 100, version % 100


def judge_cudnn(torch: dict[str, Any]) -> Result:
    if not torch.get("cuda"):
        return Result("torch.cudnn", Status.SKIP, "CPU-only torch build")
    info = torch.get("cudnn") or {}
    fix = Remediation(
        "torch needs the cuDNN it was built with (same major, same or newer minor).",
        [
            f"pip install --force-reinstall nvidia-cudnn-cu{torch['cuda'].split('.')[0]}",
            "echo $LD_LIBRARY_PATH  # an older system cuDNN listed here shadows pip's",
        ],
    )
    if info.get("error"):
        return Result("torch.cudnn", Status.FAIL, f"cuDNN does not load: {info['error']}", remediation=fix)
    if not info.get("available") or not info.get("version"):
        return Result(
            "torch.cudnn", Status.FAIL, "cuDNN is not available: convolutions fall back or fail", remediation=fix
        )
    runtime = cudnn_version_tuple(info["version"])
    compiled = tuple(info["compiled"]) if info.get("compiled") else None
    text = ".".join(map(str, runtime))
    if compiled and (runtime[0] != compiled[0] or runtime[1] < compiled[1]):
        return Result(
            "torch.cudnn",
            Status.FAIL,
            f"cuDNN {text} loaded, torch was built with {'.'.join(map(str, compiled))}",
            remediation=fix,
        )
    return Result("torch.cudnn", Status.PASS, f"cuDNN {text}", metrics=[Metric("cudnn_version", text)])


def judge_nccl(torch: dict[str, Any]) -> Result:
    info = torch.get("nccl") or {}
    if not info.get("distributed"):
        return Result(
            "torch.nccl",
            Status.FAIL,
            "torch.distributed is not available in this build",
            remediation=Remediation("Install an official torch build.", [pip_command("cu130")]),
        )
    if not torch.get("cuda"):
        status = Status.PASS if info.get("gloo_backend") else Status.FAIL
        return Result(
            "torch.nccl", status, f"CPU-only build: gloo {'available' if status == Status.PASS else 'missing'}"
        )
    if not info.get("nccl_backend") or not info.get("version"):
        return Result(
            "torch.nccl",
            Status.FAIL,
            f"NCCL is not usable: {info.get('error') or 'backend missing'}",
            remediation=Remediation(
                "Multi-GPU training on one node needs NCCL.",
                [f"pip install --force-reinstall nvidia-nccl-cu{torch['cuda'].split('.')[0]}"],
            ),
        )
    return Result(
        "torch.nccl",
        Status.PASS,
        f"NCCL {info['version']}, gloo {'available' if info.get('gloo_backend') else 'missing'}",
        metrics=[Metric("nccl_version", info["version"])],
    )


def expected_torchvision(torch_version: str) -> str | None:
    """torchvision 0.(N+15) pairs with torch 2.N (torchvision's compatibility table)."""
    try:
        release = Version(torch_version).release
    except InvalidVersion:
        return None
    return f"0.{release[1] + 15}" if release[0] == 2 else None


def judge_torchvision(torch: dict[str, Any]) -> Result:
    info = torch.get("torchvision") or {}
    want = expected_torchvision(torch.get("version", ""))
    command = f"pip install --force-reinstall 'torchvision=={want}.*'" if want else "pip install torchvision"
    if torch.get("cuda"):
        command += f" --index-url {WHEEL_INDEX}/cu{torch['cuda'].replace('.', '')}"
    fix = Remediation(f"torchvision must be the release built for torch {torch.get('version')}.", [command])
    if not info.get("installed"):
        return Result("torch.torchvision", Status.FAIL, "torchvision is not installed", remediation=fix)
    have = Version(info["version"]).base_version
    if want and not have.startswith(want + "."):
        return Result(
            "torch.torchvision",
            Status.FAIL,
            f"torchvision {info['version']} is not built for torch {torch.get('version')} (wants {want}.x)",
            remediation=fix,
        )
    if not info.get("ops_ok"):
        return Result(
            "torch.torchvision",
            Status.FAIL,
            f"torchvision's compiled ops do not load: {info.get('error')}",
            remediation=fix,
        )
    return Result("torch.torchvision", Status.PASS, f"torchvision {info['version']}, compiled ops load")


def judge_nvcc(torch: dict[str, Any], nvcc: dict[str, Any]) -> Result:
    if not nvcc.get("path"):
        return Result("torch.nvcc", Status.SKIP, "no nvcc on PATH (needed only to build CUDA extensions)")
    if not torch.get("cuda") or not nvcc.get("version"):
        return Result("torch.nvcc", Status.PASS, f"nvcc {nvcc.get('version')} at {nvcc['path']}")
    if nvcc["version"].split(".")[0] != torch["cuda"].split(".")[0]:
        major = torch["cuda"]
        return Result(
            "torch.nvcc",
            Status.WARN,
            f"nvcc {nvcc['version']} on PATH but torch uses CUDA {major}: "
            "extension builds (apex, flash-attn, DeepSpeed ops) will fail",
            remediation=Remediation(
                "Point CUDA_HOME and PATH at a toolkit of torch's CUDA major.",
                [f"export CUDA_HOME=/usr/local/cuda-{major} PATH=/usr/local/cuda-{major}/bin:$PATH"],
            ),
        )
    return Result("torch.nvcc", Status.PASS, f"nvcc {nvcc['version']} matches torch's CUDA {torch['cuda']}")


@check("torch.import", "torch imports")
def torch_imports(ctx: CheckContext) -> Result:
    """torch imports; when it does not, the real cause (missing library, shadowed .so)."""
    return judge_import(ctx.torch)


@check("torch.cuda-driver", "Driver is new enough for torch's CUDA", needs=("torch", "nvml"))
def cuda_driver(ctx: CheckContext) -> Result:
    """torch.version.cuda against the driver's minimum (minor-version compatibility included)."""
    return judge_cuda_driver(ctx.torch, ctx.nvml)


@check("torch.cuda-available", "torch can use the GPUs", needs=("torch",))
def cuda_available(ctx: CheckContext) -> Result:
    """A CUDA build that initialises CUDA where NVML sees GPUs; when not, the cause."""
    return judge_cuda_available(ctx.torch, ctx.nvml, ctx.system.get("env", {}))


@check("torch.arch", "torch has kernels for every GPU", needs=("torch", "nvml"))
def arch(ctx: CheckContext) -> Result:
    """Each GPU's compute capability against torch's compiled arch list, by torch's own loading rule."""
    return judge_arch(ctx.torch, live_gpus(ctx.facts), ctx.nvml.get("driver_version"))


@check("torch.cudnn", "cuDNN loads and matches", needs=("torch",))
def cudnn(ctx: CheckContext) -> Result:
    """cuDNN is available and its runtime version is compatible with the one torch was built with."""
    return judge_cudnn(ctx.torch)


@check("torch.nccl", "NCCL backend available", needs=("torch",))
def nccl(ctx: CheckContext) -> Result:
    """torch.distributed with NCCL (GPU builds) and gloo; the NCCL version."""
    return judge_nccl(ctx.torch)


@check("torch.torchvision", "torchvision matches torch", needs=("torch",))
def torchvision(ctx: CheckContext) -> Result:
    """torchvision is the release paired with this torch and its compiled ops load."""
    return judge_torchvision(ctx.torch)


@check("torch.nvcc", "nvcc matches torch's CUDA", needs=("torch",))
def nvcc(ctx: CheckContext) -> Result:
    """nvcc on PATH against torch.version.cuda (extension builds need the same major)."""
    return judge_nvcc(ctx.torch, ctx.system.get("nvcc", {}))
