"""The Rich console report: summary line first, then what to do first, a table per area, remediation under each
failure.

Rich honours NO_COLOR and writes no colour codes when the output is not a terminal. Fix commands are printed
outside tables and never wrapped, and no line ends in spaces, so a command copied from a terminal, a pipe or a
file runs as it was written.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import fields
from itertools import groupby
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from gpudoctor.model import (
    SEVERITY,
    Cause,
    Metric,
    Remediation,
    Result,
    Status,
    cause_from_dict,
    finite_number,
    places,
)
from gpudoctor.report.columns import MIN_WIDTH

if TYPE_CHECKING:
    from rich.progress import Progress

STYLE = {
    Status.PASS: ("PASS", "green"),
    Status.WARN: ("WARN", "yellow"),
    Status.FAIL: ("FAIL", "bold red"),
    Status.ERROR: ("ERROR", "bold magenta"),
    Status.TIMEOUT: ("TIMEOUT", "bold red"),
    Status.SKIP: ("skip", "dim"),
}


def badge(status: Status) -> Text:
    label, style = STYLE[status]
    return Text(label, style=style)


SHOWN = 12  # rows, metrics and findings listed without -v; the JSON report keeps all
LABEL_MAX = 28  # the check column's widest; a longer id folds
FIRST_TITLE = "do this first"
COMMAND_ROOM = 40  # columns a command keeps beside its indent before the indent shrinks to two


def render(
    console: Console, document: dict[str, Any], results: list[Result], verbose: bool = False, saved: bool = False
) -> None:
    """A node's report. `saved`: a report read back from its JSON (`gpudoctor report`), which the header says
    instead of calling it live."""
    emit(console, _summary_line(document, results, saved))
    width = _list_width(results, verbose)
    place = document["host"] if document["source"] == "live" else ""  # a file's name is not a place
    _first_steps(console, results, causes_of(document), place, verbose, width)
    _render_results(console, results, verbose, width)
    emit(console, _closing_line(document))


def causes_of(document: dict[str, Any]) -> list[Cause]:
    """The causes a report document holds (none in a report older than schema 5)."""
    return [cause_from_dict(c) for c in document.get("causes") or []]


def label_text(label: str, width: int) -> Text:
    """A check's label in a column `width` wide: where it does not fit, broken after its `:` (the aspect on
    lines of its own), then after a `.` or `-`, never inside a word (`torch.cuda-available:` /
    `cuda-error-804-forward-compat`)."""
    if len(label) <= width:
        return Text(label)
    head, colon, aspect = label.partition(":")
    parts = [head + colon, aspect] if colon else [label]
    return Text("\n".join(line for part in parts for line in _wrapped(part, width)))


def _wrapped(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for piece in re.findall(r"[^.:-]+[.:-]?|[.:-]", text):
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    return [*lines, line] if line else lines


def add(table: Table, *cells: RenderableType) -> None:
    """A table row whose text cells are shown as they are: a string is never read as Rich markup (a pasted
    "[link=...]" or "[/opt/conda/...]" stays text, and cannot hide, link or break the report), and a run of white
    space in it is one space (it cannot push what follows onto a line of its own)."""
    table.add_row(*(Text(" ".join(cell.split())) if isinstance(cell, str) else cell for cell in cells))


def fitted(console: Console) -> Console:
    """`console` at least MIN_WIDTH wide, whatever COLUMNS or the terminal says; a COLUMNS that is no number is
    Rich's to ignore (the terminal's width, else 80)."""
    if console.width < MIN_WIDTH:
        console.width = MIN_WIDTH
    return console


def emit(console: Console, renderable: RenderableType) -> None:
    """Print `renderable` laid out at the console's width with no trailing spaces on any line (Rich pads table
    cells and titles to their width). Commands are printed by `verbatim` only: a line laid out here that would
    begin with `$` (text from a paste wrapped there) begins with `…` instead, so it cannot pass for a command."""
    for line in console.render_lines(renderable, pad=False):
        console.print(Segments([*_unlike_a_command(_rstripped(line)), Segment.line()]), soft_wrap=True, end="")


def _unlike_a_command(line: list[Segment]) -> list[Segment]:
    for index, segment in enumerate(line):
        if segment.control or not segment.text.strip():
            continue
        if segment.text.lstrip().startswith("$"):
            spaces = len(segment.text) - len(segment.text.lstrip())
            line[index] = Segment(f"{segment.text[:spaces]}…{segment.text[spaces:]}", segment.style)
        break
    return line


def _rstripped(line: list[Segment]) -> list[Segment]:
    line = list(line)
    while line and not line[-1].control and not line[-1].text.rstrip():
        line.pop()
    if line and not line[-1].control:
        last = line[-1]
        line[-1] = Segment(last.text.rstrip(), last.style)
    return line


def verbatim(console: Console, text: str, style: str = "") -> None:
    """One line exactly as given, whatever the width: never wrapped, cropped or padded (a command, a node list
    to paste)."""
    one_line = text.rstrip().replace("\r", "\\r").replace("\n", "\\n")
    console.print(Text(one_line, style=style), soft_wrap=True)


def _label_width(results: list[Result]) -> int:
    return min(max((len(r.label) for r in results), default=10), LABEL_MAX)


def _list_width(results: list[Result], verbose: bool) -> int:
    """The check column's width: the longest label the list shows (repeated skips are collapsed without -v)."""
    return _label_width(results if verbose else collapse_skips(results)[0])


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (the whole text where there is none)."""
    found = re.search(r"\.(?=\s+[A-Z(])", text)
    return text[: found.end()] if found else text


def _row_table(width: int) -> Table:
    """A status, a check and its result: every table of the list shares the first two columns' widths, so
    tables printed one after another (split where a fix's commands are printed) line up."""
    table = Table(show_header=False, box=None, pad_edge=False, expand=False)
    table.add_column("status", no_wrap=True, width=7)
    table.add_column("check", overflow="fold", width=width)
    table.add_column("result", overflow="fold", ratio=1)
    return table


def _indent(console: Console, width: int) -> str:
    """Spaces up to the result column (7 + 2 + width + 2) where that leaves a command COMMAND_ROOM columns; two
    on a narrower console."""
    column = width + 11
    return " " * (column if console.width - column >= COMMAND_ROOM else 2)


def _first_steps(
    console: Console, results: list[Result], causes: list[Cause], place: str, verbose: bool, width: int
) -> None:
    """What is wrong, worst first: each cause the diagnosis found (what it is, the findings it explains) with the
    commands that cure it, then every failure and warning no cause explains (the check, where, the problem) with
    its own; nothing when all passed. The full list follows."""
    urgent = sorted(
        (r for r in results if (r.status.is_failure or r.status == Status.WARN) and not r.explained_by),
        key=lambda r: -SEVERITY[r.status],
    )
    leading = [c for c in causes if c.status != Status.PASS]
    if not urgent and not leading:
        return
    emit(console, Text(FIRST_TITLE, style="bold"))
    entries: list[Cause | Result] = [*leading, *urgent]
    shown = entries if verbose else entries[:SHOWN]
    for entry in shown:
        table = _row_table(width)
        if isinstance(entry, Cause):
            add(
                table, badge(entry.status), label_text(entry.id, width), verdict(entry.summary, console, width, verbose)
            )
            if entry.explains:
                add(table, "", "", Text(f"explains {', '.join(entry.explains)}", style="dim"))
        else:
            said = verdict(_problem(entry, place), console, width, verbose)
            add(table, badge(entry.status), label_text(entry.label, width), said)
            _add_quotes(table, console, entry.quotes[:2], width)
        _first_fix(console, table, entry.remediation, width)
    if len(entries) > len(shown):
        emit(console, Text(f"... and {len(entries) - len(shown)} more in the list below", style="dim"))


def _first_fix(console: Console, table: Table, fix: Remediation | None, width: int) -> None:
    """An entry's table, then its commands unwrapped (the other way, where there is one, is in the list below);
    the first sentence of its reason where it gives no command (the whole of it is in the list below)."""
    if fix and not fix.commands:
        add(table, "", "", Text(first_sentence(fix.why), style="dim"))
    emit(console, table)
    for command in fix.commands if fix else []:
        verbatim(console, f"{_indent(console, width)}$ {command}", "cyan")


def _problem(result: Result, place: str) -> str:
    """The result's summary, led by where it is (the GPUs, nodes or links its rows name, else `place`) unless
    the summary already starts there."""
    bad = list(dict.fromkeys(row.where for row in result.rows if row.status not in (Status.PASS, Status.SKIP)))
    where = places(bad) if bad else place
    if not where or result.summary.startswith((where, *bad)):
        return result.summary
    return f"{where}: {result.summary}"


def _render_results(console: Console, results: list[Result], verbose: bool, width: int | None = None) -> None:
    shown, collapsed = (results, []) if verbose else collapse_skips(results)
    width = _list_width(results, verbose) if width is None else width
    for area, group in groupby(shown, key=lambda r: r.check_id.split(".")[0]):
        _render_area(console, area, list(group), verbose, width)
    for count, reason in collapsed:
        emit(console, Text(f"{count} checks skipped: {reason}", style="dim"))


def collapse_skips(results: list[Result]) -> tuple[list[Result], list[tuple[int, str]]]:
    """Skips that repeat one reason become one line ("14 checks skipped: NVML is not available..."); -v
    shows every row."""
    reasons = Counter(r.summary for r in results if r.status == Status.SKIP)
    repeated = [reason for reason, count in reasons.items() if count > 1]
    shown = [r for r in results if not (r.status == Status.SKIP and r.summary in repeated)]
    return shown, [(reasons[reason], reason) for reason in repeated]


def _summary_line(document: dict[str, Any], results: list[Result], saved: bool = False) -> Text:
    """The verdict, the counts (of results; of checks too where a check gave several), how long, where, and
    whether this is a run or a saved report read back."""
    counts = document["counts"]
    parts = [
        f"{counts[s.value]} {word}"
        for s, word in (
            (Status.PASS, "passed"),
            (Status.WARN, "warned"),
            (Status.FAIL, "failed"),
            (Status.ERROR, "broke"),
            (Status.TIMEOUT, "timed out"),
            (Status.SKIP, "skipped"),
        )
        if counts[s.value]
    ]
    checks = len({r.check_id for r in results})
    unit = f" ({len(results)} results from {checks} check{'s' * (checks != 1)})" if checks != len(results) else ""
    return Text.assemble(
        badge(Status(document["status"])),
        " ",
        f"{', '.join(parts)}{unit} in {document['duration_s']:.1f} s",
        (f"  · {_origin(document, saved)}", "dim"),
    )


def _origin(document: dict[str, Any], saved: bool) -> str:
    """`node01 · level quick · live` for a run; `saved report from <started_at> on node01 · level quick` for a
    report read back from its JSON (its facts' source follows when they were not this node's, live)."""
    source = document["source"]
    if not saved:
        return f"{document['host']} · level {document['level']} · {source}"
    said = f"saved report from {document['started_at']} on {document['host']} · level {document['level']}"
    return said if source == "live" else f"{said} · {source}"


def _closing_line(document: dict[str, Any]) -> Text:
    text = f"exit code {document['exit_code']}"
    if document["interrupted"]:
        text += " (interrupted: unfinished checks are marked skip)"
    return Text(text, style="dim")


def _render_area(console: Console, area: str, results: list[Result], verbose: bool, width: int) -> None:
    """An area's title and its results; where a result has a fix, the table is printed up to the fix's reason
    and the commands follow outside it, unwrapped, before the next table."""
    emit(console, Text(area, style="bold"))
    table = _row_table(width)
    for result in results:
        add(
            table,
            badge(result.status),
            label_text(result.label, width),
            verdict(result.summary, console, width, verbose),
        )
        _add_quotes(table, console, result.quotes if verbose else result.quotes[:SHOWN_QUOTES], width)
        if result.explained_by:
            add(table, "", "", Text(f"explained by {result.explained_by} (do this first)", style="dim"))
        _add_details(table, result, verbose)
        for fix, label in _fixes(result):
            add(table, "", Text(label, style="cyan"), fix.why)
            if verbose and fix.source:
                add(table, "", "", Text(f"what says so: {fix.source}", style="dim"))
            emit(console, table)
            for command in fix.commands:
                verbatim(console, f"{_indent(console, width)}$ {command}", "cyan")
            table = _row_table(width)
    if table.row_count:
        emit(console, table)


SHOWN_QUOTES = 3  # lines of a paste quoted under a result without -v


def _add_quotes(table: Table, console: Console, quotes: list[str], width: int) -> None:
    """The lines of the input a verdict rests on, each shown as a quotation: one line whatever it held, marked
    with `›`, cut to the width left (so it never runs onto a line of its own that could pass for a command)."""
    room = max(MIN_QUOTE, console.width - width - 11 - 2)
    for text in quotes:
        add(table, "", "", Text(f"› {quotation(text, room)}", style="dim italic"))


MIN_QUOTE = 20


def verdict(text: str, console: Console, width: int, verbose: bool) -> str:
    """A verdict as its line shows it: one line beside the status and the check, cut at a word with `…` where it
    is longer (the whole is in -v and the JSON report); with -v the whole, wrapped."""
    return text if verbose else quotation(text, max(MIN_QUOTE, console.width - width - 11))


def quotation(text: str, room: int) -> str:
    """Text from outside as one line of at most `room` characters: every run of white space (line breaks
    included) one space, and `…` where it was cut."""
    flat = " ".join(text.split())
    if len(flat) <= room:
        return flat
    cut = flat[: room - 1]
    at_word = cut.rsplit(" ", 1)[0] if " " in cut[room // 2 :] else cut
    return at_word.rstrip(" ,;:(") + "…"


def _fixes(result: Result) -> Iterator[tuple[Remediation, str]]:
    """A result's fix and, where there is one, the other way to fix it; none for a pass."""
    fix = result.remediation
    if fix and result.status != Status.PASS:
        yield fix, "  fix"
        if fix.instead:
            yield fix.instead, "  or"


def _add_details(table: Table, result: Result, verbose: bool) -> None:
    """Under a result: each judged figure on a line of its own (`GPU 0 bf16 263 TFLOP/s: 33 % of a healthy H100
    SXM (794.5)`; with -v the lines it had to meet and where its reference was published on the next), the rows
    the summary does not say whole, and with -v every row and the raw detail."""
    show_all = verbose or result.status.is_failure or result.status == Status.WARN
    metrics = [("", m) for m in result.metrics if verbose or m.expected is not None]
    figures = [(w, m) for w, m in [*metrics, *_row_figures(result)] if show_all or _judged_figure(m)]
    for where, metric in _capped(table, figures, verbose, "figures"):
        add(table, "", "", Text(figure_line(where, metric, verbose), style="dim"))
        cited = citation(metric) if verbose and _judged_figure(metric) else ""
        if cited:
            add(table, "", "", Text(f"  {cited}", style="dim"))
    if verbose and result.detail:
        add(table, "", Text("  detail", style="dim"), Text(result.detail, style="dim"))
    bad = [row for row in result.rows if row.status not in (Status.PASS, Status.SKIP)]
    shown = result.rows if verbose else [r for r in bad if len(bad) > 1 or "; " in r.summary]
    for row in _capped(table, shown, verbose, "rows"):
        where = f"GPU {row.index}" if row.index is not None else row.where if row.node else ""
        add(table, "", Text(f"  {where}", style="dim"), Text.assemble(badge(row.status), " ", row.summary))


def _judged_figure(metric: Metric) -> bool:
    return metric.comparison in (">=", "<=") and finite_number(metric.expected)


def figure_line(where: str, metric: Metric, verbose: bool = False) -> str:
    """One figure on one line: its verdict line where it was judged against a number (Metric.said), else the
    figure with the expectation an older check or a plugin wrote as text (where that came from with -v)."""
    text = metric.said() if _judged_figure(metric) else format_metric(metric, whole=verbose)
    return f"{where} {text}".strip()


def citation(metric: Metric) -> str:
    """Where a judged figure's lines and reference come from: `pass >= 0.85 x healthy 794.5 TFLOP/s, fail <
    595.9 (0.75 x); healthy figure: <source>` (what -v adds under the figure's line)."""
    parts = [metric.expected_source or "", metric.reference_source or ""]
    if parts[1] and parts[1] in parts[0]:
        parts[1] = ""
    return "; healthy figure: ".join(p for p in parts if p) if parts[0] else parts[1]


def _row_figures(result: Result) -> list[tuple[str, Metric]]:
    """Each row's judged figures (those with a pass line), shown even for a passing check: they are what it
    passed on. The rows that are not fine come first, so the cap never hides the figure a GPU failed on."""
    rows = sorted(result.rows, key=lambda row: -SEVERITY[row.status])
    return [(row.where, m) for row in rows for m in row.metrics if m.expected is not None]


def _capped(table: Table, items: list[Any], verbose: bool, what: str) -> list[Any]:
    """All of them with -v; else the first SHOWN, and a line saying how many more the JSON report holds."""
    if verbose or len(items) <= SHOWN:
        return items
    add(table, "", "", Text(f"... and {len(items) - SHOWN} more {what} (-v, or the JSON report)", style="dim"))
    return items[:SHOWN]


def format_metric(metric: Metric, whole: bool = True) -> str:
    """`busbw{bytes=1073741824}: 452.1 GB/s (pass >= 408, healthy 480: <where 480 was published>)` for a figure
    judged against a number; a figure whose expectation is text (older checks, plugins) reads
    `shm: 256 GiB (expected >= 1.0 GiB)`. `whole=False` keeps only the first clause of a long source."""
    labels = ",".join(f"{k}={v}" for k, v in metric.labels.items())
    text = f"{metric.name}{'{' + labels + '}' if labels else ''}: {_shown(metric.value)} {metric.unit}".rstrip()
    judged = judgement(metric, whole)
    if judged:
        return f"{text} ({judged})"
    if metric.expected is not None:
        text += f" (expected {_shown(metric.expected)} {metric.unit}".rstrip()
        text += f", {metric.expected_source})" if metric.expected_source and whole else ")"
    return text


def judgement(metric: Metric, whole: bool = True) -> str:
    """`pass >= 408, healthy 480: <source>` for a figure with a numeric pass line and a comparison ("" for
    any other): the line it had to meet and, where known, the healthy figure that line is a fraction of."""
    comparison, expected = metric.comparison, metric.expected
    if comparison not in (">=", "<=") or not finite_number(expected):
        return ""
    text = f"pass {comparison} {_shown(expected)}"
    if finite_number(metric.reference):
        text += f", healthy {_shown(metric.reference)}"
        source = metric.reference_source
    else:
        source = metric.expected_source
    if isinstance(source, str) and source:
        text += f": {source if whole else first_clause(source)}"
    return text


def first_clause(source: str) -> str:
    """A source's first clause (up to its first `;`), `...` where more follows: the console line stays short
    without -v, which shows the source whole."""
    clause, _, rest = source.partition(";")
    return f"{clause.strip()} ..." if rest.strip() else clause.strip()


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


PIPE_QUIET_S = 3.0  # a run shorter than this prints no progress into a pipe


class LiveProgress:
    """Progress in checks (the unit the summary line counts in "N results from M checks"). On a terminal: the
    check that runs now, how many are done and the time elapsed, gone when the run ends. Elsewhere (a pipe, a
    file): one line per check started, `[3/38] ddp.train: title ...`, once the run has gone on for `quiet_s`,
    so a quick run stays silent and a long one shows it is alive."""

    def __init__(
        self, console: Console, total: int, quiet_s: float = PIPE_QUIET_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.quiet_s = quiet_s
        self.clock = clock
        self.started: float | None = None
        self.progress: Progress | None = None
        self.task: Any = None

    def __call__(self, event: str, check_id: str, title: str) -> None:
        if event == "done":
            self.done += 1
        line = f"[{self.done + 1}/{self.total}] {check_id}: {title}"
        if self.progress is not None:
            if event == "done":
                self.progress.update(self.task, completed=self.done)
            else:
                self.progress.update(self.task, description=line)
        elif event == "start" and self.started is not None and self.clock() - self.started > self.quiet_s:
            verbatim(self.console, f"{line} ...")

    def context(self) -> AbstractContextManager[Any]:
        self.started = self.clock()
        if not self.console.is_terminal:
            return nullcontext()
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn  # a terminal's only

        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self.task = self.progress.add_task("gathering facts", total=self.total)
        return self.progress


NO_CREDENTIAL = (
    "no run credential: anyone who could reach the store could have written what the nodes reported "
    "(set GPUDOCTOR_RUN_SECRET on every node, or run under Slurm with munge; docs/SECURITY.md)"
)

TAMPERED = (
    "someone outside the run wrote to its store: what {} sent was replaced; not judged, not drained "
    "(keep the store's port to the job's nodes; docs/SECURITY.md)"
)


def render_cluster(
    console: Console, document: dict[str, Any], results: list[Result], verbose: bool = False, saved: bool = False
) -> None:
    """Rank 0's cluster report, readable at 1,000 nodes: the verdict, the nodes counted by rank 0's verdict,
    what to do first, every node and link the results name (worst first, each with its figure, the reference it
    was judged against and the noise allowance), the cross-node results, and what to drain. -v adds a row per
    node. `saved` as for `render`."""
    cluster = document["cluster"]
    emit(console, _summary_line(document, results, saved))
    emit(console, _verdict_counts(cluster))
    width = _list_width(results, verbose)
    _first_steps(console, results, causes_of(document), "cluster", verbose, width)
    if cluster.get("credential") == "none":
        emit(console, Text(NO_CREDENTIAL, style="yellow"))
    if cluster.get("tampered"):
        emit(console, Text(TAMPERED.format(", ".join(cluster["tampered"])), style="bold red"))
    if verbose:
        emit(console, _node_table(cluster))
    if cluster["findings"]:
        emit(console, _findings_table(cluster["findings"], verbose))
    _render_results(console, results, verbose, width)
    for label, names, style in (
        ("drain (failed nodes)", cluster["failed_nodes"], "bold red"),
        ("stragglers", cluster["stragglers"], "yellow"),
        ("unconfirmed (re-tested fine: not drained)", cluster["unconfirmed"], "yellow"),
        ("slow links", cluster["links"], "yellow"),
    ):
        if names:
            verbatim(console, f"{label}: {','.join(names)}", style)
    emit(console, _closing_line(document))


def _verdict_counts(cluster: dict[str, Any]) -> Text:
    counts = Counter(node["verdict"]["status"] for node in cluster["nodes"])
    lost = sum(1 for node in cluster["nodes"] if node["lost"])
    parts = [
        f"{counts[s.value]} {word}"
        for s, word in ((Status.FAIL, "to drain"), (Status.WARN, "named, not drained"), (Status.PASS, "fine"))
        if counts[s.value]
    ]
    text = f"{len(cluster['nodes'])} nodes ({cluster['launcher']}): {', '.join(parts)}"
    return Text(text + (f"; {lost} lost" if lost else ""), style="bold")


def _findings_table(findings: list[dict[str, Any]], verbose: bool) -> Table:
    table = Table(title="named, worst first", title_justify="left", title_style="bold", show_header=False, box=None)
    table.add_column("status", no_wrap=True, width=7)
    table.add_column("where", overflow="fold", max_width=30)
    table.add_column("check", overflow="fold", max_width=22)
    table.add_column("finding", overflow="fold", ratio=1)
    for finding in _capped(table, findings, verbose, "named"):
        where = f"{finding['node']} -> {finding['peer']}" if finding["peer"] else finding["node"]
        text = Text(finding["summary"])
        if finding["figure"] and finding["figure"]["expected"] is not None:
            text.append("\n" + _figure_against(finding["figure"], whole=verbose), style="dim")
        add(table, badge(Status(finding["status"])), where, finding["check_id"], text)
    return table


def _figure_against(figure: dict[str, Any], whole: bool) -> str:
    """A finding's figure: `busbw 300 GB/s (pass >= 408, healthy 480: <source>)` where it carries a comparison,
    else `node_link_bandwidth 0.01 GB/s against 1 (upper quartile; allowance)`."""
    metric = Metric(**{f.name: figure[f.name] for f in fields(Metric) if f.name in figure})
    if not whole and _judged_figure(metric):
        return metric.said()
    head = f"{metric.name} {_shown(metric.value)} {metric.unit}".rstrip()
    judged = judgement(metric, whole)
    if judged:
        return f"{head} ({judged})"
    said = f" ({metric.expected_source})" if metric.expected_source and whole else ""
    return f"{head} against {_shown(metric.expected)}{said}"


def _node_table(cluster: dict[str, Any]) -> Table:
    table = Table(title="every node", title_justify="left", title_style="bold", box=None)
    for column in ("node", "verdict", "own checks", "figures", "failing"):
        table.add_column(column, overflow="fold")
    for node in cluster["nodes"]:
        failing = node["lost"] or ", ".join(c["check_id"] for c in node["checks"] if Status(c["status"]).is_failure)
        verdict = badge(Status(node["verdict"]["status"]))
        add(table, node["name"], verdict, badge(Status(node["status"])), _key_figures(node), failing)
    return table


def _key_figures(node: dict[str, Any]) -> str:
    figures = [m for c in node["checks"] for m in c["metrics"] if m["baseline"] and m["value"] is not None]
    return ", ".join(f"{m['name']} {m['value']:.4g} {m['unit']}".rstrip() for m in figures[:2]) or "-"
