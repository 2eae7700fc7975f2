"""nvidia-smi's text outputs read into the NVML facts the judges read: the default table in every layout from R418
to R610 (its header, GPU rows, MIG devices box and Processes box), `nvidia-smi -q`, `-L`, `topo -m`,
`topo -p2p r`, and the one-line failures that say NVML did not start. Layouts by driver branch are described in
tests/fixtures/pastes/nvidia-smi/FORMATS.md.

`-q` holds what `-q -x` holds, laid out as an indented "Key : Value" tree: the tree is turned into the elements
`-q -x` names and read by facts/nvsmi_xml.Gpu, so a field read from either means the same. What a GPU's section
lacks (a `-q -d` subset, an older driver) is not recorded; the caller marks it not captured.

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
- `-q` sections are numbered in the order printed (what nvsmi_xml does), unless a table or `-L` in the same paste
  gives the index of that bus id or UUID (`nvidia-smi -q -i 3` prints GPU 3 alone).

`topo -m` gives `nvml.topology` as NVML's topology() gives it: `indexes` and `common_ancestor` with
nvmlGpuTopologyLevel_t values (PIX 10, PXB 20, PHB 30, NODE 40, SYS and the older SOC 50; nvml.h). An NV# cell
says the pair is joined by # NVLinks and hides the PCIe path, so that pair's ancestor is None; nothing per link
(which links, to a GPU or an NVSwitch) can be read from it. `p2p_read` (nvmlGpuP2PStatus_t) comes from
`topo -p2p r` only when the command line shows the read capability was asked for (the matrix itself does not say
which capability it is); otherwise it is None per pair, as NVML gives a pair it could not answer. A GPU's NUMA
Affinity becomes `system.gpu_numa_nodes` keyed by its bus id, where the paste gives the bus id of that GPU; its
CPU Affinity has no fact to go to.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.facts import nvsmi_xml
from gpudoctor.facts.nvml import (
    ERROR_DRIVER_NOT_LOADED,
    ERROR_LIB_RM_VERSION_MISMATCH,
    ERROR_LIBRARY_NOT_FOUND,
    ERROR_NO_PERMISSION,
    ERROR_UNKNOWN,
    INIT_STATUS,
)
from gpudoctor.paste.found import Found

READER = "nvidia-smi"
MAX_GPUS = 256  # an index a junk line claims must not grow the GPU list without bound
MAX_TREE_LINES = 20000  # lines of one `-q` GPU section (a real one has about 300)
MAX_DEPTH = 12  # nesting of a `-q` section (a real one goes 6 deep)
MAX_LINE = 2000  # characters: a longer line is none of nvidia-smi's (and is not searched)
# Every line that starts an nvidia-smi output holds one of these.
TRIGGERS = ("GPU", "NVIDIA-SMI", "NVML", "NVSMI", "No devices", "MIG devices", "Processes:")

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
QUOTE = re.compile(r"^(?:[ \t]*>)+[ \t]?")

# The header box: "| NVIDIA-SMI 535.54.03  Driver Version: 535.54.03  CUDA Version: 12.2 |"; R610 says "KMD
# Version" and "CUDA UMD Version".
HEADER = re.compile(
    r"NVIDIA-SMI +\S+ +(?:Driver|KMD) Version: *(?P<driver>\d+\.[\d.]+)"
    r"(?: +CUDA(?: UMD| Driver)? Version: *(?P<cuda>\d+\.\d+|N/A))?"
)
# What nvidia-smi prints when NVML does not start: the message, the gateway's status, NVML's return code (the
# text after "Failed to initialize NVML: " is nvmlErrorString of that code). Reported in public threads, e.g.
# NVIDIA/nvidia-docker#988 and #1163, lyulyul/shine-cluster#50.
FAILURES = (
    ("NVIDIA-SMI has failed because it couldn", "driver-not-loaded", ERROR_DRIVER_NOT_LOADED),
    ("couldn't find libnvidia-ml.so", "library-not-found", ERROR_LIBRARY_NOT_FOUND),
)
NVML_INIT = "Failed to initialize NVML: "
NVML_ERRORS = {
    "driver/library version mismatch": ERROR_LIB_RM_VERSION_MISMATCH,
    "driver not loaded": ERROR_DRIVER_NOT_LOADED,
    "insufficient permissions": ERROR_NO_PERMISSION,
    "unknown error": ERROR_UNKNOWN,
}
NO_DEVICES = "No devices were found"  # NVML started and counts no GPU: the whole line, nothing else on it

# The table's column header lines: Linux "Persistence-M", Windows "TCC/WDDM" (R418-R53x) or "Driver-Model".
COLUMN_HEADERS = ("Persistence-M", "TCC/WDDM", "Driver-Model")
BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
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
MIG_ROW = re.compile(r"^\s*(\d{1,5})\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
# Processes box rows, with GI/CI columns (R450 on) and without.
PROCESS_ROW = re.compile(r"^(\d{1,5})\s+(N/A|\d+)\s+(N/A|\d+)\s+(\d+)\s+([CGM](?:\+[CGM])*)\s+(.*?)\s+(\d+\s*MiB|N/A)$")
OLD_PROCESS_ROW = re.compile(r"^(\d{1,5})\s+(\d+)\s+([CGM](?:\+[CGM])*)\s+(.*?)\s+(\d+\s*MiB|N/A)$")

# `nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)", and the MIG devices under it, newer
# "  MIG 3g.40gb Device 0: (UUID: MIG-...)" or R450's "MIG-GPU-<uuid>/<GI>/<CI>".
LIST_GPU = re.compile(r"^\s*GPU (\d{1,5}): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
LIST_MIG = re.compile(r"^\s*MIG \S+\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")
MIG_UUID_IDS = re.compile(r"/(\d+)/(\d+)$")

# `topo -m` cells (nvmlGpuTopologyLevel_t, nvml.h) and `topo -p2p` cells (nvmlGpuP2PStatus_t, nvml.h).
ANCESTORS = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50, "SOC": 50}
NVLINK_CELL = re.compile(r"^NV\d+$")
P2P_STATUS = {"OK": 0, "CNS": 1, "GNS": 2, "TNS": 3, "DR": 4, "NS": 5, "U": 6}
P2P_COMMAND = re.compile(r"topo\s+(?:-p2p|--p2pstatus)\s+(\S+)")
TOPO_COLUMN = re.compile(r"^GPU\d{1,5}$")
NIC_COLUMN = re.compile(r"^(?:NIC\d{1,3}|mlx\d{1,2}_\d{1,3}|ib\w{1,12}|eth\w{1,12}|rdma\w{1,12})$")
NIC_LEGEND = re.compile(r"^\s*(NIC\d{1,3}): ([\w.:-]{1,40})\s*$")
MAX_NICS = 64
LEGEND_LINES = 40  # the legend of levels is about 12 lines; the NIC legend follows it

# `-q`: "    Key                : Value" (a space before the colon), section titles, the per-GPU header.
Q_BANNER = "NVSMI LOG"
Q_PAIR = re.compile(r"^([^:]*?\S)\s+:(?:\s(.*))?$")
Q_GPU = re.compile(rf"^GPU ({BUS_ID})$")
Q_SECTION = re.compile(r"^[A-Za-z][^:]*$")


def read(found: Found) -> None:
    """Every nvidia-smi output in the paste, as facts."""
    Reader(found).run()


def clean(line: str) -> str:
    """A line without terminal colour codes and markdown quote markers, trailing blanks removed."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if ">" in line[:8]:
        line = QUOTE.sub("", line, count=1)
    return line.rstrip()


