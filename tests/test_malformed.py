"""Every malformed field a clean error; numbers and widths (issue 47). A snapshot, a baseline or a config whose
fields have the wrong shape or type is refused in one line naming the field, and a corrupt budget history is a
warning, then ignored and rewritten; JSON nested deep in a paste is left unread, never a RecursionError; numbers
are range-checked where they enter, and digits are ASCII digits; a COLUMNS no terminal has falls back to a width
that shows the report; a reader closing the pipe never changes a command's exit code. Never exit 3 ("internal
error"), never a traceback."""

from __future__ import annotations

import copy
import io
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.common import BENCH, FIXTURES, GPUDOCTOR, PASTES, SNAPSHOTS, gpudoctor
from helpers.drainreport import cluster_report, slurm_stand_ins

from gpudoctor import baseline, cli, config, probe
from gpudoctor.engine import Request, budget
from gpudoctor.errors import InputError
from gpudoctor.facts.snapshot import SnapshotError
from gpudoctor.paste import inputs, nccl_tests
from gpudoctor.registry import discover

HEALTHY = SNAPSHOTS / "h100-sxm-8x.json"  # every check passes: exit 0
FAILING = SNAPSHOTS / "fault-xid-79.json"  # exit 1
MALFORMED = FIXTURES / "malformed"
WEEK = 7 * 24 * 3600


def one_line(proc: subprocess.CompletedProcess[str], *words: str, code: int = 2) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-800:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-800:]
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-800:]
    for word in words:
        assert word in proc.stderr, proc.stderr


def refused(exc: Exception, *words: str) -> None:
    said = str(exc)
    assert said and "\n" not in said.strip(), said
    for word in words:
        assert word in said, said


# ------------------------------------------------------------------------------------------------------ snapshots

# A paste holding every kind of section a snapshot made from a paste has: GPUs and torch (an issue body), an
# nccl-tests run, a dcgmi diag, an nvbandwidth run, an NCCL log, an error signature, and a conflict (the issue's
# driver versions).
COMBINED = (
    PASTES / "written" / "issue-body-driver-470-torch-cu121-2x3090.md",
    BENCH / "nccl-tests" / "h100-sxm-16gpu-2node-allreduce.txt",
    BENCH / "dcgmi" / "a10g-1gpu-diag-r2-v4.4.2-all-pass.txt",
    BENCH / "nvbandwidth" / "h100-8gpu-h2d-d2h-sm-partial.txt",
    PASTES / "nccl" / "info-2.18.5-roce-h800-two-nodes.txt",
    PASTES / "errors" / "cuda-error-802-hf-jobs-h200-runtimeerror.txt",
)


