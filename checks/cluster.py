"""Cluster checks: every node's own verdict and figures, software skew, and all-reduce and DDP across the
whole world with each node's own share judged. They run only in cluster mode (one gpudoctor per node under
torchrun or srun); rank 0 judges, every other node reports its own part. The links between nodes are
checks/links.py; judging by pairs of nodes is gpudoctor/judging/pairs.py; the ranks' code is
checks/ranks/cluster.py.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from gpudoctor.api import (
    Remediation,
    Result,
    Row,
    Status,
    Unsafe,
    Work,
    check,
    compare,
    expect,
    from_rows,
    nics,
    references,
    word,
)

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext
from gpudoctor.judging import allreduce, ddp, pairs, sockets

FRACTIONS = {"straggler_fraction": 0.8, "fail_fraction": 0.5}
PRIOR_SIGMA = 0.1  # a benchmark's spread from run to run on one node, where too few nodes measure it
# The nodes' own figures get no re-test (each node measured them alone, at its own time): the chance that
# noise names a healthy one is set lower than a re-tested judgement's.
ONE_SHOT_RATE = 0.002
PAIR_SIZES = {"cuda": 256 * 2**20, "cpu": 4 * 2**20}  # the message of each node pair's all-reduce
ACROSS_WORKER = "gpudoctor.checks.ranks.cluster:across_worker"
DRAIN_WHY = (
    "Take the failed nodes out of the scheduler until they are fixed; gpudoctor tags the reason so a later "
    "clean run can resume exactly these."
)
DRAIN_COMMAND = 'scontrol update NodeName={nodes} State=DRAIN Reason="gpudoctor: node checks"'  # nodes: words


def fractions_of(settings: dict[str, Any]) -> compare.Fractions:
    return compare.Fractions(settings["straggler_fraction"], settings["fail_fraction"])


# --- pure judges -----------------------------------------------------------------------------------------
def judge_nodes(nodes: list[dict[str, Any]]) -> Result:
    """Each node's own verdict: lost or never joined, failed (its failing checks), warned, or fine."""
    rows = []
    for node in nodes:
        if node.get("lost"):
            rows.append(Row(Status.FAIL, f"lost: {node['lost']}", node=node["name"]))
        elif node["exit_code"]:
            failing = ", ".join(node["failing"]) or "its own checks"
            rows.append(Row(Status.FAIL, f"failed {failing}", node=node["name"]))
        elif node["status"] == Status.WARN.value:
            rows.append(Row(Status.WARN, f"warnings in {', '.join(node['warning'])}", node=node["name"]))
        else:
            rows.append(Row(Status.PASS, "all checks passed", node=node["name"]))
    result = from_rows(rows, f"all {len(rows)} nodes passed their own checks")
    bad = [r.node for r in rows if r.status.is_failure]
    if bad:
        result.remediation = drain_fix(bad)
    return result


def drain_fix(bad: list[str]) -> Remediation:
    """Drain the failed nodes: the command holds only names a node can have (a word of kind `node`, never ALL);
    any other name in the roster ("rank 1", a node that never said who it is) is said in the why, not drained."""
    names, refused = [], []
    for name in bad:
        try:
            names.append(word(name, "node"))
        except Unsafe:
            refused.append(repr(name))
    why = DRAIN_WHY + (f" Not in the command, being no node's name: {', '.join(refused)}." if refused else "")
    return Remediation(why, [DRAIN_COMMAND.format(nodes=",".join(names))] if names else [])


def judge_figure(
    figure: str, values: dict[str, float], unit: str, fractions: compare.Fractions, allow: compare.Allowance
) -> tuple[list[Row], compare.Reference]:
    """One figure of every node against the median of the nodes' figures (higher is better)."""
    reference = compare.median_reference(list(values.values()), "per-node figures")
    rows = []
    for node, value in sorted(values.items()):
        status, ratio = compare.judge(value, reference, allow, fractions)
        text = f"{figure} {value:.4g}{' ' + unit if unit else ''}, {ratio:.2f}x the median {reference.value:.4g}"
        metric = compare.figure(figure.split(":")[-1], value, unit, reference, allow, {"figure": figure})
        rows.append(Row(status, text, node=node, metrics=[metric], basis="figure"))
    return rows, reference


