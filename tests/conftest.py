"""Fixtures and hooks for every test; the helpers the tests share are in tests/helpers/."""

from __future__ import annotations

import fcntl
import os

import pytest
from helpers.common import alive, descendants


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
def own_state_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """What runs learn (the workloads' durations a --budget plans with) goes to the test run's own folder,
    never the user's ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.getbasetemp() / "state"))


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
