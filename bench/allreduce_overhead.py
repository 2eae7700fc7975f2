"""gpudoctor's all-reduce figures against a minimal hand-written torch.distributed loop, in one run.

Both time the same sizes on the same world size and backend (NCCL where torch sees GPUs, gloo otherwise),
median of per-iteration times after warm-up; the ratio is gpudoctor busbw / raw busbw (goal >= 0.95:
the tool measures the hardware, not itself). Runs alternate ABBA so drift and order hit both alike.

    python bench/allreduce_overhead.py [--ranks 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gpudoctor.judging.allreduce import CPU_SIZES, GPU_SIZES, bus_factor, combine
from gpudoctor.model import Status
from gpudoctor.workloads.launch import free_port, launch


def raw_rank(rank: int, world: int, port: int, backend: str, sizes: list[int], iters: int, queue: object) -> None:
    """The loop anyone would write: init, warm up, time each all_reduce, take the median."""
    import time

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))  # the threads gpudoctor's launcher gives a rank
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=120))
    device = torch.device("cuda", rank % max(1, torch.cuda.device_count())) if backend == "nccl" else None
    medians = []
    for size in sizes:
        buffer = torch.rand(size // 4, device=device) / world
        for _ in range(5):
            dist.all_reduce(buffer)
        times = []
        for _ in range(iters):
            if device is not None:
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            dist.all_reduce(buffer)
            if device is not None:
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - started)
        medians.append(statistics.median(times))
    if rank == 0:
        queue.put(medians)
    dist.destroy_process_group()


def raw(world: int, backend: str, sizes: list[int], iters: int) -> list[float]:
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(
        raw_rank, args=(world, free_port(), backend, sizes, iters, queue), nprocs=world, start_method="spawn"
    )
    return queue.get()


def tool(world: int, backend: str, sizes: list[int], iters: int) -> list[float]:
    params = {"sizes": sizes, "warmup": 5, "iters": iters, "out_of_place": False}
    outcome = launch("gpudoctor.checks.ranks.allreduce:worker", world, backend, params, 600)
    if outcome.status != Status.PASS:
        sys.exit(f"gpudoctor run failed: {outcome.message}")
    return [row["bytes"] / row["in_place"]["algbw_gbps"] / 1e9 for row in combine(outcome.data, world)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=torch.cuda.device_count() or 2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    sizes = GPU_SIZES if backend == "nccl" else CPU_SIZES
    tool_runs, raw_runs = [], []
    for round_ in range(args.rounds):  # ABBA order: whatever runs second in a pair gains nothing
        if round_ % 2:
            raw_runs.append(raw(args.ranks, backend, sizes, args.iters))
        tool_runs.append(tool(args.ranks, backend, sizes, args.iters))
        if not round_ % 2:
            raw_runs.append(raw(args.ranks, backend, sizes, args.iters))
    factor = bus_factor(args.ranks)
    print(f"{args.ranks} ranks, {backend}, {args.rounds} alternating rounds, median of rounds")
    print(f"{'size':>10} {'gpudoctor busbw':>16} {'raw busbw':>10} {'ratio':>6}")
    ratios = []
    for i, size in enumerate(sizes):
        mine = statistics.median(run[i] for run in tool_runs)
        theirs = statistics.median(run[i] for run in raw_runs)
        ratio = theirs / mine
        ratios.append(ratio)
        print(
            f"{size // 1024:>7} KiB {size / mine / 1e9 * factor:>13.3f} GB/s {size / theirs / 1e9 * factor:>6.3f} "
            f"{ratio:>6.3f}"
        )
    print(f"largest-message ratio {ratios[-1]:.3f}, median ratio {statistics.median(ratios):.3f} (goal >= 0.95)")


if __name__ == "__main__":
    main()
