"""The banners and errors of GPU containers (issue 49), from their emitters' own words: the CUDA and NGC images'
entrypoint banner and torch's no-driver error in a Compose service's log. Each names the container's start, not the
host's driver, as what to fix."""

from __future__ import annotations

import pytest
from helpers.common import FIXTURES

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


# torch's no-driver error as c10/cuda/CUDAFunctions.cpp raises it, and glibc's dlopen error for the driver's library.
NO_DRIVER = (
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx\n"
)
NO_LIBCUDA = "OSError: libcuda.so.1: cannot open shared object file: No such file or directory\n"
# The container runtimes' own lines as their sources print them: Compose v1's progress line (compose/parallel.py
# ParallelStreamWriter: "{msg} {name:<width} ... {status}"), Compose v2's ("Container <name>" and the event's status,
# pkg/progress/event.go StartedEvent), Docker's pull notice (cli/command/container/create.go), a pasted command.
STARTS = {
    "compose v1 run": "Creating project_service_run ... done\n",
    "compose v1 up": "Recreating project_trainer_1 ... done\n",
    "compose v2": " ✔ Container project-trainer-1  Started\n",
    "docker pull": "Unable to find image 'pytorch/pytorch:latest' locally\n",
    "docker run": "$ docker run --rm -it pytorch/pytorch:latest python train.py\n",
    "podman run": "podman run --rm -it docker.io/pytorch/pytorch python train.py\n",
}
STARTED_WITHOUT = "container-started-no-nvidia-driver"


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
@pytest.mark.parametrize("error", [NO_DRIVER, NO_LIBCUDA], ids=("torch", "libcuda"))
def test_no_driver_in_a_container_a_runtime_started_is_a_container_without_gpus(start: str, error: str) -> None:
    assert STARTED_WITHOUT in ids(start + error)


@pytest.mark.parametrize(
    "start",
    [
        "$ docker run --rm --gpus all pytorch/pytorch:latest python train.py\n",
        "docker run --runtime=nvidia -it pytorch/pytorch python train.py\n",
        "podman run --device nvidia.com/gpu=all docker.io/pytorch/pytorch python train.py\n",
    ],
    ids=("--gpus", "--runtime=nvidia", "cdi"),
)
def test_a_start_that_asked_for_the_gpus_is_not_blamed(start: str) -> None:
    assert STARTED_WITHOUT not in ids(start + NO_DRIVER)


def test_no_driver_without_a_container_or_a_container_without_an_error_names_none() -> None:
    assert STARTED_WITHOUT not in ids(NO_DRIVER)
    assert not ids("".join(STARTS.values()))


def test_the_cure_gives_each_runtimes_own_way_to_ask_for_the_gpus() -> None:
    entry = signatures.table()[STARTED_WITHOUT]
    assert entry.owner == "system.container"
    fixes = " ".join(entry.fix)
    for way in ("--gpus all", "reservations", "runtime: nvidia", "nvidia.com/gpu", "--device nvidia.com/gpu=all"):
        assert way in fixes, way
    assert "nvidia-ctk runtime configure --runtime=docker" in fixes


# moby's two wordings (daemon/daemon_unix.go verifyPlatformContainerSettings before 23.0, daemon/runtime_unix.go
# after), as docker run and Compose print them.
UNKNOWN_RUNTIME = {
    "docker run": "docker: Error response from daemon: Unknown runtime specified nvidia.",
    "compose v1": "ERROR: for nada  Cannot create container for service nada: Unknown runtime specified nvidia",
    "moby 23+": "Error response from daemon: unknown or invalid runtime name: nvidia",
}


@pytest.mark.parametrize("line", UNKNOWN_RUNTIME.values(), ids=UNKNOWN_RUNTIME.keys())
def test_an_unknown_nvidia_runtime_is_docker_without_the_toolkits_runtime(line: str) -> None:
    assert ids(line) == {"docker-unknown-runtime-nvidia"}


def test_another_unknown_runtime_is_not_ours() -> None:
    assert not ids("docker: Error response from daemon: Unknown runtime specified runsc.")


def test_the_unknown_runtime_cure_installs_registers_and_restarts_or_asks_with_gpus() -> None:
    entry = signatures.table()["docker-unknown-runtime-nvidia"]
    fixes = " ".join(entry.fix)
    for way in (
        "docker info",
        "nvidia-ctk runtime configure --runtime=docker",
        "systemctl restart docker",
        "apt-get install -y nvidia-container-toolkit",
        "dnf install -y nvidia-container-toolkit",
        "--gpus all",
        "reservations",
    ):
        assert way in fixes, way