def judge_stragglers(figures: dict[str, dict[str, float]], fractions: compare.Fractions) -> Result:
    """Every figure the nodes judged themselves (figure -> node -> value), each against the median of the
    nodes' with the noise allowance; a node's row is its worst figure. The spread is pooled over every figure
    (each node's distance from its figure's median), so eight nodes with eight figures measure it from 64."""
    judged = {figure: by_node for figure, by_node in figures.items() if len(by_node) >= 2}
    if not judged:
        return Result(Status.PASS, "no figure judged on two or more nodes to compare", aspect="stragglers")
    tests = sum(len(by_node) for by_node in judged.values())
    sigma, source = pooled_spread(judged)
    worst_row: dict[str, Row] = {}
    notes = []
    for figure, by_node in sorted(judged.items()):
        rows, reference = judge_figure(figure, by_node, "", fractions, _one_shot(sigma, tests, source))
        notes.append(f"{figure}: median {reference.value:.4g}")
        for row in rows:
            kept = worst_row.get(row.node)
            if kept is None or _ratio(row) < _ratio(kept):
                worst_row[row.node] = row
    rows = [worst_row[n] for n in sorted(worst_row)]
    head = "; ".join(notes) + f"; {_one_shot(sigma, tests, source).describe()}"
    result = from_rows(rows, f"no node below {fractions.straggler:g}x the median beyond noise ({head})")
    if result.status != Status.PASS:
        result.summary += f" ({head})"
    result.aspect = "stragglers"
    return result


def _one_shot(sigma: float, tests: int, source: str) -> compare.Allowance:
    return compare.allowance(sigma, tests, source, ONE_SHOT_RATE)


def pooled_spread(figures: dict[str, dict[str, float]]) -> tuple[float, str]:
    """The log-spread of one figure across nodes, pooled over every figure: each node's distance from the
    median of the other nodes' (from its own median it would look closer than it is). With fewer than three
    nodes to a figure, or five values in all, a benchmark's usual spread from run to run instead."""
    deviations = []
    for by_node in figures.values():
        logs = [math.log(v) for v in by_node.values() if v > 0]
        deviations += [x - statistics.median(logs[:i] + logs[i + 1 :]) for i, x in enumerate(logs)]
    if len(deviations) < compare.MIN_ACROSS or len(max(figures.values(), key=len)) < 3:
        return PRIOR_SIGMA, f"a benchmark's usual spread ({PRIOR_SIGMA:g})"
    sigma = compare.robust_spread(deviations)
    return max(sigma, PRIOR_SIGMA / 2), f"across {len(deviations)} per-node figures (each against the others')"


def _ratio(row: Row) -> float:
    metric = row.metrics[0]
    return metric.value / metric.expected if metric.expected else 1.0


def judge_skew(software: dict[str, dict[str, Any]]) -> Result:
    """Versions and NCCL_*/GLOO_*/TORCH_* settings compared across nodes: every difference is a warning that
    names the setting and which nodes have which value."""
    findings = []
    for kind in ("versions", "settings"):
        keys = sorted({k for s in software.values() for k in s.get(kind, {})})
        for key in keys:
            values: dict[str, list[str]] = {}
            for node, facts in sorted(software.items()):
                values.setdefault(str(facts.get(kind, {}).get(key, "unset")), []).append(node)
            if len(values) > 1:
                spread = "; ".join(f"{v} on {', '.join(nodes)}" for v, nodes in sorted(values.items()))
                findings.append(f"{key}: {spread}")
    if not findings:
        return Result(Status.PASS, f"same versions and distributed settings on all {len(software)} nodes")
    return Result(
        Status.WARN,
        " | ".join(findings),
        remediation=Remediation(
            "Different driver, CUDA, NCCL or torch builds, or different NCCL settings, make collectives fail or "
            "run at the slowest node's pace; install and configure every node from one image.",
            ["gpudoctor check --only cluster.skew --json  # every node's values"],
        ),
    )


