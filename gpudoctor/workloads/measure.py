"""Timing as the standard tools do it: warm up, time each repetition (device events on GPU), take the median.

Runs inside workload processes only; torch is imported by the caller.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def time_repeats(
    fn: Callable[[], Any],
    device: Any,
    warmup: int,
    iters: int,
    prepare: Callable[[], Any] = lambda: None,
    check: Callable[[], Any] = lambda: None,
) -> list[float]:
    """Seconds per call of `fn` after `warmup` untimed calls; CUDA events on a GPU, a monotonic clock on CPU.

    `prepare` runs before and `check` after every call (warm-up ones too), outside the timed region: a
    refill that keeps the input known, a comparison that verifies each result. The whole loop runs with
    `device` current, so the events time the stream `fn` runs on (another GPU's events would time an idle
    stream).
    """
    with on_device(device):
        for _ in range(warmup):
            prepare()
            fn()
            check()
        sync(device)
        marks = []
        for _ in range(iters):
            prepare()
            start = mark(device)
            fn()
            marks.append((start, mark(device)))
            check()
        return seconds_between(marks, device)


@dataclass
class Checked:
    """Timed copies whose data was checked: the timings, how many copies were checked (warm-up ones too) and
    how many of them were wrong."""

    times: list[float]
    checked: int
    wrong: int


def checked_repeats(
    fn: Callable[[], Any],
    device: Any,
    warmup: int,
    iters: int,
    clear: Callable[[], Any],
    verify: Callable[[], bool],
) -> Checked:
    """`time_repeats` of a copy whose destination is cleared before every call and whose data is checked after
    every call, outside the timed region. Checking only the last copy misses a link that corrupts some."""
    right: list[bool] = []
    times = time_repeats(fn, device, warmup, iters, prepare=clear, check=lambda: right.append(verify()))
    return Checked(times, len(right), right.count(False))


def alternating_repeats(
    copy: Callable[[int], Any], device: Any, warmup: int, iters: int, verify: Callable[[int], bool]
) -> Checked:
    """`time_repeats` of a copy into a destination nothing else writes: call n copies source n % 2 (two known
    patterns), and every call's data is checked after it, outside the timed region, so a copy that did nothing
    leaves the other pattern there and is caught without clearing the destination first. For a destination in
    pinned host memory: the CPU writes nothing there between copies, as nvbandwidth writes its host buffers once
    before timing (a CPU write leaves dirty cache lines that the GPU's DMA writes must have snooped away)."""
    calls = 0
    right: list[bool] = []

    def call() -> None:
        nonlocal calls
        copy(calls % 2)
        calls += 1

    times = time_repeats(call, device, warmup, iters, check=lambda: right.append(verify((calls - 1) % 2)))
    return Checked(times, len(right), right.count(False))


def on_device(device: Any) -> Any:
    """`device` as the current CUDA device for the block (no-op on CPU)."""
    import contextlib

    import torch

    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def mark(device: Any) -> Any:
    """A point in time on `device`'s current stream: a recorded CUDA event on a GPU, the monotonic clock on CPU."""
    import torch

    if device.type == "cuda":
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(device))
        return event
    return time.perf_counter()


def seconds_between(marks: list[tuple[Any, Any]], device: Any) -> list[float]:
    """Seconds from each start mark to its end mark (waits for the GPU to reach the last one)."""
    sync(device)
    if device.type == "cuda":
        return [start.elapsed_time(end) / 1000.0 for start, end in marks]
    return [end - start for start, end in marks]


def sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cuda_devices() -> int:
    """How many devices CUDA really gives this process. Before CUDA is initialised, torch.cuda.device_count()
    counts through NVML: every parent GPU of a MIG node (CUDA enumerates one MIG slice), so a loop over it
    runs past the devices there are. Initialised, torch asks the CUDA runtime."""
    import torch

    if not torch.cuda.is_available():
        return 0
    torch.cuda.init()
    return torch.cuda.device_count()


def summary(times: list[float]) -> dict[str, float]:
    """Median and spread of repeated timings, in seconds."""
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def checksum(tensor: Any) -> list[int]:
    """Two integer checksums of a tensor's bits: plain and position-weighted, so swapped words show too."""
    import torch

    words = tensor.contiguous().view(-1).view(torch.int32).to(torch.int64)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) % 65521 + 1
    return [int(words.sum()), int((words * weights).sum())]