def test_docker_without_a_gpu_device_driver_is_told_to_install_the_toolkit_its_distributions_way() -> None:
    """moby's 'could not select device driver "" with capabilities: [[gpu]]': no NVIDIA Container Toolkit registered
    with Docker; its install guide's apt and dnf packages, then nvidia-ctk and a restart."""
    fixes = " ".join(signatures.table()["docker-no-gpu-runtime"].fix)
    for way in (
        "apt-get install -y nvidia-container-toolkit",
        "dnf install -y nvidia-container-toolkit",
        "nvidia-ctk runtime configure --runtime=docker",
        "systemctl restart docker",
    ):
        assert way in fixes, way


# libnvidia-container's refusal under WSL (nvc_init, after dxcore found no usable adapter), as Docker prints it.
WSL_NO_ADAPTER = (
    "nvidia-container-cli: initialization error: WSL environment detected but no adapters were found: unknown."
)


def test_wsl_without_an_nvidia_adapter_is_told_to_give_wsl_2_the_windows_driver() -> None:
    assert ids(WSL_NO_ADAPTER) == {"wsl-no-gpu-adapter"}
    entry = signatures.table()["wsl-no-gpu-adapter"]
    fixes = " ".join(entry.fix)
    for way in ("wsl.exe --list --verbose", "wsl.exe --update", "wsl.exe --shutdown", "nvidia-smi"):
        assert way in fixes, way


# The NGC images' entrypoint (/opt/nvidia/entrypoint.d/50-gpu-driver-check.sh) prints its driver check over two
# lines; three real pastes of it (tests/fixtures/pastes/containers/SOURCES.md), one with the lines joined.
NGC_DRIVER = {
    "ngc-entrypoint-driver-release-450.51-needed-440.33-found-cuinit-804.txt": "440.33.01",
    "ngc-entrypoint-driver-release-525.85-needed-470.199-found-tritonserver.txt": "470.199.02",
    "ngc-entrypoint-driver-release-545.23-needed-535.104-found-joined-line.txt": "535.104.05",
}
TOO_OLD = "container-image-driver-release-too-old"


@pytest.mark.parametrize("name", sorted(NGC_DRIVER))
def test_an_images_driver_check_names_a_host_driver_older_than_its_cuda(name: str) -> None:
    found = read((FIXTURES / "pastes" / "containers" / name).read_text(encoding="utf-8"))
    sighted = [s for s in found.signatures if s["id"] == TOO_OLD]
    assert [s["values"] for s in sighted] == [{"found": NGC_DRIVER[name]}], found.signatures
    entry = signatures.table()[TOO_OLD]
    assert entry.owner == "torch.cuda-driver" and entry.status == "fail"
    assert any("ubuntu-drivers" in f for f in entry.fix) and any("OLDER_TAG" in f for f in entry.fix)


def test_the_driver_check_on_one_line_gives_both_releases() -> None:
    line = (
        "ERROR: This container was built for NVIDIA Driver Release 535.104 or later, but version 470.82.01 was "
        "detected and compatibility mode is UNAVAILABLE."
    )
    sighted = [s for s in read(line).signatures if s["id"] == TOO_OLD]
    assert sighted[0]["values"] == {"needed": "535.104", "found": "470.82.01"}


def test_a_driver_check_that_read_no_release_names_nothing() -> None:
    """The script prints an empty release where it could not read one; the GPU may still work (the same log then
    loads a model on it), so there is nothing to judge."""
    lines = (
        "ERROR: This container was built for NVIDIA Driver Release 515.48 or later, but\n"
        "       version  was detected and compatibility mode is UNAVAILABLE.\n"
    )
    assert TOO_OLD not in ids(lines)


# libnvidia-container's mount of a driver file the image already holds: two real pastes, one cut by the terminal
# inside "mount" (tests/fixtures/pastes/containers/SOURCES.md).
DRIVER_FILES = {
    "nvidia-container-cli-mount-error-libnvidia-ml-file-exists-lambda-stack.txt": (
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    ),
    "nvidia-container-cli-mount-error-nvidia-smi-file-exists-wrapped-2018.txt": "/usr/bin/nvidia-smi",
}


@pytest.mark.parametrize("name", sorted(DRIVER_FILES))
def test_an_image_holding_the_drivers_files_is_named_with_the_file(name: str) -> None:
    found = read((FIXTURES / "pastes" / "containers" / name).read_text(encoding="utf-8"))
    sighted = [s for s in found.signatures if s["id"] == "container-image-holds-driver-files"]
    assert [s["values"] for s in sighted] == [{"file": DRIVER_FILES[name]}]
    entry = signatures.table()["container-image-holds-driver-files"]
    assert entry.owner == "system.container" and any(f.startswith("docker build") for f in entry.fix)


def test_another_file_creation_failure_is_not_the_images_driver_files() -> None:
    line = "nvidia-container-cli: mount error: file creation failed: /run/nvidia-persistenced/socket: no such device"
    assert "container-image-holds-driver-files" not in ids(line)