@pytest.fixture(scope="module")
def pasted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The snapshot `--from` makes of that paste, as it would be saved (JSON)."""
    path = tmp_path_factory.mktemp("paste") / "combined.txt"
    path.write_text("\n\n".join(part.read_text() for part in COMBINED))
    made = json.loads(json.dumps(inputs.load(str(path))))
    assert made["paste"]["signatures"] and made["paste"]["conflicts"] and made["capture"]["kinds"]
    assert {"nccl_tests", "nvbandwidth", "dcgm_diag"} <= set(made["benchmarks"]) and made["nccl"]
    return made


def _signature_id(s: dict[str, Any]) -> None:
    s["paste"]["signatures"][0].pop("id")


def _conflict_line(s: dict[str, Any]) -> None:
    s["paste"]["conflicts"][0]["values"][0]["line"] = "3"


CHANGES = {
    "paste.signatures": lambda s: s["paste"].update(signatures="CUDA error: system not yet initialized"),
    "paste.conflicts": lambda s: s["paste"].update(conflicts=5),
    "capture.file": lambda s: s["capture"].pop("file"),
    "paste.signatures[0].id": _signature_id,
    "paste.conflicts[0].values[0].line": _conflict_line,
    "capture.kinds[0]": lambda s: s["capture"].update(kinds=[5]),
    "paste.kinds.nvidia-smi": lambda s: s["paste"]["kinds"].update({"nvidia-smi": "31"}),
}


@pytest.mark.parametrize("field", CHANGES)
def test_a_malformed_paste_or_capture_section_is_one_line_naming_the_field(
    pasted: dict[str, Any], tmp_path: Path, field: str
) -> None:
    snapshot = copy.deepcopy(pasted)
    CHANGES[field](snapshot)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot))
    one_line(gpudoctor("check", "--from", str(path)), field)


def places(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: a list's first item only, the first three facts of a paste's `facts_from` (one
    origin per fact, all of one shape)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        keys = list(value)[:3] if prefix[-1:] == ("facts_from",) else list(value)
        for key in keys:
            found += places(value[key], (*prefix, key))
    elif isinstance(value, list) and value:
        found += places(value[0], (*prefix, 0))
    return found


GONE = object()


def wrong_kinds(value: Any) -> list[Any]:
    """A value of each JSON kind `value` is not, and its absence."""
    kinds: dict[type, Any] = {str: "x", int: 7, list: ["x"], dict: {"x": 1}, type(None): None}
    mine = int if isinstance(value, float | bool) else type(value)
    return [junk for kind, junk in kinds.items() if kind is not mine] + [GONE]


def mutant(snapshot: dict[str, Any], place: tuple[Any, ...], junk: Any) -> dict[str, Any]:
    changed = copy.deepcopy(snapshot)
    parent = changed
    for step in place[:-1]:
        parent = parent[step]
    if junk is GONE:
        parent.pop(place[-1]) if isinstance(parent, dict) else parent.clear()
    else:
        parent[place[-1]] = junk
    return changed


def render_everywhere(report: probe.Report) -> None:
    for fmt in ("console", "json", "nagios", "npd", "junit", "prometheus", "html"):
        probe.render(report, fmt, verbose=True)


def refused_or_judged(snapshot: dict[str, Any], chosen: list[tuple[Any, ...]], folder: Path) -> int:
    """Each place in `chosen` replaced by a value of every other kind, or taken away: each mutant is refused with
    one line, or judged and rendered in every format. How many were judged."""
    path = folder / "mutant.json"
    judged = 0
    for place in chosen:
        parent = snapshot
        for step in place[:-1]:
            parent = parent[step]
        for junk in wrong_kinds(parent[place[-1]]):
            path.write_text(json.dumps(mutant(snapshot, place, junk)))
            try:
                inputs.load(str(path))
            except SnapshotError as exc:
                refused(exc)
                continue
            try:
                report = probe.run(from_file=str(path))
                render_everywhere(report)
            except Exception as exc:
                raise AssertionError(f"{place} = {junk!r}: {type(exc).__name__}: {exc}") from exc
            assert report.exit_code in (0, 1)
            judged += 1
    return judged


def test_every_field_of_a_pasted_snapshot_of_the_wrong_kind_is_refused_or_judged(
    pasted: dict[str, Any], tmp_path: Path
) -> None:
    """The sections a paste adds: capture, paste and nccl at every depth, the benchmarks to their runs' fields (the
    slow variant goes deeper). A paste's own sections are never let through malformed."""
    shallow = [p for p in places(pasted) if p[0] == "benchmarks" and len(p) < 4]
    chosen = [p for p in places(pasted) if p[0] in ("capture", "paste", "nccl")] + shallow
    assert refused_or_judged(pasted, chosen, tmp_path), "some mutants (a field the judges never read) are judged"


@pytest.mark.slow
def test_every_field_of_a_pasted_benchmark_of_the_wrong_kind_is_refused_or_judged(
    pasted: dict[str, Any], tmp_path: Path
) -> None:
    refused_or_judged(pasted, [p for p in places(pasted) if p[0] == "benchmarks" and len(p) >= 4], tmp_path)


# ----------------------------------------------------------------------------------------- JSON deep in a paste

