"""The installed torch build against this machine: driver, compute capability, cuDNN, NCCL, torchvision, nvcc."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpudoctor.api import (
    Metric,
    Remediation,
    Result,
    Row,
    Status,
    check,
    command,
    compat,
    cuda_version_text,
    fix,
    from_rows,
    gpu_for_cuda_index,
    gpu_row,
    usable,
    visible,
    word,
)

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext, Command


def default_command(platform: str = "linux_x86_64", force: bool = False) -> Command:
    """What to install where torch is missing or broken: the newest release's default build for this platform
    (`force`: replacing what is installed, a broken torch and the CUDA libraries it pulls in)."""
    return compat.install_command(compat.default_build(platform), force)


def cuda_major(torch: dict[str, Any]) -> str:
    """The major of torch's CUDA, as the word a package name ends in (nvidia-cudnn-cu12); Unsafe where the fact
    is not a version."""
    return word(str(torch["cuda"]).split(".")[0], "number")


def judge_import(torch: dict[str, Any], platform: str = "linux_x86_64") -> Result:
    if torch.get("importable"):
        build = f"CUDA {torch['cuda']}" if torch.get("cuda") else "CPU-only"
        return Result(
            Status.PASS,
            f"torch {torch['version']} ({build})",
            metrics=[Metric("torch_version", torch["version"]), Metric("torch_cuda", torch.get("cuda"))],
        )
    error = torch.get("import_error") or "unknown error"
    return Result(Status.FAIL, f"torch does not import: {error}", remediation=_import_fix(error, platform))


def _import_fix(error: str, platform: str) -> Remediation:
    install = default_command(platform)
    if "No module named 'torch'" in error:
        return Remediation("torch is not installed in this Python environment.", [install])
    if "undefined symbol" in error or "cannot open shared object" in error or ".so" in error:
        return Remediation(
            "A CUDA library that torch loads is missing or shadowed by another copy (often a "
            "system CUDA on LD_LIBRARY_PATH ahead of pip's nvidia-* packages).",
            [
                "echo $LD_LIBRARY_PATH",
                "env -u LD_LIBRARY_PATH python -c 'import torch'",
                default_command(platform, True),
            ],
        )
    return Remediation(
        "Reinstall torch into a clean virtual environment.",
        ["python -m venv fresh && . fresh/bin/activate", install],
    )


def capabilities(gpus: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [tuple(g["compute_capability"]) for g in gpus if g.get("compute_capability")]


def nvml_capabilities(nvml: dict[str, Any]) -> list[tuple[int, int]]:
    return capabilities([g for g in nvml.get("gpus", []) if usable(g)])


def judge_cuda_driver(
    torch: dict[str, Any],
    nvml: dict[str, Any],
    platform: str = "linux_x86_64",
    os_release: dict[str, str] | None = None,
) -> Result:
    """The driver against the CUDA release torch was actually built with (an official wheel's toolkit update,
    e.g. 13.0.2 for cu130), on this platform: below the CUDA family's minimum it cannot run; between that and
    the build's own minimum it runs through minor-version compatibility only."""
    built = torch.get("cuda")
    driver = nvml.get("driver_version")
    if not built:
        return Result(Status.SKIP, "CPU-only torch build (see torch.cuda-available)")
    installed = compat.installed_build(torch, platform)
    toolkit = installed.toolkit or built
    family_min = compat.family_minimum(built, platform)  # None before CUDA 11: no minor-version compatibility
    toolkit_min = compat.toolkit_minimum(toolkit, platform)
    hard_min = family_min or toolkit_min
    metrics = [
        Metric(
            "driver_version",
            driver,
            expected=f">= {toolkit_min or family_min}",
            expected_source=f"CUDA {toolkit} release notes (the toolkit torch {torch.get('version')} was built with)",
        )
    ]
    forward = compat.cuda_error(torch.get("cuda_init_error"))
    if forward and forward["code"] in FORWARD_COMPAT_ERRORS:
        return Result(
            Status.SKIP,
            f"CUDA did not initialise (error {forward['code']}: {forward['message']}): the CUDA library loaded is "
            "not the driver's own, so the driver's version does not say what runs; see torch.cuda-available",
            metrics=metrics,
        )
    if not hard_min or not driver:
        return Result(Status.WARN, f"no minimum driver known for CUDA {built}", metrics=metrics)
    if compat.older(driver, hard_min):
        return Result(
            Status.FAIL,
            f"driver {driver} is too old for torch's CUDA {toolkit} (it needs >= {hard_min})",
            metrics=metrics,
            remediation=compat.driver_fix(nvml_capabilities(nvml), driver, platform, os_release, installed),
        )
    if toolkit_min and compat.older(driver, toolkit_min):
        return Result(
            Status.WARN,
            f"driver {driver} runs CUDA {toolkit} only through minor-version compatibility "
            f"(full support from {toolkit_min}): no PTX JIT for newer code",
            metrics=metrics,
            remediation=fix(
                "Upgrade the driver for full CUDA support.",
                lambda: compat.driver_install(toolkit_min, os_release, platform),
            ),
        )
    return Result(Status.PASS, f"driver {driver} supports torch's CUDA {toolkit}", metrics=metrics)


