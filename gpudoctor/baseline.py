"""Baselines: a known-good node's measured figures, saved once and used to judge later runs.

Checks mark the metrics worth keeping (`Metric.baseline`); this module knows no check by name.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

from gpudoctor import __version__
from gpudoctor.errors import InputError
from gpudoctor.facts.schema import problem
from gpudoctor.files import read_json
from gpudoctor.model import Result

SCHEMA = "gpudoctor.baseline"
SCHEMA_VERSION = 1


class BaselineError(InputError):
    """A baseline file that is missing, corrupt or foreign."""


class _Saved(TypedDict):
    schema: str
    schema_version: int
    figures: dict[str, float]  # "check id:metric name" -> the figure measured


class Baseline(_Saved, total=False):
    """A baseline file as `from_results` writes it: every field is checked before any is read."""

    tool_version: str
    saved_at: str
    host: str | None
    gpus: list[str | None]


def from_results(results: list[Result], facts: dict[str, Any]) -> dict[str, Any]:
    figures = {
        f"{r.check_id}:{m.name}": m.value
        for r in results
        for m in r.metrics
        if m.baseline and isinstance(m.value, (int, float)) and r.status.value == "pass"
    }
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": facts["system"].get("hostname"),
        "gpus": [g.get("name") for g in facts["nvml"].get("gpus", [])],
        "figures": figures,
    }


def dumps(baseline: dict[str, Any]) -> str:
    return json.dumps(baseline, indent=2, sort_keys=True) + "\n"


def _figure(value: Any) -> bool:
    """A figure a node measured: a finite number above zero (a bandwidth, a throughput)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 2.0**64


def load(path: Path) -> dict[str, Any]:
    data = read_json(path, "baseline", BaselineError)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise BaselineError(f'{path} is not a gpudoctor baseline (no "schema": "{SCHEMA}")')
    if data.get("schema_version") != SCHEMA_VERSION:
        raise BaselineError(f"{path}: unsupported baseline schema_version {data.get('schema_version')!r}")
    figures = data.get("figures")
    bad = next((k for k, v in figures.items() if not _figure(v)), None) if isinstance(figures, dict) else None
    if bad is not None:
        raise BaselineError(f"{path}: figures.{bad} is {repr(figures[bad])[:40]}, not a measured figure (> 0)")
    wrong = problem(data, Baseline)
    if wrong:
        raise BaselineError(f"baseline {path}: {wrong}")
    data["path"] = str(path)
    return data
