"""The collect_env reader (gpudoctor/paste/collect_env.py) over every real sample of
tests/fixtures/pastes/collect_env/, the layouts no sample shows (torch 2.15, vLLM's sectioned copy in full),
what must not be taken for collect_env, and hostile input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES
from helpers.growth import LINEAR, K, growth

from gpudoctor import paste
from gpudoctor.paste import collect_env
from gpudoctor.paste.found import Found

PASTES = FIXTURES / "pastes"
SAMPLES = PASTES / "collect_env"


def read(text: str) -> Found:
    """The collect_env reader alone over `text`, split as gpudoctor.paste.read splits a paste."""
    found = Found.of(text)
    collect_env.read(found)
    return found


def read_sample(name: str) -> Found:
    return read((SAMPLES / name).read_text(encoding="utf-8", errors="replace"))


def gpus(*names: str) -> list[dict[str, Any]]:
    return [{"index": i, "name": name} for i, name in enumerate(names)]


def nvcc(version: str) -> dict[str, str]:
    return {"path": "nvcc", "version": version}


def ubuntu(version: str, codename: str) -> dict[str, str]:
    return {"id": "ubuntu", "version_id": version, "version_codename": codename}


def tv(version: str) -> dict[str, Any]:
    return {"installed": True, "version": version}


# Every fact each real sample states, exactly (nothing more is recorded).
EXPECTED: dict[str, dict[str, dict[str, Any]]] = {
    "torch-0.5.0a0-source-cu92-fedora.txt": {
        "nvml": {"driver_version": "396.45", "gpus": gpus("GeForce GTX 1080")},
        "torch": {"version": "0.5.0a0+152762a", "importable": True, "cuda": "9.2.148", "cuda_available": True},
        "system": {
            "os": "Linux",
            "os_release": {"id": "fedora", "version_id": "28"},
            "python": "3.6",
            "nvcc": nvcc("9.2"),
            "cudnn_libraries": ["7.2.1"],  # libcudnn_static.a names no version
        },
    },
    "torch-1.0.0-cu90-ubuntu-conda-py27-3gpu.txt": {
        "nvml": {"driver_version": "390.48", "gpus": gpus(*["GeForce GTX 1080 Ti"] * 3)},
        "torch": {
            "version": "1.0.0",
            "importable": True,
            "cuda": "9.0.176",
            "cuda_available": True,
            "torchvision": tv("0.2.1"),  # old pip list style "[pip] torchvision (0.2.1)"
        },
        "system": {
            "os": "Linux",
            "os_release": ubuntu("16.04", "xenial"),
            "python": "2.7",
            "nvcc": nvcc("9.0"),
            "cudnn_libraries": ["7.0.4", "7.0.5"],
        },
    },
    "torch-1.1.0-cu90-linux-pip-rtx2060-copied-script.txt": {
        "nvml": {"driver_version": "418.67", "gpus": gpus("GeForce RTX 2060")},
        "torch": {
            "version": "1.1.0",
            "importable": True,
            "cuda": "9.0.176",
            "cuda_available": True,
            "torchvision": tv("0.2.0"),
        },
        "system": {"os": "Linux", "os_release": ubuntu("18.04", "bionic"), "python": "3.6", "nvcc": nvcc("9.1")},
    },
    "torch-1.1.0-cu90-windows10-conda.txt": {
        "nvml": {"driver_version": "419.67", "gpus": gpus("GeForce GTX 1080 Ti")},
        "torch": {
            "version": "1.1.0",
            "importable": True,
            "cuda": "9.0",
            "cuda_available": True,
            "torchvision": tv("0.2.2"),  # pip's 0.2.2, not conda's pypi_0 row saying 0.2.1
        },
        "system": {"os": "Windows", "python": "3.6", "nvcc": nvcc("9.0"), "cudnn_libraries": ["7"]},
    },
    "torch-1.11.0-cu115-ubuntu18-8xa5000-cudnn-list.txt": {
        "nvml": {"driver_version": "510.73.08", "gpus": gpus(*["NVIDIA RTX A5000"] * 8)},
        "torch": {
            "version": "1.11.0+cu115",
            "importable": True,
            "cuda": "11.5",
            "cuda_available": True,
            "torchvision": tv("0.12.0+cu115"),
        },
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": ubuntu("18.04", "bionic"),
            "python": "3.7.13",
            "nvcc": nvcc("11.1"),
            "cudnn_libraries": ["8.4.0"],
        },
    },
    "torch-1.12.1-macos-arm64-no-cuda.txt": {
        "nvml": {},
        "torch": {
            "version": "1.12.1",
            "importable": True,
            "cuda": None,
            "cuda_available": False,
            "torchvision": tv("0.13.1"),
        },
        "system": {"os": "Darwin", "machine": "arm64", "python": "3.9.13"},
    },
    "torch-1.3.0a0-windows10-mojibake-os-name-crlf.txt": {
        "nvml": {"driver_version": "411.31", "gpus": gpus("GeForce GTX 1080 Ti")},
        "torch": {
            "version": "1.3.0a0+de394b6",
            "importable": True,
            "cuda": "10.0",
            "cuda_available": True,
            "torchvision": tv("0.4.1a0+d94043a"),
        },
        "system": {"os": "Windows", "python": "3.6", "nvcc": nvcc("10.0"), "cudnn_libraries": ["7"]},
    },
    "torch-1.4.0-cpu-windows10-pip.txt": {
        "nvml": {},
        "torch": {
            "version": "1.4.0+cpu",
            "importable": True,
            "cuda": None,
            "cuda_available": False,
            "torchvision": tv("0.5.0+cpu"),
        },
        "system": {"os": "Windows", "python": "3.7"},
    },
    "torch-1.4.0-cu101-linux-pip-gtx980.txt": {
        "nvml": {"driver_version": "460.32.03", "gpus": gpus("GeForce GTX 980")},
        "torch": {
            "version": "1.4.0",
            "importable": True,
            "cuda": "10.1",
            "cuda_available": True,
            "torchvision": tv("0.5.0"),
        },
        "system": {"os": "Linux", "os_release": ubuntu("18.04", "bionic"), "python": "3.7", "nvcc": nvcc("10.2")},
    },
    "torch-1.5.0-cu101-windows-could-not-collect.txt": {
        "nvml": {"driver_version": "426.25", "gpus": gpus("Quadro P1000")},
        "torch": {"version": "1.5.0+cu101", "importable": True, "cuda": "10.1", "cuda_available": True},
        "system": {"python": "3.7", "nvcc": nvcc("10.1")},  # "OS: Could not collect": no OS
    },
    "torch-1.6.0-cu102-ubuntu20-new-format-64bit-runtime.txt": {
        "nvml": {"driver_version": "450.51.06", "gpus": gpus("GeForce GTX 1070")},
        "torch": {"version": "1.6.0", "importable": True, "cuda": "10.2", "cuda_available": True},
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": ubuntu("20.04", "focal"),
            "python": "3.8",
            "nvcc": nvcc("10.1"),
        },
    },
    "torch-1.7.0-cu101-colab-debug-true-partial.txt": {
        "nvml": {"driver_version": "418.67", "gpus": gpus("Tesla T4")},
        "torch": {"version": "1.7.0+cu101", "importable": True, "cuda": "10.1", "cuda_available": True},
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": ubuntu("18.04", "bionic"),
            "python": "3.6",
            "nvcc": nvcc("10.1"),
        },
    },
    "torch-1.7.0a0-rocm-3.7-source-build-partial.txt": {
        "nvml": {},  # "Device 66a1" is torch's name of an AMD GPU, not one NVML numbers
        "torch": {
            "version": "1.7.0a0+9ddd3df",
            "importable": True,
            "hip": "3.7.20315-077bcfa0",
            "cuda_available": True,
            "torchvision": tv("0.8.0a0+a4736ea"),
        },
        "system": {"os": "Linux", "machine": "x86_64", "os_release": ubuntu("18.04", "bionic"), "python": "3.6"},
    },
    "torch-1.9.0-cu111-centos7-cuda-not-available.txt": {
        "nvml": {},
        "torch": {
            "version": "1.9.0+cu111",
            "importable": True,
            "cuda": "11.1",
            "cuda_available": False,
            "torchvision": tv("0.10.0+cu111"),
        },
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": {"id": "centos", "version_id": "7"},
            "python": "3.6",
            "nvcc": nvcc("11.1"),
        },
    },
    "torch-2.0.0.dev-cpu-cxx11-centos8-cpu-block.txt": {
        "nvml": {},
        "torch": {
            "version": "2.0.0.dev20230228+cpu-cxx11-abi",
            "importable": True,
            "cuda": None,
            "cuda_available": False,
        },
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": {"id": "centos", "version_id": "8"},
            "python": "3.9.16",
        },
    },
    "torch-2.0.1-cu117-windows11-wmic-cpu-block-partial.txt": {
        "nvml": {"driver_version": "535.98", "gpus": gpus("NVIDIA GeForce GTX 1050 Ti")},
        "torch": {
            "version": "2.0.1+cu117",
            "importable": True,
            "cuda": "11.7",
            "cuda_available": True,
            "torchvision": tv("0.15.2"),
        },
        "system": {"os": "Windows", "python": "3.9.16", "nvcc": nvcc("11.7"), "cudnn_libraries": ["8"]},
    },
    "torch-2.2.2-cu121-arch-conda-runpy-warning-full.txt": {
        "nvml": {"driver_version": "550.67", "gpus": gpus("NVIDIA GeForce RTX 3060 Ti")},
        "torch": {
            "version": "2.2.2",
            "importable": True,
            "cuda": "12.1",
            "cuda_available": True,
            "torchvision": tv("0.17.2"),
        },
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": {"id": "arch"},
            "python": "3.12.2",
            "nvcc": nvcc("12.4"),
            "cudnn_libraries": ["8.9.7"],
        },
    },
    "torch-2.4.1-cu121-8xa100-aws-partial.txt": {
        "nvml": {"gpus": gpus(*["NVIDIA A100-SXM4-40GB"] * 6)},
        "torch": {"version": "2.4.1+cu121", "importable": True, "cuda": "12.1", "cuda_available": True},
        "system": {"os": "Linux", "machine": "x86_64", "os_release": ubuntu("20.04", "focal"), "python": "3.11.9"},
    },
    "torch-2.5.1-cu118-python-m-runpy-warning-4xv100s-partial.txt": {
        "nvml": {"gpus": gpus(*["Tesla V100S-PCIE-32GB"] * 3)},
        "torch": {"version": "2.5.1+cu118", "importable": True, "cuda": "11.8", "cuda_available": True},
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": ubuntu("20.04", "focal"),
            "python": "3.10.15",
            "nvcc": nvcc("11.8"),
        },
    },
    "torch-2.7.0.dev-rocm6.3-gentoo-rx5700xt-joined-first-line-partial.txt": {
        "nvml": {},
        "torch": {
            "version": "2.7.0.dev20250123+rocm6.3",
            "importable": True,
            "hip": "6.3.42131-fa1d09cbd",
            "cuda_available": True,
        },
        "system": {"os": "Linux", "machine": "x86_64", "os_release": {"id": "gentoo"}, "python": "3.12.8"},
    },
    "torch-2.8.0.dev-xpu-intel-max1550-partial.txt": {
        "nvml": {},  # Intel GPUs are listed under "Intel GPU models onboard", not as NVIDIA GPUs
        "torch": {"version": "2.8.0.dev20250516+xpu", "importable": True, "cuda": None, "cuda_available": False},
        "system": {"os": "Linux", "machine": "x86_64", "os_release": ubuntu("22.04", "jammy"), "python": "3.10.17"},
    },
    "torch-NA-source-tree-1.12-era-multiple-cudnn-partial.txt": {
        "nvml": {"driver_version": "510.47.03", "gpus": gpus("Tesla T4")},
        "torch": {"importable": False},
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": ubuntu("18.04", "bionic"),
            "python": "3.9.12",
            "cudnn_libraries": ["8.0.5"],
        },
    },
    "vllm-sectioned-format-torch-2.5.1-cu124-rhel8-partial.txt": {
        "nvml": {},
        "torch": {"version": "2.5.1+cu124", "importable": True, "cuda": "12.4"},
        "system": {"os": "Linux", "machine": "x86_64", "os_release": {"id": "rhel", "version_id": "8.3"}},
    },
    "vllm-torch-2.6.0-cu124-centos7-8xa100-driver525-partial.txt": {
        "nvml": {"driver_version": "525.60.13", "gpus": gpus(*["NVIDIA A100 80GB PCIe"] * 8)},
        "torch": {"version": "2.6.0+cu124", "importable": True, "cuda": "12.4", "cuda_available": True},
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": {"id": "centos", "version_id": "7"},
            "python": "3.12.9",
        },
    },
    "vllm-torch-2.7.0-cu128-ubuntu24-a100-driver575-partial.txt": {
        "nvml": {"driver_version": "575.51.03", "gpus": gpus("NVIDIA A100-SXM4-40GB")},
        "torch": {"version": "2.7.0+cu128", "importable": True, "cuda": "12.8", "cuda_available": True},
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": ubuntu("24.04", "noble"),
            "python": "3.12.3",
            "nvcc": nvcc("12.9"),
        },
    },
}


def test_every_sample_has_its_expectation() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in SAMPLES.glob("*.txt"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_sample_gives_exactly_its_facts(name: str) -> None:
    found = read_sample(name)
    assert found.facts == EXPECTED[name]
    assert found.conflicts == {}
    assert set(found.kinds) == {"collect_env"}
    assert {where.reader for where in found.origins.values()} == {"collect_env"}


def test_facts_point_at_the_lines_that_state_them() -> None:
    found = read_sample("torch-1.11.0-cu115-ubuntu18-8xa5000-cudnn-list.txt")
    assert found.origins["torch.version"].line == 1
    assert found.origins["torch.version"].text == "PyTorch version: 1.11.0+cu115"
    assert found.origins["nvml.gpus.7.name"].text == "GPU 7: NVIDIA RTX A5000"
    assert found.origins["nvml.gpus.7.name"].line == 24
    assert found.origins["system.cudnn_libraries"].text.startswith("cuDNN version: Probably one of the following")
    assert found.origins["torch.torchvision.version"].text == "[pip3] torchvision==0.12.0+cu115"
    assert found.origins["system.nvcc.version"].text == "CUDA runtime version: 11.1.105"


def test_cudnn_files_on_the_system_are_not_the_cudnn_torch_loads() -> None:
    for name in EXPECTED:
        assert "cudnn" not in read_sample(name).facts["torch"], name


def test_a_line_joined_onto_collecting_is_read() -> None:
    found = read_sample("torch-2.7.0.dev-rocm6.3-gentoo-rx5700xt-joined-first-line-partial.txt")
    assert found.origins["torch.version"].line == 1
    assert found.origins["torch.version"].text.startswith("Collecting environment information...")


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for kind in ("nvidia-smi", "kernel", "nccl", "errors", "bug-report", "issues")
        for p in (PASTES / kind).glob("*.txt")
        if not p.name.startswith("pytorch-48200")
    ),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_samples_of_other_kinds_give_nothing(path: Path) -> None:
    found = read(path.read_text(encoding="utf-8", errors="replace"))
    assert found.kinds == {}
    assert found.facts == {"nvml": {}, "torch": {}, "system": {}}


def test_an_issue_body_with_collect_env_in_a_code_fence() -> None:
    """pytorch/pytorch#48200: a bug report whose "Environment" section is collect_env output in a fence."""
    found = read(
        (PASTES / "issues" / "pytorch-48200-nvrtc-invalid-gpu-architecture-rtx3090-torch-1.7.0-cu110.txt").read_text()
    )
    assert found.facts["torch"] == {
        "version": "1.7.0",
        "importable": True,
        "cuda": "11.0",
        "cuda_available": True,
        "torchvision": tv("0.8.1"),
    }
    assert found.facts["nvml"] == {"driver_version": "455.38", "gpus": gpus("GeForce RTX 3090", "GeForce RTX 2080 Ti")}
    assert "nvcc" not in found.facts["system"]  # "CUDA runtime version: Could not collect"


