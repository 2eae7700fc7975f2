"""The engine's request: the command line and the Python API ask for a run in the same words, planning reads a
request without changing it, bad input of every kind is one line and exit 2, and the engine names no check."""

from __future__ import annotations

import ast
import dataclasses
import signal
from pathlib import Path

import pytest
from helpers.common import SNAPSHOTS, gpudoctor

from gpudoctor import baseline, cli, config, engine, errors, probe, registry
from gpudoctor.cluster import slurm
from gpudoctor.cluster.credential import CredentialError
from gpudoctor.cluster.env import ClusterEnv, ClusterEnvError
from gpudoctor.engine import Request
from gpudoctor.engine.planning import report_files, this_node
from gpudoctor.engine.runner import SelectionError
from gpudoctor.facts.snapshot import SnapshotError
from gpudoctor.report import document
from gpudoctor.workloads import launch

HEALTHY = str(SNAPSHOTS / "h100-sxm-8x.json")
ENGINE = Path(engine.__file__).parent
INPUT_ERRORS = (
    errors.InputError,
    config.ConfigError,
    SnapshotError,
    SelectionError,
    document.ReportError,
    slurm.ReportError,
    baseline.BaselineError,
    launch.FaultSpecError,
    ClusterEnvError,
    CredentialError,
)
CHECK_OPTIONS = [
    "--level", "standard", "--only", "health", "driver", "--skip", "health.xid", "--from", HEALTHY,
    "--config", "site.toml", "--checks-dir", "site", "--checks-dir", "more", "--baseline", "known.json",
    "--strict", "--timeout", "5", "--budget", "60", "--expect-gpus", "8", "--device", "cpu",
]  # fmt: skip
API_OPTIONS = {
    "level": "standard",
    "only": ["health", "driver"],
    "skip": ["health.xid"],
    "from_file": HEALTHY,
    "config": "site.toml",
    "checks_dirs": ["site", "more"],
    "baseline": "known.json",
    "strict": True,
    "timeout": 5.0,
    "budget": 60.0,
    "expect_gpus": 8,
    "device": "cpu",
    "cluster": True,
}


def _api_request(monkeypatch: pytest.MonkeyPatch, **options: object) -> Request:
    """The request probe.run hands the engine for these keyword arguments (nothing is run)."""
    asked: list[Request] = []
    monkeypatch.setattr(engine, "run", lambda request, *args, **kwargs: asked.append(request))
    probe.run(**options)
    return asked[0]


def test_the_command_line_and_the_api_ask_for_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from_cli = cli.request_from(cli.build_parser().parse_args(["check", *CHECK_OPTIONS]))
    assert from_cli == _api_request(monkeypatch, **API_OPTIONS)
    assert from_cli.only == ("health", "driver") and from_cli.checks_dirs == ("site", "more")


def test_the_api_takes_the_requests_own_fields_and_no_other() -> None:
    """probe.run copies no field by hand (it lost --budget once): its options are Request's fields."""
    with pytest.raises(probe.UsageError, match="no option 'checks_dir'"):
        probe.run(checks_dir=["site"])


