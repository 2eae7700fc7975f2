"""Workloads that hang, crash or exit mid-way become timeout/error rows, the other checks still run, and no
process they started is left afterwards (checked with psutil). Plugins load from a directory, an environment
variable and an entry point; a broken one is an error row naming it."""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from helpers.common import GPUDOCTOR, SNAPSHOTS, alive, gpudoctor

HEALTHY = str(SNAPSHOTS / "h100-sxm-8x.json")
# How long a wait for something that happens in seconds may last before the test gives up: a guard against a
# hang, not a limit on the time (a busy CI machine takes many times a quiet one's); a child left behind for good
# still fails the test, later.
PATIENCE_S = 300

SITE_CHECKS = '''
import os, signal, subprocess, sys, time
from gpudoctor.api import Result, Status, check

def _record(payload, *pids):
    with open(payload["pidfile"], "a") as f:
        f.write("".join(f"{p}\\n" for p in pids))

def hang(payload):
    """Starts a grandchild that escapes into a session of its own, then hangs."""
    child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(600)"])
    _record(payload, os.getpid(), child.pid)
    time.sleep(600)

def segfault(payload):
    _record(payload, os.getpid())
    os.kill(os.getpid(), signal.SIGSEGV)

def exit_midway(payload):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    _record(payload, os.getpid(), child.pid)
    os._exit(7)

def _run(ctx, name):
    data = ctx.run_isolated(f"{__file__}:{name}", {"pidfile": os.environ["PIDFILE"]})
    return data if isinstance(data, Result) else Result(Status.PASS, "ok")

@check("site.hang", "hangs", level="standard", needs=("live",), timeout_s=3)
def hang_check(ctx):
    """A workload that never ends."""
    return _run(ctx, "hang")

@check("site.segfault", "segfaults", level="standard", needs=("live",))
def segfault_check(ctx):
    """A workload that segfaults."""
    return _run(ctx, "segfault")

@check("site.exit", "exits", level="standard", needs=("live",))
def exit_check(ctx):
    """A workload that exits mid-way, leaving a child."""
    return _run(ctx, "exit_midway")

@check("site.after", "runs first: quick checks come before workloads")
def after_check(ctx):
    """Proves the run goes on."""
    return Result(Status.PASS, "still running")
'''


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "local_checks.py").write_text(textwrap.dedent(SITE_CHECKS))
    return folder


def recorded(pidfile: Path) -> list[int]:
    return [int(line) for line in pidfile.read_text().split()] if pidfile.exists() else []


def test_hang_crash_and_exit_become_rows_and_leave_no_process(site: Path, tmp_path: Path) -> None:
    """The hang is ended by its own 3 s limit (the row says which limit it was given, and it ran at least that
    long), not by the test's guard (the helper's subprocess timeout, 100 times that)."""
    pidfile = tmp_path / "pids"
    proc = gpudoctor("check", "--checks-dir", str(site), "--only", "site", "--json", env={"PIDFILE": str(pidfile)})
    by_id = {c["check_id"]: c for c in json.loads(proc.stdout)["checks"]}
    assert by_id["site.hang"]["status"] == "timeout"
    assert "did not finish within its 3 s limit" in by_id["site.hang"]["summary"]
    assert by_id["site.hang"]["duration_s"] >= 3
    assert by_id["site.segfault"]["status"] == "error" and "SIGSEGV" in by_id["site.segfault"]["summary"]
    assert by_id["site.exit"]["status"] == "error" and "exited with code 7" in by_id["site.exit"]["summary"]
    assert by_id["site.after"]["status"] == "pass"
    assert proc.returncode == 1
    pids = recorded(pidfile)
    assert len(pids) == 5
    assert alive(pids) == []


def test_checks_dir_from_environment_and_listing(site: Path) -> None:
    out = gpudoctor("list", env={"GPUDOCTOR_CHECKS_DIR": str(site), "COLUMNS": "300"}).stdout
    line = next(line for line in out.splitlines() if line.startswith("site.hang"))
    assert "standard" in line and f"dir {site / 'local_checks.py'}" in line


def test_broken_site_module_is_an_error_row(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "oops.py").write_text("import nonexistent_module_xyz\n")
    proc = gpudoctor("check", "--from", HEALTHY, "--checks-dir", str(folder), "--json")
    rows = [c for c in json.loads(proc.stdout)["checks"] if c["check_id"] == "plugins.load"]
    assert rows and rows[0]["status"] == "error"
    assert "oops.py" in rows[0]["summary"] and "nonexistent_module_xyz" in rows[0]["summary"]
    assert proc.returncode == 1