def test_the_whole_reader_table_reads_collect_env() -> None:
    found = paste.read((SAMPLES / "torch-2.2.2-cu121-arch-conda-runpy-warning-full.txt").read_text())
    assert found.kinds["collect_env"] > 0
    assert found.facts["torch"]["version"] == "2.2.2"
    assert found.origins["torch.version"].reader == collect_env.READER == "collect_env"


RUNPY_WARNING = (
    "<frozen runpy>:128: RuntimeWarning: 'torch.utils.collect_env' found in sys.modules after import of package "
    "'torch.utils', but prior to execution of 'torch.utils.collect_env'; this may result in unpredictable behaviour\n"
)
# torch 2.15.0+cu132's own output (`python -m torch.utils.collect_env` with this project's .venv, on a machine
# without a GPU and with nvcc 13.0 on PATH), the CPU block and most of the package list left out.
TORCH_2_15 = (
    RUNPY_WARNING
    + """\
Collecting environment information...
PyTorch version: 2.15.0+cu132
Is debug build: False
CUDA used to build PyTorch: 13.2
ROCm SDK used to build PyTorch: N/A
HIP used to build PyTorch: N/A

OS: Debian GNU/Linux 12 (bookworm) (x86_64)
GCC version: (Debian 12.2.0-14+deb12u1) 12.2.0
Clang version: Could not collect
CMake version: version 3.25.1
Libc version: glibc-2.36

Python version: 3.11.7 (main, May  9 2026, 07:35:25) [GCC 12.2.0] (64-bit runtime)
Python platform: Linux-6.18.44-fc-v669-x86_64-with-glibc2.36
Is CUDA available: False
CUDA runtime version: 13.0.88
CUDA_MODULE_LOADING set to: N/A
GPU models and configuration: Could not collect
Nvidia driver version: Could not collect
cuDNN version: Could not collect
Is XPU available: False
HIP runtime version: N/A
MIOpen runtime version: N/A
Is XNNPACK available: False
Caching allocator config: N/A

CPU:
Architecture:                            x86_64
CPU op-mode(s):                          32-bit, 64-bit
Model name:                              Intel(R) Xeon(R) Processor
NUMA node0 CPU(s):                       0,1

Versions of relevant libraries:
[pip3] numpy==2.4.6
[pip3] nvidia-cudnn-cu13==9.26.0.51
[pip3] nvidia-nccl-cu13==2.30.7
[pip3] torch==2.15.0
[pip3] torchvision==0.29.2
[pip3] triton==3.9.0
"""
)


