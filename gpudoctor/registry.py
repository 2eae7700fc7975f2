"""Check declaration and discovery: built-ins, entry-point plugins, and site-local directories.

Declaring a check attaches a `CheckSpec` to its function; discovery imports modules and collects
those specs. What a declaration may say (its levels, needs, id and cure words) and how `gpudoctor list` reads
the built-in ones without running a check module is gpudoctor/declarations.py's; plugins are imported as a run
imports them (`listing`, where one may add checks to the list).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import stat
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpudoctor.declarations import (
    CHECKS_DIR_ENV,
    DEFAULT_LEVEL,
    ENTRY_POINT_GROUP,
    SPEC_ATTR,
    Declared,
    Listing,
    builtin_declarations,
    builtin_modules,
    first_sentence,
    may_declare_plugins,
    title_line,
    validate,
)
from gpudoctor.errors import InputError
from gpudoctor.facts.sources import SOURCES


@dataclass(frozen=True)
class Work:
    """What a workload declares for `--budget` (engine/budget.py): its place in the order, the most telling first
    (`rank`), its growing part at full size in seconds per device as this project measured it (`seconds`: "cpu",
    "cuda"), and the least share of it that still judges (`least`)."""

    rank: int
    seconds: dict[str, float] = field(default_factory=dict)
    least: float = 0.25


@dataclass
class CheckSpec:
    """What a check declares about itself.

    needs: fact sources it cannot judge without ("nvml", "torch", "system", "kernel_log", "nvcc": gathered
    for it, and one that did not work is a skip with the reason: NVML failed to load, torch does not
    import), "gpu" (at least `min_gpus` usable GPUs), "live" (runs a workload, so it cannot judge a snapshot
    offline), "cluster" (runs across nodes), "benchmarks" (judges a user's benchmark output a file holds: only
    planned where one does). uses: fact sources gathered for it and read as they are, working or not (the check that
    diagnoses NVML itself uses it). A check may also read a source gathered for another check, where present.
    """

    id: str
    title: str
    level: str
    run: Callable[..., Any]
    needs: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    min_gpus: int = 0
    timeout_s: float = 60.0
    description: str = ""
    source: str = "builtin"
    settings: dict[str, Any] = field(default_factory=dict)
    work: Work | None = None
    cure: str = ""

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def sources(self) -> set[str]:
        """The fact sources to gather for this check ("gpu" counts GPUs through NVML); all of them for a
        check that names none."""
        declared = (set(self.needs) | set(self.uses)) & set(SOURCES) | ({"nvml"} if "gpu" in self.needs else set())
        return declared or set(SOURCES)


def check(
    id: str,
    title: str,
    level: str = DEFAULT_LEVEL,
    needs: Iterable[str] = (),
    uses: Iterable[str] = (),
    min_gpus: int = 0,
    timeout_s: float = 60.0,
    settings: dict[str, Any] | None = None,
    work: Work | None = None,
    cure: str = "",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a check. Its docstring's first sentence is its description (`first_sentence`); `settings` are
    the config keys it reads, with their defaults (thresholds); `work` what a workload costs under --budget;
    `cure` names the cure a pasted error of a cause it owns gets from what the paste shows (paste/cures.py's
    CURES: read from this declaration's source, so the paste imports no check module)."""
    needs, uses = tuple(needs), tuple(uses)
    validate(id, level, needs + uses, cure)
    title = title_line(id, title)
    if not isinstance(timeout_s, int | float) or not 0 < timeout_s < math.inf:
        raise ValueError(f"check {id}: timeout_s {timeout_s!r} is not a positive number of seconds")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = first_sentence(fn.__doc__ or title)
        spec = CheckSpec(
            id,
            title,
            level,
            fn,
            needs,
            uses,
            min_gpus,
            timeout_s,
            doc,
            settings=dict(settings or {}),
            work=work,
            cure=cure,
        )
        setattr(fn, SPEC_ATTR, spec)
        return fn

    return wrap


class ChecksDirError(InputError):
    """A checks directory (--checks-dir, GPUDOCTOR_CHECKS_DIR, the config's) that is not there or not safe."""


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
    for name in builtin_modules():
        found.specs += specs_in(importlib.import_module(f"gpudoctor.checks.{name}"), "builtin")
    _load_plugins(found, checks_dirs, entry_points)
    found.specs = _first_of_each(found.specs, found.broken)
    return found


