"""nccl-tests' output (NVIDIA/nccl-tests: all_reduce_perf, all_gather_perf, ...) as users paste it: the text a
run prints, alone or inside an issue body or a Slurm/MPI log, with launcher prefixes ("0: " from srun -l,
"[1,0]<stdout>:" from mpirun --tag-output, "rank0: ", pdsh's "host: ") and NCCL's own log lines between its
lines; or the JSON file `-J out.json` writes. Each run is appended to `benchmarks.nccl_tests` (`run_dict`
gives the shape): its devices, every row of its table, the summary lines, the versions it states.

The text, from NVIDIA/nccl-tests src/common.cu (to v2.17.2) and src/util.cu (v2.17.3 on), by tag:
- header: v2.17.4+ "# nccl-tests version %s nccl-headers=%d nccl-library=%d" (NCCL_VERSION_CODE, ncclGetVersion);
  v2.16.7+ "# Collective test starting: %s" and "# Collective test concluded: %s" (the program name);
  "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: ..." (v1.0.0 without the "# "); "# Using devices".
- device lines: v1.0.0 "#   Rank %2d on %10s device %2d [0x%02x] %s"; v2.0.0 "#   Rank %2d Pid %6d on %10s device
  %2d [0x%02x] %s"; v2.13.4 "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s"; v2.14.1+ the bus id as
  "[%04x:%02x:%02x]" (domain:bus:device). With MPI, rank 0 prints every process's lines; a build without MPI run
  under mpirun prints one whole run per process, each starting again at "Rank  0".
- table: "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong" (v2.13.0+),
  a row "%12li  %12li  %8s  %6s  %6s" then per side (out-of-place, in-place) "%7s  %6s  %6s  %6g" or "... N/A"
  without validation; "-I 1" adds "i_min i_max i_p99 i_cv%" to each side and "-S 1" a "%Y-%m-%d %H:%M:%S"
  timestamp. Before v2.13.0 each test printed its own header: a root column only in broadcast, reduce, gather
  and scatter, no redop in all_gather, sendrecv and hypercube, an empty one in alltoall, and an "error" column
  ("%5.0le", the largest deviation) for "#wrong".
- footer: "# Out of bounds values : %d OK|FAILED", "# Avg bus bandwidth    : %g" (v1.0.0 without the "#").
- NCCL prints "NCCL version 2.26.6+cuda12.8" (NCCL_DEBUG=VERSION or INFO) after the device list.
- a failed call ends the run: src/common.h NCCLCHECK "%s: Test NCCL failure %s:%d '%s / %s'" (hostname, file, line,
  ncclGetErrorString, ncclGetLastError; "'%s'" alone before v2.13.0), CUDACHECK "%s: Test CUDA failure %s:%d '%s'";
  v1.0.0 "NCCL failure %s:%d '%s'" and "Cuda failure %s:%d '%s'". The run's `failure` is the first such line.

JSON (`-J`, v2.17.3+, src/util.cu; JSON_FILE_VERSION 1, 3 by v2.19.6): one object on one line: "version", "args",
"env" ["NAME=value"], "nccl_version" (ncclGetVersion's int), "config" {..., "devices": [{"rank", "group", "pid",
"hostname", "device", "device_hex", "device_info"}]}, "results" [{"size", "count", "type", "redop", "root" (the
"%6i" text), "out_of_place"/"in_place": {"time" or "cpu_time", "alg_bw", "bus_bw", "nwrong" (null without
validation)} or null}], "out_of_bounds" {"count"}, "average_bus_bandwidth" {"bandwidth"} (spelt
"average_bus_bandwidith" {"bandwidith"} to v2.17.8). It carries no nccl-tests version (its "version" is the file
format's).

Units as printed: time in microseconds, algbw and busbw in GB/s (10^9 B/s)."""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.paste.found import Found, listed

READER = "nccl-tests"
MAX_GAP = 20  # lines of other text (not NCCL's log, not blank) after which a run's table is over

