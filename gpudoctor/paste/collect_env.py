"""`python -m torch.utils.collect_env` output, in every layout it has had (torch 0.4 to 2.15, see
tests/fixtures/pastes/collect_env/FORMATS.md), and vLLM's copies of it: the torch-style layout and the sectioned
`Key : value` one (vllm/collect_env.py).

A block is a run of collect_env lines (labels, the GPU, cuDNN, CPU and package lists under them, blank lines,
vLLM's banners) with at most GAP other lines between two of them. It is read only when it holds two distinct
collect_env-specific labels ("PyTorch version", "Is CUDA available", ...): a lone "CUDA runtime version: 12.1"
printed by some script, or an "OS:" / "Python version:" line of an issue template, is not collect_env.
A label seen again starts a new block, so a before/after pair is two blocks and Found reports where they differ.

What each line means comes from torch/utils/collect_env.py (2.15.0 as installed here; the era of each label in
FORMATS.md): "Could not collect" is a None the script could not fill, "N/A" a field that does not apply, "No CUDA"
a CUDA field of a torch that sees no CUDA; none of them is recorded, except where the source pins their meaning
(see _cuda_built)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gpudoctor.paste.found import Found

READER = "collect_env"
GAP = 25  # other non-blank lines allowed between two collect_env lines of one block
MAX_GPUS = 256  # a "GPU 99999: x" line in junk must not grow the GPU list without bound

COLLECTING = "Collecting environment information..."
LIBRARIES = "Versions of relevant libraries"
GPU_MODELS = "GPU models and configuration"
CUDNN = "cuDNN version"
TORCH_VERSION = "PyTorch version"
CUDA_BUILT = "CUDA used to build PyTorch"
# Labels only collect_env prints; two distinct ones make a block collect_env's.
SPECIFIC = (
    TORCH_VERSION,
    "Is debug build",
    CUDA_BUILT,
    "ROCM used to build PyTorch",
    "ROCm SDK used to build PyTorch",
    "HIP used to build PyTorch",
    "XPU used to build PyTorch",
    "Is CUDA available",
    "CUDA runtime version",
    "CUDA_MODULE_LOADING set to",
    GPU_MODELS,
    "Nvidia driver version",
    CUDNN,
    "Is XPU available",
    "HIP runtime version",
    "MIOpen runtime version",
    "Is XNNPACK available",
    "Caching allocator config",
    LIBRARIES,
)
# A block needs two of these; the whole paste is searched for them first, most pastes hold fewer than two.
MARKERS = (COLLECTING, *SPECIFIC)
# A HIP version in any of these: a ROCm build, whose "GPU models" line is torch's name of an AMD GPU.
HIP_LABELS = ("ROCM used to build PyTorch", "HIP used to build PyTorch", "HIP runtime version")
# Labels other tools and issue templates print too: read only inside a block of collect_env's.
GENERIC = ("OS", "GCC version", "Clang version", "CMake version", "Libc version", "Python version", "Python platform")
CPU = "CPU"  # torch's "CPU:" label, vLLM's "CPU Info" section: lscpu / wmic / PowerShell lines up to a blank line
LABEL = re.compile(
    "("
    + "|".join(re.escape(label) for label in sorted((*SPECIFIC, *GENERIC, CPU), key=len, reverse=True))
    + r") *:(?: (.*))?$"
)
# vLLM's sectioned layout: a banner of "=" above and below each section title (the last one a label too).
SECTIONS = frozenset(
    (
        "System Info",
        "PyTorch Info",
        "Python Environment",
        "CUDA / GPU Info",
        "Intel XPU / GPU Info",
        "CPU Info",
        "vLLM Info",
        "Environment Variables",
        LIBRARIES,
    )
)
NOTHING = frozenset(("", "Could not collect", "N/A", "No CUDA", "None", "No relevant packages"))
QUOTE_OR_RANK = re.compile(r"(?:>[ \t]?)*[ \t]*(?:\[rank\d{1,6}\]:[ \t]?)?")
GPU_LINE = re.compile(r"GPU (\d{1,6}): (.+?)(?: \(UUID: (GPU-[0-9A-Fa-f-]{8,64})\))?$")
CUDNN_FILE = re.compile(
    r"(?:libcudnn[a-z_]{0,40}\.so\.(\d+(?:\.\d+)*)|libcudnn[a-z_]{0,40}\.(\d+(?:\.\d+)*)\.dylib|"
    r"cudnn[a-z_]{0,40}64_(\d+)\.dll)$",  # bounded: `[a-z_]*` rescanned the rest of the line from every "libcudnn"
    re.IGNORECASE,
)
PATH = re.compile(r"/|[A-Za-z]:\\")
PIP_PACKAGE = re.compile(r"\[(pip3?|conda)\] (\S+)(.*)$")
VERSION = re.compile(r"\d+\.\d+[0-9A-Za-z.+_-]{0,80}$")
DOTTED = re.compile(r"(\d+)\.(\d+)(?:\.\d+){0,3}$")
PYTHON = re.compile(r"(\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc)\d+)?)(?![\d.])")
NCCL_WHEEL = re.compile(r"nvidia-nccl-cu\d+$")
MACHINES = frozenset(("x86_64", "aarch64", "arm64", "ppc64le", "ppc64", "s390x", "armv7l", "i686", "riscv64"))
OS_MACHINE = re.compile(r"^(.*) \(([A-Za-z0-9_]+)\)$")

# Ubuntu release -> VERSION_CODENAME of its os-release (https://wiki.ubuntu.com/Releases): the fix engine picks
# Ubuntu's driver packages by codename (compat.driver_install).
UBUNTU_CODENAMES = {
    "14.04": "trusty",
    "16.04": "xenial",
    "16.10": "yakkety",
    "17.04": "zesty",
    "17.10": "artful",
    "18.04": "bionic",
    "18.10": "cosmic",
    "19.04": "disco",
    "19.10": "eoan",
    "20.04": "focal",
    "20.10": "groovy",
    "21.04": "hirsute",
    "21.10": "impish",
    "22.04": "jammy",
    "22.10": "kinetic",
    "23.04": "lunar",
    "23.10": "mantic",
    "24.04": "noble",
    "24.10": "oracular",
    "25.04": "plucky",
    "25.10": "questing",
    "26.04": "resolute",
}
# The distribution named by collect_env's OS line (lsb_release's Description or os-release's PRETTY_NAME) ->
# os-release(5) ID and the pattern of its VERSION_ID in that name.
DISTRIBUTIONS: tuple[tuple[str, str, re.Pattern[str] | None], ...] = (
    ("Ubuntu", "ubuntu", re.compile(r"Ubuntu (\d+\.\d+)\b")),
    ("Debian", "debian", re.compile(r"Debian GNU/Linux (\d+)\b")),
    ("CentOS", "centos", re.compile(r"CentOS(?: Linux| Stream)?(?: release)? (\d+)\b")),
    (
        "Red Hat Enterprise Linux",
        "rhel",
        re.compile(r"Red Hat Enterprise Linux(?: [A-Z][a-z]+)?(?: release)? (\d+(?:\.\d+)?)"),
    ),
    ("Rocky Linux", "rocky", re.compile(r"Rocky Linux(?: release)? (\d+(?:\.\d+)?)")),
    ("AlmaLinux", "almalinux", re.compile(r"AlmaLinux(?: release)? (\d+(?:\.\d+)?)")),
    ("Oracle Linux", "ol", re.compile(r"Oracle Linux(?: Server)?(?: release)? (\d+(?:\.\d+)?)")),
    ("Fedora", "fedora", re.compile(r"Fedora(?: Linux)?(?: release)? (\d+)\b")),
    ("Amazon Linux", "amzn", re.compile(r"Amazon Linux(?: AMI)?(?: release)? (\d+(?:\.\d+)?)")),
    ("SUSE Linux Enterprise Server", "sles", re.compile(r"SUSE Linux Enterprise Server (\d+)(?: SP(\d+))?")),
    ("openSUSE Leap", "opensuse-leap", re.compile(r"openSUSE Leap (\d+\.\d+)")),
    ("openSUSE Tumbleweed", "opensuse-tumbleweed", None),
    ("Arch Linux", "arch", None),
    ("Gentoo", "gentoo", None),
)
ID_LIKE = {"opensuse-leap": "suse opensuse", "opensuse-tumbleweed": "opensuse suse"}  # their os-release ID_LIKE


@dataclass
class Block:
    """One collect_env output: its label lines in order and the lists printed under them (0-based lines)."""

    labels: list[tuple[int, str, str]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    gpus: list[tuple[int, str]] = field(default_factory=list)
    cudnn: list[tuple[int, str]] = field(default_factory=list)
    packages: list[tuple[int, str, str, str]] = field(default_factory=list)  # line, manager, name, version
    others: int = 0  # non-blank lines not of collect_env since the last one that was

    def value(self, label: str) -> str | None:
        return next((value for _, name, value in self.labels if name == label), None)

    def accepted(self) -> bool:
        return len(self.seen.intersection(MARKERS)) >= 2


def read(found: Found) -> None:
    """Every collect_env block of the paste, its facts recorded in the snapshot's shape."""
    if not _may_hold(found.lines):
        return
    reader = _Reader(found)
    for index, line in enumerate(found.lines):
        reader.feed(index, line)
    reader.close()


