"""Monitoring formats against their real consumers, with a careless site plugin loaded: node_exporter's
textfile collector scraped over HTTP, promtool (metrics lint, alert rules and their unit tests), xmllint with
Jenkins' JUnit schema, the Nagios plugin guidelines' perfdata grammar, node-problem-detector's byte limit, and
the examples run in the environment cron and Kubernetes give them."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.common import FIXTURES, GPUDOCTOR, PLUGINS, ROOT, SNAPSHOTS, gpudoctor
from helpers.consumers import promtool, scrape, xmllint
from prometheus_client.parser import text_string_to_metric_families

from gpudoctor.report import document, exits, junit, nagios, npd

JUNIT_XSD = FIXTURES / "junit-10.xsd"
FAILING = str(SNAPSHOTS / "fault-xid-79.json")
GARBAGE = {
    "site.old-api": "a Result whose status is 'site.old-api'",
    "site.text": "'all good' (a str)",
    "site.nothing": "None",
    "site.bogus-status": "a Result whose status is 'great'",
    "site.mixed": "item 2 of its list: {'status': 'pass'} (a dict)",
    "site.bad-metric": "figure 'depth' has the value [1, 2] (a list)",
    "site.bad-row": "row 1: 'GPU 0 fine' (a str)",
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run judging a failing node with the careless plugin loaded, writing every format at once."""
    folder = tmp_path_factory.mktemp("hostile")
    files = {"json": folder / "report.json", "prom": folder / "gpudoctor.prom", "junit": folder / "junit.xml"}
    proc = gpudoctor(
        "check", "--from", FAILING, "--checks-dir", str(PLUGINS), "--format", "nagios",
        "-o", str(files["json"]), "--prom-file", str(files["prom"]), "--junit", str(files["junit"]),
    )  # fmt: skip
    return {"proc": proc, "folder": folder, **files, "doc": json.loads(files["json"].read_text())}


def by_label(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["check_id"] + (":" + c["aspect"] if c["aspect"] else ""): c for c in doc["checks"]}


# --- 1. a plugin's answer cannot break the report --------------------------------------------------------------
def test_a_plugin_returning_garbage_is_its_own_error_row_and_nothing_else_is_lost(hostile: dict[str, Any]) -> None:
    assert hostile["proc"].returncode == 2, hostile["proc"].stderr  # Nagios CRITICAL: health.xid fails
    assert "Traceback" not in hostile["proc"].stderr
    doc = hostile["doc"]
    jsonschema.validate(doc, document.schema())
    results = by_label(doc)
    for check_id, said in GARBAGE.items():
        assert results[check_id]["status"] == "error", check_id
        assert check_id in results[check_id]["summary"] and said in results[check_id]["summary"], results[check_id]
    assert results["health.xid"]["status"] == "fail" and results["driver.nvml"]["status"] == "pass"
    assert results["site.odd-names"]["status"] == "warn"


def test_a_string_status_of_the_vocabulary_is_taken() -> None:
    from gpudoctor.model import Result, Status
    from gpudoctor.vetting import vetted

    assert vetted(Result("warn", "hot"))[0].status is Status.WARN  # type: ignore[arg-type]