# The test programs (src/*.cu, one binary each, "_mpi" appended where a distribution builds both kinds).
COLLECTIVES = (
    r"all_reduce|all_gather|reduce_scatter|alltoallv|alltoall|sendrecv|broadcast|reduce|gather|scatter|hypercube"
)
PROGRAM = re.compile(rf"\b({COLLECTIVES})_perf\w*")
PREFIX = re.compile(
    r"^(?:\s*(?:>\s*"  # a Markdown quote
    r"|\[\d+,\d+\]<(?:stdout|stderr)>:"  # mpirun --tag-output
    r"|\d{4}-\d\d-\d\dT[\d:.,]+Z?\s"  # docker/kubectl --timestamps
    r"|\[[^\]\s]*\]:?(?=\s)"  # "[rank0]:", "[pod/launcher]"
    r"|[\w.-]+:(?=\s)))+"  # srun -l "0:", "rank0:", pdsh "host:"
)
SETTING = re.compile(r"(?:^|[\s'\",=])(NCCL_[A-Z0-9_]{1,64})=((?:[^\s'\",;|&]|,(?![A-Z0-9_]{1,64}=)){1,200})")
# Numbers are ASCII digits ([0-9], never \d): nccl-tests prints them with printf, and Python's int() and float() would
# read the fullwidth "１" or the Arabic-Indic "٣" that \d matches as digits no program printed.
TAG = re.compile(r"\[[0-9]+\]")  # an MPI output tag inside a row ("-1[0]    1626.5")
DEVICE = re.compile(
    r"Rank\s+([0-9]+)\s+(?:Group\s+[0-9]+\s+)?(?:Pid\s+[0-9]+\s+)?on\s+(\S+)\s+device\s+([0-9]+)\s+\[([^\]]{0,100})\]\s*(.*)"
)
TOOL_VERSION = re.compile(r"nccl-tests version (\S+)(?:.*?\bnccl-library=([0-9]+))?")
NCCL_VERSION = re.compile(r"\bNCCL version ([0-9]+\.[0-9]+\.[0-9]+)")
TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
INT = re.compile(r"-?[0-9]{1,25}")
FLOAT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|nan|inf", re.IGNORECASE)
DATE, CLOCK = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"), re.compile(r"[0-9]{2}:[0-9]{2}:[0-9]{2}")
NEUTRAL = ("NCCL INFO", "NCCL WARN", "NCCL version", "```", "~~~")
SUMMARY = ("average_bus_bandwidth", "average_bus_bandwidith")  # the JSON's key, misspelt to v2.17.8
FAILURE = re.compile(r"(?:Test )?(?:NCCL|CUDA|Cuda) failure [^\s:']{1,200}:[0-9]{1,9} '")


@dataclass
class Run:
    """One run as the text shows it, filled line by line."""

    first: int  # 0-based line of its first line
    last: int
    titles: dict[str, str] = field(default_factory=dict)  # "version", "start", "nthread" -> the line
    version: str | None = None
    nccl_version: str | None = None
    collective: str | None = None  # from "# Collective test starting/concluded"
    devices: list[dict[str, Any]] = field(default_factory=list)
    table: bool = False  # the table's header (or its "out-of-place  in-place" line) seen
    columns: list[str] | None = None  # the table header's names
    rows: list[dict[str, Any]] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None
    closed: bool = False  # "# Avg bus bandwidth" seen: what follows is another run's
    concluded: bool = False
    failure: str | None = None  # nccl-tests' own line for a failed NCCL or CUDA call


def in_header(run: Run | None) -> bool:
    """The run has shown only header lines so far: a device list or the table's header may still come."""
    return run is not None and not run.closed and not run.rows and not run.table


def read(found: Found) -> None:
    """Every nccl-tests run in the text, text or JSON, in the order they appear."""
    whole, documents = json_documents(found)
    runs = [(line0, from_json(document, line0)) for line0, document in documents]
    text_runs = [] if whole else scan(found, {line0 for line0, _ in documents})
    mentions = [(n, m.group(1)) for n in found.holding(("_perf",)) for m in PROGRAM.finditer(found.lines[n])]
    lines = [number for number, _ in mentions]
    previous = -1
    for run in text_runs:
        command = command_line(run, lines, previous)
        collective = run.collective or (mentions[command][1] if command is not None else None)
        env = settings(found.lines[lines[command]]) if command is not None else {}
        runs.append((run.first, run_dict(run, collective, env)))
        previous = run.last
    for line0, run_facts in sorted(runs, key=lambda pair: pair[0]):
        found.append("benchmarks.nccl_tests", run_facts, READER, line0)


# ---------------------------------------------------------------------------------------------------- text

COMMENTS = (
    "nccl-tests version ",
    "Collective test ",
    "nThread ",
    "Using devices",
    "Rank ",
    "out-of-place",
    "size",
    "Out of bounds values",
    "Avg bus bandwidth",
)