def test_torch_2_15_layout() -> None:
    found = read(TORCH_2_15)
    assert found.facts == {
        "nvml": {},
        "torch": {
            "version": "2.15.0+cu132",  # its own line, not the pip line's "2.15.0"
            "importable": True,
            "cuda": "13.2",
            "cuda_available": False,
            "torchvision": tv("0.29.2"),
            "nccl": {"version": "2.30.7"},
        },
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": {"id": "debian", "version_id": "12", "version_codename": "bookworm"},
            "python": "3.11.7",
            "nvcc": nvcc("13.0"),
        },
    }
    assert found.origins["torch.nccl.version"].text == "[pip3] nvidia-nccl-cu13==2.30.7"


def test_torch_2_15_rocm_build_reads_hip_not_the_rocm_sdk() -> None:
    text = TORCH_2_15.replace("CUDA used to build PyTorch: 13.2", "CUDA used to build PyTorch: N/A")
    text = text.replace("ROCm SDK used to build PyTorch: N/A", "ROCm SDK used to build PyTorch: 7.1.0")
    text = text.replace("HIP used to build PyTorch: N/A", "HIP used to build PyTorch: 7.1.25424-4179531dcd")
    text = text.replace(
        "GPU models and configuration: Could not collect", "GPU models and configuration: AMD Instinct MI300X"
    )
    torch = read(text).facts["torch"]
    assert torch["hip"] == "7.1.25424-4179531dcd"
    assert "cuda" not in torch
    assert read(text).facts["nvml"] == {}