def bus_id(text: str) -> str:
    """A PCI address in NVML's form ("00000000:3B:00.0"), from the table's "0000:3b:00.0" as well."""
    domain, bus, rest = text.split(":")
    return f"{int(domain, 16):08X}:{bus.upper()}:{rest.upper()}"


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


def matches_name(full: Any, shown: str) -> bool:
    """Whether a full GPU name is the one the table cut short ("NVIDIA GeForce RTX 2080 ...")."""
    return isinstance(full, str) and full.startswith(shown.removesuffix("...").rstrip())


def same_current(recorded: Any, current: Any) -> bool:
    """Whether a recorded mode ({"current", "pending"} or None) has the current mode the table shows."""
    if isinstance(recorded, dict):
        return recorded.get("current") == current
    return recorded is None and current is None


@dataclass
class Weak:
    """A fact the table shows only in part, recorded at the end where the paste gives nothing better, or where
    what it gives disagrees (then Found reports the conflict)."""

    index: int
    name: str
    value: Any
    line: int
    agrees: Callable[[Any], bool]


@dataclass
class Node:
    """One line of a `-q` tree: its key (normalised), value, line index, and the lines indented under it."""

    key: str
    value: str | None
    line: int
    children: list[Node] = field(default_factory=list)


@dataclass
class QueryGpu:
    """One GPU section of a `-q` output, placed once the paste has been read."""

    bus: str
    position: int
    line: int
    tree: Node


@dataclass
class Topology:
    """What `topo -m` and `topo -p2p r` said: GPU indexes, matrices, each GPU's NUMA node (row line kept)."""

    indexes: list[int] | None = None
    numa: dict[int, tuple[int | None, int]] = field(default_factory=dict)


