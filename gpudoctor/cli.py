"""The `gpudoctor` command. Imports are lazy: --help and --version load only this module and the format table
(report/formats.py, with the exit codes and the result vocabulary it names); `list` adds the registry, which reads
the built-in checks' declarations from their source without running a check module, and the console it prints
through. Everything else (the engine, the facts, the reports) loads when a command runs
(tests/test_front_door.py lists the modules each one loads)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gpudoctor import __version__
from gpudoctor.errors import InputError
from gpudoctor.report import formats
from gpudoctor.report.exits import EXIT_BROKEN, EXIT_INTERRUPTED, EXIT_USAGE
from gpudoctor.text import one_line

if TYPE_CHECKING:
    from gpudoctor import engine, probe
    from gpudoctor.engine import Request

LEVEL_HELP = "quick: facts only, seconds; standard: short workloads; full: four times the work (default: quick)"


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InputError(message)


CLUSTER_EXAMPLES = (
    (
        "srun --ntasks-per-node=1 gpudoctor check --level standard -o 'reports/{node}.json'",
        "one per node under Slurm: rank 0 prints the cluster's report, each node writes its own JSON",
    ),
    (
        "torchrun --nnodes 4 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint node-a:29400 -m gpudoctor check",
        "the same under torchrun, started on every node (docs/CLUSTER.md)",
    ),
)
CHECK_EXAMPLES = (
    ("gpudoctor check", "the facts: driver, CUDA against torch, GPU health (seconds)"),
    ("gpudoctor check --level standard", "also measure every GPU and train a reference model (minutes)"),
    ("gpudoctor check --from node.xml", "judge a snapshot, an nvidia-smi -q -x capture or a log, offline"),
    *CLUSTER_EXAMPLES,
)
EXAMPLES = (
    *CHECK_EXAMPLES,
    ("gpudoctor report rank0.json --html page.html", "a saved JSON report again, as one HTML page"),
    ("gpudoctor list", "every check, its level and what it judges"),
)


def examples(pairs: tuple[tuple[str, str], ...]) -> str:
    """The epilog of a --help: what each example does, as a shell comment, then its command whole on one line (to
    copy)."""
    return "examples:\n" + "".join(f"  # {what}\n  {command}\n" for command, what in pairs)


def build_parser() -> Parser:
    parser = Parser(
        prog="gpudoctor",
        description="Will this machine train PyTorch models on all its GPUs?\n"
        "If not: what is wrong, and the command that fixes it.",
        epilog=examples(EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    checker = sub.add_parser(
        "check",
        help="run the checks and report (exit 0 ok, 1 failed, 2 usage)",
        epilog=examples(CHECK_EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_check_options(checker)
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
    snap.add_argument(
        "--from-xml",
        metavar="FILE",
        help="convert an `nvidia-smi -q -x` capture to a snapshot instead of reading this node",
    )
    _add_report_parser(sub)
    drain = sub.add_parser(
        "drain",
        help="drain (Slurm) the nodes a report names; resume those gpudoctor drained that now pass",
    )
    drain.add_argument(
        "report", metavar="REPORT", help="rank 0's cluster report, or a one-node run's report (--json or -o)"
    )
    drain.add_argument("--dry-run", action="store_true", help="print the scontrol commands, run nothing")
    baseline = sub.add_parser("baseline", help="save this known-good node's measured figures")
    baseline_sub = baseline.add_subparsers(
        dest="baseline_command", metavar="ACTION", parser_class=Parser, required=True
    )
    saver = baseline_sub.add_parser("save", help="run the standard workloads and store their figures in FILE")
    saver.add_argument("file", metavar="FILE")
    _add_check_options(saver, for_baseline=True)
    return parser


def _add_report_parser(sub: Any) -> None:
    report = sub.add_parser("report", help="render a saved JSON report again, in any format or as an HTML page")
    report.add_argument("document", metavar="DOC.json", help="a report written by --json or -o")
    _add_format_options(report, default="console", also="")
    report.add_argument("-v", "--verbose", action="store_true", help="show every GPU row and metric")


def _add_format_options(p: argparse.ArgumentParser, default: str | None, also: str) -> None:
    """--format with every format stdout can carry, and a file option for every format written to a file: both
    from the format registry (report/formats.py), so a new format needs no change here."""
    p.add_argument("--format", choices=formats.STDOUT, default=default, help=formats.stdout_help())
    for fmt in formats.FILES:
        p.add_argument(*fmt.option, metavar=fmt.metavar, help=f"{also}write {fmt.help}")


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
        _add_format_options(p, default=None, also="also ")
        p.add_argument("--json", action="store_true", help="the same as --format json")
        p.add_argument("--strict", action="store_true", default=None, help="warnings fail too (exit 1)")
        p.add_argument(
            "--from",
            dest="from_file",
            metavar="FILE",
            help="judge a snapshot, an `nvidia-smi -q -x` capture, or what you have (collect_env, nvidia-smi output, "
            "kernel or NCCL log, the error; gzip too; - for stdin) offline instead of this machine (workloads skip)",
        )
        p.add_argument(
            "--live",
            action="store_true",
            help="with --from ERROR-OR-LOG: judge this machine, running the checks the paste's errors point to",
        )
        p.add_argument("--baseline", metavar="FILE", help="judge measured figures against a saved baseline")
        p.add_argument(
            "--budget",
            type=_seconds,
            metavar="S",
            help="end the whole run within S seconds: the facts, then the most telling workloads sized to fit; the "
            "rest skipped, saying what each would need",
        )
        p.add_argument("-v", "--verbose", action="store_true", help="show every GPU row and metric")
    p.add_argument("--timeout", type=_seconds, metavar="S", help="timeout per workload check in seconds")
    p.add_argument("--expect-gpus", type=_gpu_count, metavar="N", help="the number of GPUs this node has")
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


# A number as a person types it, in ASCII digits (float() and int() also take "１０", "٣" and "1_000").
DECIMAL = re.compile(r"[-+]?(?:(?:[0-9]{1,20}\.?[0-9]{0,20}|\.[0-9]{1,20})(?:[eE][-+]?[0-9]{1,3})?|nan|inf)", re.I)


def _seconds(text: str) -> float:
    """A time in seconds, more than 0 and at most a week (config.WEEK_S: a timer's own limit is near 2**33 s)."""
    from gpudoctor.config import WEEK_S

    if not DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds (0..{WEEK_S:g}, at most a week)")
    if not 0 < float(text) <= WEEK_S:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} must be more than 0 and at most a week (0..{WEEK_S:g} s)")
    return float(text)


