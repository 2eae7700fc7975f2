"""A driver that does not load, cured by what the evidence names (issue 49): the cause that leads a report carries
the specific cure (Secure Boot's key, the kernel's headers and DKMS, WSL's Windows driver, a stale DKMS entry)
where the paste or the machine's facts name it, and the commands that tell them apart where nothing does.

Each line is as its emitter prints it (the format string the signature's `source` names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import gpudoctor

from gpudoctor.judging import nvml_init

SMI_FAILED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
    "driver is installed and running.\n"
)


def leading(tmp_path: Path, text: str) -> tuple[str, list[str], list[str]]:
    """The report's first cause: its id, its commands, and the commands of its other way (`instead`)."""
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    document = json.loads(gpudoctor("check", "--from", str(paste), "--json").stdout)
    cause = document["causes"][0]
    fix = cause["remediation"]
    return cause["id"], fix["commands"], (fix.get("instead") or {}).get("commands", [])


@pytest.mark.parametrize(
    ("evidence", "first"),
    [
        # kmod's modprobe: strerror(EKEYREJECTED) for a module signed with a key the firmware does not trust
        ("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n", "mokutil --sb-state"),
        # kmod's modprobe: no nvidia.ko under /lib/modules/<running kernel>
        (
            "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.5.0-14-generic\n",
            "sudo apt-get install linux-headers-$(uname -r) && sudo dkms autoinstall",
        ),
        # dkms: the running kernel's headers are not installed, so DKMS cannot build the module for it
        (
            "Error! Your kernel headers for kernel 5.10.0-23-cloud-amd64 cannot be found at "
            "/lib/modules/5.10.0-23-cloud-amd64/build or /lib/modules/5.10.0-23-cloud-amd64/source.\n",
            "sudo apt-get install linux-headers-$(uname -r) && sudo dkms autoinstall",
        ),
        # dkms: an entry whose source tree is gone stops DKMS before it builds anything
        (
            "Error! Could not locate dkms.conf file.\nFile: /var/lib/dkms/nvidia/390.48/source/dkms.conf does not "
            "exist.\n",
            "sudo rm -r /var/lib/dkms/nvidia/390.48",
        ),
    ],
    ids=("secure-boot", "module-not-found", "headers-missing", "stale-dkms-entry"),
)
def test_the_leading_cause_carries_the_cure_the_evidence_names(tmp_path: Path, evidence: str, first: str) -> None:
    cause, commands, instead = leading(tmp_path, SMI_FAILED + evidence)
    assert cause == "no-driver"
    assert commands[0].startswith(first), commands
    assert any(c.startswith("sudo modprobe nvidia") for c in instead), "the generic cure stays, ranked second"


def test_a_bare_no_driver_line_gets_the_commands_that_tell_its_causes_apart(tmp_path: Path) -> None:
    """The line alone names no cause: the cure says how modprobe's error tells them apart, and carries the cure of
    each (DKMS and the kernel's headers, Secure Boot, WSL's Windows driver)."""
    cause, commands, _ = leading(tmp_path, SMI_FAILED)
    assert cause == "no-driver"
    assert commands[0].startswith("sudo modprobe nvidia") and "Key was rejected" in commands[0]
    assert any(c.startswith("dkms status") for c in commands)
    assert any("linux-headers-$(uname -r)" in c and "dkms autoinstall" in c for c in commands)
    assert any(c.startswith("uname -r") and "WSL2" in c for c in commands)


def test_a_module_not_loaded_is_cured_by_a_reboot_or_a_reinstall_of_the_driver() -> None:
    """NVIDIA's installation guide ends every install with a reboot, and a driver reinstalled with the running
    kernel's headers present has DKMS build its module: both cures come after the commands that tell the causes
    apart, the reinstall with the distribution's packages."""
    os_release = {"id": "ubuntu", "version_id": "22.04", "version_codename": "jammy"}
    _, cure = nvml_init.failure({"status": "driver-not-loaded"}, {"os_release": os_release}, {})
    commands = [str(c) for c in cure.commands]
    reboot = next(i for i, c in enumerate(commands) if c.startswith("sudo reboot"))
    headers = next(i for i, c in enumerate(commands) if "linux-headers-$(uname -r)" in c)
    install = [
        i
        for i, c in enumerate(commands)
        if c.startswith(("sudo apt install", "sudo apt-get install")) and "nvidia-driver" in c
    ]
    assert headers < reboot and install and min(install) > headers, commands