# --- checks ----------------------------------------------------------------------------------------------
@check(
    "cluster.nodes",
    "Every node's own checks",
    needs=("cluster",),
    settings={**FRACTIONS, "join_timeout": 120.0, "report_timeout": 0.0},
)
def nodes(ctx: CheckContext) -> list[Result] | Result:
    """Rank 0: each node's verdict (lost ones included), then nodes whose own judged figures straggle."""
    if not ctx.cluster.leader:
        return Result(Status.SKIP, f"judged by rank 0 ({ctx.cluster.leader_name})")
    reports = ctx.cluster.node_summaries()
    figures: dict[str, dict[str, float]] = {}
    for node in reports:
        for figure, value in node.get("figures", {}).items():
            figures.setdefault(figure, {})[node["name"]] = value
    return [judge_nodes(reports), judge_stragglers(figures, fractions_of(ctx.settings))]


@check("cluster.skew", "Same software on every node", needs=("cluster",))
def skew(ctx: CheckContext) -> Result:
    """Driver, CUDA, torch, NCCL, cuDNN, torchvision and every NCCL_*/GLOO_*/TORCH_* setting, node by node."""
    if not ctx.cluster.leader:
        return Result(Status.SKIP, f"judged by rank 0 ({ctx.cluster.leader_name})")
    return judge_skew({n["name"]: n["software"] for n in ctx.cluster.node_summaries() if n.get("software")})


def network_expectation(summaries: list[dict[str, Any]]) -> expect.Expectation | None:
    """What an all-reduce across these nodes reaches when healthy: over the NVLink of one multi-node domain
    (an NVL72 rack) the published figure for the model; else the slowest node's NICs that NCCL uses (GPU-near,
    one fabric, not storage or front-end: nics.nccl_nics), at the published figure per 400 Gb/s NIC."""
    nets = [node.get("network") or {} for node in summaries]
    if not nets:
        return None
    domains = {net.get("nvlink_domain") for net in nets}
    if len(domains) == 1 and None not in domains:
        return nvlink_domain_expectation(nets)
    per_node = [
        (sum(n["gbits"] for n in net.get("nics", [])), node["name"], net)
        for node, net in zip(summaries, nets, strict=True)
    ]
    _, name, net = min(per_node, key=lambda item: item[0])
    return nics.network_expectation(net.get("nics", []), net.get("left_out") or [], name)


def nvlink_domain_expectation(nets: list[dict[str, Any]]) -> expect.Expectation | None:
    """Nodes whose GPUs share one NVLink domain all-reduce over NVLink, not the network."""
    found = references.healthy("allreduce_busbw", nets[0].get("model"), ("link",), link="mnnvl")
    if found is None:
        return None
    gpus = sum(int(net.get("gpus") or 0) for net in nets)
    return expect.Expectation(found.value, f"{gpus} GPUs in one multi-node NVLink domain; {found.cite()}")


