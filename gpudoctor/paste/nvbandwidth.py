"""nvbandwidth's output, plain text or `--json`, as users paste it: its header, the GPUs it ran on, and each
testcase's matrix of bandwidths (or latencies) with its sum, so a judge can compare a machine's host<->GPU and
GPU<->GPU copies with what its links should give.

What it records:
- `benchmarks.nvbandwidth`: one dict for the paste, {"line", "format" ("text" or "json"), "version",
  "cuda_runtime", "driver_version", "devices": [{"index", "name", "bus_id"}], "testcases": [{"name", "line",
  "status", "unit", "columns", "rows", "matrix", "sum"}]}; `line`s are 1-based, a matrix cell is a float or
  None (N/A: the pair was not measured), `unit` is the description's "(GB/s)" or "(ns)";
- `nvml.driver_version` ("Driver Version: 560.35.05", NVML's), `nvml.cuda_driver_version` from "CUDA Driver
  Version: 12060" (cuDriverGetVersion's int in every release);
- `nvml.gpus.N.name` and `.pci_bus_id` from "Device 0: NVIDIA A100-SXM4-40GB (00000000:99:00)", only where
  every device has the same name: nvbandwidth numbers devices as CUDA does (fastest first), which is
  nvidia-smi's order only among equal GPUs. The bus id is printed without its function; a CUDA device is
  function 0 (cudaDeviceGetPCIBusId prints it so), so NVML's form ends in ".0".

Formats, from NVIDIA/nvbandwidth (66746a3b, v0.8, and earlier tags):
- output.cpp: "nvbandwidth Version: " NVBANDWIDTH_VERSION, "Built from Git version: ", "CUDA Runtime Version: ",
  "CUDA Driver Version: " (since v0.5 both print cuDriverGetVersion's value), "Driver Version: ", the host name,
  "Device " i ": " name " (" %08x domain ":" %02x bus ":" %02x device ")" (the bus id since v0.6; v0.5 and
  earlier print the name alone), "Running " key ".", and for a failed testcase status ": " message ("Error:
  ..."); v0.4 and earlier print "Waiving " key "." where v0.5+ print "Waived: " without the key, which this
  reader cannot attribute and skips.
- inline_common.h operator<<(PeerValueMatrix): the description line (testcases_ce.cpp, testcases_sm.cpp,
  multinode_testcases.cpp: "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", "memory latency SM CPU(row)
  <-> GPU(column) (ns)", ...), a column header of setw(10) indices after setw(2) blanks, rows of setw(2)
  label then setw(10) values with 2 decimals or "N/A", a blank line, then "SUM " key " " sum (or, with
  --perfFormatter, "&&&& PERF " key " " sum " +GB/s"). Bidirectional device-to-device testcases print three
  matrices, keys suffixed "_read1"/"_read2"/"_total" (or "_write1"/"_write2"/"_total"); each is recorded
  under its SUM key. v0.9 adds "COEFFICIENT_OF_VARIATION key value", v0.10 prints "CUDA Runtime Version: 13.3
  (13030)" and "CUDA Driver Version (API): ..." (seen in published v0.10.0 outputs; those sources are not
  stored here): read alike.
- json_output.cpp: {"nvbandwidth": {"version", "git_version", "CUDA Runtime Version" (an int),
  "Driver Version", "GPU Device list": ["0: name (bus): (host)"], "testcases": [{"name", "status" ("Passed",
  "Waived", "Error", "Running"), "bandwidth_description", "bandwidth_matrix" (rows of strings, "N/A"),
  "sum", ...}], "error", "warning"}}. A testcase with three matrices appends all their rows to one
  bandwidth_matrix and keeps the last description and sum: those rows are split back into the three."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.paste.found import Found, json_blocks, listed

READER = "nvbandwidth"
MAX_CELLS = 100_000  # a matrix larger than this is not nvbandwidth's (1024 GPUs squared is 1M; none that large)

VERSION = re.compile(r"^nvbandwidth Version: (\S+)")
RUNTIME = re.compile(r"^CUDA Runtime Version: (\S.*)$")
CUDA_DRIVER = re.compile(r"^CUDA Driver Version(?: \(API\))?: (\S.*)$")
DRIVER = re.compile(r"^Driver Version: (\S+)$")
DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\))?$")
# The host in parentheses is a host name (at most 255 characters, no parentheses): `.*` there ran to the end of
# a long entry from every ": (" in it, in quadratic time.
JSON_DEVICE = re.compile(
    r"^(\d+): (.+?)(?: \(([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\))?(?:: \([^()]{0,255}\))?$"
)
RUNNING = re.compile(r"^Running ([a-z0-9]+_[a-z0-9_]+)\.$")
WAIVING = re.compile(r"^Waiving ([a-z0-9]+_[a-z0-9_]+)\.$")
ERROR = re.compile(r"^Error: (.*)$")
NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"
SUM = re.compile(rf"^(?:SUM|&&&& PERF) ([a-z0-9]+_[a-z0-9_]+) ({NUMBER})(?: [+-]\S+)?$")
INTEGER = re.compile(r"(\d{4,6})\)?$")
UNIT = re.compile(r"\(([^()]+)\)\s*$")
DESCRIPTIONS = ("memcpy ", "memory latency ", "Device to Device Latency ", "multicast ", "Bisect benchmarking")
QUOTE = re.compile(r"^[>\s]+")
JSON_NAME = re.compile(r'^\s*"name"\s*:\s*"([^"]*)"')


@dataclass
class Run:
    """What the paste's nvbandwidth output states, gathered before it is recorded as one fact."""

    line: int | None = None  # 0-based, where nvbandwidth's output starts
    format: str = "text"
    header: dict[str, Any] = field(default_factory=dict)  # version, cuda_runtime, driver_version
    devices: dict[int, dict[str, Any]] = field(default_factory=dict)
    testcases: list[dict[str, Any]] = field(default_factory=list)
    in_run: bool = False  # a version line was seen and no testcase yet: header lines now are nvbandwidth's
    running: dict[str, Any] | None = None  # the testcase "Running x." opened and its matrices so far

    def start(self, number: int, form: str = "text") -> None:
        if self.line is None:
            self.line, self.format = number, form