# vLLM's sectioned layout in full, as vllm/collect_env.py (vllm-project/vllm @030ea52e) formats it.
VLLM_SECTIONED = """\
INFO 07-21 10:19:29 [__init__.py:183] Automatically detected platform cuda.
Collecting environment information...
==============================
        System Info
==============================
OS                           : Ubuntu 22.04.4 LTS (x86_64)
GCC version                  : (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Clang version                : Could not collect
CMake version                : version 3.22.1
Libc version                 : glibc-2.35

==============================
       PyTorch Info
==============================
PyTorch version              : 2.7.1+cu126
Is debug build               : False
CUDA used to build PyTorch   : 12.6
ROCM used to build PyTorch   : N/A
XPU used to build PyTorch    : N/A

==============================
      Python Environment
==============================
Python version               : 3.12.11 (main, Jun  4 2025, 08:56:18) [GCC 11.4.0] (64-bit runtime)
Python platform              : Linux-5.15.0-141-generic-x86_64-with-glibc2.35

==============================
       CUDA / GPU Info
==============================
Is CUDA available            : True
CUDA runtime version         : 12.6.85
CUDA_MODULE_LOADING set to   : LAZY
GPU models and configuration :\x20
GPU 0: NVIDIA H100 80GB HBM3
GPU 1: NVIDIA H100 80GB HBM3

Nvidia driver version        : 570.133.20
cuDNN version                : Could not collect
HIP runtime version          : N/A
MIOpen runtime version       : N/A
Is XNNPACK available         : True

==============================
          CPU Info
==============================
Architecture:                         x86_64
CPU op-mode(s):                       32-bit, 64-bit
Model name:                           Intel(R) Xeon(R) Platinum 8480+

==============================
Versions of relevant libraries
==============================
[pip3] nvidia-nccl-cu12==2.26.2
[pip3] torch==2.7.1
[pip3] torchvision==0.22.1
[conda] Could not collect

==============================
         vLLM Info
==============================
ROCM Version                 : Could not collect
vLLM Version                 : 0.10.0
vLLM Build Flags:
  CUDA Archs: Not Set; ROCm: Disabled
GPU Topology:
  \tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\t0-51\t0\t\tN/A
GPU1\tNV18\t X \t0-51\t0\t\tN/A

==============================
     Environment Variables
==============================
NCCL_CUMEM_ENABLE=0
CUDA_VISIBLE_DEVICES=0,1
"""


