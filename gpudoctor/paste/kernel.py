"""Kernel logs as users paste them (`dmesg`, `dmesg -T`, `dmesg --time-format iso`, `journalctl -k`,
/var/log/kern.log or syslog, `cat /proc/driver/nvidia/version`, `lspci -k`): the facts a live node's
kernel log and /proc give, in the same shapes (gpudoctor/facts/system.py).

- `system.kernel_log`: Xid (GPU) and SXid (NVSwitch) events, one entry per device and code with its count,
  first and last time and line, as `system.read_kernel_log` gives them (health.xid grades them by NVIDIA's Xid
  catalogue, gpudoctor/judging/xid.py);
- `system.nvidia_module_version`: the NVRM load banner or /proc/driver/nvidia/version, and the kernel
  module's side of an "NVRM: API mismatch";
- `nvml.driver_version`: the user-space side of an API mismatch (the version every NVIDIA driver component
  but the loaded module has), so driver.kernel-module compares the two as on a live node;
- `system.kernel_modules`: ["nouveau"] where nouveau is bound to a GPU (driver.kernel-module fails on it).

Message formats: NVIDIA/open-gpu-kernel-modules (kernel_rc.c for Xid, osapi.c for the API mismatch, nv.c for
the banner, nvswitch_event.h for SXid); the eras and wrappers seen in real logs are in
tests/fixtures/pastes/kernel/FORMATS.md. Error messages with a known cause are signatures
(data/signatures/kernel.toml), matched by the signature engine."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.facts.system import count_event, match_event
from gpudoctor.paste.found import Found

READER = "kernel log"
SOURCE = "pasted kernel log"  # system.kernel_log.source: what health.xid says it read

# "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.54.03 ..." (nv.c) and "NVRM version: NVIDIA UNIX Open
# Kernel Module for x86_64  565.57.01 ..." (/proc/driver/nvidia/version); the version as system.py reads it.
BANNER = re.compile(
    r"NVRM(?:: loading| version:) NVIDIA UNIX .{0,60}?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)"
)
# osapi.c up to R570: "the client has the version %s, but / this kernel module has the version %s."; from
# R575: "the client '%s' (pid %u) / has the version %s, but this kernel module has / the version %s."
MISMATCH = re.compile(
    r"API mismatch: the client (?:'.{0,100}?' \(pid \d+\) )?has the version (\d+(?:\.\d+)+), but "
    r"this kernel module has the version (\d+(?:\.\d+)+)"
)
MISMATCH_LINES = 5  # continuation lines of the message after its first
# nouveau bound to a device: its probe lines ("nouveau 0000:01:00.0: ...", the old "nouveau  [   VBIOS][0000:
# 01:00.0] ..."), drm's "[drm] Initialized nouveau ...", lspci -k's "Kernel driver in use: nouveau". A
# blacklist line or "Kernel modules: nouveau, nvidia" (modules that could drive it) is not a binding.
NOUVEAU = re.compile(
    r"(?:^|[\s\]:])nouveau(?: [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d: | +\[ *\w+\]\[[0-9a-fA-F:.]+\] )"
    r"|\[drm\] Initialized nouveau |Kernel driver in use: nouveau"
)
MONTHS = {
    m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)
}
ISO_TIME = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)")
CTIME = re.compile(r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (\w{3}) +(\d{1,2}) (\d\d:\d\d:\d\d) (\d{4})\]")
SYSLOG_TIME = re.compile(r"^(\w{3} +\d{1,2} \d\d:\d\d:\d\d) ")
EVENT_STARTS = ("NVRM: Xid", "SXid")


@dataclass
class KernelLog:
    """What one pass over the lines gathered before it is recorded."""

    first: int | None = None  # the first line that is a kernel message about the driver
    xids: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    sxids: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    nouveau: int | None = None

    def saw(self, number: int) -> None:
        if self.first is None:
            self.first = number


def read(found: Found) -> None:
    """Every kernel-log line about NVIDIA's driver, nouveau and NVSwitch; nothing from other lines."""
    log = KernelLog()
    for number in found.holding(("NVRM", "Xid", "nouveau")):
        read_line(found, log, number, found.lines[number])
    record(found, log)


def read_line(found: Found, log: KernelLog, number: int, line: str) -> None:
    if "Xid" in line and event(log, line):
        log.saw(number)
        return
    if "NVRM" in line:
        nvrm_line(found, log, number, line)
    if "nouveau" in line and log.nouveau is None and NOUVEAU.search(line):
        log.nouveau = number
        if "Kernel driver in use" not in line:
            log.saw(number)


def nvrm_line(found: Found, log: KernelLog, number: int, line: str) -> None:
    """The banner, an API mismatch; any NVRM message makes the paste a kernel log."""
    if "NVRM version:" not in line:
        log.saw(number)
    if "NVIDIA UNIX" in line and (match := BANNER.search(line)):
        found.fact("system.nvidia_module_version", match.group(1), READER, number)
    elif "API mismatch" in line:
        api_mismatch(found, number)


def api_mismatch(found: Found, number: int) -> None:
    """ "NVRM: API mismatch" over its continuation lines (each with its own "NVRM: ", indented, or joined by
    rsyslog's "#012"): the module's version and the version of the driver's user-space components."""
    text = message(found.lines[number])
    for following in found.lines[number + 1 : number + 1 + MISMATCH_LINES]:
        if "NVRM" not in following or "API mismatch" in following:
            break
        text += " " + message(following)
    match = MISMATCH.search(" ".join(text.split()))
    if match:
        found.fact("system.nvidia_module_version", match.group(2), READER, number)
        found.fact("nvml.driver_version", match.group(1), READER, number)


def message(line: str) -> str:
    """The text of an NVRM message line without its log prefix, continuation markers joined."""
    start = line.find("NVRM:")
    text = line[start + 5 :] if start >= 0 else line
    return text.replace("#012NVRM:", " ").replace("#012", " ")


def event(log: KernelLog, line: str) -> bool:
    """An Xid or SXid line counted into its device and code's entry, as the live reader counts them; False
    where the line is neither."""
    hit = match_event(line)
    if hit is None:
        return False
    kind, pci, code, fields = hit
    count_event(getattr(log, kind), line, pci, code, fields, when(line))
    return True


def when(line: str) -> str | None:
    """The wall-clock time in a line's log prefix: ISO (2025-01-21T04:41:44) from an ISO stamp or dmesg -T's
    "[Sun Feb 23 16:24:18 2025]"; syslog's "Aug 26 14:08:07" (no year) as written; None for seconds since
    boot or no stamp."""
    starts = [i for i in (line.find(s) for s in EVENT_STARTS) if i >= 0]
    prefix = line[: min(starts)] if starts else line
    if match := ISO_TIME.search(prefix):
        return f"{match.group(1)}T{match.group(2)}"
    if (match := CTIME.search(prefix)) and match.group(1) in MONTHS:
        month, day, clock, year = match.groups()
        return f"{year}-{MONTHS[month]:02d}-{int(day):02d}T{clock}"
    if (match := SYSLOG_TIME.match(prefix.lstrip())) and match.group(1)[:3] in MONTHS:
        return " ".join(match.group(1).split())
    return None


def record(found: Found, log: KernelLog) -> None:
    if log.nouveau is not None:
        found.fact("system.kernel_modules", ["nouveau"], READER, log.nouveau)
    if log.first is None:
        return
    kernel_log = {
        "readable": True,
        "reason": None,
        "source": SOURCE,
        "xids": list(log.xids.values()),
        "sxids": list(log.sxids.values()),
    }
    found.fact("system.kernel_log", kernel_log, READER, log.first)