DEEP = 100_000  # past the C decoder's recursion limit: json raises RecursionError
PARSED = 900  # under it: the decoder returns the value, and a recursive walk over it would fail


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# Each JSON a paste reader walks, with a value nested deep where the reader looks (inside the object, after its
# valid first keys), or after a whole valid block of it (a real one, tests/fixtures/benchmarks).
DEEP_JSON = {
    "dcgmi": '{{\n  "DCGM GPU Diagnostic": {{"version": "3.3.9", "test_categories": [{{"tests": {deep}}}]}}\n}}',
    "nvbandwidth": '{{\n  "nvbandwidth": {{"Driver Version": "565.02", "testcases": [{{"name": "x", '
    '"bandwidth_matrix": {deep}}}]}}\n}}',
    "nccl-tests": '{{"version": 1, "config": {{"devices": {deep}}}, "results": []}}',
}
VALID_FIRST = {
    "dcgmi": BENCH / "dcgmi" / "16gb-pcie-gen3-4gpu-diag-json-v1.7-dcgm-test-string.json",
    "nvbandwidth": BENCH / "nvbandwidth" / "unknown-1gpu-pcie-json-dcgm-test-input.json",
    "nccl-tests": BENCH / "nccl-tests" / "h100-sxm-8gpu-allreduce-nvls.txt",
}


@pytest.mark.parametrize("kind", DEEP_JSON)
@pytest.mark.parametrize("levels", [DEEP, PARSED])
@pytest.mark.parametrize("after_valid", [False, True], ids=["alone", "after-a-valid-block"])
def test_json_nested_deep_in_a_paste_is_left_unread(tmp_path: Path, kind: str, levels: int, after_valid: bool) -> None:
    text = DEEP_JSON[kind].format(deep=nested(levels))
    if after_valid:
        text = VALID_FIRST[kind].read_text() + "\n\n" + text
    path = tmp_path / "paste.txt"
    path.write_text(text)
    try:
        report = probe.run(from_file=str(path))
    except SnapshotError as exc:
        refused(exc)
        return
    assert report.exit_code in (0, 1)
    render_everywhere(report)


def test_deep_json_under_a_dcgmi_key_is_no_internal_error(tmp_path: Path) -> None:
    path = tmp_path / "diag.txt"
    path.write_text(DEEP_JSON["dcgmi"].format(deep=nested(DEEP)))
    proc = gpudoctor("check", "--from", str(path))
    assert proc.returncode in (0, 1, 2) and "internal error" not in proc.stderr, proc.stderr[-600:]


# ------------------------------------------------------------------------------------------------ budget history

HISTORIES = {
    "[]": "the history",
    '{"cpu": []}': "cpu",
    '{"cpu": {"allreduce.bandwidth": {"0.5": 3.1}}}': "cpu.allreduce.bandwidth",
    '{"cpu": {"allreduce.bandwidth": ["x"]}}': "cpu.allreduce.bandwidth[0]",
    '{"cpu": {"allreduce.bandwidth": [[0.5, "3.1"]]}}': "cpu.allreduce.bandwidth[0][1]",
    '{"cpu": ' + nested(DEEP) + "}": "nested too deep",
    '{"cpu": ' + nested(200) + "}": "nested too deep",
    '{"cpu": {"allreduce.bandwidth": [[NaN, 1]]}}': "not valid JSON",
    '{"cpu": ': "not valid JSON",
}


@pytest.mark.parametrize("text", HISTORIES, ids=[f"history{n}" for n in range(len(HISTORIES))])
def test_a_corrupt_budget_history_is_a_warning_then_ignored_and_rewritten(tmp_path: Path, capsys, text: str) -> None:
    path = tmp_path / budget.HISTORY_NAME
    path.write_text(text)
    assert budget.read_history(path) == {}
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: warning: ") and len(err.strip().splitlines()) == 1, err
    assert HISTORIES[text] in err and str(path) in err and "rewritten" in err, err
    learnt = budget.Budget(60.0, 0.0, "cpu", 1.5, history={}, history_path=path)
    learnt.learn("allreduce.bandwidth", 1.0, 4.2)
    learnt.save()
    assert budget.read_history(path) == {"cpu": {"allreduce.bandwidth": [[1.0, 4.2]]}}
    assert capsys.readouterr().err == ""


def test_a_budget_history_that_is_not_text_or_too_large_is_a_warning(tmp_path: Path, capsys) -> None:
    path = tmp_path / budget.HISTORY_NAME
    for data in (b"\xff\xfe\x00\xd8" * 3, b"{" + b" " * (2 << 20) + b"}"):
        path.write_bytes(data)
        assert budget.read_history(path) == {}
        err = capsys.readouterr().err
        assert err.startswith("gpudoctor: warning: ") and len(err.strip().splitlines()) == 1, err


