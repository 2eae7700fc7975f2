"""Silent data corruption: a GPU that computes wrong without an error (no Xid, no ECC count, no exception). Fixed
operations on fixed inputs on every GPU, repeated: the repeats, the GPUs of one kind (model, SM count, software) and,
within a cited error bound, an fp64 reference must all agree (compute.sdc, one node); the same operations once on every
GPU of every node, each node against the majority of its kind (cluster.sdc). The bound and the verdicts are
gpudoctor/judging/sdc.py; the ranks' code, and the reproduction a vendor is handed, checks/ranks/sdc.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.api import Metric, Result, Row, Status, Work, check, fix, from_rows, gpu_label, gpu_row, word

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
from gpudoctor.judging import sdc

WORKER = "gpudoctor.checks.ranks.sdc:worker"
REPRODUCE = "python -m gpudoctor.checks.ranks.sdc"
RERUN_REPEATS = 20  # the reproduction's repeats: enough for a fault that comes and goes to show again
WHY = (
    "A GPU that computes wrong without an error corrupts training silently (a loss spike or a NaN days later, on "
    "one rank). Drain the node; run the case again, many times, to tell a transient fault (it does not recur) from "
    "a persistent one (it does: the same wrong digest every time); hand the vendor a persistent one with the "
    "reproduction below (every GPU computes on the same inputs: a healthy GPU of the model prints its peers' digest)."
)
DRAIN = 'scontrol update NodeName={nodes} State=DRAIN Reason="gpudoctor: cluster.sdc"'  # nodes: checked words
SETTINGS = {"n": 0, "seed": sdc.SEED}


def params(ctx: CheckContext, repeats: int, reference_rows: int) -> dict[str, Any]:
    return {
        "n": int(ctx.settings["n"]) or sdc.SIZES[ctx.device],
        "seed": int(ctx.settings["seed"]),
        "repeats": repeats,
        "reference_rows": reference_rows,
    }


def reproduction(case: str, p: dict[str, Any], uuid: str | None, node: str | None = None) -> str:
    """The command that reruns just this case on just this GPU, with the run's inputs (checked words only)."""
    gpu = [f"CUDA_VISIBLE_DEVICES={word(uuid, 'word')}"] if uuid else []
    device = [] if uuid else ["--device", "cpu"]
    sizes = ["--repeats", str(RERUN_REPEATS), "--n", str(p["n"]), "--seed", str(p["seed"])]
    where = [f"  # on {word(node, 'node')}"] if node else []
    return " ".join([*gpu, REPRODUCE, "--case", word(case, "word"), *sizes, *device]) + "".join(where)


def reproductions(wanted: list[tuple[str, Any, Any]], p: dict[str, Any]) -> list[str]:
    """The reproduction of the first few (case, GPU UUID, node) that failed."""
    return [reproduction(case, p, uuid, node) for case, uuid, node in wanted[:3]]


def said(judged: sdc.Judged, head: str) -> str:
    """The line of a run where nothing disagreed: what it compared, and the first thing it did not judge."""
    if not judged.notes:
        return head
    more = f" (and {len(judged.notes) - 1} more, in the detail)" if len(judged.notes) > 1 else ""
    return f"{head}; not judged: {judged.notes[0]}{more}"


def finished(result: Result, judged: sdc.Judged) -> Result:
    """Any disagreement fails the check, even one that names no device for sure (a fault is there, on one of
    them); what was not judged goes in the detail."""
    if judged.findings:
        result.status = Status.FAIL
    result.detail = "\n".join(judged.notes) or None
    result.metrics.append(Metric("disagreements", len(judged.findings)))
    return result


def status_of(findings: list[sdc.Finding]) -> Status:
    """Fail where a finding is blamed on this rank; warn where it is one of several with no majority."""
    if not findings:
        return Status.PASS
    return Status.FAIL if any(f.sure for f in findings) else Status.WARN


def share_used(rank: dict[str, Any]) -> list[Metric]:
    """The largest share of its error bound any reference element used (healthy runs stay far below 1)."""
    references = [c.get("reference") for c in rank.get("cases", []) if isinstance(c, dict)]
    shares = [r["share"] for r in references if isinstance(r, dict) and isinstance(r.get("share"), float)]
    finite = [s for s in shares if s < float("inf")]
    return [Metric("bound_share", round(max(finite), 4))] if finite else []


