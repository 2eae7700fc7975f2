"""Host<->device copy bandwidth measured three ways in one run on one GPU, to show what bandwidth.host-device's
way of timing costs against a plain pinned copy.

On an H100 (2026-11-26) gpudoctor measured D2H at 50.7 GB/s where a plain pinned `copy_` of 1 GiB gave 55.1, and
H2D agreed (55.1 against 54.5); published copy-engine figures have D2H equal to H2D (8x H200 with nvbandwidth:
55.43 and 55.06). The difference between the two was that gpudoctor cleared the pinned destination on the CPU
before every D2H copy. This prints, per direction, the median GB/s and each way's ratio to the plain copy:

    plain        one pinned buffer, copy_ repeated, nothing else between copies (what nvbandwidth times)
    cpu-cleared  the destination zeroed by the CPU before each copy (gpudoctor's D2H before this change)
    alternating  two sources in turn, the destination never written by the CPU (gpudoctor's D2H now)

    python bench/host_copies.py [--gpu 0] [--mib 256] [--iters 20]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any


def timed(torch: Any, device: Any, copy: Callable[[int], Any], between: Callable[[], Any], iters: int) -> float:
    """The median seconds of `copy(n)` timed with CUDA events, `between()` run before each (outside the timing)."""
    times = []
    for n in range(iters + 3):
        between()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(torch.cuda.current_stream(device))
        copy(n)
        end.record(torch.cuda.current_stream(device))
        torch.cuda.synchronize(device)
        if n >= 3:
            times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    device = torch.device("cuda", args.gpu)
    numel = args.mib * 2**20 // 4
    host = [torch.randn(numel).pin_memory() for _ in range(2)]
    back = torch.empty(numel).pin_memory()
    with torch.cuda.device(device):
        dev = [h.to(device) for h in host]
        ways = {
            "D2H plain": (lambda n: back.copy_(dev[0], non_blocking=True), lambda: None),
            "D2H cpu-cleared": (lambda n: back.copy_(dev[0], non_blocking=True), back.zero_),
            "D2H alternating": (lambda n: back.copy_(dev[n % 2], non_blocking=True), lambda: None),
            "H2D plain": (lambda n: dev[0].copy_(host[0], non_blocking=True), lambda: None),
            "H2D gpu-cleared": (lambda n: dev[0].copy_(host[0], non_blocking=True), dev[0].zero_),
        }
        figures = {name: args.mib * 2**20 / timed(torch, device, *way, args.iters) / 1e9 for name, way in ways.items()}
    print(f"{torch.cuda.get_device_name(device)}, {args.mib} MiB, median of {args.iters} copies")
    for name, gbps in figures.items():
        plain = figures[f"{name.split()[0]} plain"]
        print(f"{name:18} {gbps:8.2f} GB/s  {gbps / plain:5.3f}x plain")


if __name__ == "__main__":
    main()
