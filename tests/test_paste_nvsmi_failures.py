"""nvidia-smi's own failure lines and the cures their words ask for (issue 49): a GPU whose handle NVML cannot
open (NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN) comes back only with a reboot, as nvidia-smi itself says ('GPU
is lost.  Reboot the system to recover this GPU'); where it recurs, its link, power or cooling is the fault."""

from __future__ import annotations

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
