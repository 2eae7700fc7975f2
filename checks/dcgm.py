"""`dcgmi diag`'s output (text and --json), read from a file by `gpudoctor check --from` (gpudoctor/paste/
dcgm_diag.py), judged: DCGM's own verdict per test (against its per-SKU thresholds), with its messages quoted and
the figures it states. Pure judges of facts; nothing runs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gpudoctor.api import Metric, Remediation, Result, Status, check, command
from gpudoctor.judging.bench import Judged, combine, judged

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext


@check(
    "bench.dcgm-diag",
    "dcgmi diag output",
    needs=("benchmarks",),
)
def dcgm_diag(ctx: CheckContext) -> Result:
    """DCGM's own verdict per test (it judges against its per-SKU thresholds), with its messages, and the
    figures it states set against the published healthy figure for the GPU."""
    section = (ctx.facts.get("benchmarks") or {}).get("dcgm_diag") or {}
    tests = section.get("tests") or []
    if not tests:
        return Result(Status.SKIP, "no dcgmi diag output in this file")
    rows = [dcgm_row(test) for test in tests]
    result = combine(rows, "DCGM test")
    result.quotes = [
        f"DCGM {test.get('name') or 'test'}: {message}"
        for test in tests
        if DCGM_STATUS.get(str(test.get("result") or "").lower()) in (Status.FAIL, Status.WARN)
        for message in test.get("messages") or []
    ]
    return result


def first_sentence(text: str, room: int = 80) -> str:
    """A message's first sentence, at most `room` characters cut at a word (DCGM's run on: "GPU 0 Thermal
    violations totaling 13.3 seconds ... Verify that the cooling ..."); the whole stays quoted."""
    head = re.split(r"(?<=[a-z0-9)])\.?\s+(?=Verify|Check|Please|Run|Reset|Rerun)|\.\s", text, maxsplit=1)[0]
    return head if len(head) <= room else head[: room - 1].rsplit(" ", 1)[0] + "…"


DCGM_STATUS = {"pass": Status.PASS, "fail": Status.FAIL, "warn": Status.WARN, "skip": Status.SKIP}


def dcgm_row(test: dict[str, Any]) -> Judged:
    status = DCGM_STATUS.get(str(test.get("result") or "").lower(), Status.SKIP)
    failing = [g for g, r in (test.get("gpus") or {}).items() if str(r).lower() == "fail"]
    where = f" on GPU {', '.join(failing)}" if failing else ""
    said = first_sentence("; ".join(test.get("messages") or []))
    metrics = [
        Metric(
            str(f.get("name") or "figure"),
            f.get("value"),
            str(f.get("unit") or ""),
            labels={"gpu": f["gpu"]} if f.get("gpu") is not None else {},
        )
        for f in test.get("figures") or []
        if isinstance(f.get("value"), int | float)
    ]
    text = f"{test.get('result')}{where}" + (f": {said}" if said and status != Status.PASS else "")
    fix = None
    if status in (Status.FAIL, Status.WARN):
        fix = Remediation(
            "DCGM judged this test against its own per-SKU thresholds; its message says which GPU and figure.",
            [
                "dcgmi diag -r 3 -j  # again, and keep the JSON",
                command("nvidia-smi -q -d PERFORMANCE,ECC,PCIE -i {gpu}"),
            ],
        )
    row, fix = judged(status, text, metrics, fix)
    row.name = f"DCGM {test.get('name') or 'test'}"
    return row, fix