def read(found: Found) -> None:
    """nvbandwidth's text and JSON output anywhere in the paste; nothing from lines that are not its."""
    run = Run()
    read_text(found, run)
    for start, end, obj in json_blocks(found, "nvbandwidth"):
        read_json(found, run, start, names_at(found, start, end), obj)
    record(found, run)


# Every line read_line or a matrix may start at begins so (a superset: they decide); no other line changes a run.
STARTS = re.compile(
    r"^(?:>|[^\S\n])*(?:"
    + "|".join(
        re.escape(start)
        for start in (*DESCRIPTIONS, "nvbandwidth Version: ", "Running ", "SUM ", "&&&& PERF ", "Waiving ", "Error: ")
    )
    + r"|CUDA Runtime Version: |CUDA Driver Version|Driver Version: |Device \d)",
    re.MULTILINE,
)


def read_text(found: Found, run: Run) -> None:
    after = 0
    for number in found.matching(STARTS):
        if number < after:
            continue
        text = QUOTE.sub("", found.lines[number]).rstrip()
        if text.startswith(DESCRIPTIONS) and (end := matrix(found, run, number)) is not None:
            after = end
            continue
        read_line(found, run, number, text)
    close_running(run)


def read_line(found: Found, run: Run, number: int, text: str) -> None:
    """One line that is not a matrix: the header, a device, a testcase starting, failing or summed."""
    if match := VERSION.match(text):
        close_running(run)
        run.start(number)
        run.in_run = True
        run.header.setdefault("version", (match.group(1), number))
    elif match := RUNNING.match(text):
        close_running(run)
        run.start(number)
        run.in_run = False
        run.running = {"name": match.group(1), "line": number, "matrices": 0, "status": None}
    elif match := SUM.match(text):
        summed(run, number, match.group(1), number_or_none(match.group(2)))
    elif match := WAIVING.match(text):
        close_running(run)
        run.start(number)
        run.testcases.append(testcase(match.group(1), number, "Waived"))
    elif ERROR.match(text) and run.running and not run.running["matrices"]:
        run.running["status"] = "Error"
    elif run.in_run:
        header(found, run, number, text)


