"""The reference DDP run's throughput against a plain hand-written DDP loop of the same model and batch,
in one run, alternating ABBA so that neither side always runs first.
Ratio = gpudoctor img/s / plain img/s (goal >= 0.95: the checks add no drag).

    python bench/ddp_overhead.py [--ranks 2] [--rounds 3] [--steps 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torchvision
from torch.nn.parallel import DistributedDataParallel

from gpudoctor.judging import ddp
from gpudoctor.model import Status
from gpudoctor.workloads.launch import free_port, launch


def plain_rank(rank: int, world: int, port: int, p: dict, queue: object) -> None:
    """What a user writes: random data on the device, DDP, SGD, time each step after warm-up."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))  # the threads gpudoctor's launcher gives a rank
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=300))
    device = torch.device("cuda", rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    fmt = torch.channels_last if cuda else torch.contiguous_format
    model = torchvision.models.get_model(p["model"], weights=None, num_classes=10).to(device, memory_format=fmt)
    model = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images = torch.randn(p["batch_size"], 3, p["image_size"], p["image_size"], device=device).contiguous(
        memory_format=fmt
    )
    labels = torch.randint(0, 10, (p["batch_size"],), device=device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p["precision"])
    times = []
    for _ in range(p["steps"]):
        if cuda:
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    if rank == 0:
        queue.put(p["batch_size"] / statistics.median(times[p["warmup"] :]))
    dist.destroy_process_group()


def plain(world: int, p: dict) -> float:
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(plain_rank, args=(world, free_port(), p, queue), nprocs=world, start_method="spawn")
    return queue.get()


def tool(world: int, p: dict) -> float:
    outcome = launch(
        "gpudoctor.checks.ranks.ddp:worker", world, "nccl" if torch.cuda.is_available() else "gloo", p, 900
    )
    if outcome.status != Status.PASS:
        sys.exit(f"gpudoctor run failed: {outcome.message}")
    return p["batch_size"] / statistics.median(s for rank in outcome.data for s in rank["step_s"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=torch.cuda.device_count() or 2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=0)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    p = ddp.resolve({"steps": args.steps}, device)
    mine, theirs = [], []
    for round_ in range(args.rounds):  # ABBA order: whatever runs second in a pair gains nothing
        if round_ % 2:
            theirs.append(plain(args.ranks, p))
        mine.append(tool(args.ranks, p))
        if not round_ % 2:
            theirs.append(plain(args.ranks, p))
    print(f"{args.ranks} ranks, {ddp.describe(p, device)}, {args.rounds} alternating rounds")
    print(
        f"gpudoctor reference run  {statistics.median(mine):8.1f} img/s per rank  (rounds: "
        f"{', '.join(f'{x:.1f}' for x in mine)})"
    )
    print(
        f"plain DDP loop           {statistics.median(theirs):8.1f} img/s per rank  (rounds: "
        f"{', '.join(f'{x:.1f}' for x in theirs)})"
    )
    print(f"ratio {statistics.median(mine) / statistics.median(theirs):.3f} (goal >= 0.95)")


if __name__ == "__main__":
    main()
