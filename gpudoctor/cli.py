"""The `gpudoctor` command. Imports are lazy: --help, --version and `list` never import torch or pynvml."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gpudoctor import __version__

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpudoctor.cluster import ClusterContext, ClusterEnv
    from gpudoctor.config import Config
    from gpudoctor.context import Options
    from gpudoctor.registry import CheckSpec

LEVEL_HELP = "quick: facts only, seconds; standard: short workloads; full: four times the work (default: quick)"


class UsageError(Exception):
    """Bad input: printed as one line, exit code 2, no traceback."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> Parser:
    parser = Parser(
        prog="gpudoctor",
        description="Will this machine train PyTorch models on all its GPUs? "
        "If not: what is wrong, and the command that fixes it.",
    )
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    _add_check_options(sub.add_parser("check", help="run the checks and report (exit 0 ok, 1 failed, 2 usage)"))
    lister = sub.add_parser("list", help="list every check with its id, level and source")
    lister.add_argument(
        "--checks-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="also load site-local check modules from DIR (repeatable)",
    )
    snap = sub.add_parser("snapshot", help="write the node's facts as a JSON snapshot")
    snap.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    baseline = sub.add_parser("baseline", help="save this known-good node's measured figures")
    baseline_sub = baseline.add_subparsers(
        dest="baseline_command", metavar="ACTION", parser_class=Parser, required=True
    )
    saver = baseline_sub.add_parser("save", help="run the standard workloads and store their figures in FILE")
    saver.add_argument("file", metavar="FILE")
    _add_check_options(saver, for_baseline=True)
    return parser


