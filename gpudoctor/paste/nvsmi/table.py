"""nvidia-smi's default table in every layout from R418 to R610: its header box and GPU rows (the MIG devices and
Processes boxes under it are boxes.py's). Layouts by driver branch are described in
tests/fixtures/pastes/nvidia-smi/FORMATS.md.

What the table shows in part, and how it is read:
- The ECC column is the volatile uncorrectable count while ECC is on (`ecc_errors.volatile_uncorrected`),
  "Off" while ECC is supported but off, "On" in MIG mode (the counts are then per instance), "N/A" where the GPU
  has no ECC. The MIG M. column is the current MIG mode. The table never shows a pending mode: where nothing
  else in the paste (`-q`) gives it, the pending mode is taken as the current one (no change pending), the
  reading nvsmi_xml gives a pending mode printed N/A.
- A name the table cut short ("Tesla P100-PCIE...", "NVIDIA GeForce ...") keeps its "..." so that no model table
  matches it, and is recorded only where nothing else in the paste (`-L`, `-q`) gives the GPU's full name.
- `nvml.attached_gpus` is the number of GPU rows, recorded only where the table is seen to end (something
  follows it), not for a table cut off at the end of a paste.
"""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.facts import nvsmi_xml
from gpudoctor.paste.nvsmi.state import BUS_ID, MAX_GPUS, MAX_LINE, Paste, Weak, bus_id, clean

# The header box: "| NVIDIA-SMI 535.54.03  Driver Version: 535.54.03  CUDA Version: 12.2 |"; R610 says "KMD
# Version" and "CUDA UMD Version".
HEADER = re.compile(
    r"NVIDIA-SMI +\S+ +(?:Driver|KMD) Version: *(?P<driver>\d+\.[\d.]+)"
    r"(?: +CUDA(?: UMD| Driver)? Version: *(?P<cuda>\d+\.\d+|N/A))?"
)
# The table's column header lines: Linux "Persistence-M", Windows "TCC/WDDM" (R418-R53x) or "Driver-Model".
COLUMN_HEADERS = ("Persistence-M", "TCC/WDDM", "Driver-Model")
GPU_CELL = re.compile(r"^\s*(\d{1,5})\s+(.*?)\s+(On|Off|WDDM|TCC|N/A|ERR!)\s*$")
BUS_CELL = re.compile(rf"^\s*({BUS_ID})\s+\S+\s*$")
STATE_CELL = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s*$")
MEMORY_CELL = re.compile(r"^\s*(\S+?)\s*/\s*(\S+?)\s*$")
UTIL_CELL = re.compile(r"^\s*(\S+)\s+(.+?)\s*$")
COMPUTE_MODES = {
    "default": "default",
    "e. process": "exclusive_process",
    "e. thread": "exclusive_thread",
    "prohibited": "prohibited",
}


def header(paste: Paste, i: int, line: str) -> None:
    """The header box line: the driver and the CUDA version it supports."""
    found = HEADER.search(line)
    if found:
        paste.fact("nvml.status", "ok", i)
        paste.fact("nvml.driver_version", found.group("driver"), i)
        if found.group("cuda"):
            paste.fact("nvml.cuda_driver_version", nvsmi_xml.cuda_driver_version(found.group("cuda")), i)


def read(paste: Paste, i: int) -> int:
    """The GPU rows under the column header, two per GPU (three from R450, with MIG M.)."""
    lines = paste.lines
    rows_per_gpu = 2
    while i < len(lines):
        line = clean(lines[i]).strip()
        if not line.startswith("|") or line.startswith("|="):
            break
        rows_per_gpu = 3 if "MIG M." in line else rows_per_gpu
        i += 1
    if i >= len(lines) or not clean(lines[i]).strip().startswith("|="):
        return i
    indexes: list[int] = []
    i += 1
    while i < len(lines):
        line = clean(lines[i]).strip()
        if not line.startswith(("|", "+")):
            break
        index = gpu_rows(paste, i, rows_per_gpu)
        if index is None:
            i += 1
            continue
        indexes.append(index)
        i += rows_per_gpu
    if indexes:
        paste.table_indexes = indexes
        paste.fact("nvml.status", "ok", i - rows_per_gpu)
        if followed(paste, i):
            paste.fact("nvml.attached_gpus", len(indexes), i - rows_per_gpu)
    return i


def cells(paste: Paste, i: int) -> list[str]:
    """A table line's cells between its "|" borders; none for another line."""
    if i >= len(paste.lines) or len(paste.lines[i]) > MAX_LINE:
        return []
    line = clean(paste.lines[i]).strip()
    return line.strip("|").split("|") if line.startswith("|") else []


def followed(paste: Paste, i: int) -> bool:
    """Whether anything but blank lines follows line `i` (a table that ends, not one cut off)."""
    return any(paste.lines[j].strip() for j in range(i, len(paste.lines)))


