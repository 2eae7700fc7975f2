"""Revisions: the diagnosis's rules that rewrite a check's results after the check returned them, over the same
evidence as the causes. The runner only records how a check ran (the share of its work a --budget left it, the
budget that ran out on it); what a paste or a shortened run changes in a verdict is said here, and nowhere else:

- `paste-evidence`: the signatures of a pasted error join the verdict of the check that owns their cause
  (paste/evidence.py), and the run gains what the paste itself shows (lines it states twice unalike, or nothing
  gpudoctor reads);
- `short-run`: a workload a --budget shortened gives only the verdicts a short run can (shortened.py).

A revision says which checks' results it reads (`applies`, a glance) and returns those results as they now stand.
Every result it rewrote or added carries its id (`Result.revised_by`), and a check any of whose results carries it
is not revised again: a run diagnosed twice (a node of a cluster run builds its report twice) reads the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpudoctor.diagnosis.shortened import short_run
from gpudoctor.model import Result

if TYPE_CHECKING:
    from gpudoctor.diagnosis import Evidence

Revise = Callable[[str, list[Result], "Evidence"], list[Result]]
Applies = Callable[[list[Result], "Evidence"], bool]


def _none(evidence: Evidence) -> list[Result]:
    return []


@dataclass(frozen=True)
class Revision:
    """A rule that rewrites results: `revise` one check's, where it `applies`; `adds` the run's own (results of a
    check id the run does not hold yet: added once)."""

    id: str
    applies: Applies
    revise: Revise
    adds: Callable[[Evidence], list[Result]] = field(default=_none)


def revise(evidence: Evidence, revisions: tuple[Revision, ...]) -> None:
    """Apply each revision in order to every check's results; `evidence.results` is changed in place."""
    for revision in revisions:
        for check_id in dict.fromkeys(r.check_id for r in evidence.results):
            _revise_check(revision, check_id, evidence)
        _add(revision, evidence)


def _revise_check(revision: Revision, check_id: str, evidence: Evidence) -> None:
    group = [r for r in evidence.results if r.check_id == check_id]
    if any(revision.id in r.revised_by for r in group) or not revision.applies(group, evidence):
        return
    before = {id(r): r.to_dict() for r in group}
    after = revision.revise(check_id, group, evidence)
    for result in after:
        if id(result) not in before:
            _stamped(result, group[0])
        if before.get(id(result)) != result.to_dict():
            result.revised_by.append(revision.id)
    placed: list[Result] = []
    for result in evidence.results:
        if result.check_id != check_id:
            placed.append(result)
        elif result is group[0]:
            placed += after
    evidence.results[:] = placed


def _stamped(result: Result, first: Result) -> None:
    """A result a revision added to a check's: the check's stamps and how it ran, as the runner gave its own."""
    result.check_id = result.check_id or first.check_id
    result.title = result.title or first.title
    result.duration_s = result.duration_s or first.duration_s
    result.scale, result.budget_s = first.scale, first.budget_s


def _add(revision: Revision, evidence: Evidence) -> None:
    held = {r.check_id for r in evidence.results}
    added = [r for r in revision.adds(evidence) if r.check_id not in held]
    for result in added:
        result.revised_by.append(revision.id)
    evidence.results[:0] = added


def _pasted_run(results: list[Result], evidence: Evidence) -> bool:
    return "paste" in evidence.facts


def _paste(check_id: str, results: list[Result], evidence: Evidence) -> list[Result]:
    """A pasted error's signatures with the verdict of the check that owns their cause; on a live run (--live) the
    machine's own verdict stands and the paste's line is what the paste says."""
    from gpudoctor.paste.evidence import attach

    return attach(check_id, results, evidence.facts, live=evidence.live)


def _pasted(evidence: Evidence) -> list[Result]:
    """What a paste itself shows: nothing gpudoctor reads, or facts it states twice unalike."""
    if "paste" not in evidence.facts:
        return []
    from gpudoctor.paste.evidence import conflict_results, unread_results

    return unread_results(evidence.facts) + conflict_results(evidence.facts)


def _budgeted(results: list[Result], evidence: Evidence) -> bool:
    """A workload the --budget shortened (`scale`) or whose time the budget ran out on (`budget_s`)."""
    return results[0].scale is not None or results[0].budget_s is not None


def _short(check_id: str, results: list[Result], evidence: Evidence) -> list[Result]:
    return short_run(results, results[0].scale or 1.0, results[0].budget_s)


REVISIONS = (
    Revision("paste-evidence", _pasted_run, _paste, adds=_pasted),
    Revision("short-run", _budgeted, _short),
)