def header(found: Found, run: Run, number: int, text: str) -> None:
    if match := RUNTIME.match(text):
        run.header.setdefault("cuda_runtime", (match.group(1).strip(), number))
    elif match := CUDA_DRIVER.match(text):
        if value := INTEGER.search(match.group(1).strip()):
            found.fact("nvml.cuda_driver_version", int(value.group(1)), READER, number)
    elif match := DRIVER.match(text):
        run.header.setdefault("driver_version", (match.group(1), number))
    elif match := DEVICE.match(text):
        device(run, number, int(match.group(1)), match.group(2).strip(), match.group(3))


def device(run: Run, number: int, index: int, name: str, bus_id: str | None) -> None:
    if index < 1024 and index not in run.devices:
        run.devices[index] = {"index": index, "name": name, "bus_id": bus_id, "line0": number}


def matrix(found: Found, run: Run, number: int) -> int | None:
    """The matrix whose description is at `number`: its header and rows, up to the first line that is not
    one of its rows. The line after it, or None where no matrix follows the description."""
    lines = found.lines
    description = QUOTE.sub("", lines[number]).strip()
    if number + 1 >= len(lines):
        return None
    head = QUOTE.sub("", lines[number + 1])
    columns = head.split()
    if not columns or len(columns) > 1024 or head.startswith(DESCRIPTIONS):
        return None
    rows: list[str] = []
    cells: list[list[float | None]] = []
    end = number + 2
    while end < len(lines) and len(rows) * len(columns) < MAX_CELLS:
        row = matrix_row(QUOTE.sub("", lines[end]), len(columns))
        if row is None:
            break
        rows.append(row[0])
        cells.append(row[1])
        end += 1
    if not rows:
        return None
    run.start(number)
    add_matrix(run, number, description, columns, rows, cells)
    return end


def matrix_row(line: str, width: int) -> tuple[str, list[float | None]] | None:
    """ " 0     55.12       N/A" as ("0", [55.12, None]); None where the line is not a row `width` wide."""
    parts = line.split()
    if len(parts) != width + 1:
        return None
    values = [None if part == "N/A" else number_or_none(part) for part in parts[1:]]
    if any(value is None and part != "N/A" for value, part in zip(values, parts[1:], strict=True)):
        return None
    return parts[0], values


