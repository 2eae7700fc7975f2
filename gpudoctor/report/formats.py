"""The output formats, in one table (pip's `commands_dict` is the model): each format's name, the module that
writes it (imported only when the format is used, so `--help`, `list` and the health probe load none of them),
whether `--format NAME` puts it on stdout or a file option writes it, and its exit code. The CLI's `--format`
choices and file options, `probe.render`, and the report files a run writes all come from TABLE.

Adding a format: one entry in TABLE, one module whose `render(document) -> str` writes it, and a test.
The console is the one format drawn from the results (with rich, to a terminal) rather than from the document."""

from __future__ import annotations

import importlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from gpudoctor.report import exits

if TYPE_CHECKING:
    from rich.console import Console

    from gpudoctor.model import Result

CONSOLE = "console"


@dataclass(frozen=True)
class Format:
    """One output format. `option` names the file option(s) that write it; `stdout` says `--format NAME`
    puts it on stdout. `plugin`: a monitoring agent runs gpudoctor as its plugin and reads stderr as an
    error (node-problem-detector logs it, cron mails it), so with it on stdout the files written are not
    announced there. The hooks name functions of `module`: `unjudged(said) -> (line, code)` answers for
    a run that judged nothing, `after_write(path) -> [warning]` looks at a file once written."""

    name: str
    module: str
    what: str  # how a message names it: "wrote {what} to FILE"
    summary: str = ""  # how --format's help names a stdout format
    function: str = "render"  # module.function(document) -> the whole text
    stdout: bool = False
    option: tuple[str, ...] = ()
    metavar: str = "FILE"
    help: str = ""  # the file option's help, after "write"
    exit_code: Callable[[dict[str, Any]], int] = exits.report_code  # the exit code with it on stdout
    plugin: bool = False
    unjudged: str | None = None
    after_write: str | None = None

    @property
    def dest(self) -> str:
        """The attribute argparse gives the file option (`--prom-file` -> `prom_file`)."""
        return self.option[-1].lstrip("-").replace("-", "_")

    def hook(self, function: str) -> Callable[..., Any]:
        """A function of the format's module, importing the module now (and only now)."""
        return getattr(importlib.import_module(self.module), function)

    def render(self, document: dict[str, Any]) -> str:
        """The whole text of the format for a report document (every format but the console)."""
        return self.hook(self.function)(document)


TABLE = (
    Format("console", "gpudoctor.report.console", "the console report", "console (the default)", stdout=True),
    Format(
        "json",
        "gpudoctor.report.document",
        "the JSON report",
        "json (the JSON report)",
        function="dumps",
        stdout=True,
        option=("-o", "--output"),
        help="the JSON report to FILE (atomically)",
    ),
    Format(
        "nagios",
        "gpudoctor.report.nagios",
        "the Nagios plugin line",
        "nagios (a plugin line, exit 0/1/2/3)",
        stdout=True,
        exit_code=exits.nagios_code,
        plugin=True,
        unjudged="unjudged",
    ),
    Format(
        "npd",
        "gpudoctor.report.npd",
        "the node-problem-detector line",
        "npd (a node-problem-detector plugin line, exit 0/1)",
        stdout=True,
        exit_code=exits.npd_code,
        plugin=True,
    ),
    Format("junit", "gpudoctor.report.junit", "the JUnit XML report", option=("--junit",), help="a JUnit XML report"),
    Format(
        "prometheus",
        "gpudoctor.report.prometheus",
        "the node_exporter metrics",
        option=("--prom-file",),
        metavar="FILE.prom",
        help="node_exporter textfile metrics, atomically",
        after_write="after_write",
    ),
    Format(
        "html",
        "gpudoctor.report.html",
        "the HTML report",
        option=("--html",),
        help="a self-contained HTML page (the whole cluster's from rank 0 of a cluster run, or its report)",
    ),
)
FORMATS = {f.name: f for f in TABLE}
STDOUT = tuple(f.name for f in TABLE if f.stdout)  # --format's choices
FILES = tuple(f for f in TABLE if f.option)  # in the order a run writes them
REPORT_FILES = tuple(f.dest for f in FILES)  # the options that name a report file, as argparse stores them


def stdout_help() -> str:
    """--format's help: each format stdout can carry, as its entry names it."""
    return "what stdout carries: " + ", ".join(FORMATS[name].summary for name in STDOUT)


def text(
    name: str,
    document: dict[str, Any],
    results: list[Result],
    verbose: bool = False,
    width: int = 100,
    saved: bool = False,
) -> str:
    """The report as text in format `name`: the console's as a terminal `width` wide would show it, uncoloured;
    `saved`: a report read back from its JSON, which the console's header says."""
    if name != CONSOLE:
        return FORMATS[name].render(document)
    from rich.console import Console

    screen = Console(record=True, width=width, file=io.StringIO())
    _draw(screen, document, results, verbose, saved)
    return screen.export_text()


def show(
    out: TextIO, name: str, document: dict[str, Any], results: list[Result], verbose: bool = False, saved: bool = False
) -> int:
    """The report on `out` (the CLI's stdout) in format `name`, the console's sized and coloured for it where
    it is a terminal (`saved`: read back from its JSON); the exit code that format answers with."""
    code = FORMATS[name].exit_code(document)
    try:
        if name == CONSOLE:
            _draw(_screen(out), document, results, verbose, saved)
        else:
            out.write(FORMATS[name].render(document))
        out.flush()
    except BrokenPipeError:
        closed(out)
    return code


def _screen(out: TextIO) -> Console:
    """Rich's console on `out`, except that a reader closing the pipe (`| head -1`) ends the output, not the run
    with Rich's own exit status 1, which a hook reads as "drain the node": the verdict's code stands."""
    from rich.console import Console

    from gpudoctor.report.console import fitted

    class Screen(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return fitted(Screen(file=out))


def closed(out: TextIO) -> None:
    """Point the closed stream at /dev/null, so what is left in its buffer and Python's own flush at exit write
    nowhere instead of failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _draw(screen: Console, document: dict[str, Any], results: list[Result], verbose: bool, saved: bool) -> None:
    """The console report of a node, or of a cluster (rank 0's document has a `cluster` object)."""
    draw = FORMATS[CONSOLE].hook("render_cluster" if "cluster" in document else "render")
    draw(screen, document, results, verbose, saved=saved)
