"""The two boxes nvidia-smi's default table may print under its GPU rows: MIG devices (each instance's GPU
instance, compute instance, device index and memory) and Processes (with GI/CI columns from R450, without before),
each recorded only where the box is seen to end."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from gpudoctor.facts import nvsmi_xml
from gpudoctor.paste.nvsmi.state import MAX_GPUS, MAX_LINE, Paste, clean
from gpudoctor.paste.nvsmi.table import MEMORY_CELL, cells, followed, mib

MIG_ROW = re.compile(r"^\s*(\d{1,5})\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
# Processes box rows, with GI/CI columns (R450 on) and without.
PROCESS_ROW = re.compile(r"^(\d{1,5})\s+(N/A|\d+)\s+(N/A|\d+)\s+(\d+)\s+([CGM](?:\+[CGM])*)\s+(.*?)\s+(\d+\s*MiB|N/A)$")
OLD_PROCESS_ROW = re.compile(r"^(\d{1,5})\s+(\d+)\s+([CGM](?:\+[CGM])*)\s+(.*?)\s+(\d+\s*MiB|N/A)$")


def mig_box(paste: Paste, i: int) -> int:
    """The MIG devices box: each instance's GPU, GPU instance, compute instance, device index and memory;
    recorded where the box ends on its border or something follows it."""
    devices: dict[int, list[dict[str, Any]]] = {}
    first_line: dict[int, int] = {}
    i, closed = i + 1, False
    while i < len(paste.lines):
        row_cells = cells(paste, i)
        border = clean(paste.lines[i]).strip().startswith("+")
        if not row_cells and not border:
            break
        closed = border
        row = MIG_ROW.match(row_cells[0]) if len(row_cells) >= 2 else None
        if row and int(row.group(1)) < MAX_GPUS:
            memory = MEMORY_CELL.match(row_cells[1])
            gpu = int(row.group(1))
            first_line.setdefault(gpu, i)
            devices.setdefault(gpu, []).append(
                {
                    "index": int(row.group(4)),
                    "gpu_instance_id": int(row.group(2)),
                    "compute_instance_id": int(row.group(3)),
                    "memory_total_mib": mib(memory.group(2)) if memory else None,
                }
            )
        i += 1
    if closed or followed(paste, i):
        for gpu, listed in devices.items():
            paste.gpu(gpu, {"mig_devices": listed}, first_line[gpu])
    return i


def processes_box(paste: Paste, i: int) -> int:
    """The Processes box: each GPU's processes, recorded once the box is seen to close."""
    lines = paste.lines
    start, old_layout, end = i, True, min(i + 6, len(lines))
    while i < end and not clean(lines[i]).strip().startswith("|="):
        old_layout = old_layout and not re.search(r"\bGI\b", lines[i])
        i += 1
    if i == end:
        return start + 1
    held: dict[int, list[dict[str, Any]]] = {}
    i += 1
    while i < len(lines):
        line = clean(lines[i]).strip()[:MAX_LINE]
        if line.startswith("+"):
            processes_seen(paste, held, start)
            return i + 1
        if not line.startswith("|"):
            break
        gpu, entry = process_row(line.strip("|").strip(), old_layout)
        if entry is not None:
            held.setdefault(gpu, []).append(entry)
        i += 1
    return i


def processes_seen(paste: Paste, held: dict[int, list[dict[str, Any]]], line: int) -> None:
    for gpu in sorted(set(paste.table_indexes) | set(held)):
        paste.gpu(gpu, {"processes": held.get(gpu, [])}, line)


def process_row(text: str, old_layout: bool) -> tuple[int, dict[str, Any] | None]:
    """A Processes box row: its GPU and process entry (None for "No running processes found" and the like)."""
    if old_layout:
        old = OLD_PROCESS_ROW.match(text)
        if old:
            return int(old.group(1)), process_entry("N/A", "N/A", *old.group(2, 3, 4, 5))
        return -1, None
    row = PROCESS_ROW.match(text)
    if row is None or int(row.group(1)) >= MAX_GPUS:
        return -1, None
    return int(row.group(1)), process_entry(*row.group(2, 3, 4, 5, 6, 7))


def process_entry(gpu_instance: str, compute_instance: str, pid: str, kind: str, name: str, used: str) -> dict:
    """A process row as nvsmi_xml reads a <process_info>: one meaning for the table, `-q` and `-q -x`."""
    element = ET.Element("process_info")
    for tag, text in (
        ("gpu_instance_id", gpu_instance),
        ("compute_instance_id", compute_instance),
        ("pid", pid),
        ("type", kind),
        ("process_name", name),
        ("used_memory", used),
    ):
        ET.SubElement(element, tag).text = text
    return nvsmi_xml.process(element)
