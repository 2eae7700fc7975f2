"""The owner's cure for a paste's signature (`fix_from = "owner"` in its data): what the check that owns the cause
prints for the same facts, from the same fix engine (judging/compat.py, the owners' own judges), with what the paste
shows: the GPU's capability in the message, the CUDA version the driver reported, the torch build, the node's
distribution. A paste that shows less gets the commands of the newest default build, and says so.

Which cure is the owner's comes through the owning check's declaration (`@check(..., cure="gpu-arch")`), which the
package reads from the check modules' declarations (gpudoctor.declarations): the paste imports no check module, and
names no signature here.

Every value from the paste reaches a command through judging/commands.py's checked words only."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpudoctor import declarations
from gpudoctor.command import command
from gpudoctor.judging import compat, nvml_init
from gpudoctor.judging.commands import fix
from gpudoctor.judging.hardware import cuda_version_text
from gpudoctor.model import Remediation
from gpudoctor.paste import signatures


@dataclass
class Shown:
    """What the paste shows that a cure uses: the signature it matched, the values it caught, the facts, and the
    owner's own finding the signature's data says it stands for (`stands_for`, where it says one)."""

    signature: str
    values: dict[str, str]
    facts: dict[str, Any]
    stands_for: str = ""

    @property
    def torch(self) -> dict[str, Any]:
        return self.facts.get("torch") or {}

    @property
    def system(self) -> dict[str, Any]:
        return self.facts.get("system") or {}

    @property
    def platform(self) -> str:
        return compat.platform_key(self.system.get("os"), self.system.get("machine"))

    @property
    def os_release(self) -> dict[str, str] | None:
        return self.system.get("os_release")

    @property
    def apps(self) -> tuple[str, ...]:
        """The applications the paste shows by their own paths (signatures.APPS)."""
        return tuple((self.facts.get("paste") or {}).get("apps") or ())

    @property
    def driver(self) -> str | None:
        return (self.facts.get("nvml") or {}).get("driver_version")

    @property
    def python(self) -> str | None:
        """The bundled Python the paste's paths show (compat.BUNDLED_PIP), whose pip installs torch there."""
        return (self.facts.get("paste") or {}).get("python")

    def installed(self) -> compat.Build | None:
        """The torch build the paste shows, where it is a CUDA build."""
        if self.torch.get("version") and self.torch.get("cuda"):
            return compat.installed_build(self.torch, self.platform)
        return None

    def capabilities(self) -> list[tuple[int, int]]:
        """The GPU's capability the message names (`sm_120`, `3.5`, `(CC) 12.0`), else every GPU's in the paste,
        else those of the GPUs its sentences name (paste/prose.py)."""
        said = capability(self.values.get("capability", ""))
        if said:
            return [said]
        for gpus in ((self.facts.get("nvml") or {}).get("gpus"), (self.facts.get("prose") or {}).get("gpus")):
            found = [tuple(g["compute_capability"]) for g in gpus or () if len(g.get("compute_capability") or ()) == 2]
            if found:
                return list(dict.fromkeys(found))
        return []


def capability(text: str) -> tuple[int, int] | None:
    """`120` (sm_120), `86`, `3.5` or `12.0` as (major, minor)."""
    dotted = re.fullmatch(r"(\d{1,2})\.(\d)", text)
    if dotted:
        return int(dotted.group(1)), int(dotted.group(2))
    packed = re.fullmatch(r"(\d{1,2})(\d)", text)
    return (int(packed.group(1)), int(packed.group(2))) if packed else None


def _arch(shown: Shown) -> Remediation:
    """A GPU torch has no kernels for: the build that has them, keeping this driver where it can, else with the
    driver it needs (torch.arch's own fix)."""
    capabilities = shown.capabilities()
    if not capabilities:
        return _arch_unnamed(shown)
    if shown.driver is None:
        return _least_driver(capabilities, shown) or compat.driver_fix(
            capabilities, None, shown.platform, shown.os_release, shown.installed()
        )
    return compat.driver_fix(capabilities, shown.driver, shown.platform, shown.os_release, shown.installed())


