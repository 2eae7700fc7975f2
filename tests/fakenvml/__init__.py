"""The fake libnvidia-ml.so.1 (fake_nvml.c): build it against NVIDIA's nvml.h, feed it a node's recorded NVML
calls, and gather that node's facts through the unmodified pynvml and ctypes in a child process whose
library path finds the fake first, as a real process finds the driver's library.

A recorded FunctionNotFound means the driver lacks that symbol, so the library is linked without it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpudoctor.facts.nvml import ERROR_FUNCTION_NOT_FOUND

SOURCE = Path(__file__).with_name("fake_nvml.c")
LIBRARY = "libnvidia-ml.so.1"
# The C symbol pynvml calls for a name the gateway records, where they differ.
SYMBOLS = {
    "nvmlInit": "nvmlInitWithFlags",
    "nvmlDeviceGetCount": "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex": "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetComputeRunningProcesses": "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses": "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMPSComputeRunningProcesses": "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlDeviceGetNvLinkRemotePciInfo": "nvmlDeviceGetNvLinkRemotePciInfo_v2",
}
GATHER = """
import json, os, sys
from gpudoctor.facts import nvml
answers = []
for path in sys.argv[1:]:
    os.environ["FAKE_NVML_DATA"] = path
    facts, recording = nvml.gather_live()
    answers.append({"facts": facts, "recording": recording})
json.dump(answers, sys.stdout)
"""


class FakeLibraryError(RuntimeError):
    """The fake library cannot be built here (no C compiler, or no nvml.h)."""


def header_dir() -> Path:
    """The folder of nvml.h from the nvidia-nvml-dev wheel (a test dependency)."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for header in sorted(Path(root).glob("*/include/nvml.h")):
            return header.parent
    raise FakeLibraryError("nvml.h not found: pip install nvidia-nvml-dev (the test extra has it)")


def missing_symbols(recording: dict[str, Any]) -> list[str]:
    """The C symbols a driver lacks, read off the calls recorded as FunctionNotFound."""
    missing = set()
    for key, answer in recording.items():
        if isinstance(answer, dict) and answer.get("nvml_error") == ERROR_FUNCTION_NOT_FOUND:
            name = key.split("(", 1)[0]
            missing.add(SYMBOLS.get(name, name))
    return sorted(missing)


def build(folder: Path, missing: list[str] = ()) -> Path:
    """Compile the library into `folder`, leaving out the `missing` symbols; returns the folder."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        raise FakeLibraryError("no C compiler (gcc) on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "exports.map"
    hidden = "".join(f" {name};" for name in missing)
    script.write_text(f"{{\n  global: *;\n  local:{hidden}\n}};\n" if missing else "{ global: *; };\n")
    command = [
        compiler,
        "-std=gnu11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-Wno-deprecated-declarations",
        "-shared",
        "-fPIC",
        f"-I{header_dir()}",
        f"-Wl,--version-script={script}",
        "-o",
        str(folder / LIBRARY),
        str(SOURCE),
    ]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FakeLibraryError(f"building the fake NVML failed:\n{proc.stderr}")
    return folder


def encode(answer: Any) -> str:
    """One recorded answer as the library reads it (see fake_nvml.c)."""
    if isinstance(answer, dict) and "nvml_error" in answer:
        return f"!{answer['nvml_error']}"
    if isinstance(answer, dict):
        return " ".join(f"{k}={_scalar(v)}" for k, v in answer.items() if not isinstance(v, (list, dict)))
    if isinstance(answer, list):
        if answer and isinstance(answer[0], dict):
            return ";".join(encode(record) for record in answer)
        return " ".join(_scalar(v) for v in answer)
    return _scalar(answer)


def _scalar(value: Any) -> str:
    if value is None:
        return "-1"  # NVML_VALUE_NOT_AVAILABLE
    return str(int(value)) if isinstance(value, bool) else str(value)


def write_data(recording: dict[str, Any], path: Path) -> Path:
    lines = [f"{key}\t{'' if answer is None else encode(answer)}\n" for key, answer in recording.items()]
    path.write_text("".join(lines))
    return path


def gather(library: Path, data_files: list[Path]) -> list[dict[str, Any]]:
    """Facts and recording of each data file's node, gathered by gpudoctor's live backend in one child process."""
    env = {**os.environ, "LD_LIBRARY_PATH": f"{library}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-c", GATHER, *map(str, data_files)], capture_output=True, text=True, env=env, timeout=300
    )
    if proc.returncode != 0:
        raise RuntimeError(f"live gather through the fake library failed (exit {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout)
