"""Timing as the standard tools do it: warm up, time each repetition (device events on GPU), take the median.

Runs inside workload processes only; torch is imported by the caller.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def time_repeats(fn: Callable[[], Any], device: Any, warmup: int, iters: int) -> list[float]:
    """Seconds per call of `fn` after `warmup` untimed calls; CUDA events on a GPU, a monotonic clock on CPU."""
    import torch

    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(device)
        return [start.elapsed_time(end) / 1000.0 for start, end in pairs]
    times = []
    for _ in range(iters):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def summary(times: list[float]) -> dict[str, float]:
    """Median and spread of repeated timings, in seconds."""
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def checksum(tensor: Any) -> list[int]:
    """Two integer checksums of a tensor's bits: plain and position-weighted, so swapped words show too."""
    import torch

    words = tensor.contiguous().view(-1).view(torch.int32).to(torch.int64)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) % 65521 + 1
    return [int(words.sum()), int((words * weights).sum())]
