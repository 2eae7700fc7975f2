"""Which torch releases exist, what pairs with each, and what each needs: the compatibility knowledge the
torch-build judges and their fixes share, read from gpudoctor/data/torch.toml (PyTorch's releases, their
torchvision and builds) and gpudoctor/data/nvidia.toml (CUDA's minimum drivers, NVIDIA's errors, driver
branches and the packages distributions name them by). Pure: no torch, no NVML; each table cites its sources
and says the newest release it knows.

What the installed stack says outranks these tables (the judges ask it first); the tables answer what cannot
be asked: which builds exist, which driver each needs, and what to install instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.hardware import load_data

WHEEL_INDEX = "https://download.pytorch.org/whl"
FIND_LINKS = f"{WHEEL_INDEX}/torch_stable.html"


def torch_table() -> dict[str, Any]:
    return load_data("torch.toml")


def nvidia_table() -> dict[str, Any]:
    return load_data("nvidia.toml")


def version(text: str | None) -> Version | None:
    try:
        return Version(str(text)) if text else None
    except InvalidVersion:
        return None


def release_of(text: str | None) -> str:
    """A torch version without its local build tag: "2.14.1+cu130" -> "2.14.1"."""
    found = version(text)
    return found.base_version if found else str(text or "").partition("+")[0]


def older(found: str | None, minimum: str | None) -> bool:
    """Whether version `found` is below `minimum`; unknown either way is not older."""
    a, b = version(found), version(minimum)
    return bool(a and b and a < b)


# --- torch releases -------------------------------------------------------------------------------------------
def newest_torch() -> str:
    return torch_table()["newest_torch"]


def newer_than_tables(torch_version: str | None) -> bool:
    """A torch release after the newest the tables know: judged by the rules, with a note, never failed."""
    return older(newest_torch(), release_of(torch_version))


def tables_note(torch_version: str | None) -> str:
    if not newer_than_tables(torch_version):
        return ""
    return f"; torch {release_of(torch_version)} is newer than gpudoctor's tables (torch {newest_torch()})"


def release(torch_version: str | None) -> dict[str, Any] | None:
    """The table's row for this release; for a patch release the table lacks, the newest of its series."""
    wanted = release_of(torch_version)
    rows = torch_table()["release"]
    exact = next((r for r in rows if r["torch"] == wanted), None)
    series = [r for r in rows if r["torch"].split(".")[:2] == wanted.split(".")[:2]]
    return exact or max(series, key=lambda r: Version(r["torch"]), default=None)


def paired_torchvision(torch_version: str | None) -> str | None:
    """The torchvision release, or release series ("0.28"), that PyTorch pairs with this torch release."""
    found = release(torch_version)
    return found.get("torchvision") if found else None


@dataclass(frozen=True)
class Build:
    """One installable torch build: a release in one variant (cpu, cuXY), with the torchvision to install
    beside it and how PyTorch's pages install it ("index" or "find-links")."""

    torch: str
    tag: str
    torchvision: str | None
    install: str


def variant_of(torch: dict[str, Any]) -> str:
    """The build variant of an installed torch: its +tag where it has one, else from the CUDA it reports."""
    tag = str(torch.get("version", "")).partition("+")[2]
    if tag:
        return tag
    cuda = torch.get("cuda")
    return f"cu{cuda.replace('.', '')}" if cuda else "cpu"


def install_command(chosen: Build) -> str:
    """One pip command that installs this build with its torchvision, as PyTorch's previous-versions page
    gives it: local versions from the find-links page (1.2 to 1.10) or the variant's extra index (1.11 to
    1.13), the variant's index (2.0 on)."""
    if chosen.install in ("find-links", "extra-index"):
        local, page = f"+{chosen.tag}", f"{WHEEL_INDEX}/{chosen.tag}"
        vision = f" torchvision=={chosen.torchvision}{local}" if chosen.torchvision else " torchvision"
        where = f"-f {FIND_LINKS}" if chosen.install == "find-links" else f"--extra-index-url {page}"
        return f"pip install torch=={chosen.torch}{local}{vision} {where}"
    vision = f" {_pinned('torchvision', chosen.torchvision)}" if chosen.torchvision else " torchvision"
    return f"pip install torch=={chosen.torch}{vision} --index-url {WHEEL_INDEX}/{chosen.tag}"