class Reader:
    """One pass over the paste's lines; each output kind is read from the line that starts it."""

    def __init__(self, found: Found) -> None:
        self.found = found
        self.lines = found.lines
        self.table_indexes: list[int] = []
        self.index_of_bus: dict[str, int] = {}
        self.index_of_uuid: dict[str, int] = {}
        self.queries: list[QueryGpu] = []
        self.weak: list[Weak] = []
        self.mig_listed: dict[int, tuple[list[dict[str, Any]], int]] = {}
        self.topology = Topology()
        self.recorded_topology: set[str] = set()

    def fact(self, path: str, value: Any, line: int) -> None:
        self.found.fact(path, value, READER, line)

    def gpu(self, index: int, facts: dict[str, Any], line: int) -> None:
        if 0 <= index < MAX_GPUS:
            self.found.gpu(index, facts, READER, line)

    def run(self) -> None:
        after = 0
        for i in self.found.holding(TRIGGERS):
            if i >= after and len(self.lines[i]) <= MAX_LINE:
                after = max(i + 1, self.dispatch(i, self.lines[i]))
        self.finish()

    def dispatch(self, i: int, raw: str) -> int:
        """Reads the output that starts at line `i`, if one does; the index of the next line to look at."""
        if "NVIDIA-SMI" in raw:
            self.smi_line(i, clean(raw))
        elif NVML_INIT in raw:
            self.nvml_failure(i, clean(raw))
        elif NO_DEVICES in raw and clean(raw).strip() == NO_DEVICES:
            self.fact("nvml.status", "ok", i)
            self.fact("nvml.attached_gpus", 0, i)
        elif Q_BANNER in raw or ("GPU " in raw and raw.lstrip().startswith("GPU ")):
            return self.gpu_line(i, clean(raw))
        elif any(h in raw for h in COLUMN_HEADERS):
            return self.table(i)
        elif "MIG devices:" in raw:
            return self.mig_box(i)
        elif "Processes:" in raw and "|" in raw:
            return self.processes_box(i)
        elif "GPU0" in raw:
            return self.matrix(i, clean(raw))
        return i + 1

    # -- one-line outputs -------------------------------------------------------------------------------

    def smi_line(self, i: int, line: str) -> None:
        """The header box line, or nvidia-smi's own failure messages."""
        for needle, status, code in FAILURES:
            if needle in line:
                self.failure(i, line[line.index("NVIDIA-SMI") :].strip(), status, code)
                return
        header = HEADER.search(line)
        if header:
            self.fact("nvml.status", "ok", i)
            self.fact("nvml.driver_version", header.group("driver"), i)
            if header.group("cuda"):
                self.fact("nvml.cuda_driver_version", nvsmi_xml.cuda_driver_version(header.group("cuda")), i)

    def nvml_failure(self, i: int, line: str) -> None:
        message = line[line.index(NVML_INIT) :].strip()
        code = NVML_ERRORS.get(message[len(NVML_INIT) :].strip().rstrip(".").lower())
        self.failure(i, message, INIT_STATUS.get(code, "error") if code is not None else "error", code)

    def failure(self, i: int, message: str, status: str, code: int | None) -> None:
        self.fact("nvml.status", status, i)
        self.fact("nvml.error", message, i)
        if code is not None:
            self.fact("nvml.error_code", code, i)

    def gpu_line(self, i: int, line: str) -> int:
        """A `-L` line, or the start of a `-q` output (its banner, or a GPU section header without it)."""
        listed = LIST_GPU.match(line)
        if listed:
            return self.gpu_list(i)
        if Q_BANNER in line or (Q_GPU.match(line.strip()) and self.q_follows(i)):
            return self.query(i)
        return i + 1

    def gpu_list(self, i: int) -> int:
        """`nvidia-smi -L`: each GPU's name and UUID, and the MIG devices listed under it."""
        index = -1
        while i < len(self.lines):
            line = clean(self.lines[i])
            listed, mig = LIST_GPU.match(line), LIST_MIG.match(line)
            if listed and int(listed.group(1)) < MAX_GPUS:
                index = int(listed.group(1))
                self.fact("nvml.status", "ok", i)
                self.gpu(index, {"name": listed.group(2).strip(), "uuid": listed.group(3)}, i)
                self.index_of_uuid.setdefault(listed.group(3), index)
            elif mig and 0 <= index < MAX_GPUS:
                ids = MIG_UUID_IDS.search(mig.group(2))
                device = {
                    "index": int(mig.group(1)),
                    "gpu_instance_id": int(ids.group(1)) if ids else None,
                    "compute_instance_id": int(ids.group(2)) if ids else None,
                    "memory_total_mib": None,
                }
                self.mig_listed.setdefault(index, ([], i))[0].append(device)
            else:
                break
            i += 1
        return i

    # -- the default table ------------------------------------------------------------------------------

    def table(self, i: int) -> int:
        """The GPU rows under the column header, two per GPU (three from R450, with MIG M.)."""
        rows_per_gpu = 2
        while i < len(self.lines):
            line = clean(self.lines[i]).strip()
            if not line.startswith("|") or line.startswith("|="):
                break
            rows_per_gpu = 3 if "MIG M." in line else rows_per_gpu
            i += 1
        if i >= len(self.lines) or not clean(self.lines[i]).strip().startswith("|="):
            return i
        indexes: list[int] = []
        i += 1
        while i < len(self.lines):
            line = clean(self.lines[i]).strip()
            if not line.startswith(("|", "+")):
                break
            index = self.gpu_rows(i, rows_per_gpu)
            if index is None:
                i += 1
                continue
            indexes.append(index)
            i += rows_per_gpu
        if indexes:
            self.table_indexes = indexes
            self.fact("nvml.status", "ok", i - rows_per_gpu)
            if self.followed(i):
                self.fact("nvml.attached_gpus", len(indexes), i - rows_per_gpu)
        return i

    def cells(self, i: int) -> list[str]:
        """A table line's cells between its "|" borders; none for another line."""
        if i >= len(self.lines) or len(self.lines[i]) > MAX_LINE:
            return []
        line = clean(self.lines[i]).strip()
        return line.strip("|").split("|") if line.startswith("|") else []

    def gpu_rows(self, i: int, rows_per_gpu: int) -> int | None:
        """One GPU's rows at line `i`: its index, or None where line `i` starts none."""
        first = self.cells(i)
        named = GPU_CELL.match(first[0]) if len(first) == 3 else None
        if named is None or int(named.group(1)) >= MAX_GPUS:
            return None
        index = int(named.group(1))
        facts: dict[str, Any] = {}
        self.identity(index, named.group(2), named.group(3), i)
        located = BUS_CELL.match(first[1])
        if located:
            facts["pci_bus_id"] = bus_id(located.group(1))
            self.index_of_bus.setdefault(facts["pci_bus_id"], index)
        self.ecc_cell(index, first[2].strip(), i)
        second = self.cells(i + 1)
        if len(second) == 3:
            facts.update(state_cells(second))
        if rows_per_gpu == 3 and len(self.cells(i + 2)) == 3:
            mig = self.cells(i + 2)[2].strip()
            self.weak_mode(index, "mig_mode", mig, i + 2)
        self.gpu(index, facts, i)
        return index

    def identity(self, index: int, name: str, mode: str, i: int) -> None:
        """Name and the Persistence-M (Linux) or driver model (Windows) cell."""
        if name.endswith("..."):
            self.weak.append(Weak(index, "name", name, i, lambda full, shown=name: matches_name(full, shown)))
        elif name:
            self.gpu(index, {"name": name}, i)
        if mode in ("WDDM", "TCC"):
            self.gpu(index, {"driver_model": mode}, i)
        elif mode != "ERR!":
            self.gpu(index, {"persistence_mode": nvsmi_xml.flag({"On": "Enabled", "Off": "Disabled"}.get(mode))}, i)

    def ecc_cell(self, index: int, text: str, i: int) -> None:
        """The Volatile Uncorr. ECC cell: a count (ECC on), On (MIG mode), Off (ECC off), N/A (no ECC)."""
        if text.isdigit():
            self.gpu(index, {"ecc_errors.volatile_uncorrected": int(text)}, i)
            self.weak_mode(index, "ecc_mode", "Enabled", i)
        elif text in ("On", "Off"):
            self.weak_mode(index, "ecc_mode", {"On": "Enabled", "Off": "Disabled"}[text], i)
        elif text == "N/A":
            self.gpu(index, {"ecc_errors.volatile_uncorrected": None}, i)
            self.weak_mode(index, "ecc_mode", "N/A", i)

    def weak_mode(self, index: int, name: str, text: str, i: int) -> None:
        """A current mode the table shows; its pending mode is whatever else the paste says, or the same."""
        if text == "ERR!" or not text:
            return
        current = nvsmi_xml.flag(text)
        value = None if current is None else {"current": current, "pending": current}
        self.weak.append(Weak(index, name, value, i, lambda recorded, now=current: same_current(recorded, now)))

    def followed(self, i: int) -> bool:
        """Whether anything but blank lines follows line `i` (a table that ends, not one cut off)."""
        return any(self.lines[j].strip() for j in range(i, len(self.lines)))

    def mig_box(self, i: int) -> int:
        """The MIG devices box: each instance's GPU, GPU instance, compute instance, device index and memory;
        recorded where the box ends on its border or something follows it."""
        devices: dict[int, list[dict[str, Any]]] = {}
        first_line: dict[int, int] = {}
        i, closed = i + 1, False
        while i < len(self.lines):
            cells = self.cells(i)
            border = clean(self.lines[i]).strip().startswith("+")
            if not cells and not border:
                break
            closed = border
            row = MIG_ROW.match(cells[0]) if len(cells) >= 2 else None
            if row and int(row.group(1)) < MAX_GPUS:
                memory = MEMORY_CELL.match(cells[1])
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
        if closed or self.followed(i):
            for gpu, listed in devices.items():
                self.gpu(gpu, {"mig_devices": listed}, first_line[gpu])
        return i

    def processes_box(self, i: int) -> int:
        """The Processes box: each GPU's processes, recorded once the box is seen to close."""
        start, old_layout, end = i, True, min(i + 6, len(self.lines))
        while i < end and not clean(self.lines[i]).strip().startswith("|="):
            old_layout = old_layout and not re.search(r"\bGI\b", self.lines[i])
            i += 1
        if i == end:
            return start + 1
        held: dict[int, list[dict[str, Any]]] = {}
        i += 1
        while i < len(self.lines):
            line = clean(self.lines[i]).strip()[:MAX_LINE]
            if line.startswith("+"):
                self.processes_seen(held, start)
                return i + 1
            if not line.startswith("|"):
                break
            gpu, entry = process_row(line.strip("|").strip(), old_layout)
            if entry is not None:
                held.setdefault(gpu, []).append(entry)
            i += 1
        return i

    def processes_seen(self, held: dict[int, list[dict[str, Any]]], line: int) -> None:
        for gpu in sorted(set(self.table_indexes) | set(held)):
            self.gpu(gpu, {"processes": held.get(gpu, [])}, line)

    # -- topo -m and topo -p2p ---------------------------------------------------------------------------

    def matrix(self, i: int, header: str) -> int:
        """A `topo -m` or `topo -p2p` matrix: GPU columns first, then NICs, then the affinity columns."""
        tokens = header.split()
        gpus = 0
        while gpus < len(tokens) and tokens[gpus] == f"GPU{gpus}":
            gpus += 1
        if gpus == 0 or gpus > MAX_GPUS:
            return i + 1
        columns = leading_columns(tokens)
        trailing = [name for name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if name in " ".join(tokens)]
        rows: list[tuple[int, list[str], int]] = []
        j = i + 1
        while j < len(self.lines):
            cells = clean(self.lines[j]).split()
            if not cells or cells[0] not in columns:
                break
            if TOPO_COLUMN.match(cells[0]):
                rows.append((int(cells[0][3:]), cells[1:], j))
            j += 1
        values = {c for _, cells, _ in rows for c in cells[:gpus]} - {"X"}
        if not rows or any(v not in P2P_STATUS and v not in ANCESTORS and not NVLINK_CELL.match(v) for v in values):
            return j
        if values and values <= set(P2P_STATUS):
            self.p2p(i, rows, gpus)
        elif trailing or values:
            self.topo(i, rows, gpus, len(columns), trailing)
            self.nics(i, rows, columns[gpus:], j)
        return j

    def nics(self, i: int, rows: list[tuple[int, list[str], int]], names: list[str], after: int) -> None:
        """`topo -m`'s NIC columns: how far each NIC is from each GPU (NVML's levels: 10 PIX .. 50 SYS), named by
        the "NIC Legend" below the matrix where it follows (NIC0: mlx5_0)."""
        nics = [n for n in names if NIC_COLUMN.match(n)][:MAX_NICS]
        if not nics:
            return
        devices = self.nic_legend(after)
        levels = {name: [None] * len(rows) for name in nics}
        for position, (_, cells, _) in enumerate(rows):
            for k, name in enumerate(nics):
                cell = cells[len(rows) + k] if len(rows) + k < len(cells) else ""
                levels[name][position] = ANCESTORS.get(cell)
        found = [{"name": n, "device": devices.get(n, n), "levels": levels[n]} for n in nics]
        self.topology_fact("nics", found, i)

    def nic_legend(self, after: int) -> dict[str, str]:
        """ "NIC Legend:" then "  NIC0: mlx5_0" lines, within the lines that follow the matrix."""
        legend: dict[str, str] = {}
        for line in self.lines[after : after + LEGEND_LINES]:
            named = NIC_LEGEND.match(clean(line))
            if named:
                legend[named.group(1)] = named.group(2)
            elif legend and clean(line).strip():
                break
        return legend

    def topo(self, i: int, rows: list[tuple[int, list[str], int]], gpus: int, width: int, trailing: list[str]) -> None:
        """`topo -m`: the common PCIe ancestor of each GPU pair, the NVLinks joining it ("NV12": 12, else 0),
        and each GPU's NUMA node."""
        indexes = [index for index, _, _ in rows]
        if any(b >= gpus for b in indexes):
            return
        ancestors = [
            [None if a == b else ANCESTORS.get(cells[b]) if b < len(cells) else None for b in indexes]
            for a, cells, _ in rows
        ]
        nvlinks = [
            [None if a == b else nvlink_count(cells[b]) if b < len(cells) else None for b in indexes]
            for a, cells, _ in rows
        ]
        self.fact("nvml.status", "ok", i)
        self.topology_fact("indexes", indexes, i)
        self.topology_fact("common_ancestor", ancestors, i)
        self.topology_fact("nvlinks", nvlinks, i)
        for index, cells, line in rows:
            after = cells[width:]
            if "NUMA Affinity" in trailing and len(after) == len(trailing):
                node = after[trailing.index("NUMA Affinity")]
                self.topology.numa[index] = (int(node) if node.isdigit() else None, line)

    def p2p(self, i: int, rows: list[tuple[int, list[str], int]], gpus: int) -> None:
        """`topo -p2p`: the GPUs, and NVML's P2P status per pair where the command line just above shows the read
        capability was asked for (the matrix does not say which capability it shows)."""
        asked = next(
            (c for j in range(max(0, i - 3), i) for c in P2P_COMMAND.findall(clean(self.lines[j]))),
            None,
        )
        indexes = [index for index, _, _ in rows]
        if any(b >= gpus for b in indexes):
            return
        self.fact("nvml.status", "ok", i)
        self.topology_fact("indexes", indexes, i)
        if asked in ("r", "read"):
            statuses = [
                [None if a == b else P2P_STATUS.get(cells[b]) if b < len(cells) else None for b in indexes]
                for a, cells, _ in rows
            ]
            self.topology_fact("p2p_read", statuses, i)

    def topology_fact(self, name: str, value: Any, i: int) -> None:
        self.fact(f"nvml.topology.{name}", value, i)
        self.recorded_topology.add(name)
        if name == "indexes" and self.topology.indexes is None:
            self.topology.indexes = value

    # -- nvidia-smi -q -----------------------------------------------------------------------------------

    def q_follows(self, i: int) -> bool:
        """Whether the line after a "GPU 00000000:3B:00.0" line is an indented `-q` "Key : Value" line."""
        following = clean(self.lines[i + 1]) if i + 1 < len(self.lines) else ""
        return following[:1] in (" ", "\t") and Q_PAIR.match(following.strip()) is not None

    def query(self, i: int) -> int:
        """A `-q` output: the driver, CUDA and GPU count lines, then one indented section per GPU."""
        base = indent(clean(self.lines[i]))
        position = 0
        if Q_BANNER in self.lines[i]:
            i += 1
        while i < len(self.lines):
            line = clean(self.lines[i]).expandtabs(4)
            if not line.strip():
                i += 1
                continue
            if indent(line) != base or len(line) > MAX_LINE:
                break
            header = Q_GPU.match(line.strip())
            if header:
                i = self.query_gpu(i, base, bus_id(header.group(1)), position)
                position += 1
                continue
            pair = Q_PAIR.match(line.strip())
            if pair is None:
                break
            self.query_global(i, pair.group(1), pair.group(2) or "")
            i += 1
        return i

    def query_global(self, i: int, key: str, text: str) -> None:
        word = text.split()[0] if text.split() else ""
        if key in ("Driver Version", "KMD Version") and nvsmi_xml.value(word):
            self.fact("nvml.status", "ok", i)
            self.fact("nvml.driver_version", word, i)
        elif key in ("CUDA Version", "CUDA UMD Version") and nvsmi_xml.value(word):
            self.fact("nvml.cuda_driver_version", nvsmi_xml.cuda_driver_version(word), i)
        elif key == "Attached GPUs" and word.isdigit():
            self.fact("nvml.attached_gpus", int(word), i)

    def query_gpu(self, i: int, base: int, bus: str, position: int) -> int:
        """One GPU section: its lines as a tree, placed once the paste has been read."""
        root = Node("gpu", bus, i)
        stack: list[tuple[int, Node]] = [(base, root)]
        start, i = i, i + 1
        while i < len(self.lines) and i - start < MAX_TREE_LINES:
            line = clean(self.lines[i]).expandtabs(4)
            depth = indent(line)
            if not line.strip():
                i += 1
                continue
            if depth <= base or len(line) > MAX_LINE:
                break
            node = q_node(line.strip(), i)
            if node is None:
                break
            while stack[-1][0] >= depth:
                stack.pop()
            if len(stack) > MAX_DEPTH:
                break
            stack[-1][1].children.append(node)
            stack.append((depth, node))
            i += 1
        self.queries.append(QueryGpu(bus, position, start, root))
        self.fact("nvml.status", "ok", start)
        return i

    def place_query(self, query: QueryGpu) -> None:
        uuid = next((n.value for n in query.tree.children if n.key == "gpu_uuid"), None)
        index = self.index_of_bus.get(query.bus, self.index_of_uuid.get(uuid or "", query.position))
        self.gpu(index, query_facts(query), query.line)

    # -- the end of the paste ----------------------------------------------------------------------------

    def finish(self) -> None:
        for query in self.queries:
            self.place_query(query)
        for index, (devices, line) in self.mig_listed.items():
            self.weak.append(Weak(index, "mig_devices", devices, line, lambda recorded: recorded is not None))
        for weak in self.weak:
            self.settle(weak)
        self.finish_topology()

    def recorded(self, index: int, name: str) -> tuple[bool, Any]:
        gpus = self.found.facts["nvml"].get("gpus") or []
        gpu = gpus[index] if index < len(gpus) else {}
        return (name in gpu, gpu.get(name))

    def settle(self, weak: Weak) -> None:
        there, value = self.recorded(weak.index, weak.name)
        if not there or not weak.agrees(value):
            self.gpu(weak.index, {weak.name: weak.value}, weak.line)

    def finish_topology(self) -> None:
        """Matrices no output gave are None per pair, as NVML gives a pair it could not answer; each GPU's
        NUMA node keyed by its bus id, where the paste gives it."""
        indexes = self.topology.indexes
        if indexes is None:
            return
        line = self.found.origins["nvml.topology.indexes"].line - 1
        for name in ("p2p_read", "common_ancestor"):
            if name not in self.recorded_topology:
                self.fact(f"nvml.topology.{name}", [[None for _ in indexes] for _ in indexes], line)
        gpus = self.found.facts["nvml"].get("gpus") or []
        nodes = {
            gpus[index]["pci_bus_id"]: node
            for index, (node, _) in self.topology.numa.items()
            if index < len(gpus) and isinstance(gpus[index].get("pci_bus_id"), str)
        }
        if nodes:
            first = min(row for _, row in self.topology.numa.values())
            self.fact("system.gpu_numa_nodes", nodes, first)


