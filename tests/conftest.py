"""Fixtures and hooks for every test; the helpers the tests share are in tests/helpers/."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from helpers.common import alive, descendants
from xdist.scheduler import LoadFileScheduling


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


# The files whose tests hold that lock run on one worker, first: a worker that reached a second file of them would
# wait on the lock, idle (CI lost minutes so). tests/test_house.py checks that every such test is in one of these.
ONE_WORKER_FILES = ("tests/test_cluster.py", "tests/test_slurm.py", "tests/test_gpu.py", "tests/test_network.py")
# Then the longest files first, so none is left to run alone at the end (their durations in CI: minutes each).
LONGEST_FIRST = ("tests/test_allreduce.py", "tests/test_ddp.py", "tests/test_fuzz.py", "tests/test_monitoring.py")


class HostsOnOneWorker(LoadFileScheduling):
    """`--dist loadfile`, with the namespace-host and GPU files as one unit of work, handed out first, and the
    longest files next."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return ONE_WORKER_FILES[0] if path in ONE_WORKER_FILES else path

    def _assign_work_unit(self, node) -> None:
        for scope in reversed((ONE_WORKER_FILES[0], *LONGEST_FIRST)):
            if scope in self.workqueue:
                self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config: pytest.Config, log) -> LoadFileScheduling | None:
    """The scheduler above wherever the run distributes by file (the default: pyproject's addopts)."""
    return HostsOnOneWorker(config, log) if config.getvalue("dist") == "loadfile" else None


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


# The gpudoctor under test is the one installed in this environment (in CI the wheel, as users install it:
# docs/TESTING.md): no child a test starts in the checkout may import the source tree in its place (Python 3.11+).
os.environ["PYTHONSAFEPATH"] = "1"


def installed_package() -> Path:
    import gpudoctor

    return Path(gpudoctor.__file__).parent


def pytest_report_header(config: pytest.Config) -> str:
    return f"gpudoctor under test: {installed_package()}"


def pytest_configure(config: pytest.Config) -> None:
    """In CI, refuse to test the checkout's source instead of the installed wheel (an editable install hides a
    module missing from the package). Then compile the package once, before the workers start: the suite starts
    gpudoctor in a few thousand processes, and where PYTHONDONTWRITEBYTECODE is set (this project's CI image
    sets it) each would compile every module it imports again."""
    if hasattr(config, "workerinput"):
        return
    package = installed_package()
    if os.environ.get("CI") and package == Path(__file__).parent.parent / "gpudoctor":
        pytest.exit(f"CI tests the installed wheel, not the checkout's source ({package}): see docs/TESTING.md", 4)
    import compileall

    folders = {package, Path(__file__).parent.parent / "checks"}  # the second: an editable install's checks
    for folder in folders:
        if folder.is_dir():
            compileall.compile_dir(str(folder), quiet=1)


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
