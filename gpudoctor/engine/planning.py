"""Planning a run: the request, the config file and the checks found, merged into a Plan. Everything that
can be wrong with the input is found here, before any check runs; the request is read, never changed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudoctor.errors import InputError

if TYPE_CHECKING:
    from gpudoctor.cluster.env import ClusterEnv
    from gpudoctor.config import Config
    from gpudoctor.context import Options
    from gpudoctor.engine.request import Request
    from gpudoctor.registry import CheckSpec, Discovery

# The settings of the cluster run itself (how long to wait for nodes to join and to report), declared, with
# their defaults, by the cross-node check that judges the roster; the engine finds them by these names.
CLUSTER_RUN_SETTINGS = ("join_timeout", "report_timeout")


@dataclass
class Plan:
    """A run, fully checked before any check runs: what to run, on which facts, judged how."""

    options: Options
    specs: list[CheckSpec]  # in running order
    config: Config
    facts: dict[str, Any]
    source: str  # "live", or "snapshot:PATH"
    strict: bool
    broken: list[tuple[str, str]]  # plugins that failed to load
    cluster: ClusterEnv | None = None  # cluster mode: where this node stands
    cluster_settings: dict[str, Any] = field(default_factory=dict)  # the cluster run's waits
    files: dict[str, str] = field(default_factory=dict)  # the report files this node writes: option -> path
    node: str | None = None  # the node a live run judged, by the name Slurm knows it by (a report's `node`)


def plan(request: Request) -> Plan:
    """The plan for a request; raises an InputError (one line) for anything wrong with the input."""
    early_torch = start_torch_early(request)
    try:
        from gpudoctor import config as config_mod

        return _plan(request, config_mod.load(Path(request.config) if request.config else None), early_torch)
    except BaseException:
        if early_torch is not None:
            from gpudoctor.facts import torchinfo

            torchinfo.end(early_torch)
        raise


def start_torch_early(request: Request) -> Any:
    """The torch gateway's process, started first, before the config file is read and the checks are found,
    where the run will likely want torch facts (a live run not narrowed by --only): importing torch is the quick
    level's longest step, and everything else this process does (the config, discovery, the NVML, sysfs and
    kernel-log facts) overlaps it. A run narrowed by --only (the health probe) starts it only if its checks
    need it; one whose config file narrows it ends it once its checks are chosen (snapshot.gather)."""
    if request.from_file or request.only:
        return None
    from gpudoctor.facts import torchinfo

    return torchinfo.start()


def _plan(request: Request, cfg: Config, early_torch: Any) -> Plan:
    from gpudoctor import config as config_mod
    from gpudoctor.cluster.env import detect
    from gpudoctor.engine.runner import select, sources_for
    from gpudoctor.registry import discover
    from gpudoctor.workloads.launch import Fault

    discovery = discover([*request.checks_dirs, *cfg.top.get("checks_dir", [])])
    config_mod.validate_checks(cfg, discovery.specs)
    Fault.from_env()  # the test hook is read by the ranks; a malformed value is bad input here
    env = detect() if request.cluster and not request.from_file else None
    pasted = read_paste_for_live(request)
    options = _options(request, cfg.top, pasted)
    specs = select(discovery.specs, options)
    if env is None:  # cluster checks only where asked for by name: elsewhere they would only skip
        specs = [s for s in specs if "cluster" not in s.needs or _named(s, options)]
    files = report_files(request, env)
    facts, source = gather_facts(None if pasted else request.from_file, sources_for(specs), early_torch)
    if not facts.get("benchmarks"):  # judges of a user's benchmark output only where a file holds one
        specs = [s for s in specs if "benchmarks" not in s.needs or _named(s, options)]
    if pasted:
        facts["paste"], source = pasted["paste"], f"live, with the paste {request.from_file}"
    else:
        specs += pasted_owners(discovery.specs, specs, facts, options)
    strict = request.strict if request.strict is not None else bool(cfg.top.get("strict", False))
    return Plan(
        options=options,
        specs=specs,
        config=cfg,
        facts=facts,
        source=source,
        strict=strict,
        broken=discovery.broken,
        cluster=env,
        cluster_settings=cluster_run_settings(cfg, discovery),
        files=files,
        node=live_node(env, source),
    )


def _options(request: Request, top: dict[str, Any], pasted: dict[str, Any] | None) -> Options:
    """The run's options: the request's, else the config file's, else the defaults."""
    from gpudoctor.context import Options
    from gpudoctor.declarations import LEVELS

    options = Options(
        level=request.level or top.get("level", "quick"),
        only=list(request.only) or list(top.get("only", [])) or owners(pasted),
        skip=[*request.skip, *top.get("skip", [])],
        timeout=request.timeout,
        config_timeout=top.get("timeout"),
        expect_gpus=request.expect_gpus if request.expect_gpus is not None else top.get("expect_gpus"),
        device=request.device or top.get("device", "auto"),
        offline=bool(request.from_file) and pasted is None,
        baseline=load_baseline(request.baseline or top.get("baseline")),
        pasted_only=bool(pasted) and not request.only and not top.get("only"),
        budget=request.budget or top.get("budget"),
    )
    if options.level not in LEVELS:
        raise InputError(f"level must be one of {', '.join(LEVELS)}, not {options.level!r}")
    if options.device not in ("auto", "cuda", "cpu"):
        raise InputError(f"config: device must be auto, cuda or cpu, not {options.device!r}")
    return options


