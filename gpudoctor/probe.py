"""Run gpudoctor from Python: the same plan and run the `gpudoctor check` command makes (it uses this
module), and every format it writes.

    from gpudoctor import probe

    report = probe.run(only=["health", "driver"])         # gathers only the facts those checks need
    report.exit_code, report.document["status"]           # 0/1, and the JSON report as a dict
    for result in report.results:                         # Result objects: status, summary, rows, metrics
        ...
    print(probe.render(report, "nagios"))                 # console, json, nagios, npd, junit, prometheus, html
    report = probe.load("rank0.json")                     # a saved report, to render again

    report = probe.run(level="standard", cluster=True)    # this node's part of a cluster run (torchrun, srun)

Bad input raises `probe.UsageError` with a one-line message.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from gpudoctor.execution import Plan, Report

if TYPE_CHECKING:
    from collections.abc import Iterable


class UsageError(Exception):
    """Bad input: printed as one line, exit code 2, no traceback."""


REPORT_FILES = ("output", "junit", "prom_file", "html")  # the options that name a report file


def plan(args: Any, cluster_mode: bool = False) -> Plan:
    """Everything that can be wrong with the input is found here, before any check runs."""
    from gpudoctor import config as config_mod

    try:
        cfg = config_mod.load(Path(args.config) if args.config else None)
    except config_mod.ConfigError as exc:
        raise UsageError(str(exc)) from None
    early_torch = start_torch_early(args, cfg.top)
    try:
        return _plan(args, cluster_mode, cfg, early_torch)
    except BaseException:
        if early_torch is not None:
            from gpudoctor.facts import torchinfo

            torchinfo.end(early_torch)
        raise


def start_torch_early(args: Any, top: dict[str, Any]) -> Any:
    """The torch gateway's process, started before check discovery where the run will surely want torch facts
    (a live run not narrowed by --only): importing torch is the quick level's longest step, and this lets it
    overlap the rest of the start. A narrowed run (the health probe) starts it only if its checks need it."""
    if args.from_file or args.only or top.get("only"):
        return None
    from gpudoctor.facts import torchinfo

    return torchinfo.start()


def _plan(args: Any, cluster_mode: bool, cfg: Any, early_torch: Any) -> Plan:
    from gpudoctor import config as config_mod
    from gpudoctor.cluster.env import ClusterEnvError, detect
    from gpudoctor.context import Options
    from gpudoctor.launch import Fault, FaultSpecError
    from gpudoctor.runner import SelectionError, select, sources_for

    try:
        discovery = discover(args.checks_dir + cfg.top.get("checks_dir", []))
        config_mod.validate_checks(cfg, discovery.specs)
        Fault.from_env()  # the test hook is read by the ranks; a malformed value is a usage error here
        env = detect() if cluster_mode and not args.from_file else None
    except (config_mod.ConfigError, FaultSpecError, ClusterEnvError) as exc:
        raise UsageError(str(exc)) from None
    top = cfg.top
    pasted = read_paste_for_live(args)
    options = Options(
        level=args.level or top.get("level", "quick"),
        only=args.only or list(top.get("only", [])) or owners(pasted),
        skip=args.skip + list(top.get("skip", [])),
        timeout=args.timeout,
        config_timeout=top.get("timeout"),
        expect_gpus=args.expect_gpus if args.expect_gpus is not None else top.get("expect_gpus"),
        device=args.device or top.get("device", "auto"),
        offline=bool(args.from_file) and pasted is None,
        baseline=load_baseline(args.baseline or top.get("baseline")),
    )
    if options.device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"config: device must be auto, cuda or cpu, not {options.device!r}")
    try:
        specs = select(discovery.specs, options)
    except SelectionError as exc:
        raise UsageError(str(exc)) from None
    if env is None:  # cluster checks only where asked for by name: elsewhere they would only skip
        specs = [s for s in specs if "cluster" not in s.needs or any(p in (s.id, s.area) for p in options.only)]
    else:  # every node writes the report files whose path names the node; rank 0 writes all of them
        args.own_files = [name for name in REPORT_FILES if "{node}" in (getattr(args, name, None) or "")]
        for name in args.own_files:
            setattr(args, name, getattr(args, name).replace("{node}", env.node))
    for path in (getattr(args, name, None) for name in REPORT_FILES):
        require_writable(path)
    facts, source = gather_facts(None if pasted else args.from_file, sources_for(specs), early_torch)
    if not facts.get("benchmarks"):  # judges of a user's benchmark output only where a file holds one
        specs = [s for s in specs if "benchmarks" not in s.needs or any(p in (s.id, s.area) for p in options.only)]
    if pasted:
        facts["paste"], source = pasted["paste"], f"live, with the paste {args.from_file}"
    strict = args.strict if args.strict is not None else bool(top.get("strict", False))
    nodes_spec = next(s for s in discovery.specs if s.id == "cluster.nodes")
    return Plan(options, specs, cfg, facts, source, strict, discovery.broken, env, cfg.settings(nodes_spec))


def read_paste_for_live(args: Any) -> dict[str, Any] | None:
    """With --live: the paste --from names, read for its error signatures; this machine gives the facts."""
    if not getattr(args, "live", False):
        return None
    if not args.from_file:
        raise UsageError("--live judges this machine against a paste: name the paste with --from FILE")
    from gpudoctor.facts import snapshot

    try:
        facts = snapshot.load(Path(args.from_file))
    except snapshot.SnapshotError as exc:
        raise UsageError(str(exc)) from None
    if "paste" not in facts:
        raise UsageError(f"--live reads a paste (an error, a log): {args.from_file} is a snapshot or a capture")
    return facts


def owners(pasted: dict[str, Any] | None) -> list[str]:
    """The checks whose causes the paste's error signatures name: what --live runs on this machine."""
    if not pasted:
        return []
    from gpudoctor.paste.signatures import table

    known = table()
    return sorted({known[s["id"]].owner for s in pasted["paste"]["signatures"] if s["id"] in known})