def nvlink_count(cell: str) -> int:
    """A `topo -m` cell's NVLinks: "NV12" is twelve bonded links, any PCIe level none."""
    return int(cell[2:]) if NVLINK_CELL.match(cell) else 0


def state_cells(cells: list[str]) -> dict[str, Any]:
    """The second row: fan, temperature, perf, power usage / cap; memory used / total; utilisation, compute mode."""
    facts: dict[str, Any] = {}
    state = STATE_CELL.match(cells[0])
    if state:
        facts["temperature_c"] = leading_int(state.group(2)) if state.group(2).endswith("C") else None
        facts["power_limit_w"] = watts(state.group(5))
    memory = MEMORY_CELL.match(cells[1])
    if memory:
        facts["memory_used_mib"] = mib(memory.group(1))
        facts["memory_total_mib"] = mib(memory.group(2))
    util = UTIL_CELL.match(cells[2])
    if util and util.group(2) != "ERR!":
        facts["compute_mode"] = COMPUTE_MODES.get(util.group(2).lower())
    busy = leading_int(util.group(1)) if util and util.group(1).endswith("%") else None
    if busy is not None and 0 <= busy <= 100:
        facts["utilization"] = {"gpu": busy}  # GPU-Util: nvidia-smi's last sample (the table has no memory %)
    return facts


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


