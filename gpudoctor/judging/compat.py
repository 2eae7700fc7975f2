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
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.command import Command, command, literal
from gpudoctor.judging.commands import fix, word
from gpudoctor.judging.hardware import load_data
from gpudoctor.model import Remediation

WHEEL_INDEX = "https://download.pytorch.org/whl"
FIND_LINKS = f"{WHEEL_INDEX}/torch_stable.html"


PLATFORMS = ("linux_x86_64", "linux_aarch64", "windows")


@cache
def torch_table() -> dict[str, Any]:
    return load_data("torch.toml")


@cache
def nvidia_table() -> dict[str, Any]:
    return load_data("nvidia.toml")


def platform_key(system: str | None, machine: str | None) -> str:
    """The wheel platform of a host: Windows names its CPU AMD64 (or ARM64), Linux x86_64 or aarch64."""
    if (system or "").lower().startswith(("win", "cygwin", "msys")):
        return "windows"
    return "linux_aarch64" if (machine or "").lower() in ("aarch64", "arm64") else "linux_x86_64"


@lru_cache(maxsize=4096)
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
    """One installable torch build: a release in one variant (cpu, cuXY) for one platform, the toolkit its
    Linux wheels were compiled with and the arch list it ships, with the torchvision to install beside it and
    how PyTorch's pages install it ("index", "extra-index" or "find-links")."""

    torch: str
    tag: str
    torchvision: str | None
    install: str
    platform: str = "linux_x86_64"
    toolkit: str | None = None
    arch: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"torch {self.torch}+{self.tag}"


def build_row(torch_version: str, tag: str, platform: str) -> dict[str, Any] | None:
    """The [[build]] row of this CUDA tag whose torch range holds this release and that lists this platform."""
    wanted = version(release_of(torch_version))
    for row in torch_table()["build"]:
        first, last = version(row["torch_first"]), version(row["torch_last"])
        if row["tag"] == tag and row.get(platform) and wanted and first and last and first <= wanted <= last:
            return row
    return None


def build(torch_version: str | None, tag: str, platform: str = "linux_x86_64") -> Build | None:
    """The official build of this release (or, for a patch release the table lacks, its series' newest) in
    this variant for this platform; None where PyTorch published none."""
    found = release(torch_version)
    if not found or tag not in found.get(platform, []):
        return None
    row = build_row(found["torch"], tag, platform) if tag != "cpu" else {}
    if row is None:
        return None
    return Build(
        torch=found["torch"],
        tag=tag,
        torchvision=found.get("torchvision"),
        install=found.get("install", "index"),
        platform=platform,
        toolkit=row.get("toolkit"),
        arch=tuple(row.get(platform, ())),
    )


@cache
def cuda_builds(platform: str) -> tuple[Build, ...]:
    """Every official CUDA build for this platform, the newest release first and, within a release, the
    newest CUDA first."""
    found: list[Build] = []
    for entry in sorted(torch_table()["release"], key=lambda r: Version(r["torch"]), reverse=True):
        made = [build(entry["torch"], tag, platform) for tag in entry.get(platform, []) if tag.startswith("cu")]
        found += sorted((b for b in made if b), key=lambda b: Version(b.toolkit or "0"), reverse=True)
    return tuple(found)


def default_build(platform: str = "linux_x86_64") -> Build:
    """What a plain `pip install torch` gives today: the newest release's default CUDA variant (PyPI's build,
    the one PyTorch's install selector offers first); its CPU build where it has no CUDA one here."""
    newest = release(newest_torch()) or {}
    tags = newest.get(platform, [])
    tag = newest.get("pypi_default") if newest.get("pypi_default") in tags else next(iter(tags[::-1]), "cpu")
    return build(newest_torch(), tag, platform) or Build(newest_torch(), "cpu", None, "index", platform)


def variant_of(torch: dict[str, Any]) -> str:
    """The build variant of an installed torch: its +tag where it has one, else from the CUDA it reports."""
    tag = str(torch.get("version", "")).partition("+")[2]
    if tag:
        return tag
    cuda = torch.get("cuda")
    return f"cu{cuda.replace('.', '')}" if cuda else "cpu"


