"""The node's facts, gathered once into one JSON-serialisable snapshot; saved, loaded and replayed.

Only the sources the selected checks need are gathered. torch's import is the slow part, so when it is
needed it starts first in its own process and is read last, while NVML and system facts are gathered here.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.errors import InputError
from gpudoctor.facts.schema import SCHEMA, SCHEMA_VERSION, SOURCES
from gpudoctor.files import MAX_INPUT_BYTES, decode

SECTIONS = {"nvml": dict, "torch": dict, "system": dict, "nvml_calls": dict}


class SnapshotError(InputError):
    """A snapshot file that is corrupt, foreign or from a newer gpudoctor."""


def gather(
    sources: Iterable[str] = SOURCES,
    torch_proc: subprocess.Popen[str] | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """The node's facts from the named sources only (a health probe needs no torch: it is never imported);
    a source not gathered is an empty section. `torch_proc` is a torch gateway the caller started early: used
    if torch is wanted, else ended. `meanwhile` is the caller's work that needs no facts, done while torch is
    still importing in the gateway, once the other sources are read."""
    from gpudoctor.facts import nvml, system, torchinfo

    wanted = set(sources)
    started = time.monotonic()
    if torch_proc is not None and "torch" not in wanted:
        torchinfo.end(torch_proc)
        torch_proc = None
    if torch_proc is None and "torch" in wanted:
        torch_proc = torchinfo.start()
    nvcc_proc = system.start_nvcc() if "nvcc" in wanted else None
    own = frozenset(p.pid for p in (torch_proc, nvcc_proc) if p is not None) | {os.getpid()}
    nvml_facts, recording = nvml.gather_live(own) if "nvml" in wanted else ({}, {})
    system_facts = system.gather() if "system" in wanted else {}
    if "kernel_log" in wanted:
        system_facts["kernel_log"] = system.read_kernel_log()
    if "nvcc" in wanted:
        system_facts["nvcc"] = system.collect_nvcc(nvcc_proc)
    if "system" in wanted and nvml_facts:
        system_facts.update(system.gpu_context(nvml_facts["gpus"]))
    if meanwhile is not None and torch_proc is not None:
        meanwhile()
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sources": sorted(wanted),
        "nvml": nvml_facts,
        "nvml_calls": recording,
        "torch": torchinfo.collect(torch_proc) if torch_proc is not None else {},
        "system": system_facts,
        "gather_s": round(time.monotonic() - started, 3),
    }


def dumps(snapshot: dict[str, Any]) -> str:
    return json.dumps(snapshot, indent=1, sort_keys=True) + "\n"


def gunzipped(data: bytes, path: Path | str) -> bytes:
    """`data`, or what it holds where it is gzip (an nvidia-bug-report.log.gz), read up to the input limit."""
    if not data.startswith(b"\x1f\x8b"):
        return data
    import gzip
    import zlib

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as inner:
            text = inner.read(MAX_INPUT_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise SnapshotError(f"{path} is gzip that does not open ({exc})") from None
    if len(text) > MAX_INPUT_BYTES:
        raise SnapshotError(f"{path} holds more than {MAX_INPUT_BYTES // 2**20} MB once unpacked: not read")
    return text


def content_kind(data: bytes) -> str | None:
    """ "capture" (XML), "snapshot" (JSON, or an empty file: the JSON reader names the problem), or None for
    anything else. Told from the first bytes."""
    from gpudoctor.facts.nvsmi_xml import text_head

    head = decode(data[:512]) or text_head(data[:64])  # a multi-byte character cut at 512 bytes: the BOM way
    start = head.lstrip("\ufeff \t\r\n")[:1]
    return {"<": "capture", "{": "snapshot", "[": "snapshot", "": "snapshot"}.get(start)


def capture_from(path: Path, data: bytes) -> dict[str, Any]:
    """An `nvidia-smi -q -x` capture's bytes as a snapshot of NVML facts (the other sources it cannot hold)."""
    from gpudoctor.facts import nvsmi_xml

    try:
        return nvsmi_xml.to_snapshot(path, data)
    except nvsmi_xml.CaptureError as exc:
        raise SnapshotError(str(exc)) from None


def upgrade(data: dict[str, Any], name: str = "snapshot") -> dict[str, Any]:
    """Older snapshots into today's facts: version 1 held NVML enums as numbers, versions 1 and 2 NVML's
    NVLink version code as if it were the generation. Recorded calls replay through today's gateway; without
    them, the NVLink codes are decoded in place. Facts that cannot be read so are a SnapshotError."""
    try:
        return _upgraded(data)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        version = data["schema_version"]
        raise SnapshotError(
            f"{name}: its schema {version} facts cannot be read ({type(exc).__name__}: {exc})"
        ) from None


def _upgraded(data: dict[str, Any]) -> dict[str, Any]:
    if data["schema_version"] < SCHEMA_VERSION and data["nvml_calls"]:
        data["nvml"] = replay_nvml(data)
    elif data["schema_version"] < 3:
        from gpudoctor.facts.nvml import nvlink_generation_of_code

        for gpu in (data["nvml"] or {}).get("gpus") or []:
            for link in gpu.get("nvlinks") or []:
                link["version"] = nvlink_generation_of_code(link.get("version"))
    data["schema_version"] = SCHEMA_VERSION
    return data


def validate(data: Any, name: str) -> None:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise SnapshotError(f'{name} is not a gpudoctor snapshot (no "schema": "{SCHEMA}")')
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        raise SnapshotError(f"{name} has snapshot schema_version {version!r}; this gpudoctor reads 1..{SCHEMA_VERSION}")
    for section, kind in SECTIONS.items():
        if not isinstance(data.get(section), kind):
            raise SnapshotError(f'{name}: section "{section}" is missing or not an object')
    if data["nvml"] and not isinstance(data["nvml"].get("gpus"), list):
        raise SnapshotError(f"{name}: nvml.gpus is missing or not a list")


def replay_nvml(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Derive the NVML facts again from the snapshot's recorded calls, through the real gateway."""
    from gpudoctor.facts.fake import ReplayNvml
    from gpudoctor.facts.nvml import Gateway

    return Gateway(ReplayNvml(snapshot["nvml_calls"])).gather()
