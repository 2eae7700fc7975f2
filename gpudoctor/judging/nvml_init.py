"""NVML that does not start, judged: what the failure says and its cure (driver.nvml's verdict, and the owner's
cure a pasted "no driver" error gets: paste/cures.py). Where the machine's own facts (the PCI bus, /dev/nvidia*, the
container) say which cause of "no GPU" holds, that cause and its own cure (nogpu.py); inside WSL, the Windows driver;
a missing driver's fix installs one that runs the installed torch (else the default torch build), with the packages
of the node's distribution; a module not loaded gets the commands that tell its causes apart (DKMS and the kernel's
headers, Secure Boot, WSL) with the headers of the node's distribution."""

from __future__ import annotations

from typing import Any

from gpudoctor.judging import compat, nogpu
from gpudoctor.judging.commands import fix
from gpudoctor.model import Remediation

INIT_FINDINGS = {
    "library-not-found": (
        "no NVIDIA driver library (libnvidia-ml.so.1) in this environment",
        Remediation(
            "No NVIDIA driver is installed here, or this container was started without GPU support: the driver's "
            "user-space library must be visible to this process.",
            [
                "nvidia-smi",
                "<INSTALL>",
                "docker run --gpus all ...  # containers: install nvidia-container-toolkit on the host",
            ],
        ),
    ),
    "driver-not-loaded": (
        "the NVIDIA kernel module is not loaded",
        Remediation(
            "NVML finds the library but no running driver. Most often no module was built for the running kernel "
            "(a kernel update without its headers, so DKMS could not build it), or Secure Boot refuses an unsigned "
            "module; modprobe's error says which. A reboot loads a module installed since boot; reinstalling the "
            "driver with the headers present has DKMS build it.",
            [
                "sudo modprobe nvidia  # its error says why: 'Module nvidia not found' (none built for this kernel: "
                "the next two commands), 'Key was rejected by service' (Secure Boot: mokutil --sb-state)",
                "dkms status  # the nvidia module must be 'installed' for the running kernel (uname -r)",
                "<HEADERS>",
                "sudo reboot  # a driver installed or upgraded since the last boot, or a module just built: it loads "
                "at boot (then nvidia-smi)",
                "<INSTALL>",
                "uname -r  # a kernel named ...-microsoft-standard-WSL2 is WSL 2, whose GPU is the Windows driver's: "
                "install no Linux NVIDIA driver inside it",
            ],
        ),
    ),
    "version-mismatch": (
        "driver/library version mismatch: the driver was upgraded but the old kernel module is still loaded",
        Remediation(
            "The user-space library and the loaded kernel module must be the same release; reboot, "
            "or reload the nvidia modules when no process uses the GPUs.",
            [
                "sudo reboot",
                "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia",
                "ldconfig -p | grep libnvidia-ml  # the library the loader finds: its release must be the module's "
                "(cat /proc/driver/nvidia/version); an older copy left in the loader's cache is refreshed by sudo "
                "ldconfig",
            ],
        ),
    ),
    "no-permission": (
        "NVML is not permitted to open the GPUs (/dev/nvidia* permissions)",
        Remediation(
            "The user running training needs read/write access to /dev/nvidia*.",
            ["ls -l /dev/nvidia*", "sudo usermod -aG video $USER"],
        ),
    ),
}


def failure(nvml: dict[str, Any], system: dict[str, Any], torch: dict[str, Any]) -> tuple[str, Remediation]:
    """Why NVML did not start (`nvml["status"]`), said in one line, and the cure."""
    summary, remediation = _init_finding(nvml, system)
    if "<INSTALL>" in remediation.commands:
        remediation = _with_driver_install(remediation, system, torch)
    if "<HEADERS>" in remediation.commands:
        headers = headers_install(system.get("os_release"))
        commands = [headers if c == "<HEADERS>" else c for c in remediation.commands]
        remediation = Remediation(remediation.why, commands, remediation.instead, remediation.source)
    return summary, remediation


