"""Input no tool writes, handed to gpudoctor by a careless user or an attacker (issue: FIFOs and /dev/zero hung
or ate memory, 400-digit numbers, 5000-digit strings and deep nesting raised tracebacks, NaN thresholds passed
a node that should warn, a link planted at prometheus_client's temporary name made root write through it).
Each is a one-line error naming the problem, or is read as well as it can be; never a traceback or a hang."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers.common import GPUDOCTOR, SNAPSHOTS, gpudoctor

from gpudoctor import baseline, config, files
from gpudoctor.facts import snapshot
from gpudoctor.facts.nvsmi_xml import integer
from gpudoctor.paste import inputs
from gpudoctor.report import prometheus

HEALTHY = SNAPSHOTS / "h100-sxm-8x.json"


def one_line(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-800:])
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-800:]
    for word in words:
        assert word in proc.stderr, proc.stderr


@pytest.mark.parametrize("option", ["--from", "--config", "--baseline"])
def test_a_device_is_refused_and_a_pipe_is_read(tmp_path: Path, option: str) -> None:
    """/dev/zero never ends: refused. A pipe (`--config <(...)`) is read until its writer closes it."""
    extra = [] if option == "--from" else ["--from", str(HEALTHY)]
    one_line(gpudoctor("check", *extra, option, "/dev/zero", timeout=60), "is a character device")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    content = {"--from": HEALTHY.read_text(), "--config": "expect_gpus = 8\n", "--baseline": "{"}[option]
    source = tmp_path / "content"
    source.write_text(content)
    writer = subprocess.Popen(["sh", "-c", 'sleep 0.5; cat "$1" > "$2"', "sh", str(source), str(fifo)])
    proc = gpudoctor("check", *extra, option, str(fifo), timeout=60)
    writer.wait(timeout=30)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == (2 if option == "--baseline" else 0), proc.stderr[-400:]


def test_a_fifo_nobody_writes_is_waited_on_for_a_bounded_time(tmp_path: Path, monkeypatch) -> None:
    fifo = tmp_path / "evil.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(files, "PIPE_WAIT_S", 0.5)
    with pytest.raises(snapshot.SnapshotError, match=re.escape("sent nothing for 0.5 s")):
        inputs.load(fifo)
    holder = os.open(fifo, os.O_RDWR)  # a writer that holds it open and sends nothing
    try:
        with pytest.raises(config.ConfigError, match="sent nothing"):
            config.load(fifo)
    finally:
        os.close(holder)


def test_standard_input_is_read_but_not_without_end(tmp_path: Path) -> None:
    proc = subprocess.run(
        [GPUDOCTOR, "check", "--from", "-"], input=HEALTHY.read_bytes(), capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    endless = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        proc = subprocess.run([GPUDOCTOR, "check", "--from", "-"], stdin=endless.stdout, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    finally:
        endless.kill()
        endless.wait()
    one_line(proc, "larger than 64 MB, the most gpudoctor reads")


def test_a_file_past_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = tmp_path / "big.xml"
    with big.open("wb") as handle:
        handle.truncate(files.MAX_INPUT_BYTES + 1)
    one_line(gpudoctor("check", "--from", str(big), timeout=60), "larger than 64 MB")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
        ('{"a":' * 70 + "1" + "}" * 70, "nested too deep (gpudoctor reads at most 64 levels)"),
        ('{"n": ' + "9" * 5000 + "}", "not valid JSON (Exceeds the limit"),
        ('{"n": NaN}', "NaN is not a JSON number"),
        ('{"n": -Infinity}', "-Infinity is not a JSON number"),
    ],
)
def test_json_no_tool_writes_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    for reader, error in ((inputs.load, snapshot.SnapshotError), (baseline.load, baseline.BaselineError)):
        with pytest.raises(error, match=re.escape(words)):
            reader(path)
    one_line(gpudoctor("report", str(path)), words)
    one_line(gpudoctor("drain", str(path), "--dry-run"), words)


def test_utf16_without_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """What some Windows tools write: UTF-16BE or LE, no BOM."""
    for encoding in ("utf-16-be", "utf-16-le"):
        path = tmp_path / f"{encoding}.json"
        path.write_bytes(HEALTHY.read_text().encode(encoding))
        assert inputs.load(path)["nvml"]["gpus"]
    assert files.decode(b"\xff\xfe\xfd") is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"system": {"hostname": 5}}, "system.hostname is 5 (type int), not str"),
        ({"gather_s": "slow"}, "gather_s is 'slow' (type str), not a finite number"),
        ({"sources": "nvml"}, "sources is 'nvml' (type str), not list"),
        ({"nvml": {"status": "ok", "gpus": [{"index": 0, "temperature_c": "hot"}]}}, "nvml.gpus[0].temperature_c"),
        ({"nvml": {"status": "ok", "gpus": [5]}}, "nvml.gpus[0] is 5 (type int), not an object"),
    ],
)
def test_a_wrong_typed_fact_is_named_when_the_snapshot_is_loaded(tmp_path: Path, change: dict, field: str) -> None:
    data = {**json.loads(HEALTHY.read_text()), **change}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    one_line(gpudoctor("check", "--from", str(path)), field)


def test_schema_1_calls_that_cannot_be_replayed_are_one_line(tmp_path: Path) -> None:
    data = {**json.loads(HEALTHY.read_text()), "schema_version": 1, "nvml_calls": {"nvmlInit": [1, 2]}}
    data["nvml_calls"]["nvmlDeviceGetCount"] = "eight"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    proc = gpudoctor("check", "--from", str(path))
    assert proc.returncode in (0, 1, 2) and "Traceback" not in proc.stderr, proc.stderr[-800:]


def test_a_400_digit_number_in_a_capture_is_no_figure() -> None:
    assert integer("9" * 400 + " MiB") is None
    assert integer("81920 MiB") == 81920


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[checks.health.ecc]\ncorrectable_warn = nan\n", "checks.health.ecc.correctable_warn = nan is outside"),
        ("[checks.health.ecc]\ncorrectable_warn = -1\n", "is outside 0.."),
        ("[checks.allreduce.bandwidth]\niters = -1\n", "checks.allreduce.bandwidth.iters = -1 is outside 1.."),
        ("[checks.allreduce.bandwidth]\niters = 0\n", "iters = 0 is outside 1.."),
        ("[checks.system.shm]\nmin_gib = inf\n", "min_gib = inf is outside"),
        ("[checks.compute.gemm]\nfloor = 1.5\n", "floor = 1.5 is outside 0..1"),
        ("timeout = -5\n", "timeout = -5 is outside"),
        ("[checks.health.ecc]\ntimeout = -1.0\n", "is outside"),
        ("checks = 5\n", "checks must be dict"),
        ("[checks]\nhealth = 5\n", "checks.health must be a table"),
        ("a = [" * 2000 + "]" * 2000, "config"),
    ],
)
def test_a_config_value_no_site_means_is_refused(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    one_line(gpudoctor("check", "--from", str(HEALTHY), "--config", str(path)), words)


def test_a_config_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"level = '\xff\xfe\xfa'\n")
    with pytest.raises(config.ConfigError, match="is not text"):
        config.load(path)


@pytest.mark.parametrize("figure", [-1.0, 0, "fast", True])
def test_a_baseline_figure_no_node_measured_is_refused(tmp_path: Path, figure: object) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema": baseline.SCHEMA, "schema_version": baseline.SCHEMA_VERSION,
                                "figures": {"allreduce.bandwidth/busbw": figure}}))  # fmt: skip
    with pytest.raises(baseline.BaselineError, match="not a measured figure"):
        baseline.load(path)


def test_the_prom_file_is_written_without_following_a_planted_link(tmp_path: Path) -> None:
    """prometheus_client's write_to_textfile opened `<file>.<pid>.<thread>` with O_TRUNC and no O_NOFOLLOW: a
    link planted at every such name this process could use now points nowhere it writes."""
    import threading

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "gpudoctor.prom"
    planted = out.with_name(f"{out.name}.{os.getpid()}.{threading.current_thread().ident}")
    planted.symlink_to(victim)
    document = json.loads(gpudoctor("check", "--from", str(HEALTHY), "--json").stdout)
    prometheus.write(str(out), document)
    assert victim.read_text() == "precious\n" and not out.is_symlink()
    assert "gpudoctor_check_status" in out.read_text()


def waiting(fd: int) -> bytes:
    """What a pipe still holds, without waiting."""
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""


def test_the_other_prom_files_scan_skips_fifos_devices_and_giants(tmp_path: Path) -> None:
    """The FIFO holds a line and a writer that never closes it (the test holds both ends): read, it would be
    waited on for files.PIPE_WAIT_S and its line taken; skipped, the line is still there afterwards."""
    out, fifo = tmp_path / "gpudoctor.prom", tmp_path / "evil.prom"
    os.mkfifo(fifo)
    line = b"gpudoctor_last_run_timestamp_seconds 1\n"
    held = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    os.write(held, line)
    (tmp_path / "zero.prom").symlink_to("/dev/zero")
    with (tmp_path / "huge.prom").open("wb") as handle:
        handle.truncate(prometheus.PROM_BYTES + 1)
    try:
        proc = gpudoctor("check", "--from", str(HEALTHY), "--prom-file", str(out), timeout=120)
        assert waiting(held) == line, "a FIFO beside the file was opened and read"
    finally:
        os.close(held)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-500:]


def test_an_nccl_switch_is_read_as_nccl_reads_it() -> None:
    """NCCL parses its integer variables with strtoll(str, NULL, 0): `banana` is 0, P2P stays on; `0x1` is 1."""
    from gpudoctor.checks.system import judge_nccl_env
    from gpudoctor.judging.routes import nccl_int

    assert [nccl_int(v) for v in ("1", "0", "banana", "0x1", " 2", "1abc", "010", "", None)] == [
        1,
        0,
        0,
        1,
        2,
        1,
        8,
        0,
        0,
    ]
    said = judge_nccl_env({"env": {"NCCL_P2P_DISABLE": "banana"}, "interfaces": ["lo"]})
    text = json.dumps(said.to_dict())
    assert "P2P) is off" not in text and "is no number: NCCL reads it as 0, so it changes nothing" in text
    assert "is off" in json.dumps(judge_nccl_env({"env": {"NCCL_P2P_DISABLE": "0x1"}, "interfaces": ["lo"]}).to_dict())


def test_work_folders_of_a_killed_gpudoctor_are_swept(tmp_path: Path) -> None:
    """SIGKILL runs no cleanup: the next isolated run removes the folders of gpudoctor processes that are gone."""
    from gpudoctor.workloads.isolate import sweep_orphans

    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = tmp_path / f"gpudoctor-{dead.pid}-abc"
    orphan.mkdir()
    (orphan / "spec.json").write_text("{}")
    alive = tmp_path / f"gpudoctor-{os.getpid()}-def"
    alive.mkdir()
    assert sweep_orphans(tmp_path) == [orphan]
    assert not orphan.exists() and alive.exists()


def test_escape_sequences_in_a_saved_report_never_reach_the_terminal(tmp_path: Path) -> None:
    from gpudoctor.report import document as doc

    evil = "\x1b[2K\x1b[1Anode-ok\x9b31m"
    nodes = [{"name": evil, "rank": 0, "lost": "gone\x1b[8m hidden", "exit_code": None, "status": "error"}]
    meta = {"host": "n0", "started_at": "2026-11-24T10:00:00+00:00", "duration_s": 1.0, "level": "quick"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc.build_cluster([], nodes, {**meta, "source": "live"}, False, False, "slurm")))
    for command in (["report", str(path), "-v"], ["drain", str(path), "--dry-run"]):
        proc = gpudoctor(*command)
        assert "\x1b" not in proc.stdout + proc.stderr and "\x9b" not in proc.stdout + proc.stderr
        assert "\\x1b[2K" in proc.stdout, proc.stdout


def test_a_folder_given_to_from_is_a_usage_error(tmp_path: Path) -> None:
    proc = gpudoctor("check", "--from", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    one_line(proc, "is a folder, not a file gpudoctor reads")


def test_standard_input_that_stays_silent_is_an_error_not_a_wait(monkeypatch) -> None:
    """`--from -` with a writer that holds the pipe open and never writes: one line after the silence limit, as
    for a FIFO."""
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(read_end, "rb", closefd=False) as stdin:
            monkeypatch.setattr(files, "PIPE_WAIT_S", 0.5)
            monkeypatch.setattr("sys.stdin", type("Stdin", (), {"buffer": stdin, "fileno": stdin.fileno})())
            with pytest.raises(snapshot.SnapshotError, match=re.escape("standard input sent nothing for 0.5 s")):
                files.read_input("-", "snapshot", snapshot.SnapshotError)
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize("name,code", [("h100-sxm-8x", 0), ("fault-xid-79", 1)])
def test_a_reader_closing_the_pipe_never_changes_the_exit_code(name: str, code: int) -> None:
    """`gpudoctor check ... | head -1`: the pipe closes before the report is written; the exit code is still the
    verdict's (Rich's own broken-pipe exit status 1 would read as "drain" to a hook)."""
    for fmt in ("console", "json"):
        proc = subprocess.Popen(
            [GPUDOCTOR, "check", "--from", str(SNAPSHOTS / f"{name}.json"), "--format", fmt, "-v"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == code, (fmt, err[-400:])
        assert b"Traceback" not in err and b"Exception ignored" not in err, err[-400:]


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: The NVIDIA driver on your system is too old (found version {digits}). Please update",
        "NVRM: Xid (PCI:0000:01:00): {digits}, pid=1, name=x, Ch 00000001",
    ],
)
def test_a_number_of_thousands_of_digits_is_cut_not_a_crash(tmp_path: Path, line: str) -> None:
    """Python refuses to convert more than 4,300 digits (and takes quadratic time below that): every paste reader
    sees runs of digits cut to the longest number a GPU tool prints."""
    paste = tmp_path / "paste.txt"
    paste.write_text(line.format(digits="9" * 5000) + "\n")
    proc = gpudoctor("check", "--from", str(paste), timeout=60)
    assert proc.returncode in (0, 1, 2) and "internal error" not in proc.stderr, proc.stderr[-300:]
    assert "9" * 41 not in proc.stdout
