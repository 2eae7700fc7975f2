"""What a check returned, vetted before anything reads it: a site plugin may return a string, None, a Result
built with an older API or holding what no report can carry. Each such answer becomes that check's own
`error` row naming what it returned; nothing else in the run is touched. A figure's name is made the
identifier every report takes (`gpu temp` -> `gpu_temp`)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from gpudoctor.command import Command
from gpudoctor.model import Cause, Metric, Remediation, Result, Row, Status
from gpudoctor.text import harmless

SHOWN = 60  # characters of a wrong answer quoted in the error row
SCALARS = (str, int, float)


class NotAResult(ValueError):
    """What a check returned cannot be reported; the message says what it was."""


def vetted(returned: Any) -> list[Result]:
    """The check's results (a Result, or a non-empty list of them), with a status given as its word taken
    as the status. Raises NotAResult naming the first thing wrong."""
    if isinstance(returned, Result):
        return [_result(returned)]
    if isinstance(returned, list) and returned:
        kept = [_result(item, f"item {n} of its list: ") for n, item in enumerate(returned[:MAX_RESULTS], 1)]
        if len(returned) > MAX_RESULTS:
            kept[-1].summary += f" ({len(returned) - MAX_RESULTS:,} more results not kept: at most {MAX_RESULTS:,})"
        return kept
    raise NotAResult(shown(returned))


# What one check may hand the report: beyond these a report stops being readable (a 5 MB summary made a JUnit
# file xmllint rejects; a plugin's 10^6 rows took 4.4 GB). What is cut is said where it was cut.
MAX_RESULTS, MAX_ROWS, MAX_METRICS, MAX_TEXT = 1_000, 10_000, 10_000, 4_000


# A result's summary is the line an alert shows: a sentence. gpudoctor's own checks stay well under this (a test
# holds every built-in to it); a plugin's longer one is cut at a word, and kept whole in the result's detail.
MAX_SUMMARY = 200


def _short(item: Result) -> None:
    if len(item.summary) <= MAX_SUMMARY:
        return
    item.detail = "\n".join(text for text in (item.summary, item.detail) if text)
    item.summary = item.summary[: MAX_SUMMARY - 1].rsplit(" ", 1)[0] + "…"


def _bounded(item: Result) -> Result:
    _short(item)
    for kind, limit in (("rows", MAX_ROWS), ("metrics", MAX_METRICS)):
        found = getattr(item, kind)
        if len(found) > limit:
            setattr(item, kind, found[:limit])
            item.summary += f" ({len(found) - limit:,} more {kind} not kept: at most {limit:,})"
    for part in (item, item.remediation, *item.rows, *item.metrics, *(m for r in item.rows for m in r.metrics)):
        _texts_cut(part)
    return item


def _texts_cut(part: Any) -> None:
    """Every text a console, a terminal or a report shows of `part` (and of a remediation's `instead`), cut and
    made harmless: a plugin's title, aspect, commands and names as much as its summary."""
    while part is not None:
        for f in dataclasses.fields(part):
            value = getattr(part, f.name)
            if type(value) is str:  # a Status is a str too, and stays what it is
                setattr(part, f.name, _cut(value))
            elif isinstance(value, list) and f.name == "commands":
                setattr(part, f.name, [_command(c) for c in value])
        part = part.instead if isinstance(part, Remediation) else None


def _command(text: str) -> Command:
    """A command as a report may carry it: the Command itself where the gate leaves it whole; else (a plugin's or a
    saved report's text with a control character, or too long) the gated text as a literal command."""
    gated = _cut(text)
    return text if gated == text and isinstance(text, Command) else Command.literal(gated)


def _cut(text: str) -> str:
    text = text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}... (cut at {MAX_TEXT:,} characters)"
    return harmless(text)


def harmless_strings(value: Any) -> Any:
    """Every string in a JSON value (keys too) made harmless, without recursion."""
    if isinstance(value, str):
        return harmless(value)
    root = [value]
    stack: list[Any] = [root]
    while stack:
        container = stack.pop()
        items = list(container.items()) if isinstance(container, dict) else list(enumerate(container))
        if isinstance(container, dict):
            container.clear()
        for key, item in items:
            item = harmless(item) if isinstance(item, str) else item
            container[harmless(key) if isinstance(key, str) else key] = item
            if isinstance(item, dict | list):
                stack.append(item)
    return root[0]


def shown(value: Any) -> str:
    """A wrong value as the error row quotes it: its repr, cut, and its type."""
    text = repr(value)
    text = text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
    return text if value is None else f"{text} (a {type(value).__name__})"


