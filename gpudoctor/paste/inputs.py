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
from gpudoctor.workloads import guard


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
        return pasted(path, data, exc if claims_to_be_ours(data) else None)
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


def claims_to_be_ours(data: bytes) -> bool:
    """Whether a file that failed to parse was meant as a snapshot or a capture (a JSON object, nvidia-smi's
    XML), so that its own error is the answer where nothing else in it is read; text that only starts with "<"
    or "[" (an issue's "<details>", a "[rank0]:" log) gets the report of what was looked for."""
    head = (decode(data[:512]) or "").lstrip("\ufeff \t\r\n")
    array = head.startswith("[") and head[1:].lstrip()[:1] in ("[", "{", "]")  # JSON, not "[rank0]:"
    return array or head.startswith(("{", "<?xml")) or "nvidia_smi_log" in head


# The most a paste may take to read: every reader is linear (tests/test_reader_time.py), about 0.3-0.6 s per MB
# on 2 cores, 1.2 s per MB for the slowest hostile shapes (bench/readers.py, docs/SECURITY.md); this is the guard
# against what no test foresaw, ended with one line (exit 2).
READ_SECONDS = 10.0
READ_SECONDS_PER_MB = 1.0


def read_budget(size: int) -> float:
    """Seconds a paste of `size` bytes may take to read."""
    return READ_SECONDS + READ_SECONDS_PER_MB * size / 2**20


def pasted(path: Path | str, data: bytes, first: SnapshotError | None = None) -> dict[str, Any]:
    """pasted_text within its time budget, read in a child process that is killed at the budget (a pattern running
    in C holds the interpreter: no timer here could stop it), else one line saying so."""
    budget = read_budget(len(data))
    try:
        return guard.in_child(lambda: pasted_text(path, data, first), budget, f"reading {path}")
    except guard.TimedOut:
        raise SnapshotError(
            f"{path}: reading it took longer than {budget:.0f} s ({READ_SECONDS:.0f} s and {READ_SECONDS_PER_MB:.0f} s "
            "per MB; gpudoctor reads a log at about 0.5 s per MB): judge the part about the GPUs, not the whole file"
        ) from None


def pasted_text(path: Path | str, data: bytes, first: SnapshotError | None = None) -> dict[str, Any]:
    """Text a user has (collect_env, nvidia-smi's outputs, kernel and NCCL logs, errors) read as facts. Where
    it was first taken for a snapshot or a capture and is none of these either, that first error is raised."""
    text = decode(data)
    if text is None or "\x00" in text[:4096]:
        raise first or SnapshotError(f"{path} is not text: neither a snapshot, a capture nor anything gpudoctor reads")
    if not text.strip():
        raise SnapshotError(f"{path} is empty: nothing to judge")
    found = paste.read(text)
    if not found.kinds and first:
        raise first
    snapshot = paste.to_snapshot(Path(str(path)).name, found)
    wrong = problem(snapshot)
    if wrong:
        raise SnapshotError(f"{path}: what was read from it is not usable ({wrong})")
    return snapshot