def _lowest(chosen: compat.Build) -> tuple[int, int] | None:
    """The oldest GPU architecture a build ships a kernel for (its lowest `sm_XY`)."""
    found = [capability(arch.removeprefix("sm_")) for arch in chosen.arch if arch.startswith("sm_")]
    return min((c for c in found if c), default=None)


def _arch_unnamed(shown: Shown) -> Remediation:
    """A message that names no GPU: the GPU is newer than the build's architectures or older, and both are common
    (a new board under an older wheel, an old board under a wheel that dropped it). The two commands that tell
    which, with the newest build (the newest GPUs) to install; instead, the newest build that still ships kernels
    for older GPUs than that one (torch.toml [[build]] arch lists)."""
    look = [
        "nvidia-smi --query-gpu=name,compute_cap --format=csv",
        "python -c 'import torch; print(torch.__version__, torch.cuda.get_arch_list())'",
    ]
    newest = compat.newest_build([], shown.platform)
    floor = _lowest(newest) if newest else None
    if newest is None or floor is None:
        return Remediation(
            "Read the GPU's compute capability and the build's arch list, then install a build that lists it.", look
        )
    older = next((b for b in compat.cuda_builds(shown.platform) if (_lowest(b) or floor) < floor), None)
    lowest = _lowest(older) if older else None
    instead = (
        fix(
            f"A GPU older than sm_{floor[0]}{floor[1]}: {older.name} still ships kernels from "
            f"sm_{lowest[0]}{lowest[1]} on.",
            lambda: [compat.install_command(older, python=shown.python)],
        )
        if older and lowest
        else None
    )
    return fix(
        "The message does not name the GPU: the first command shows its compute capability (as sm_XY), the second "
        f"the architectures this torch ships. A GPU newer than them: {newest.name} ships kernels for "
        f"{newest.arch[0]} to {newest.arch[-1]}.",
        lambda: [*look, compat.install_command(newest, python=shown.python)],
        instead=instead,
    )


def _least_driver(capabilities: list[tuple[int, int]], shown: Shown) -> Remediation | None:
    """With the driver unknown: the newest release's build with kernels for these GPUs that asks the least of the
    driver (the one most likely to run as it is), its minimum driver said; the newest build the other way."""
    fitting = [b for b in compat.cuda_builds(shown.platform) if compat.covers(b, capabilities)]
    newest = [b for b in fitting if fitting and b.torch == fitting[0].torch]
    needs = {b: compat.toolkit_minimum(b.toolkit, shown.platform) for b in newest}
    known = sorted((b for b in newest if needs[b]), key=lambda b: compat.version(needs[b]))
    if not known:
        return None
    least = known[0]
    other = compat.driver_fix(capabilities, None, shown.platform, shown.os_release, shown.installed())
    return fix(
        f"Install {least.name}, which has kernels for {', '.join(f'sm_{a}{b}' for a, b in capabilities)} and needs "
        f"driver >= {needs[least]} (the paste does not show the driver: `nvidia-smi` does).",
        lambda: ["nvidia-smi | head -4", compat.install_command(least, python=shown.python)],
        instead=other if other.commands and compat.install_command(least) not in other.commands else None,
    )


def _driver_too_old(shown: Shown) -> Remediation:
    """The driver older than torch's CUDA: keep it and install the newest build it runs, or upgrade it (the
    reported CUDA version bounds the driver from below)."""
    found = shown.values.get("found")
    cuda = cuda_version_text(int(found)) if found and found.isascii() and found.isdigit() and len(found) <= 6 else None
    driver = shown.driver or (compat.toolkit_minimum(cuda, shown.platform) if cuda else None)
    way = compat.driver_fix(shown.capabilities(), driver, shown.platform, shown.os_release, shown.installed())
    said = f"The driver reports CUDA {cuda} (so it is at least {driver}). " if cuda and not shown.driver else ""
    return Remediation(said + way.why, way.commands, way.instead, way.source)