def judge_driver_for_wheels(
    nvml: dict[str, Any], platform: str = "linux_x86_64", os_release: dict[str, str] | None = None
) -> Result:
    """A capture judged without torch facts: which official torch builds this driver runs with kernels for
    every GPU in it. The torch the node uses is unknown, so a driver that runs only older builds warns and
    names the newest it runs; it never fails."""
    driver = nvml.get("driver_version")
    if not driver:
        return Result(Status.SKIP, "the driver version is not in this capture")
    caps = nvml_capabilities(nvml)
    newest = compat.newest_build(caps, platform)
    cuda = cuda_version_text(nvml.get("cuda_driver_version"))
    cure = compat.driver_fix(caps, driver, platform, os_release)
    if newest is None:
        return Result(Status.WARN, f"no official torch build has kernels for these GPUs ({cure.why})", remediation=cure)
    minimum = compat.toolkit_minimum(newest.toolkit, platform)
    metrics = [
        Metric(
            "driver_version",
            driver,
            expected=f">= {minimum}",
            expected_source=f"CUDA {newest.toolkit} release notes (torch {newest.torch}'s default build, {newest.tag})",
        )
    ]
    keep = compat.keep_driver_build(caps, driver, platform)
    if keep and keep.torch == newest.torch and compat.driver_runs(driver, keep) == "full":
        note = "" if keep == newest else f"; {newest.tag} needs >= {minimum}"
        return Result(Status.PASS, f"driver {driver} runs {keep.name}, the newest torch{note}", metrics=metrics)
    runs = f"runs {keep.name} at the newest" if keep else "runs no official torch CUDA build"
    if keep:
        cure.why = f"Driver {driver} (CUDA {cuda}): {compat.runs_summary(keep, driver, caps)}. {cure.why}"
    return Result(
        Status.WARN, f"driver {driver} {runs}; {newest.name} needs >= {minimum}", metrics=metrics, remediation=cure
    )


# CUDA errors of a user-space driver library other than the kernel driver's (forward-compatibility libraries):
# 803 cudaErrorSystemDriverMismatch, 804 cudaErrorCompatNotSupportedOnDevice (CUDA Compatibility guide).
FORWARD_COMPAT_ERRORS = (803, 804)


