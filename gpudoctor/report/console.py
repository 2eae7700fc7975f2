"""The Rich console report: summary line first, a table per area, remediation under each failure.

Rich honours NO_COLOR and writes no colour codes when the output is not a terminal.
"""

from __future__ import annotations

from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from dataclasses import fields
from itertools import groupby
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from gpudoctor.model import SEVERITY, Metric, Remediation, Result, Status, finite_number

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


def render(console: Console, document: dict[str, Any], results: list[Result], verbose: bool = False) -> None:
    console.print(_summary_line(document))
    _render_results(console, results, verbose)
    console.print(_closing_line(document))


def _render_results(console: Console, results: list[Result], verbose: bool) -> None:
    shown, collapsed = (results, []) if verbose else collapse_skips(results)
    width = min(max((len(r.label) for r in shown), default=10), 28)
    for area, group in groupby(shown, key=lambda r: r.check_id.split(".")[0]):
        console.print(_area_table(area, list(group), verbose, width))
    for count, reason in collapsed:
        console.print(Text(f"{count} checks skipped: {reason}", style="dim"))


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
    metrics = [m for m in result.metrics if show_all or m.expected is not None]
    for metric in _capped(table, metrics, verbose, "figures"):
        table.add_row("", "", Text(format_metric(metric, whole=verbose), style="dim"))
    for where, metric in _capped(table, _row_figures(result), verbose, "figures"):
        table.add_row("", "", Text(f"{where} {format_metric(metric, whole=verbose)}", style="dim"))
    bad = [row for row in result.rows if row.status not in (Status.PASS, Status.SKIP)]
    shown = result.rows if verbose else bad if len(bad) > 3 else []  # the summary already names up to three
    for row in _capped(table, shown, verbose, "rows"):
        where = f"GPU {row.index}" if row.index is not None else row.where if row.node else ""
        table.add_row("", Text(f"  {where}", style="dim"), Text.assemble(badge(row.status), " ", row.summary))
    if result.remediation and result.status != Status.PASS:
        _add_fix(table, result.remediation, "  fix")
        if result.remediation.instead:
            _add_fix(table, result.remediation.instead, "  or")


def _row_figures(result: Result) -> list[tuple[str, Metric]]:
    """Each row's judged figures (those with a pass line), shown even for a passing check: they are what it
    passed on. The rows that are not fine come first, so the cap never hides the figure a GPU failed on."""
    rows = sorted(result.rows, key=lambda row: -SEVERITY[row.status])
    return [(row.where, m) for row in rows for m in row.metrics if m.expected is not None]


def _add_fix(table: Table, fix: Remediation, label: str) -> None:
    table.add_row("", Text(label, style="cyan"), fix.why)
    for command in fix.commands:
        table.add_row("", "", Text(f"$ {command}", style="cyan"))


def _capped(table: Table, items: list[Any], verbose: bool, what: str) -> list[Any]:
    """All of them with -v; else the first SHOWN, and a line saying how many more the JSON report holds."""
    if verbose or len(items) <= SHOWN:
        return items
    table.add_row("", "", Text(f"... and {len(items) - SHOWN} more {what} (-v, or the JSON report)", style="dim"))
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
        text += f", {metric.expected_source})" if metric.expected_source else ")"
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


NO_CREDENTIAL = (
    "no run credential: anyone who could reach the store could have written what the nodes reported "
    "(set GPUDOCTOR_RUN_SECRET on every node, or run under Slurm with munge; docs/SECURITY.md)"
)

TAMPERED = (
    "someone outside the run wrote to its store: what {} sent was replaced; not judged, not drained "
    "(keep the store's port to the job's nodes; docs/SECURITY.md)"
)


def render_cluster(console: Console, document: dict[str, Any], results: list[Result], verbose: bool = False) -> None:
    """Rank 0's cluster report, readable at 1,000 nodes: the verdict, the nodes counted by rank 0's verdict,
    every node and link the results name (worst first, each with its figure, the reference it was judged
    against and the noise allowance), the cross-node results, and what to drain. -v adds a row per node."""
    cluster = document["cluster"]
    console.print(_summary_line(document))
    console.print(_verdict_counts(cluster))
    if cluster.get("credential") == "none":
        console.print(Text(NO_CREDENTIAL, style="yellow"))
    if cluster.get("tampered"):
        console.print(Text(TAMPERED.format(", ".join(cluster["tampered"])), style="bold red"))
    if verbose:
        console.print(_node_table(cluster))
    if cluster["findings"]:
        console.print(_findings_table(cluster["findings"], verbose))
    _render_results(console, results, verbose)
    for label, names, style in (
        ("drain (failed nodes)", cluster["failed_nodes"], "bold red"),
        ("stragglers", cluster["stragglers"], "yellow"),
        ("unconfirmed (re-tested fine: not drained)", cluster["unconfirmed"], "yellow"),
        ("slow links", cluster["links"], "yellow"),
    ):
        if names:
            console.print(Text(f"{label}: {','.join(names)}", style=style))
    console.print(_closing_line(document))


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
        table.add_row(badge(Status(finding["status"])), where, finding["check_id"], text)
    return table


def _figure_against(figure: dict[str, Any], whole: bool) -> str:
    """A finding's figure: `busbw 300 GB/s (pass >= 408, healthy 480: <source>)` where it carries a comparison,
    else `node_link_bandwidth 0.01 GB/s against 1 (upper quartile; allowance)`."""
    metric = Metric(**{f.name: figure[f.name] for f in fields(Metric) if f.name in figure})
    head = f"{metric.name} {_shown(metric.value)} {metric.unit}".rstrip()
    judged = judgement(metric, whole)
    if judged:
        return f"{head} ({judged})"
    said = f" ({metric.expected_source})" if metric.expected_source else ""
    return f"{head} against {_shown(metric.expected)}{said}"


def _node_table(cluster: dict[str, Any]) -> Table:
    table = Table(title="every node", title_justify="left", title_style="bold", box=None)
    for column in ("node", "verdict", "own checks", "figures", "failing"):
        table.add_column(column, overflow="fold")
    for node in cluster["nodes"]:
        failing = node["lost"] or ", ".join(c["check_id"] for c in node["checks"] if Status(c["status"]).is_failure)
        verdict = badge(Status(node["verdict"]["status"]))
        table.add_row(node["name"], verdict, badge(Status(node["status"])), _key_figures(node), failing)
    return table


def _key_figures(node: dict[str, Any]) -> str:
    figures = [m for c in node["checks"] for m in c["metrics"] if m["baseline"] and m["value"] is not None]
    return ", ".join(f"{m['name']} {m['value']:.4g} {m['unit']}".rstrip() for m in figures[:2]) or "-"
