"""What a workload a --budget shortened may say: never a false verdict from a short run. A figure measured over
fewer repetitions than its full run fails only where it is grossly below its pass line (GROSS: a GPU at a third of
its healthy figure is no noise); nearer the line it is "unstable", a warning that names the shortened run. A
workload the budget's time ran out on is skipped as cut short, never failed or timed out. Correctness (wrong
results, ranks that disagree, a gradient unlike one process's) is judged as in a full run: a short run proves it as
well; a loss that did not fall over a shortened run's fewer steps is a warning (a loss may rise before it falls).

The runner records how a workload ran (`Result.scale`, `Result.budget_s`); the diagnosis's `short-run` revision
(revisions.py) gives its results these verdicts."""

from __future__ import annotations

from gpudoctor.judging.ddp import LOSS_FALLS
from gpudoctor.model import SEVERITY, Metric, Result, Row, Status, finite_number, worst

GROSS = 0.5  # below half its pass line (or past twice it, where less is better) a short run's figure still fails


def short_run(results: list[Result], scale: float, cut_by: float | None) -> list[Result]:
    """`results` as a run at `scale` of its work may give them; `cut_by`: the budget (seconds) whose time ran
    out on the workload, where it did."""
    if cut_by is not None and any(r.status == Status.TIMEOUT for r in results):
        return [_cut_short(r, cut_by) if r.status == Status.TIMEOUT else r for r in results]
    if scale >= 1.0:
        return results
    return [_shortened(r, scale) for r in results]


def _cut_short(result: Result, budget: float) -> Result:
    result.detail = "\n".join(t for t in (result.summary, result.detail) if t)
    result.status = Status.SKIP
    result.summary = f"cut short: the {budget:g} s budget ran out before it finished (not judged)"
    result.remediation = None
    return result


def _shortened(result: Result, scale: float) -> Result:
    note = f"run at {scale:.0%} of its work to fit the --budget"
    result.detail = "\n".join(t for t in (result.detail, note) if t)
    for row in result.rows:
        _soften(row, scale)
    if result.rows:
        softened = worst([r.status for r in result.rows], default=result.status)
        if SEVERITY[softened] < SEVERITY[result.status] and result.basis in (None, "figure"):
            result.status = softened
            result.summary = f"unstable in a shortened run: {result.summary}"
    else:
        _soften(result, scale)
    return result


def _soften(item: Result | Row, scale: float) -> None:
    """A figure-based failure or warning of a shortened run that is not gross, or a loss that did not fall in its
    fewer steps: a warning that says so."""
    if isinstance(item, Result) and item.aspect == LOSS_FALLS and item.status == Status.FAIL:
        item.status = Status.WARN
        item.summary = f"unstable ({scale:.0%} of its steps): {item.summary}; a full run judges it"
        return
    if item.status not in (Status.FAIL, Status.WARN) or item.basis != "figure":
        return
    if any(_gross(m) for m in item.metrics):
        return
    item.status = Status.WARN
    if not item.summary.startswith("unstable"):
        item.summary = f"unstable ({scale:.0%} of its work): {item.summary}"


def _gross(metric: Metric) -> bool:
    if not (finite_number(metric.value) and finite_number(metric.expected) and metric.expected):
        return False
    if metric.comparison == ">=":
        return metric.value <= metric.expected * GROSS
    if metric.comparison == "<=":
        return metric.value >= metric.expected / GROSS
    return False