def test_vllm_sectioned_layout_in_full() -> None:
    found = read(VLLM_SECTIONED)
    assert found.facts == {
        "nvml": {"driver_version": "570.133.20", "gpus": gpus("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")},
        "torch": {
            "version": "2.7.1+cu126",
            "importable": True,
            "cuda": "12.6",
            "cuda_available": True,
            "torchvision": tv("0.22.1"),
            "nccl": {"version": "2.26.2"},
        },
        "system": {
            "os": "Linux",
            "machine": "x86_64",
            "os_release": ubuntu("22.04", "jammy"),
            "python": "3.12.11",
            "nvcc": nvcc("12.6"),
        },
    }


def test_a_cpu_list_without_its_blank_line_still_ends_at_the_package_list() -> None:
    torch_style = TORCH_2_15.replace("NUMA node0 CPU(s):                       0,1\n\n", "NUMA node0 CPU(s): 0,1\n")
    assert read(torch_style).facts["torch"]["torchvision"] == tv("0.29.2")
    sectioned = VLLM_SECTIONED.replace("Platinum 8480+\n\n", "Platinum 8480+\n")
    assert read(sectioned).facts["torch"]["torchvision"] == tv("0.22.1")


# --- what collect_env's words mean --------------------------------------------------------------------------
BASE = """\
PyTorch version: {version}
Is debug build: False
CUDA used to build PyTorch: {cuda}
ROCM used to build PyTorch: N/A
"""


