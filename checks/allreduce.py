"""All-reduce bandwidth: an nccl-tests style sweep through torch.distributed, every result verified.

On GPUs this is NCCL; on CPU (or --device cpu) gloo runs the same code for real. algbw = bytes / time,
busbw = algbw * 2(n-1)/n (nccl-tests' definitions); the large-message busbw is judged against what
the detected topology should deliver.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.api import CheckContext, Metric, RankContext, Remediation, Result, Status, check, expect

MIB = 2**20
GPU_SIZES = [MIB * 4**k for k in range(6)]  # 1 MiB .. 1 GiB
CPU_SIZES = [64 * 1024 * 4**k for k in range(5)]  # 64 KiB .. 16 MiB


def bus_factor(world: int) -> float:
    """nccl-tests: an all-reduce moves 2(n-1)/n of the data over each rank's link."""
    return 2 * (world - 1) / world


def pattern(numel: int, rank: int, device: Any) -> Any:
    """Known, non-constant values per rank whose sum over any realistic world stays exact in float32
    (at most 61 x 4 x world < 2**24 for up to 68,000 ranks), so a wrong or misplaced sum shows, and whose
    division by the sum of factors is exact too."""
    import torch

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
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from gpudoctor.api import measure

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


def combine(per_rank: list[dict[str, Any]], world: int) -> list[dict[str, Any]]:
    """One row per size: the slowest rank's median (the collective ends when the last rank does)."""
    rows = []
    for i, first in enumerate(per_rank[0]["rows"]):
        size = first["bytes"]
        row = {"bytes": size, "wrong": sum(r["rows"][i]["wrong"] for r in per_rank)}
        for mode in ("in_place", "out_of_place"):
            if first[mode] is None:
                continue
            seconds = max(r["rows"][i][mode]["median_s"] for r in per_rank)
            algbw = size / seconds / 1e9
            row[mode] = {"time_us": seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(world)}
        rows.append(row)
    return rows


def size_metrics(row: dict[str, Any]) -> list[Metric]:
    """One message size's figures, the size and the operation as labels (one series each)."""
    metrics = []
    for op in ("in_place", "out_of_place"):
        if row.get(op):
            labels = {"bytes": row["bytes"], "op": op}
            metrics.append(Metric("busbw", round(row[op]["busbw_gbps"], 3), "GB/s", labels=labels))
            metrics.append(Metric("algbw", round(row[op]["algbw_gbps"], 3), "GB/s", labels=labels))
            metrics.append(Metric("time", round(row[op]["time_us"], 1), "us", labels=labels))
    return metrics


def nccl_metrics(nccl: dict[str, Any]) -> list[Metric]:
    """NCCL's version, and each NCCL_* variable set (container images set NCCL_VERSION, users NCCL_DEBUG...)
    as one `nccl_env` series with the variable as a label: metric names stay lower snake case and stable."""
    return [
        Metric(name, value) if name == "nccl_version" else Metric("nccl_env", value, labels={"variable": name})
        for name, value in nccl.items()
    ]


def judge(
    rows: list[dict[str, Any]],
    world: int,
    device: str,
    expected: expect.Expectation | None,
    floor: float,
    nccl: dict[str, Any],
) -> Result:
    """Verified first; then the largest message's in-place busbw against the expectation."""
    wrong = sum(r["wrong"] for r in rows)
    metrics = [m for r in rows[:-1] for m in size_metrics(r)] + nccl_metrics(nccl)
    if wrong:
        return Result(
            Status.FAIL,
            f"all-reduce returned {wrong} wrong values: the interconnect or a GPU corrupts data",
            metrics=metrics + size_metrics(rows[-1]),
            remediation=Remediation(
                "Wrong sums with no error reported point at broken P2P (IOMMU/ACS), a failing link or GPU memory.",
                [
                    "sudo dmesg | grep -iE 'xid|iommu|dmar'",
                    "NCCL_P2P_DISABLE=1 gpudoctor check --only allreduce  # if this passes, P2P is the culprit",
                ],
            ),
        )
    if world < 2:  # one rank's all-reduce is a local copy or nothing: its "bandwidth" is no figure at all
        return Result(
            Status.PASS,
            f"1 rank ({'NCCL' if device == 'cuda' else 'gloo'}): every size verified; bandwidth not measured "
            "(no peer to exchange with)",
            metrics=nccl_metrics(nccl),
        )
    largest = rows[-1]["in_place"]
    size = f"{rows[-1]['bytes'] // MIB} MiB" if rows[-1]["bytes"] >= MIB else f"{rows[-1]['bytes'] // 1024} KiB"
    text = f"{world} ranks ({'NCCL' if device == 'cuda' else 'gloo'}), busbw {largest['busbw_gbps']:.2f} GB/s at {size}"
    status, metric = expect.verdict("busbw", largest["busbw_gbps"], "GB/s", expected, floor)
    metric.baseline = True
    metric.labels = {"bytes": rows[-1]["bytes"], "op": "in_place"}
    metrics[:0] = [metric, *size_metrics(rows[-1])[1:]]
    if expected is None:
        if device != "cuda":
            return Result(
                Status.PASS,
                f"{text}; verified; gloo over loopback measures "
                "the host, so bandwidth is judged only against a saved baseline",
                metrics=metrics,
            )
        return Result(
            Status.WARN,
            f"{text}; no expectation for this topology (unknown link): measured and verified only",
            metrics=metrics,
        )
    if status != Status.PASS:
        return Result(
            status,
            f"{text}, {expect.shortfall(metric)}",
            metrics=metrics,
            remediation=Remediation(
                "Low bus bandwidth means a degraded link, disabled P2P or NVLink, or a wrong NCCL transport.",
                [
                    "nvidia-smi topo -m",
                    "nvidia-smi nvlink -s",
                    "NCCL_DEBUG=INFO gpudoctor check --only allreduce 2>&1 | grep -i 'via'",
                ],
            ),
        )
    return Result(
        status, f"{text} (pass >= {metric.expected:.4g}, healthy {metric.reference:.4g} GB/s)", metrics=metrics
    )


@check(
    "allreduce.bandwidth",
    "All-reduce bandwidth (NCCL, gloo on CPU)",
    level="standard",
    needs=("torch", "live"),
    uses=("nvml", "system"),
    timeout_s=180,
    settings={
        "min_busbw_gbps": 0.0,
        "floor": 0.75,
        "baseline_tolerance": 0.9,
        "cpu_ranks": 2,
        "warmup": 5,
        "iters": 20,
    },
)
def allreduce(ctx: CheckContext) -> Result:
    """Size sweep of all-reduce across every GPU, verified; large-message busbw against the topology."""
    params = {**ctx.work(), "sizes": GPU_SIZES if ctx.device == "cuda" else CPU_SIZES, "out_of_place": True}
    per_rank = ctx.launch("gpudoctor.checks.allreduce:worker", params)
    if isinstance(per_rank, Result):
        return per_rank
    rows = combine(per_rank, ctx.world_size)
    baseline = ctx.baseline("busbw")
    expected = (
        baseline
        if ctx.device != "cuda"
        else expect.pick(
            baseline,
            expect.from_setting(ctx.settings["min_busbw_gbps"], "min_busbw_gbps"),
            expect.allreduce_expectation(ctx.used_gpus, ctx.nvml.get("topology", {}), ctx.env),
        )
    )
    nccl = {"nccl_version": (ctx.torch.get("nccl") or {}).get("version")}
    nccl.update({k: v for k, v in ctx.env.items() if k.startswith("NCCL_")})
    return judge(rows, ctx.world_size, ctx.device, expected, ctx.settings["floor"], nccl)
