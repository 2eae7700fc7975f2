"""`nvidia-smi topo -m` and `topo -p2p`: the GPU matrix as `nvml.topology`, the NICs beside it, each GPU's NUMA node.

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
from typing import Any

from gpudoctor.paste.nvsmi.state import MAX_GPUS, Paste, clean

# `topo -m` cells (nvmlGpuTopologyLevel_t, nvml.h) and `topo -p2p` cells (nvmlGpuP2PStatus_t, nvml.h).
ANCESTORS = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50, "SOC": 50}
NVLINK_CELL = re.compile(r"^NV\d+$")
P2P_STATUS = {"OK": 0, "CNS": 1, "GNS": 2, "TNS": 3, "DR": 4, "NS": 5, "U": 6}
P2P_COMMAND = re.compile(r"topo\s+(?:-p2p|--p2pstatus)\s+(\S+)")
TOPO_COLUMN = re.compile(r"^GPU\d{1,5}$")
# Every column after the GPUs is a NIC: "NIC0" with a legend (drivers since about R530), the device itself before
# ("mlx5_0", "mlx5_bond_0", an EFA "rdmap79s0").
NIC_COLUMN = re.compile(r"^[A-Za-z][\w.:-]{0,39}$")
NIC_NUMBERED = re.compile(r"^NIC\d{1,3}$")
NIC_LEGEND = re.compile(r"^\s*(NIC\d{1,3}): ([\w.:-]{1,40})\s*$")
# What a matrix cell or an affinity holds: a row wrapped by a narrow terminal or a mail client goes on with a
# line of these alone (a new row starts with its device's name).
CELL = re.compile(r"^(?:X|PIX|PXB|PHB|NODE|SYS|SOC|NV\d{1,3}|OK|CNS|GNS|TNS|DR|NS|U|N/A|\d[\d,-]{0,200})$")
TRAILING_WORDS = {"CPU", "NUMA", "GPU", "Affinity", "ID"}
TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
MAX_NICS = 64  # nvidia-smi itself shows at most 56 ("76 NICs found in the topology, only displaying 56")
HEADER_LINES = 32  # a header of 8 GPUs and 64 NICs wrapped at 40 columns takes about 15
LEGEND_LINES = 40  # the legend of levels is about 12 lines; the NIC legend follows it

Rows = list[tuple[int, list[str], int]]  # each GPU row: its index, its cells after the name, its line


def read(paste: Paste, i: int, header: str) -> int:
    """A `topo -m` or `topo -p2p` matrix: GPU columns first, then NICs, then the affinity columns. A header or a
    row a narrow window wrapped onto the next line is read whole; rows the paste cut off are left out (a GPU
    missing from the rows is missing from `indexes`; every row's NIC cells stay under their own column)."""
    j = i + 1
    parts = [header]
    while j < len(paste.lines) and j - i <= HEADER_LINES and header_goes_on(clean(paste.lines[j])):
        parts.append(clean(paste.lines[j]))
        j += 1
    tokens = " ".join(parts).split()
    gpus = 0
    while gpus < len(tokens) and tokens[gpus] == f"GPU{gpus}":
        gpus += 1
    if gpus == 0 or gpus > MAX_GPUS:
        return i + 1
    columns = leading_columns(tokens)
    trailing = [name for name in TRAILING if name in " ".join(tokens)]
    rows, j = matrix_rows(paste, j, columns, len(columns) + len(trailing))
    values = {c for _, cells, _ in rows for c in cells[:gpus]} - {"X"}
    if not rows or any(v not in P2P_STATUS and v not in ANCESTORS and not NVLINK_CELL.match(v) for v in values):
        return j
    if values and values <= set(P2P_STATUS):
        p2p(paste, i, rows, gpus)
    elif trailing or values:
        topo(paste, i, rows, gpus, len(columns), trailing)
        nics(paste, i, rows, (gpus, columns[gpus:]), j)
    return j


def header_goes_on(line: str) -> bool:
    """A line that finishes a wrapped header: column names and the affinity columns' words, no cell."""
    words = line.split()
    named = any(TOPO_COLUMN.match(w) or NIC_NUMBERED.match(w) or w in TRAILING_WORDS for w in words)
    return named and all(
        TOPO_COLUMN.match(w) or w in TRAILING_WORDS or (NIC_COLUMN.match(w) and not CELL.match(w)) for w in words
    )


def matrix_rows(paste: Paste, j: int, columns: list[str], width: int) -> tuple[Rows, int]:
    """The GPU rows from line `j` on (each with its cells after the name) and the line after the matrix; a row
    shorter than the header goes on over the lines that hold only cells."""
    rows: Rows = []
    names = set(columns)
    while j < len(paste.lines) and len(rows) < MAX_GPUS:
        cells = clean(paste.lines[j]).split()
        if not cells or cells[0] not in names:
            break
        start = j
        j += 1
        while len(cells) - 1 < width and j < len(paste.lines):
            more = clean(paste.lines[j]).split()
            if not more or not all(CELL.match(c) for c in more):
                break
            cells += more
            j += 1
        if TOPO_COLUMN.match(cells[0]):
            rows.append((int(cells[0][3:]), cells[1:], start))
    return rows, j


def leading_columns(tokens: list[str]) -> list[str]:
    """The device columns of a topo header: the tokens before "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"."""
    columns: list[str] = []
    for k, token in enumerate(tokens):
        if token in ("CPU", "NUMA") or (token == "GPU" and tokens[k + 1 : k + 2] == ["NUMA"]):
            break
        columns.append(token)
    return columns


def nics(paste: Paste, i: int, rows: Rows, placed: tuple[int, list[str]], after: int) -> None:
    """`topo -m`'s NIC columns: how far each NIC is from each GPU row (NVML's levels: 10 PIX .. 50 SYS; in the
    order of `indexes`), named by the "NIC Legend" below the matrix where it follows (NIC0: mlx5_0). The k-th NIC's
    cell sits after all the GPU columns the header names, however many GPU rows the paste kept."""
    gpus, names = placed
    names = names[:MAX_NICS]
    if not names or not all(NIC_COLUMN.match(n) for n in names):
        return
    devices = nic_legend(paste, after)
    levels = {name: [None] * len(rows) for name in names}
    for position, (_, cells, _) in enumerate(rows):
        for k, name in enumerate(names):
            cell = cells[gpus + k] if gpus + k < len(cells) else ""
            levels[name][position] = ANCESTORS.get(cell)
    found = [{"name": n, "device": devices.get(n, n), "levels": levels[n]} for n in names]
    topology_fact(paste, "nics", found, i)


def nic_legend(paste: Paste, after: int) -> dict[str, str]:
    """ "NIC Legend:" then "  NIC0: mlx5_0" lines, within the lines that follow the matrix."""
    legend: dict[str, str] = {}
    for line in paste.lines[after : after + LEGEND_LINES]:
        named = NIC_LEGEND.match(clean(line))
        if named:
            legend[named.group(1)] = named.group(2)
        elif legend and clean(line).strip():
            break
    return legend


def topo(paste: Paste, i: int, rows: Rows, gpus: int, width: int, trailing: list[str]) -> None:
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
    paste.fact("nvml.status", "ok", i)
    topology_fact(paste, "indexes", indexes, i)
    topology_fact(paste, "common_ancestor", ancestors, i)
    topology_fact(paste, "nvlinks", nvlinks, i)
    for index, cells, line in rows:
        after = cells[width:]
        if "NUMA Affinity" in trailing and len(after) == len(trailing):
            node = after[trailing.index("NUMA Affinity")]
            paste.topology.numa[index] = (int(node) if node.isascii() and node.isdigit() else None, line)


def nvlink_count(cell: str) -> int:
    """A `topo -m` cell's NVLinks: "NV12" is twelve bonded links, any PCIe level none."""
    return int(cell[2:]) if NVLINK_CELL.match(cell) else 0


def p2p(paste: Paste, i: int, rows: Rows, gpus: int) -> None:
    """`topo -p2p`: the GPUs, and NVML's P2P status per pair where the command line just above shows the read
    capability was asked for (the matrix does not say which capability it shows)."""
    asked = next(
        (c for j in range(max(0, i - 3), i) for c in P2P_COMMAND.findall(clean(paste.lines[j]))),
        None,
    )
    indexes = [index for index, _, _ in rows]
    if any(b >= gpus for b in indexes):
        return
    paste.fact("nvml.status", "ok", i)
    topology_fact(paste, "indexes", indexes, i)
    if asked in ("r", "read"):
        statuses = [
            [None if a == b else P2P_STATUS.get(cells[b]) if b < len(cells) else None for b in indexes]
            for a, cells, _ in rows
        ]
        topology_fact(paste, "p2p_read", statuses, i)


def topology_fact(paste: Paste, name: str, value: Any, i: int) -> None:
    paste.fact(f"nvml.topology.{name}", value, i)
    paste.recorded_topology.add(name)
    if name == "indexes" and paste.topology.indexes is None:
        paste.topology.indexes = value


def finish(paste: Paste) -> None:
    """Matrices no output gave are None per pair, as NVML gives a pair it could not answer; each GPU's
    NUMA node keyed by its bus id, where the paste gives it."""
    indexes = paste.topology.indexes
    if indexes is None:
        return
    line = paste.found.origins["nvml.topology.indexes"].line - 1
    for name in ("p2p_read", "common_ancestor"):
        if name not in paste.recorded_topology:
            paste.fact(f"nvml.topology.{name}", [[None for _ in indexes] for _ in indexes], line)
    gpus = paste.found.facts["nvml"].get("gpus") or []
    nodes = {
        gpus[index]["pci_bus_id"]: node
        for index, (node, _) in paste.topology.numa.items()
        if index < len(gpus) and isinstance(gpus[index].get("pci_bus_id"), str)
    }
    if nodes:
        first = min(row for _, row in paste.topology.numa.values())
        paste.fact("system.gpu_numa_nodes", nodes, first)
