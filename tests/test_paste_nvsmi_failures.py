"""nvidia-smi's own failure lines and the cures their words ask for (issue 49): a GPU whose handle NVML cannot
open (NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN) comes back only with a reboot, as nvidia-smi itself says ('GPU
is lost.  Reboot the system to recover this GPU'); where it recurs, its link, power or cooling is the fault."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.common import FIXTURES, gpudoctor

from gpudoctor.paste import read, signatures

# nvidia-smi's line as it prints it for NVML_ERROR_GPU_IS_LOST (nvmlErrorString: "GPU is lost"), with its advice.
LOST = "Unable to determine the device handle for GPU 0000:03:00.0: GPU is lost.  Reboot the system to recover this GPU"


def test_a_lost_gpu_is_the_device_handle_failure() -> None:
    found = [s for s in read(LOST).signatures if s["id"] == "nvidia-smi-device-handle-failed"]
    assert found and found[0]["values"] == {"pci": "0000:03:00.0", "reason": "GPU is lost"}


def test_the_device_handle_cure_reboots_after_reading_why() -> None:
    fixes = signatures.table()["nvidia-smi-device-handle-failed"].fix
    assert fixes[0].startswith("sudo dmesg -T")
    assert any(f.startswith("sudo reboot") for f in fixes[1:])


# nvidia-smi's "No devices were found": NVML started and counts no GPU (nvmlDeviceGetCount is 0). Two real samples
# (tests/fixtures/pastes/SOURCES.md): the bare line, and the line beside the kernel log that says why.
BARE = "nvidia-smi/no-devices-were-found-rtx5090-open-module.txt"
WITH_LOG = "nvidia-smi/no-devices-were-found-rtx5090-rminitadapter-syslog-partial.txt"


def gpu_count(path: Path) -> dict:
    document = json.loads(gpudoctor("check", "--from", str(path), "--json").stdout)
    return next(c for c in document["checks"] if c["check_id"] == "driver.gpu-count")


def test_no_devices_found_is_a_failure_with_the_commands_that_tell_why() -> None:
    result = gpu_count(FIXTURES / "pastes" / BARE)
    assert result["status"] == "fail" and "no GPU" in result["summary"], result["summary"]
    commands = result["remediation"]["commands"]
    assert commands[0].startswith("lspci -nnk -d 10de:")
    assert any(c.startswith("sudo dmesg") and "open kernel modules" in c for c in commands)
    assert any("--gpus all" in c for c in commands), "a container given no GPU"


def test_no_devices_found_beside_the_kernel_log_gets_the_logs_cause() -> None:
    result = gpu_count(FIXTURES / "pastes" / WITH_LOG)
    assert result["status"] == "fail"
    commands = result["remediation"]["commands"]
    assert commands[0].startswith("sudo dmesg | grep -i nvrm  # the lines before RmInitAdapter")
    assert any("Above 4G Decoding" in c for c in commands)


def test_a_live_nvml_with_no_gpu_is_no_pass() -> None:
    from gpudoctor.checks.driver import judge_gpu_count

    result = judge_gpu_count({"status": "ok", "gpus": [], "attached_gpus": 0}, {}, {}, None)
    assert result.status.value == "fail"
