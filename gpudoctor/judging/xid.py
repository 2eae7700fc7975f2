"""NVIDIA's Xid catalogue for Ampere and newer (gpudoctor/data/xid.toml, with its source): what each Xid means, the
action its resolution bucket asks of the operator and how gpudoctor grades that bucket, Xid 154's own verdict on
the node, and the Xids that are a fault in a program's own GPU work with the process their lines name.

Pure: it reads the entries the kernel log gives (`system.kernel_log.xids`, counted by facts/system.py whether the
log was read on the node or pasted) and imports no check; health.xid grades a kernel log's Xids by it."""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.judging.hardware import load_data
from gpudoctor.model import Status

# What a catalogue bucket or an Xid 154 verdict asks of the operator, as one of health.xid's actions.
ACTION_OF = {
    "RESET_GPU": "RESET_GPU",
    "WORKFLOW_XID_48": "RESET_GPU",
    "WORKFLOW_NVLINK_ERR": "RESET_GPU",
    "GPU Reset Required": "RESET_GPU",
    "Drain and Reset": "RESET_GPU",
    "RESTART_BM": "RESTART_BM",
    "Node Reboot Required": "RESTART_BM",
    "RESTART_VM": "RESTART_VM",
}
RECOVERY_PATTERN = re.compile(r"to 0x[0-9a-fA-F]+ \(([^)]+)\)")
NVLINK5_XIDS = range(144, 151)
# The catalogue's Xids of a fault in an application's own GPU work (13 graphics engine exception, 31 GPU memory page
# fault: "usually an application error"). Where the kernel line names the process ("pid=1234, name=python, ..."),
# it is that program's bug unless another Xid on the GPU says the hardware failed. Xid 43, the driver stopping the
# faulting channel, names the process too where the fault's own lines say pid='<unknown>'.
PROGRAM_XIDS = (13, 31)
NAMING_XIDS = (13, 31, 43)
NAMED_PROCESS = re.compile(r"pid=(\d{1,10}), name=([^<,][^,]{0,15}),")  # the kernel's comm: 15 characters


def catalogue() -> dict[str, Any]:
    return load_data("xid.toml")


def grade(
    code: int, event: dict[str, Any], gpu: dict[str, Any], mine: dict[int, list[dict[str, Any]]]
) -> tuple[Status, str, str | None]:
    """(status, text, action) for one Xid on one GPU: `event` is that code's entries merged, `mine` all of the
    GPU's entries by code."""
    entry = catalogue()["xid"].get(str(code))
    seen = times_seen(event)
    if entry is None:
        return Status.WARN, f"Xid {code} (not in NVIDIA's catalogue for Ampere and newer){seen}", None
    _, description, immediate, investigatory = entry
    if code == 154:
        verdict = recovery_action(event["last_line"])
        status = Status(catalogue()["recovery_action"].get(verdict, "warn"))
        return status, f"Xid 154 (the driver's verdict: {verdict}){seen}", ACTION_OF.get(verdict)
    if code == 155 and not _corroborated(gpu, mine):
        return Status.WARN, f"Xid 155 ({description}; no other sign of a link fault){seen}", None
    status = grade_bucket(immediate, investigatory)
    action = ACTION_OF.get(immediate)
    words = catalogue()["bucket_text"].get(immediate, immediate)
    note = "" if status == Status.PASS else f": {words}" if immediate else ": no action in the catalogue"
    if code in NVLINK5_XIDS:
        note = ": severity is in its subcode; Xid 154 carries the driver's verdict"
    return status, f"Xid {code} ({description}{note}){seen}", action if status == Status.FAIL else None


def grade_bucket(immediate: str, investigatory: str) -> Status:
    grade = catalogue()["grade"]
    if immediate in grade["fail"]:
        return Status.FAIL
    if immediate == "IGNORE":
        return Status.PASS if investigatory.startswith("IGNORE") else Status.WARN
    return Status.WARN


def recovery_action(line: str) -> str:
    """The action an Xid 154 line changes to: "... from 0x0 (None) to 0x2 (Node Reboot Required)"."""
    match = RECOVERY_PATTERN.search(line)
    return match.group(1) if match else "unreadable"


def _corroborated(gpu: dict[str, Any], mine: dict[int, list[dict[str, Any]]]) -> bool:
    """Xid 155 marks a link down the driver calls intentional; it matters only beside a down NVLink or the
    driver's own reset or reboot verdict."""
    link_down = any(not link["active"] for link in gpu.get("nvlinks") or [])
    verdict = recovery_action(merge(mine[154])["last_line"]) if 154 in mine else "None"
    return link_down or catalogue()["recovery_action"].get(verdict) == "fail"


def culprit(mine: dict[int, list[dict[str, Any]]]) -> str | None:
    """`python (pid 1234)`: the process a GPU's program-fault Xids (PROGRAM_XIDS) name, where their lines or the
    Xid 43 that stopped its channel name one; None where none does (drivers before R470 print no name)."""
    if not any(code in mine for code in PROGRAM_XIDS):
        return None
    for code in NAMING_XIDS:
        for event in mine.get(code, []):
            for line in (event.get("first_line"), event.get("last_line"), event.get("line")):
                if match := NAMED_PROCESS.search(line or ""):
                    return f"{match.group(2)} (pid {match.group(1)})"
    return None


def merge(events: list[dict[str, Any]]) -> dict[str, Any]:
    """One code's entries (snapshots from before floods were counted hold one per line) as one."""
    first, last = events[0], events[-1]
    return {
        "count": sum(e.get("count", 1) for e in events),
        "first_time": first.get("first_time"),
        "last_time": last.get("last_time"),
        "last_line": last.get("last_line") or last.get("line", ""),
    }


def times_seen(event: dict[str, Any]) -> str:
    """ " x12, <first> to <last>" for an event seen more than once (an Xid's or an SXid's entry); "" for one."""
    if event["count"] <= 1:
        return ""
    span = f", {event['first_time']} to {event['last_time']}" if event.get("first_time") else ""
    return f" x{event['count']}{span}"