def leading_columns(tokens: list[str]) -> list[str]:
    """The device columns of a topo header: the tokens before "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"."""
    columns: list[str] = []
    for k, token in enumerate(tokens):
        if token in ("CPU", "NUMA") or (token == "GPU" and tokens[k + 1 : k + 2] == ["NUMA"]):
            break
        columns.append(token)
    return columns


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def normal(key: str) -> str:
    """A `-q` key as a name: "GPU T.Limit Temp" -> "gpu_t_limit_temp", "SRAM Uncorrectable SEC-DED" ->
    "sram_uncorrectable_sec_ded"."""
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def q_node(text: str, i: int) -> Node | None:
    """A `-q` line inside a GPU section; None for a line that is not one (the section has ended)."""
    pair = Q_PAIR.match(text)
    if pair:
        return Node(normal(pair.group(1)), (pair.group(2) or "").strip(), i)
    if Q_SECTION.match(text):
        return Node(normal(text), None, i)
    return None


def walk(root: Node) -> Iterator[tuple[tuple[str, ...], Node]]:
    """Every node under `root` with its path of keys, in the order printed."""
    pending: list[tuple[tuple[str, ...], Node]] = [((child.key,), child) for child in reversed(root.children)]
    while pending:
        path, node = pending.pop()
        yield path, node
        pending.extend(((*path, child.key), child) for child in reversed(node.children))


