"""Error signatures as evidence for the check that owns their cause, and facts a paste states twice unalike.

A check judges its facts as it always does. A signature of a cause it owns then joins its result: where the
check could not judge (the paste held no facts for it), the signature is the verdict, with its cause, fix and
the line quoted; where it judged, the line is quoted beside its verdict (raised to the signature's status: the error did
happen), and a signature the facts did not explain (a pass beside "CUDA error 804") is a warning of its own,
so nothing the user pasted is silently lost. A line that names why the owner failed (`leads` in its data: Secure Boot
refusing the module under "driver not loaded") gives the cure that leads, the owner's own second.

The diagnosis applies it, after the checks (its `paste-evidence` revision, gpudoctor/diagnosis/revisions.py): the
one place a check's result is rewritten.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.command import command
from gpudoctor.model import Remediation, Result, Status, worst
from gpudoctor.paste import NOT_OUTPUTS, OUTPUTS, READERS
from gpudoctor.paste.cures import cure
from gpudoctor.paste.signatures import WHOLE_PASTE, Signature, table

CONFLICTS_CHECK = "paste.conflicts"
UNREAD_CHECK = "paste.read"


def signatures_of(check_id: str, facts: dict[str, Any]) -> list[tuple[Signature, dict[str, Any], int]]:
    """The signatures a paste holds whose cause `check_id` owns: each entry once, with its first sighting and
    how many lines showed it."""
    known = table()
    seen: dict[str, tuple[Signature, dict[str, Any], int]] = {}
    for sighting in (facts.get("paste") or {}).get("signatures", []):
        signature = known.get(sighting.get("id"))
        if signature is None or signature.owner != check_id:
            continue
        first = seen.get(signature.id)
        seen[signature.id] = (signature, first[1] if first else sighting, (first[2] if first else 0) + 1)
    return list(seen.values())


def attach(check_id: str, results: list[Result], facts: dict[str, Any], live: bool = False) -> list[Result]:
    """`results` of `check_id` with the paste's evidence for it joined, as the module docstring says. `live`: the
    results are this machine's (--live), which believes only what it checked: a sighting its check could not
    judge here is what the paste says, a warning with the command that confirms it, never a failure."""
    sightings = signatures_of(check_id, facts)
    if not sightings:
        return results
    if all(r.status == Status.SKIP for r in results):
        if live:
            return [_unconfirmed(check_id, results[0].summary, *s) for s in sightings]
        return _curing([(s[1], _verdict(*s, facts=facts)) for s in sightings])
    judged = worst([r.status for r in results])
    if judged in (Status.FAIL, Status.WARN, Status.ERROR, Status.TIMEOUT):
        lead = next(r for r in results if r.status == judged)
        lead.quotes += [quoted(s[1], s[2]) for s in sightings]
        lead.status = worst([judged, *(Status(s[0].status) for s in sightings)])  # the error did happen
        named = next((s for s in sightings if s[0].leads), None)
        if named is not None and not live:
            lead.remediation = _leading(*named, facts=facts, then=lead.remediation)
        return results
    if live:
        return results + [_not_here(check_id, judged, *s) for s in sightings]
    return results + [_verdict(*s, beside=judged, facts=facts) for s in sightings]


def _curing(verdicts: list[tuple[dict[str, Any], Result]]) -> list[Result]:
    """One verdict per line where several signatures of one owner read it: a general one that gives no command
    gives way to a more specific one that cures it (cuDNN's loader line: "a cuDNN library cannot be found" and
    "a program needs cuDNN 9"); where none on the line gives a command, each stays."""
    cured_lines = {s["line"] for s, r in verdicts if r.remediation and r.remediation.commands}
    return [r for s, r in verdicts if s["line"] not in cured_lines or (r.remediation and r.remediation.commands)]


def _leading(
    signature: Signature, sighting: dict[str, Any], count: int, facts: dict[str, Any], then: Remediation | None
) -> Remediation:
    """The cure of a line that names why the owner failed (`leads`): first, with the owner's own cure, which did not
    know why, as the other way."""
    named = _remedy(signature, sighting.get("values") or {}, facts, signature.cause)
    return Remediation(named.why, named.commands, then, named.source)


def _said(judged: Status) -> str:
    return "passed" if judged == Status.PASS else f"judged {judged.value}"


def _not_here(check_id: str, judged: Status, signature: Signature, sighting: dict[str, Any], count: int) -> Result:
    """A paste's claim this machine's own check judged otherwise (--live): the machine's verdict stands; the line is
    the paste's, shown as such, and leads nothing."""
    return Result(
        Status.PASS,
        f"the paste says {signature.headline} (line {sighting['line']}); {check_id} {_said(judged)} on this machine",
        aspect=signature.id,
        detail=f"{signature.cause} This machine's own check judged it sound: the line came from another machine, a "
        "container or an earlier state.",
        quotes=[quoted(sighting, count)],
    )