@check(
    "cluster.allreduce",
    "All-reduce across every node",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=300,
    settings={
        **FRACTIONS,
        "floor": 0.75,
        "baseline_tolerance": 0.9,
        "cpu_ranks": 1,
        "warmup": 3,
        "iters": 10,
        "pair_bytes": 0,
    },
    work=Work(10, {"cpu": 4.0, "cuda": 6.0}),
)
def allreduce_across(ctx: CheckContext) -> list[Result] | Result:
    """Every GPU of every node in one all-reduce sweep, verified, its busbw against the slowest node's
    network; then each node's own share: the nodes in pairs (every GPU of both), each pair's all-reduce,
    suspects re-tested against a good node, as cluster.links does with one rank per node."""
    sizes = allreduce.GPU_SIZES if ctx.device == "cuda" else allreduce.CPU_SIZES
    work = ctx.work()
    params = {
        **work,
        "sizes": sizes,
        "out_of_place": False,
        "rounds": None,
        "pair_sizes": None,
        "pair_bytes": ctx.settings["pair_bytes"] or PAIR_SIZES[ctx.device],
        "pair_iters": max(1, work["iters"] // pairs.PASSES),
        "passes": pairs.PASSES,
    }
    first = ctx.run_across(ACROSS_WORKER, params, timeout_s=ctx.timeout_s * pairs.FIRST_SHARE)
    if failed := ctx.failed(first):
        return failed
    world = len(first.ranks)
    rows = allreduce.combine([r.data for r in first.ranks], world)
    expected = expect.pick(ctx.baseline("busbw"), network_expectation(ctx.cluster.node_summaries()))
    sweep = allreduce.judge(rows, world, ctx.device, expected, ctx.settings["floor"], {})
    sweep.summary = f"{len(first.members)} nodes, {sweep.summary}"
    if len(first.members) < 3:
        note = "two nodes: the whole sweep is their pair, and which node is slow cannot be told"
        return sockets.with_transport([sweep, Result(Status.SKIP, note, aspect="per-node")], first)

    def again(plan: dict[str, Any]) -> Any:
        return ctx.run_across(
            ACROSS_WORKER, params, plan_params=plan, timeout_s=ctx.timeout_s * (1 - pairs.FIRST_SHARE)
        )

    named = pairs.confirmed_pairs(
        first,
        again,
        fractions_of(ctx.settings),
        (None, 0.0),
        "all-reduces between pairs of nodes (every GPU of both)",
        ("node_pair_busbw", "pair_busbw"),
    )
    named_results = named if isinstance(named, list) else [named]
    for result in named_results:
        result.aspect = f"per-node-{result.aspect}" if result.aspect else "per-node"
    return sockets.with_transport([sweep, *named_results], first)


@check(
    "cluster.ddp",
    "DDP training across every node",
    level="standard",
    needs=("cluster", "live", "torch"),
    timeout_s=600,
    settings={**{k: v for k, v in ddp.SETTINGS.items() if k != "scaling"}, **FRACTIONS, "cpu_ranks": 1},
    work=Work(11, {"cpu": 11.0, "cuda": 10.0}, least=0.5),
)
def ddp_across(ctx: CheckContext) -> list[Result] | Result:
    """The reference DDP run on every GPU of every node: loss falls, replicas identical, gradient right,
    throughput against the GPU's reference; then each node's own compute speed (steps without gradient
    synchronisation, every node at once) against the other nodes'."""
    capabilities = [tuple(g["compute_capability"]) for g in ctx.used_gpus if g.get("compute_capability")]
    p = {**ddp.resolve(ctx.settings, ctx.device, capabilities, ctx.work_factor), "local_steps": ddp.LOCAL_STEPS}
    outcome = ctx.run_across("gpudoctor.checks.ranks.ddp:worker", p)
    if failed := ctx.failed(outcome):
        return failed
    ranks = [r.data for r in outcome.ranks]
    results = ddp.judge(ranks, p, ctx.device, ctx.baseline("images_per_s_per_gpu"), ctx.settings)
    if any(r.get("oom") for r in ranks):
        return results
    return [*results, judge_compute(outcome, p["batch_size"], fractions_of(ctx.settings))]


def judge_compute(outcome: Any, batch: int, fractions: compare.Fractions) -> Result:
    """Each node's images per second per GPU without synchronisation (its slowest GPU's, the better of two
    passes), against the median of the nodes'; the allowance from the difference between the passes."""
    by_node: dict[str, list[list[list[float]]]] = {}
    for report in outcome.ranks:
        member = outcome.node_of(report.rank)
        by_node.setdefault(member.name, []).append(report.data["local_step_s"])
    passes = {
        node: tuple(batch / max(statistics.median(rank[k]) for rank in ranks) for k in range(2))
        for node, ranks in by_node.items()
    }
    if len(passes) < 2:
        return Result(Status.SKIP, "one node: nothing to compare its compute with", aspect="per-node")
    sigma = compare.sigma_between(list(passes.values()))
    allow = compare.allowance(sigma, len(passes), f"between the two passes of {len(passes)} nodes", ONE_SHOT_RATE)
    values = {node: max(pair) for node, pair in passes.items()}
    rows, reference = judge_figure("images_per_s_per_gpu", values, "img/s", fractions, allow)
    head = (
        f"{len(values)} nodes' compute without synchronisation, the better of two passes; median "
        f"{reference.value:.4g} img/s per GPU; {allow.describe()}"
    )
    result = from_rows(
        rows,
        head,
        Remediation(
            "A node that computes slower than its peers holds every synchronous step back: a throttled, "
            "degraded or differently configured GPU (or CPU).",
            ["gpudoctor check --level standard --only compute health", "nvidia-smi -q -d PERFORMANCE"],
        ),
    )
    if result.status != Status.PASS:
        result.summary += f" ({head})"
    result.aspect = "per-node"
    return result