@pytest.mark.parametrize(
    ("os_release", "headers"),
    [
        ({"id": "ubuntu", "version_id": "22.04"}, "sudo apt-get install linux-headers-$(uname -r)"),
        ({"id": "rocky", "id_like": "rhel centos fedora"}, "sudo dnf install kernel-devel-matched kernel-headers"),
    ],
)
def test_the_headers_are_installed_with_the_distributions_packages(os_release: dict, headers: str) -> None:
    _, cure = nvml_init.failure({"status": "driver-not-loaded"}, {"os_release": os_release}, {})
    assert any(str(c).startswith(headers) for c in cure.commands), cure.commands


@pytest.mark.parametrize("kernel", ["5.15.133.1-microsoft-standard-WSL2", "4.4.0-17763-Microsoft"])
@pytest.mark.parametrize("status", ["driver-not-loaded", "library-not-found"])
def test_wsl_is_cured_by_the_windows_driver_never_a_linux_one(kernel: str, status: str) -> None:
    summary, cure = nvml_init.failure({"status": status}, {"kernel": kernel, "os": "Linux"}, {})
    commands = [str(c) for c in cure.commands]
    assert "WSL" in summary
    assert commands[0].startswith("wsl.exe --list --verbose"), commands
    linux_driver = ("sudo apt-get install", "sudo modprobe", "dkms status", "sudo dnf")
    assert not any(c.startswith(linux_driver) for c in commands), "no Linux driver inside WSL"


def test_a_version_mismatch_reloads_or_reboots_and_shows_which_library_the_loader_finds() -> None:
    _, cure = nvml_init.failure({"status": "version-mismatch"}, {}, {})
    commands = [str(c) for c in cure.commands]
    assert commands[0] == "sudo reboot"
    assert any(c.startswith("sudo rmmod nvidia_uvm") for c in commands)
    assert any(c.startswith("ldconfig -p | grep libnvidia-ml") for c in commands)


def nvml_check(tmp_path: Path, text: str) -> tuple[str, list[str]]:
    """driver.nvml's status and its commands, in the order the report gives them."""
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    document = json.loads(gpudoctor("check", "--from", str(paste), "--json").stdout)
    check = next(c for c in document["checks"] if c["check_id"] == "driver.nvml")
    return check["status"], check["remediation"]["commands"]


def test_nvidia_smi_without_libnvidia_ml_rebuilds_the_linker_cache_before_a_driver_install(tmp_path: Path) -> None:
    """nvidia-smi's own message when dlopen of libnvidia-ml.so.1 fails: the library may be there but not in the
    linker cache (a container whose toolkit ran the wrong ldconfig), so ldconfig leads and the install follows."""
    text = (
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
        "Driver is properly installed and present in your system.\n"
    )
    cause, commands, instead = leading(tmp_path, text)
    assert cause == "no-driver"
    assert any(c.startswith("sudo ldconfig") for c in commands)
    assert any("/etc/nvidia-container-runtime/config.toml" in c for c in commands)
    assert instead, "the driver's own cure follows as the other way"


def test_nvml_unknown_error_offers_the_container_cures_for_docker_and_kubernetes(tmp_path: Path) -> None:
    """nvidia-smi's 'Unknown Error' in a container: its device nodes were withdrawn (systemd's reload, or the
    kubelet's static CPU manager); both cures lead, the device plugin's PASS_DEVICE_SPECS for Kubernetes."""
    status, commands = nvml_check(tmp_path, "# nvidia-smi\nFailed to initialize NVML: Unknown Error\n")
    assert status == "fail"
    assert "create-dev-char-symlinks" in commands[0]
    assert any("PASS_DEVICE_SPECS=true" in c for c in commands)


def test_no_driver_where_no_gpu_may_exist_names_the_notebooks_accelerator_setting(tmp_path: Path) -> None:
    """torch's 'Found no NVIDIA driver' cannot tell a machine without its driver from a runtime without a GPU: the
    other way, running where there is no GPU, says where a notebook (Colab, Kaggle) gets one."""
    text = (
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed "
        "a driver from http://www.nvidia.com/Download/index.aspx\n"
    )
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    document = json.loads(gpudoctor("check", "--from", str(paste), "--json").stdout)
    check = next(c for c in document["checks"] if c["check_id"] == "driver.nvml")
    instead = check["remediation"]["instead"]["commands"]
    assert any("Change runtime type" in c and "Accelerator" in c for c in instead), instead
