"""The Rich console report: summary line first, a table per area, remediation under each failure.

Rich honours NO_COLOR and writes no colour codes when the output is not a terminal.
"""

from __future__ import annotations

from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from itertools import groupby
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from gpudoctor.model import Metric, Result, Status

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


def render(console: Console, document: dict[str, Any], results: list[Result], verbose: bool = False) -> None:
    console.print(_summary_line(document))
    shown, collapsed = (results, []) if verbose else collapse_skips(results)
    width = min(max((len(r.label) for r in shown), default=10), 28)
    for area, group in groupby(shown, key=lambda r: r.check_id.split(".")[0]):
        console.print(_area_table(area, list(group), verbose, width))
    for count, reason in collapsed:
        console.print(Text(f"{count} checks skipped: {reason}", style="dim"))
    console.print(_closing_line(document))


def collapse_skips(results: list[Result]) -> tuple[list[Result], list[tuple[int, str]]]:
    """Skips that repeat one reason become one line ("14 checks skipped: NVML is not available..."); -v
    shows every row."""
    reasons = Counter(r.summary for r in results if r.status == Status.SKIP)
    repeated = [reason for reason, count in reasons.items() if count > 1]
    shown = [r for r in results if not (r.status == Status.SKIP and r.summary in repeated)]
    return shown, [(reasons[reason], reason) for reason in repeated]


def _summary_line(document: dict[str, Any]) -> Text:
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
    line = Text.assemble(
        badge(Status(document["status"])),
        " ",
        f"{', '.join(parts)} in {document['duration_s']:.1f} s",
        (f"  · {document['host']} · level {document['level']} · {document['source']}", "dim"),
    )
    return line


def _closing_line(document: dict[str, Any]) -> Text:
    text = f"exit code {document['exit_code']}"
    if document["interrupted"]:
        text += " (interrupted: unfinished checks are marked skip)"
    return Text(text, style="dim")


def _area_table(area: str, results: list[Result], verbose: bool, width: int) -> Table:
    table = Table(
        title=area, title_justify="left", title_style="bold", show_header=False, box=None, pad_edge=False, expand=False
    )
    table.add_column("status", no_wrap=True, width=7)
    table.add_column("check", overflow="fold", width=width)
    table.add_column("result", overflow="fold", ratio=1)
    for result in results:
        table.add_row(badge(result.status), result.label, result.summary)
        _add_details(table, result, verbose)
    return table


def _add_details(table: Table, result: Result, verbose: bool) -> None:
    show_all = verbose or result.status.is_failure or result.status == Status.WARN
    for metric in result.metrics:
        if show_all or metric.expected is not None:
            table.add_row("", "", Text(format_metric(metric), style="dim"))
    bad = [row for row in result.rows if row.status not in (Status.PASS, Status.SKIP)]
    shown = result.rows if verbose else bad if len(bad) > 3 else []  # the summary already names up to three
    for row in shown:
        where = f"GPU {row.index}" if row.index is not None else ""
        table.add_row("", Text(f"  {where}", style="dim"), Text.assemble(badge(row.status), " ", row.summary))
    if result.remediation and result.status != Status.PASS:
        table.add_row("", Text("  fix", style="cyan"), result.remediation.why)
        for command in result.remediation.commands:
            table.add_row("", "", Text(f"$ {command}", style="cyan"))


def format_metric(metric: Metric) -> str:
    value = f"{metric.value:.4g}" if isinstance(metric.value, float) else str(metric.value)
    text = f"{metric.name}: {value} {metric.unit}".rstrip()
    if metric.expected is not None:
        expected = f"{metric.expected:.4g}" if isinstance(metric.expected, float) else str(metric.expected)
        text += f" (expected {expected} {metric.unit}".rstrip()
        text += f", {metric.expected_source})" if metric.expected_source else ")"
    return text


class LiveProgress:
    """The check that runs now, how many are done and the time elapsed; shown only when stderr is a
    terminal (never in files or pipes), and gone when the run ends."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.progress: Progress | None = None
        self.task: Any = None

    def __call__(self, event: str, check_id: str, title: str) -> None:
        if self.progress is None:
            return
        if event == "done":
            self.done += 1
            self.progress.update(self.task, completed=self.done)
        else:
            self.progress.update(self.task, description=f"[{self.done + 1}/{self.total}] {check_id}: {title}")

    def context(self) -> AbstractContextManager[Any]:
        if not self.console.is_terminal:
            return nullcontext()
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=self.console, transient=True
        )
        self.task = self.progress.add_task("gathering facts", total=self.total)
        return self.progress


def render_cluster(console: Console, document: dict[str, Any], results: list[Result], verbose: bool = False) -> None:
    """Rank 0's cluster report: one row per node (its verdict, key figures, failing checks), then the
    cross-node results."""
    cluster = document["cluster"]
    table = Table(title=f"{len(cluster['nodes'])} nodes", title_justify="left", title_style="bold", box=None)
    for column in ("node", "status", "figures", "failing"):
        table.add_column(column, overflow="fold")
    for node in cluster["nodes"]:
        failing = node["lost"] or ", ".join(c["check_id"] for c in node["checks"] if Status(c["status"]).is_failure)
        table.add_row(node["name"], badge(Status(node["status"])), _key_figures(node), failing)
    console.print(table)
    render(console, document, results, verbose)
    if cluster["failed_nodes"]:
        console.print(Text(f"failed nodes (drain): {','.join(cluster['failed_nodes'])}", style="bold red"))
    if cluster["stragglers"]:
        console.print(Text(f"stragglers: {','.join(cluster['stragglers'])}", style="yellow"))


def _key_figures(node: dict[str, Any]) -> str:
    figures = [m for c in node["checks"] for m in c["metrics"] if m["baseline"] and m["value"] is not None]
    return ", ".join(f"{m['name']} {m['value']:.4g} {m['unit']}".rstrip() for m in figures[:2]) or "-"