def discover(dirs: list[str]) -> Any:
    from gpudoctor.registry import discover

    try:
        return discover(dirs)
    except NotADirectoryError as exc:
        raise UsageError(str(exc)) from None


def load_baseline(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    from gpudoctor import baseline

    try:
        return baseline.load(Path(path))
    except baseline.BaselineError as exc:
        raise UsageError(str(exc)) from None


def gather_facts(from_file: str | None, sources: set[str], torch_proc: Any = None) -> tuple[dict[str, Any], str]:
    """A snapshot's facts, or this node's from the sources the selected checks need (and no others); a torch
    gateway already started is used, or ended if no check wants it."""
    from gpudoctor.facts import snapshot

    if from_file:
        try:
            return snapshot.load(Path(from_file)), f"snapshot:{from_file}"
        except snapshot.SnapshotError as exc:
            raise UsageError(str(exc)) from None
    return snapshot.gather(sources, torch_proc), "live"


def require_writable(output: str | None) -> None:
    """A report path whose folder is missing is found before the checks run, not after."""
    if output and not Path(output).resolve().parent.is_dir():
        raise UsageError(f"cannot write {output}: folder {Path(output).resolve().parent} does not exist")


def run(
    *,
    level: str | None = None,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    config: str | None = None,
    from_file: str | None = None,
    baseline: str | None = None,
    timeout: float | None = None,
    expect_gpus: int | None = None,
    device: str | None = None,
    strict: bool | None = None,
    checks_dir: Iterable[str] = (),
    cluster: bool = False,
    live: bool = False,
) -> Report:
    """Gather the facts the selected checks need, run them, and build the report (no output anywhere).

    With `cluster=True`, where the launcher's environment says this process is one node of a cluster run
    (torchrun or srun, one per node), it runs this node's part: rank 0 returns the cluster report (its
    document has a `cluster` object), every other node its own report with rank 0's verdict about it.
    Elsewhere it runs this node alone."""
    args = SimpleNamespace(
        level=level,
        only=list(only),
        skip=list(skip),
        config=config,
        from_file=from_file,
        baseline=baseline,
        timeout=timeout,
        expect_gpus=expect_gpus,
        device=device,
        strict=strict,
        checks_dir=list(checks_dir),
        live=live,
    )
    return perform(plan(args, cluster_mode=cluster))


def perform(chosen: Plan, show_progress: bool = False) -> Report:
    """Run a plan: this node alone, or this node's part of the cluster run the plan was made for."""
    from gpudoctor.execution import single_node

    if chosen.cluster is None:
        return single_node(chosen, show_progress)
    from gpudoctor.cluster.env import ClusterEnvError
    from gpudoctor.cluster_mode import run_node

    try:
        return run_node(chosen)
    except ClusterEnvError as exc:
        raise UsageError(str(exc)) from None


FORMATS = ("console", "json", "nagios", "npd", "junit", "prometheus", "html")


def load(path: str) -> Report:
    """A saved JSON report, to render again in any format (a report moved off an air-gapped cluster, or one a
    monitoring pipeline stored)."""
    from gpudoctor.report import document

    try:
        doc, results = document.load(Path(path))
    except document.ReportError as exc:
        raise UsageError(str(exc)) from None
    return Report(results, doc)


def render(report: Report, fmt: str, verbose: bool = False) -> str:
    """The report as text in one of FORMATS."""
    from gpudoctor.report import document as doc
    from gpudoctor.report import monitoring, prometheus

    if fmt == "json":
        return doc.dumps(report.document)
    if fmt in ("nagios", "npd"):
        return getattr(monitoring, fmt)(report.document)[0] + "\n"
    if fmt == "junit":
        return monitoring.junit(report.document)
    if fmt == "prometheus":
        return prometheus.render(report.document)
    if fmt == "html":
        from gpudoctor.report import html

        return html.render(report.document)
    if fmt == "console":
        return console_text(report, verbose)
    raise UsageError(f"no format {fmt!r}; one of {', '.join(FORMATS)}")


def console_text(report: Report, verbose: bool = False, width: int = 100) -> str:
    from rich.console import Console

    from gpudoctor.report.console import render, render_cluster

    console = Console(record=True, width=width, file=io.StringIO())
    (render_cluster if "cluster" in report.document else render)(console, report.document, report.results, verbose)
    return console.export_text()