def _may_hold(lines: list[str]) -> bool:
    """Whether two collect_env labels occur anywhere: most pastes are rejected here in a few substring scans."""
    text = "\n".join(lines)
    hits = 0
    for label in MARKERS:
        hits += label in text
        if hits >= 2:
            return True
    return False


def _clean(line: str) -> str:
    """The line without markdown quote markers, a `[rank0]: ` prefix, indentation and trailing blanks."""
    text = line.strip()
    if text[:1] in (">", "["):
        text = text[QUOTE_OR_RANK.match(text).end() :].strip()  # type: ignore[union-attr]
    return text


class _Reader:
    """One pass over the lines: blocks opened, filled and closed; each closed block recorded if accepted."""

    def __init__(self, found: Found) -> None:
        self.found = found
        self.block: Block | None = None
        self.mode: str | None = None  # "gpu", "cudnn" or "cpu": a list under the last label is being read

    def feed(self, index: int, line: str) -> None:
        text = _clean(line)
        if self.mode and self._continues(index, text):
            return
        self.mode = None
        if not text:
            return
        if text.startswith(COLLECTING):
            self._label(index, COLLECTING, "")
            while text.startswith(COLLECTING):  # a terminal copy can join the next line onto this one
                text = text[len(COLLECTING) :].strip()
            if not text:
                return
        match = LABEL.match(text)
        if match:
            self._label(index, match.group(1), (match.group(2) or "").strip())
        elif text.rstrip(":") == LIBRARIES:
            self._label(index, LIBRARIES, "")
        elif self.block is not None:
            self._other(index, text, self.block)

    def close(self) -> None:
        if self.block is not None and self.block.accepted():
            _record(self.found, self.block)
        self.block, self.mode = None, None

    def _continues(self, index: int, text: str) -> bool:
        """Whether `text` belongs to the list being read (and was taken)."""
        block = self.block
        if block is None:
            return False
        if self.mode == "gpu":
            match = GPU_LINE.match(text)
            if match:
                block.gpus.append((index, text))
            return bool(match) or text.startswith("MIG ")  # MIG devices under their GPU: not GPUs
        if self.mode == "cudnn":
            taken = "cudnn" in text.lower() and bool(PATH.match(text))
            if taken:
                block.cudnn.append((index, text))
            return taken
        ends = not text or LABEL.match(text) or text.startswith(("[pip", "[conda]")) or text in SECTIONS
        return not ends  # else a CPU line

    def _label(self, index: int, label: str, value: str) -> None:
        if self.block is not None and label in self.block.seen:
            self.close()
        if self.block is None:
            self.block = Block()
        self.block.labels.append((index, label, value))
        self.block.seen.add(label)
        self.block.others = 0
        if label == GPU_MODELS and not value:
            self.mode = "gpu"
        elif label == CUDNN:
            self.mode = "cudnn"
            if CUDNN_FILE.search(value):
                self.block.cudnn.append((index, value))
        elif label == CPU:
            self.mode = "cpu"

    def _other(self, index: int, text: str, block: Block) -> None:
        """A line that is no label, inside a block: a package line, a vLLM banner, or something else."""
        package = PIP_PACKAGE.match(text)
        if package:
            block.packages.append((index, package.group(1), *_package(package.group(1), package.group(2, 3))))
            block.others = 0
        elif text in SECTIONS or text.startswith("=" * 10):
            block.others = 0
            self.mode = "cpu" if text == "CPU Info" else None
        else:
            block.others += 1
            if block.others > GAP:
                self.close()


