"""Causes over symptoms: after the checks, the rules that say which cause explains which findings.

One fault shows up in several checks: another job on a GPU slows GEMM, the sustained load, all-reduce and DDP and
makes workloads run out of memory; a hidden device fails CUDA's start and every check that needed it. The checks
stay independent and pure; here, each rule (rules.py) reads every result, the node's facts and who used the GPUs
around each workload, and says what it found: a Cause (what is wrong, where, the command that cures it, what
says so) and the findings it explains. A finding explained is either folded beneath the cause (its verdict kept,
its own fix not offered) or, for a measurement the cause made meaningless as a hardware verdict (a figure taken
while another process computed on that GPU), not judged: its status becomes skip, its figures are never saved as
a baseline, and what it measured stays in its detail.

    causes = diagnose(Evidence(results, facts, observations))

First the revisions (revisions.py) rewrite what a check's own verdict cannot say: a pasted error joins the verdict
of the check that owns its cause, a workload a --budget shortened gives only the verdicts a short run can. This is
the one place a result is rewritten after its check returned it. Results are changed in place (the list too: a
revision may add results); the causes come back worst first. Diagnosing the same results twice changes nothing
more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.facts.nvml import usable
from gpudoctor.model import SEVERITY, Cause, Result, Row, Status, worst


@dataclass(frozen=True)
class Evidence:
    """What the rules read: every result of the run, the node's facts, who used the GPUs around each workload
    (facts.occupancy.Watch observations) and, on rank 0 of a cluster run, every node's own report."""

    results: list[Result]
    facts: dict[str, Any]
    observations: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    live: bool = True  # the facts are this machine's, gathered now (not a snapshot, capture or paste)

    def of(self, *check_ids: str) -> list[Result]:
        return [r for r in self.results if r.check_id in check_ids or r.label in check_ids]

    def failing(self, *check_ids: str) -> list[Result]:
        """The results of these checks (or labels) that warned, failed, broke or timed out."""
        return [r for r in self.of(*check_ids) if r.status not in (Status.PASS, Status.SKIP)]

    def section(self, name: str) -> dict[str, Any]:
        return self.facts.get(name) or {}

    @property
    def env(self) -> dict[str, str]:
        return self.section("system").get("env") or {}

    @property
    def gpus(self) -> list[dict[str, Any]]:
        return [g for g in self.section("nvml").get("gpus") or [] if usable(g)]


@dataclass(frozen=True)
class Unjudged:
    """Measurements a cause made meaningless as hardware verdicts: `check_id`'s rows on `gpus` (NVML indexes;
    every GPU where None) or about `nodes`, and its row-less results, whose verdict rests on one of `bases`."""

    check_id: str
    gpus: frozenset[int] | None
    why: str  # said in place of the verdict: "measured while pid 452 (python3) computed on GPU 0"
    bases: tuple[str, ...] = ("figure", "oom")
    nodes: frozenset[str] | None = None  # rank 0: only rows about these nodes (or a link to one of them)


@dataclass
class Found:
    """A cause a rule found, the findings it folds beneath itself (check ids or labels) and the measurements it
    leaves not judged."""

    cause: Cause
    fold: tuple[str, ...] = ()
    unjudge: tuple[Unjudged, ...] = ()


Rule = Callable[[Evidence], list[Found]]


def diagnose(evidence: Evidence, rules: Iterable[Rule] | None = None) -> list[Cause]:
    """The revisions, then every rule over the evidence, in order (a finding is explained by the first cause that
    claims it); the results are changed in place, the causes returned worst first, each listing the findings it
    explains."""
    from gpudoctor.diagnosis.revisions import REVISIONS, revise

    revise(evidence, REVISIONS)
    if rules is None:
        from gpudoctor.diagnosis.rules import CLUSTER_RULES, RULES

        rules = CLUSTER_RULES if evidence.nodes else RULES
    causes: list[Cause] = []
    for rule in rules:
        for found in rule(evidence):
            found.cause.id = _unique(found.cause.id, causes)
            touched = [*_unjudge(found, evidence.results), *_fold(found, evidence.results)]
            found.cause.explains = list(dict.fromkeys([*found.cause.explains, *touched]))
            causes.append(found.cause)
    return sorted(causes, key=lambda c: -SEVERITY[c.status])


def _unique(wanted: str, causes: list[Cause]) -> str:
    """`wanted`, or `wanted-2`, `wanted-3`... where a cause of this run already has it."""
    taken = {c.id for c in causes}
    name, number = wanted, 1
    while name in taken:
        number += 1
        name = f"{wanted}-{number}"
    return name


def _fold(found: Found, results: list[Result]) -> list[str]:
    """Fold the findings of `found.fold` beneath the cause; a result it explained before (the same run
    diagnosed twice, as a node of a cluster run is) is counted again, never changed again."""
    touched = []
    for result in results:
        if result.check_id not in found.fold and result.label not in found.fold:
            continue
        if result.explained_by == found.cause.id:
            touched.append(result.label)
        elif not result.explained_by and result.status not in (Status.PASS, Status.SKIP):
            result.explained_by, result.remediation = found.cause.id, None
            touched.append(result.label)
    return touched


def _unjudge(found: Found, results: list[Result]) -> list[str]:
    touched = []
    for measured in found.unjudge:
        for result in results:
            if result.check_id != measured.check_id:
                continue
            if result.explained_by == found.cause.id:
                touched.append(result.label)
            elif not result.explained_by and _unjudged(result, measured):
                result.explained_by = found.cause.id
                touched.append(result.label)
    return touched


def _unjudged(result: Result, measured: Unjudged) -> bool:
    """Take the measured verdicts of `result` that `measured` covers off the hardware's account; True if any."""
    rows = [r for r in result.rows if r.basis in measured.bases and _on(r, measured)]
    judged_rows = [r for r in result.rows if r.basis is not None]
    if rows and len(rows) < len(judged_rows):
        for row in rows:
            _not_judged(row, measured.why)
        _restated(result, rows, measured.why)
        return True
    if rows or (not judged_rows and measured.nodes is None and result.basis in measured.bases):
        for row in rows:
            _not_judged(row, measured.why)
        result.detail = "\n".join(t for t in (f"as measured: {result.summary}", result.detail) if t)
        result.status, result.summary, result.remediation = Status.SKIP, f"not judged: {measured.why}", None
        _off_baseline(result)
        return True
    return False


def _on(row: Row, measured: Unjudged) -> bool:
    if measured.nodes is not None:
        return bool({row.node, row.peer} & measured.nodes)
    return measured.gpus is None or row.index in measured.gpus


def _not_judged(row: Row, why: str) -> None:
    row.status, row.summary = Status.SKIP, f"not judged: {why}"
    for metric in row.metrics:
        metric.baseline = False


def _restated(result: Result, unjudged: list[Row], why: str) -> None:
    """A result some of whose rows were taken off: its status and summary from the rows still judged."""
    judged = [r for r in result.rows if r not in unjudged]
    result.status = worst([r.status for r in judged], default=Status.SKIP)
    bad = [r for r in judged if r.status not in (Status.PASS, Status.SKIP)]
    where = ", ".join(dict.fromkeys(r.where for r in unjudged))
    said = "; ".join(f"{r.where}: {r.summary}" for r in bad[:3]) or f"{len(judged)} judged passed"
    result.summary = f"{said}; not judged on {where} ({why})"
    if not bad:
        result.remediation = None
    _off_baseline(result)


def _off_baseline(result: Result) -> None:
    """A figure measured under a cause is never saved as a baseline."""
    for metric in result.metrics:
        metric.baseline = False