def _result(item: Any, where: str = "") -> Result:
    if not isinstance(item, Result):
        raise NotAResult(where + shown(item))
    item.status = _status(item.status, f"{where}a Result")
    _require(isinstance(item.summary, str), f"{where}a Result whose summary is {shown(item.summary)}")
    aspect = item.aspect is None or isinstance(item.aspect, str)
    _require(aspect, f"{where}a Result whose aspect is {shown(item.aspect)}")
    stamps = isinstance(item.check_id, str) and isinstance(item.title, str) and isinstance(item.duration_s, int | float)
    _require(stamps, f"{where}a Result whose check_id, title or duration is of the wrong type")
    _remediation(item.remediation, where)
    _metrics(item.metrics, where)
    quotes = isinstance(item.quotes, list) and all(isinstance(q, str) for q in item.quotes)
    _require(quotes, f"{where}a Result whose quotes are not a list of text")
    item.quotes = [_cut(q) for q in item.quotes[:MAX_ROWS]]
    _require(isinstance(item.rows, list), f"{where}a Result whose rows are {shown(item.rows)}")
    for n, row in enumerate(item.rows[:MAX_ROWS], 1):
        _row(row, f"{where}row {n}: ")
    return _bounded(item)


def gated(results: list[Result], causes: list[Cause]) -> tuple[list[Result], list[Cause]]:
    """A run's final results and causes, every text in them through the gate (`harmless`) and cut, whatever
    added it after the check returned (a paste's evidence, the diagnosis): what every report renders."""
    return [_result(r) for r in results], [vetted_cause(c) for c in causes]


def vetted_cause(cause: Any) -> Cause:
    """A cause read back from a saved report, of the types the renderers read, its texts cut and harmless."""
    _require(isinstance(cause, Cause), shown(cause))
    _require(isinstance(cause.id, str) and isinstance(cause.summary, str), "a cause whose id or summary is not text")
    cause.status = _status(cause.status, "a cause")
    _remediation(cause.remediation, "a cause's ")
    for name in ("explains", "where", "evidence"):
        items = getattr(cause, name)
        texts = isinstance(items, list) and all(isinstance(i, str) for i in items)
        _require(texts, f"a cause whose {name} is not text")
        setattr(cause, name, [_cut(i) for i in items[:MAX_ROWS]])
    _require(isinstance(cause.source, str), "a cause whose source is not text")
    _texts_cut(cause)
    _texts_cut(cause.remediation)
    return cause


def _status(status: Any, what: str) -> Status:
    if isinstance(status, Status):
        return status
    if isinstance(status, str) and status in {s.value for s in Status}:
        return Status(status)
    raise NotAResult(f"{what} whose status is {status!r}, not one of {', '.join(s.value for s in Status)}")


def _row(row: Any, where: str) -> None:
    _require(isinstance(row, Row), where + shown(row))
    row.status = _status(row.status, f"{where}a Row")
    _require(isinstance(row.summary, str), f"{where}a Row whose summary is {shown(row.summary)}")
    _require(row.index is None or isinstance(row.index, int), f"{where}a Row whose index is {shown(row.index)}")
    names = (row.uuid, row.pci_bus_id, row.name, row.node, row.peer)
    _require(all(v is None or isinstance(v, str) for v in names), f"{where}a Row naming its GPU or node with non-text")
    _metrics(row.metrics, where)


def _remediation(fix: Any, where: str) -> None:
    if fix is None:
        return
    _require(isinstance(fix, Remediation), f"{where}a remediation that is {shown(fix)}")
    good = isinstance(fix.why, str) and isinstance(fix.commands, list) and all(isinstance(c, str) for c in fix.commands)
    good = good and isinstance(fix.source, str)
    _require(good, f"{where}a remediation whose why or commands are not text")
    _remediation(fix.instead, where)


def _metrics(metrics: Any, where: str) -> None:
    _require(isinstance(metrics, list), f"{where}figures that are {shown(metrics)}")
    for metric in metrics[:MAX_METRICS]:
        _require(isinstance(metric, Metric), f"{where}a figure that is {shown(metric)}")
        _require(isinstance(metric.name, str) and metric.name != "", f"{where}a figure named {shown(metric.name)}")
        metric.name = identifier(metric.name)
        _figure(metric, f"{where}figure {metric.name!r}")


def _figure(metric: Metric, what: str) -> None:
    _require(_number_or_text(metric.value), f"{what} has the value {shown(metric.value)}")
    _require(_number_or_text(metric.expected), f"{what} expects {shown(metric.expected)}")
    _require(metric.comparison in (None, ">=", "<="), f"{what} compares by {shown(metric.comparison)}")
    _require(
        metric.reference is None or (_number_or_text(metric.reference) and not isinstance(metric.reference, str)),
        f"{what} has the reference {shown(metric.reference)}",
    )
    for text in (metric.expected_source, metric.reference_source):
        _require(text is None or isinstance(text, str), f"{what} cites {shown(text)}")
    _require(isinstance(metric.unit, str), f"{what} has the unit {shown(metric.unit)}")
    labels = metric.labels
    good = isinstance(labels, dict) and all(isinstance(k, str) and isinstance(v, SCALARS) for k, v in labels.items())
    _require(good, f"{what} has the labels {shown(labels)}")


def _number_or_text(value: Any) -> bool:
    """None, text or a number JSON can carry (NaN and infinities it cannot; integers of any size are exact)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, SCALARS)


def identifier(name: str) -> str:
    """A figure's name as a lower-snake-case identifier: other characters become `_`, a leading digit gets
    `figure_` before it."""
    word = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "figure"
    return word if word[0].isalpha() else f"figure_{word}"


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise NotAResult(problem)