def _no_driver(shown: Shown) -> Remediation | None:
    """driver.nvml's own fix for the NVML status the paste stands for (nvml_init.INIT_FINDINGS: a missing library
    unless the signature's data says otherwise, as `stands_for = "driver-not-loaded"`), with the install commands
    for the build the paste shows (or the default one) on its distribution."""
    status = shown.stands_for or "library-not-found"
    return nvml_init.failure({"status": status}, shown.system, shown.torch)[1]


def _cuda_build(shown: Shown) -> Remediation:
    """A CPU-only torch where a GPU was asked for: the CUDA build of the same release where the tables know one,
    else the default build, replacing the installed one."""
    release = compat.release_of(shown.torch.get("version")) if shown.torch.get("version") else ""
    default = compat.default_build(shown.platform)
    chosen = compat.build(release, default.tag, shown.platform) if release else None
    target = chosen or default
    needs = compat.toolkit_minimum(target.toolkit, shown.platform)
    return fix(
        f"This torch is a CPU-only build: install {target.name}"
        + (f" (it needs driver >= {needs}: `nvidia-smi` shows the driver)." if needs else "."),
        lambda: [compat.install_command(target, force=True, python=shown.python)],
    )


def _torchvision(shown: Shown) -> Remediation:
    """torchvision built for another torch: the release paired with this torch, keeping torch as it is; the
    default pair where the paste shows no torch."""
    if shown.torch.get("version"):
        wanted = compat.paired_torchvision(str(shown.torch["version"]))
        return fix(
            f"Install the torchvision built for torch {shown.torch['version']}; this keeps torch as it is.",
            lambda: [compat.same_build_command(shown.torch, wanted)],
        )
    default = compat.default_build(shown.platform)
    return fix(
        "torch and torchvision must come from one build: reinstall both together (the paste shows no torch version; "
        "`python -m torch.utils.collect_env` does).",
        lambda: [compat.install_command(default, force=True, python=shown.python)],
    )


# A CUDA toolkit library whose soname carries its CUDA major (CUDA's libcudart.so.12, libcublas.so.11; before CUDA
# 11 the release, libcudart.so.10.1): a build for one major does not load another's (CUDA Toolkit Release Notes,
# "CUDA Compatibility": binary compatibility holds within a major release).
CUDA_SONAME = re.compile(
    r"lib(?:cudart|cublasLt|cublas|cufft|curand|cusolver|cusparse|nvrtc|nvJitLink|cupti)\.so\.(\d{1,2})(?:\.\d{1,3}){0,2}"
)


def _shadowed_library(shown: Shown) -> Remediation:
    """A CUDA library that does not load or is of another release: a package built for another CUDA major than
    torch's where the paste shows one (a traceback in it, its pip install), else most often LD_LIBRARY_PATH putting a
    system or conda copy before torch's own (the pip nvidia-* packages), else a broken install."""
    other = _package_of_other_cuda(shown)
    if other is not None:
        return other
    if "tensorflow" in shown.apps and not shown.torch:
        return TENSORFLOW_LIBRARIES
    target = shown.installed() or compat.default_build(shown.platform)
    return fix(
        "torch loads the CUDA libraries of its own pip packages (nvidia-*); a system or conda copy first on "
        "LD_LIBRARY_PATH, or a half-installed package, gives this. Try without LD_LIBRARY_PATH; if that works, "
        f"remove the entry; else reinstall {target.name}.",
        lambda: [
            'echo "$LD_LIBRARY_PATH"',
            "env -u LD_LIBRARY_PATH python -c 'import torch; print(torch.cuda.is_available())'",
            compat.install_command(target, force=True, python=shown.python),
        ],
    )