def _package(manager: str, parts: tuple[str, str]) -> tuple[str, str]:
    """(name, version) of a package line: pip's `name==1.0`, old pip's `name (1.0)`, conda's columns; the
    version "" where the line states none (`name @ url`, "Could not collect")."""
    name, rest = parts
    if manager == "conda":
        columns = rest.split()
        return name.lower(), columns[0] if columns else ""
    if "==" in name:
        name, _, version = name.partition("==")
        return name.lower(), version
    old = re.match(r" \((\S+)\)", rest)
    return name.lower(), old.group(1) if old else ""


def _record(found: Found, block: Block) -> None:
    """The facts an accepted block states."""
    rocm = any(_stated(block.value(label)) for label in HIP_LABELS)
    for index, label, value in block.labels:
        handler = HANDLERS.get(label)
        if handler:
            handler(found, index, value, block)
    _gpus(found, block, rocm)
    _cudnn(found, block)
    _packages(found, block)


def _stated(value: str | None) -> bool:
    return value is not None and value not in NOTHING


def _torch_version(found: Found, index: int, value: str, block: Block) -> None:
    """torch's own version; "N/A" where `import torch` failed (collect_env's TORCH_AVAILABLE false)."""
    if value == "N/A":
        found.fact("torch.importable", False, READER, index)
    elif VERSION.match(value):
        found.fact("torch.version", value, READER, index)
        found.fact("torch.importable", True, READER, index)


