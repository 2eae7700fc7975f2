"""NVML that does not start, judged: what the failure says and its cure (driver.nvml's verdict, and the owner's
cure a pasted "no driver" error gets: paste/cures.py). Where the machine's own facts (the PCI bus, /dev/nvidia*, the
container) say which cause of "no GPU" holds, that cause and its own cure (nogpu.py); a missing driver's fix installs
one that runs the installed torch (else the default torch build), with the packages of the node's distribution."""

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
            "NVML finds the library but no running driver.",
            ["sudo modprobe nvidia", "sudo dmesg | grep -iE 'nvidia|nvrm'"],
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
    return summary, remediation


def _init_finding(nvml: dict[str, Any], system: dict[str, Any]) -> tuple[str, Remediation]:
    status = nvml.get("status")
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
        remediation = Remediation(why, remediation.commands, remediation.instead, remediation.source)
    return summary, remediation


# Said where the PCI bus and /dev were not read (a snapshot from before gpudoctor read them, a paste).
UNCAPTURED_DEVICES = (
    "Whether this machine has an NVIDIA GPU at all is not in this capture (`lspci -nn | grep -i nvidia` on it "
    "says): without one, there is nothing to install."
)


def _with_driver_install(cure: Remediation, system: dict[str, Any], torch: dict[str, Any]) -> Remediation:
    platform = compat.platform_key(system.get("os"), system.get("machine"))
    build = compat.installed_build(torch, platform) if torch.get("cuda") else compat.default_build(platform)
    minimum = compat.toolkit_minimum(build.toolkit, platform) or compat.family_minimum(build.toolkit, platform)

    def built() -> list[str]:
        install = compat.driver_install(minimum, system.get("os_release"), platform) if minimum else []
        return [c for command in cure.commands for c in (install if command == "<INSTALL>" else [command])]

    return fix(f"{cure.why} {build.name} needs driver >= {minimum}.", built)