def test_a_run_under_a_budget_with_a_corrupt_history_warns_and_rewrites_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = state / "gpudoctor" / budget.HISTORY_NAME
    path.parent.mkdir(parents=True)
    path.write_text('{"cpu": []}')
    proc = gpudoctor("check", "--only", "torch.import", "--budget", "120", env={"XDG_STATE_HOME": str(state)})
    assert proc.returncode in (0, 1), proc.stderr[-600:]
    assert "internal error" not in proc.stderr and "gpudoctor: warning: " in proc.stderr, proc.stderr[-600:]
    assert isinstance(json.loads(path.read_text()), dict)


# -------------------------------------------------------------------------------------------------------- baselines

GOOD_BASELINE = {
    "schema": "gpudoctor.baseline",
    "schema_version": 1,
    "tool_version": "0.1.0",
    "saved_at": "2026-11-22T10:00:00+00:00",
    "host": "node01",
    "gpus": ["NVIDIA H100 80GB HBM3"],
    "figures": {"allreduce.bandwidth:busbw": 370.5},
}
BASELINES = [
    ({"figures": []}, "figures"),
    ({"figures": {"allreduce.bandwidth:busbw": [[370.5]]}}, "figures.allreduce.bandwidth:busbw"),
    ({"figures": {"allreduce.bandwidth:busbw": -1}}, "allreduce.bandwidth:busbw"),
    ({"host": 5}, "host"),
    ({"gpus": "NVIDIA H100"}, "gpus"),
    ({"gpus": [["NVIDIA H100"]]}, "gpus[0]"),
    ({"saved_at": {"at": 1}}, "saved_at"),
    ({"schema_version": "1"}, "schema_version"),
]


@pytest.mark.parametrize("change,field", BASELINES, ids=[field for _, field in BASELINES])
def test_a_malformed_baseline_is_one_line_naming_the_field(tmp_path: Path, change: dict, field: str) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({**GOOD_BASELINE, **change}))
    with pytest.raises(baseline.BaselineError) as caught:
        baseline.load(path)
    refused(caught.value, field)


def test_a_baseline_nested_deep_is_one_line_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(GOOD_BASELINE)[:-1] + ', "x": ' + nested(DEEP) + "}")
    one_line(gpudoctor("check", "--from", str(HEALTHY), "--baseline", str(path)), "nested too deep")
    path.write_text(json.dumps({**GOOD_BASELINE, "gpus": 5}))
    one_line(gpudoctor("check", "--from", str(HEALTHY), "--baseline", str(path)), "gpus")


# ----------------------------------------------------------------------------------------------------------- config

CONFIGS = [
    ("only = [1]\n", ["only[0]"]),
    ("skip = [{a = 1}]\n", ["skip[0]"]),
    ("checks_dir = [1]\n", ["checks_dir[0]"]),
    ("timeout = 9007199254740992\n", ["timeout = 9007199254740992 is outside 0..604800"]),
    ("timeout = 1e10\n", ["timeout", "0..604800"]),
    ("budget = 1e10\n", ["budget", "0..604800"]),
    ("expect_gpus = 100000\n", ["expect_gpus = 100000 is outside 0..1024"]),
    ("[checks.cluster.nodes]\njoin_timeout = 1e9\n", ["checks.cluster.nodes.join_timeout", "0..604800"]),
    ("[checks.cluster.nodes]\nreport_timeout = 1e9\n", ["report_timeout", "0..604800"]),
    ("[checks.load.concurrent]\nseconds = 1e9\n", ["checks.load.concurrent.seconds", "0..604800"]),
    ("[checks.load.concurrent]\nsample_s = 1e9\n", ["sample_s", "0..604800"]),
    ("[checks.allreduce.bandwidth]\ntimeout = 1e10\n", ["checks.allreduce.bandwidth.timeout", "0..604800"]),
    ("[checks.allreduce.bandwidth]\ncpu_ranks = 100000\n", ["cpu_ranks = 100000 is outside 1..1024"]),
    ("x = " + nested(5000) + "\n", ["nested too deep"]),
]


