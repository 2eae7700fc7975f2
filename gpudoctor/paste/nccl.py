"""NCCL_DEBUG=INFO/WARN logs as users paste them: with NCCL's "host:pid:tid [dev] NCCL INFO " prefixes, the
timestamp 2.26+ puts before WARN lines, launcher prefixes (pdsh's "10.0.0.1: ", torchrun's "[rank0]: "),
CloudWatch's timestamp lines between them, or with the prefixes stripped by the user.

What it records:
- `nccl.version` and `nccl.cuda` ("NCCL version 2.18.1+cuda12.1"), and `torch.nccl.version` unless the log
  shows that another program carries the NCCL (nccl-tests' header, TensorFlow's bundled build);
- `nvml.cuda_driver_version` ("cudaDriverVersion 12020", an int as NVML gives it);
- `nccl.net` (the network NCCL chose: "IB", "Socket", a plugin's name), `nccl.interfaces` (the socket
  interfaces used for bootstrap, NET/Socket and IB's out-of-band channel), `nccl.ib_devices` ("mlx5_0:1/IB"),
  `nccl.transports` (sorted, e.g. ["NET/IB/GDRDMA", "P2P/IPC", "SHM"]), `nccl.nvls` (multicast available),
  `nccl.ranks` (the largest nranks of the communicators it shows), `nccl.warnings` (each distinct WARN text);
- `system.env.NCCL_*` from "NCCL_X set by environment to V" (NCCL prints what it read; integer parameters
  as it parsed them).

Formats: NVIDIA/nccl src/debug.cc (prefixes), src/init.cc (version, "Using network"), src/misc/cudawrap.cc
(cudaDriverVersion), src/bootstrap.cc, src/transport/net_socket.cc and net_ib (interfaces), src/transport/
p2p.cc, shm.cc, net.cc, coll_net.cc (channels), src/transport/nvls.cc, src/misc/param.cc and socket.cc (the
environment), by release in tests/fixtures/pastes/nccl/FORMATS.md. WARN lines with a known cause are
signatures (data/signatures/nccl.toml), matched by the signature engine."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpudoctor.paste.found import QUOTED, Found

READER = "NCCL log"
MAX_WARNINGS = 100  # distinct WARN texts kept; a flood repeats a few

VERSION = re.compile(r"(?:^|[\s:\]>])NCCL version (\d+\.\d+\.\d+)[^+\s]*\+cuda(\S+)")
CUDA = re.compile(r"\d+\.\d+")
# "[0]eth0:10.0.0.1<0>" (bootstrap.cc and net_socket.cc up to 2.7), "eth0:10.0.0.1<0>" (later), IPv6 too.
# A name of at most 15 characters (the kernel's IFNAMSIZ, 16 with its NUL) and an address of at most 64 (IPv6
# with a zone): unbounded, both rescanned the rest of a long line from every start, in quadratic time.
INTERFACE = re.compile(r"(?:\[\d+\])?([^\s:\[\]<>]{1,15}):[^\s<]{1,64}<\d+>")
USING = re.compile(r"(?:Bootstrap|NET/Socket) ?: Using(.*)")
IB_USING = re.compile(r"NET/IB ?: Using(.*?)(?:; OOB (.*))?$")
IB_DEVICE = re.compile(r"\[\d+\]([^\s:\[\]]+):(\d+)/(\S+)")
ENV = re.compile(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.+)")
NRANKS = re.compile(r"\bnranks (\d+)\b")
TIMESTAMP = re.compile(r"\[\d{4}-\d\d-\d\d[ T][\d:.,]+\]\s*")
# Lines whose "host:pid:tid [dev] NCCL INFO " prefix the user removed start with one of these.
BARE = (
    "Bootstrap",
    "NET/",
    "Using network ",
    "cudaDriverVersion ",
    "Channel ",
    "CollNet ",
    "Ring ",
    "NVLS multicast support is ",
    "NCCL_",
    "comm 0x",
    "ncclCommInitRank",
)
CHANNELS = ("Channel ", "CollNet ", "Ring ")
# The NCCL of nccl-tests or of TensorFlow's bundled build is not torch's: nccl-tests' header (src/util.cu
# "# nThread %d nGpus %d ...", "# Using devices", "#  Rank %2d Group %2d Pid %6d on %10s device %2d ..."; before
# groups "#   Rank %2d Pid %6d on %10s device %2d ..."), TensorFlow's bazel paths and unexpanded version macros.
OTHER_PROGRAM = ("# nThread ", "# Using devices", "nccl_archive", "+cudaCUDA_MAJOR")
NCCL_TESTS_RANK = re.compile(r"#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s")


@dataclass
class NcclLog:
    """What is recorded once the whole log is read: lists, the largest communicator, whose NCCL it is."""

    interfaces: dict[str, int] = field(default_factory=dict)  # name -> first line
    ib_devices: dict[str, int] = field(default_factory=dict)
    transports: dict[str, int] = field(default_factory=dict)
    warnings: set[str] = field(default_factory=set)
    ranks: tuple[int, int] | None = None  # (nranks, line)
    version: tuple[str, int] | None = None
    other_program: bool = False


def read(found: Found) -> None:
    """Every NCCL log line; nothing from lines that are not NCCL's."""
    log = NcclLog()
    for number in found.holding(("NCCL", "nccl", "Pid", *OTHER_PROGRAM, *BARE)):
        line = found.lines[number]
        if "NCCL" in line or "nccl" in line or "# " in line:
            read_line(found, log, number, line)
        elif line.lstrip(" \t>").startswith(BARE):
            message(found, log, number, bare(line), prefixed=False)
    record(found, log)


