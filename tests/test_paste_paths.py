"""The operating system a paste's own paths show (paste/paths.py), where no output in it states one: its cures are
that system's (a Windows driver from NVIDIA's page, never modprobe or apt; Apple's GPU on a Mac), and a stated OS
(collect_env's "OS:") always wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import FIXTURES, gpudoctor
from helpers.growth import LINEAR, K, growth

from gpudoctor import paste
from gpudoctor.paste import paths, read

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
    "driver is installed and running.\n"
)
TOO_OLD = (
    "{path}:107: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
    "Please update your GPU driver by downloading and installing a new version from the URL: "
    "http://www.nvidia.com/Download/index.aspx\n"
)
WIN_TORCH = "C:\\Users\\bob\\AppData\\Local\\Programs\\Python\\Python310\\lib\\site-packages\\torch\\cuda\\__init__.py"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f'  File "{WIN_TORCH}", line 3, in <module>\n', paths.WINDOWS),
        (
            'OSError: [WinError 126] Error loading "C:\\Python310\\lib\\site-packages\\torch\\lib\\c10.dll"\n',
            paths.WINDOWS,
        ),
        ("PS C:\\Users\\bob> nvidia-smi\n", paths.WINDOWS),
        ('  File "/Users/alice/env/lib/python3.11/site-packages/torch/cuda/__init__.py", line 3\n', paths.MACOS),
        ("OSError: dlopen(/opt/homebrew/lib/libomp.dylib, 0x0009): image not found\n", paths.MACOS),
        ('  File "/home/alice/env/lib/python3.11/site-packages/torch/cuda/__init__.py", line 3\n', None),
        # WSL: a Windows path beside a Linux one says neither
        (f'  File "{WIN_TORCH}", line 3\n/mnt/c/Users/bob/train.py\n', None),
        ("see C:\\ for the file and C:/Users/bob/notes.txt\n", None),
    ],
)
def test_the_paths_say_the_system(text: str, expected: str | None) -> None:
    assert paths.system(read(text)) == expected


def snapshot_os(text: str) -> str | None:
    return paste.to_snapshot("paste.txt", read(text))["system"].get("os")


def test_the_os_is_derived_from_the_paths_but_never_over_a_stated_one() -> None:
    assert snapshot_os(f'  File "{WIN_TORCH}", line 3, in <module>\n') == paths.WINDOWS
    collect_env = (FIXTURES / "pastes" / "collect_env" / "torch-1.0.0-cu90-ubuntu-conda-py27-3gpu.txt").read_text()
    assert snapshot_os(f'  File "{WIN_TORCH}", line 3, in <module>\n' + collect_env) == "Linux"


def commands(tmp_path: Path, text: str) -> list[str]:
    pasted = tmp_path / "paste.txt"
    pasted.write_text(text)
    document = json.loads(gpudoctor("check", "--from", str(pasted), "--json").stdout)
    return [c for cause in document["causes"] for c in cause["remediation"]["commands"]]


def test_a_windows_machine_without_its_driver_gets_the_windows_driver_not_a_kernel_module(tmp_path: Path) -> None:
    cure = commands(tmp_path, NO_DRIVER + "PS C:\\Users\\bob> \n")
    assert any(c.startswith("start https://www.nvidia.com/Download") for c in cure)
    assert not any(c.startswith(("sudo", "dkms", "uname")) for c in cure), cure


def test_a_windows_driver_too_old_is_updated_from_nvidias_page_not_apt(tmp_path: Path) -> None:
    cure = commands(tmp_path, TOO_OLD.format(path=WIN_TORCH))
    assert any(c.startswith("start https://www.nvidia.com/Download") for c in cure)
    assert not any("apt" in c or "ubuntu-drivers" in c or "| head" in c for c in cure), cure


def test_reading_the_paths_is_linear() -> None:
    line = "C:\\" + "a\\" * 3000 + " /Users/" * 500
    grew = growth(lambda text: paths.system(read(text)), line * (40 // K), line * 40)
    assert grew < LINEAR