def judge_cuda_available(
    torch: dict[str, Any],
    nvml: dict[str, Any],
    env: dict[str, str],
    platform: str = "linux_x86_64",
    os_release: dict[str, str] | None = None,
) -> Result:
    gpus = [g for g in nvml.get("gpus", []) if usable(g)]
    if not gpus:
        detail = "" if not torch.get("cuda") else " (a CUDA build, but this machine has no usable NVIDIA GPU)"
        return Result(Status.SKIP, f"NVML sees no GPU{detail}")
    if not torch.get("cuda"):
        return Result(
            Status.FAIL,
            f"torch {torch.get('version')} is a CPU-only build on a machine with {len(gpus)} NVIDIA GPUs",
            remediation=compat.driver_fix(capabilities(gpus), nvml.get("driver_version"), platform, os_release),
        )
    broken = [d for d in torch.get("devices") or [] if d.get("error")]
    if broken:
        return Result(
            Status.FAIL,
            "; ".join(f"torch cannot read cuda:{d['index']}: {d['error']}" for d in broken),
            remediation=Remediation(
                "A GPU CUDA lists but cannot query is failing or wedged; the kernel log says which.",
                ["sudo dmesg | grep -iE 'nvrm|xid'", "nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER"],
            ),
        )
    if torch.get("cuda_available"):
        seen = torch.get("device_count")
        return Result(Status.PASS, f"torch sees {seen} GPUs" if seen is not None else "CUDA is available to torch")
    error = torch.get("cuda_init_error") or "no error message"
    why, commands = _cuda_init_cause(error, env, gpus)
    return Result(
        Status.FAIL,
        f"NVML sees {len(gpus)} GPUs but torch cannot use them: {first_words(error)}",
        remediation=Remediation(why, commands),
        detail=f"torch.cuda.is_available() is False: {error}",
    )


def first_words(error: str, room: int = 80) -> str:
    """An error's gist for a verdict line: its first sentence without the exception's type, cut at a word (the
    whole stays in the result's detail)."""
    text = re.sub(r"^\w+(?:\.\w+)*(?:Error|Exception|Warning): ", "", " ".join(error.split()))
    text = re.split(r"(?<=[a-z0-9)])\.\s", text, maxsplit=1)[0]
    return text if len(text) <= room else text[: room - 1].rsplit(" ", 1)[0] + "…"


def judge_cuda_unavailable_without_driver(
    torch: dict[str, Any], platform: str, os_release: dict[str, str] | None
) -> Result:
    """A paste of a CUDA build that says CUDA is not available and shows no driver answering (collect_env
    runs nvidia-smi for the driver version: "Could not collect" is nvidia-smi failing or missing)."""
    build = compat.installed_build(torch, platform)
    minimum = compat.toolkit_minimum(build.toolkit, platform) or compat.family_minimum(build.toolkit, platform)
    return Result(
        Status.FAIL,
        f"torch {torch.get('version')} is a CUDA {torch['cuda']} build, but no NVIDIA driver answered",
        remediation=fix(
            "Without a loaded NVIDIA driver (or, in a container, without the GPUs passed in: --gpus all) torch "
            f"cannot use a GPU; this build needs driver >= {minimum}."
            if minimum
            else "torch needs the driver.",
            lambda: [
                "nvidia-smi  # must list the GPUs; if it fails, the driver is missing or not loaded",
                *(compat.driver_install(minimum, os_release, platform) if minimum else []),
            ],
        ),
    )