def _pinned(name: str, release_or_series: str) -> str:
    """`name==0.29.1` for a release, `'name==0.29.*'` (quoted for the shell) for a series."""
    return f"'{name}=={release_or_series}.*'" if release_or_series.count(".") == 1 else f"{name}=={release_or_series}"


def same_build_command(torch: dict[str, Any], torchvision: str | None) -> str:
    """Reinstall torchvision beside this torch, keeping torch exactly as it is (its release and variant); with
    no torchvision named, pip picks the one that declares this torch."""
    found = release(torch.get("version"))
    install = found.get("install", "index") if found else "index"
    return install_command(Build(release_of(torch.get("version")), variant_of(torch), torchvision, install))


# --- CUDA and the driver --------------------------------------------------------------------------------------
def newest_cuda_run(driver: str | None) -> str | None:
    """The newest CUDA a Linux driver runs, from the release notes' minimums: a whole major release ("11.x")
    where the driver meets that family's minor-version-compatibility minimum, else the newest toolkit whose
    own minimum it meets ("10.1"); None for a driver older than every toolkit in the table."""
    table = nvidia_table()
    toolkits = [t for t, minimum in table["toolkit_minimum_linux"].items() if not older(driver, minimum)]
    families = [int(m) for m, minimum in table["family_minimum_linux"].items() if not older(driver, minimum)]
    newest = max(toolkits, key=lambda t: Version(t), default=None)
    if families and (newest is None or int(newest.split(".")[0]) <= max(families)):
        return f"{max(families)}.x"
    return ".".join(newest.split(".")[:2]) if newest else None


def toolkit_minimum(toolkit: str | None, platform: str = "linux_x86_64") -> str | None:
    """The release notes' minimum driver for this toolkit update, else for its GA release (Table 3)."""
    if not toolkit:
        return None
    table = nvidia_table()["toolkit_minimum_windows" if platform == "windows" else "toolkit_minimum_linux"]
    return table.get(toolkit) or table.get(".".join(toolkit.split(".")[:2]))


def family_minimum(toolkit: str | None, platform: str = "linux_x86_64") -> str | None:
    """The minor-version-compatibility minimum of this toolkit's major release (Table 2); None before CUDA 11,
    which had no minor-version compatibility."""
    if not toolkit:
        return None
    table = nvidia_table()["family_minimum_windows" if platform == "windows" else "family_minimum_linux"]
    return table.get(toolkit.split(".")[0])


def newest_arch(toolkit: str | None) -> int | None:
    """The highest compute capability (10 x major + minor) this CUDA toolkit knows (nvidia.toml
    [toolkit_newest_arch]); its libraries (cuDNN, cuBLAS) ship nothing for a newer one. None if unknown."""
    if not toolkit:
        return None
    return nvidia_table()["toolkit_newest_arch"].get(".".join(toolkit.split(".")[:2]))


def driver_branch(minimum: str) -> int | None:
    """The lowest NVIDIA driver branch whose releases reach this minimum (nvidia.toml [[driver_branch]])."""
    major = int(minimum.split(".")[0])
    for entry in sorted(nvidia_table()["driver_branch"], key=lambda b: b["branch"]):
        latest = entry.get("latest_linux")
        if entry["branch"] >= major and (latest is None or not older(latest, minimum)):
            return entry["branch"]
    return None


RHEL_LIKE = ("rhel", "centos", "rocky", "almalinux", "ol", "fedora")
OPEN_MODULES_FROM = 515  # NVIDIA's open kernel modules first shipped with R515; older branches are DKMS streams