def _gpu_count(text: str) -> int:
    from gpudoctor.config import MOST_GPUS

    if not (text.isascii() and text.isdigit() and len(text) <= 4 and int(text) <= MOST_GPUS):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number of GPUs in 0..{MOST_GPUS}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    """Exit codes mean one thing each, whatever happens: 0 every check passed (warnings allowed), 1 a check
    failed (the node is bad), 2 usage error (nothing judged), 3 gpudoctor itself broke or could not deliver
    its report (the node is not judged), 130 interrupted (Ctrl-C or SIGTERM, from the first instant). A reader
    that closes the pipe (`gpudoctor list | head -1`) ends the output, never the command or its code."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (Closable(stream) if stream is not None else None for stream in streams)
    try:
        return _run(sys.argv[1:] if argv is None else argv)
    finally:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        sys.stdout, sys.stderr = streams


class Closable:
    """A standard stream whose reader may go (`| head -1`, a pager quit): from the first write or flush that finds
    the pipe closed, its descriptor points at /dev/null and the command goes on to its own exit code (`drain` to
    its last node). Without it the error ends the command (exit 1 or 3), or Python's flush at exit fails (120)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            formats.closed(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            formats.closed(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _run(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            build_parser().print_help()
            return 0
        return COMMANDS[args.command](args)
    except InputError as exc:  # every kind of bad input, from the options to the files they name
        return _unjudged(argv, f"error: {exc}", EXIT_USAGE)
    except DeliveryError as exc:
        return _unjudged(argv, f"error: {exc}; the checks ran, but their report is not where it was asked", EXIT_BROKEN)
    except KeyboardInterrupt:
        return _unjudged(argv, "interrupted before it could judge", EXIT_INTERRUPTED)
    except Exception as exc:  # a bug: never exit 0 or 1, which hooks read as "healthy" and "drain it"
        said = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        return _unjudged(argv, f"internal error: {said} (a bug in gpudoctor: the node is not judged)", EXIT_BROKEN)


class DeliveryError(Exception):
    """A report file could not be written after the checks ran."""


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _unjudged(argv: list[str], said: str, code: int) -> int:
    """One line on stderr; where the asked-for format answers for an unjudged run (Nagios: UNKNOWN), its line
    on the report's stream too, and its exit code."""
    said = one_line(said)  # the gate: a file name or an option's value may hold any character
    print(f"gpudoctor: {said}", file=sys.stderr)
    fmt = formats.FORMATS.get(_requested_format(argv) or "")
    if fmt is None or fmt.unjudged is None:
        return code
    line, code = fmt.hook(fmt.unjudged)(said.removeprefix("error: "))
    print(line, file=_REPORT[0] if _REPORT else sys.stdout, flush=True)
    return code


