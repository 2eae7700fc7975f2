"""What a user hands `check --from`: a gpudoctor snapshot, an `nvidia-smi -q -x` capture, or text gpudoctor reads
(pasted outputs and logs, other tools' JSON), told apart by content. Here, above both the snapshot reader
(gpudoctor/facts) and the paste readers, so neither imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudoctor import paste
from gpudoctor.facts.schema import SCHEMA, problem
from gpudoctor.facts.snapshot import (
    SnapshotError,
    capture_from,
    content_kind,
    gunzipped,
    upgrade,
    validate,
)
from gpudoctor.files import decode, parse_json, read_input


def load(path: Path | str) -> dict[str, Any]:
    """A gpudoctor snapshot, an `nvidia-smi -q -x` capture, or pasted text (collect_env, nvidia-smi output,
    logs, errors; gzip too) read as one: told apart by content; `-` reads standard input. Every fact is
    checked against facts/schema.py, and a wrong one named."""
    data = gunzipped(read_input(path, "snapshot", SnapshotError), path)
    kind = content_kind(data)
    if kind is None:
        return pasted(path, data)
    try:
        if kind == "capture":
            return capture_from(Path(path), data)
        snapshot = parse_json(data, path, "snapshot", SnapshotError)
    except SnapshotError as exc:  # text that starts like XML or JSON ("<details>", "[rank0]:") may be a paste
        return pasted(path, data, exc)
    if not isinstance(snapshot, dict) or snapshot.get("schema") != SCHEMA:
        # another tool's JSON (nccl-tests -J, nvbandwidth --json, dcgmi diag -j) is read by the paste readers;
        # a gpudoctor snapshot never is, however damaged: its own error stands
        return pasted(path, data, SnapshotError(f'{path} is not a gpudoctor snapshot (no "schema": "{SCHEMA}")'))
    validate(snapshot, str(path))
    snapshot = upgrade(snapshot, str(path))
    wrong = problem(snapshot)
    if wrong:
        raise SnapshotError(f"snapshot {path}: {wrong}")
    return snapshot


def pasted(path: Path | str, data: bytes, first: SnapshotError | None = None) -> dict[str, Any]:
    """Text a user has (collect_env, nvidia-smi's outputs, kernel and NCCL logs, errors) read as facts. Where
    it was first taken for a snapshot or a capture and is none of these either, that first error is raised."""
    text = decode(data)
    if text is None or "\x00" in text[:4096]:
        raise first or SnapshotError(f"{path} is not text: neither a snapshot, a capture nor anything gpudoctor reads")
    found = paste.read(text)
    if not found.kinds:
        if first:
            raise first
        raise SnapshotError(
            f"{path}: nothing in it gpudoctor reads (a snapshot, an nvidia-smi capture or output, collect_env, "
            "a kernel or NCCL log, a known error message)"
        )
    snapshot = paste.to_snapshot(Path(str(path)).name, found)
    wrong = problem(snapshot)
    if wrong:
        raise SnapshotError(f"{path}: what was read from it is not usable ({wrong})")
    return snapshot