def driver_install(minimum: str, os_release: dict[str, str] | None, platform: str = "linux_x86_64") -> list[str]:
    """Commands that install a driver of at least `minimum` with the package names this node's distribution
    uses (nvidia.toml [distro_packages]): the lowest branch that reaches it, where the distribution ships one."""
    packages = nvidia_table()["distro_packages"]
    if platform == "windows":
        return [f"start {packages['windows']['download']}"]
    branch = driver_branch(minimum) or int(minimum.split(".")[0])
    release = os_release or {}
    family = {release.get("id", "")} | set(release.get("id_like", "").split())
    if "ubuntu" in family:
        return _ubuntu_driver(packages["ubuntu"], release.get("version_codename", ""), branch, minimum)
    if "debian" in family:
        return _debian_driver(packages, release.get("version_id", ""), branch, platform)
    if family & set(RHEL_LIKE):
        major = release.get("version_id", "").split(".")[0]
        if major == "10":
            return ["sudo dnf install -y nvidia-open"]
        if branch < OPEN_MODULES_FROM:
            return [f"sudo dnf module install -y nvidia-driver:{branch}-dkms"]
        return [f"sudo dnf module enable -y nvidia-driver:{branch}-open", "sudo dnf install -y nvidia-open"]
    if family & {"sles", "suse", "opensuse"}:
        return [f"sudo zypper install {packages['suse']['open_kmp_cuda']} nvidia-compute-utils-G06"]
    return [f"nvidia-smi | head -4  # then install NVIDIA driver R{branch} or newer (>= {minimum})"]


def _ubuntu_driver(ubuntu: dict[str, Any], codename: str, branch: int, minimum: str) -> list[str]:
    """Ubuntu ships -server packages only for its production branches, per release."""
    served = sorted(b for b in ubuntu.get(f"{codename}_server", []) if b >= branch)
    if served:
        return [f"sudo apt install nvidia-driver-{served[0]}-server"]
    return [ubuntu["list"], f"sudo apt install nvidia-driver-{branch}  # R{branch} or newer: >= {minimum}"]


def _debian_driver(packages: dict[str, Any], version_id: str, branch: int, platform: str) -> list[str]:
    """Debian's own `nvidia-driver` (contrib, non-free) where its release ships a new enough branch, else
    NVIDIA's CUDA repository for that release (its cuda-keyring package first)."""
    release = version_id.split(".")[0]
    shipped = packages["debian"]["driver_branch"].get(release)
    if shipped and shipped >= branch:
        return ["sudo apt install nvidia-driver"]
    arch = "sbsa" if platform == "linux_aarch64" else "x86_64"
    repo = f"https://developer.download.nvidia.com/compute/cuda/repos/debian{release}/{arch}/cuda-keyring_1.1-1_all.deb"
    keyring = f"wget {repo} && sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt update"
    if branch >= 590:
        return [keyring, f"sudo apt install nvidia-driver-pinning-{branch} cuda-drivers"]
    return [keyring, f"sudo apt install cuda-drivers-{branch}"]


# --- CUDA's own errors ----------------------------------------------------------------------------------------
_ERROR_CODE = re.compile(r"(?:error|code)[ :]*(\d{1,3})\b|\((\d{3})\)", re.IGNORECASE)


def cuda_error(text: str | None) -> dict[str, Any] | None:
    """The CUDA error an error text names (nvidia.toml [[cuda_error]]): by its number ("error 804",
    "(804)"), its enum name, or the message cudaGetErrorString gives it; None when it names none."""
    if not text:
        return None
    errors = nvidia_table()["cuda_error"]
    lowered = text.lower()
    for match in _ERROR_CODE.finditer(text):
        code = int(match.group(1) or match.group(2))
        found = next((e for e in errors if e["code"] == code), None)
        if found:
            return found
    names = ("runtime", "driver", "message")
    return next((e for e in errors if any(e.get(n) and e[n].lower() in lowered for n in names)), None)


def error_commands(entry: dict[str, Any]) -> list[str]:
    """The commands a [[cuda_error]] row's fix names (its `backticked` spans), to paste as they are."""
    return re.findall(r"`([^`]+)`", entry.get("fix", ""))