def read_line(found: Found, log: NcclLog, number: int, line: str) -> None:
    if any(marker in line for marker in OTHER_PROGRAM) or ("Pid" in line and NCCL_TESTS_RANK.search(line)):
        log.other_program = True
    if "NCCL version " in line and (match := VERSION.search(line)):
        version(found, log, number, match)
        return
    start = line.find("NCCL INFO ")
    if start >= 0:
        message(found, log, number, line[start + 10 :].strip())
        return
    start = line.find("NCCL WARN ")
    if start >= 0:
        warning(found, log, number, line[start + 10 :].strip())
        return
    if line.lstrip(" \t>").startswith(BARE):
        message(found, log, number, bare(line), prefixed=False)


def bare(line: str) -> str:
    """A line without NCCL's prefix: its text without a quote marker or a leading timestamp."""
    text = line.strip().lstrip("> \t")
    return TIMESTAMP.sub("", text, count=1) if text.startswith("[") else text


def version(found: Found, log: NcclLog, number: int, match: re.Match[str]) -> None:
    """VERSION_STRING (src/init.cc): "NCCL version 2.18.1+cuda12.1"; a build that left the CUDA macros
    unexpanded ("+cudaCUDA_MAJOR.CUDA_MINOR") says no CUDA version."""
    found.fact("nccl.version", match.group(1), READER, number)
    if CUDA.fullmatch(match.group(2)):
        found.fact("nccl.cuda", match.group(2), READER, number)
    if log.version is None:
        log.version = (match.group(1), number)


def message(found: Found, log: NcclLog, number: int, text: str, prefixed: bool = True) -> None:
    """One INFO message, prefix removed; without NCCL's prefix (`prefixed` False) a network name must be one
    word, as NCCL's own are ("IB", "Socket", "IBext_v8"), so prose that starts alike is not read."""
    if text.startswith("cudaDriverVersion "):
        value = text[18:].strip()
        if value.isascii() and value.isdigit():
            found.fact("nvml.cuda_driver_version", int(value), READER, number)
    elif text.startswith(("Bootstrap", "NET/Socket")):
        if match := USING.match(text):
            add(log.interfaces, INTERFACE.findall(match.group(1)), number)
    elif text.startswith("NET/IB"):
        infiniband(log, number, text)
    elif text.startswith("Using network "):
        name = text[14:].strip()
        if name and (prefixed or " " not in name):
            found.fact("nccl.net", name, READER, number)
    elif text.startswith(CHANNELS) and " via " in text:
        kind = transport(text[text.rfind(" via ") + 5 :])
        if kind:
            add(log.transports, [kind], number)
    elif text.startswith("NVLS multicast support is "):
        found.fact("nccl.nvls", not text[26:].startswith("not "), READER, number)
    elif text.startswith("NCCL_"):
        environment(found, number, text)
    elif "nranks " in text and (match := NRANKS.search(text)):
        ranks = int(match.group(1))
        if log.ranks is None or ranks > log.ranks[0]:
            log.ranks = (ranks, number)


def infiniband(log: NcclLog, number: int, text: str) -> None:
    """ "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/RoCE [RO]; OOB eth0:10.0.0.1<0>" (net_ib)."""
    match = IB_USING.match(text)
    if not match:
        return
    devices = [f"{name}:{port}/{layer}" for name, port, layer in IB_DEVICE.findall(match.group(1))]
    add(log.ib_devices, devices, number)
    if match.group(2):
        add(log.interfaces, INTERFACE.findall(match.group(2)), number)


def transport(via: str) -> str | None:
    """A channel's transport without device numbers or modes: "NET/IB/0/GDRDMA" -> "NET/IB/GDRDMA",
    "P2P/IPC/read" -> "P2P/IPC", "SHM/direct/direct" and "direct shared memory" -> "SHM"."""
    via = via.strip()
    parts = via.split("/")
    if parts[0] in ("NET", "COLLNET") and len(parts) > 1:
        return f"{parts[0]}/{parts[1]}{'/GDRDMA' if '/GDRDMA' in via else ''}"
    if parts[0] == "P2P" and len(parts) > 1:
        return f"P2P/{parts[1].partition('(')[0].strip()}"
    if parts[0] == "SHM" or via.startswith("direct shared memory"):
        return "SHM"
    return None


def environment(found: Found, number: int, text: str) -> None:
    """ "NCCL_SOCKET_IFNAME set by environment to eth0", "NCCL_IB_HCA set to mlx5_4", and param.cc's
    integers "NCCL_IB_DISABLE set by environment to 0." (the trailing period is the format's)."""
    match = ENV.fullmatch(text.strip())
    if not match:
        return
    value = match.group(2).strip()
    if value.endswith(".") and value.isascii() and value[:-1].lstrip("-").isdigit():
        value = value[:-1]
    found.fact(f"system.env.{match.group(1)}", value, READER, number)


def warning(found: Found, log: NcclLog, number: int, text: str) -> None:
    if not text or text in log.warnings or len(log.warnings) >= MAX_WARNINGS:
        return
    log.warnings.add(text)
    found.append("nccl.warnings", text[:QUOTED], READER, number)


def add(seen: dict[str, int], items: list[str], number: int) -> None:
    for item in items:
        seen.setdefault(item, number)


def record(found: Found, log: NcclLog) -> None:
    for path, seen in (
        ("nccl.interfaces", log.interfaces),
        ("nccl.ib_devices", log.ib_devices),
        ("nccl.transports", log.transports),
    ):
        if seen:
            found.fact(path, sorted(seen), READER, min(seen.values()))
    if log.ranks:
        found.fact("nccl.ranks", log.ranks[0], READER, log.ranks[1])
    if log.version and not log.other_program:
        found.fact("torch.nccl.version", log.version[0], READER, log.version[1])