def gpu_rows(paste: Paste, i: int, rows_per_gpu: int) -> int | None:
    """One GPU's rows at line `i`: its index, or None where line `i` starts none."""
    first = cells(paste, i)
    named = GPU_CELL.match(first[0]) if len(first) == 3 else None
    if named is None or int(named.group(1)) >= MAX_GPUS:
        return None
    index = int(named.group(1))
    facts: dict[str, Any] = {}
    identity(paste, index, named.group(2), named.group(3), i)
    located = BUS_CELL.match(first[1])
    if located:
        facts["pci_bus_id"] = bus_id(located.group(1))
        paste.index_of_bus.setdefault(facts["pci_bus_id"], index)
    ecc_cell(paste, index, first[2].strip(), i)
    second = cells(paste, i + 1)
    if len(second) == 3:
        facts.update(state_cells(second))
    if rows_per_gpu == 3 and len(cells(paste, i + 2)) == 3:
        mig = cells(paste, i + 2)[2].strip()
        weak_mode(paste, index, "mig_mode", mig, i + 2)
    paste.gpu(index, facts, i)
    return index


def identity(paste: Paste, index: int, name: str, mode: str, i: int) -> None:
    """Name and the Persistence-M (Linux) or driver model (Windows) cell."""
    if name.endswith("..."):
        paste.weak.append(Weak(index, "name", name, i, lambda full, shown=name: matches_name(full, shown)))
    elif name:
        paste.gpu(index, {"name": name}, i)
    if mode in ("WDDM", "TCC"):
        paste.gpu(index, {"driver_model": mode}, i)
    elif mode != "ERR!":
        paste.gpu(index, {"persistence_mode": nvsmi_xml.flag({"On": "Enabled", "Off": "Disabled"}.get(mode))}, i)


def ecc_cell(paste: Paste, index: int, text: str, i: int) -> None:
    """The Volatile Uncorr. ECC cell: a count (ECC on), On (MIG mode), Off (ECC off), N/A (no ECC)."""
    if text.isascii() and text.isdigit():
        paste.gpu(index, {"ecc_errors.volatile_uncorrected": int(text)}, i)
        weak_mode(paste, index, "ecc_mode", "Enabled", i)
    elif text in ("On", "Off"):
        weak_mode(paste, index, "ecc_mode", {"On": "Enabled", "Off": "Disabled"}[text], i)
    elif text == "N/A":
        paste.gpu(index, {"ecc_errors.volatile_uncorrected": None}, i)
        weak_mode(paste, index, "ecc_mode", "N/A", i)


def weak_mode(paste: Paste, index: int, name: str, text: str, i: int) -> None:
    """A current mode the table shows; its pending mode is whatever else the paste says, or the same."""
    if text == "ERR!" or not text:
        return
    current = nvsmi_xml.flag(text)
    value = None if current is None else {"current": current, "pending": current}
    paste.weak.append(Weak(index, name, value, i, lambda recorded, now=current: same_current(recorded, now)))


def state_cells(row: list[str]) -> dict[str, Any]:
    """The second row: fan, temperature, perf, power usage / cap; memory used / total; utilisation, compute mode."""
    facts: dict[str, Any] = {}
    state = STATE_CELL.match(row[0])
    if state:
        facts["temperature_c"] = leading_int(state.group(2)) if state.group(2).endswith("C") else None
        facts["power_limit_w"] = watts(state.group(5))
    memory = MEMORY_CELL.match(row[1])
    if memory:
        facts["memory_used_mib"] = mib(memory.group(1))
        facts["memory_total_mib"] = mib(memory.group(2))
    util = UTIL_CELL.match(row[2])
    if util and util.group(2) != "ERR!":
        facts["compute_mode"] = COMPUTE_MODES.get(util.group(2).lower())
    busy = leading_int(util.group(1)) if util and util.group(1).endswith("%") else None
    if busy is not None and 0 <= busy <= 100:
        facts["utilization"] = {"gpu": busy}  # GPU-Util: nvidia-smi's last sample (the table has no memory %)
    return facts


def mib(text: str) -> int | None:
    """ "16280MiB" as 16280; None for N/A or ERR!."""
    found = re.match(r"^(\d+)\s*MiB$", text)
    return int(found.group(1)) if found else None


def leading_int(text: str) -> int | None:
    """ "27C", "28%", "0" as numbers; None for N/A or ERR!."""
    found = re.match(r"^(\d+)", text)
    return int(found.group(1)) if found else None


def watts(text: str) -> float | None:
    """ "250W" as 250.0; None for N/A or ERR!."""
    found = re.match(r"^(\d+(?:\.\d+)?)W$", text)
    return float(found.group(1)) if found else None


def matches_name(full: Any, shown: str) -> bool:
    """Whether a full GPU name is the one the table cut short ("NVIDIA GeForce RTX 2080 ...")."""
    return isinstance(full, str) and full.startswith(shown.removesuffix("...").rstrip())


def same_current(recorded: Any, current: Any) -> bool:
    """Whether a recorded mode ({"current", "pending"} or None) has the current mode the table shows."""
    if isinstance(recorded, dict):
        return recorded.get("current") == current
    return recorded is None and current is None
