"""The node's facts, gathered once into one JSON-serialisable snapshot; saved, loaded and replayed.

torch's import is the slow part, so it starts first in its own process and is read last, while NVML
and system facts are gathered here.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.files import read_json

SCHEMA = "gpudoctor.snapshot"
SCHEMA_VERSION = 1
SECTIONS = {"nvml": dict, "torch": dict, "system": dict, "nvml_calls": dict}


class SnapshotError(ValueError):
    """A snapshot file that is corrupt, foreign or from a newer gpudoctor."""


def gather() -> dict[str, Any]:
    from gpudoctor.facts import nvml, system, torchinfo

    started = time.monotonic()
    torch_proc = torchinfo.start()
    nvcc_proc = system.start_nvcc()
    nvml_facts, recording = nvml.gather_live()
    system_facts = system.gather()
    system_facts["nvcc"] = system.collect_nvcc(nvcc_proc)
    pids = [p["pid"] for g in nvml_facts["gpus"] for p in g.get("processes") or []]
    system_facts["gpu_processes"] = system.describe_processes(pids)
    system_facts["gpu_numa_nodes"] = system.gpu_numa_nodes(
        [g["pci_bus_id"] for g in nvml_facts["gpus"] if g.get("pci_bus_id")]
    )
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "nvml": nvml_facts,
        "nvml_calls": recording,
        "torch": torchinfo.collect(torch_proc),
        "system": system_facts,
        "gather_s": round(time.monotonic() - started, 3),
    }


def dumps(snapshot: dict[str, Any]) -> str:
    return json.dumps(snapshot, indent=1, sort_keys=True) + "\n"


def load(path: Path) -> dict[str, Any]:
    data = read_json(path, "snapshot", SnapshotError)
    validate(data, str(path))
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
    if not isinstance(data["nvml"].get("gpus"), list):
        raise SnapshotError(f"{name}: nvml.gpus is missing or not a list")


def replay_nvml(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Derive the NVML facts again from the snapshot's recorded calls, through the real gateway."""
    from gpudoctor.facts.fake import ReplayNvml
    from gpudoctor.facts.nvml import Gateway

    return Gateway(ReplayNvml(snapshot["nvml_calls"])).gather()
