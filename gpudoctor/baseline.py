"""Baselines: a known-good node's measured figures, saved once and used to judge later runs.

Checks mark the metrics worth keeping (`Metric.baseline`); this module knows no check by name.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.errors import InputError
from gpudoctor.files import read_json
from gpudoctor.model import Result

SCHEMA = "gpudoctor.baseline"
SCHEMA_VERSION = 1


class BaselineError(InputError):
    """A baseline file that is missing, corrupt or foreign."""


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
    if data.get("schema_version") != SCHEMA_VERSION or not isinstance(data.get("figures"), dict):
        raise BaselineError(f"{path}: unsupported baseline schema_version {data.get('schema_version')!r}")
    bad = [k for k, v in data["figures"].items() if not _figure(v)]
    if bad:
        raise BaselineError(f"{path}: figure {bad[0]!r} is {data['figures'][bad[0]]!r}, not a measured figure (> 0)")
    data["path"] = str(path)
    return data