def number_or_none(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def add_matrix(
    run: Run,
    number: int,
    description: str,
    columns: list[str],
    rows: list[str],
    cells: list[list[float | None]],
) -> None:
    """A matrix belongs to the testcase "Running x." opened; the first takes that line, later ones (the
    bidirectional testcases' three) their description's."""
    running = run.running
    first = running is not None and not running["matrices"]
    entry = testcase(running["name"] if running else None, running["line"] if first else number, "Passed")
    unit = UNIT.search(description)
    entry.update(
        unit=unit.group(1) if unit else None,
        columns=columns,
        rows=rows,
        matrix=cells,
        open=True,
    )
    if running is not None:
        running["matrices"] += 1
    run.testcases.append(entry)


def summed(run: Run, number: int, key: str, total: float | None) -> None:
    """ "SUM key value" closes the matrix before it and names it by its key; a SUM with no matrix before it
    (a paste that kept only the sums) is a testcase of its own."""
    last = run.testcases[-1] if run.testcases else None
    if last is not None and last.pop("open", False):
        last["name"], last["sum"] = key, total
        return
    run.start(number)
    run.testcases.append(testcase(key, number, "Passed") | {"sum": total})


def close_running(run: Run) -> None:
    """A testcase that started and printed no matrix (it failed, or the paste stops) is kept with its status."""
    running, run.running = run.running, None
    for entry in run.testcases:
        entry.pop("open", None)
    if running is not None and not running["matrices"]:
        run.testcases.append(testcase(running["name"], running["line"], running["status"]))


def testcase(name: str | None, line: int, status: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "line": line + 1,
        "status": status,
        "unit": None,
        "columns": [],
        "rows": [],
        "matrix": [],
        "sum": None,
    }


def names_at(found: Found, start: int, end: int) -> dict[str, int]:
    """Where each `"name" : "x"` of a styled JSON block is (0-based, the first of each name)."""
    at: dict[str, int] = {}
    for number in range(start, end):
        if match := JSON_NAME.match(found.lines[number]):
            at.setdefault(match.group(1), number)
    return at


def read_json(found: Found, run: Run, number: int, names: dict[str, int], obj: dict[str, Any]) -> None:
    """`nvbandwidth --json`'s object (json_output.cpp); a testcase's line is its "name"'s."""
    body = obj["nvbandwidth"]
    run.start(number, "json")
    if isinstance(body.get("version"), str):
        run.header.setdefault("version", (body["version"], number))
    runtime = body.get("CUDA Runtime Version")
    if isinstance(runtime, int | str) and not isinstance(runtime, bool):
        run.header.setdefault("cuda_runtime", (str(runtime), number))
    if isinstance(body.get("Driver Version"), str) and body["Driver Version"]:
        run.header.setdefault("driver_version", (body["Driver Version"], number))
    for entry in listed(body.get("GPU Device list")):
        if isinstance(entry, str) and (match := JSON_DEVICE.match(entry.strip())):
            device(run, number, int(match.group(1)), match.group(2).strip(), match.group(3))
    for entry in listed(body.get("testcases")):
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            run.testcases.extend(json_testcases(entry, names.get(entry["name"], number)))


def json_testcases(entry: dict[str, Any], number: int) -> list[dict[str, Any]]:
    """One JSON testcase as the entries it holds: three where a bidirectional testcase's rows are three
    square matrices stacked."""
    status = entry.get("status") if isinstance(entry.get("status"), str) else None
    rows = [row for row in listed(entry.get("bandwidth_matrix")) if isinstance(row, list)]
    cells = [[json_cell(value) for value in row] for row in rows]
    description = entry.get("bandwidth_description")
    description = description.strip() if isinstance(description, str) else ""
    unit = UNIT.search(description)
    total = json_cell(entry["sum"]) if isinstance(entry.get("sum"), int | float) else None  # a number, never text
    width = max((len(row) for row in cells), default=0)
    parts = split_stacked(entry["name"], cells, width)
    entries = []
    for index, (name, part) in enumerate(parts):
        made = testcase(name, number, status)
        made.update(
            unit=unit.group(1) if unit else None,
            columns=[str(i) for i in range(width)] if part else [],
            rows=[str(i) for i in range(len(part))],
            matrix=part,
            sum=total if index == len(parts) - 1 else None,
        )
        entries.append(made)
    return entries


def split_stacked(name: str, cells: list[list[float | None]], width: int) -> list[tuple[str, list[Any]]]:
    """json_output.cpp appends each matrix of a testcase to the same bandwidth_matrix: a bidirectional
    device-to-device testcase's N x N read1/read2/total (write1/write2/total) come as 3N rows."""
    if "bidirectional" not in name or "host" in name or not width or len(cells) != 3 * width:
        return [(name, cells)]
    kind = "write" if "_write" in name else "read"
    suffixes = (f"_{kind}1", f"_{kind}2", "_total")
    return [(name + suffix, cells[i * width : (i + 1) * width]) for i, suffix in enumerate(suffixes)]


def json_cell(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number_or_none(str(value))
    return number_or_none(value) if isinstance(value, str) else None


def record(found: Found, run: Run) -> None:
    if run.line is None or not (run.header or run.devices or run.testcases):
        return
    stated = {key: value for key, (value, _) in run.header.items()}
    if "driver_version" in run.header:
        value, number = run.header["driver_version"]
        found.fact("nvml.driver_version", value, READER, number)
    devices = [run.devices[index] for index in sorted(run.devices)]
    if devices and len({d["name"] for d in devices}) == 1:
        for d in devices:
            facts = {"name": d["name"]} | ({"pci_bus_id": nvml_bus_id(d["bus_id"])} if d["bus_id"] else {})
            found.gpu(d["index"], facts, READER, d["line0"])
    for entry in run.testcases:
        entry.pop("open", None)
    section = {
        "line": run.line + 1,
        "format": run.format,
        "version": stated.get("version"),
        "cuda_runtime": stated.get("cuda_runtime"),
        "driver_version": stated.get("driver_version"),
        "devices": [{"index": d["index"], "name": d["name"], "bus_id": d["bus_id"]} for d in devices],
        "testcases": run.testcases,
    }
    found.fact("benchmarks.nvbandwidth", section, READER, run.line)


def nvml_bus_id(bus_id: str) -> str:
    """ "00000000:99:00" (domain:bus:device, as nvbandwidth prints it) in NVML's form, "00000000:99:00.0"."""
    domain, bus, dev = bus_id.split(":")
    return f"{int(domain, 16):08X}:{bus.upper()}:{dev.upper()}.0"
