"""Monitoring: the light probe, clean stdout, stable metric series, and each format checked by its real
consumer (promtool, a Prometheus text parser, a JUnit parser, the Nagios and node-problem-detector
contracts), plus the integrations in examples/."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
from helpers.common import GPUDOCTOR, LEAN_ALLREDUCE, ROOT, SNAPSHOTS, gpudoctor
from helpers.consumers import promtool
from prometheus_client.parser import text_string_to_metric_families

from gpudoctor import probe

HEALTHY = str(SNAPSHOTS / "h100-sxm-8x.json")
WARNING = str(SNAPSHOTS / "fault-ecc-correctable-high.json")
FAILING = str(SNAPSHOTS / "fault-xid-79.json")
NAGIOS_LINE = re.compile(
    r"^GPUDOCTOR (OK|WARNING|CRITICAL|UNKNOWN) - [^|]+"
    r"( \| ('[^'=]+'=-?[0-9.]+(e[-+]?[0-9]+)?(s|ms|us|%|B|KB|MB|TB|c)?;[^; ]*;[^; ]*;[^; ]*;[^; ]*( |$))+)?$"
)
PLUGIN = """
import os, subprocess, sys
print("plugin says hello at import")
from gpudoctor.api import Result, Status, check

@check("site.noisy", "prints everywhere")
def noisy(ctx):
    print("plugin prints while running")
    sys.stdout.flush()
    os.write(1, b"a C library writes to fd 1\\n")
    subprocess.run(["echo", "a child process writes to stdout"])
    return Result(Status.PASS, "noisy but fine")