_REPORT: list[Any] = []  # the report's stream, once stdout is kept for it alone


def _requested_format(argv: list[str]) -> str | None:
    """--format's value, read from the raw arguments (they may not have parsed)."""
    for i, arg in enumerate(argv):
        if arg == "--format" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--format="):
            return arg.split("=", 1)[1]
    return None


def cmd_list(args: argparse.Namespace) -> int:
    """Every check, its level, source and description, one row each, and a row per plugin that did not load:
    printed as plain columns (report/columns.py) where every cell is ASCII, else through the console."""
    from gpudoctor import declarations
    from gpudoctor.report import columns

    if declarations.plugins_possible(args.checks_dir):
        from gpudoctor.registry import listing

        found = listing(args.checks_dir)
    else:
        found = declarations.Listing(list(declarations.builtin_declarations()))
    rows = [(d.id, d.level, d.source, d.description) for d in found.declared]
    rows += [("plugins.load", "-", source, f"failed to load: {error}") for source, error in found.broken]
    rows = [tuple(" ".join(one_line(cell).split()) for cell in row) for row in rows]
    if not columns.plain([cell for row in rows for cell in row]):
        _list_through_the_console(rows)
        return 0
    for line in columns.lines([LIST_HEADER, *rows], columns.terminal_width()):
        print(line)
    return 0


LIST_HEADER = ("id", "level", "source", "description")


def _list_through_the_console(rows: list[tuple[str, ...]]) -> None:
    """Rows with a character whose width is not one column (a plugin's description in another script): Rich
    measures each."""
    from rich.console import Console
    from rich.table import Table

    from gpudoctor.report.console import add, emit, fitted

    table = Table(box=None, pad_edge=False)
    for column in LIST_HEADER:
        table.add_column(column, overflow="fold")
    for row in rows:
        add(table, *row)
    emit(fitted(Console()), table)


