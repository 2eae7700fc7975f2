"""Shared test helpers: fixture snapshots, the installed console script, and process accounting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from gpudoctor.config import Config
from gpudoctor.context import Options
from gpudoctor.engine.runner import run_checks, select
from gpudoctor.model import Result
from gpudoctor.registry import discover

ROOT = Path(__file__).parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
PASTES = FIXTURES / "pastes"
BENCH = FIXTURES / "benchmarks"
PLUGINS = FIXTURES / "plugins"
SNAPSHOTS = FIXTURES / "snapshots"
GPUDOCTOR = str(Path(sys.executable).with_name("gpudoctor"))


# Cluster runs on namespace hosts: smaller transfers and fewer repetitions than a GPU cluster's defaults (the
# judging does not depend on the size, and two cores run every host); a node not joined in 20 s is named.
# A pair all-reduce stays at the CPU default of 4 MiB: at 1 MiB it measured latency and load (healthy pairs
# 0.067 GB/s, a spread of 0.29 between passes, a 100 Mbit node only 0.18x of them), so CI's noise could
# make its verdict on a slow node unstable; at 4 MiB healthy pairs do 0.275 GB/s, spread 0.029, slow 0.04x.
# The all-reduce check at the fewest timings that still judge (a figure is the median of MIN_REPEATS or more):
# for the tests of what it reports rather than of what it measures.
LEAN_ALLREDUCE = """
[checks.allreduce.bandwidth]
warmup = 1
iters = 4
"""

LEAN_CLUSTER = """
[checks.cluster.nodes]
join_timeout = 20.0
[checks.cluster.links]
bytes = 4194304
warmup = 1
iters = 6
[checks.cluster.allreduce]
warmup = 1
iters = 6
pair_bytes = 4194304
[checks.cluster.ddp]
steps = 8
"""


def load_snapshot(name: str) -> dict[str, Any]:
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


def usable_gpus(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs a check sees as `ctx.gpus`."""
    from gpudoctor.facts.nvml import usable

    return [g for g in snapshot["nvml"].get("gpus", []) if usable(g)]


def judge(snapshot: str | dict[str, Any], **options: Any) -> dict[str, Result]:
    """Run every quick check in-process on a snapshot (a fixture file's name, or a fixture node); results by
    label."""
    opts = Options(offline=True, **options)
    specs = select(discover(entry_points=False).specs, opts)
    facts = load_snapshot(snapshot) if isinstance(snapshot, str) else snapshot
    run = run_checks(specs, facts, opts, Config().settings)
    return {r.label: r for r in run.results}


def gpudoctor(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", **(env or {})}
    return subprocess.run([GPUDOCTOR, *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd)


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def alive(pids: list[int]) -> list[int]:
    living = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                living.append(pid)
        except psutil.NoSuchProcess:
            pass
    return living


def read_alone(read: Any, text: str) -> Any:
    """One paste reader's `read` alone over `text`, its lines split as paste.read splits them."""
    from gpudoctor.paste.found import Found

    found = Found.of(text)
    read(found)
    return found


def read_amid(text: str, line: str, read: Any) -> Any:
    """A paste reader's `read` over `text` with one real `line` of its kind put in the middle: where the text is
    another kind's, the reader must read that line and nothing else."""
    from gpudoctor.paste.found import Found

    lines = text.replace("\r\n", "\n").split("\n")
    middle = len(lines) // 2
    found = Found([*lines[:middle], line, *lines[middle:]])
    read(found)
    return found
