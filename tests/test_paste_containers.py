"""The banners and errors of GPU containers (issue 49), from their emitters' own words: the CUDA and NGC images'
entrypoint banner and torch's no-driver error in a Compose service's log. Each names the container's start, not the
host's driver, as what to fix."""

from __future__ import annotations

import pytest

from gpudoctor.paste import read, signatures

NGC_BANNER = (
    "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
    "   Use the NVIDIA Container Toolkit to start this container with GPU support; see\n"
    "   https://docs.nvidia.com/datacenter/cloud-native/ .\n"
)
# The wording of the images built for nvidia-docker 1 and 2 (NVIDIA/nvidia-docker wiki).
NGC_BANNER_NVIDIA_DOCKER = (
    "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
    "   Use 'nvidia-docker run' to start this container; see\n"
    "   https://github.com/NVIDIA/nvidia-docker/wiki/nvidia-docker .\n"
)


def ids(text: str) -> set[str]:
    return {s["id"] for s in read(text).signatures}


@pytest.mark.parametrize("banner", [NGC_BANNER, NGC_BANNER_NVIDIA_DOCKER], ids=("toolkit", "nvidia-docker"))
def test_an_images_no_driver_banner_is_a_container_started_without_gpus(banner: str) -> None:
    assert ids(banner) == {"container-image-no-driver-detected"}
    entry = signatures.table()["container-image-no-driver-detected"]
    assert entry.owner == "system.container" and entry.status == "fail"
    assert any("--gpus all" in f for f in entry.fix)
    assert any("nvidia-ctk runtime configure --runtime=docker" in f for f in entry.fix)


def test_the_banners_neighbours_name_nothing() -> None:
    """The images' other notices, printed beside the banner on a healthy start, are not faults."""
    healthy = (
        "NOTE: The SHMEM allocation limit is set to the default of 64MB.  This may be\n"
        "   insufficient for PyTorch.  NVIDIA recommends the use of the following flags:\n"
        "NOTE: MOFED driver for multi-node communication was not detected.\n"
    )
    assert "container-image-no-driver-detected" not in ids(healthy)
