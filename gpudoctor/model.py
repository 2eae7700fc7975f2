"""The result vocabulary every check speaks and every report reads."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudoctor.command import Command

# What a verdict rests on, where it is a measurement: a figure judged against a reference ("figure"), data a
# workload checked (results, copies, memory words: "data"), or a workload that ran out of GPU memory ("oom").
# A cause explains figures and out-of-memory errors measured under it; wrong data stays wrong whatever else ran.
BASES = ("figure", "data", "oom")


class Status(str, Enum):
    """Outcome of one check; `error` means the check itself broke, `timeout` that it ran out of time."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"
    TIMEOUT = "timeout"

    @property
    def is_failure(self) -> bool:
        return self in (Status.FAIL, Status.ERROR, Status.TIMEOUT)


SEVERITY = {
    Status.SKIP: 0,
    Status.PASS: 1,
    Status.WARN: 2,
    Status.FAIL: 3,
    Status.ERROR: 3,
    Status.TIMEOUT: 3,
}


def finite_number(value: Any) -> bool:
    """A number a report can hold and compare: int or float, finite, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def number(value: Any) -> str:
    """A figure as a report writes it: four significant digits (262.8, 0.0123, 1.2e+06)."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def worst(statuses: list[Status], default: Status = Status.PASS) -> Status:
    """The most severe status of several (fail beats warn beats pass beats skip)."""
    return max(statuses, key=SEVERITY.__getitem__, default=default)


@dataclass
class Metric:
    """A measured figure, with the expectation it was judged against and where that came from.

    `name` is a stable lower-snake-case identifier (`busbw`, `temperature`); what varies between figures of
    one name (message size, precision, link) goes in `labels`, never in the name, so every figure is one
    series for a monitoring system. The GPU or node a figure belongs to is its row's."""

    name: str
    value: float | int | str | None
    unit: str = ""
    expected: float | int | str | None = None  # the pass line: a number wherever the figure is judged against one
    expected_source: str | None = None  # how the pass line was set ("0.85 x the healthy figure", "config min_gib")
    comparison: str | None = None  # ">=" or "<=": how the figure must stand against `expected` to pass
    reference: float | None = None  # the healthy figure the pass line is a fraction of, where one is known
    reference_source: str | None = None  # where that figure was published: source, date, conditions
    reference_of: str | None = None  # what that figure is, as a verdict line says it: "a healthy H100 SXM"
    baseline: bool = False  # a figure `gpudoctor baseline save` keeps for later runs to be judged against
    labels: dict[str, str | int] = field(default_factory=dict)

    def said(self, labels: bool = True) -> str:
        """The verdict line of a judged figure: `bf16 263 TFLOP/s: 33 % of a healthy H100 SXM (794.5)`: the figure
        (with its labels, where asked) and its share of what it was judged against (`share`); a figure judged
        against nothing is the figure alone. The pass and fail lines and the citation stay in the fields (shown
        with -v, in the JSON, on the HTML page), never in the line."""
        named = ", ".join(f"{k}={v}" for k, v in self.labels.items()) if labels else ""
        name = self.name.replace("_", " ") + (f" ({named})" if named else "")
        head = f"{name} {number(self.value)} {self.unit}".rstrip()
        share = self.share()
        return f"{head}: {share}" if share else head

    def share(self) -> str:
        """What a judged figure is against its reference: `33 % of a healthy H100 SXM (794.5)`, `4.5x the saved
        baseline (2)` where less is better; "" where it was judged against no number."""
        against = self.reference if finite_number(self.reference) else self.expected
        if not finite_number(self.value) or not finite_number(against) or not against:
            return ""
        of = self.reference_of or ("its healthy figure" if finite_number(self.reference) else "its pass line")
        if self.comparison == "<=":
            return f"{self.value / against:.2g}x {of} ({number(against)})"
        return f"{self.value / against * 100:.0f} % of {of} ({number(against)})"


@dataclass
class Remediation:
    """Why it matters, and the exact commands that fix it; `instead`, where there is one, is the other way to
    fix it, ranked second (keep the driver and change torch, or upgrade the driver and keep torch)."""

    why: str
    commands: list[Command] = field(default_factory=list)
    instead: Remediation | None = None
    source: str = ""  # what says this is the cause and these commands cure it (shown with -v, in the JSON)

    def __post_init__(self) -> None:
        """Text given as a command is gpudoctor's own, a literal command (gpudoctor/command.py): every value from
        outside goes into a command through `command()`'s checked slots, never into this text."""
        from gpudoctor.command import Command  # here: `--help` loads the model, never the word checks

        self.commands = [Command.literal(c) for c in self.commands]