def _add_check_options(p: argparse.ArgumentParser, for_baseline: bool = False) -> None:
    if not for_baseline:
        p.add_argument("--level", choices=("quick", "standard", "full"), help=LEVEL_HELP)
        p.add_argument(
            "--only",
            nargs="+",
            action="extend",
            default=[],
            metavar="ID",
            help="run only these checks or areas (any level)",
        )
        p.add_argument(
            "--skip", nargs="+", action="extend", default=[], metavar="ID", help="skip these checks or areas"
        )
        p.add_argument("--json", action="store_true", help="print the JSON report instead of the console report")
        p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON report to FILE")
        p.add_argument("--strict", action="store_true", default=None, help="warnings fail too (exit 1)")
        p.add_argument(
            "--from",
            dest="from_file",
            metavar="FILE",
            help="judge a snapshot offline instead of this machine (workloads skip)",
        )
        p.add_argument("--baseline", metavar="FILE", help="judge measured figures against a saved baseline")
        p.add_argument("-v", "--verbose", action="store_true", help="show every GPU row and metric")
    p.add_argument("--timeout", type=_positive_float, metavar="S", help="timeout per workload check in seconds")
    p.add_argument("--expect-gpus", type=_non_negative_int, metavar="N", help="the number of GPUs this node has")
    p.add_argument("--config", metavar="FILE", help="TOML file with settings and per-check thresholds")
    p.add_argument(
        "--device",
        choices=("auto", "cuda", "cpu"),
        default=None,
        help="where workloads run: auto (GPUs if torch sees them, else CPU with gloo)",
    )
    p.add_argument(
        "--checks-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="also load site-local check modules from DIR (repeatable; env GPUDOCTOR_CHECKS_DIR)",
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def _non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            build_parser().print_help()
            return 0
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"gpudoctor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def cmd_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    discovery = _discover(args.checks_dir)
    table = Table(box=None, pad_edge=False)
    for column in ("id", "level", "source", "description"):
        table.add_column(column, overflow="fold")
    for spec in discovery.specs:
        table.add_row(spec.id, spec.level, spec.source, spec.description)
    for source, error in discovery.broken:
        table.add_row("plugins.load", "-", source, f"failed to load: {error}")
    Console().print(table)
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from gpudoctor.facts import snapshot

    _require_writable(args.output)
    text = snapshot.dumps(snapshot.gather())
    if args.output:
        _write(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    plan = _plan(args, cluster_mode=True)
    if plan.cluster is not None:
        return _run_cluster(args, plan)
    return _run_and_report(args, plan)


def cmd_baseline(args: argparse.Namespace) -> int:
    from gpudoctor import baseline

    args.level, args.only, args.skip, args.from_file, args.baseline = "standard", [], [], None, None
    args.strict, args.json, args.output, args.verbose = None, False, None, False
    _require_writable(args.file)
    plan = _plan(args)
    run = _execute(plan, show_progress=True)
    saved = baseline.from_results(run.results, plan.facts)
    if not saved["figures"]:
        raise UsageError("no workload produced a figure to save; run on the node with its GPUs")
    _write(Path(args.file), baseline.dumps(saved))
    print(f"saved {len(saved['figures'])} figures to {args.file}")
    return 0


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
    cluster_settings: dict[str, Any] = field(default_factory=dict)  # cluster.nodes' settings: waits, fractions


def _plan(args: argparse.Namespace, cluster_mode: bool = False) -> Plan:
    """Everything that can be wrong with the input is found here, before any check runs."""
    from gpudoctor import cluster
    from gpudoctor import config as config_mod
    from gpudoctor.context import Options
    from gpudoctor.launch import Fault, FaultSpecError
    from gpudoctor.runner import SelectionError, select, sources_for

    try:
        cfg = config_mod.load(Path(args.config) if args.config else None)
        discovery = _discover(args.checks_dir + cfg.top.get("checks_dir", []))
        config_mod.validate_checks(cfg, discovery.specs)
        Fault.from_env()  # the test hook is read by the ranks; a malformed value is a usage error here
        env = cluster.detect() if cluster_mode and not args.from_file else None
    except (config_mod.ConfigError, FaultSpecError, cluster.ClusterEnvError) as exc:
        raise UsageError(str(exc)) from None
    top = cfg.top
    options = Options(
        level=args.level or top.get("level", "quick"),
        only=args.only or list(top.get("only", [])),
        skip=args.skip + list(top.get("skip", [])),
        timeout=args.timeout,
        config_timeout=top.get("timeout"),
        expect_gpus=args.expect_gpus if args.expect_gpus is not None else top.get("expect_gpus"),
        device=args.device or top.get("device", "auto"),
        offline=bool(args.from_file),
        baseline=_load_baseline(args.baseline or top.get("baseline")),
    )
    if options.device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"config: device must be auto, cuda or cpu, not {options.device!r}")
    try:
        specs = select(discovery.specs, options)
    except SelectionError as exc:
        raise UsageError(str(exc)) from None
    if env is None:  # cluster checks only where asked for by name: elsewhere they would only skip
        specs = [s for s in specs if "cluster" not in s.needs or any(p in (s.id, s.area) for p in options.only)]
    elif getattr(args, "output", None):
        args.node_output = "{node}" in args.output  # other nodes write only to a path of their own
        args.output = args.output.replace("{node}", env.node)
    _require_writable(getattr(args, "output", None))
    facts, source = _facts(args.from_file, sources_for(specs))
    strict = args.strict if args.strict is not None else bool(top.get("strict", False))
    nodes_spec = next(s for s in discovery.specs if s.id == "cluster.nodes")
    return Plan(options, specs, cfg, facts, source, strict, discovery.broken, env, cfg.settings(nodes_spec))


def _discover(dirs: list[str]) -> Any:
    from gpudoctor.registry import discover

    try:
        return discover(dirs)
    except NotADirectoryError as exc:
        raise UsageError(str(exc)) from None


def _load_baseline(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    from gpudoctor import baseline

    try:
        return baseline.load(Path(path))
    except baseline.BaselineError as exc:
        raise UsageError(str(exc)) from None


def _facts(from_file: str | None, sources: set[str]) -> tuple[dict[str, Any], str]:
    """A snapshot's facts, or this node's from the sources the selected checks need (and no others)."""
    from gpudoctor.facts import snapshot

    if from_file:
        try:
            return snapshot.load(Path(from_file)), f"snapshot:{from_file}"
        except snapshot.SnapshotError as exc:
            raise UsageError(str(exc)) from None
    return snapshot.gather(sources), "live"


def _execute(
    plan: Plan,
    show_progress: bool,
    specs: list[CheckSpec] | None = None,
    cluster: ClusterContext | None = None,
    on_start: Callable[[str], None] | None = None,
) -> Any:
    from rich.console import Console

    from gpudoctor.report.console import LiveProgress
    from gpudoctor.runner import broken_plugin_results, run_checks

    specs = plan.specs if specs is None else specs
    progress = LiveProgress(Console(stderr=True), len(specs))

    def hook(event: str, check_id: str, title: str) -> None:
        if on_start and event == "start":
            on_start(check_id)
        if show_progress:
            progress(event, check_id, title)

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with progress.context() if show_progress else nullcontext():
            run = run_checks(specs, plan.facts, plan.options, plan.config.settings, hook, cluster)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if cluster is None or cluster.leader:
        run.results = broken_plugin_results(plan.broken) + run.results
    return run


def _meta(plan: Plan, started_at: str, started: float) -> dict[str, Any]:
    return {
        "host": plan.facts["system"].get("hostname") or os.uname().nodename,
        "started_at": started_at,
        "duration_s": round(time.monotonic() - started + plan.facts.get("gather_s", 0.0), 3),
        "level": plan.options.level,
        "source": plan.source,
    }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _run_and_report(args: argparse.Namespace, plan: Plan) -> int:

    from gpudoctor.report import document as doc

    started_at, started = _now(), time.monotonic()
    run = _execute(plan, show_progress=not args.json)
    code = doc.exit_code(run.results, plan.strict, run.interrupted)
    document = doc.build(run.results, _meta(plan, started_at, started), code, run.interrupted)
    _show(args, document, run.results, cluster_report=False)
    return code


# How long rank 0 waits for every node's own report (nodes that stop beating are not waited for).
REPORT_WAIT_S = {"quick": 120.0, "standard": 1800.0, "full": 3600.0}


def _run_cluster(args: argparse.Namespace, plan: Plan) -> int:
    """One node of a cluster run: its own checks, its report to rank 0, its part in the cross-node checks;
    rank 0 then writes the cluster report. Every other node exits by its own verdict."""
    from gpudoctor import cluster
    from gpudoctor.report import document as doc

    env, settings = plan.cluster, plan.cluster_settings
    local = [s for s in plan.specs if "cluster" not in s.needs]
    across = [s for s in plan.specs if "cluster" in s.needs]
    started_at, started = _now(), time.monotonic()
    try:
        session = cluster.Session(env, settings["join_timeout"])
    except cluster.STORE_ERRORS as exc:
        raise UsageError(f"cannot reach the cluster store at {env.master_addr}:{env.master_port}: {exc}") from None
    session.join({"version": __version__, "cluster_checks": [s.id for s in across]})
    try:
        run = _execute(plan, show_progress=False, specs=local, on_start=session.mark)
        own = doc.build(run.results, _meta(plan, started_at, started), 0, run.interrupted)
        own["exit_code"] = doc.exit_code(run.results, plan.strict, run.interrupted)
        session.share(cluster.node_report(env, own, plan.facts, [s.id for s in across]))
        context = cluster.ClusterContext(session)
        if env.leader:
            wait = settings["report_timeout"] or plan.options.timeout or REPORT_WAIT_S[plan.options.level]
            context.nodes = session.roster(settings["join_timeout"], wait)
        joint = _execute(plan, show_progress=False, specs=across, cluster=context, on_start=session.mark)
    finally:
        session.close()
    if not env.leader:
        return _report_own_part(args, plan, run.results + joint.results, started_at, started)
    interrupted = run.interrupted or joint.interrupted
    document = doc.build_cluster(
        joint.results,
        context.node_summaries(),
        _meta(plan, started_at, started),
        plan.strict,
        interrupted,
        env.launcher,
    )
    _show(args, document, joint.results, cluster_report=True)
    return document["exit_code"]


def _report_own_part(args: argparse.Namespace, plan: Plan, results: list[Any], started_at: str, started: float) -> int:
    """A node other than rank 0: a line on stderr (srun merges every node's output), its own document only to
    an -o path that names the node ({node})."""
    from gpudoctor.report import document as doc

    code = doc.exit_code(results, plan.strict, False)
    document = doc.build(results, _meta(plan, started_at, started), code, False)
    env = plan.cluster
    print(
        f"gpudoctor: {env.node} (rank {env.rank} of {env.world_size}): {document['status']}, exit {code}; "
        "rank 0 writes the cluster report",
        file=sys.stderr,
    )
    if args.output and getattr(args, "node_output", False):
        _write(Path(args.output), doc.dumps(document))
    return code


def _show(args: argparse.Namespace, document: dict[str, Any], results: list[Any], cluster_report: bool) -> None:
    from rich.console import Console

    from gpudoctor.report import document as doc

    if args.json:
        sys.stdout.write(doc.dumps(document))
    else:
        from gpudoctor.report.console import render, render_cluster

        (render_cluster if cluster_report else render)(Console(), document, results, args.verbose)
    if args.output:
        _write(Path(args.output), doc.dumps(document))


def _require_writable(output: str | None) -> None:
    """A report path whose folder is missing is found before the checks run, not after."""
    if output and not Path(output).resolve().parent.is_dir():
        raise UsageError(f"cannot write {output}: folder {Path(output).resolve().parent} does not exist")


def _write(path: Path, text: str) -> None:
    from gpudoctor.files import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


COMMANDS = {"check": cmd_check, "list": cmd_list, "snapshot": cmd_snapshot, "baseline": cmd_baseline}