# NVIDIA Driver Installation Guide, Pre-installation Actions (docs.nvidia.com/datacenter/tesla/driver-installation-
# guide/pre-installation-actions.html): "the kernel headers and development packages for the running version of the
# kernel" must be installed whenever the driver is rebuilt; its Ubuntu and Debian pages install
# linux-headers-$(uname -r), its Fedora, RHEL, Rocky and AlmaLinux pages kernel-devel-matched kernel-headers. DKMS
# (dkms(8)) `autoinstall` then builds every module installed for the running kernel.
HEADERS = {
    "debian": "sudo apt-get install linux-headers-$(uname -r) && sudo dkms autoinstall  # the running kernel's "
    "headers: DKMS builds the module against them",
    "rhel": "sudo dnf install kernel-devel-matched kernel-headers && sudo dkms autoinstall  # the running kernel's "
    "headers: DKMS builds the module against them",
}
HEADERS_ELSEWHERE = (
    "sudo apt-get install linux-headers-$(uname -r) && sudo dkms autoinstall  # Debian/Ubuntu (Fedora/RHEL: sudo dnf "
    "install kernel-devel-matched kernel-headers): DKMS builds the module against the running kernel's headers"
)


def headers_install(os_release: dict[str, str] | None) -> str:
    """The command that installs the running kernel's headers with this distribution's packages and has DKMS build
    the module against them; the Debian/Ubuntu one, naming the Fedora/RHEL one, where the distribution is unknown."""
    release = os_release or {}
    family = {release.get("id", "")} | set(release.get("id_like", "").split())
    if family & {"debian", "ubuntu"}:
        return HEADERS["debian"]
    if family & set(compat.RHEL_LIKE):
        return HEADERS["rhel"]
    return HEADERS_ELSEWHERE


# NVIDIA, CUDA on WSL User Guide (docs.nvidia.com/cuda/wsl-user-guide/index.html), Getting Started: "Once a Windows
# NVIDIA GPU driver is installed on the system, CUDA becomes available within WSL 2 ... users must not install any
# NVIDIA GPU Linux driver within WSL 2"; the driver's libcuda.so is mapped in under /usr/lib/wsl/lib. Microsoft, Enable
# NVIDIA CUDA on WSL (learn.microsoft.com/windows/ai/directml/gpu-cuda-in-wsl): GPU compute needs WSL 2. A WSL kernel's
# release names Microsoft: ...-microsoft-standard-WSL2 (WSL 2), ...-Microsoft (WSL 1, no Linux kernel, no GPU).
WSL_SOURCE = (
    "NVIDIA CUDA on WSL User Guide, Getting Started (docs.nvidia.com/cuda/wsl-user-guide/): the Windows driver gives "
    "WSL 2 its GPU, no Linux driver may be installed inside it; Microsoft, Enable NVIDIA CUDA on WSL: WSL 2 only"
)
WSL_CURE = Remediation(
    "This is WSL: its GPU is the Windows NVIDIA driver's, which WSL 2 maps in under /usr/lib/wsl/lib. WSL 1 has no "
    "GPU at all, and a Linux NVIDIA driver installed inside WSL 2 hides the Windows one.",
    [
        "wsl.exe --list --verbose  # the distribution's VERSION must be 2: wsl.exe --set-version NAME 2 converts it",
        "ls /usr/lib/wsl/lib/  # libcuda.so and nvidia-smi of the Windows driver: none, install or update the NVIDIA "
        "driver in Windows",
        "dpkg -l | grep -iE 'nvidia-(driver|dkms|kernel)'  # a Linux NVIDIA driver inside WSL: remove it",
    ],
    source=WSL_SOURCE,
)


# Windows has no kernel module to load or build: its NVIDIA driver is one installer (NVIDIA's download page or Windows
# Update), and Device Manager (or PnPUtil) shows whether Windows runs it for the GPU. Microsoft, PnPUtil command
# syntax (learn.microsoft.com/windows-hardware/drivers/devtest/pnputil-command-syntax: /enum-devices /class Display).
WINDOWS_CURE = Remediation(
    "This is Windows: nvidia-smi cannot reach the NVIDIA driver, which is not installed, not running for this GPU "
    "(Device Manager shows a warning on it), or replaced by Windows' basic display driver.",
    [
        "pnputil /enum-devices /class Display  # the GPU and the driver Windows runs for it (Device Manager, Display "
        "adapters)",
        "start https://www.nvidia.com/Download/index.aspx  # install (or reinstall) the NVIDIA driver for this GPU, "
        "then restart Windows",
    ],
    source="NVIDIA driver downloads (www.nvidia.com/Download/index.aspx); Microsoft, PnPUtil command syntax",
)


def wsl(system: dict[str, Any]) -> bool:
    """Whether the facts are a WSL machine's: its kernel release names Microsoft (WSL 1 and 2 both)."""
    return "microsoft" in str(system.get("kernel") or "").lower()


