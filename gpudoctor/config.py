"""The optional TOML config: run-wide settings and a table of thresholds per check.

    expect_gpus = 8
    skip = ["system.container"]
    [checks.health.ecc]
    correctable_warn = 100

Every key is checked against what the checks declare; an unknown key, a wrong type or a number outside its range
(`value_range`: a time at most a week, a count of GPUs or ranks at most 1024) is a one-line error naming the key.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.declarations import LEVELS
from gpudoctor.errors import InputError
from gpudoctor.files import read_text
from gpudoctor.registry import CheckSpec

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

TOP_LEVEL: dict[str, type | tuple[type, ...]] = {
    "level": str,
    "expect_gpus": int,
    "timeout": (int, float),
    "budget": (int, float),
    "strict": bool,
    "only": list,
    "skip": list,
    "checks_dir": list,
    "baseline": str,
    "device": str,
    "checks": dict,
}
PER_CHECK_COMMON: dict[str, Any] = {"timeout": 0.0}
CONFIG_BYTES = 2**20  # a config of a megabyte is no config


class ConfigError(InputError):
    """The config file is missing, not TOML, or has an unknown key or a wrong type."""


@dataclass
class Config:
    path: Path | None = None
    top: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def settings(self, spec: CheckSpec) -> dict[str, Any]:
        """The check's declared defaults, overridden by its table in the file."""
        return {**spec.settings, **self.checks.get(spec.id, {})}


def load(path: Path | None) -> Config:
    if path is None:
        return Config()
    text = read_text(path, "config", ConfigError, limit=CONFIG_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config {path} is nested too deep (arrays or tables inside one another)") from None
    except ValueError as exc:
        raise ConfigError(f"config {path} cannot be read: {type(exc).__name__}: {str(exc)[:200]}") from None
    for key, value in data.items():
        _check_type(path, key, value, TOP_LEVEL.get(key))
    if "level" in data and data["level"] not in LEVELS:
        raise ConfigError(f"config {path}: level must be one of {', '.join(LEVELS)}, not {data['level']!r}")
    checks = _flatten(data.pop("checks", {}))
    return Config(Path(path), data, checks)


def _check_type(path: Path, key: str, value: Any, expected: type | tuple[type, ...] | None) -> None:
    if expected is None:
        raise ConfigError(f"config {path}: unknown key {key!r}")
    if isinstance(value, bool) and expected in (int, (int, float)):
        raise ConfigError(f"config {path}: {key} must be a number, not a boolean")
    if not isinstance(value, expected):
        names = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        raise ConfigError(f"config {path}: {key} must be {names}, not {type(value).__name__}")
    if isinstance(value, list):
        wrong = next((i for i, item in enumerate(value) if not isinstance(item, str)), None)
        if wrong is not None:
            raise ConfigError(f"config {path}: {key}[{wrong}] must be a string, not {type(value[wrong]).__name__}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        said = out_of_range(key, value)
        if said:
            raise ConfigError(f"config {path}: {said}")


FRACTIONS = ("fraction", "floor", "tolerance", "share", "scaling", "min_loss_drop")
AT_LEAST_ONE = ("iters", "cpu_ranks")
LARGEST = 2.0**53  # no setting needs more; NaN and infinity are no setting at all
WEEK_S = 7 * 24 * 3600.0  # the longest time a run or a wait may be given: a timer's own limit is near 2**33 s
SECONDS = ("timeout", "budget", "seconds")  # and every name ending in "_s" or "_timeout"
MOST_GPUS = 1024  # GPUs a node has, ranks a node starts: more than any node has
COUNTS = ("expect_gpus", "cpu_ranks")


def value_range(key: str) -> tuple[float, float]:
    """The values a numeric setting may take: a fraction 0..1; a time (a timeout, a budget, seconds) 0..a week; a
    count of GPUs or ranks up to MOST_GPUS; a count of iterations or ranks from 1; any other figure (a threshold, a
    size, 0 for "the default") from 0."""
    name = key.rsplit(".", 1)[-1]
    low = 1.0 if name in AT_LEAST_ONE else 0.0
    if name.endswith(FRACTIONS):
        return 0.0, 1.0
    if name in SECONDS or name.endswith(("_s", "_timeout")):
        return low, WEEK_S
    return low, float(MOST_GPUS) if name in COUNTS else LARGEST


def out_of_range(key: str, value: float) -> str | None:
    """ "timeout = 1e+10 is outside 0..604800" where `value` is not a number `key` may take; None where it is."""
    low, high = value_range(key)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and low <= value <= high):
        return f"{key} = {value!r} is outside {low:g}..{high:g}"
    return None


def _flatten(tables: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """[checks.health.ecc] arrives as {"health": {"ecc": {...}}}; make it {"health.ecc": {...}}."""
    flat: dict[str, dict[str, Any]] = {}
    for area, names in tables.items():
        if not isinstance(names, dict):
            raise ConfigError(f"config: checks.{area} must be a table of checks")
        for name, table in names.items():
            if not isinstance(table, dict):
                raise ConfigError(f"config: checks.{area}.{name} must be a table")
            flat[f"{area}.{name}"] = table
    return flat


def validate_checks(config: Config, specs: list[CheckSpec]) -> None:
    """Every [checks.X] table names a known check and only that check's settings, with the right types."""
    by_id = {s.id: s for s in specs}
    for check_id, table in config.checks.items():
        spec = by_id.get(check_id)
        if spec is None:
            raise ConfigError(f"config {config.path}: checks.{check_id} is not a known check")
        known = {**PER_CHECK_COMMON, **spec.settings}
        for key, value in table.items():
            if key not in known:
                raise ConfigError(
                    f"config {config.path}: checks.{check_id}.{key} is not a setting of that check "
                    f"(settings: {', '.join(sorted(known)) or 'none'})"
                )
            _check_type(config.path or Path("config"), f"checks.{check_id}.{key}", value, _type_of(known[key]))


def _type_of(default: Any) -> type | tuple[type, ...]:
    if isinstance(default, bool):
        return bool
    if isinstance(default, (int, float)):
        return (int, float)
    return type(default)