@pytest.mark.parametrize(
    ("version", "cuda", "expected"),
    [
        ("2.3.0+cpu", "None", {"version": "2.3.0+cpu", "importable": True, "cuda": None}),
        # torch imported, torch.version.cuda None, but nvcc or nvidia-smi answered: pretty_str's "Could not collect"
        ("2.3.0+cpu", "Could not collect", {"version": "2.3.0+cpu", "importable": True, "cuda": None}),
        ("N/A", "N/A", {"importable": False}),
        ("N/A", "Could not collect", {"importable": False}),
        ("2.3.0", "12.1", {"version": "2.3.0", "importable": True, "cuda": "12.1"}),
        ("2.", "12", {}),  # truncated values state nothing
    ],
)
def test_torch_build_lines(version: str, cuda: str, expected: dict[str, Any]) -> None:
    assert read(BASE.format(version=version, cuda=cuda)).facts["torch"] == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Is CUDA available: Yes", True),
        ("Is CUDA available: No", False),
        ("Is CUDA available: True", True),
        ("Is CUDA available: False", False),
        ("Is CUDA available: N/A", None),
    ],
)
def test_cuda_available(line: str, expected: bool | None) -> None:
    torch = read(BASE.format(version="2.1.0", cuda="12.1") + line + "\n").facts["torch"]
    assert torch.get("cuda_available", None) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Ubuntu 22.04.4 LTS (x86_64)", ("Linux", "x86_64", ubuntu("22.04", "jammy"))),
        ("Ubuntu 24.04 LTS (aarch64)", ("Linux", "aarch64", ubuntu("24.04", "noble"))),
        ("Ubuntu 18.04.3 LTS", ("Linux", None, ubuntu("18.04", "bionic"))),
        ("CentOS Linux 7 (Core) (x86_64)", ("Linux", "x86_64", {"id": "centos", "version_id": "7"})),
        ("CentOS Stream release 9 (x86_64)", ("Linux", "x86_64", {"id": "centos", "version_id": "9"})),
        ("Red Hat Enterprise Linux 8.10 (Ootpa) (x86_64)", ("Linux", "x86_64", {"id": "rhel", "version_id": "8.10"})),
        (
            "Red Hat Enterprise Linux Server release 7.9 (Maipo) (ppc64le)",
            ("Linux", "ppc64le", {"id": "rhel", "version_id": "7.9"}),
        ),
        ("Rocky Linux 9.3 (Blue Onyx) (x86_64)", ("Linux", "x86_64", {"id": "rocky", "version_id": "9.3"})),
        ("AlmaLinux 8.9 (Midnight Oncilla) (x86_64)", ("Linux", "x86_64", {"id": "almalinux", "version_id": "8.9"})),
        ("Oracle Linux Server 8.9 (x86_64)", ("Linux", "x86_64", {"id": "ol", "version_id": "8.9"})),
        ("Fedora Linux 39 (Workstation Edition) (x86_64)", ("Linux", "x86_64", {"id": "fedora", "version_id": "39"})),
        ("Amazon Linux 2 (x86_64)", ("Linux", "x86_64", {"id": "amzn", "version_id": "2"})),
        ("Amazon Linux 2023.5.20240708 (aarch64)", ("Linux", "aarch64", {"id": "amzn", "version_id": "2023"})),
        ("SUSE Linux Enterprise Server 15 SP5 (x86_64)", ("Linux", "x86_64", {"id": "sles", "version_id": "15.5"})),
        (
            "openSUSE Leap 15.5 (x86_64)",
            ("Linux", "x86_64", {"id": "opensuse-leap", "id_like": "suse opensuse", "version_id": "15.5"}),
        ),
        (
            "Debian GNU/Linux 11 (bullseye) (x86_64)",
            ("Linux", "x86_64", {"id": "debian", "version_id": "11", "version_codename": "bullseye"}),
        ),
        ("Pop!_OS 22.04 LTS (x86_64)", ("Linux", "x86_64", None)),  # Linux by its machine suffix; no os-release known
        ("linux (x86_64)", ("Linux", "x86_64", None)),  # neither lsb_release nor /etc/*-release answered
        ("Microsoft Windows 11 Pro (10.0.26100 64-bit)", ("Windows", None, None)),
        ("Microsoft Windows 10 Home", ("Windows", None, None)),
        ("macOS 14.4.1 (arm64)", ("Darwin", "arm64", None)),
        ("Mac OSX 10.14.5", ("Darwin", None, None)),
        ("Could not collect", (None, None, None)),
        ("freebsd13", (None, None, None)),
    ],
)
def test_os_line(value: str, expected: tuple[str | None, str | None, dict[str, str] | None]) -> None:
    system = read(BASE.format(version="2.1.0", cuda="12.1") + f"\nOS: {value}\n").facts["system"]
    assert (system.get("os"), system.get("machine"), system.get("os_release")) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0] (64-bit runtime)", "3.10.12"),
        ("3.12.2 | packaged by Anaconda, Inc. | (main, Feb 27 2024, 17:35:02) [GCC 11.2.0] (64-bit runtime)", "3.12.2"),
        ("3.13.0rc1 (main) [GCC 13] (64-bit runtime)", "3.13.0rc1"),
        ("3.8 (64-bit runtime)", "3.8"),
        ("3.6", "3.6"),
        ("Could not collect", None),
    ],
)
def test_python_version(value: str, expected: str | None) -> None:
    system = read(BASE.format(version="2.1.0", cuda="12.1") + f"Python version: {value}\n").facts["system"]
    assert system.get("python") == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Python platform: Windows-10-10.0.22621-SP0", "Windows"),
        ("Python platform: macOS-12.5-arm64-arm-64bit", "Darwin"),
        ("Python platform: Linux-5.4.0-1068-aws-x86_64-with-glibc2.27", "Linux"),
    ],
)
def test_python_platform_names_the_system(line: str, expected: str) -> None:
    assert read(BASE.format(version="2.1.0", cuda="12.1") + line + "\n").facts["system"]["os"] == expected


def test_nvcc_could_not_collect_or_no_cuda_states_nothing() -> None:
    for value in ("Could not collect", "No CUDA", "N/A"):
        found = read(BASE.format(version="2.1.0", cuda="12.1") + f"CUDA runtime version: {value}\n")
        assert "nvcc" not in found.facts["system"], value


# --- GPU list -------------------------------------------------------------------------------------------------
def gpu_block(models: str, hip: str = "N/A") -> str:
    return f"""\
PyTorch version: 2.4.0
CUDA used to build PyTorch: 12.1
ROCM used to build PyTorch: {hip}
GPU models and configuration: {models}
Nvidia driver version: 550.54.15
"""


def test_mig_lines_under_a_gpu_are_not_gpus() -> None:
    text = gpu_block(
        "\nGPU 0: NVIDIA A100-SXM4-80GB\n  MIG 3g.40gb     Device  0:\n  MIG 3g.40gb     Device  1:\n"
        "GPU 1: NVIDIA A100-SXM4-80GB\n  MIG 7g.80gb     Device  0:\n"
    )
    found = read(text)
    assert found.facts["nvml"]["gpus"] == gpus("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB")
    assert found.facts["nvml"]["driver_version"] == "550.54.15"


def test_a_gpu_line_with_its_uuid_keeps_it_apart_from_the_name() -> None:
    text = gpu_block("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2c8b4c12-4c8d-5f2e-9c4a-2b3c4d5e6f70)")
    assert read(text).facts["nvml"]["gpus"] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-2c8b4c12-4c8d-5f2e-9c4a-2b3c4d5e6f70"}
    ]


def test_a_bare_name_is_gpu_0_except_an_amd_device() -> None:
    assert read(gpu_block("Tesla K80")).facts["nvml"]["gpus"] == gpus("Tesla K80")
    assert "gpus" not in read(gpu_block("AMD Instinct MI250X / MI250 (gfx90a:sramecc+:xnack-)")).facts["nvml"]
    assert "gpus" not in read(gpu_block("Device 740f", hip="5.7.31921-d1770ee1b")).facts["nvml"]
    assert "gpus" not in read(gpu_block("Could not collect")).facts["nvml"]


def test_a_gpu_index_past_any_machine_is_not_recorded() -> None:
    found = read(gpu_block("GPU 99999: NVIDIA A100"))
    assert "gpus" not in found.facts["nvml"]