# -- `-q` text as the elements of `-q -x` -------------------------------------------------------------------

LINK = "pci/pci_gpu_link_info/"
# `-q` paths (normalised keys from the GPU section down) and the `-q -x` element each is printed as, for the
# elements nvsmi_xml reads.
Q_ELEMENTS = {
    ("product_name",): "product_name",
    ("gpu_uuid",): "uuid",
    ("persistence_mode",): "persistence_mode",
    ("compute_mode",): "compute_mode",
    ("mig_mode", "current"): "mig_mode/current_mig",
    ("mig_mode", "pending"): "mig_mode/pending_mig",
    ("ecc_mode", "current"): "ecc_mode/current_ecc",
    ("ecc_mode", "pending"): "ecc_mode/pending_ecc",
    ("driver_model", "current"): "driver_model/current_dm",
    ("gpu_virtualization_mode", "virtualization_mode"): "gpu_virtualization_mode/virtualization_mode",
    ("pci", "bus_id"): "pci/pci_bus_id",
    ("pci", "device_id"): "pci/pci_device_id",
    ("pci", "gpu_link_info", "pcie_generation", "max"): LINK + "pcie_gen/max_link_gen",
    ("pci", "gpu_link_info", "pcie_generation", "current"): LINK + "pcie_gen/current_link_gen",
    ("pci", "gpu_link_info", "pcie_generation", "device_max"): LINK + "pcie_gen/max_device_link_gen",
    ("pci", "gpu_link_info", "link_width", "max"): LINK + "link_widths/max_link_width",
    ("pci", "gpu_link_info", "link_width", "current"): LINK + "link_widths/current_link_width",
    ("pci", "replays_since_reset"): "pci/replay_counter",
    ("fb_memory_usage", "total"): "fb_memory_usage/total",
    ("fb_memory_usage", "used"): "fb_memory_usage/used",
    ("utilization", "gpu"): "utilization/gpu_util",
    ("utilization", "memory"): "utilization/memory_util",
    ("retired_pages", "single_bit_ecc"): "retired_pages/multiple_single_bit_retirement/retired_count",
    ("retired_pages", "double_bit_ecc"): "retired_pages/double_bit_retirement/retired_count",
    ("retired_pages", "pending"): "retired_pages/pending_retirement",
    ("retired_pages", "pending_page_blacklist"): "retired_pages/pending_retirement",
    ("retired_pages", "pending_page_retirement"): "retired_pages/pending_retirement",
    ("remapped_rows",): "remapped_rows",
    ("remapped_rows", "correctable_error"): "remapped_rows/remapped_row_corr",
    ("remapped_rows", "uncorrectable_error"): "remapped_rows/remapped_row_unc",
    ("remapped_rows", "pending"): "remapped_rows/remapped_row_pending",
    ("remapped_rows", "remapping_failure_occurred"): "remapped_rows/remapped_row_failure",
    ("temperature", "gpu_current_temp"): "temperature/gpu_temp",
    ("temperature", "gpu_t_limit_temp"): "temperature/gpu_temp_tlimit",
    ("temperature", "gpu_current_t_limit_temp"): "temperature/gpu_temp_tlimit",
    ("temperature", "gpu_shutdown_temp"): "temperature/gpu_temp_max_threshold",
    ("temperature", "gpu_slowdown_temp"): "temperature/gpu_temp_slow_threshold",
    ("temperature", "gpu_shutdown_t_limit_temp"): "temperature/gpu_temp_max_tlimit_threshold",
    ("temperature", "gpu_slowdown_t_limit_temp"): "temperature/gpu_temp_slow_tlimit_threshold",
    ("power_readings", "enforced_power_limit"): "power_readings/enforced_power_limit",
    ("power_readings", "default_power_limit"): "power_readings/default_power_limit",
    ("power_readings", "current_power_limit"): "power_readings/current_power_limit",
    ("gpu_power_readings", "current_power_limit"): "gpu_power_readings/current_power_limit",
    ("gpu_power_readings", "default_power_limit"): "gpu_power_readings/default_power_limit",
    ("gpu_power_readings", "gpu_ceiling_power_limit", "current_power_limit"): "gpu_power_readings/current_power_limit",
    ("gpu_power_readings", "gpu_ceiling_power_limit", "default_power_limit"): "gpu_power_readings/default_power_limit",
    ("fabric",): "fabric",
    ("fabric", "state"): "fabric/state",
    ("fabric", "status"): "fabric/status",
    ("fabric", "health", "summary"): "fabric/health/summary",
    ("fabric", "health", "bandwidth"): "fabric/health/bandwidth",
    ("fabric", "health", "route_recovery_in_progress"): "fabric/health/route_recovery_in_progress",
    ("fabric", "health", "route_unhealthy"): "fabric/health/route_unhealthy",
    ("fabric", "health", "access_timeout_recovery"): "fabric/health/access_timeout_recovery",
    ("fabric", "health", "incorrect_configuration"): "fabric/health/incorrect_configuration",
}
# "Clocks Event Reasons" (R535 on) and "Clocks Throttle Reasons" (before): `-q` names -> the gateway's.
CLOCK_SECTIONS = {"clocks_event_reasons": "clocks_event_reason_", "clocks_throttle_reasons": "clocks_throttle_reason_"}
CLOCK_NAMES = {"idle": "gpu_idle"}
# Facts nvsmi_xml gives for an element it does not list as missing when absent: recorded only where there.
NEEDS_ELEMENT = {
    "memory_total_mib": "fb_memory_usage/total",
    "memory_used_mib": "fb_memory_usage/used",
    "mig_devices": "mig_devices",
    "virtualization_mode": "gpu_virtualization_mode/virtualization_mode",
    "driver_model": "driver_model/current_dm",
    "utilization": "utilization/gpu_util",
}
NEVER_PRINTED = ("compute_capability", "inforom_valid", "nvlinks", "not_captured", "index")