def installed_build(torch: dict[str, Any], platform: str = "linux_x86_64") -> Build:
    """The installed torch as a Build: the table's row for its release and variant where there is one (its
    toolkit and arch list), else what torch itself reports."""
    tag = variant_of(torch)
    known = build(torch.get("version"), tag, platform)
    reported = torch.get("cuda")
    if known and reported and not (known.toolkit or "").startswith(f"{reported}."):
        known = None  # not the official build of this tag: torch reports another CUDA
    if known and known.torch == release_of(torch.get("version")):
        return known
    found = release(torch.get("version"))
    install = found.get("install", "index") if found else "index"
    toolkit = known.toolkit if known else torch.get("cuda")
    arch = tuple(torch.get("arch_list") or (known.arch if known else ()))
    return Build(release_of(torch.get("version")), tag, None, install, platform, toolkit, arch)


# The pip of a Python an application bundles, by the name a paste's reader gives it: gpudoctor's own text, chosen from
# this table, never a path from the paste. ComfyUI's Windows portable runs `.\python_embeded\python.exe` from its
# folder (ComfyUI .ci/windows_nvidia_base_files/run_nvidia_gpu.bat), so its packages install with that Python's pip.
BUNDLED_PIP = {"comfyui-portable": r".\python_embeded\python.exe -s -m pip"}


def install_command(chosen: Build, force: bool = False, python: str | None = None) -> Command:
    """One pip command that installs this build with its torchvision, where PyTorch's previous-versions page
    has them: the find-links page (1.0 to 1.10), the variant's extra index (1.11 to 1.13), the variant's index
    (2.0 on). Versions carry the variant's local tag (`==2.14.0+cu126`), so pip replaces an installed build
    of the same release in another variant instead of keeping it as satisfying `==2.14.0`. `force`: it also
    replaces what is installed (a broken torch and the CUDA libraries it pulls in). `python`: the bundled Python
    whose pip installs it (BUNDLED_PIP), plain pip otherwise. Each value fills a slot checked for what it must be
    (gpudoctor/command.py): a release from a paste that is not one raises Unsafe."""
    pip = BUNDLED_PIP.get(python or "", "pip")
    if chosen.torchvision is None:
        vision = "torchvision"
    elif chosen.torchvision.count(".") == 1:
        vision = "'torchvision=={vision}.*'"  # a series: quoted, a version has no character the shell reads
    else:
        vision = "torchvision=={vision}+{variant}"
    where = {"find-links": f"-f {FIND_LINKS}", "extra-index": f"--extra-index-url {WHEEL_INDEX}/{{variant}}"}
    template = " ".join(
        [
            f"{pip} install --force-reinstall" if force else f"{pip} install",
            "torch=={release}+{variant}",
            vision,
            where.get(chosen.install, f"--index-url {WHEEL_INDEX}/{{variant}}"),
        ]
    )
    return command(template, release=chosen.torch, variant=chosen.tag, vision=chosen.torchvision)


def same_build_command(torch: dict[str, Any], torchvision: str | None) -> Command:
    """Reinstall torchvision beside this torch, keeping torch exactly as it is (its release and variant); with
    no torchvision named, pip picks the one that declares this torch."""
    return install_command(replace(installed_build(torch), torchvision=torchvision))


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
    """The release notes' minimum driver for this toolkit update, else for its GA release (Table 3). Table 3
    gives no Windows figure for CUDA 13: there the family's minimum (Table 2, ">= 580") stands for it."""
    if not toolkit:
        return None
    table = nvidia_table()["toolkit_minimum_windows" if platform == "windows" else "toolkit_minimum_linux"]
    found = table.get(toolkit) or table.get(".".join(toolkit.split(".")[:2]))
    return found or (family_minimum(toolkit, platform) if platform == "windows" else None)


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


def driver_runs(driver: str | None, chosen: Build) -> str | None:
    """How this driver runs a CUDA build: "full" (it reaches the minimum of the toolkit the build was compiled
    with, on the build's platform), "compat" (only the CUDA family's minor-version-compatibility minimum,
    CUDA 11 on), or None (too old, or either version unknown)."""
    if not driver or not chosen.toolkit:
        return None
    return _driver_runs(driver, chosen.toolkit, chosen.platform)


