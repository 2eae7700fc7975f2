"""Check declaration and discovery: built-ins, entry-point plugins, and site-local directories.

Declaring a check attaches a `CheckSpec` to its function; discovery imports modules and collects
those specs. Check modules import neither torch nor pynvml at module level, so `gpudoctor list`
stays fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEVELS = ("quick", "standard", "full")
NEEDS = ("nvml", "torch", "gpu", "live")
BUILTIN_MODULES = (
    "driver",
    "torch_build",
    "system",
    "health",
    "allreduce",
    "p2p",
    "bandwidth",
    "compute",
    "memtest",
    "ddp",
)
ENTRY_POINT_GROUP = "gpudoctor.checks"
CHECKS_DIR_ENV = "GPUDOCTOR_CHECKS_DIR"
SPEC_ATTR = "__gpudoctor_check__"


@dataclass
class CheckSpec:
    """What a check declares about itself.

    needs: "nvml" (NVML facts), "torch" (an importable torch), "gpu" (at least `min_gpus` GPUs),
    "live" (runs a workload, so it cannot judge a snapshot offline).
    """

    id: str
    title: str
    level: str
    run: Callable[..., Any]
    needs: tuple[str, ...] = ()
    min_gpus: int = 0
    timeout_s: float = 60.0
    description: str = ""
    source: str = "builtin"
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


def check(
    id: str,
    title: str,
    level: str = "quick",
    needs: Iterable[str] = (),
    min_gpus: int = 0,
    timeout_s: float = 60.0,
    settings: dict[str, Any] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a check. Its docstring's first line is its description; `settings` are the config
    keys it reads, with their defaults (thresholds)."""
    needs = tuple(needs)
    _validate(id, level, needs)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = (fn.__doc__ or title).strip().splitlines()[0]
        spec = CheckSpec(id, title, level, fn, needs, min_gpus, timeout_s, doc, settings=dict(settings or {}))
        setattr(fn, SPEC_ATTR, spec)
        return fn

    return wrap


def _validate(check_id: str, level: str, needs: tuple[str, ...]) -> None:
    area, _, name = check_id.partition(".")
    if not area or not name or not all(_kebab(p) for p in (area, name)):
        raise ValueError(f"check id {check_id!r} is not of the form area.name in kebab-case words")
    if level not in LEVELS:
        raise ValueError(f"check {check_id}: level {level!r} is not one of {', '.join(LEVELS)}")
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"check {check_id}: unknown needs {sorted(unknown)}")


def _kebab(word: str) -> bool:
    return all((part.isalnum() and part.islower()) or part.isdigit() for part in word.split("-"))


@dataclass
class Discovery:
    """Every check found, and every plugin that could not be loaded (reported as an error row)."""

    specs: list[CheckSpec] = field(default_factory=list)
    broken: list[tuple[str, str]] = field(default_factory=list)


def specs_in(module: Any, source: str) -> list[CheckSpec]:
    found = []
    for value in vars(module).values():
        spec = getattr(value, SPEC_ATTR, None)
        if isinstance(spec, CheckSpec):
            spec.source = source
            found.append(spec)
    return found


def discover(checks_dirs: Iterable[str | Path] = (), entry_points: bool = True) -> Discovery:
    """Find every check: built-ins first, then entry-point plugins, then site-local directories."""
    found = Discovery()
    for name in BUILTIN_MODULES:
        found.specs += specs_in(importlib.import_module(f"gpudoctor.checks.{name}"), "builtin")
    if entry_points:
        _load_entry_points(found)
    for directory in [*checks_dirs, *_env_dirs()]:
        _load_directory(Path(directory), found)
    _drop_duplicates(found)
    return found


def _env_dirs() -> list[str]:
    value = os.environ.get(CHECKS_DIR_ENV, "")
    return [d for d in value.split(os.pathsep) if d]


def _load_entry_points(found: Discovery) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        source = f"plugin {ep.name} ({ep.value})"
        try:
            found.specs += specs_in(ep.load(), source)
        except Exception as exc:  # a broken plugin is a finding, not a crash
            found.broken.append((source, f"{type(exc).__name__}: {exc}"))


def _load_directory(directory: Path, found: Discovery) -> None:
    if not directory.is_dir():
        raise NotADirectoryError(f"checks directory {directory} does not exist")
    for path in sorted(directory.glob("*.py")):
        source = f"dir {path}"
        module_name = f"gpudoctor_site_checks.{path.stem}"
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            found.specs += specs_in(module, source)
        except Exception as exc:
            found.broken.append((source, f"{type(exc).__name__}: {exc}"))


def _drop_duplicates(found: Discovery) -> None:
    seen: dict[str, CheckSpec] = {}
    for spec in found.specs:
        if spec.id in seen:
            found.broken.append((spec.source, f"check id {spec.id} is already defined by {seen[spec.id].source}"))
        else:
            seen[spec.id] = spec
    found.specs = list(seen.values())