def test_entry_point_plugins_load_and_broken_ones_are_named(tmp_path: Path) -> None:
    (tmp_path / "goodplugin.py").write_text(
        textwrap.dedent('''
        from gpudoctor.api import Result, Status, check

        @check("vendor.thing", "A vendor check", needs=("nvml",))
        def thing(ctx):
            """Reads the facts like any check."""
            return Result(Status.PASS, f"{len(ctx.gpus)} GPUs seen")
    ''')
    )
    dist = tmp_path / "vendorplugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vendorplugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[gpudoctor.checks]\ngood = goodplugin\nbad = missingplugin\n")
    proc = gpudoctor("check", "--from", HEALTHY, "--json", env={"PYTHONPATH": str(tmp_path)})
    checks = {c["check_id"] + (c["aspect"] or ""): c for c in json.loads(proc.stdout)["checks"]}
    assert checks["vendor.thing"]["summary"] == "8 GPUs seen"
    broken = [c for key, c in checks.items() if key.startswith("plugins.load")]
    assert len(broken) == 1 and "plugin bad (missingplugin)" in broken[0]["summary"]
    listing = gpudoctor("list", env={"PYTHONPATH": str(tmp_path), "COLUMNS": "200"}).stdout
    assert "vendor.thing" in listing and "plugin good (goodplugin)" in listing


def test_sigterm_writes_the_report_and_leaves_no_process(site: Path, tmp_path: Path) -> None:
    pidfile, report = tmp_path / "pids", tmp_path / "report.json"
    config = tmp_path / "c.toml"
    config.write_text("[checks.site.hang]\ntimeout = 120\n")
    proc = subprocess.Popen(
        [
            GPUDOCTOR,
            "check",
            "--checks-dir",
            str(site),
            "--only",
            "site.after",
            "site.hang",
            "--config",
            str(config),
            "-o",
            str(report),
        ],
        env={**__import__("os").environ, "PIDFILE": str(pidfile)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + PATIENCE_S
    while len(recorded(pidfile)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(recorded(pidfile)) == 2, "the workload never started"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=PATIENCE_S)
    assert proc.returncode == 130
    document = json.loads(report.read_text())
    assert document["interrupted"] is True
    by_id = {c["check_id"]: c for c in document["checks"]}
    assert by_id["site.after"]["status"] == "pass"
    assert by_id["site.hang"]["status"] == "skip" and "interrupted" in by_id["site.hang"]["summary"]
    assert "interrupted" in out
    assert alive(recorded(pidfile)) == []


def descendants_of(pid: int) -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


def left_alive(pids: list[int]) -> list[int]:
    """The processes still alive once they had PATIENCE_S to end."""
    deadline = time.monotonic() + PATIENCE_S
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


@pytest.mark.parametrize(
    ("args", "env", "ready"),
    [
        # A site workload whose grandchild starts a session of its own, then hangs.
        (["--only", "site.hang", "--config", "{config}"], {}, lambda kids: len(kids) >= 2),
        # gloo ranks of the all-reduce, one of them hung in a collective.
        (
            ["--only", "allreduce.bandwidth", "--timeout", "120"],
            {"GPUDOCTOR_INJECT_FAULT": "rank=1,kind=hang,at=all_reduce"},
            lambda kids: len(kids) >= 3,
        ),
    ],
    ids=["site-workload", "gloo-ranks"],
)
def test_every_child_dies_with_a_killed_gpudoctor(site: Path, tmp_path: Path, args, env, ready) -> None:
    """SIGKILL runs no handler: the children watch a pipe only gpudoctor holds open (and the ranks have a
    parent-death signal), so none is left reparented to PID 1 outside the scheduler's tracking."""
    config = tmp_path / "c.toml"
    config.write_text("[checks.site.hang]\ntimeout = 120\n")
    argv = [GPUDOCTOR, "check", "--checks-dir", str(site), *(a.replace("{config}", str(config)) for a in args)]
    environ = {**__import__("os").environ, "PIDFILE": str(tmp_path / "pids"), **env}
    proc = subprocess.Popen(argv, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + PATIENCE_S
    kids: list[int] = []
    while time.monotonic() < deadline and not ready(kids := descendants_of(proc.pid)):
        time.sleep(0.2)
    assert ready(kids), "the workload never started"
    time.sleep(1)
    kids = sorted(set(descendants_of(proc.pid)) | set(recorded(tmp_path / "pids")))
    proc.kill()
    proc.wait()
    assert left_alive(kids) == []


def test_workers_start_the_same_from_a_folder_that_holds_a_gpudoctor_package(tmp_path: Path) -> None:
    """Run from a checkout's root (where the README leaves you), `python -m` would put the source tree's
    `gpudoctor/` ahead of the installed package in every child: the torch gateway, isolated workloads and
    ranks. None of them may import from the current directory."""
    planted = tmp_path / "gpudoctor"
    planted.mkdir()
    marker = tmp_path / "imported"
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('shadowed')\n")
    only = ["--only", "torch.import", "allreduce.bandwidth"]
    proc = gpudoctor("check", "--level", "standard", *only, "--json", cwd=tmp_path)
    statuses = {c["check_id"]: c["status"] for c in json.loads(proc.stdout)["checks"]}
    assert statuses == {"torch.import": "pass", "allreduce.bandwidth": "pass"}, proc.stdout
    assert not marker.exists()