def _init_finding(nvml: dict[str, Any], system: dict[str, Any]) -> tuple[str, Remediation]:
    status = nvml.get("status")
    if status in nogpu.NO_DRIVER and wsl(system):
        return "no NVIDIA driver answers inside WSL: its GPU is the Windows driver's", WSL_CURE
    if status in nogpu.NO_DRIVER and compat.platform_key(system.get("os"), system.get("machine")) == "windows":
        return "no NVIDIA driver answers on this Windows machine", WINDOWS_CURE
    state = nogpu.classify(nvml, system)
    if state is not None:
        return nogpu.finding(state, status, system.get("env") or {})
    summary, remediation = INIT_FINDINGS.get(
        status,
        (
            f"NVML failed to initialise: {nvml.get('error')}",
            Remediation("NVML must initialise for any GPU to be used.", ["nvidia-smi", "sudo dmesg | grep -i nvrm"]),
        ),
    )
    if status in nogpu.NO_DRIVER and not nogpu.captured(system):
        why = f"{remediation.why} {UNCAPTURED_DEVICES}"
        instead = CPU_RUN if status == "library-not-found" else remediation.instead
        remediation = Remediation(why, remediation.commands, instead, remediation.source)
    return summary, remediation


# Said where the PCI bus and /dev were not read (a snapshot from before gpudoctor read them, a paste).
UNCAPTURED_DEVICES = (
    "Whether this machine has an NVIDIA GPU at all is not in this capture (`lspci -nn | grep -i nvidia` on it "
    "says): without one, there is nothing to install."
)


# Where the machine has no NVIDIA GPU, the program asks for CUDA: PyTorch, CUDA semantics, "Device-agnostic code"
# (docs.pytorch.org/docs/stable/notes/cuda.html): torch.device('cuda' if torch.cuda.is_available() else 'cpu');
# torch.load's own error on a CPU-only machine (torch/serialization.py): "please use torch.load with
# map_location=torch.device('cpu') to map your storages to the CPU". A notebook's runtime gets its GPU from the
# notebook's settings: Google Colab, "GPUs in Colab" (colab.research.google.com/notebooks/gpu.ipynb: Hardware
# accelerator GPU, under Runtime > Change runtime type); Kaggle, "Efficient GPU Usage Tips"
# (kaggle.com/docs/efficient-gpu-usage: the notebook's Accelerator setting).
CPU_RUN = Remediation(
    "Where this machine has no NVIDIA GPU (a CPU machine, a notebook runtime without one), nothing is to be installed: "
    "the program asks for CUDA. A notebook gets a GPU from its runtime's settings; elsewhere, run it on the CPU: "
    ".to(device) with device = 'cuda' if torch.cuda.is_available() else 'cpu', in place of .cuda(), and "
    "torch.load(..., map_location=device).",
    [
        "lspci -nn | grep -i nvidia  # no line: this machine has no NVIDIA GPU",
        "nvidia-smi -L  # in a notebook (!nvidia-smi -L): no GPU, so pick one for its runtime: Colab: Runtime > Change "
        "runtime type > Hardware accelerator: GPU; Kaggle: Settings > Accelerator: GPU",
        "grep -rnE '[.]cuda[(]|map_location' --include='*.py' .  # the calls that ask for CUDA: .to(device) and "
        "map_location=device in their place",
    ],
    source="PyTorch, CUDA semantics, Device-agnostic code (docs.pytorch.org/docs/stable/notes/cuda.html); "
    "torch/serialization.py: map_location=torch.device('cpu') on a CPU-only machine; Google Colab, GPUs in Colab "
    "(colab.research.google.com/notebooks/gpu.ipynb); Kaggle, Efficient GPU Usage Tips (kaggle.com/docs/"
    "efficient-gpu-usage)",
)


def _with_driver_install(cure: Remediation, system: dict[str, Any], torch: dict[str, Any]) -> Remediation:
    platform = compat.platform_key(system.get("os"), system.get("machine"))
    build = compat.installed_build(torch, platform) if torch.get("cuda") else compat.default_build(platform)
    minimum = compat.toolkit_minimum(build.toolkit, platform) or compat.family_minimum(build.toolkit, platform)

    def built() -> list[str]:
        install = compat.driver_install(minimum, system.get("os_release"), platform) if minimum else []
        return [c for command in cure.commands for c in (install if command == "<INSTALL>" else [command])]

    return fix(f"{cure.why} {build.name} needs driver >= {minimum}.", built, cure.instead, cure.source)