# TensorFlow loads the CUDA and cuDNN of the release it was built with (TensorFlow, Install TensorFlow with pip,
# https://www.tensorflow.org/install/pip: on Linux `pip install tensorflow[and-cuda]` from 2.14; the tested build
# configurations, https://www.tensorflow.org/install/source#gpu, name each release's CUDA and cuDNN).
TENSORFLOW_LIBRARIES = Remediation(
    "TensorFlow loads the CUDA and cuDNN libraries of the release it was built with, and this environment lacks one "
    "(its line names it). From TensorFlow 2.14 on, pip installs them with it on Linux; older releases need that CUDA "
    "and cuDNN installed and on the library path. torch is not involved.",
    [
        "pip install 'tensorflow[and-cuda]'  # Linux, TensorFlow 2.14 and later: its CUDA and cuDNN as pip packages",
        "python -c 'import tensorflow as tf; print(tf.__version__, tf.sysconfig.get_build_info())'  # the CUDA and "
        "cuDNN releases it was built with: an older release needs exactly those",
    ],
    source="TensorFlow, Install TensorFlow with pip; TensorFlow, tested build configurations (GPU)",
)


def _package_of_other_cuda(shown: Shown) -> Remediation | None:
    """A package (not torch) whose import wants CUDA M's runtime where torch is of another major or not shown: the
    package's build for torch's CUDA, or built from source against it; or a torch built for CUDA M. None where the
    library is no CUDA major's, the paste shows no such package, or torch is of the same major (its own path)."""
    soname = CUDA_SONAME.fullmatch(shown.values.get("library", ""))
    package = (shown.facts.get("paste") or {}).get("package")
    torch_cuda = str(shown.torch.get("cuda") or "")
    if soname is None or not package or torch_cuda.split(".")[0] == soname.group(1):
        return None
    major = soname.group(1)
    said = f" and torch here for CUDA {torch_cuda}" if torch_cuda else ""
    builds = [b for b in compat.cuda_builds(shown.platform) if (b.toolkit or "").split(".")[0] == major]
    instead = (
        fix(
            f"Or keep {package} and install a torch built for CUDA {major}, as {package} was.",
            lambda: [compat.install_command(builds[0], force=True, python=shown.python)],
        )
        if builds
        else None
    )
    return fix(
        f"{package} loads CUDA {major}'s runtime, which this environment lacks: it was built for CUDA {major}{said}. "
        f"Install {package}'s build for torch's CUDA (its release or wheel index names each build's CUDA), or build "
        "it from source against this torch.",
        lambda: [
            "python -c 'import torch; print(torch.__version__, torch.version.cuda)'  # torch's CUDA: the package's "
            "build must be for its major (a cu118 wheel for CUDA 11.8, cu121 for 12.1)",
            command(
                "pip show {package}  # the version installed; its releases say which CUDA each build is for",
                package=package,
            ),
            command(
                "pip install --force-reinstall --no-deps --no-build-isolation --no-binary {package} {package}  "
                "# or build it from source against this torch and its CUDA",
                package=package,
            ),
        ],
        instead=instead,
    )


def _extension_toolkit(shown: Shown) -> Remediation:
    """A C++/CUDA extension built with another toolkit than torch's: point CUDA_HOME at torch's."""
    cuda = shown.values.get("torch_cuda") or shown.torch.get("cuda")
    if not cuda:
        return Remediation(
            "Build extensions with the CUDA toolkit of torch's CUDA major.",
            ["python -c 'import torch; print(torch.version.cuda)'", "nvcc --version"],
        )
    return fix(
        f"torch was built with CUDA {cuda}: build extensions with that toolkit (CUDA_HOME), not the one on PATH.",
        lambda: [command('export CUDA_HOME=/usr/local/cuda-{version} PATH="$CUDA_HOME/bin:$PATH"', version=cuda)],
    )


def toolkit_for_arch(code: int) -> tuple[str, bool] | None:
    """The CUDA toolkit that compiles for sm_<code> (nvidia.toml [toolkit_newest_arch], [toolkit_oldest_arch]):
    the first that knows it, or where the newest no longer does (an old GPU), the last; and whether it is the
    last. None where no toolkit in the tables knows it."""
    table = compat.nvidia_table()
    newest, oldest = table["toolkit_newest_arch"], table["toolkit_oldest_arch"]
    toolkits = sorted(newest, key=compat.version)
    knows = [t for t in toolkits if oldest.get(t, 0) <= code <= newest[t]]
    if not knows:
        return None
    dropped = code < oldest.get(toolkits[-1], 0)
    return (knows[-1], True) if dropped else (knows[0], False)