"""


@pytest.mark.parametrize("fmt", ["json", "nagios", "npd", "console"])
def test_what_plugins_print_never_reaches_the_report(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "noisy.py").write_text(PLUGIN)
    proc = gpudoctor("check", "--from", HEALTHY, "--checks-dir", str(tmp_path), "--only", "site", "--format", fmt)
    for said in ("hello at import", "prints while running", "C library writes", "child process writes"):
        assert said in proc.stderr and said not in proc.stdout
    if fmt == "json":
        assert json.loads(proc.stdout)["checks"][0]["summary"] == "noisy but fine"
    elif fmt in ("nagios", "npd"):
        assert len(proc.stdout.splitlines()) == 1


def test_metric_names_are_stable_and_what_varies_is_a_label(tmp_path: Path) -> None:
    config = tmp_path / "lean.toml"
    config.write_text(LEAN_ALLREDUCE)
    proc = gpudoctor("check", "--only", "allreduce", "--json", "--device", "cpu", "--config", str(config))
    metrics = json.loads(proc.stdout)["checks"][0]["metrics"]
    busbw = [m for m in metrics if m["name"] == "busbw"]
    assert len(busbw) == 2 * 5, "in place and out of place for each of the five CPU sizes"
    assert {m["labels"]["bytes"] for m in busbw} == {64 * 1024 * 4**k for k in range(5)}
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", m["name"]) for m in metrics)
    assert next(m for m in busbw if m["baseline"])["labels"] == {"bytes": 16 * 2**20, "op": "in_place"}


def test_per_gpu_rows_carry_their_numbers() -> None:
    checks = {c["check_id"]: c for c in json.loads(gpudoctor("check", "--from", HEALTHY, "--json").stdout)["checks"]}
    row = checks["health.temperature"]["rows"][3]
    assert row["index"] == 3 and {"name": "temperature", "value": 41, "unit": "C"}.items() <= row["metrics"][0].items()
    pcie = {m["name"]: m["value"] for m in checks["health.pcie"]["rows"][0]["metrics"]}
    assert (pcie["pcie_generation"], pcie["pcie_width"], pcie["pcie_replays"]) == (5, 16, 9)
    nvlink = checks["health.nvlink"]["rows"][0]["metrics"]
    assert sum(m["name"] == "nvlink_up" for m in nvlink) == 18
    ecc = {m["labels"]["counter"]: m["value"] for m in checks["health.ecc"]["rows"][0]["metrics"]}
    assert ecc["volatile_uncorrected"] == 0


def test_prometheus_textfile_passes_promtool_with_stable_series(tmp_path: Path) -> None:
    tool = promtool()
    path = tmp_path / "gpudoctor.prom"
    proc = gpudoctor("check", "--from", FAILING, "--prom-file", str(path))
    assert proc.returncode == 1
    text = path.read_text()
    check = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    families = {f.name: f for f in text_string_to_metric_families(text)}
    status = families["gpudoctor_check_status"].samples
    failing = [s for s in status if s.value == 1 and s.labels["status"] == "fail"]
    assert [s.labels["check"] for s in failing] == ["health.xid"]
    temperature = next(s for s in families["gpudoctor_temperature_celsius"].samples if s.labels["gpu"] == "3")
    assert (temperature.value, temperature.labels["pci_bus_id"]) == (41.0, "00000000:48:00.0")
    xid = families["gpudoctor_xid_events"].samples
    assert [(s.labels["gpu"], s.labels["xid"], s.value) for s in xid] == [("3", "79", 1.0)]
    assert families["gpudoctor_driver_version_info"].samples[0].labels["value"] == "590.48.01"
    assert families["gpudoctor_torch_version_info"].samples[0].labels["value"] == "2.14.1+cu130"
    assert families["gpudoctor_last_run_timestamp_seconds"].samples[0].value > 1.7e9
    assert [p.name for p in tmp_path.iterdir()] == ["gpudoctor.prom"], "no temporary file left beside it"


def test_a_concurrent_reader_never_sees_a_partial_prom_file(tmp_path: Path) -> None:
    """Writers replace the file over and over while a reader reads it: every read is a whole file."""
    from gpudoctor.report import prometheus

    path = tmp_path / "gpudoctor.prom"
    documents = [json.loads(gpudoctor("check", "--from", s, "--json").stdout) for s in (HEALTHY, FAILING)]
    prometheus.write(str(path), documents[0])
    stop, reads, problems = threading.Event(), [0], []

    def read() -> None:
        while not stop.is_set():
            text = path.read_text()
            names = {f.name for f in text_string_to_metric_families(text)}
            if "gpudoctor_last_run_timestamp_seconds" not in names or "gpudoctor_info" not in names:
                problems.append(len(text))
            reads[0] += 1

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(60):
        prometheus.write(str(path), documents[i % 2])
    stop.set()
    reader.join()
    assert reads[0] > 6 and problems == []
    assert [p.name for p in tmp_path.iterdir()] == ["gpudoctor.prom"]


def test_prom_file_must_be_one_the_collector_reads(tmp_path: Path) -> None:
    proc = gpudoctor("check", "--from", HEALTHY, "--prom-file", str(tmp_path / "metrics.txt"))
    assert proc.returncode == 2 and "reads only *.prom files" in proc.stderr


@pytest.mark.parametrize(
    ("snapshot", "state", "code"), [(HEALTHY, "OK", 0), (WARNING, "WARNING", 1), (FAILING, "CRITICAL", 2)]
)
def test_nagios_plugin_line_and_exit_code(snapshot: str, state: str, code: int) -> None:
    proc = gpudoctor("check", "--from", snapshot, "--format", "nagios")
    line = proc.stdout.splitlines()[0]
    assert NAGIOS_LINE.match(line), line
    assert line.startswith(f"GPUDOCTOR {state} - ") and proc.returncode == code
    if code == 2:
        assert "health.xid: GPU 3: Xid 79" in line
    assert "'temperature_gpu3'=41;;;;" in line


def test_nagios_unknown_for_usage_errors() -> None:
    proc = gpudoctor("check", "--format", "nagios", "--only", "no-such-check")
    assert proc.returncode == 3
    assert proc.stdout.startswith("GPUDOCTOR UNKNOWN - no check or area named 'no-such-check'")
    assert NAGIOS_LINE.match(proc.stdout.splitlines()[0])


@pytest.mark.parametrize(("snapshot", "code"), [(HEALTHY, 0), (WARNING, 0), (FAILING, 1)])
def test_node_problem_detector_plugin(snapshot: str, code: int) -> None:
    proc = gpudoctor("check", "--from", snapshot, "--format", "npd")
    lines = proc.stdout.splitlines()
    assert proc.returncode == code and len(lines) == 1 and len(lines[0]) <= 80
    if code:
        assert lines[0].startswith("health.xid: GPU 3: Xid 79 (GPU has fallen off the bus")
        assert lines[0].endswith("...") or len(lines[0]) < 80


def test_junit_report_read_by_a_junit_parser(tmp_path: Path) -> None:
    from junitparser import Error, Failure, JUnitXml, Skipped

    path = tmp_path / "gpudoctor.xml"
    document = json.loads(gpudoctor("check", "--from", FAILING, "--junit", str(path), "--json").stdout)
    suite = next(iter(JUnitXml.fromfile(str(path))))
    cases = {case.name: case for case in suite}
    assert len(cases) == len(document["checks"])
    assert isinstance(cases["health.xid"].result[0], Failure)
    assert "Xid 79" in cases["health.xid"].result[0].message
    skipped = [c for c in cases.values() if c.result and isinstance(c.result[0], Skipped)]
    assert len(skipped) == document["counts"]["skip"]
    assert not [c for c in cases.values() if c.result and isinstance(c.result[0], Error)]
    assert (suite.failures, suite.skipped) == (1, document["counts"]["skip"])


def test_format_json_is_json_and_they_cannot_disagree() -> None:
    a = json.loads(gpudoctor("check", "--from", HEALTHY, "--format", "json").stdout)
    b = json.loads(gpudoctor("check", "--from", HEALTHY, "--json").stdout)
    assert [c["summary"] for c in a["checks"]] == [c["summary"] for c in b["checks"]]
    proc = gpudoctor("check", "--from", HEALTHY, "--json", "--format", "npd")
    assert proc.returncode == 2 and "two different reports" in proc.stderr


def test_repeated_skips_collapse_and_verbose_shows_them() -> None:
    quiet = gpudoctor("check", "--from", str(SNAPSHOTS / "no-driver.json")).stdout
    assert "17 checks skipped: NVML is not available (library-not-found); see driver.nvml" in quiet
    assert "health.ecc" not in quiet
    verbose = gpudoctor("check", "--from", str(SNAPSHOTS / "no-driver.json"), "-v").stdout
    assert "health.ecc" in verbose and "checks skipped" not in verbose


def test_progress_shows_on_a_terminal_and_never_in_a_pipe(tmp_path: Path) -> None:
    import pty

    config = tmp_path / "lean.toml"
    config.write_text(LEAN_ALLREDUCE)
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [GPUDOCTOR, "check", "--only", "allreduce", "--device", "cpu", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = b""
    while proc.poll() is None or seen == b"":
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=300)
    os.close(leader)
    text = seen.decode(errors="replace")
    assert "allreduce.bandwidth" in text and re.search(r"0:00:\d\d", text), text[-500:]
    piped = gpudoctor("check", "--only", "allreduce", "--device", "cpu", "--config", str(config))
    assert "0:00:" not in piped.stderr


def test_the_python_api_runs_checks_and_renders_every_format() -> None:
    report = probe.run(from_file=FAILING, only=["health"])
    assert report.exit_code == 1 and {r.check_id for r in report.results} >= {"health.xid", "health.ecc"}
    assert probe.render(report, "nagios").startswith("GPUDOCTOR CRITICAL - health.xid")
    assert probe.render(report, "npd").startswith("health.xid: GPU 3")
    assert json.loads(probe.render(report, "json"))["exit_code"] == 1
    assert "<testsuites>" in probe.render(report, "junit")
    assert "gpudoctor_check_status" in probe.render(report, "prometheus")
    assert "FAIL" in probe.render(report, "console")
    with pytest.raises(probe.UsageError, match="no check or area named 'nope'"):
        probe.run(only=["nope"])


# --- examples/ (the Slurm ones run under a real Slurm in tests/test_slurm.py) -------------------------------
def test_node_problem_detector_config_runs_its_rule(tmp_path: Path) -> None:
    """The rule runs the probe: only quick checks, no workload, so that it answers within NPD's timeout (the
    probe's time, 0.2 s here, is bench/startup.py's: docs/BENCHMARKS.md)."""
    from gpudoctor.context import Options
    from gpudoctor.engine.runner import select
    from gpudoctor.registry import discover

    config = json.loads((ROOT / "examples" / "node-problem-detector.json").read_text())
    assert config["plugin"] == "custom" and config["pluginConfig"]["max_output_length"] == 80
    rule = config["rules"][0]
    assert rule["condition"] == config["conditions"][0]["type"]
    args = rule["args"]
    only = args[args.index("--only") + 1 : args.index("--format")]
    chosen = select(discover(entry_points=False).specs, Options(only=only))
    assert chosen and {spec.level for spec in chosen} == {"quick"}, [(s.id, s.level) for s in chosen]
    proc = subprocess.run([GPUDOCTOR, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1) and len(proc.stdout.splitlines()) == 1 and len(proc.stdout.strip()) <= 80


def test_kubernetes_sketch_is_valid_yaml_running_the_probe() -> None:
    import yaml

    documents = list(yaml.safe_load_all((ROOT / "examples" / "kubernetes-daemonset.yaml").read_text()))
    assert [d["kind"] for d in documents] == ["DaemonSet", "Pod"]
    probe_args = documents[0]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--prom-file" in probe_args and "--only health driver" in probe_args
    assert documents[1]["spec"]["initContainers"][0]["command"][:2] == ["gpudoctor", "check"]