def test_every_request_field_reaches_the_engine_through_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each field of Request, set away from its default, arrives as given: probe.run drops none."""
    fields = dataclasses.fields(Request)
    options = {**API_OPTIONS, "live": True, "files": [("output", "r.json")]}
    assert set(options) == {f.name for f in fields}, "a Request field this test does not set"
    asked = _api_request(monkeypatch, **options)
    assert asked == Request(**options)  # type: ignore[arg-type]
    assert not [f.name for f in fields if getattr(asked, f.name) == f.default], "a field left at its default"


def test_the_command_line_builds_every_request_field() -> None:
    """`gpudoctor check`'s request names each field of Request, as probe.run takes each (a field the command
    line forgot would be one the API has and the CLI silently lacks)."""
    tree = ast.parse(Path(cli.__file__).read_text())
    built = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "request_from")
    call = next(n for n in ast.walk(built) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Request")
    assert {k.arg for k in call.keywords} == {f.name for f in dataclasses.fields(Request)}


def test_defaults_are_the_same_from_the_command_line_and_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.request_from(cli.build_parser().parse_args(["check"])) == _api_request(monkeypatch, cluster=True)


def test_report_files_asked_for_travel_in_the_request() -> None:
    args = cli.build_parser().parse_args(["check", "-o", "r.json", "--html", "p.html", "--junit", "j.xml"])
    assert dict(cli.request_from(args).files) == {"output": "r.json", "html": "p.html", "junit": "j.xml"}


def test_a_request_cannot_change() -> None:
    request = Request(only=["health"])  # type: ignore[arg-type]  # a list, as callers pass them, is kept as a tuple
    assert request.only == ("health",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.level = "full"  # type: ignore[misc]


def test_planning_reads_the_request_and_never_changes_it(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text('level = "standard"\nskip = ["driver.fabric"]\nexpect_gpus = 8\n')
    request = Request(from_file=HEALTHY, only=("driver",), config=str(site), files=(("output", "r.json"),))
    before = dataclasses.replace(request)
    chosen = engine.plan(request)
    assert request == before
    assert chosen.options.level == "standard" and chosen.options.skip == ["driver.fabric"]
    assert chosen.options.expect_gpus == 8 and chosen.files == {"output": "r.json"}
    assert "driver.fabric" not in {s.id for s in chosen.specs} and chosen.source == f"snapshot:{HEALTHY}"


def _node(rank: int) -> ClusterEnv:
    return ClusterEnv(rank, 2, "10.0.0.1", 29500, f"node{rank}", "slurm", "run")


def test_in_cluster_mode_each_node_writes_the_files_that_name_it_and_rank_0_all(tmp_path: Path) -> None:
    asked = (("output", str(tmp_path / "{node}.json")), ("html", str(tmp_path / "cluster.html")))
    request = Request(files=asked)
    assert report_files(request, _node(0)) == {"output": str(tmp_path / "node0.json"), "html": asked[1][1]}
    assert report_files(request, _node(1)) == {"output": str(tmp_path / "node1.json")}
    one = {"output": str(tmp_path / f"{this_node(None)[0]}.json"), "html": asked[1][1]}
    assert report_files(request, None) == one, "a world of one (sbatch --nodes=1) names its node too"
    assert request.files == asked


def test_a_report_file_whose_folder_is_missing_is_found_while_planning(tmp_path: Path) -> None:
    with pytest.raises(errors.InputError, match="does not exist"):
        report_files(Request(files=(("junit", str(tmp_path / "no" / "{node}.xml")),)), _node(1))


def test_a_level_that_does_not_exist_is_bad_input_from_the_api() -> None:
    with pytest.raises(probe.InputError, match="level must be one of quick, standard, full, not 'fast'"):
        probe.run(from_file=HEALTHY, level="fast")


@pytest.mark.parametrize("error", INPUT_ERRORS, ids=lambda e: f"{e.__module__}.{e.__name__}")
def test_every_kind_of_bad_input_is_one_line_and_exit_2(
    error: type[Exception], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert issubclass(error, errors.InputError) and probe.UsageError is errors.InputError

    def command(args: object) -> int:
        raise error("what was wrong, and what to do")

    monkeypatch.setitem(cli.COMMANDS, "check", command)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(["check"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert captured.err == "gpudoctor: error: what was wrong, and what to do\n"


def test_bad_input_found_by_the_launcher_environment_or_drain_is_one_line(tmp_path: Path) -> None:
    """Two of the kinds the command line once translated by hand, now through the one translation."""
    bad = tmp_path / "report.json"
    bad.write_text("{}")
    cases = [
        (gpudoctor("check", "--only", "driver.nvml", env={"RANK": "0", "WORLD_SIZE": "many"}), "WORLD_SIZE"),
        (gpudoctor("drain", str(bad), "--dry-run"), "not a gpudoctor report"),
        (gpudoctor("snapshot", "--from-xml", HEALTHY), "not an nvidia-smi -q -x capture"),
    ]
    for proc, words in cases:
        lines = proc.stderr.strip().splitlines()
        assert (proc.returncode, len(lines)) == (2, 1), proc.stderr
        assert lines[0].startswith("gpudoctor: error: ") and words in lines[0], lines[0]


def _strings(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_the_engine_and_the_registry_name_no_check() -> None:
    """Which checks exist and in which order is what the checks declare (gpudoctor.checks.ORDER, each
    declaration's needs and settings), never a name in the engine or the registry."""
    import gpudoctor.checks
    from gpudoctor import declarations

    specs = registry.discover(entry_points=False).specs
    names = {s.id for s in specs} | {s.area for s in specs} | set(gpudoctor.checks.ORDER)
    names -= set(declarations.NEEDS)  # what a check may declare it needs ("torch", "cluster") is the engine's word
    for path in [*ENGINE.glob("*.py"), Path(registry.__file__), Path(declarations.__file__)]:
        assert not names & _strings(path), f"{path.name} names {sorted(names & _strings(path))}"


def test_built_in_modules_come_in_the_order_the_checks_package_gives() -> None:
    import gpudoctor.checks

    modules = registry.builtin_modules()
    assert modules[: len(gpudoctor.checks.ORDER)] == list(gpudoctor.checks.ORDER)
    areas = list(dict.fromkeys(s.area for s in registry.discover(entry_points=False).specs))
    assert areas[:5] == ["driver", "torch", "system", "network", "health"]