def _cuda_built(found: Found, index: int, value: str, block: Block) -> None:
    """torch.version.cuda. Where it is None, pretty_str prints "None" if torch sees no CUDA and nvcc,
    nvidia-smi -L and the driver query all failed, else "Could not collect": both a build without CUDA (a
    ROCm build prints "N/A" here, and a torch that did not import prints "N/A" on every torch line)."""
    stated_torch = VERSION.match(block.value(TORCH_VERSION) or "")
    if value == "None" or (value == "Could not collect" and stated_torch):
        found.fact("torch.cuda", None, READER, index)
    elif DOTTED.match(value):
        found.fact("torch.cuda", value, READER, index)


def _hip_built(found: Found, index: int, value: str, block: Block) -> None:
    """torch.version.hip: "ROCM used to build PyTorch" up to torch 2.14 and in vLLM's copies, "HIP used to
    build PyTorch" from 2.15 (whose "ROCm SDK used to build PyTorch" is torch.version.rocm, not read)."""
    if _stated(value) and VERSION.match(value):
        found.fact("torch.hip", value, READER, index)


def _cuda_available(found: Found, index: int, value: str, block: Block) -> None:
    """torch.cuda.is_available(): "Yes"/"No" before torch 1.7, "True"/"False" since."""
    answer = {"Yes": True, "True": True, "No": False, "False": False}.get(value)
    if answer is not None:
        found.fact("torch.cuda_available", answer, READER, index)