def listing(checks_dirs: Iterable[str | Path] = ()) -> Listing:
    """Every check as `list` shows it, in `discover`'s order, without running a built-in check module: each
    one's declarations read from its source (`declared_in`; a module whose declarations it cannot read, written
    with other than literals, is imported). Plugins are imported as a run imports them."""
    found = list(builtin_declarations())
    plugins = Discovery()
    _load_plugins(plugins, checks_dirs, entry_points=True)
    found += [_declared(spec) for spec in plugins.specs]
    return Listing(_first_of_each(found, plugins.broken), plugins.broken)


def _declared(spec: CheckSpec) -> Declared:
    return Declared(spec.id, spec.level, spec.description, spec.source, spec.cure)


def _load_plugins(found: Discovery, checks_dirs: Iterable[str | Path], entry_points: bool) -> None:
    if entry_points:
        _load_entry_points(found)
    for directory in [*checks_dirs, *_env_dirs()]:
        _load_directory(Path(directory), found)


def _env_dirs() -> list[str]:
    value = os.environ.get(CHECKS_DIR_ENV, "")
    return [d for d in value.split(os.pathsep) if d]


def _load_entry_points(found: Discovery) -> None:
    if not may_declare_plugins():
        return
    from importlib.metadata import entry_points

    from gpudoctor.workloads import guard

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        source = f"plugin {ep.name} ({ep.value})"
        try:
            found.specs += specs_in(guard.call(ep.load, IMPORT_LIMIT_S, f"importing {ep.value}"), source)
        except Exception as exc:  # a broken plugin is a finding, not a crash
            found.broken.append((source, _why(exc)))


def _load_directory(directory: Path, found: Discovery) -> None:
    if not directory.is_dir():
        raise ChecksDirError(f"checks directory {directory} does not exist")
    unsafe = unsafe_for_root(directory)
    if unsafe:
        raise ChecksDirError(f"checks directory {directory} {unsafe}: as root, gpudoctor imports nothing from it")
    from gpudoctor.workloads import guard

    for path in sorted(directory.glob("*.py")):
        source = f"dir {path}"
        refused = not_a_file(path) or unsafe_for_root(path)
        if refused:
            found.broken.append((source, f"not imported: it {refused}"))
            continue
        try:
            module = guard.call(lambda p=path: _import_file(p), IMPORT_LIMIT_S, f"importing {path.name}")
            found.specs += specs_in(module, source)
        except Exception as exc:
            found.broken.append((source, _why(exc)))


def _why(exc: Exception) -> str:
    from gpudoctor.workloads import guard

    return str(exc) if isinstance(exc, guard.Stopped) else f"{type(exc).__name__}: {exc}"


IMPORT_LIMIT_S = 30.0  # a plugin's import that takes longer is stuck (on a network mount, a lock, a loop)


def _import_file(path: Path) -> Any:
    module_name = f"gpudoctor_site_checks.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def not_a_file(path: Path) -> str:
    """Why `path` cannot be imported as a file ("" if it can): a FIFO or device would block the import."""
    try:
        return "" if stat.S_ISREG(path.stat().st_mode) else "is not a regular file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"


def unsafe_for_root(path: Path, euid: int | None = None) -> str:
    """Why root must not import code from `path` ("" if it may, and always when not root): as sudo and sshd
    judge their files, the file or folder, or a folder above it, is owned by another user or writable by
    group or others (a sticky folder such as /tmp above it is fine: nobody can replace what is in it)."""
    if (os.geteuid() if euid is None else euid) != 0:
        return ""
    target = path.resolve()
    for place in [target, *target.parents]:
        info = place.stat()
        where = "" if place == target else f"sits in {place}, which "
        if info.st_uid != 0:
            return f"{where}is owned by uid {info.st_uid}"
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and not (place != target and stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX):
            whom = "group" if writable == stat.S_IWGRP else "others" if writable == stat.S_IWOTH else "group and others"
            return f"{where}is writable by {whom} (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


Found = TypeVar("Found", CheckSpec, Declared)


def _first_of_each(found: list[Found], broken: list[tuple[str, str]]) -> list[Found]:
    """The first check of each id; a later one is a broken plugin."""
    seen: dict[str, Found] = {}
    for spec in found:
        if spec.id in seen:
            broken.append((spec.source, f"check id {spec.id} is already defined by {seen[spec.id].source}"))
        else:
            seen[spec.id] = spec
    return list(seen.values())