# Every line `take` may read holds one of these (a superset: `take` decides); the lines between only count
# towards MAX_GAP. A row starts with two integers (an MPI tag may sit beside them) and a type name, and has at
# least eleven fields. Every repeat is bounded (a field, a run of spaces, a tag): unbounded, a type name's `\S*` ran
# to the end of a long line from every row-like start and back, in quadratic time.
TAKEN = re.compile(
    r"^[^\n]*?(?:(?<!#)#+[^\S\n]*(?:" + "|".join(re.escape(start) for start in COMMENTS) + r")"
    r"|nThread |Out of bounds values|Avg bus bandwidth|NCCL version |NCCL failure |CUDA failure |Cuda failure "
    r"|\d(?:[ \t]|\[\d{1,10}\]){1,40}\d{1,40}(?:[ \t]|\[\d{1,10}\]){1,40}"
    r"[A-Za-z]\S{0,40}(?:[^\S\n]{1,100}\S{1,100}){8})",
    re.MULTILINE,
)


def scan(found: Found, skip: set[int]) -> list[Run]:
    """The runs of the text: a header, a device list, a table, a footer, or any part of them (an excerpt)."""
    runs: list[Run] = []
    gap = 0
    after = 0
    for number in found.matching(TAKEN):
        if gap <= MAX_GAP and number > after:
            gap += other_lines(found.lines[after:number], skip, after, MAX_GAP + 1 - gap)
        after = number + 1
        if number in skip:
            continue
        raw = found.lines[number]
        text = unprefixed(raw)
        current = runs[-1] if runs and gap <= MAX_GAP else None
        if take(runs, current, number, text):
            runs[-1].last = number
            gap = 0
        elif is_other(raw, text):
            gap += 1
    return runs


def other_lines(lines: list[str], skip: set[int], first: int, most: int) -> int:
    """How many of `lines` (the first is line `first`) are other text, counted up to `most`."""
    count = 0
    for number, raw in enumerate(lines, first):
        if count >= most:
            break
        if raw.strip() and number not in skip and is_other(raw, unprefixed(raw)):
            count += 1
    return count


def is_other(raw: str, text: str) -> bool:
    """Text that is neither nccl-tests' nor NCCL's log nor blank: it ends a run after MAX_GAP lines."""
    return bool(text) and not text.startswith("#") and not any(marker in raw for marker in NEUTRAL)


def unprefixed(line: str) -> str:
    """The line without launcher prefixes and surrounding whitespace."""
    match = PREFIX.match(line)
    return (line[match.end() :] if match else line).strip()


def take(runs: list[Run], current: Run | None, number: int, text: str) -> bool:
    """Read one line into the current run or a new one; False when it is not nccl-tests' (or adds nothing)."""
    if text.startswith("#"):
        return comment(runs, current, number, text.lstrip("#").strip())
    if text.startswith("nThread "):  # v1.0.0 printed the header line without "# "
        title(runs, current, number, "nthread", text)
        return True
    if text.startswith(("Out of bounds values", "Avg bus bandwidth")):
        return footer(runs, current, number, text)
    if current and not current.closed and FAILURE.match(text):
        current.failure = current.failure or text[:300]
        return True
    if text[:1].isascii() and text[:1].isdigit():
        row = parse_row(text, current.columns if current and not current.closed else None)
        if row is None:
            return False
        run = current if current and not current.closed else start(runs, number)
        run.rows.append(row)
        return True
    if current and not current.closed and current.nccl_version is None and (match := NCCL_VERSION.search(text)):
        current.nccl_version = match.group(1)
        return True
    return False


def comment(runs: list[Run], current: Run | None, number: int, body: str) -> bool:
    """A line that starts with "#": the header, device lines, the table's header, the footer."""
    if not body.startswith(COMMENTS):
        return False
    if body.startswith("nccl-tests version ") and (match := TOOL_VERSION.match(body)):
        run = title(runs, current, number, "version", body)
        run.version = match.group(1)
        if match.group(2):
            run.nccl_version = nccl_version_text(int(match.group(2)))
        return True
    if body.startswith("Collective test starting:"):
        title(runs, current, number, "start", body).collective = collective_name(body)
        return True
    if body.startswith("nThread "):
        title(runs, current, number, "nthread", body)
        return True
    if body.startswith("Using devices"):
        if not in_header(current):
            start(runs, number)
        return True
    if body.startswith("Rank ") and (match := DEVICE.match(body)):
        return device(runs, current, number, match)
    if body.startswith("out-of-place") and body.endswith("in-place"):
        run = current if in_header(current) else start(runs, number)
        run.table = True
        return True
    if body.startswith("size") and " count " in body:
        fits = current is not None and not current.closed and not current.rows and current.columns is None
        run = current if current and fits else start(runs, number)
        run.table, run.columns = True, body.split()
        return True
    if body.startswith(("Out of bounds values", "Avg bus bandwidth")):
        return footer(runs, current, number, body)
    if body.startswith("Collective test concluded:") and current and not current.concluded:
        current.concluded = True
        current.collective = current.collective or collective_name(body)
        return True
    return False