# --- 2 and 6. Prometheus: every name valid, text figures their own series ---------------------------------------
def test_node_exporter_takes_the_report_of_a_hostile_plugin(hostile: dict[str, Any]) -> None:
    text = scrape(hostile["folder"])
    assert re.search(r"^node_textfile_scrape_error 0$", text, re.M), text[-2000:]
    families = {f.name: f for f in text_string_to_metric_families(text)}
    failing = [s.labels["check"] for s in families["gpudoctor_check_status"].samples if s.value == 1]
    assert "health.xid" in failing and "site.text" in failing
    assert len([s for s in families["gpudoctor_check_status"].samples if s.value == 1]) == len(hostile["doc"]["checks"])
    temp = {s.labels.get("gpu", ""): s for s in families["gpudoctor_gpu_temp_celsius"].samples}
    assert temp[""].labels["_1st"] == "1" and temp[""].value == 41 and temp["0"].value == 90
    assert {temp[""].labels["a_b"], temp[""].labels["a_b_2"]} == {"x", "y"}
    assert temp[""].labels["check"] == "site.odd-names" and temp[""].labels["metric_check"] == "mine"
    assert temp[""].labels["label__name__"] == "z" and temp[""].labels["it_s"] == "a'b"
    assert families["gpudoctor_info_figure"].samples[0].value == 3
    assert [s.value for s in families["gpudoctor_check_status_figure"].samples] == [7]
    assert families["gpudoctor_figure_1st_figure"].samples[0].value == 2.5
    assert families["gpudoctor_ecc_count_figure"].samples[0].value == 1234567
    check = subprocess.run([promtool(), "check", "metrics"], input=hostile["prom"].read_text(), text=True,
                           capture_output=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_text_figures_keep_their_own_labelled_series(hostile: dict[str, Any]) -> None:
    families = {f.name: f for f in text_string_to_metric_families(hostile["prom"].read_text())}
    firmware = {s.labels.get("slot", ""): s.labels["value"] for s in families["gpudoctor_firmware_info"].samples}
    assert firmware == {"": 'v1 "beta"\nnext', "b": "v2"}
    assert families["gpudoctor_bios_info"].samples[0].labels["value"] == "96.00.99.00.01"
    assert families["gpudoctor_driver_version_info"].samples[0].labels["value"] == "590.48.01"
    assert families["gpudoctor_torch_version_info"].samples[0].labels["value"] == "2.14.1+cu130"
    run = families["gpudoctor_info"].samples[0].labels
    assert set(run) == {"tool_version", "host", "level"}


def test_a_second_gpudoctor_file_in_the_folder_is_warned_of(tmp_path: Path) -> None:
    """node_exporter 1.5 serves one of two files holding the same series (measured: the older run's value) with
    `node_textfile_scrape_error 0`, logging the rest as "collected before": nothing in monitoring shows it."""
    first = gpudoctor("check", "--from", FAILING, "--prom-file", str(tmp_path / "gpudoctor.prom"))
    assert "warning" not in first.stderr
    second = gpudoctor("check", "--from", FAILING, "--prom-file", str(tmp_path / "one-off.prom"))
    assert f"{tmp_path / 'gpudoctor.prom'} also holds gpudoctor's series" in second.stderr
    assert second.returncode == 1 and (tmp_path / "one-off.prom").exists()


def test_nccl_settings_are_one_series_each() -> None:
    """The all-reduce check's NCCL figures (a GPU run's), once overwriting each other in `gpudoctor_info`."""
    from gpudoctor.judging.allreduce import nccl_metrics
    from gpudoctor.model import Result, Status
    from gpudoctor.report import prometheus

    env = {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "ib0", "NCCL_DEBUG": "WARN"}
    result = Result(Status.PASS, "fine", metrics=nccl_metrics({"nccl_version": "2.27.7", **env}), check_id="nccl.x")
    doc = document.build([result], {"host": "n1", "level": "standard", "started_at": "2026-11-24T00:00:00+00:00",
                                    "duration_s": 1.0}, 0, False)  # fmt: skip
    families = {f.name: f for f in text_string_to_metric_families(prometheus.render(doc))}
    series = {s.labels["variable"]: s.labels["value"] for s in families["gpudoctor_nccl_env_info"].samples}
    assert series == env
    assert families["gpudoctor_nccl_version_info"].samples[0].labels["value"] == "2.27.7"


# --- 3. Nagios perfdata ------------------------------------------------------------------------------------------
PERF_ITEM = re.compile(
    r"(?:'(?P<quoted>(?:[^']|'')+)'|(?P<plain>[^'= ][^= ]*))=(?P<value>-?[0-9.]+|U)"
    r"(?P<uom>s|ms|us|%|B|KB|MB|TB|c)?(?:;[-0-9.:~@]*){0,4}"
)


def parse_perfdata(text: str) -> list[tuple[str, str, str]]:
    """The perfdata grammar of the Nagios plugin guidelines: `'label'=value[UOM];warn;crit;min;max`, items
    separated by one space, a quote inside a quoted label written as two, no `=` in a label, a value of
    `-0-9.` characters (no exponent) or `U`. Raises on anything else."""
    items, position = [], 0
    while position < len(text):
        match = PERF_ITEM.match(text, position)
        assert match, f"not perfdata at {position}: {text[position : position + 60]!r}"
        label = match["quoted"].replace("''", "'") if match["quoted"] else match["plain"]
        items.append((label, match["value"], match["uom"] or ""))
        position = match.end()
        assert position == len(text) or text[position] == " ", text[position : position + 40]
        position += 1
    return items


def nagios_parts(line: str) -> tuple[str, str]:
    assert line.count("\n") == 0 and len(line.encode()) <= nagios.NAGIOS_BYTES
    head, _, perf = line.partition(" | ")
    assert "|" not in head
    return head, perf


def test_nagios_perfdata_is_exact_and_quoted(hostile: dict[str, Any]) -> None:
    head, perf = nagios_parts(hostile["proc"].stdout.strip())
    assert head.startswith("GPUDOCTOR CRITICAL - health.xid:")
    figures = {label: (value, uom) for label, value, uom in parse_perfdata(perf)}
    assert figures["ecc_count"] == ("1234567", "")
    assert figures["fan_speed"] == ("1234567", "")
    assert figures["tiny"] == ("0.000001234", "")
    assert figures["huge"] == ("12345678901234567890", "")
    assert figures["weird_quote"] == ("3", "")
    assert figures["gpu_temp_gpu0"] == ("90", "")
    assert figures["gpu_temp_1_x_y_mine_z_a'b"] == ("41", "")


def test_nagios_core_reads_the_line_as_gpudoctor_means_it(hostile: dict[str, Any], tmp_path: Path) -> None:
    """Nagios Core 4.4 runs the plugin and splits its answer: the state from the exit code, the output and the
    perfdata exactly as written."""
    from helpers.consumers import nagios_check

    state, output, figures = nagios_check(f"{GPUDOCTOR} check --from {FAILING} --checks-dir {PLUGINS} --format nagios",
                                          tmp_path)  # fmt: skip
    head, perf = nagios_parts(hostile["proc"].stdout.strip())
    assert (state, output, figures) == ("CRITICAL", head, perf)
    assert dict((label, value) for label, value, _ in parse_perfdata(figures))["ecc_count"] == "1234567"


def test_nagios_keeps_failing_and_warning_figures_first_within_its_limit() -> None:
    doc = _crowded_report()
    line, code = nagios.line(doc), exits.nagios_code(doc)
    assert code == 2
    head, perf = nagios_parts(line)
    assert head.startswith("GPUDOCTOR CRITICAL - health.xid: health.xid fail")
    labels = [label for label, _, _ in parse_perfdata(perf)]
    assert labels[:2] == ["xid_events_gpu3_79", "remapped_rows_gpu5"], labels[:4]
    assert len(labels) < 64 * 18 + 2  # the NVLink counters that do not fit are left to --prom-file


def _crowded_report() -> dict[str, Any]:
    """A passing NVLink counter check that fills the budget, run before a warning and a failure."""
    counters = [
        {"name": "nvlink_errors", "value": 10**9 + k, "unit": "", "labels": {"link": k % 18, "counter": "replay"}}
        for k in range(18)
    ]
    rows = [
        {"status": "pass", "summary": "ok", "index": gpu, "uuid": None, "pci_bus_id": None, "name": None, "node": None,
         "metrics": counters, "peer": None, "confirmed": None}
        for gpu in range(64)
    ]  # fmt: skip

    def result(check_id: str, status: str, metric: dict[str, Any], index: int) -> dict[str, Any]:
        row = {**rows[0], "status": status, "index": index, "metrics": [metric]}
        return {"check_id": check_id, "status": status, "summary": f"{check_id} {status}", "aspect": None,
                "remediation": None, "metrics": [], "rows": [row], "duration_s": 0.1, "title": check_id}  # fmt: skip

    checks = [
        {"check_id": "health.nvlink", "status": "pass", "summary": "ok", "aspect": None, "remediation": None,
         "metrics": [], "rows": rows, "duration_s": 0.1, "title": "NVLink"},
        result("health.remapped-rows", "warn", {"name": "remapped_rows", "value": 3, "unit": "", "labels": {}}, 5),
        result("health.xid", "fail", {"name": "xid_events", "value": 1, "unit": "", "labels": {"xid": 79}}, 3),
    ]  # fmt: skip
    counts = {s: sum(c["status"] == s for c in checks) for s in ("pass", "warn", "fail", "skip", "error", "timeout")}
    return {"status": "fail", "exit_code": 1, "counts": counts, "checks": checks, "duration_s": 1.0,
            "started_at": "2026-11-24T00:00:00+00:00", "host": "node1"}  # fmt: skip


# --- 4. node-problem-detector -----------------------------------------------------------------------------------
def test_node_problem_detector_line_fits_its_limit_in_bytes() -> None:
    doc = _crowded_report()
    doc["checks"][2]["summary"] = "Xid 79 on GPU 3 — the GPU fell off the bus: ünïcödé " + "é" * 80
    line, code = npd.line(doc), exits.npd_code(doc)
    assert code == 1 and line.startswith("health.xid: Xid 79 on GPU 3 — the GPU")
    raw = line.encode()
    assert len(raw) <= npd.NPD_LINE and raw.decode() == line


# --- 5. JUnit ----------------------------------------------------------------------------------------------------
def test_junit_with_control_characters_validates_against_jenkins_schema(hostile: dict[str, Any]) -> None:
    check = subprocess.run([xmllint(), "--noout", "--schema", str(JUNIT_XSD), str(hostile["junit"])],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stderr
    text = hostile["junit"].read_text()
    assert "\x07" not in text and "\x1b" not in text and "\x00" not in text
    assert "&lt;b&gt;loud&lt;/b&gt;" in text and "ünïcödé" in text


def test_report_files_are_readable_by_the_users_that_consume_them(hostile: dict[str, Any]) -> None:
    """Jenkins' agent, a web server or node_exporter read them as another user: the process's umask decides
    (the tests run under 022), not a temporary file's 0600."""
    for name in ("json", "junit", "prom"):
        assert hostile[name].stat().st_mode & 0o777 == 0o644, name


def test_junit_is_well_formed_for_every_character_a_check_may_say() -> None:
    import xml.etree.ElementTree as ET

    doc = _crowded_report()
    doc["checks"][2]["summary"] = "".join(chr(c) for c in range(0, 0x3000, 7)) + "\ud800\U0001f600\ufffe"
    root = ET.fromstring(junit.render(doc).encode())
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and "\U0001f600" in failure.get("message", "")


def test_values_the_guidelines_have_no_number_for_are_unknown() -> None:
    assert nagios.perf_value(math.nan) == "U" and nagios.perf_value(math.inf) == "U"
    assert nagios.perf_value(1e-7) == "0.0000001" and nagios.perf_value(-2.50) == "-2.5"


# --- 9. alert rules ----------------------------------------------------------------------------------------------
def test_the_alert_rules_load_and_fire_on_real_series(tmp_path: Path) -> None:
    tool = promtool()
    rules = ROOT / "examples" / "prometheus-alerts.yml"
    check = subprocess.run([tool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    shutil.copy(rules, tmp_path / rules.name)
    cases = Path(__file__).parent / "fixtures" / "prometheus-alerts.test.yml"
    shutil.copy(cases, tmp_path / cases.name)
    proc = subprocess.run([tool, "test", "rules", cases.name], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_alert_tests_use_series_gpudoctor_writes() -> None:
    """The rule tests' input series are names and labels the Prometheus output really has (else the rules
    could test fine against series no node ever writes)."""
    import yaml

    from gpudoctor import probe

    written = {f.name: f for f in text_string_to_metric_families(probe.render(probe.run(from_file=FAILING),
                                                                              "prometheus"))}  # fmt: skip
    cases = yaml.safe_load((Path(__file__).parent / "fixtures" / "prometheus-alerts.test.yml").read_text())
    for test in cases["tests"]:
        for series in test["input_series"]:
            name, _, labels = series["series"].partition("{")
            family = written.get(name) or written[name.removesuffix("_info")]
            keys = set(re.findall(r"(\w+)=", labels)) - {"instance"}  # the scrape's own label
            known = {k for sample in family.samples for k in sample.labels}
            assert keys <= known, (name, keys - known)


# --- 7. cron -----------------------------------------------------------------------------------------------------
def test_cron_example_runs_under_the_real_cron(tmp_path: Path) -> None:
    """Debian's cron runs the example's line (the folder of the .prom file changed, nothing else) with the
    environment it gives jobs: PATH=/usr/bin:/bin, so the example must find gpudoctor itself. The old line,
    with no PATH, never wrote its file (exit 127, hidden by its redirections)."""
    from helpers.consumers import cron_runs

    text = (ROOT / "examples" / "gpudoctor.cron").read_text().replace("/var/lib/node_exporter/textfile", str(tmp_path))
    assert cron_runs(text, tmp_path / "gpudoctor.prom"), "cron ran no gpudoctor that wrote its file"
    check = subprocess.run([promtool(), "check", "metrics"], input=(tmp_path / "gpudoctor.prom").read_text(),
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


# --- 8. Kubernetes --------------------------------------------------------------------------------------------
def test_kubernetes_manifests_run_as_the_cluster_would_run_them() -> None:
    import yaml

    documents = list(yaml.safe_load_all((ROOT / "examples" / "kubernetes-daemonset.yaml").read_text()))
    daemonset, pod = documents
    spec = daemonset["spec"]["template"]["spec"]
    probe = spec["containers"][0]
    assert "SYSLOG" in probe["securityContext"]["capabilities"]["add"], "dmesg_restrict=1 hides the Xids"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert "system.shm" not in probe["args"][0], "a pod's /dev/shm is not the node's"
    assert pod["spec"]["restartPolicy"] == "Never"
    shm = [v["name"] for v in pod["spec"]["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
    for container in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]:
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        assert mounts.get("/dev/shm") in shm, container["name"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]


def test_without_cap_syslog_the_xid_scan_says_it_cannot_read_them() -> None:
    """The DaemonSet's case: kernel.dmesg_restrict=1 and root without CAP_SYSLOG (a container not granted it):
    the kernel log is read as the probe reads it, then judged."""
    import sys

    from helpers.common import load_snapshot, usable_gpus

    from gpudoctor.api import Status
    from gpudoctor.checks.health import judge_xid

    if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() != "1" or not shutil.which("setpriv"):
        pytest.skip("needs kernel.dmesg_restrict=1 and setpriv to drop CAP_SYSLOG")
    read = "import json; from gpudoctor.facts.system import read_kernel_log; print(json.dumps(read_kernel_log()))"
    argv = ["setpriv", "--inh-caps=-syslog", "--bounding-set=-syslog", sys.executable, "-c", read]
    kernel_log = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    assert not kernel_log["readable"] and "Operation not permitted" in kernel_log["reason"]
    result = judge_xid(kernel_log, usable_gpus(load_snapshot("h100-sxm-8x")))
    assert result.status is Status.SKIP and result.summary.startswith("Xids not readable"), result.summary
    assert result.remediation is not None and "CAP_SYSLOG" in result.remediation.why
