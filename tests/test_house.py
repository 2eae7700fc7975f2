"""The house rules: checks speak only to the API, facts are gathered by need, one source per setting."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.nodes import FABRIC_HEALTHY, node
from fixtures.nodes import fabric as fabric_report
from helpers.common import ROOT, gpudoctor, load_snapshot

from gpudoctor.context import FULL_WORK_FACTOR, CheckContext, Options
from gpudoctor.model import Result, Status
from gpudoctor.registry import discover

FAKE_TORCH = """
import os
open(os.environ["TORCH_IMPORTED"], "a").write("imported\\n")
raise ImportError("this torch only records that it was imported")
"""


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


@pytest.mark.parametrize("path", sorted((ROOT / "checks").glob("*.py")), ids=lambda p: p.name)
def test_checks_import_only_the_api_from_the_core(path: Path) -> None:
    """The API, and the pure judges several checks share (gpudoctor/judging/)."""
    core = {m for m in _imports(path) if m.startswith("gpudoctor")}
    other = {m for m in core if m != "gpudoctor.api" and m.split(".")[:2] != ["gpudoctor", "judging"]}
    assert not other, f"{path.name} imports {sorted(other)}"


def test_reports_do_not_know_the_registry() -> None:
    for path in (ROOT / "gpudoctor" / "report").glob("*.py"):
        assert not {"gpudoctor.registry", "gpudoctor.engine.runner"} & _imports(path), path.name


def test_the_engine_stamps_every_result_with_its_check_id() -> None:
    from helpers.common import judge

    results = judge("h100-sxm-8x")
    assert results and all(label.split(":")[0] == r.check_id for label, r in results.items())
    assert all(r.check_id for r in results.values())


def test_builtin_checks_are_found_by_walking_the_package(tmp_path: Path, monkeypatch) -> None:
    import gpudoctor.checks

    (tmp_path / "zz_newarea.py").write_text(
        "from gpudoctor.api import Result, Status, check\n\n"
        "@check('newarea.thing', 'A new built-in area')\n"
        "def thing(ctx):\n"
        "    return Result(Status.PASS, 'found')\n"
    )
    monkeypatch.setattr(gpudoctor.checks, "__path__", [*gpudoctor.checks.__path__, str(tmp_path)])
    monkeypatch.delitem(__import__("sys").modules, "gpudoctor.checks.zz_newarea", raising=False)
    specs = discover(entry_points=False).specs
    found = [s for s in specs if s.id == "newarea.thing"]
    assert found and found[0].source == "builtin"
    assert specs[-1].id == "newarea.thing", "areas not in the running order come last"


def test_v1_snapshots_are_read_through_their_recorded_calls(tmp_path: Path) -> None:
    """Version 1 held NVML's enums as numbers; its recording replays into today's named facts."""
    old = node(calls=fabric_report(5, health_mask=FABRIC_HEALTHY["health_mask"] - 16, health_summary=2))
    old["schema_version"] = 1
    old.pop("sources")
    old["nvml"]["gpus"][5]["fabric"] = {"state": 3, "status": 0, "health_mask": 426 - 16, "health_summary": 2}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(old))
    proc = gpudoctor("check", "--from", str(path), "--only", "driver.fabric", "--json")
    fabric = json.loads(proc.stdout)["checks"][0]
    assert (fabric["status"], proc.returncode) == ("fail", 1)
    assert "GPU 5: fabric health unhealthy; route unhealthy" in fabric["summary"]


@pytest.fixture
def fake_torch(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A torch on the path that records every import of it, in any process."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    marker = tmp_path / "imported"
    return {"PYTHONPATH": str(tmp_path), "TORCH_IMPORTED": str(marker)}, marker


def test_health_and_driver_checks_never_import_torch(fake_torch) -> None:
    env, marker = fake_torch
    proc = gpudoctor("check", "--only", "health", "driver", "--json", env=env)
    ids = {c["check_id"] for c in json.loads(proc.stdout)["checks"]}
    assert ids and all(i.split(".")[0] in ("health", "driver") for i in ids)
    assert not marker.exists(), "torch was imported for checks that do not read it"
    gpudoctor("check", "--only", "torch.import", "--json", env=env)
    assert marker.exists(), "the marker records an import when a check does need torch"


def test_command_line_timeout_overrides_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("timeout = 600\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "slow.py").write_text(
        "import time\n"
        "from gpudoctor.api import Result, Status, check\n\n"
        "def sleep(payload):\n"
        "    time.sleep(60)\n\n"
        "@check('site.slow', 'sleeps', level='standard', needs=('live',), settings={'timeout': 300})\n"
        "def slow(ctx):\n"
        "    data = ctx.run_isolated(f'{__file__}:sleep', {})\n"
        "    return data if isinstance(data, Result) else Result(Status.PASS, 'slept')\n"
    )
    proc = gpudoctor("check", "--checks-dir", str(site), "--config", str(config), "--only", "site", "--timeout", "2")
    assert "did not finish within its 2 s limit" in proc.stdout


@pytest.mark.parametrize(
    ("cli", "setting", "config", "declared", "expected"),
    [(5, 30, 600, 60, 5), (None, 30, 600, 60, 30), (None, 0, 600, 60, 600), (None, 0, None, 60, 60)],
)
def test_timeout_precedence(cli, setting, config, declared, expected) -> None:
    spec = next(s for s in discover(entry_points=False).specs if s.id == "allreduce.bandwidth")
    spec = type(spec)(**{**spec.__dict__, "timeout_s": declared})
    options = Options(timeout=cli, config_timeout=config)
    assert CheckContext({}, options, {"timeout": setting}, spec).timeout_s == expected


WORKLOADS = ("compute.", "bandwidth.", "memory.", "allreduce.", "p2p.", "ddp.", "load.")


def _payloads(level: str, monkeypatch) -> dict[str, dict[str, Any]]:
    """Every workload check's parameters as it hands them to run_isolated or launch (nothing is run)."""
    seen: dict[str, dict[str, Any]] = {}

    def capture(self, target, payload, *args, **kwargs):
        seen[self.spec.id] = payload
        return Result(Status.SKIP, "captured")

    monkeypatch.setattr(CheckContext, "run_isolated", capture)
    monkeypatch.setattr(CheckContext, "launch", capture)
    facts = load_snapshot("h100-sxm-8x")
    for spec in discover(entry_points=False).specs:
        if spec.id.startswith(WORKLOADS):
            spec.run(CheckContext(facts, Options(level=level), dict(spec.settings), spec))
    return seen