def put(parent: ET.Element, path: str, text: str | None) -> None:
    """Sets the element at `path` under `parent` (made as needed) to `text`, unless it already has one."""
    node = parent
    for tag in path.split("/"):
        child = node.find(tag)
        node = child if child is not None else ET.SubElement(node, tag)
    if node.text is None and text:
        node.text = text


def gpu_element(query: QueryGpu) -> ET.Element:
    """A `-q` GPU section as the <gpu> element `-q -x` prints for it (the elements nvsmi_xml reads)."""
    gpu = ET.Element("gpu", {"id": query.bus})
    for path, node in walk(query.tree):
        target = Q_ELEMENTS.get(path)
        if target:
            put(gpu, target, device_id(node.value) if path == ("pci", "device_id") else node.value)
        elif path[0] == "ecc_errors" and len(path) > 1:
            put(gpu, "/".join(path), node.value)
        elif path[0] in CLOCK_SECTIONS and len(path) > 1:
            prefix = CLOCK_SECTIONS[path[0]]
            put(gpu, f"{path[0]}/{prefix}{CLOCK_NAMES.get(path[-1], path[-1])}", node.value)
    children = query.tree.children
    if any(child.key == "processes" for child in children):
        processes(gpu, next(child for child in children if child.key == "processes"))
    if any(child.key == "mig_mode" for child in children):
        mig_devices(gpu, [child for child in children if child.key in ("mig_device", "mig_devices")])
    return gpu