# --- cuDNN files ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/usr/lib/x86_64-linux-gnu/libcudnn.so.7.6.5", ["7.6.5"]),
        (
            "Probably one of the following:\n/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0\n"
            "/usr/lib/x86_64-linux-gnu/libcudnn_engines_precompiled.so.9.1.0\n/usr/local/cuda/lib64/libcudnn.so.8.9.7",
            ["9.1.0", "8.9.7"],
        ),
        (
            "Probably one of the following:\nC:\\Program Files\\NVIDIA\\CUDNN\\v9.1\\bin\\cudnn64_9.dll\n"
            "C:\\Program Files\\NVIDIA\\CUDNN\\v9.1\\bin\\cudnn_ops64_9.dll",
            ["9"],
        ),
        ("/usr/local/cuda/lib/libcudnn.7.dylib", ["7"]),
        ("Could not collect", None),
        ("No CUDA", None),
    ],
)
def test_cudnn_libraries(value: str, expected: list[str] | None) -> None:
    text = BASE.format(version="2.1.0", cuda="12.1") + f"cuDNN version: {value}\nHIP runtime version: N/A\n"
    found = read(text)
    assert found.facts["system"].get("cudnn_libraries") == expected
    assert "cudnn" not in found.facts["torch"]


# --- package lists ----------------------------------------------------------------------------------------------
def test_torch_from_the_pip_list_where_its_own_line_is_missing() -> None:
    text = """\
Is CUDA available: True
GPU models and configuration: GPU 0: NVIDIA L4
Nvidia driver version: 550.90.07

Versions of relevant libraries:
[pip3] torch==2.3.1+cu121
[conda] pytorch                   2.3.0           py3.11_cuda12.1_cudnn8.9.2_0    pytorch
"""
    found = read(text)
    assert found.facts["torch"]["version"] == "2.3.1+cu121"
    assert "importable" not in found.facts["torch"]
    assert found.origins["torch.version"].text == "[pip3] torch==2.3.1+cu121"


def test_torch_and_torchvision_from_conda_where_pip_has_none() -> None:
    text = """\
Is CUDA available: True
CUDA runtime version: 11.8.89

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] torch @ file:///home/conda/feedstock_root/build_artifacts/torch-2.0.1.whl
[conda] pytorch                   2.0.1           py3.10_cuda11.8_cudnn8.7.0_0    pytorch
[conda] torchvision               0.15.2              py310_cu118    pytorch
[conda] nvidia-nccl-cu11          2.14.3                   pypi_0    pypi
"""
    torch = read(text).facts["torch"]
    assert torch == {
        "cuda_available": True,
        "version": "2.0.1",
        "torchvision": tv("0.15.2"),
        "nccl": {"version": "2.14.3"},
    }


def test_package_lines_outside_a_block_are_not_read() -> None:
    text = "pip list says:\n[pip3] torch==2.3.1\n[pip3] torchvision==0.18.1\n[pip3] nvidia-nccl-cu12==2.20.5\n"
    assert read(text).facts == {"nvml": {}, "torch": {}, "system": {}}


def test_an_nccl_wheel_post_release_gives_the_nccl_version() -> None:
    text = BASE.format(version="2.7.0+cu128", cuda="12.8") + "\nVersions of relevant libraries:\n"
    text += "[pip3] nvidia-nccl-cu12==2.26.2.post1\n[pip3] nvidia-cudnn-cu12==9.7.1.26\n"
    found = read(text)
    assert found.facts["torch"]["nccl"] == {"version": "2.26.2"}
    assert "cudnn" not in found.facts["torch"]


# --- what is and is not collect_env -----------------------------------------------------------------------------
def test_a_lone_label_in_a_log_is_not_collect_env() -> None:
    log = "step 1 loss 0.5\nCUDA runtime version: 12.1\nstep 2 loss 0.4\nGPU 0: NVIDIA A100\n"
    assert read(log).kinds == {}


def test_generic_labels_and_one_specific_label_are_not_collect_env() -> None:
    """An issue template's own list ("OS:", "Python version:") with one collect_env label is not a block."""
    text = "OS: Ubuntu 22.04\nPython version: 3.10\nPyTorch version: 2.1.0\nGCC version: 11\n"
    assert read(text).kinds == {}


def test_two_labels_far_apart_are_not_one_block() -> None:
    filler = "".join(f"epoch {i} loss 0.{i}\n" for i in range(collect_env.GAP + 1))
    text = "PyTorch version: 2.1.0\n" + filler + "CUDA used to build PyTorch: 12.1\n"
    assert read(text).kinds == {}
    near = "PyTorch version: 2.1.0\n" + filler[: filler.index("epoch 5")] + "CUDA used to build PyTorch: 12.1\n"
    assert read(near).facts["torch"] == {"version": "2.1.0", "importable": True, "cuda": "12.1"}


def test_a_script_printing_two_labels_states_what_it_printed() -> None:
    """Two collect_env labels make a block; values are read by their own form, so a cuDNN integer is no file."""
    found = read("PyTorch version: 2.1.0\ncuDNN version: 8902\n")
    assert found.facts == {"nvml": {}, "torch": {"version": "2.1.0", "importable": True}, "system": {}}