@dataclass
class Row:
    """One GPU's (or rank's, or node's) part of a result."""

    status: Status
    summary: str
    index: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    node: str | None = None  # the node a row is about, in cluster mode
    metrics: list[Metric] = field(default_factory=list)  # this GPU's (or node's) own figures
    peer: str | None = None  # with `node`: the row is about the link from `node` to `peer`, not the node
    confirmed: bool | None = None  # a suspicion re-tested: True it held, False it did not (never drained)
    basis: str | None = None  # what the verdict rests on: one of BASES (the diagnosis reads it), None for a fact

    @property
    def where(self) -> str:
        if self.node and self.peer:
            return f"{self.node} -> {self.peer}"
        return self.node or gpu_label({"index": self.index, "name": self.name})

    @property
    def target(self) -> str:
        """How `nvidia-smi -i` names this GPU: its index, else its PCI bus id or UUID (it takes all three)."""
        return next((str(v) for v in (self.index, self.pci_bus_id, self.uuid) if v is not None), "")


@dataclass
class Result:
    """What one check concluded. A check may return several, each with its own `aspect`."""

    status: Status
    summary: str
    aspect: str | None = None
    remediation: Remediation | None = None
    metrics: list[Metric] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    duration_s: float = 0.0
    title: str = ""
    check_id: str = ""  # stamped by the runner from the check's declaration
    basis: str | None = None  # what the verdict rests on: one of BASES (the diagnosis reads it), None for a fact
    explained_by: str | None = None  # the id of the cause (the report's `causes`) this finding is a symptom of
    detail: str | None = None  # raw text (an exception, a program's output): -v and the JSON show it, no summary
    quotes: list[str] = field(default_factory=list)  # lines of the input it rests on ("line 3: ..."): quotations
    scale: float | None = None  # stamped by the runner: the share of its work a --budget ran it at (None: all)
    budget_s: float | None = None  # stamped by the runner: the --budget whose time ran out before it finished
    revised_by: list[str] = field(default_factory=list)  # the diagnosis's revisions that rewrote it (diagnosis/)

    @property
    def label(self) -> str:
        return f"{self.check_id}:{self.aspect}" if self.aspect else self.check_id

    def to_dict(self) -> dict[str, Any]:
        data = plain(self)
        data["status"] = self.status.value
        data["rows"] = [{**plain(r), "status": r.status.value} for r in self.rows]
        return {"check_id": data.pop("check_id"), **data}


@dataclass
class Cause:
    """What is wrong, found behind several findings by the diagnosis (gpudoctor/diagnosis): one line that says it
    and where, the command that cures it, the findings it explains (their labels: `check_id[:aspect]`), what it
    rests on (evidence, quoted from the facts) and what says this cause produces those symptoms (`source`)."""

    id: str
    status: Status
    summary: str
    remediation: Remediation | None = None
    explains: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**plain(self), "status": self.status.value}


def cause_from_dict(data: dict[str, Any]) -> Cause:
    """A Cause as a report document holds it; types are not checked here (see `gpudoctor.vetting`)."""
    given = _known(Cause, data)
    given["remediation"] = _remediation(data["remediation"]) if data.get("remediation") else None
    given["status"] = Status(data["status"])
    return Cause(**given)


def _remediation(data: dict[str, Any]) -> Remediation:
    given = _known(Remediation, data)
    given["instead"] = _remediation(data["instead"]) if data.get("instead") else None
    return Remediation(**given)


def result_from_dict(data: dict[str, Any]) -> Result:
    """A Result as a report document holds it (`Result.to_dict`); fields a report of an older schema lacks
    take their defaults. Types are not checked here (see `gpudoctor.vetting`)."""
    given = _known(Result, data)
    given["remediation"] = _remediation(data["remediation"]) if data.get("remediation") else None
    given["metrics"] = [_metric(m) for m in data.get("metrics", [])]
    given["rows"] = [_row(r) for r in data.get("rows", [])]
    return Result(**given)


def _row(data: dict[str, Any]) -> Row:
    return Row(**{**_known(Row, data), "metrics": [_metric(m) for m in data.get("metrics", [])]})


def _metric(data: dict[str, Any]) -> Metric:
    return Metric(**_known(Metric, data))


def _known(kind: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}


def gpu_label(gpu: dict[str, Any]) -> str:
    """ "GPU 3" by NVML's (nvidia-smi's) index, or the device's own name where NVML does not know it."""
    return f"GPU {gpu['index']}" if gpu.get("index") is not None else (gpu.get("name") or "GPU ?")


def gpu_row(
    gpu: dict[str, Any],
    status: Status,
    summary: str,
    metrics: list[Metric] | None = None,
    basis: str | None = None,
) -> Row:
    """A per-GPU row filled from a snapshot's GPU entry, with that GPU's figures and what its verdict rests on
    (BASES)."""
    return Row(
        status=status,
        summary=summary,
        index=gpu.get("index"),
        uuid=gpu.get("uuid"),
        pci_bus_id=gpu.get("pci_bus_id"),
        name=gpu.get("name"),
        metrics=metrics or [],
        basis=basis,
    )