@cache
def _driver_runs(driver: str, toolkit: str, platform: str) -> str | None:
    if not older(driver, toolkit_minimum(toolkit, platform) or "999"):
        return "full"
    family = family_minimum(toolkit, platform)
    return "compat" if family and not older(driver, family) else None


# --- torch's rule for which GPU runs which kernels ------------------------------------------------------------
def cubin_devices(code: int, toolkit: str | None) -> set[int]:
    """The compute capabilities (10 x major + minor) a plain or family cubin for `code` runs on, by torch's
    own rule (torch.toml [arch_rule])."""
    rule = torch_table()["arch_rule"]
    if str(code) in rule["only"]:
        return set(rule["only"][str(code)])
    excluded = set(rule["exclude"].get(str(code), []))
    if toolkit and not older(toolkit, rule["sbsa_unified_from"]) and code in rule["sbsa_unified"]:
        excluded = set()
    major = code // 10
    return {major * 10 + minor for minor in range(code % 10, 10)} - excluded


def runs_on(arch: str, capability: tuple[int, int], toolkit: str | None) -> bool:
    """torch's rule for one `sm_XY[a|f]` or `compute_XY[a|f]` entry: `_check_capability` judges a PTX entry
    like a cubin of its number (the same major), and an `a` entry serves only X.Y."""
    code = arch.partition("_")[2]
    number = int(code.rstrip("af"))
    device = capability[0] * 10 + capability[1]
    if code.endswith("a"):
        return device == number
    return device in cubin_devices(number, toolkit)


def covered(capability: tuple[int, int], arch_list: list[str] | tuple[str, ...], toolkit: str | None) -> bool:
    """Whether a build with this arch list runs on a device of this compute capability: the CUDA it was built
    with knows the architecture (its libraries ship nothing for a newer one) and some entry serves it."""
    return _covered((capability[0], capability[1]), tuple(arch_list), toolkit)


@cache
def _covered(capability: tuple[int, int], arch_list: tuple[str, ...], toolkit: str | None) -> bool:
    newest = newest_arch(toolkit)
    if newest is not None and capability[0] * 10 + capability[1] > newest:
        return False
    return any(runs_on(arch, capability, toolkit) for arch in arch_list)


def covers(chosen: Build, capabilities: list[tuple[int, int]]) -> bool:
    arch = tuple(chosen.arch)
    return all(_covered((c[0], c[1]), arch, chosen.toolkit) for c in capabilities)