@pytest.mark.parametrize("text,words", CONFIGS, ids=[f"config{n}" for n in range(len(CONFIGS))])
def test_a_malformed_config_is_one_line_naming_the_key_and_the_range(tmp_path: Path, text: str, words: list) -> None:
    path = tmp_path / "gpudoctor.toml"
    path.write_text(text)
    with pytest.raises(config.ConfigError) as caught:
        config.validate_checks(config.load(path), discover(entry_points=False).specs)
    refused(caught.value, *words)


def test_the_largest_config_numbers_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "gpudoctor.toml"
    path.write_text(
        f"timeout = {WEEK}\nbudget = {WEEK}\nexpect_gpus = 1024\n[checks.cluster.nodes]\njoin_timeout = {WEEK}"
    )
    config.validate_checks(config.load(path), discover(entry_points=False).specs)


def test_a_timeout_past_its_range_in_the_config_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "gpudoctor.toml"
    path.write_text("timeout = 9007199254740992\n")
    one_line(gpudoctor("check", "--from", str(HEALTHY), "--config", str(path)), "timeout", "0..604800")


# ------------------------------------------------------------------------------------- numbers on the command line

NUMBERS = [
    (["--timeout", "1e10"], "0..604800"),
    (["--timeout", str(WEEK + 1)], "0..604800"),
    (["--timeout", "0"], "0..604800"),
    (["--timeout", "nan"], "0..604800"),
    (["--timeout", "inf"], "0..604800"),
    (["--timeout", "²"], "not a number"),
    (["--timeout", "１０"], "not a number"),
    (["--timeout", "1_000"], "not a number"),
    (["--budget", "1e10"], "0..604800"),
    (["--budget", "٣"], "not a number"),
    (["--expect-gpus", "²"], "not a whole number"),
    (["--expect-gpus", "１"], "not a whole number"),
    (["--expect-gpus", "100000"], "0..1024"),
    (["--expect-gpus", "9" * 5000], "0..1024"),
]


@pytest.mark.parametrize("argv,words", NUMBERS, ids=[" ".join(argv)[:30] for argv, _ in NUMBERS])
def test_a_number_no_run_can_take_on_the_command_line_is_one_line(argv: list[str], words: str) -> None:
    with pytest.raises(InputError) as caught:
        cli.build_parser().parse_args(["check", *argv])
    refused(caught.value, argv[0], words)


def test_the_command_line_takes_the_largest_numbers() -> None:
    args = cli.build_parser().parse_args(["check", "--timeout", str(WEEK), "--budget", "1e5", "--expect-gpus", "1024"])
    assert (args.timeout, args.budget, args.expect_gpus) == (WEEK, 1e5, 1024)


@pytest.mark.parametrize("name,value", [("timeout", 1e10), ("budget", -1.0), ("expect_gpus", 10**6), ("timeout", True)])
def test_the_python_api_refuses_the_same_numbers(name: str, value: Any) -> None:
    with pytest.raises(InputError) as caught:
        Request(**{name: value})
    refused(caught.value, name)


def test_the_python_api_refuses_a_timeout_no_timer_takes() -> None:
    with pytest.raises(InputError) as caught:
        probe.run(from_file=str(HEALTHY), timeout=1e10)
    refused(caught.value, "timeout", "0..604800")


def test_the_longest_timeout_breaks_no_check_on_a_live_node() -> None:
    """`--timeout 1e10` made every check "break: OverflowError" (a timer's limit) on a passing node: the longest the
    range lets through must run as any other."""
    proc = gpudoctor("check", "--timeout", str(WEEK), "--only", "health.xid", "system.shm", "-v")
    assert proc.returncode in (0, 1), proc.stderr[-600:]
    assert "OverflowError" not in proc.stdout and "broke" not in proc.stdout, proc.stdout[-1200:]


# ---------------------------------------------------------------------------------------------------------- digits

NCCL_TESTS_RUN = BENCH / "nccl-tests" / "h100-sxm-16gpu-2node-allreduce.txt"
COMMAND = "$ mpirun -np 16 -x NCCL_IB_DISABLE={} -x NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 1"