def title(runs: list[Run], current: Run | None, number: int, kind: str, text: str) -> Run:
    """A header line: part of the current run while that has shown only header lines of other kinds (or this
    very line again, as two processes print it), else the start of a new run. The run it is part of."""
    if current and in_header(current) and not current.devices and current.titles.get(kind, text) == text:
        current.titles[kind] = text
        return current
    run = start(runs, number)
    run.titles[kind] = text
    return run


def device(runs: list[Run], current: Run | None, number: int, match: re.Match[str]) -> bool:
    """ "#  Rank  0 Group  0 Pid 1623025 on host device  0 [0x1b] NVIDIA H100 80GB HBM3"; a rank already listed
    starts another run (each process of a build without MPI prints its own "Rank  0")."""
    rank, host, index, bus_id, name = match.groups()
    if len(rank) > 9 or len(index) > 9:
        return False
    listed = {d["rank"] for d in current.devices} if current else set()
    run = current if in_header(current) and int(rank) not in listed else start(runs, number)
    run.devices.append(
        {
            "rank": int(rank),
            "host": host,
            "device": int(index),
            "bus_id": bus_id.strip() or None,
            "name": name.strip() or None,
        }
    )
    return True


def footer(runs: list[Run], current: Run | None, number: int, body: str) -> bool:
    """ "Out of bounds values : 0 OK", "Avg bus bandwidth    : 123.4": the run's summary; the second ends it."""
    words = body.partition(":")[2].split()
    if body.startswith("Out of bounds"):
        if not words or not INT.fullmatch(words[0]):
            return False
        run = current if current and not current.closed else start(runs, number)
        if run.out_of_bounds is None:
            run.out_of_bounds = int(words[0])
        return True
    bandwidth = number_of(words[0]) if words else None
    if bandwidth is None:
        return False
    run = current if current and not current.closed else start(runs, number)
    run.avg_busbw, run.closed = bandwidth, True
    return True


def start(runs: list[Run], number: int) -> Run:
    runs.append(Run(first=number, last=number))
    return runs[-1]


def parse_row(text: str, columns: list[str] | None) -> dict[str, Any] | None:
    """One table row: size, count, type, then redop and root where the format prints them, then the
    out-of-place and in-place sides; None for anything else (a cut row, a line of other numbers)."""
    tokens = TAG.sub(" ", text).split()
    if len(tokens) >= 2 and DATE.fullmatch(tokens[-2]) and CLOCK.fullmatch(tokens[-1]):
        tokens = tokens[:-2]  # -S 1: the timestamp column
    if len(tokens) < 11 or not (INT.fullmatch(tokens[0]) and INT.fullmatch(tokens[1])):
        return None
    if not TYPE.fullmatch(tokens[2]) or tokens[0].startswith("-") or tokens[1].startswith("-"):
        return None
    rest = tokens[3:]
    redop = rest.pop(0) if rest and TYPE.fullmatch(rest[0]) and rest[0] != "nan" else None
    root = None
    if len(rest) in (9, 17):
        if not INT.fullmatch(rest[0]):
            return None
        root = int(rest.pop(0))
    if len(rest) not in (8, 16):
        return None
    width = len(rest) // 2
    old = "error" in columns if columns else None
    out_of_place, in_place = side(rest[:width], old), side(rest[width:], old)
    if out_of_place is None or in_place is None:
        return None
    return {
        "bytes": int(tokens[0]),
        "count": int(tokens[1]),
        "type": tokens[2],
        "redop": redop,
        "root": root,
        "out_of_place": out_of_place,
        "in_place": in_place,
    }