def test_before_and_after_blocks_are_conflicts() -> None:
    before = (SAMPLES / "torch-1.4.0-cu101-linux-pip-gtx980.txt").read_text()
    after = before.replace("PyTorch version: 1.4.0", "PyTorch version: 1.8.1+cu111")
    after = after.replace("CUDA used to build PyTorch: 10.1", "CUDA used to build PyTorch: 11.1")
    found = read("Before:\n" + before + "\nAfter reinstalling:\n" + after)
    assert found.facts["torch"]["version"] == "1.4.0"
    assert [value for value, _ in found.conflicts["torch.version"]] == ["1.4.0", "1.8.1+cu111"]
    assert [value for value, _ in found.conflicts["torch.cuda"]] == ["10.1", "11.1"]
    assert set(found.conflicts) == {"torch.version", "torch.cuda"}  # the same GPU, driver, OS: no conflict
    assert found.conflicts["torch.version"][1][1].line == len(before.split("\n")) + 4


def test_two_blocks_with_no_line_between_are_two() -> None:
    one = BASE.format(version="2.1.0", cuda="12.1")
    two = BASE.format(version="2.2.0", cuda="12.1")
    found = read(one + two)
    assert [value for value, _ in found.conflicts["torch.version"]] == ["2.1.0", "2.2.0"]


@pytest.mark.parametrize("prefix", ["> ", ">> ", "> > ", "    ", "\t", "[rank0]: ", "> [rank3]: "])
def test_quoted_indented_and_rank_prefixed_lines(prefix: str) -> None:
    text = "".join(prefix + line + "\n" for line in gpu_block("\nGPU 0: NVIDIA A10G\nGPU 1: NVIDIA A10G\n").split("\n"))
    found = read("```\n" + text + "```\n")
    assert found.facts["torch"] == {"version": "2.4.0", "importable": True, "cuda": "12.1"}
    assert found.facts["nvml"] == {"driver_version": "550.54.15", "gpus": gpus("NVIDIA A10G", "NVIDIA A10G")}


# --- hostile input ------------------------------------------------------------------------------------------
def test_empty_and_blank_text() -> None:
    for text in ("", "\n", "\n\n\n", "   \t  "):
        assert read(text).kinds == {}


def test_binary_junk() -> None:
    junk = bytes(range(256)).decode("latin-1") * 2000
    assert read(junk).kinds == {}
    mixed = junk + "\n" + (SAMPLES / "torch-1.6.0-cu102-ubuntu20-new-format-64bit-runtime.txt").read_text() + junk
    assert read(mixed).facts["torch"]["version"] == "1.6.0"


def test_truncated_block_keeps_what_it_states() -> None:
    full = (SAMPLES / "torch-1.11.0-cu115-ubuntu18-8xa5000-cudnn-list.txt").read_text()
    cut = full[: full.index("GPU 3: NVIDIA RTX A5000") + len("GPU 3: NVI")]
    found = read(cut)
    assert [g["name"] for g in found.facts["nvml"]["gpus"]] == ["NVIDIA RTX A5000"] * 3 + ["NVI"]
    assert "driver_version" not in found.facts["nvml"]
    assert found.facts["torch"]["version"] == "1.11.0+cu115"
    half_label = read("PyTorch version: 2.1.0\nCUDA used to bu")
    assert half_label.kinds == {}


def hostile_lines(long: int) -> str:
    return "\n".join(
        [
            ">" * long,
            "[rank0]: " * (long // 9),
            "PyTorch version: 2.1.0",
            "GPU models and configuration: GPU 0: " + "A" * long,
            "cuDNN version: /" + "libcudnn.so.9" * (long // 13),
            "OS: Ubuntu " + "22.04 " * (long // 6),
            "Python version: " + "3." * (long // 2),
            "[pip3] torchvision==" + "0" * long,
        ]
    )


def test_long_hostile_lines_are_read_in_linear_time() -> None:
    """Lines of 1,000,000 characters: K times as long is about K times the work (tests/helpers/growth.py)."""
    text = hostile_lines(1_000_000)
    grew = growth(read, hostile_lines(1_000_000 // K), text)
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the length"
    found = read(text)
    assert found.facts["torch"] == {"version": "2.1.0", "importable": True}
    assert found.facts["nvml"]["gpus"][0]["name"] == "A" * 200  # a name is kept to 200 characters


def test_labels_without_values_and_odd_values_do_not_raise() -> None:
    text = "\n".join(f"{label}:" for label in collect_env.MARKERS) + "\n"
    text += "\n".join(f"{label}: \x00\ufffd{'9' * 5000}" for label in collect_env.MARKERS) + "\n"
    text += "Collecting environment information..." * 10000 + "\n"
    found = read(text)
    assert found.facts["torch"] == {}


def test_a_20_mb_log_is_read_whole_and_in_linear_time() -> None:
    """A collect_env block amid 20 MB of a training log is found; K times the log is about K times the work
    (tests/helpers/growth.py, from 0.5 to 4 MB)."""
    noise = "[2024-05-01 10:00:00] INFO trainer.py:88] step 1000 loss 0.1234 lr 3e-4 (PyTorch version: 2.3.0)\n"
    count = 20_000_000 // len(noise)
    block = (SAMPLES / "torch-2.2.2-cu121-arch-conda-runpy-warning-full.txt").read_text()

    def log(lines: int) -> str:
        return noise * (lines // 2) + block + noise * (lines // 2)

    grew = growth(read, log(count // 5 // K), log(count // 5))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the log"
    for text, kinds in ((noise * count, {}), (log(count), {"collect_env"})):
        found = read(text)
        assert set(found.kinds) == set(kinds)
    assert found.facts["torch"]["version"] == "2.2.2"
    assert found.origins["torch.version"].line == count // 2 + 3
