"""Exit codes mean one thing each, also when gpudoctor breaks (issue: an uncaught exception exited 1, "a check
failed", so hooks drained the node; a report that could not be written after the checks ran exited 2 and the
prolog started the job; SIGTERM in the first instant exited 143 with no Nagios line; an interrupted run said
`status: pass`; `report` trusted the saved exit code and counts)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.common import GPUDOCTOR, SNAPSHOTS, gpudoctor

from gpudoctor import cli, files
from gpudoctor.model import Result, Status
from gpudoctor.report import document as doc
from gpudoctor.report import exits

HEALTHY = str(SNAPSHOTS / "h100-sxm-8x.json")
FAILING = str(SNAPSHOTS / "fault-ecc-uncorrectable.json")


def boom(args: Any) -> int:
    raise AttributeError("'int' object has no attribute 'get'")


@pytest.mark.parametrize(("extra", "code"), [([], 3), (["--format", "nagios"], 3)])
def test_a_bug_is_exit_3_with_one_line_never_0_or_1(monkeypatch, capsys, extra: list[str], code: int) -> None:
    monkeypatch.setitem(cli.COMMANDS, "check", boom)
    assert cli.main(["check", *extra]) == code
    said = capsys.readouterr()
    assert said.err.strip().splitlines() == [
        "gpudoctor: internal error: AttributeError: 'int' object has no attribute 'get' "
        "(a bug in gpudoctor: the node is not judged)"
    ]
    assert ("GPUDOCTOR UNKNOWN - internal error" in said.out) is bool(extra)


def test_a_report_that_cannot_be_written_after_the_checks_ran_is_exit_3(monkeypatch, tmp_path: Path, capsys) -> None:
    def full(path: Path, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "write_atomic", full)
    assert cli.main(["check", "--from", FAILING, "-o", str(tmp_path / "r.json")]) == 3
    assert "cannot write" in capsys.readouterr().err


def catches_sigterm(pid: int, within_s: float = 300) -> None:
    """Wait until the process has its SIGTERM handler (SigCgt in /proc/PID/status): the first instant gpudoctor
    can answer for, however long the interpreter took to start on a busy machine (`within_s` is a guard against
    a hang, not a limit on the start-up)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught >> (signal.SIGTERM - 1) & 1:
            return
        time.sleep(0.01)
    raise AssertionError(f"no SIGTERM handler after {within_s} s")


@pytest.mark.parametrize(("extra", "code", "line"), [([], 130, ""), (["--format", "nagios"], 3, "GPUDOCTOR UNKNOWN")])
def test_sigterm_from_the_first_instant_is_interrupted(extra: list[str], code: int, line: str) -> None:
    proc = subprocess.Popen([GPUDOCTOR, "check", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    catches_sigterm(proc.pid)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, err[-500:]
    assert "Traceback" not in err and line in out


def test_an_interrupted_runs_document_is_not_a_pass() -> None:
    results = [Result(Status.PASS, "fine", check_id="gpu.inventory")]
    document = doc.build(results, {}, exits.exit_code(results, False, True), True)
    assert document["status"] == "error" and document["exit_code"] == 130


def test_report_recounts_what_the_file_says(tmp_path: Path) -> None:
    saved = json.loads(gpudoctor("check", "--from", FAILING, "--json").stdout)
    saved.update(exit_code=0, status="pass", counts={s: 0 for s in saved["counts"]})
    path = tmp_path / "r.json"
    path.write_text(json.dumps(saved))
    proc = gpudoctor("report", str(path), "--format", "json")
    again = json.loads(proc.stdout)
    assert proc.returncode == 1 and again["exit_code"] == 1 and again["status"] == "fail"
    assert again["counts"]["fail"] >= 1


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"host": 5}, "host is 5 (type int)"),
        ({"started_at": []}, "started_at is []"),
        ({"duration_s": "long"}, "duration_s is 'long'"),
        ({"duration_s": True}, "duration_s is True"),
        ({"interrupted": "no"}, "interrupted is 'no'"),
        ({"checks": {}}, "checks is not a list"),
    ],
)
def test_a_saved_report_with_a_wrong_typed_field_is_one_line(tmp_path: Path, change: dict, words: str) -> None:
    saved = json.loads(gpudoctor("check", "--from", HEALTHY, "--json").stdout)
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**saved, **change}))
    proc = gpudoctor("report", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"status": "bogus"}, "status 'bogus' is not a status"),
        ({"lost": 5}, "lost or exit_code is of the wrong type"),
        ({"verdict": {"status": "fail", "findings": 5}}, "verdict.findings is not a list of text"),
    ],
)
def test_a_cluster_node_of_the_wrong_shape_is_one_line(tmp_path: Path, change: dict, words: str) -> None:
    nodes = [{"name": "n0", "rank": 0, "status": "pass", "exit_code": 0, "checks": []}]
    meta = {"host": "n0", "started_at": "2026-11-24T10:00:00+00:00", "duration_s": 1.0, "level": "quick"}
    document = doc.build_cluster([], nodes, {**meta, "source": "live"}, False, False, "slurm")
    document["cluster"]["nodes"][0].update(change)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    for command in (["report", str(path)], ["drain", str(path), "--dry-run"]):
        proc = gpudoctor(*command)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr


def test_an_unreachable_store_is_one_line_not_pages_of_cpp_frames(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[checks.cluster.nodes]\njoin_timeout = 2.0\n")
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
    proc = gpudoctor("check", "--only", "cluster.nodes", "--config", str(config), env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "gpudoctor: error: cannot reach the cluster store at 127.0.0.1:29999: The client socket has timed out "
        "after 2000ms while trying to connect to (127.0.0.1, 29999)."
    ]