def from_rows(
    rows: list[Row],
    ok_summary: str,
    remediation: Remediation | None = None,
    metrics: list[Metric] | None = None,
) -> Result:
    """A result whose status is the worst of its rows; the summary names the GPUs that are not fine, and
    the `{gpu}` slot of the remediation commands becomes their indexes."""
    metrics = metrics or []
    status = worst([r.status for r in rows], default=Status.SKIP)
    bad = [r for r in rows if r.status not in (Status.PASS, Status.SKIP)]
    if not rows:
        return Result(Status.SKIP, "no GPU to judge", metrics=metrics)
    if status == Status.SKIP:
        said = list(dict.fromkeys(r.summary for r in rows))
        summary = said[0] if len(said) == 1 else "; ".join(f"{r.where}: {r.summary}" for r in rows[:3])
        return Result(status, summary, rows=rows, metrics=metrics)
    if not bad:
        missing = [r.where.removeprefix("GPU ") for r in rows if r.status == Status.SKIP]
        if missing and len(missing) < len(rows):
            ok_summary += f" (not available on GPU {', '.join(missing)})"
        return Result(status, ok_summary, rows=rows, metrics=metrics)
    summary = bad_summary(bad)
    if remediation:
        remediation = aimed(remediation, bad)
    return Result(status, summary, remediation=remediation, rows=rows, metrics=metrics)


def aimed(remediation: Remediation, bad: list[Row]) -> Remediation:
    """The remediation with the `{gpu}` slot of its commands (and its other way's) filled with the GPUs of the rows
    that are not fine, checked as a list of words (a PCI bus id or UUID from a file is text somebody else wrote); a
    command left with no GPU it may name is left out, and the reason says how to find it."""
    from gpudoctor.words import Unsafe  # here: `--help` loads the model, never the word checks

    targets = ",".join(r.target for r in bad if r.target)
    commands = []
    for command in remediation.commands:
        try:
            aimed_at = command.fill(gpu=targets) if "gpu" in command.open else command
        except Unsafe:
            continue
        if not aimed_at.open:
            commands.append(aimed_at)
    why = remediation.why
    if len(commands) < len(remediation.commands):
        why += " (Which GPU: `nvidia-smi -L`, then `-i` with its index.)"
    instead = aimed(remediation.instead, bad) if remediation.instead else None
    return Remediation(why, commands, instead, remediation.source)


# The length a result's line built from its rows keeps to: it is read in a terminal beside the check's name.
SUMMARY_ROOM = 100


def bad_summary(bad: list[Row]) -> str:
    """A result's line for its rows that are not fine, short whatever their number: worst first, where and what a
    row says (its first clause where the whole is long), every row saying the same named together (`GPUs 0-7:
    MIG is on`), as many such groups as fit SUMMARY_ROOM, then how many more rows there are (`GPU 3: bf16 263
    TFLOP/s: 33 % of a healthy H100 SXM (794.5); and 2 more`). The rows keep the whole of what each says."""
    ranked = sorted(bad, key=lambda r: -SEVERITY[r.status])
    groups: dict[str, list[Row]] = {}
    for row in ranked:
        groups.setdefault(row.summary, []).append(row)
    said, told = "", 0
    for text, rows in groups.items():
        where = places([r.where for r in rows])
        part = f"{where}: {text}" if len(where) + len(text) + 2 <= SUMMARY_ROOM else f"{where}: {first_clause(text)}"
        if said and len(said) + len(part) + 2 > SUMMARY_ROOM:
            break
        said, told = f"{said}; {part}" if said else part, told + len(rows)
    return said + (f"; and {len(ranked) - told} more" if told < len(ranked) else "")


def first_clause(text: str) -> str:
    """Up to the first `; ` outside parentheses (`Xid 92 (high ECC rate: no action; investigate)` is one)."""
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth <= 0 and text[i + 1 : i + 2] == " ":
            return text[:i]
    return text


def places(wheres: list[str]) -> str:
    """Where several rows are: `GPU 3`, `GPUs 0-7`, `GPUs 0, 2 and 5`, `node-a, node-b and 3 more`."""
    unique = list(dict.fromkeys(wheres))
    indexes = [w.removeprefix("GPU ") for w in unique]
    numbered = all(w.startswith("GPU ") and i.isascii() and i.isdigit() for w, i in zip(unique, indexes, strict=True))
    if len(unique) > 1 and numbered:
        numbers = sorted(int(i) for i in indexes)
        if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 2:
            return f"GPUs {numbers[0]}-{numbers[-1]}"
        listed = ", ".join(map(str, numbers[:-1]))
        return (
            f"GPUs {listed} and {numbers[-1]}"
            if len(numbers) <= 4
            else f"GPUs {', '.join(map(str, numbers[:3]))} and {len(numbers) - 3} more"
        )
    if len(unique) <= 3:
        return ", ".join(unique[:-1]) + (f" and {unique[-1]}" if len(unique) > 1 else unique[0])
    return f"{', '.join(unique[:2])} and {len(unique) - 2} more"


def plain(value: Any) -> Any:
    """A dataclass as dicts, lists and values, like dataclasses.asdict without its deep copies of every value (a
    report of 8 GPUs' NVLinks holds 720 figures: asdict took most of the time a judged file took)."""
    names = _FIELD_NAMES.get(type(value))
    if names is None and hasattr(type(value), "__dataclass_fields__"):
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in fields(value))
    if names is not None:
        return {name: plain(getattr(value, name)) for name in names}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