def _nvcc(found: Found, index: int, value: str, block: Block) -> None:
    """ "CUDA runtime version" is the `V12.4.99` of `nvcc --version` (get_running_cuda_version, regex
    `release .+ V(.*)`), not the runtime torch loads: the nvcc on PATH, in collect_nvcc's shape ("12.4").
    "Could not collect" is a failed `nvcc --version` (none on PATH, or it failed): not recorded."""
    match = DOTTED.match(value)
    if match:
        found.fact("system.nvcc.path", "nvcc", READER, index)
        found.fact("system.nvcc.version", f"{match.group(1)}.{match.group(2)}", READER, index)


def _driver(found: Found, index: int, value: str, block: Block) -> None:
    """The `Driver Version:` of nvidia-smi's table header."""
    if DOTTED.match(value):
        found.fact("nvml.driver_version", value, READER, index)


def _os(found: Found, index: int, value: str, block: Block) -> None:
    """get_os(): Linux "<lsb_release Description or PRETTY_NAME> (<machine>)", macOS "macOS <ver> (<machine>)",
    Windows wmic's caption or (2.9+) PowerShell's "<Caption> (<Version> <OSArchitecture>)"."""
    name, machine = value[:200], None
    match = OS_MACHINE.match(name)
    if match and match.group(2) in MACHINES:
        name, machine = match.group(1), match.group(2)
    system, release = _system_of(name, machine)
    if system:
        found.fact("system.os", system, READER, index)
    if machine and system in ("Linux", "Darwin"):
        found.fact("system.machine", machine, READER, index)
    if release:
        found.fact("system.os_release", release, READER, index)


def _system_of(name: str, machine: str | None) -> tuple[str | None, dict[str, str] | None]:
    """platform.system() of an OS line, and the os-release fields its distribution name gives."""
    if re.search(r"\bWindows\b", name):
        return "Windows", None
    if name.startswith(("macOS", "Mac OS", "OS X")):
        return "Darwin", None
    release = _os_release(name)
    if release is not None or name == "linux" or machine:
        return "Linux", release
    return None, None


def _os_release(name: str) -> dict[str, str] | None:
    """ID, VERSION_ID and VERSION_CODENAME (ID_LIKE where the fix engine needs it) of a known distribution."""
    for prefix, os_id, pattern in DISTRIBUTIONS:
        if not name.startswith(prefix):
            continue
        release = {"id": os_id}
        if os_id in ID_LIKE:
            release["id_like"] = ID_LIKE[os_id]
        match = pattern.match(name) if pattern else None
        if match:
            release["version_id"] = _version_id(os_id, match)
        if os_id == "ubuntu" and release.get("version_id") in UBUNTU_CODENAMES:
            release["version_codename"] = UBUNTU_CODENAMES[release["version_id"]]
        codename = re.search(r"\(([a-z]+)\)", name) if os_id == "debian" else None
        if codename:
            release["version_codename"] = codename.group(1)
        return release
    return None


def _version_id(os_id: str, match: re.Match[str]) -> str:
    """VERSION_ID as the distribution's os-release writes it: SLES "15.5" for 15 SP5, CentOS the major only,
    Amazon Linux 2023 "2023" (its name carries the point release)."""
    version = match.group(1)
    if os_id == "sles":
        return f"{version}.{match.group(2)}" if match.group(2) else version
    if os_id == "centos" or (os_id == "amzn" and int(version.split(".")[0]) >= 2022):
        return version.split(".")[0]
    return version


def _python(found: Found, index: int, value: str, block: Block) -> None:
    """sys.version (major.minor only before torch 1.9): "3.10.12 (main, ...) [GCC 11.4.0] (64-bit runtime)"."""
    match = PYTHON.match(value)
    if match:
        found.fact("system.python", match.group(1), READER, index)


