"""The quick level's start: importing torch, its longest step, runs in the torch gateway's own process from the
first thing a plan does, so reading the config, finding the checks and the NVML, sysfs and kernel-log facts all
overlap it (bench/startup.py times the whole against `import torch`)."""

from __future__ import annotations

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