def _unconfirmed(check_id: str, why_not: str, signature: Signature, sighting: dict[str, Any], count: int) -> Result:
    """A paste's claim this machine could not check (`why_not`: the check's reason for skipping here)."""
    return Result(
        Status.WARN,
        f"the paste says {signature.headline} (line {sighting['line']}); not confirmed on this machine",
        aspect=signature.id,
        remediation=Remediation(
            f"{signature.cause} This machine could not check it ({why_not}): confirm it on the machine the paste "
            "came from before acting on it.",
            [command("gpudoctor check --only {check}  # on the machine the paste is from", check=check_id)],
            source=signature.source,
        ),
        quotes=[quoted(sighting, count)],
    )


def quoted(sighting: dict[str, Any], count: int) -> str:
    """A paste's line as its result quotes it: `line 3: <the line>` (and how many more showed the same)."""
    more = f" (and {count - 1} more line{'s' if count > 2 else ''} like it)" if count > 1 else ""
    return f"line {sighting['line']}{more}: {sighting['text']}"


def _verdict(
    signature: Signature,
    sighting: dict[str, Any],
    count: int,
    beside: Status | None = None,
    facts: dict[str, Any] | None = None,
) -> Result:
    """The signature as a result: its verdict where its owner could not judge; a warning beside an owner that
    judged the facts here sound (the error came from another machine, a container or an earlier state). The
    verdict line is the signature's short summary; its explanation and source are the fix's why; the line of the
    paste is quoted."""
    said = f"{signature.headline}; the facts here {beside.value}" if beside else signature.headline
    facts_say = " The facts here judged sound: the error came from another machine, a container or an earlier state."
    why = f"{signature.cause}{facts_say if beside else ''}"
    return Result(
        Status.WARN if beside else Status(signature.status),
        said,
        aspect=signature.id,
        remediation=_remedy(signature, sighting.get("values") or {}, facts or {}, why),
        quotes=[quoted(sighting, count)],
    )


def _remedy(signature: Signature, values: dict[str, Any], facts: dict[str, Any], why: str) -> Remediation:
    """The signature's own commands; the owner's cure for what the paste shows where its data says the owner's
    fix is the cure (paste/cures.py); the reason where no command cures it."""
    cured = cure(signature.id, values, facts) if signature.fix_from == "owner" else None
    if cured is not None:
        return Remediation(f"{why} {cured.why}", cured.commands, cured.instead, signature.source)
    pasted = facts.get("paste") or {}
    apps = tuple(pasted.get("apps") or ())
    commands, refused = signature.fixes({k: pasted.get(k) for k in WHOLE_PASTE} | values, apps)
    left = f" (a command left out: {'; '.join(refused)})" if refused else ""
    none = f" No command cures it here: {signature.no_fix}" if signature.no_fix and not commands else ""
    return Remediation(f"{why}{left}{none}", commands, source=signature.source)


def conflict_results(facts: dict[str, Any]) -> list[Result]:
    """One warning per fact the paste states twice unalike (two driver versions, torch's error text against
    the collect_env block): which value was judged, and where each came from."""
    found = []
    for conflict in (facts.get("paste") or {}).get("conflicts", []):
        values = conflict["values"]
        lines = " and ".join(str(v["line"]) for v in values[:3])
        found.append(
            Result(
                Status.WARN,
                f"the paste states {conflict['fact']} {len(values)} ways (lines {lines}); the first was judged",
                aspect=conflict["fact"],
                title="The paste agrees with itself",
                check_id=CONFLICTS_CHECK,
                remediation=Remediation(
                    "The paste may mix two machines, a before and an after, or a container's CUDA "
                    "forward-compatibility library (cuda-compat) with the host's driver: paste what one machine "
                    "says now."
                ),
                quotes=[f"line {v['line']} ({v['reader']}): {v['value']}" for v in values],
            )
        )
    return found


def unread_results(facts: dict[str, Any]) -> list[Result]:
    """Where a paste held nothing gpudoctor reads: a warning that nothing was judged, what was looked for, and
    what to paste instead (run on the machine the question is about)."""
    if "paste" not in facts or set(facts["paste"].get("kinds") or ()) - {"prose"}:
        return []
    looked_for = ", ".join(name for name in READERS if name not in NOT_OUTPUTS)
    return [
        Result(
            Status.WARN,
            "nothing judged: no output or error gpudoctor knows",
            title="The paste holds something gpudoctor reads",
            check_id=UNREAD_CHECK,
            remediation=Remediation(
                f"gpudoctor looked for the outputs of {looked_for}, and for the {len(table())} error messages it "
                "knows (gpudoctor/data/signatures; `gpudoctor list` names the checks). Paste the whole error with "
                "its traceback, or these outputs from the machine in question; best, run `gpudoctor check` there.",
                list(OUTPUTS.values()),
            ),
        )
    ]
