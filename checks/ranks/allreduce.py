"""On every rank of allreduce.bandwidth (and cluster.allreduce's sweep): an nccl-tests style sweep through
torch.distributed, every result verified."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from gpudoctor.api import RankContext, measure


def pattern(numel: int, rank: int, device: Any) -> Any:
    """Known, non-constant values per rank whose sum over any realistic world stays exact in float32
    (at most 61 x 4 x world < 2**24 for up to 68,000 ranks), so a wrong or misplaced sum shows, and whose
    division by the sum of factors is exact too."""
    return (torch.arange(numel, device=device, dtype=torch.float32) % 61 + 1) * rank_factor(rank)


def rank_factor(rank: int) -> int:
    return rank % 4 + 1


def worker(ctx: RankContext) -> dict[str, Any]:
    """Runs on every rank: every size, in place and out of place, timed and verified."""
    return {"rank": ctx.rank, "rows": [measure_size(ctx, size) for size in ctx.params["sizes"]]}


def measure_size(ctx: RankContext, size: int) -> dict[str, Any]:
    """Time all-reduce of `size` bytes in place and out of place, every result (warm-up ones too) verified
    outside the timed region. Every sum is base x F (F the sum of the ranks' factors): divided by F in place it
    must give `base` exactly. The in-place buffer is refilled from `base` before every call, so it never
    grows and a wrong value never carries over; verifying touches one array beside the result. Wrong values
    are counted on the device until the end, so checking costs no synchronisation."""
    p, numel = ctx.params, size // 4
    base = pattern(numel, 0, ctx.device)
    total = sum(rank_factor(r) for r in range(ctx.world_size))
    buffer = torch.empty_like(base)
    wrong = torch.zeros((), dtype=torch.int64, device=ctx.device)
    calls = [0]

    def verify(result: Any) -> None:
        """`result` is divided back to `base` in place and compared."""
        calls[0] += 1
        if calls[0] == p["warmup"] + 2 and ctx.fault_here("all_reduce", "corrupt"):
            result[numel // 2] += 1  # a test hook: one wrong value in one timed iteration
        wrong.add_((result.div_(total) != base).sum())

    def refill() -> None:
        torch.mul(base, rank_factor(ctx.rank), out=buffer)
        if ctx.backend == "gloo":
            # On the CPU the check before this ran on the host, synchronously: realign the ranks so one
            # rank's check is not timed as another's wait. On a GPU both queue on the stream alike.
            dist.barrier()

    def verify_in_place() -> None:
        verify(buffer)

    dist.barrier()
    ctx.phase(f"all_reduce {size // 1024} KiB in-place")
    inplace = measure.time_repeats(
        lambda: dist.all_reduce(buffer), ctx.device, p["warmup"], p["iters"], prepare=refill, check=verify_in_place
    )
    outplace = None
    if p["out_of_place"]:
        ctx.phase(f"all_reduce {size // 1024} KiB out-of-place")
        source = base * rank_factor(ctx.rank)
        results: list[Any] = []
        outplace = measure.time_repeats(
            lambda: results.append(funcol.wait_tensor(funcol.all_reduce(source, "sum", dist.group.WORLD))),
            ctx.device,
            p["warmup"],
            p["iters"],
            check=lambda: verify(results.pop()),
        )
    return {
        "bytes": size,
        "wrong": int(wrong),
        "in_place": measure.summary(inplace),
        "out_of_place": measure.summary(outplace) if outplace else None,
    }