def side(tokens: list[str], old: bool | None) -> dict[str, Any] | None:
    """time, algbw, busbw and #wrong ("N/A" without validation) or, before v2.13, the float "error"; the
    per-iteration columns of -I 1 that follow are not kept. `old` None: the table's header was not seen."""
    values = [number_of(token) for token in tokens[:3]]
    if any(value is None for value in values):
        return None
    time_us, algbw, busbw = values
    result: dict[str, Any] = {"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": None}
    last = tokens[3]
    if last == "N/A":
        if old:
            result["error"] = None
        return result
    if INT.fullmatch(last) and not old:
        result["wrong"] = int(last)
        return result
    value = number_of(last)
    if value is None:
        return None
    if old is False:  # "%6g" of a large count: "1.23457e+06"
        result["wrong"] = int(value)
    else:
        result["error"] = value
    return result


def number_of(token: str) -> float | None:
    """A finite number as printed, or None."""
    if len(token) > 40 or not FLOAT.fullmatch(token):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def collective_name(text: str) -> str | None:
    """ "all_reduce_perf", "./build/all_gather_perf_mpi" -> "all_reduce", "all_gather"."""
    match = PROGRAM.search(text)
    return match.group(1) if match else None


def command_line(run: Run, lines: list[int], previous: int) -> int | None:
    """Which of the program's mentions (their line numbers `lines`, ascending) is the run's: the last between
    the previous run and this one (its command line), else one inside it."""
    first = bisect.bisect_left(lines, run.first)
    if first > 0 and lines[first - 1] > previous:
        return first - 1
    if first < len(lines) and lines[first] <= run.last:
        return first
    return None


def settings(line: str) -> dict[str, str]:
    """NCCL's settings on a command line: `-x NCCL_IB_DISABLE=1` (Open MPI), `NCCL_ALGO=Ring ./all_reduce_perf`,
    `--export=ALL,NCCL_DEBUG=INFO` (srun)."""
    return {name: value for name, value in SETTING.findall(line) if nccl_reads(value)}


def nccl_reads(value: str) -> bool:
    """A setting's value as NCCL takes one: printable ASCII. NCCL reads a number with strtoll, which stops at the
    first character that is not an ASCII digit: `NCCL_IB_DISABLE=²` or `=１` is no number to NCCL, so no setting
    gpudoctor reads either (int() refuses "²" and reads "１" as 1)."""
    return value.isascii() and value.isprintable()


def run_dict(run: Run, collective: str | None, env: dict[str, str]) -> dict[str, Any]:
    """The fact recorded per run (the judges read exactly these keys)."""
    ranks = max(d["rank"] for d in run.devices) + 1 if run.devices else None
    return shaped(
        line=run.first + 1,
        form="text",
        collective=collective,
        ranks=ranks,
        devices=run.devices,
        rows=run.rows,
        avg_busbw=run.avg_busbw,
        out_of_bounds=run.out_of_bounds,
        version=run.version,
        nccl_version=run.nccl_version,
        env=env,
        failure=run.failure,
    )


def shaped(
    line: int,
    form: str,
    collective: str | None,
    ranks: int | None,
    devices: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    avg_busbw: float | None,
    out_of_bounds: int | None,
    version: str | None,
    nccl_version: str | None,
    env: dict[str, str],
    failure: str | None = None,
) -> dict[str, Any]:
    """`ranks` is the GPUs in the run: the device list's length, or the highest rank listed + 1 where an excerpt
    shows only the last lines of it. `max_bytes` is the largest size measured."""
    hosts = list(dict.fromkeys(d["host"] for d in devices))
    return {
        "line": line,
        "format": form,
        "collective": collective,
        "ranks": ranks,
        "hosts": hosts,
        "devices": devices,
        "rows": rows,
        "avg_busbw": avg_busbw,
        "out_of_bounds": out_of_bounds,
        "version": version,
        "nccl_version": nccl_version,
        "env": env,
        "max_bytes": max((row["bytes"] for row in rows), default=None),
        "failure": failure,
    }