def test_level_full_scales_every_workload_through_one_factor(monkeypatch) -> None:
    quick, full = _payloads("quick", monkeypatch), _payloads("full", monkeypatch)
    assert set(quick) == set(full) and len(quick) == 9
    for check_id, params in quick.items():
        work = {"ddp.train": "steps", "load.concurrent": "seconds", "compute.sdc": "repeats"}.get(check_id)
        work = work or ("iters" if "iters" in params else "walking_bits")
        assert full[check_id][work] == params[work] * FULL_WORK_FACTOR, check_id


def test_only_the_sources_asked_for_are_gathered() -> None:
    from gpudoctor.facts import snapshot

    facts = snapshot.gather(["nvml", "kernel_log"])
    assert facts["sources"] == ["kernel_log", "nvml"] and facts["torch"] == {}
    assert list(facts["system"]) == ["kernel_log"]


def test_the_readme_plugin_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    example = readme.split("## Plugins", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "site_clocks.py").write_text(example)
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(node(calls={"nvmlDeviceGetCurrentClocksEventReasons(gpu2)": 0x8})))
    healthy = ROOT / "tests" / "fixtures" / "snapshots" / "h100-sxm-8x.json"
    for snapshot, status, summary in ((healthy, "pass", "no GPU held down"), (slow, "warn", "GPU 2: hw_slowdown")):
        proc = gpudoctor("check", "--from", str(snapshot), "--checks-dir", str(tmp_path), "--only", "site", "--json")
        result = json.loads(proc.stdout)["checks"][0]
        assert (result["check_id"], result["status"], result["summary"]) == ("site.clocks", status, summary)


def test_gathered_facts_have_the_documented_shape() -> None:
    """Every key the gateway writes is in the schema check authors read (gpudoctor.facts.schema)."""
    from test_live_nvml import NODES

    from gpudoctor.facts import schema, system

    assert set(system.gather()) <= set(schema.SystemFacts.__annotations__)
    for name, snap in NODES.items():
        assert set(snap["nvml"]) <= set(schema.NvmlFacts.__annotations__), name
        assert set(snap["torch"]) <= set(schema.TorchFacts.__annotations__), name
        assert set(snap["system"]) <= set(schema.SystemFacts.__annotations__), name
        for gpu in snap["nvml"].get("gpus", []):
            assert set(gpu) <= set(schema.GpuFacts.__annotations__), (
                name,
                set(gpu) - set(schema.GpuFacts.__annotations__),
            )
            assert set(gpu.get("fabric") or {}) <= set(schema.Fabric.__annotations__)
            assert all(set(link) <= set(schema.NvLink.__annotations__) for link in gpu.get("nvlinks") or [])


def test_a_torch_gateway_started_early_is_ended_when_no_check_wants_it() -> None:
    """A live run not narrowed by --only starts the torch gateway before discovery (its import overlaps the
    rest of the start); if the selected checks want no torch facts after all, the process is ended, not left."""
    from gpudoctor.facts import snapshot, torchinfo

    early = torchinfo.start()
    facts = snapshot.gather(["kernel_log"], early)
    assert facts["torch"] == {} and early.returncode is not None


def test_every_test_that_runs_alone_is_in_a_file_the_scheduler_keeps_on_one_worker() -> None:
    """conftest's scheduler hands the namespace-host and GPU files to one worker: a `hosts`, `slurm` or `gpu` test
    in any other file would make the other worker wait on the lock, idle."""
    import conftest

    marked = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        text = path.read_text()
        if any(f"pytest.mark.{name}" in text for name in (*conftest.ONE_AT_A_TIME, "slurm")):
            marked.add(f"tests/{path.name}")
    assert marked and marked <= set(conftest.ONE_WORKER_FILES), sorted(marked - set(conftest.ONE_WORKER_FILES))
