"""What the nvidia-smi reader knows across the outputs of one paste: the facts it records (as the "nvidia-smi"
reader), the GPU index that a table or `-L` gives each bus id and UUID (a `-q` section is placed by it), and what
waits for the end of the paste: a fact the table shows only in part, `-L`'s MIG devices, `-q` sections, `topo`'s
NUMA nodes. Every output's module reads into one `Paste`; the package's entry dispatches lines to them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.paste.found import Found

READER = "nvidia-smi"
MAX_GPUS = 256  # an index a junk line claims must not grow the GPU list without bound
MAX_LINE = 2000  # characters: a longer line is none of nvidia-smi's (and is not searched)

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
QUOTE = re.compile(r"^(?:[ \t]*>)+[ \t]?")
BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"


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


class Paste:
    """The paste's lines, the facts recorded from them, and the cross-reference between its outputs."""

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

    def recorded(self, index: int, name: str) -> tuple[bool, Any]:
        gpus = self.found.facts["nvml"].get("gpus") or []
        gpu = gpus[index] if index < len(gpus) else {}
        return (name in gpu, gpu.get(name))

    def settle(self, weak: Weak) -> None:
        there, value = self.recorded(weak.index, weak.name)
        if not there or not weak.agrees(value):
            self.gpu(weak.index, {weak.name: weak.value}, weak.line)