@pytest.mark.parametrize("value", ["²", "１", "1²", "٣"])
def test_an_nccl_setting_of_digits_no_shell_writes_is_not_read_as_a_number(tmp_path: Path, value: str) -> None:
    """`-x NCCL_IB_DISABLE=²` broke the check (int('²')); NCCL reads such a value as no number (strtol): the setting
    is not one gpudoctor reads either, on the command line and in -J's "env"."""
    assert nccl_tests.settings(COMMAND.format(value)) == {"NCCL_DEBUG": "INFO"}
    run = nccl_tests.from_json({"results": [], "env": [f"NCCL_IB_DISABLE={value}", "NCCL_ALGO=Ring"]}, 0)
    assert run["env"] == {"NCCL_ALGO": "Ring"}
    path = tmp_path / "run.txt"
    path.write_text(COMMAND.format(value) + "\n" + NCCL_TESTS_RUN.read_text())
    report = probe.run(from_file=str(path))
    [result] = [r for r in report.results if r.check_id == "bench.nccl-tests"]
    assert result.status.value != "error", result.summary
    assert "NCCL_IB_DISABLE" not in result.summary


def test_digits_of_other_scripts_are_no_number_in_an_nccl_tests_row() -> None:
    row = "1048576  262144  float  sum  -1  60.61  17.30  32.44  0  59.08  17.75  33.28  0"  # all_reduce_perf's
    assert nccl_tests.parse_row(row, None) is not None
    for digit in ("１", "٣", "²"):
        assert nccl_tests.parse_row(row.replace("1", digit), None) is None


READ_FIXTURES = sorted(
    path
    for folder in (PASTES, BENCH)
    for path in folder.rglob("*")
    if path.suffix in (".txt", ".md", ".json") and path.is_file() and not path.stem.isupper()
)


@pytest.mark.parametrize("digit", ["²", "１", "٣"])
def test_every_reader_reads_digits_of_other_scripts_without_breaking(digit: str) -> None:
    """Every paste fixture with its digits (all, or every digit after a number's first) written in another script:
    superscript two (Python's isdigit says yes, int() refuses it), fullwidth one and Arabic-Indic three (int()
    takes both). Each is read or refused in one line, never an exception."""
    for path in READ_FIXTURES:
        text = path.read_text(errors="replace")
        for changed in (re.sub("[0-9]", digit, text), re.sub("(?<=[0-9])[0-9]", digit, text)):
            try:
                inputs.pasted_text(path.name, changed.encode())
            except SnapshotError as exc:
                refused(exc)
            except Exception as exc:
                raise AssertionError(f"{path.name} with {digit}: {type(exc).__name__}: {exc}") from exc


CODE = [Path(cli.__file__).parent, Path(cli.__file__).parent.parent / "checks"]


def test_no_digit_test_takes_the_digits_of_other_scripts() -> None:
    """str.isdigit() says yes to "²" and "１": a number read from outside is ASCII digits (`isascii() and isdigit()`,
    or [0-9]), or int() breaks on it or reads what no tool meant."""
    careless = []
    for folder in CODE:
        for path in sorted(folder.rglob("*.py")):
            lines = path.read_text().splitlines()
            for number, line in enumerate(lines, 1):
                tested = re.search(r"\.is(?:digit|decimal|numeric)\(\)", line)
                if tested and ".isascii()" not in lines[number - 2] + line:
                    careless.append(f"{path.name}:{number}: {line.strip()}")
    assert not careless, "\n".join(careless)


# ----------------------------------------------------------------------------------------------------------- widths


@pytest.mark.parametrize("columns", ["0", "5", "39", "-1", "wide", "", "１２０", "9" * 30])
def test_a_terminal_width_no_terminal_has_falls_back_to_one_that_shows_the_report(columns: str) -> None:
    proc = gpudoctor("check", "--from", str(FAILING), env={"COLUMNS": columns})
    assert proc.returncode == 1, proc.stderr[-400:]
    assert "health.xid" in proc.stdout and "exit code 1" in proc.stdout, proc.stdout[-800:]
    assert all(len(line) <= 400 for line in proc.stdout.splitlines())
    narrowest = [line for line in proc.stdout.splitlines() if line.strip()]
    assert max(len(line) for line in narrowest) >= 30, proc.stdout[-800:]
    listing = gpudoctor("list", env={"COLUMNS": columns})
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) > 20, listing.stdout[-800:]