def nccl_version_text(code: int) -> str | None:
    """NCCL_VERSION_CODE / ncclGetVersion: 22105 -> "2.21.5" (2.9 on: X*10000+Y*100+Z), 2804 -> "2.8.4"."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    if 1000 <= code < 10000:
        return f"{code // 1000}.{code // 100 % 10}.{code % 100}"
    return None


# ---------------------------------------------------------------------------------------------------- JSON


def json_documents(found: Found) -> tuple[bool, list[tuple[int, dict[str, Any]]]]:
    """nccl-tests' JSON objects and whether one is the whole text: the whole text as one (pretty-printed by jq
    or not), else each line that is one (the writer puts the whole file on one line). Other JSON is not
    nccl-tests' and is left alone."""
    stripped = found.text.strip()
    if stripped.startswith("{") and (document := loaded(stripped)) is not None:
        first = next((n for n, line in enumerate(found.lines) if line.strip()), 0)
        return True, [(first, document)]
    documents = []
    for number in found.holding(('"results"',)):
        candidate = unprefixed(found.lines[number])
        if candidate.startswith("{") and (document := loaded(candidate)) is not None:
            documents.append((number, document))
    return False, documents


def loaded(text: str) -> dict[str, Any] | None:
    """The object if it is nccl-tests' (a "results" list beside its config or summary), else None."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        return None
    if not any(key in document for key in ("config", *SUMMARY, "out_of_bounds", "nccl_version")):
        return None
    return document


def from_json(document: dict[str, Any], line0: int) -> dict[str, Any]:
    """The run a `-J` file describes, in the same shape as a text run's."""
    config = document.get("config") if isinstance(document.get("config"), dict) else {}
    devices = [d for d in map(json_device, listed(config.get("devices"))) if d]
    rows = [r for r in map(json_row, listed(document.get("results"))) if r]
    args = [a for a in listed(document.get("args")) if isinstance(a, str)]
    env = {}
    for item in listed(document.get("env")):
        name, equals, value = item.partition("=") if isinstance(item, str) else ("", "", "")
        if equals and name.startswith("NCCL_") and nccl_reads(value):
            env[name] = value
    code = document.get("nccl_version")
    summary = next((document[key] for key in SUMMARY if isinstance(document.get(key), dict)), None)
    bounds = document.get("out_of_bounds")
    return shaped(
        line=line0 + 1,
        form="json",
        collective=collective_name(args[0]) if args else None,
        ranks=len(devices) if devices else None,
        devices=devices,
        rows=rows,
        avg_busbw=json_number(summary.get("bandwidth", summary.get("bandwidith"))) if summary else None,
        out_of_bounds=json_int(bounds.get("count")) if isinstance(bounds, dict) else None,
        version=None,
        nccl_version=nccl_version_text(code) if json_int(code) is not None else None,
        env=env,
    )


def json_device(item: Any) -> dict[str, Any] | None:
    """config.devices[i]: {"rank", "group", "pid", "hostname", "device", "device_hex", "device_info"}."""
    if not isinstance(item, dict) or json_int(item.get("rank")) is None or not isinstance(item.get("hostname"), str):
        return None
    return {
        "rank": item["rank"],
        "host": item["hostname"],
        "device": json_int(item.get("device")),
        "bus_id": item.get("device_hex") if isinstance(item.get("device_hex"), str) else None,
        "name": item.get("device_info") if isinstance(item.get("device_info"), str) else None,
    }


def json_row(item: Any) -> dict[str, Any] | None:
    """results[i]; "root" is the text "%6i" printed ("    -1"). A row without its size, count and type is none."""
    if not isinstance(item, dict) or json_int(item.get("size")) is None or json_int(item.get("count")) is None:
        return None
    if not isinstance(item.get("type"), str):
        return None
    root = item.get("root")
    if isinstance(root, str) and INT.fullmatch(root.strip()):
        root = int(root.strip())
    return {
        "bytes": item["size"],
        "count": item["count"],
        "type": item["type"],
        "redop": item.get("redop") if isinstance(item.get("redop"), str) else None,
        "root": root if isinstance(root, int) and not isinstance(root, bool) else None,
        "out_of_place": json_side(item.get("out_of_place")),
        "in_place": json_side(item.get("in_place")),
    }


def json_side(item: Any) -> dict[str, Any] | None:
    """{"time" (or "cpu_time" with -C), "alg_bw", "bus_bw", "nwrong"}; a double, or "nan" written as a string."""
    if not isinstance(item, dict):
        return None
    values = [json_number(item.get(key)) for key in ("time" if "time" in item else "cpu_time", "alg_bw", "bus_bw")]
    if any(value is None for value in values):
        return None
    wrong = json_number(item.get("nwrong"))
    return {
        "time_us": values[0],
        "algbw": values[1],
        "busbw": values[2],
        "wrong": int(wrong) if wrong is not None else None,
    }


def json_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def json_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
