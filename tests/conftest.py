"""Shared test helpers: fixture snapshots, the installed console script, and process accounting."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpudoctor.config import Config
from gpudoctor.context import Options
from gpudoctor.engine.runner import run_checks, select
from gpudoctor.model import Result
from gpudoctor.registry import discover

FIXTURES = Path(__file__).parent / "fixtures"
SNAPSHOTS = FIXTURES / "snapshots"
GPUDOCTOR = str(Path(sys.executable).with_name("gpudoctor"))


# Cluster runs on namespace hosts: smaller transfers and fewer repetitions than a GPU cluster's defaults (the
# judging does not depend on the size, and two cores run every host); a node not joined in 20 s is named.
# A pair all-reduce stays at the CPU default of 4 MiB: at 1 MiB it measured latency and load (healthy pairs
# 0.067 GB/s, a spread of 0.29 between passes, a 100 Mbit node only 0.18x of them), so CI's noise could
# make its verdict on a slow node unstable; at 4 MiB healthy pairs do 0.275 GB/s, spread 0.029, slow 0.04x.
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


@pytest.fixture
def no_leftovers():
    """Fails the test if it leaves any child process of this test process behind."""
    before = descendants()
    yield
    left = alive(sorted(descendants() - before))
    assert not left, f"processes left behind: {left}"


# Tests that must run alone, whatever pytest-xdist's scheduler does with its groups (pytest 9.2 with xdist 3.8
# ignores `xdist_group`, pytest-xdist issue 1386): namespace hosts share two cores, and GPU timings want the GPU.
ONE_AT_A_TIME = ("hosts", "gpu")


@pytest.fixture(autouse=True)
def one_at_a_time(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Holds a lock shared by every xdist worker of this run while a `hosts` or `gpu` test runs; autouse, so
    it is taken before the test's own fixtures make hosts."""
    names = [name for name in ONE_AT_A_TIME if request.node.get_closest_marker(name)]
    if not names:
        yield
        return
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with open(shared / f"gpudoctor-{names[0]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(autouse=True)
def cpu_unless_marked_gpu(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite tests the gloo paths on the CPU, as CI runs them; on a machine with a GPU, torch (and every
    gpudoctor the tests start) is kept off it, except in the `gpu`-marked tests, which exist to use it. NVML
    still sees the GPU."""
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def pytest_collection_modifyitems(config, items) -> None:
    """A test that drives the browser is marked `browser`. GPU-marked tests run wherever torch sees a CUDA GPU
    and are skipped, saying so, everywhere else."""
    import torch

    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none here); run on a GPU machine, see docs/VALIDATION.md")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def read_amid(text: str, line: str, read: Any) -> Any:
    """A paste reader's `read` over `text` with one real `line` of its kind put in the middle: where the text is
    another kind's, the reader must read that line and nothing else."""
    from gpudoctor.paste.found import Found

    lines = text.replace("\r\n", "\n").split("\n")
    middle = len(lines) // 2
    found = Found([*lines[:middle], line, *lines[middle:]])
    read(found)
    return found