def test_the_width_is_the_terminals_where_it_is_a_sane_one() -> None:
    from rich.console import Console

    from gpudoctor.report.console import MIN_WIDTH, fitted

    assert fitted(Console(file=io.StringIO(), width=120)).width == 120
    assert fitted(Console(file=io.StringIO(), width=3)).width == MIN_WIDTH == 40


# ------------------------------------------------------------------------------------------------------ closed pipes


def closed_stdout(*argv: str, env: dict[str, str] | None = None, stderr_too: bool = False) -> tuple[int, str]:
    """The command with standard output a pipe whose reader has gone (standard error too: `2>&1 | head -1`)."""
    proc = subprocess.Popen(
        [GPUDOCTOR, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )
    proc.stdout.close()
    if stderr_too:
        proc.stderr.close()
        return proc.wait(timeout=300), ""
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err.decode(errors="replace")


def saved_report(tmp_path: Path, snapshot: Path) -> Path:
    path = tmp_path / f"{snapshot.stem}.report.json"
    gpudoctor("check", "--from", str(snapshot), "-o", str(path))
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("reports")
    return {"pass": saved_report(folder, HEALTHY), "fail": saved_report(folder, FAILING)}


@pytest.mark.parametrize(
    "argv,code",
    [
        (["--help"], 0),
        (["--version"], 0),
        (["check", "--help"], 0),
        (["list"], 0),
        (["list", "--checks-dir", str(MALFORMED)], 0),
        (["snapshot", "--from-xml", str(FIXTURES / "nvidia-smi-xml" / "a100-sxm4-v12.xml")], 0),
        (["report", "{pass}"], 0),
        (["report", "{fail}"], 1),
        (["report", "{pass}", "--format", "json"], 0),
        (["check", "--from", str(HEALTHY)], 0),
        (["check", "--from", str(FAILING), "--format", "json"], 1),
        (["check", "--timeout", "0"], 2),
    ],
)
def test_a_closed_pipe_keeps_the_exit_code(reports: dict[str, Path], argv: list[str], code: int) -> None:
    argv = [arg.format(**reports) for arg in argv]
    returned, err = closed_stdout(*argv)
    assert returned == code, err[-600:]
    assert "Traceback" not in err and "internal error" not in err and "Exception ignored" not in err, err[-600:]
    assert closed_stdout(*argv, stderr_too=True)[0] == code


@pytest.mark.parametrize("argv,code", [(["list"], 0), (["report", "{fail}"], 1), (["--help"], 0)])
def test_head_keeps_the_exit_code(reports: dict[str, Path], argv: list[str], code: int) -> None:
    command = " ".join([GPUDOCTOR, *(arg.format(**reports) for arg in argv)])
    proc = subprocess.run(
        ["bash", "-c", f"{command} | head -1; exit ${{PIPESTATUS[0]}}"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == code and len(proc.stdout.splitlines()) == 1, proc.stderr[-600:]
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr[-600:]


def test_baseline_save_with_a_closed_pipe_saves_and_exits_0(tmp_path: Path) -> None:
    settings = tmp_path / "only.toml"
    settings.write_text('only = ["site.figure"]\n')
    saved = tmp_path / "baseline.json"
    argv = ["baseline", "save", str(saved), "--config", str(settings), "--checks-dir", str(MALFORMED)]
    code, err = closed_stdout(*argv)
    assert code == 0 and "Traceback" not in err, err[-600:]
    assert baseline.load(saved)["figures"] == {"site.figure:rate": 12.5}


@pytest.mark.parametrize("dry_run", [False, True])
def test_drain_with_a_closed_pipe_drains_every_node_and_keeps_its_code(tmp_path: Path, dry_run: bool) -> None:
    """A closed pipe stopped `drain` after its first node (BrokenPipeError): every node is acted on all the same."""
    env, calls = slurm_stand_ins(tmp_path, "n0|idle|none\\nn1|idle|none\\nn2|allocated|none\\n")
    code, err = closed_stdout("drain", str(cluster_report(tmp_path)), *(["--dry-run"] if dry_run else []), env=env)
    assert code == 0 and "Traceback" not in err and "internal error" not in err, err[-600:]
    drained = [] if dry_run else calls.read_text().splitlines()
    assert len(drained) == (0 if dry_run else 2), drained
