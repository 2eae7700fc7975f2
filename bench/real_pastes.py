"""How often `gpudoctor check --from` names the cause and prints the fix of real pastes whose fix a public thread
confirmed, and how often it leaves a working machine unblamed when the program was at fault.

Each case of tests/fixtures/corpus (<id>/paste.txt, <id>/case.toml) is judged by the real command in its own
process (`python -m gpudoctor check --from paste.txt --format json`) and compared with the case's label:

- cause named (machine and program cases): the report's leading cause, or a signature matched in the paste, or
  a non-passing check, is one that tests/fixtures/corpus/MAPPING.toml lists for the label's cause family (the
  verdict rule is written at the top of MAPPING.toml);
- fix given (machine and program cases): one of the label's regular expressions (case-insensitive)
  matches one of the commands the report prints: the remediation commands of its causes and of its failing or
  warning checks, alternatives (`instead`) included;
- unblamed (program and healthy cases): no cause outside MAPPING.toml's program_causes and no failing check
  outside `program.*`.

Rates are printed for the open part and the sealed part (tests/fixtures/corpus/SEALED.md) separately. The open
part's misses are listed, grouped by cause family; the sealed part's are only counted, never shown, so nothing
is tuned on them.

    python bench/real_pastes.py [--jobs 2] [--out verdicts.json]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
JUDGED = ("fail", "warn")


@dataclass
class Case:
    id: str
    kind: str
    cause: str
    fix_match: list[str]
    opened: str
    sealed: bool
    paste: Path


@dataclass
class Verdict:
    case: Case
    refused: bool = False
    lead: str | None = None
    signatures: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    named: bool | None = None
    fixed: bool | None = None
    unblamed: bool | None = None
    blamed_by: list[str] = field(default_factory=list)


def sealed_ids(corpus: Path = CORPUS) -> set[str]:
    """The ids SEALED.md lists under its '## Sealed ids' heading."""
    text = (corpus / "SEALED.md").read_text(encoding="utf-8")
    listed = text.split("## Sealed ids", 1)[1]
    return set(re.findall(r"^- (\S+)\s*$", listed, re.M))


def cases(corpus: Path = CORPUS) -> Iterator[Case]:
    sealed = sealed_ids(corpus)
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
        data = tomllib.loads((folder / "case.toml").read_text(encoding="utf-8"))
        label = data["label"]
        yield Case(
            folder.name,
            label["kind"],
            label["cause"],
            list(label["fix_match"]),
            data["opened"],
            folder.name in sealed,
            folder / "paste.txt",
        )


def mapping(corpus: Path = CORPUS) -> tuple[dict[str, dict[str, list[str]]], set[str]]:
    """Each cause family's ids, and the causes that are not the machine's fault."""
    data = tomllib.loads((corpus / "MAPPING.toml").read_text(encoding="utf-8"))
    keys = ("causes", "also_leading", "signatures", "checks")
    families = {name: {k: list(entry.get(k, [])) for k in keys} for name, entry in data["family"].items()}
    return families, set(data["judging"]["program_causes"])


def report(paste: Path) -> dict[str, Any] | None:
    """gpudoctor's JSON report on one paste; None when it refuses the input (exit 2)."""
    command = [sys.executable, "-m", "gpudoctor", "check", "--from", str(paste), "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode not in (0, 1):
        return None
    return json.loads(done.stdout)


def commands(remediation: Any) -> Iterator[str]:
    """Every command a remediation prints, its alternatives' included."""
    if isinstance(remediation, dict):
        yield from remediation.get("commands") or ()
        yield from commands(remediation.get("instead"))
        for key, value in remediation.items():
            if key not in ("commands", "instead") and isinstance(value, dict | list):
                yield from commands(value)
    elif isinstance(remediation, list):
        for item in remediation:
            yield from commands(item)


def judge(
    case: Case, data: dict[str, Any] | None, families: dict[str, dict[str, list[str]]], program_causes: set[str]
) -> Verdict:
    verdict = Verdict(case)
    if data is None:
        verdict.refused = True
        verdict.unblamed = True if case.kind != "machine" else None
        verdict.named = False if case.kind != "healthy" else None
        verdict.fixed = False if case.kind != "healthy" else None
        return verdict
    causes = [c for c in data.get("causes") or () if c.get("status") in JUDGED]
    checks = [c for c in data.get("checks") or () if c.get("status") in JUDGED]
    verdict.lead = causes[0]["id"] if causes else None
    signatures = {s["id"] for s in (data.get("paste") or {}).get("signatures") or ()}
    signatures |= {c["aspect"] for c in checks if c.get("aspect")}
    verdict.signatures = sorted(signatures)
    verdict.checks = [f"{c['check_id']}:{c['status']}" for c in checks]
    verdict.commands = [cmd for item in causes + checks for cmd in commands(item.get("remediation"))]
    if case.kind != "healthy":
        family = families[case.cause]
        lead = verdict.lead
        evidence = bool(signatures & set(family["signatures"])) or bool(
            {c["check_id"] for c in checks} & set(family["checks"])
        )
        verdict.named = lead in family["causes"] or (
            (lead is None or lead in family["causes"] + family["also_leading"]) and evidence
        )
    if case.kind != "healthy":
        verdict.fixed = any(re.search(p, cmd, re.I) for p in case.fix_match for cmd in verdict.commands)
    if case.kind != "machine":
        blamed = [f"cause {c['id']}" for c in causes if c["id"] not in program_causes]
        blamed += [
            f"check {c['check_id']}"
            for c in checks
            if c["status"] == "fail" and not c["check_id"].startswith("program.")
        ]
        verdict.blamed_by = blamed
        verdict.unblamed = not blamed
    return verdict


def rate(verdicts: list[Verdict], attribute: str) -> str:
    judged = [getattr(v, attribute) for v in verdicts if getattr(v, attribute) is not None]
    if not judged:
        return "   -"
    hits = sum(judged)
    return f"{hits:3}/{len(judged):<3} {100 * hits / len(judged):3.0f}%"


def summary(verdicts: list[Verdict]) -> list[tuple[str, str]]:
    machine = [v for v in verdicts if v.case.kind == "machine"]
    program = [v for v in verdicts if v.case.kind == "program"]
    return [
        (
            "cases (machine/program/healthy)",
            f"{len(verdicts)} ({len(machine)}/{len(program)}/{len(verdicts) - len(machine) - len(program)})",
        ),
        ("cause named, all", rate(verdicts, "named")),
        ("cause named, machine", rate(machine, "named")),
        ("cause named, program", rate(program, "named")),
        ("fix given, all", rate(verdicts, "fixed")),
        ("fix given, machine", rate(machine, "fixed")),
        ("fix given, program", rate(program, "fixed")),
        ("unblamed (program+healthy)", rate(verdicts, "unblamed")),
        ("refused (exit 2)", str(sum(v.refused for v in verdicts))),
    ]


def misses(verdicts: list[Verdict]) -> Iterator[str]:
    """The open part's misses, grouped by cause family."""
    by_family: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        if v.named is False or v.fixed is False or v.unblamed is False:
            by_family[f"{v.case.kind}: {v.case.cause}"].append(v)
    for family in sorted(by_family):
        yield f"\n{family}"
        for v in by_family[family]:
            missed = [
                name
                for name, value in (("cause", v.named), ("fix", v.fixed), ("unblamed", v.unblamed))
                if value is False
            ]
            said = (
                "refused the paste"
                if v.refused
                else (
                    f"lead={v.lead or '-'} checks={','.join(v.checks) or '-'} "
                    f"signatures={','.join(v.signatures) or '-'}"
                )
            )
            blamed = f" blamed by {', '.join(v.blamed_by)}" if v.blamed_by else ""
            yield f"  {v.case.id}: missed {'+'.join(missed)}; {said}{blamed}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="cases judged at once (default 2)")
    parser.add_argument("--out", type=Path, help="write the open part's verdicts and both parts' rates as JSON")
    args = parser.parse_args()
    families, program_causes = mapping()
    every = list(cases())
    unknown = sorted({c.cause for c in every} - set(families))
    if unknown:
        raise SystemExit(f"MAPPING.toml lacks these cause families: {unknown}")
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = list(pool.map(lambda c: report(c.paste), every))
    seconds = time.perf_counter() - started
    verdicts = [judge(c, r, families, program_causes) for c, r in zip(every, reports, strict=True)]
    open_part = [v for v in verdicts if not v.case.sealed]
    sealed_part = [v for v in verdicts if v.case.sealed]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    at = f" at {commit.stdout.strip()}" if commit.returncode == 0 else ""
    print(f"Real pastes: {len(verdicts)} cases judged{at} in {seconds:.0f} s ({args.jobs} at once)\n")
    print(f"{'':34} {'open':>14} {'sealed':>14}")
    for (name, left), (_, right) in zip(summary(open_part), summary(sealed_part), strict=True):
        print(f"{name:34} {left:>14} {right:>14}")
    print("\nOpen part's misses (the sealed part's are counted above, not listed):")
    for line in misses(open_part):
        print(line)
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "open": dict(summary(open_part)),
                    "sealed": dict(summary(sealed_part)),
                    "open_verdicts": [
                        {
                            "id": v.case.id,
                            "kind": v.case.kind,
                            "cause": v.case.cause,
                            "named": v.named,
                            "fixed": v.fixed,
                            "unblamed": v.unblamed,
                            "lead": v.lead,
                            "checks": v.checks,
                            "signatures": v.signatures,
                            "refused": v.refused,
                        }
                        for v in open_part
                    ],
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