def nccl_support(capability: tuple[int, int]) -> dict[str, Any] | None:
    """The first NCCL release with kernels for this architecture (nvidia.toml [[nccl_arch]]): the row of this
    compute capability, else of the nearest older one of its major (CUDA runs a cubin on later minors)."""
    device = capability[0] * 10 + capability[1]
    rows = [r for r in nvidia_table()["nccl_arch"] if r["arch"] // 10 == capability[0] and r["arch"] <= device]
    return max(rows, key=lambda r: r["arch"], default=None)


# --- which build to install -----------------------------------------------------------------------------------
def keep_driver_build(
    capabilities: list[tuple[int, int]], driver: str | None, platform: str, level: str | None = None
) -> Build | None:
    """The build to install keeping this driver: of the newest release with a build that has kernels for every
    one of these GPUs and that this driver runs (fully or through minor-version compatibility, an officially
    supported way to run CUDA 11 on), the build it runs fully where there is one. With `level` "full", only
    builds it runs fully count. None when none fits."""
    fitting = [b for b in cuda_builds(platform) if covers(b, capabilities) and driver_runs(driver, b) in _LEVELS[level]]
    if not fitting:
        return None
    newest = [b for b in fitting if b.torch == fitting[0].torch]
    return next((b for b in newest if driver_runs(driver, b) == "full"), newest[0])


_LEVELS = {None: ("full", "compat"), "full": ("full",)}


def newest_build(capabilities: list[tuple[int, int]], platform: str) -> Build | None:
    """The build to upgrade to: of the newest release with a build for every one of these GPUs, its default
    variant where that covers them, else its newest CUDA that does."""
    fitting = [b for b in cuda_builds(platform) if covers(b, capabilities)]
    if not fitting:
        return None
    newest = [b for b in fitting if b.torch == fitting[0].torch]
    default = (release(fitting[0].torch) or {}).get("pypi_default")
    return next((b for b in newest if b.tag == default), newest[0])


def driver_fix(
    capabilities: list[tuple[int, int]],
    driver: str | None,
    platform: str,
    os_release: dict[str, str] | None,
    wanted: Build | None = None,
) -> Remediation:
    """Both ways out of a driver/wheel mismatch, ranked: keep the driver and install the newest build that
    runs on it and on every GPU here, or upgrade the driver (a package this distribution ships, NVIDIA's
    download on Windows) for the build wanted (the installed torch where it covers these GPUs, else the
    newest that does). Keeping the driver ranks first when it installs a release no older than the wanted
    one (a variant change, no root, no reboot); else the upgrade."""
    target = wanted if wanted and wanted.toolkit and covers(wanted, capabilities) else None
    target = target or newest_build(capabilities, platform)
    keep = keep_driver_build(capabilities, driver, platform)
    if target is None:
        return Remediation(
            f"No official torch build has kernels for {_arch_names(capabilities)}: build torch from source with "
            "TORCH_CUDA_ARCH_LIST naming them, or use a vendor build (NVIDIA NGC container).",
            ["nvidia-smi --query-gpu=name,compute_cap --format=csv"],
        )
    if driver_runs(driver, target) == "full":
        return fix(f"Install {target.name}: driver {driver} runs it.", lambda: [install_command(target)])
    upgrade = _upgrade_way(target, driver, os_release, installed=target is wanted)
    if keep is None or upgrade is None:
        return upgrade or (_keep_way(keep, driver, capabilities) if keep else _unknown_way(target))
    keeping = _keep_way(keep, driver, capabilities)
    if not older(keep.torch, target.torch):
        return replace(keeping, instead=upgrade)
    return replace(upgrade, instead=keeping)


def _unknown_way(target: Build) -> Remediation:
    return fix(
        f"No minimum driver is known for CUDA {target.toolkit}: install the newest driver of your distribution "
        f"or NVIDIA's, then {target.name}.",
        lambda: ["nvidia-smi | head -4", install_command(target)],
    )


def _keep_way(keep: Build, driver: str | None, capabilities: list[tuple[int, int]]) -> Remediation:
    return fix(
        f"Keep driver {driver}: {runs_summary(keep, driver, capabilities)}, with kernels for every GPU here.",
        lambda: [install_command(keep)],
    )


def runs_summary(keep: Build, driver: str | None, capabilities: list[tuple[int, int]]) -> str:
    """ "torch 2.7.1+cu118 (CUDA 11.8.0) is the newest official build it runs, through minor-version
    compatibility (torch 1.12.1+cu113 fully)"."""
    text = f"{keep.name} (CUDA {keep.toolkit}) is the newest official build it runs"
    if driver_runs(driver, keep) == "full":
        return text
    fully = keep_driver_build(capabilities, driver, keep.platform, "full")
    return text + ", through minor-version compatibility" + (f" ({fully.name} fully)" if fully else "")


def then(target: Build, installed: bool) -> list[str]:
    return [] if installed else [install_command(target)]


def _upgrade_way(
    target: Build, driver: str | None, os_release: dict[str, str] | None, installed: bool
) -> Remediation | None:
    """Upgrade the driver to the minimum of the target's toolkit, then install the target unless it is the
    torch already installed; None where that minimum is unknown."""
    needed = toolkit_minimum(target.toolkit, target.platform)
    if not needed:
        return None
    keeps = "keep the installed torch" if installed else f"install {target.name}"
    return fix(
        f"Upgrade the driver to >= {needed} (CUDA {target.toolkit} needs it) and {keeps}.",
        lambda: [*driver_install(needed, os_release, target.platform), *then(target, installed)],
    )


def _arch_names(capabilities: list[tuple[int, int]]) -> str:
    return ", ".join(f"sm_{major}{minor}" for major, minor in sorted(set(capabilities))) or "these GPUs"


def driver_branch(minimum: str) -> int | None:
    """The lowest NVIDIA driver branch whose releases reach this minimum (nvidia.toml [[driver_branch]])."""
    major = int(minimum.split(".")[0])
    for entry in sorted(nvidia_table()["driver_branch"], key=lambda b: b["branch"]):
        latest = entry.get("latest_linux")
        if entry["branch"] >= major and (latest is None or not older(latest, minimum)):
            return entry["branch"]
    return None


DNF_OPEN = "sudo dnf install -y nvidia-open"
RHEL_LIKE = ("rhel", "centos", "rocky", "almalinux", "ol", "fedora")
OPEN_MODULES_FROM = 515  # NVIDIA's open kernel modules first shipped with R515; older branches are DKMS streams


def driver_install(minimum: str, os_release: dict[str, str] | None, platform: str = "linux_x86_64") -> list[str]:
    """Commands that install a driver of at least `minimum` with the package names this node's distribution
    uses (nvidia.toml [distro_packages]): the lowest branch that reaches it, where the distribution ships one."""
    packages = nvidia_table()["distro_packages"]
    minimum = word(minimum, "version")
    if platform == "windows":
        return [command("start {url}", url=packages["windows"]["download"])]
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
            return [literal(DNF_OPEN)]
        if branch < OPEN_MODULES_FROM:
            return [command("sudo dnf module install -y nvidia-driver:{branch}-dkms", branch=branch)]
        return [command("sudo dnf module enable -y nvidia-driver:{branch}-open", branch=branch), literal(DNF_OPEN)]
    if family & {"sles", "suse", "opensuse"}:
        return [
            command("sudo zypper install {package} nvidia-compute-utils-G06", package=packages["suse"]["open_kmp_cuda"])
        ]
    return [
        command(
            "nvidia-smi | head -4  # then install NVIDIA driver R{branch} or newer (>= {driver})",
            branch=branch,
            driver=minimum,
        )
    ]


def _ubuntu_driver(ubuntu: dict[str, Any], codename: str, branch: int, minimum: str) -> list[str]:
    """Ubuntu ships -server packages only for its production branches, per release."""
    served = sorted(b for b in ubuntu.get(f"{codename}_server", []) if b >= branch)
    if served:
        return [command("sudo apt install nvidia-driver-{branch}-server", branch=served[0])]
    return [
        literal(ubuntu["list"]),
        command(
            "sudo apt install nvidia-driver-{branch}  # R{branch} or newer: >= {driver}", branch=branch, driver=minimum
        ),
    ]


def _debian_driver(packages: dict[str, Any], version_id: str, branch: int, platform: str) -> list[str]:
    """Debian's own `nvidia-driver` (contrib, non-free) where its release ships a new enough branch, else
    NVIDIA's CUDA repository for that release (its cuda-keyring package first)."""
    release = word(version_id.split(".")[0], "number")
    shipped = packages["debian"]["driver_branch"].get(release)
    if shipped and shipped >= branch:
        return ["sudo apt install nvidia-driver"]
    arch = "sbsa" if platform == "linux_aarch64" else "x86_64"
    keyring = command(
        "wget https://developer.download.nvidia.com/compute/cuda/repos/debian{release}/{arch}/cuda-keyring_1.1-1_all.deb"
        " && sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt update",
        release=release,
        arch=arch,
    )
    if branch >= 590:
        return [keyring, command("sudo apt install nvidia-driver-pinning-{branch} cuda-drivers", branch=branch)]
    return [keyring, command("sudo apt install cuda-drivers-{branch}", branch=branch)]


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


def error_commands(entry: dict[str, Any]) -> list[Command]:
    """The commands a [[cuda_error]] row names (its `commands`: gpudoctor's own table), to paste as they are."""
    return [literal(text) for text in entry.get("commands", [])]
