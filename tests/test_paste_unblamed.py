"""Working machines a paste must not blame (issue 49), from what the emitter documents:

- nvidia-smi's Processes section lists every process with a context on a GPU, the paste's own program among them
  (nvidia-smi(1)); inside a container the driver lists none, since it does not see the container's PID namespace. A
  pasted listing is memory another process holds only where the paste shows something ran short of it.
- A pasted listing's processes computing on a GPU are, the same way, most often the paste's own program (a user
  pastes nvidia-smi while the training runs): with nothing in the paste that ran short, ending them is no cure.
- torch's "Found no NVIDIA driver on your system" asks the reader to "check that you have an NVIDIA GPU": torch
  cannot tell a GPU machine without its driver from a CPU machine whose program asks for CUDA (and where the
  program only asked `torch.cuda.is_available()`, torch warns and runs on the CPU: c10/cuda/CUDAFunctions.cpp
  device_count(), TORCH_WARN("CUDA initialization: ", ...)). Without evidence of a GPU it is a warning with both
  ways, never a failure of the machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import FIXTURES, gpudoctor

PROCESSES = """\
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID  Type  Process name                               Usage      |
|=============================================================================|
|    0     31337    C   python                                        2048MiB |
+-----------------------------------------------------------------------------+
"""
OUT_OF_MEMORY = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.93 GiB total capacity; 1.20 GiB "
    "already allocated; 4.56 MiB free; 1.30 GiB reserved in total by PyTorch)\n"
)
NO_DRIVER = (
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx\n"
)
NO_DRIVER_WARNING = (
    "/usr/lib/python3.10/site-packages/torch/cuda/__init__.py:107: UserWarning: CUDA initialization: Found no NVIDIA "
    "driver on your system. Please check that you have an NVIDIA GPU and installed a driver from "
    "http://www.nvidia.com/Download/index.aspx (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)\n"
)


def report(tmp_path: Path, text: str) -> dict:
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    proc = gpudoctor("check", "--from", str(paste), "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def blamed(document: dict) -> list[str]:
    """What the corpus's bench counts as blaming the machine: a cause, or a failing check outside program.*."""
    causes = [c["id"] for c in document["causes"] if c["status"] in ("fail", "warn")]
    failing = [c["check_id"] for c in document["checks"] if c["status"] == "fail"]
    return causes + [c for c in failing if not c.startswith("program.")]


def test_a_pasted_process_listing_alone_is_the_pastes_own_program_not_another(tmp_path: Path) -> None:
    assert blamed(report(tmp_path, PROCESSES)) == []


def test_a_pasted_listing_of_processes_computing_is_the_pastes_own_program_not_another(tmp_path: Path) -> None:
    table = FIXTURES / "pastes" / "nvidia-smi" / "table-r610-rtx2080super-linux-with-processes.txt"
    assert blamed(report(tmp_path, table.read_text(encoding="utf-8"))) == []


def test_a_pasted_listing_beside_an_out_of_memory_is_memory_held_elsewhere(tmp_path: Path) -> None:
    assert "gpu-memory-held" in blamed(report(tmp_path, PROCESSES + OUT_OF_MEMORY))


def test_a_containers_empty_listing_with_memory_in_use_blames_nothing(tmp_path: Path) -> None:
    empty = PROCESSES.replace("|    0     31337    C   python                                        2048MiB |\n", "")
    rule = "|=============================================================================|\n"
    none_found = "|  No running processes found" + " " * 49 + "|\n"
    container = empty.replace(rule, rule + none_found)
    assert blamed(report(tmp_path, empty)) == [] and blamed(report(tmp_path, container)) == []


@pytest.mark.parametrize("line", [NO_DRIVER, NO_DRIVER_WARNING], ids=("raised", "warned"))
def test_no_driver_without_evidence_of_a_gpu_warns_with_both_ways(tmp_path: Path, line: str) -> None:
    document = report(tmp_path, line)
    assert blamed(document) == []
    nvml = next(c for c in document["checks"] if c["check_id"] == "driver.nvml")
    assert nvml["status"] == "warn"
    fix = nvml["remediation"]
    assert any("install" in c for c in fix["commands"]), "a GPU machine: install the driver"
    other = fix["instead"]["commands"]
    assert any(c.startswith("lspci") for c in other) and any("map_location" in c for c in other), other