def device_id(text: str | None) -> str | None:
    """`-q`'s "0x233010DE" as `-q -x`'s "233010DE"."""
    return text[2:] if text and text.lower().startswith("0x") else text


def processes(gpu: ET.Element, section: Node) -> None:
    """The Processes section: "GPU instance ID" and "Compute instance ID" lines, then "Process ID" with its
    Type, Name and Used GPU Memory indented under it; "None" where no process holds the GPU."""
    element = ET.SubElement(gpu, "processes")
    instances: dict[str, str | None] = {}
    for child in section.children:
        if child.key in ("gpu_instance_id", "compute_instance_id"):
            instances[child.key] = child.value
        elif child.key == "process_id":
            info = ET.SubElement(element, "process_info")
            for tag in ("gpu_instance_id", "compute_instance_id"):
                ET.SubElement(info, tag).text = instances.pop(tag, None)
            ET.SubElement(info, "pid").text = child.value
            details = {d.key: d.value for d in child.children}
            ET.SubElement(info, "type").text = details.get("type")
            ET.SubElement(info, "process_name").text = details.get("name")
            ET.SubElement(info, "used_memory").text = details.get("used_gpu_memory")


def mig_devices(gpu: ET.Element, sections: list[Node]) -> None:
    """The MIG Device sections (after MIG Mode; none where MIG is off) as <mig_devices>."""
    element = ET.SubElement(gpu, "mig_devices")
    for section in sections:
        for device in [section] if section.key == "mig_device" else section.children:
            if device.key != "mig_device":
                continue
            entry = ET.SubElement(element, "mig_device")
            for child in device.children:
                if child.key in ("index", "gpu_instance_id", "compute_instance_id"):
                    put(entry, child.key, child.value)
                elif child.key in ("fb_memory_usage", "shared_fb_memory_usage"):
                    total = next((c.value for c in child.children if c.key == "total"), None)
                    put(entry, "fb_memory_usage/total", total)


def query_facts(query: QueryGpu) -> dict[str, Any]:
    """The GPU facts nvsmi_xml reads from the same section printed by `-q -x`, less what the section lacks."""
    element = gpu_element(query)
    reader = nvsmi_xml.Gpu(element, query.position)
    facts = reader.facts()
    missing = set(reader.missing)
    kept = {
        name: value
        for name, value in facts.items()
        if name not in NEVER_PRINTED
        and (element.find(NEEDS_ELEMENT[name]) is not None if name in NEEDS_ELEMENT else name not in missing)
    }
    if isinstance(kept.get("pci_bus_id"), str) and re.fullmatch(BUS_ID, kept["pci_bus_id"]):
        kept["pci_bus_id"] = bus_id(kept["pci_bus_id"])
    if "pcie" in missing:
        kept.pop("pcie", None)
    errors = kept.pop("ecc_errors", None)
    if errors is not None:
        kept.update({f"ecc_errors.{name}": count for name, count in errors.items()})
    return kept