def _nvcc_toolkit(shown: Shown) -> Remediation:
    """torch.nvcc's cure: the toolkit for the architecture nvcc did not know, where the paste names one, else
    torch's own toolkit for its extensions."""
    return _nvcc_arch(shown) if "arch" in shown.values else _extension_toolkit(shown)


def _nvcc_arch(shown: Shown) -> Remediation:
    """nvcc without the GPU's architecture: build with a toolkit that has it (CUDA_HOME), of torch's CUDA major."""
    arch = shown.values.get("arch", "")
    found = toolkit_for_arch(int(arch)) if arch.isascii() and arch.isdigit() else None
    if found is None:
        return Remediation(
            "Build with a CUDA toolkit that lists this architecture (`nvcc --list-gpu-arch`).",
            ["nvcc --version", "nvcc --list-gpu-arch"],
        )
    toolkit, last = found
    which = f"CUDA {toolkit} is the last toolkit that" if last else f"CUDA {toolkit} is the first toolkit that"
    return fix(
        f"{which} compiles for sm_{arch}: install it (or a {'older' if last else 'newer'} one of torch's CUDA "
        "major) and build with it through CUDA_HOME.",
        lambda: [
            "nvcc --version  # the toolkit that failed",
            "python -c 'import torch; print(torch.version.cuda)'  # torch's CUDA: build with a toolkit of its major",
            command('export CUDA_HOME=/usr/local/cuda-{version} PATH="$CUDA_HOME/bin:$PATH"', version=toolkit),
        ],
    )


def _nccl_cuda(shown: Shown) -> Remediation:
    """NCCL's "unhandled cuda error": the CUDA error under it is in NCCL's own log."""
    return Remediation(
        "NCCL hit a CUDA error it does not handle; NCCL's log names it (often a GPU fault, P2P or an out of memory).",
        [
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P python train.py 2>&1 | grep -iE 'WARN|cuda'",
            "sudo dmesg -T | grep -iE 'xid|nvrm'",
        ],
    )


def _cudnn(shown: Shown) -> Remediation:
    """A cuDNN of another release than torch's: torch's own pip package, and nothing on LD_LIBRARY_PATH first."""
    major = str(shown.torch.get("cuda") or compat.default_build(shown.platform).toolkit or "12").split(".")[0]
    return fix(
        "torch needs the cuDNN it was built with (same major, same or newer minor): a system or conda cuDNN "
        "found first on LD_LIBRARY_PATH shadows torch's own.",
        lambda: [
            'echo "$LD_LIBRARY_PATH"',
            command("pip install --force-reinstall nvidia-cudnn-cu{major}", major=major),
        ],
    )


# Each cure by the name a check's declaration gives it (`@check(..., cure=...)`).
CURES: dict[str, Callable[[Shown], Remediation | None]] = {
    "driver-too-old": _driver_too_old,
    "no-driver": _no_driver,
    "cuda-build": _cuda_build,
    "gpu-arch": _arch,
    "cudnn": _cudnn,
    "shadowed-library": _shadowed_library,
    "nvcc-toolkit": _nvcc_toolkit,
    "torchvision": _torchvision,
    "nccl-cuda": _nccl_cuda,
}


def cured() -> list[str]:
    """The signatures that get their owner's cure: their data says so (`fix_from = "owner"`) and their owning
    check's declaration names a cure of CURES."""
    named = declarations.cures()
    return sorted(s.id for s in signatures.table().values() if s.fix_from == "owner" and named.get(s.owner) in CURES)


def cure(signature_id: str, values: dict[str, str], facts: dict[str, Any]) -> Remediation | None:
    """The owner's remediation for this sighting, or None where the signature's owner declares no cure."""
    signature = signatures.table().get(signature_id)
    build = CURES.get(declarations.cures().get(signature.owner, "")) if signature else None
    return build(Shown(signature_id, values, facts, signature.stands_for)) if build and signature else None