def cmd_snapshot(args: argparse.Namespace) -> int:
    from gpudoctor.facts import snapshot
    from gpudoctor.files import require_writable

    require_writable(args.output)
    text = snapshot.dumps(_capture(args.from_xml) if args.from_xml else snapshot.gather())
    if args.output:
        _write(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0


def _capture(path: str) -> dict[str, Any]:
    """An nvidia-smi -q -x capture as a snapshot; any other file is a usage error."""
    from gpudoctor.facts import snapshot
    from gpudoctor.files import read_input

    data = read_input(path, "capture", snapshot.SnapshotError)
    if snapshot.content_kind(data) != "capture":
        raise InputError(f"{path} is not an nvidia-smi -q -x capture (XML starting with <nvidia_smi_log>)")
    return snapshot.capture_from(Path(path), data)


def cmd_check(args: argparse.Namespace) -> int:
    from gpudoctor import engine

    args.format = _format(args)
    args.report = _report_stream()
    chosen = engine.plan(request_from(args))
    for name in formats.REPORT_FILES:  # the files this node writes, as planned ({node} filled in)
        setattr(args, name, chosen.files.get(name))
    report = engine.perform(chosen, show_progress=args.format == "console")
    if chosen.cluster is not None and not chosen.cluster.leader:
        return _report_own_part(args, chosen, report)
    return _show(args, report)


def request_from(args: argparse.Namespace) -> Request:
    """The run `gpudoctor check`'s options ask for, as the engine takes it: this node's part of a cluster run
    where the launcher's environment says it is one, else this node alone."""
    from gpudoctor.engine import Request

    return Request(
        level=args.level,
        only=tuple(args.only),
        skip=tuple(args.skip),
        from_file=args.from_file,
        live=args.live,
        config=args.config,
        checks_dirs=tuple(args.checks_dir),
        baseline=args.baseline,
        strict=args.strict,
        timeout=args.timeout,
        budget=args.budget,
        expect_gpus=args.expect_gpus,
        device=args.device,
        cluster=True,
        files=tuple((name, getattr(args, name)) for name in formats.REPORT_FILES if getattr(args, name)),
    )


def _format(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        raise InputError(f"--json and --format {args.format} ask for two different reports on stdout")
    if args.prom_file and not args.prom_file.endswith(".prom"):
        raise InputError(f"--prom-file {args.prom_file}: node_exporter's textfile collector reads only *.prom files")
    return "json" if args.json else args.format or "console"


def _report_stream() -> Any:
    """The report's own copy of stdout. File descriptor 1 itself goes to stderr from here on, so nothing a
    check or plugin prints (Python or C, this process or a child that inherits it) lands in the report."""
    sys.stdout.flush()
    report = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    _REPORT[:] = [report]
    return report


def cmd_baseline(args: argparse.Namespace) -> int:
    from gpudoctor import baseline, engine
    from gpudoctor.engine import Request
    from gpudoctor.files import require_writable

    require_writable(args.file)
    request = Request(
        level="standard",
        config=args.config,
        checks_dirs=tuple(args.checks_dir),
        timeout=args.timeout,
        expect_gpus=args.expect_gpus,
        device=args.device,
    )
    chosen = engine.plan(request)
    saved = baseline.from_results(engine.perform(chosen, show_progress=True).results, chosen.facts)
    if not saved["figures"]:
        raise InputError("no workload produced a figure to save; run on the node with its GPUs")
    _write(Path(args.file), baseline.dumps(saved))
    print(f"saved {len(saved['figures'])} figures to {args.file}")
    return 0


def _report_own_part(args: argparse.Namespace, plan: engine.Plan, report: engine.Report) -> int:
    """A node other than rank 0: one line on stderr (srun merges every node's output), saying its own verdict
    and rank 0's about it; its report files (those whose path names the node, {node}: the plan's)."""
    from gpudoctor.cluster.node import VERDICT_CHECK

    env = plan.cluster
    assert env is not None
    verdict = next(r for r in report.results if r.check_id == VERDICT_CHECK)
    said = f"{env.node} (rank {env.rank} of {env.world_size}): {report.document['status']}, exit {report.exit_code}"
    print(f"gpudoctor: {one_line(said)}; {verdict.summary}", file=sys.stderr)
    _write_files(args, report.document)
    return report.exit_code


def _show(args: argparse.Namespace, report: probe.Report) -> int:
    """The report on stdout in the asked-for format, the report files; the format's exit code."""
    saved = args.command == "report"
    code = formats.show(args.report, args.format, report.document, report.results, args.verbose, saved)
    args.report.flush()
    _write_files(args, report.document)
    return code


def _write_files(args: argparse.Namespace, document: dict[str, Any]) -> None:
    """Every report file asked for, in the registry's order, each named on stderr once written (not where stdout
    carries a monitoring plugin's answer: its agent reads stderr as an error), with what the format warns of."""
    quiet = formats.FORMATS[args.format].plugin
    for fmt in formats.FILES:
        path = getattr(args, fmt.dest)
        if not path:
            continue
        _write(Path(path), fmt.render(document))
        if not quiet:
            print(f"gpudoctor: wrote {fmt.what} to {one_line(str(path))}", file=sys.stderr)
        for warning in fmt.hook(fmt.after_write)(path) if fmt.after_write else ():
            print(f"gpudoctor: warning: {one_line(warning)}", file=sys.stderr)


def _write(path: Path, text: str) -> None:
    from gpudoctor.files import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        raise DeliveryError(f"cannot write {path}: {exc.strerror}") from None


def cmd_report(args: argparse.Namespace) -> int:
    """A saved report in the asked-for format on stdout and in the asked-for files; the format's exit code."""
    from gpudoctor import probe
    from gpudoctor.files import require_writable

    args.json, args.report = False, sys.stdout
    args.format = _format(args)
    for name in formats.REPORT_FILES:
        require_writable(getattr(args, name))
    return _show(args, probe.load(args.document))


def cmd_drain(args: argparse.Namespace) -> int:
    """Drain what rank 0 named (or a one-node run's failed node), never a node an administrator holds; resume
    what gpudoctor drained."""
    from gpudoctor.cluster import slurm

    report = slurm.load_report(Path(args.report))
    states, problem = slurm.node_states([n["name"] for n in report["cluster"]["nodes"]])
    if problem and not args.dry_run:
        raise InputError(f"cannot read the nodes' state ({problem}): nothing drained")
    if problem:
        print(f"gpudoctor: {problem}: an administrator's drain cannot be told apart, nothing resumed", file=sys.stderr)
    return slurm.apply(slurm.plan(report, states, known=not problem), args.dry_run, print)


COMMANDS = {
    "check": cmd_check,
    "list": cmd_list,
    "snapshot": cmd_snapshot,
    "baseline": cmd_baseline,
    "drain": cmd_drain,
    "report": cmd_report,
}