def _python_platform(found: Found, index: int, value: str, block: Block) -> None:
    """platform.platform(): "Linux-5.15.0-...-with-glibc2.35", "Windows-10-10.0.22621-SP0", "macOS-12.5-arm64-..."."""
    system = {"Linux": "Linux", "Windows": "Windows", "macOS": "Darwin", "Darwin": "Darwin"}.get(value.split("-")[0])
    if system:
        found.fact("system.os", system, READER, index)


def _gpus(found: Found, block: Block, rocm: bool) -> None:
    """`nvidia-smi -L` without UUIDs, one "GPU i: name" a line (inline where there is one GPU). A bare name is
    torch's device name: on a ROCm build an AMD GPU (not NVML's), else an old script's only GPU."""
    rows = list(block.gpus)
    for index, label, value in block.labels:
        if label != GPU_MODELS or not _stated(value):
            continue
        if GPU_LINE.match(value):
            rows.insert(0, (index, value))
        elif not rocm and not re.search(r"\b(?:AMD|Radeon|gfx\d)", value):
            found.gpu(0, {"name": value[:200]}, READER, index)
    for index, text in rows:
        match = GPU_LINE.match(text)
        if match and int(match.group(1)) < MAX_GPUS:
            facts = {"name": match.group(2)[:200]}
            if match.group(3):
                facts["uuid"] = match.group(3)
            found.gpu(int(match.group(1)), facts, READER, index)


def _cudnn(found: Found, block: Block) -> None:
    """The libcudnn files ldconfig (Windows: `where cudnn*.dll`) lists, as the versions their names carry:
    what is on the system, not what torch loads (torch.cudnn.version is never set from it)."""
    versions: list[str] = []
    for _, text in block.cudnn:
        match = CUDNN_FILE.search(text)
        version = next((g for g in match.groups() if g), None) if match else None
        if version and version not in versions:
            versions.append(version)
    if versions:
        label_line = next(index for index, label, _ in block.labels if label == CUDNN)
        found.fact("system.cudnn_libraries", versions, READER, label_line)


def _packages(found: Found, block: Block) -> None:
    """torchvision, the NCCL wheel and (where the block lacks its own line) torch, from the pip list, else the
    conda list: pip is the Python collect_env ran in (`sys.executable -mpip list`), conda its environment."""
    pip: dict[str, tuple[int, str]] = {}
    conda: dict[str, tuple[int, str]] = {}
    for index, manager, name, version in block.packages:
        what = _which(manager, name.replace("_", "-"))
        if what and VERSION.match(version):
            (conda if manager == "conda" else pip).setdefault(what, (index, version))
    chosen = {**conda, **pip}
    if "torchvision" in chosen:
        index, version = chosen["torchvision"]
        found.fact("torch.torchvision.installed", True, READER, index)
        found.fact("torch.torchvision.version", version, READER, index)
    if "nccl" in chosen:
        index, version = chosen["nccl"]
        release = re.match(r"\d+\.\d+\.\d+", version)
        if release:
            found.fact("torch.nccl.version", release.group(0), READER, index)
    if "torch" in chosen and block.value(TORCH_VERSION) is None:
        index, version = chosen["torch"]
        found.fact("torch.version", version, READER, index)


def _which(manager: str, name: str) -> str | None:
    """Which package of interest a list line names: pip's `torch`, conda's `pytorch` (or `torch` from pypi)."""
    if name == "torchvision":
        return "torchvision"
    if name == "torch" or (manager == "conda" and name == "pytorch"):
        return "torch"
    if NCCL_WHEEL.match(name):
        return "nccl"
    return None


HANDLERS: dict[str, Callable[[Found, int, str, Block], None]] = {
    TORCH_VERSION: _torch_version,
    CUDA_BUILT: _cuda_built,
    "ROCM used to build PyTorch": _hip_built,
    "HIP used to build PyTorch": _hip_built,
    "Is CUDA available": _cuda_available,
    "CUDA runtime version": _nvcc,
    "Nvidia driver version": _driver,
    "OS": _os,
    "Python version": _python,
    "Python platform": _python_platform,
}
