"""The quick level's start: importing torch, its longest step, runs in the torch gateway's own process from the
first thing a plan does, so reading the config, finding the checks and the NVML, sysfs and kernel-log facts all
overlap it (bench/startup.py times the whole against `import torch`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import config, registry
from gpudoctor.engine import Request, plan
from gpudoctor.facts import torchinfo


class Found(Exception):
    """Stops the plan once the checks are found: what comes after is the facts, which wait for the gateway."""


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    load = config.load
    monkeypatch.setattr(torchinfo, "start", lambda: seen.append("torch started") or "gateway")
    monkeypatch.setattr(torchinfo, "end", lambda proc: seen.append(f"{proc} ended"))
    monkeypatch.setattr(config, "load", lambda path: seen.append("config read") or load(path))

    def discover(*args: Any, **kwargs: Any) -> None:
        seen.append("checks found")
        raise Found

    monkeypatch.setattr(registry, "discover", discover)
    return seen


def test_the_torch_gateway_starts_before_the_config_is_read_and_the_checks_are_found(
    events: list[str], tmp_path: Path
) -> None:
    (tmp_path / "site.toml").write_text('level = "quick"\n')
    with pytest.raises(Found):
        plan(Request(config=str(tmp_path / "site.toml")))
    assert events == ["torch started", "config read", "checks found", "gateway ended"]


@pytest.mark.parametrize("narrowed", [Request(only=("health", "driver")), Request(from_file="node.json")])
def test_a_run_that_may_not_want_torch_starts_no_gateway_before_its_checks_are_chosen(
    events: list[str], narrowed: Request
) -> None:
    with pytest.raises(Found):
        plan(narrowed)
    assert events == ["config read", "checks found"]


# A quick run whose torch gateway answers at once: the modules first imported once the torch facts are in.
AFTER_TORCH = """
import contextlib, io, json, sys, types
from gpudoctor.facts import torchinfo
seen = {}
def collect(proc, timeout_s=120.0):
    seen["collected"] = set(sys.modules)
    return {"importable": False, "import_error": "ModuleNotFoundError: No module named 'torch'"}
torchinfo.start, torchinfo.end = (lambda: types.SimpleNamespace(pid=-1)), (lambda proc: None)
torchinfo.collect = collect
from gpudoctor import cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    cli.main(["check", "--level", "quick", "--format", "console"])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(set(sys.modules) - seen["collected"]), out)
"""


def test_what_judges_and_reports_is_imported_while_torch_imports_not_after(tmp_path: Path) -> None:
    """The runner, the diagnosis, the report and the console (Rich) are imported before the run waits on the
    gateway (planning.ready_to_judge): importing them after torch's facts came in added to the quick level's time
    (0.37 s of 5.6 under load 6 on the 2-core machine) with the other core idle while torch imported."""
    found = tmp_path / "after.json"
    proc = subprocess.run([sys.executable, "-c", AFTER_TORCH, found], capture_output=True, text=True, timeout=300)
    assert found.exists(), proc.stderr[-2000:]
    after = json.loads(found.read_text())
    ours = [m for m in after if m.startswith("gpudoctor.") and m != "gpudoctor.data"]
    rich = [m for m in after if m.startswith("rich") and not m.startswith("rich._unicode_data")]
    assert ours == [] and rich == [], after


# A quick run into a pipe whose torch gateway answers at once: every module it imported, to its end.
IMPORTED = AFTER_TORCH.replace('seen["collected"] = set(sys.modules)', 'seen["collected"] = set()')

# What a quick run into a pipe has no use for: the cluster run's session, store and credential (a node of a cluster
# run imports them, engine/cluster_run.py), Rich's live progress (drawn on a terminal only), difflib (the hint for a
# check name that is not there) and hashlib (the SDC check's digests, made in its rank). Each is the parent's own
# CPU beside torch's import on a busy machine.
UNUSED = ("gpudoctor.cluster.session", "gpudoctor.cluster.store", "gpudoctor.cluster.credential", "rich.progress")


def test_a_quick_run_into_a_pipe_imports_no_cluster_session_and_no_live_progress(tmp_path: Path) -> None:
    found = tmp_path / "imported.json"
    proc = subprocess.run([sys.executable, "-c", IMPORTED, found], capture_output=True, text=True, timeout=300)
    assert found.exists(), proc.stderr[-2000:]
    imported = set(json.loads(found.read_text()))
    assert "gpudoctor.engine.runner" in imported  # the run ran its checks
    assert [m for m in (*UNUSED, "difflib", "hashlib") if m in imported] == []