def _named(spec: CheckSpec, options: Options) -> bool:
    return any(p in (spec.id, spec.area) for p in options.only)


def this_node(env: ClusterEnv | None) -> tuple[str, str]:
    """This node's name, and why it is not one node's name ("" when it is): the cluster run's, else Slurm's
    (a world of one, `sbatch --nodes=1`, is no cluster run but is still a node), else the host's short name."""
    from gpudoctor.cluster.slurm import local_node

    return (env.node, "") if env else local_node()


def live_node(env: ClusterEnv | None, source: str) -> str | None:
    """The node a live run judges, by its name (None where the facts come from a file, or the name is none)."""
    node, refused = this_node(env)
    return None if refused or not source.startswith("live") else node


def report_files(request: Request, env: ClusterEnv | None) -> dict[str, str]:
    """The report files this node writes, each found writable now rather than after the checks ran. `{node}`
    in a path is this node's name, whatever the world size; in cluster mode every node writes the files whose
    path names it, rank 0 writes all of them."""
    from gpudoctor.cluster.slurm import shown
    from gpudoctor.files import require_writable

    asked = dict(request.files)
    node, refused = this_node(env)
    if refused and any("{node}" in path for path in asked.values()):
        raise InputError(f"{{node}} in a report's path: this node's name {shown(node, quote=True)}: {refused}")
    resolved = {name: path.replace("{node}", node) for name, path in asked.items()}
    for path in resolved.values():
        require_writable(path)
    if env is None or env.leader:
        return resolved
    return {name: path for name, path in resolved.items() if "{node}" in asked[name]}


def cluster_run_settings(cfg: Config, discovery: Discovery) -> dict[str, Any]:
    """The cluster run's own settings, from the check that declares them (its defaults, and the config's)."""
    declaring = [s for s in discovery.specs if set(CLUSTER_RUN_SETTINGS) <= set(s.settings)]
    return cfg.settings(declaring[0]) if declaring else {}


def read_paste_for_live(request: Request) -> dict[str, Any] | None:
    """With --live: the paste --from names, read for its error signatures; this machine gives the facts."""
    if not request.live:
        return None
    if not request.from_file:
        raise InputError("--live judges this machine against a paste: name the paste with --from FILE")
    from gpudoctor.paste import inputs

    facts = inputs.load(Path(request.from_file))
    if "paste" not in facts:
        raise InputError(f"--live reads a paste (an error, a log): {request.from_file} is a snapshot or a capture")
    return facts


def pasted_owners(
    every: list[CheckSpec], chosen: list[CheckSpec], facts: dict[str, Any], options: Options
) -> list[CheckSpec]:
    """The checks a paste judged offline names by its error signatures, at whatever level they run: a level says
    what runs on a machine, not which of a paste's lines are judged, so no line it read is dropped. --only and
    --skip still rule."""
    if "paste" not in facts or options.only:
        return []
    named = set(owners({"paste": facts["paste"]}))
    held = {s.id for s in chosen}
    skipped = set(options.skip)
    return [s for s in every if s.id in named and s.id not in held and not {s.id, s.area} & skipped]


def owners(pasted: dict[str, Any] | None) -> list[str]:
    """The checks whose causes the paste's error signatures name: what --live runs on this machine."""
    if not pasted:
        return []
    from gpudoctor.paste.signatures import table

    known = table()
    section = pasted.get("paste")
    sightings = section.get("signatures") if isinstance(section, dict) else None  # a saved paste may lack it
    named = {s.get("id") for s in sightings or () if isinstance(s, dict)}
    return sorted({known[i].owner for i in named if isinstance(i, str) and i in known})


def load_baseline(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    from gpudoctor import baseline

    return baseline.load(Path(path))


def gather_facts(from_file: str | None, sources: set[str], torch_proc: Any = None) -> tuple[dict[str, Any], str]:
    """A snapshot's facts, or this node's from the sources the selected checks need (and no others); a torch
    gateway already started is used, or ended if no check wants it."""
    if from_file:
        from gpudoctor.paste import inputs

        return inputs.load(Path(from_file)), f"snapshot:{from_file}"
    from gpudoctor.facts import snapshot

    return snapshot.gather(sources, torch_proc, meanwhile=ready_to_judge), "live"


def ready_to_judge() -> None:
    """What judging and reporting import once the facts are in (the runner's progress through the console, the
    diagnosis, the report document), imported while torch still imports in its gateway: the quick level's
    longest step, which this process would otherwise wait on with nothing to do (engine.execution itself is imported
    with the engine: naming it here would close a circle, as it names the Plan). Rich's live progress only where
    it is drawn, on a terminal's stderr (report.console.LiveProgress): a pipe's run never imports it."""
    import gpudoctor.diagnosis.revisions
    import gpudoctor.diagnosis.rules
    import gpudoctor.engine.budget
    import gpudoctor.report.console
    import gpudoctor.report.document
    import gpudoctor.vetting  # noqa: F401

    if sys.stderr.isatty():
        import rich.progress  # noqa: F401
