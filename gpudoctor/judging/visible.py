"""Which GPUs CUDA gives a process under CUDA_VISIBLE_DEVICES, read as CUDA reads it (pure).

The CUDA C++ Programming Guide ("CUDA Environment Variables", CUDA_VISIBLE_DEVICES): a comma-separated sequence
of device indexes or UUIDs; only the devices it names are visible, in its order, and where an entry is invalid
only the devices named before it are ("0,2,-1,1" shows devices 0 and 2). A UUID is given as nvidia-smi -L prints
it (GPU-..., MIG-...), and a unique prefix of it is enough. An empty value names no device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

INDEX = re.compile(r"\d{1,4}")


@dataclass(frozen=True)
class Visible:
    """What a CUDA_VISIBLE_DEVICES value shows: the NVML indexes of the GPUs CUDA will use (in its order), the
    entry at which CUDA stopped reading (None if every entry named a GPU), and whether an entry names a MIG
    device (whose GPU is not told here)."""

    shown: tuple[int, ...]
    invalid: str | None
    mig: bool = False


def visible(value: str, gpus: list[dict[str, Any]]) -> Visible:
    """The GPUs of `gpus` (NVML's facts: index, uuid, mig_mode) CUDA gives a process with this value."""
    shown: list[int] = []
    mig = False
    for raw in value.split(","):
        entry = raw.strip()
        index = _entry(entry, gpus)
        if entry.upper().startswith("MIG-") and index is None and _any_mig(gpus):
            mig = True
            continue
        if index is None or index in shown:
            return Visible(tuple(shown), entry, mig)
        shown.append(index)
    return Visible(tuple(shown), None, mig)


def _entry(entry: str, gpus: list[dict[str, Any]]) -> int | None:
    """The NVML index of the GPU an entry names (an index below the GPU count, or a unique UUID prefix)."""
    if INDEX.fullmatch(entry):
        number = int(entry)
        return number if number < len(gpus) else None
    if not entry.upper().startswith(("GPU-", "MIG-")) or len(entry) < 5:
        return None
    named = [g for g in gpus if str(g.get("uuid") or "").upper().startswith(entry.upper())]
    return named[0].get("index") if len(named) == 1 else None


def _any_mig(gpus: list[dict[str, Any]]) -> bool:
    return any((g.get("mig_mode") or {}).get("current") for g in gpus)


def present(gpus: list[dict[str, Any]]) -> str:
    """The GPUs there are, as a person names them: "GPU 0 only", "GPUs 0-7", "GPUs 0, 2, 5"."""
    indexes = sorted(g["index"] for g in gpus if g.get("index") is not None)
    if not indexes:
        return "no GPU"
    if len(indexes) == 1:
        return f"GPU {indexes[0]} only"
    if indexes == list(range(indexes[0], indexes[-1] + 1)):
        return f"GPUs {indexes[0]}-{indexes[-1]}"
    return "GPUs " + ", ".join(map(str, indexes))
