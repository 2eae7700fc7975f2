"""`ibstat` and `ibstatus` (infiniband-diags, rdma-core) read into `system.infiniband`, the shape the live
node reads from /sys/class/infiniband: {device, port, state, rate, link_layer, numa_node}. The state is
written as sysfs writes it ("4: ACTIVE"), the rate as "400 Gb/sec", so one judge reads both.

ibstat prints per CA (infiniband-diags/ibstat.c): "CA 'mlx5_0'", then indented "Port 1:", "State: Active",
"Physical state: LinkUp", "Rate: 400", "Link layer: InfiniBand" among other keys. ibstatus prints per port
"Infiniband device 'mlx5_0' port 1 status:", then "state: 4: ACTIVE", "rate: 400 Gb/sec (4X NDR)",
"link_layer: InfiniBand". A paste's Markdown may strip the indentation or put blank lines between keys."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.paste.found import Found

READER = "ibstat"
CA = re.compile(r"^CA '([^']+)'$")
PORT = re.compile(r"^Port (\d+):$")
KEY = re.compile(r"^([A-Za-z][A-Za-z ]*?):\s*(.*)$")
STATUS = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:$")
# The lines _step may take (a superset); any other line that is not blank closes the open block.
ENTRY = re.compile(r"^[^\S\n]*(?:CA '|Infiniband device '|Port \d|[A-Za-z][\w ]*:)", re.MULTILINE)
STATUS_KEY = re.compile(r"^(default gid|base lid|sm lid|state|phys state|rate|link_layer):\s+(.*)$")
IBSTAT_KEYS = {
    "CA type",
    "Number of ports",
    "Firmware version",
    "Hardware version",
    "Node GUID",
    "System image GUID",
    "State",
    "Physical state",
    "Rate",
    "Effective speed",
    "Base lid",
    "LMC",
    "SM lid",
    "Capability mask",
    "Port GUID",
    "Link layer",
}
# ibstat names a port's logical state in words (infiniband-diags/ibstat.c); sysfs and ibstatus write
# "N: NAME" (ib_port_state). rdma-core's master adds "Effective speed" after Rate (commit 9a645e432).
STATES = {"down": "1: DOWN", "initializing": "2: INIT", "armed": "3: ARMED", "active": "4: ACTIVE"}


@dataclass
class Port:
    device: str
    port: int
    line: int
    values: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any] | None:
        """The port as the live reader records it; None without a state (a cut paste)."""
        state = self.values.get("state")
        if not state:
            return None
        rate = self.values.get("rate") or ""
        return {
            "device": self.device,
            "port": self.port,
            "state": STATES.get(state.lower(), state),
            "rate": rate if "Gb/sec" in rate or not rate else f"{rate} Gb/sec",
            "link_layer": self.values.get("link_layer"),
            "numa_node": None,
        }


def read(found: Found) -> None:
    """Every port of every ibstat or ibstatus block in the paste, each once (both tools may be pasted)."""
    ports: list[Port] = []
    device: str | None = None
    port: Port | None = None
    after = 0
    for number in found.matching(ENTRY):
        if (device or port) and any(line.strip() for line in found.lines[after:number]):
            device, port = None, None  # another line between closes the block
        after = number + 1
        device, port = _step(found.lines[number].strip(), number, device, port, ports)
    seen: set[tuple[str, int]] = set()
    for item in ports:
        record = item.record()
        if record is None or (item.device, item.port) in seen:
            continue
        seen.add((item.device, item.port))
        found.append("system.infiniband", record, READER, item.line)


def _step(line: str, number: int, device: str | None, port: Port | None, ports: list[Port]) -> tuple[Any, Any]:
    """One line: the CA and port it opens, or a key of the open port; anything else closes the block."""
    if match := CA.match(line):
        return match.group(1), None
    if match := STATUS.match(line):
        opened = Port(match.group(1), int(match.group(2)), number)
        ports.append(opened)
        return None, opened
    if not line:
        return device, port
    if device and (match := PORT.match(line)):
        opened = Port(device, int(match.group(1)), number)
        ports.append(opened)
        return device, opened
    if device and (match := KEY.match(line)) and match.group(1) in IBSTAT_KEYS:
        if port:
            port.values.setdefault(match.group(1).lower().replace(" ", "_"), match.group(2).strip())
        return device, port
    if device is None and port and (match := STATUS_KEY.match(line)):
        port.values.setdefault(match.group(1).replace(" ", "_"), match.group(2).strip())
        return None, port
    return None, None