# --- one node -----------------------------------------------------------------------------------------------------
def judge_node(measured: list[tuple[dict[str, Any], dict[str, Any] | None]], p: dict[str, Any]) -> Result:
    """Every rank's (data, GPU facts) pair (no facts on the CPU): its repeats, the reference and its peers."""
    names = {m["rank"]: gpu_label(gpu) if gpu else f"rank {m['rank']}" for m, gpu in measured}
    judged = sdc.judge([m for m, _ in measured], lambda r: names.get(r, f"rank {r}"))
    rows, wanted = [], []
    for m, gpu in measured:
        findings = judged.of(m["rank"])
        text = "; ".join(f.text for f in findings) or f"{len(judged.compared)} operations, the same bits every time"
        row = gpu_row(gpu, status_of(findings), text, share_used(m), "data") if gpu else None
        rows.append(row or Row(status_of(findings), text, name=names[m["rank"]], metrics=share_used(m), basis="data"))
        if findings:
            wanted.append((findings[0].case, (gpu or {}).get("uuid") or m.get("uuid"), None))
    devices = "GPUs" if any(gpu for _, gpu in measured) else "ranks"
    head = (
        f"{len(rows)} {devices}: {len(judged.compared)} operations x {p['repeats']} repeats, bit for bit the same on "
        "every repeat and every device of a kind, within their fp64 bounds"
    )
    again = ["gpudoctor check --only compute.sdc --level full"]
    result = from_rows(rows, said(judged, head), fix(WHY, lambda: reproductions(wanted, p) + again))
    return finished(result, judged)


@check(
    "compute.sdc",
    "Silent data corruption: same bits every repeat and on every GPU",
    level="standard",
    needs=("torch", "live"),
    timeout_s=300,
    settings={**SETTINGS, "repeats": 5, "reference_rows": 64, "cpu_ranks": 2},
    work=Work(12, {"cpu": 1.0, "cuda": 3.0}),
)
def silent_corruption(ctx: CheckContext) -> Result:
    """GEMMs (fp32, TF32, bf16, fp16), a reduction, a convolution and an elementwise chain on fixed inputs on every
    GPU, repeated: every repeat, and every GPU of one model and software, bit for bit the same; each output within its
    error bound of an fp64 CPU reference."""
    p = params(ctx, ctx.scaled(ctx.settings["repeats"], least=2), int(ctx.settings["reference_rows"]))
    data = ctx.launch(WORKER, p)
    if failed := ctx.failed(data):
        return failed
    measured = ctx.with_gpus(data) if ctx.device == "cuda" else [(m, None) for m in data]
    return judge_node(measured, p)


# --- every node ---------------------------------------------------------------------------------------------------
def judge_nodes(ranks: list[dict[str, Any]], node_of: dict[int, str], p: dict[str, Any]) -> Result:
    """Every rank of every node against the majority of its kind; a node with a rank that differs from it is named
    (and drained), a node among several that disagree with no majority is named but not drained."""
    judged = sdc.judge(ranks, lambda r: f"rank {r} on {node_of.get(r, '?')}")
    rows, wanted = [], []
    for node in sorted(set(node_of.values())):
        mine = [r for r in ranks if isinstance(r, dict) and node_of.get(r.get("rank")) == node]
        findings = [f for r in mine for f in judged.of(r["rank"])]
        said_of = (f"rank {f.rank}: {f.text}" for f in findings)
        text = "; ".join(said_of) or f"{len(mine)} ranks, the same bits as their peers"
        rows.append(Row(status_of(findings), text, node=node, basis="data"))
        uuids = {r["rank"]: r.get("uuid") for r in mine}
        wanted += [(f.case, uuids.get(f.rank), node) for f in findings]
    drained = [row.node for row in rows if row.status == Status.FAIL]
    head = f"{len(rows)} nodes: {len(judged.compared)} operations, the same bits on every GPU of a kind"
    result = from_rows(rows, said(judged, head), fix(WHY, lambda: drain(drained) + reproductions(wanted, p)))
    return finished(result, judged)


def drain(nodes: list[str | None]) -> list[str]:
    names = [word(n, "node") for n in nodes if n]
    return [DRAIN.format(nodes=",".join(names))] if names else []


@check(
    "cluster.sdc",
    "Silent data corruption: same bits on every node",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=300,
    settings={**SETTINGS, "cpu_ranks": 1},
    work=Work(13, {"cpu": 1.0, "cuda": 1.0}),
)
def silent_corruption_across(ctx: CheckContext) -> Result:
    """compute.sdc's operations once on every GPU of every node: each GPU's bits against the majority of the GPUs of
    its model and software on every node; a node whose bits differ is named."""
    p = params(ctx, 1, 0)
    outcome = ctx.run_across(WORKER, p)
    if failed := ctx.failed(outcome):
        return failed
    node_of = {r.rank: member.name for r in outcome.ranks if (member := outcome.node_of(r.rank))}
    return judge_nodes([r.data for r in outcome.ranks], node_of, p)
