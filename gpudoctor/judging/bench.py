"""What the checks of users' benchmark outputs share (checks/benchmarks.py, nvbandwidth.py, dcgm.py): a judged
row with the fix its verdict calls for, and several of them as one result."""

from __future__ import annotations

from gpudoctor.model import SEVERITY, Metric, Remediation, Result, Row, Status, aimed, worst

Judged = tuple[Row, Remediation | None]  # a row and the fix its verdict calls for


def judged(
    status: Status,
    summary: str,
    metrics: list[Metric] | None = None,
    fix: Remediation | None = None,
    index: int | None = None,
) -> Judged:
    """A row (of the GPU `index` where it is about one) and its fix."""
    return Row(status, summary, index=index, metrics=metrics or []), fix


def combine(verdicts: list[Judged], what: str) -> Result:
    """One result over several runs or tests: the worst status, a summary naming the worst first (model.SEVERITY:
    a run that failed, broke or timed out, then a warning, a pass, a skip; alike ones in their order), and the fix
    of the worst that has one."""
    rows = [row for row, _ in verdicts]
    ordered = sorted(verdicts, key=lambda v: -SEVERITY[v[0].status])
    cure = next((f for row, f in ordered if f is not None and row.status != Status.PASS), None)
    bad = [row for row in rows if row.status not in (Status.PASS, Status.SKIP)]
    cure = aimed(cure, bad) if cure else None
    said = "; ".join(_said(row) for row, _ in ordered[:3]) + (f"; and {len(rows) - 3} more" if len(rows) > 3 else "")
    summary = f"{len(rows)} {what}s: {said}" if len(rows) > 1 else _said(rows[0])
    return Result(worst([r.status for r in rows], default=Status.SKIP), summary, rows=rows, remediation=cure)


def _said(row: Row) -> str:
    return f"{row.where}: {row.summary}" if row.name or row.index is not None else row.summary
