"""Which GPUs CUDA gives a process under CUDA_VISIBLE_DEVICES, read as CUDA reads it (pure).

The CUDA C++ Programming Guide ("CUDA Environment Variables", CUDA_VISIBLE_DEVICES): unset, every GPU is
visible; set to an empty string, none is; a comma-separated sequence of device indexes shows the devices it
names, in its order, and where an index is invalid only the devices before it ("0,2,-1,1" shows 0 and 2); GPU
UUIDs as nvidia-smi -L prints them (GPU-..., MIG-...), a unique prefix being enough. The details follow torch's
own model of that rule (torch/cuda/__init__.py `_parse_visible_devices` and `_transform_uuid_to_ordinals`, torch
2.15): an entry is read like strtoul (its leading digits: "1gpu2" is 1), a negative or unreadable one ends the
sequence, an index past the last GPU ends it too, a repeated one empties the whole set, and a value starting with
GPU- (or MIG-) is a list of such UUIDs, ended by the first entry without that prefix or matching no GPU (or more
than one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

LEADING = re.compile(r"[+-]?\d{1,9}")


@dataclass(frozen=True)
class Visible:
    """What a CUDA_VISIBLE_DEVICES value shows: the NVML indexes of the GPUs CUDA will use (in its order), the
    entry at which CUDA stopped reading (None if every entry named a GPU), whether an entry was repeated (which
    shows none), and whether it names MIG devices (told apart here only by their GPU's MIG mode)."""

    shown: tuple[int, ...]
    invalid: str | None
    repeated: bool = False
    mig: bool = False


def visible(value: str, gpus: list[dict[str, Any]]) -> Visible:
    """The GPUs of `gpus` (NVML's facts: index, uuid, mig_mode) CUDA gives a process with this value."""
    entries = [entry.strip() for entry in value.split(",")] if value.strip() else []
    if entries and entries[0].upper().startswith("MIG-"):
        return Visible((), None, mig=True) if _any_mig(gpus) else Visible((), entries[0])
    uuids = bool(entries) and entries[0].upper().startswith("GPU-")
    shown: list[int] = []
    for entry in entries:
        index = _uuid(entry, gpus) if uuids else _ordinal(entry, gpus)
        if index is None:
            return Visible(tuple(shown), entry)
        if index in shown:
            return Visible((), entry, repeated=True)
        shown.append(index)
    return Visible(tuple(shown), None if entries else "")


def _ordinal(entry: str, gpus: list[dict[str, Any]]) -> int | None:
    """The GPU an index entry names, read as strtoul reads it (its leading digits); None past the last GPU, for a
    negative index or for one with no digits."""
    found = LEADING.match(entry)
    number = int(found.group()) if found else -1
    return number if 0 <= number < len(gpus) else None


def _uuid(entry: str, gpus: list[dict[str, Any]]) -> int | None:
    """The NVML index of the one GPU whose UUID starts with `entry`; None for none or several."""
    if not entry.upper().startswith("GPU-"):
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
