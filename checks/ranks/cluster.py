"""On every rank of every node in cluster.allreduce: the all-reduce sweep over the whole world, then the
all-reduce within pairs of nodes, every GPU of both."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from gpudoctor.api import RankContext, measure
from gpudoctor.judging import pairs
from gpudoctor.judging.allreduce import bus_factor

from .allreduce import pattern, rank_factor
from .allreduce import worker as allreduce_worker
from .links import capture, used


def across_worker(ctx: RankContext) -> dict[str, Any]:
    """Every rank of every node: the all-reduce sweep over the whole world (not in a re-test), then the
    all-reduce within pairs of nodes, every GPU of both, round after round (see pair_allreduce); and what carried
    them (NCCL's log of its choices, or gloo's interface: links.used)."""
    folder = capture(ctx)
    rows = allreduce_worker(ctx)["rows"] if not ctx.params["rounds"] else []
    return {"rank": ctx.rank, "rows": rows, **pair_allreduce(ctx), "transport": used(ctx, folder)}


def pair_allreduce(ctx: RankContext) -> dict[str, Any]:
    """The nodes in pairs (their nearest ring neighbours, or rank 0's re-test pairs), each pair's ranks in a
    group of their own, each group's all-reduce timed in two passes and verified; the first rank of each node
    records its pair's busbw (its slowest rank's time) as a transfer both ways."""
    spans = {int(node): span for node, span in ctx.params["spans"].items()}
    me = next(node for node, (first, size) in spans.items() if first <= ctx.rank < first + size)
    present = sorted(spans, key=lambda n: spans[n][0])
    if ctx.params["rounds"]:
        rounds = [[(a, b) for a, b in r if a in spans and b in spans] for r in ctx.params["rounds"]]
    else:
        rounds = pairs.neighbour_rounds(present) if len(present) > 2 else []
    members = [[[*_ranks(spans[a]), *_ranks(spans[b])] for a, b in r] for r in rounds]
    groups = [dist.new_subgroups_by_enumeration(m)[0] if m else None for m in members]
    found: dict[tuple[int, int], list[float]] = {}
    wrong: dict[int, int] = {}
    for number in range(ctx.params["passes"]):
        for index, (round_pairs, group) in enumerate(zip(rounds, groups, strict=True)):
            ctx.phase(f"pairs pass {number} round {index}")
            dist.barrier()
            pair = next(((a, b) for a, b in round_pairs if me in (a, b)), None)
            if pair is not None and group is not None:
                _pair_pass(ctx, group, pair, me, spans, found, wrong)
    dist.barrier()
    size = ctx.params["pair_bytes"]
    return {
        "node": me,
        "sent": [{"src": s, "dst": d, "bytes": size, "passes": v, "gbps": max(v)} for (s, d), v in found.items()],
        "wrong": wrong,
        "sizes": {f"{min(a, b)}-{max(a, b)}": size for r in rounds for a, b in r},
    }


def _ranks(span: list[int]) -> list[int]:
    return list(range(span[0], span[0] + span[1]))


def _pair_pass(
    ctx: RankContext,
    group: Any,
    pair: tuple[int, int],
    me: int,
    spans: dict[int, list[int]],
    found: dict[tuple[int, int], list[float]],
    wrong: dict[int, int],
) -> None:
    """One pair's all-reduce: timed, verified, the slowest rank's median time as the pair's."""

    ranks = [*_ranks(spans[pair[0]]), *_ranks(spans[pair[1]])]
    numel = ctx.params["pair_bytes"] // 4
    base = pattern(numel, 0, ctx.device)
    total = sum(rank_factor(r) for r in ranks)
    buffer = torch.empty_like(base)
    bad = torch.zeros((), dtype=torch.int64, device=ctx.device)

    def refill() -> None:
        torch.mul(base, rank_factor(ctx.rank), out=buffer)

    def verify() -> None:
        bad.add_((buffer.div_(total) != base).sum())

    times = measure.time_repeats(
        lambda: dist.all_reduce(buffer, group=group),
        ctx.device,
        ctx.params["warmup"],
        ctx.params["pair_iters"],
        prepare=refill,
        check=verify,
    )
    slowest = torch.tensor([measure.summary(times)["median_s"], float(bad)], device=ctx.device, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    if ctx.rank == spans[me][0]:
        other = pair[1] if me == pair[0] else pair[0]
        busbw = numel * 4 / float(slowest[0]) / 1e9 * bus_factor(len(ranks))
        found.setdefault((me, other), []).append(busbw)
        if slowest[1]:
            wrong[other] = wrong.get(other, 0) + int(slowest[1])