def _cuda_init_cause(error: str, env: dict[str, str], gpus: list[dict[str, Any]]) -> tuple[str, list[str]]:
    text = error.lower()
    value = env.get("CUDA_VISIBLE_DEVICES")
    seen = visible.visible(value, gpus) if value is not None else None
    if seen is not None and not seen.shown and not seen.mig:
        said = f": {seen.invalid!r} names no GPU here ({visible.present(gpus)})" if seen.invalid else ""
        said = f": it names {seen.invalid!r} twice" if seen.repeated else said
        return (f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA{said}.", ["unset CUDA_VISIBLE_DEVICES"])
    if "too old" in text or "insufficient" in text:
        return ("The driver is older than the CUDA release torch was built with.", ["nvidia-smi | head -4"])
    known = compat.cuda_error(error)
    if known:
        why = f"CUDA error {known['code']} ({known['runtime']}): {known['meaning']} Usual cause: {known['cause']}."
        return (f"{why} {known['fix']}", compat.error_commands(known))
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


def judge_arch(
    torch: dict[str, Any],
    gpus: list[dict[str, Any]],
    driver: str | None,
    platform: str = "linux_x86_64",
    os_release: dict[str, str] | None = None,
) -> Result:
    if not torch.get("cuda"):
        return Result(Status.SKIP, "CPU-only torch build")
    arch_list = torch.get("arch_list") or []
    if not arch_list:  # an empty list is CUDA not starting (torch before 2.15 said so), never the build's
        return Result(Status.SKIP, "the build's arch list could not be read (see torch.cuda-available)")
    devices = device_capabilities(torch, gpus)
    rows = []
    for gpu in devices:
        cap = tuple(gpu["compute_capability"])
        ok = compat.covered(cap, arch_list, torch.get("cuda"))
        verdict = "covered" if ok else "has no kernels in this build"
        rows.append(gpu_row(gpu, Status.PASS if ok else Status.FAIL, f"sm_{cap[0]}{cap[1]} {verdict}"))
    way = compat.driver_fix(capabilities(devices), driver, platform, os_release)
    cure = Remediation(
        f"This torch ships kernels for {' '.join(arch_list)} only; training fails with 'no kernel image is "
        f"available'. {way.why}",
        way.commands,
        way.instead,
    )
    said = f"every GPU's architecture is in torch's arch list ({arch_list[0]} to {arch_list[-1]})"
    return from_rows(rows, said, cure)


def cudnn_version_tuple(version: int) -> tuple[int, int, int]:
    """cuDNN 9 encodes 9.24.0 as 92400; cuDNN 8 encodes 8.9.7 as 8907."""
    if version >= 90000:
        return version // 10000, version % 10000 // 100, version % 100
    return version // 1000, version % 1000 // 100, version % 100


def judge_cudnn(torch: dict[str, Any]) -> Result:
    if not torch.get("cuda"):
        return Result(Status.SKIP, "CPU-only torch build")
    info = torch.get("cudnn") or {}
    cure = fix(
        "torch needs the cuDNN it was built with (same major, same or newer minor).",
        lambda: [
            command("pip install --force-reinstall nvidia-cudnn-cu{major}", major=cuda_major(torch)),
            "echo $LD_LIBRARY_PATH  # an older system cuDNN listed here shadows pip's",
        ],
    )
    if info.get("error"):
        return Result(Status.FAIL, f"cuDNN does not load: {info['error']}", remediation=cure)
    if not info.get("available") or not info.get("version"):
        return Result(Status.FAIL, "cuDNN is not available: convolutions fall back or fail", remediation=cure)
    runtime = cudnn_version_tuple(info["version"])
    compiled = tuple(info["compiled"]) if info.get("compiled") else None
    text = ".".join(map(str, runtime))
    if compiled and (runtime[0] != compiled[0] or runtime[1] < compiled[1]):
        return Result(
            Status.FAIL,
            f"cuDNN {text} loaded, torch was built with {'.'.join(map(str, compiled))}",
            remediation=cure,
        )
    return Result(Status.PASS, f"cuDNN {text}", metrics=[Metric("cudnn_version", text)])


def judge_nccl(
    torch: dict[str, Any], gpus: list[dict[str, Any]] | None = None, platform: str = "linux_x86_64"
) -> Result:
    info = torch.get("nccl") or {}
    if not info.get("distributed"):
        return Result(
            Status.FAIL,
            "torch.distributed is not available in this build",
            remediation=Remediation("Install an official torch build.", [default_command(force=True)]),
        )
    if not torch.get("cuda"):
        status = Status.PASS if info.get("gloo_backend") else Status.FAIL
        return Result(status, f"CPU-only build: gloo {'available' if status == Status.PASS else 'missing'}")
    if not info.get("nccl_backend") or not info.get("version"):
        return Result(
            Status.FAIL,
            f"NCCL is not usable: {info.get('error') or 'backend missing'}",
            remediation=fix(
                "Multi-GPU training on one node needs NCCL.",
                lambda: [command("pip install --force-reinstall nvidia-nccl-cu{major}", major=cuda_major(torch))],
            ),
        )
    summary = f"NCCL {info['version']}, gloo {'available' if info.get('gloo_backend') else 'missing'}"
    metric = Metric("nccl_version", info["version"])
    devices = device_capabilities(torch, gpus or [])
    rows = [_nccl_row(info["version"], gpu) for gpu in devices]
    if not any(r.status == Status.FAIL for r in rows):
        return Result(Status.PASS, summary, metrics=[metric])
    newest = compat.newest_build(capabilities(devices), platform)
    cure = fix(
        "NCCL ships kernels for the GPU architectures it knows; an older NCCL fails its first collective on a "
        f"newer GPU. {f'{newest.name} brings a newer NCCL.' if newest else ''}",
        lambda: [
            compat.install_command(newest)
            if newest
            else command("pip install -U nvidia-nccl-cu{major}", major=cuda_major(torch))
        ],
    )
    return from_rows(rows, summary, cure, metrics=[metric])


def _nccl_row(nccl: str, gpu: dict[str, Any]) -> Row:
    cap = tuple(gpu["compute_capability"])
    support = compat.nccl_support(cap)
    if support and compat.older(nccl, support["first_nccl"]):
        text = f"NCCL {nccl} predates {support['name']} (sm_{cap[0]}{cap[1]}): it needs NCCL >= {support['first_nccl']}"
        return gpu_row(gpu, Status.FAIL, text)
    return gpu_row(gpu, Status.PASS, f"NCCL {nccl} knows sm_{cap[0]}{cap[1]}")


def judge_torchvision(torch: dict[str, Any]) -> Result:
    """torchvision against this torch, asking the installed stack first: the torch release torchvision's own
    metadata declares, its compiled ops loading (on the CPU, and on a GPU where CUDA works), its build variant
    against torch's; the release pairing of PyTorch's table only where torchvision declares nothing."""
    info = torch.get("torchvision") or {}
    have, torch_version = info.get("version"), str(torch.get("version", ""))
    wanted = compat.paired_torchvision(torch_version)
    cure = fix(
        f"torchvision must be a release built for torch {torch_version}; this keeps torch as it is.",
        lambda: [compat.same_build_command(torch, wanted)],
    )
    if not info.get("installed"):
        return Result(
            Status.SKIP,
            "torchvision is not installed: optional (ddp.train trains gpudoctor's own ResNet); the command installs "
            "the one built for this torch",
            remediation=cure,
        )
    problem = _torchvision_problem(torch, info, wanted)
    if problem:
        return Result(Status.FAIL, problem, remediation=cure)
    declared = info.get("requires_torch")
    said = f" (declares torch{declared})" if declared else ""
    where = " on the CPU and the GPU" if info.get("cuda_ops_ok") else ""
    summary = f"torchvision {have}{said}, compiled ops load{where}{compat.tables_note(torch_version)}"
    return Result(Status.PASS, summary, metrics=[Metric("torchvision_version", have)])


# torchvision 0.3.0 (2019-05) brought its first C++/CUDA ops (nms, roi_align): before it, any torch ran it
# (https://github.com/pytorch/vision/releases/tag/v0.3.0).
FIRST_COMPILED_TORCHVISION = "0.3.0"


def judge_torchvision_pairing(torch: dict[str, Any]) -> Result:
    """What a paste (a pip list, collect_env) shows of torchvision: its release against PyTorch's pairing for
    this torch, and the CUDA variants their local versions name (+cu121 beside +cu124)."""
    info, torch_version = torch["torchvision"], str(torch["version"])
    have, wanted = str(info["version"]), compat.paired_torchvision(torch_version)
    cure = fix(
        f"torchvision must be a release built for torch {torch_version}; this keeps torch as it is.",
        lambda: [compat.same_build_command(torch, wanted)],
    )
    if compat.version(have) and compat.version(have) < compat.version(FIRST_COMPILED_TORCHVISION):
        return Result(Status.PASS, f"torchvision {have} is pure Python (compiled ops came in 0.3): any torch runs it")
    if wanted and compat.release_of(have).split(".")[:2] != wanted.split(".")[:2]:
        return Result(
            Status.FAIL, f"torchvision {have} is not built for torch {torch_version} (PyTorch pairs it with {wanted})",
            remediation=cure,
        )  # fmt: skip
    ours, theirs = _variant(have), _variant(torch_version)
    if ours and theirs and ours != theirs:
        summary = f"torchvision {have} is a {ours} build beside torch {torch_version}"
        return Result(Status.FAIL, summary, remediation=cure)
    return Result(
        Status.PASS,
        f"torchvision {have} pairs with torch {torch_version} (its ops: not in this paste)",
        metrics=[Metric("torchvision_version", have)],
    )


def _variant(version: str) -> str | None:
    """The build variant a local version names: "cu121", "cpu", "rocm6.1"; None where it names none (a source
    build's "+d94043a" is a commit)."""
    local = version.partition("+")[2]
    return local if re.fullmatch(r"cu\d+|cpu|rocm[\d.]+|xpu", local) else None


def _torchvision_problem(torch: dict[str, Any], info: dict[str, Any], wanted: str | None) -> str | None:
    """What makes this torchvision unusable with this torch, in the order a user meets it; None if nothing."""
    have, torch_version = info["version"], str(torch.get("version", ""))
    declared = info.get("requires_torch")
    if declared is not None and not _satisfies(torch_version, declared):
        return f"torchvision {have} declares torch{declared}; this torch is {torch_version}"
    if declared is None and wanted and compat.release_of(have).split(".")[:2] != wanted.split(".")[:2]:
        return f"torchvision {have} is not built for torch {torch_version} (PyTorch pairs it with {wanted})"
    if not info.get("ops_ok"):
        return f"torchvision {have}'s compiled ops do not load: {info.get('error')}"
    if torch.get("cuda") and "cuda" in info:
        variant = info.get("cuda")
        if variant is None:
            return f"torchvision {have} is a CPU build beside torch's CUDA {torch['cuda']}: its GPU ops are missing"
        if variant.split(".")[0] != torch["cuda"].split(".")[0]:
            return f"torchvision {have} is built for CUDA {variant}, torch for CUDA {torch['cuda']}"
    if info.get("cuda_ops_ok") is False:
        return f"torchvision {have}'s GPU ops fail: {info.get('cuda_error')}"
    return None


def _satisfies(torch_version: str, declared: str) -> bool:
    """Whether this torch meets a declared specifier (a local tag such as +cu130 is ignored, as pip does)."""
    try:
        return SpecifierSet(declared).contains(compat.release_of(torch_version), prereleases=True)
    except InvalidSpecifier:
        return True


def judge_nvcc(torch: dict[str, Any], nvcc: dict[str, Any]) -> Result:
    if not nvcc.get("path"):
        return Result(Status.SKIP, "no nvcc on PATH (needed only to build CUDA extensions)")
    if not torch.get("cuda") or not nvcc.get("version"):
        return Result(Status.PASS, f"nvcc {nvcc.get('version')} at {nvcc['path']}")
    if nvcc["version"].split(".")[0] != torch["cuda"].split(".")[0]:
        cuda = torch["cuda"]
        return Result(
            Status.WARN,
            f"nvcc {nvcc['version']} on PATH but torch uses CUDA {cuda}: "
            "extension builds (apex, flash-attn, DeepSpeed ops) will fail",
            remediation=fix(
                "Point CUDA_HOME and PATH at a toolkit of torch's CUDA major.",
                lambda: [
                    command('export CUDA_HOME=/usr/local/cuda-{version} PATH="$CUDA_HOME/bin:$PATH"', version=cuda)
                ],
            ),
        )
    return Result(Status.PASS, f"nvcc {nvcc['version']} matches torch's CUDA {torch['cuda']}")


@check("torch.import", "torch imports", uses=("torch",), cure="shadowed-library")
def torch_imports(ctx: CheckContext) -> Result:
    """torch imports; when it does not, the real cause (missing library, shadowed .so)."""
    if lacking := ctx.lacks("torch", "importable"):
        return Result(Status.SKIP, lacking)
    return judge_import(ctx.torch, ctx.platform)


@check(
    "torch.cuda-driver",
    "Driver is new enough for torch's CUDA",
    needs=("nvml",),
    uses=("torch", "system"),
    cure="driver-too-old",
)
def cuda_driver(ctx: CheckContext) -> Result:
    """torch.version.cuda against the driver's minimum (minor-version compatibility included); judging a
    capture without torch facts, the driver against every current torch CUDA wheel."""
    os_release = ctx.system.get("os_release")
    if "torch" not in ctx.gathered:
        return judge_driver_for_wheels(ctx.nvml, ctx.platform, os_release)
    if not ctx.torch.get("importable"):
        return Result(Status.SKIP, "torch does not import; see torch.import")
    if lacking := ctx.lacks("torch", "cuda") or ctx.lacks("nvml", "driver_version"):
        return Result(Status.SKIP, lacking)
    return judge_cuda_driver(ctx.torch, ctx.nvml, ctx.platform, os_release)


@check("torch.cuda-available", "torch can use the GPUs", needs=("torch",), uses=("nvml", "system"), cure="cuda-build")
def cuda_available(ctx: CheckContext) -> Result:
    """A CUDA build that initialises CUDA where NVML sees GPUs; when not, the cause."""
    if lacking := ctx.lacks("torch", "cuda", "cuda_available"):
        return Result(Status.SKIP, lacking)
    system = ctx.system
    if ctx.lacks("nvml", "driver_version") and ctx.torch.get("cuda") and ctx.torch.get("cuda_available") is False:
        return judge_cuda_unavailable_without_driver(ctx.torch, ctx.platform, system.get("os_release"))
    return judge_cuda_available(ctx.torch, ctx.nvml, system.get("env", {}), ctx.platform, system.get("os_release"))


@check("torch.arch", "torch has kernels for every GPU", needs=("torch", "nvml"), uses=("system",), cure="gpu-arch")
def arch(ctx: CheckContext) -> Result:
    """Each GPU's compute capability against torch's compiled arch list, by torch's own loading rule."""
    if lacking := ctx.lacks("torch", "cuda", "arch_list"):
        return Result(Status.SKIP, lacking)
    driver = ctx.nvml.get("driver_version")
    return judge_arch(ctx.torch, ctx.gpus, driver, ctx.platform, ctx.system.get("os_release"))


@check("torch.cudnn", "cuDNN loads and matches", needs=("torch",), cure="cudnn")
def cudnn(ctx: CheckContext) -> Result:
    """cuDNN is available and its runtime version is compatible with the one torch was built with."""
    if lacking := ctx.lacks("torch", "cuda", "cudnn.available"):
        return Result(Status.SKIP, lacking)
    return judge_cudnn(ctx.torch)


@check(
    "torch.nccl",
    "NCCL backend available and new enough for the GPUs",
    needs=("torch",),
    uses=("nvml", "system"),
    cure="nccl-cuda",
)
def nccl(ctx: CheckContext) -> Result:
    """torch.distributed with NCCL (GPU builds) and gloo; the NCCL version against each GPU's architecture
    (the first NCCL release with its kernels, nvidia.toml [[nccl_arch]])."""
    if lacking := ctx.lacks("torch", "cuda", "nccl.distributed"):
        return Result(Status.SKIP, lacking)
    return judge_nccl(ctx.torch, ctx.gpus, ctx.platform)


@check("torch.torchvision", "torchvision matches torch", needs=("torch",), cure="torchvision")
def torchvision(ctx: CheckContext) -> Result:
    """torchvision is the release paired with this torch and its compiled ops load."""
    if lacking := ctx.lacks("torch", "version", "torchvision.version"):
        return Result(Status.SKIP, lacking)
    if ctx.lacks("torch", "torchvision.ops_ok"):
        return judge_torchvision_pairing(ctx.torch)
    return judge_torchvision(ctx.torch)


@check("torch.nvcc", "nvcc matches torch's CUDA", needs=("torch", "nvcc"), cure="nvcc-toolkit")
def nvcc(ctx: CheckContext) -> Result:
    """nvcc on PATH against torch.version.cuda (extension builds need the same major)."""
    if lacking := ctx.lacks("torch", "cuda"):
        return Result(Status.SKIP, lacking)
    return judge_nvcc(ctx.torch, ctx.system.get("nvcc", {}))
