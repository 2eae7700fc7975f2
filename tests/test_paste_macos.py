"""A paste from a Mac (paste/macos.py): CUDA's absence there is the platform's. PyTorch's macOS builds have no CUDA
and Apple silicon has no NVIDIA GPU, so a CPU-build or no-driver line under macOS's own paths is the program asking
for CUDA, with the MPS device as its cure, never a machine's failure or a CUDA wheel to install."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import gpudoctor
from helpers.growth import LINEAR, K, growth

from gpudoctor.paste import macos, paths, read

ASSERTION = "AssertionError: Torch not compiled with CUDA enabled\n"


def frame(path: str) -> str:
    """CPython's traceback frame line (traceback.StackSummary.format) for torch's _lazy_init under `path`."""
    return f'  File "{path}/site-packages/torch/cuda/__init__.py", line 239, in _lazy_init\n'


MAC = frame("/Users/alice/miniforge3/lib/python3.10") + ASSERTION


def ids(text: str) -> list[str]:
    return [s["id"] for s in read(text).signatures]


@pytest.mark.parametrize(
    "path",
    [
        "/Users/alice/miniforge3/lib/python3.10",
        "/opt/homebrew/lib/python3.12",
        "/Library/Frameworks/Python.framework/Versions/3.11/lib/python3.11",
    ],
)
def test_a_cpu_build_under_macos_paths_is_cuda_on_macos(path: str) -> None:
    assert ids(frame(path) + ASSERTION) == [macos.ON_MACOS]


@pytest.mark.parametrize(
    "path",
    ["/home/alice/venv/lib/python3.10", "C:/Users/alice/venv/Lib", "C:\\Users\\alice\\venv\\Lib", "/data/Users/x"],
)
def test_other_platforms_paths_keep_the_cpu_build(path: str) -> None:
    assert ids(frame(path) + ASSERTION) == ["torch-not-compiled-with-cuda"]


def test_a_mac_path_without_a_cuda_absence_changes_nothing() -> None:
    line = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)\n"
    assert ids(frame("/Users/alice/env/lib/python3.10") + line) == ids(line)


def test_the_mac_report_blames_no_machine_and_installs_no_cuda_wheel(tmp_path: Path) -> None:
    paste = tmp_path / "paste.txt"
    paste.write_text(MAC)
    document = json.loads(gpudoctor("check", "--from", str(paste), "--json").stdout)
    failing = [c["check_id"] for c in document["checks"] if c["status"] == "fail"]
    assert failing == [] and not document["causes"]
    program = next(c for c in document["checks"] if c["check_id"] == "program.error")
    commands = program["remediation"]["commands"]
    assert any("torch.backends.mps.is_available()" in c for c in commands)
    assert not any("download.pytorch.org" in c for c in commands)


def test_reading_macos_paths_is_linear() -> None:
    line = "/Users/" * 5000
    grew = growth(lambda text: paths.system(read(text)), line * (40 // K), line * 40)
    assert grew < LINEAR
