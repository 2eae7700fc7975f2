"""In bandwidth.host-device's and bandwidth.device-memory's isolated process: copies on every GPU, timed and
their data checked."""

from __future__ import annotations

import os
from typing import Any

import torch

from gpudoctor.api import measure, progress


def measure_host_device(params: dict[str, Any]) -> dict[str, Any]:
    """One GPU at a time (so GPUs behind one switch do not share the figure), as nvbandwidth measures: pinned
    buffers of its own, first touched from the CPUs of the GPU's NUMA node (`numa_cpus`: cuda index -> CPUs)
    so the pages live there; every H2D and D2H copy verified against the source."""
    results = []
    everywhere = os.sched_getaffinity(0)
    for index in range(measure.cuda_devices()):
        progress("bandwidth", f"GPU {index} host<->device")
        cpus = set(params.get("numa_cpus", {}).get(str(index), [])) & everywhere
        os.sched_setaffinity(0, cpus or everywhere)
        try:
            results.append({"cuda_index": index, **host_copies(index, params), "numa_node": numa_node(params, index)})
        finally:
            os.sched_setaffinity(0, everywhere)
    return {"gpus": results}


def numa_node(params: dict[str, Any], index: int) -> int | None:
    return params.get("numa_nodes", {}).get(str(index))


def host_copies(index: int, params: dict[str, Any]) -> dict[str, Any]:
    """Pinned H2D and D2H on cuda:`index`, each copy's data checked. H2D's device destination is cleared (on the
    GPU) before each copy; D2H's pinned destination is never written by the CPU between timed copies, as in
    nvbandwidth and a plain copy_ (clearing it on the CPU before each copy, as gpudoctor did, measured D2H at
    50.7 GB/s on an H100 where a plain pinned copy gave 55.1; bench/host_copies.py measures the ways side by
    side): it is filled from two device sources in turn and checked against the one just copied
    (measure.alternating_repeats)."""
    numel = params["bytes"] // 4
    device = torch.device("cuda", index)
    host = [torch.randn(numel).pin_memory() for _ in range(2)]
    back = torch.empty(numel).pin_memory()
    expected = measure.checksum(host[0])
    runs = params["warmup"], params["iters"]
    with torch.cuda.device(index):
        dev = torch.empty(numel, device=device)
        h2d = measure.checked_repeats(
            lambda: dev.copy_(host[0], non_blocking=True),
            device,
            *runs,
            clear=dev.zero_,
            verify=lambda: measure.checksum(dev) == expected,
        )
        sources = [h.to(device) for h in host]
        d2h = measure.alternating_repeats(
            lambda n: back.copy_(sources[n], non_blocking=True),
            device,
            *runs,
            verify=lambda n: sync_equal(device, back, host[n]),
        )
    wrong = h2d.wrong + d2h.wrong
    return {
        "h2d_gbps": params["bytes"] / measure.summary(h2d.times)["median_s"] / 1e9,
        "d2h_gbps": params["bytes"] / measure.summary(d2h.times)["median_s"] / 1e9,
        "verified": wrong == 0,
        "copies_checked": h2d.checked + d2h.checked,
        "copies_wrong": wrong,
    }


def sync_equal(device: Any, got: Any, want: Any) -> bool:
    """A non-blocking copy into host memory is read only once the GPU has finished it."""
    torch.cuda.synchronize(device)
    return bool(torch.equal(got, want))


def measure_device_memory(params: dict[str, Any]) -> dict[str, Any]:
    """A large device-to-device copy per GPU; bytes read plus bytes written over the median time."""
    numel = params["bytes"] // 4
    results = []
    for index in range(measure.cuda_devices()):
        progress("bandwidth", f"GPU {index} device memory")
        device = torch.device("cuda", index)
        with torch.cuda.device(index):
            src = torch.randn(numel, device=device)
            dst = torch.empty_like(src)
            timing = measure.summary(
                measure.time_repeats(lambda s=src, d=dst: d.copy_(s), device, params["warmup"], params["iters"])
            )
            results.append(
                {
                    "cuda_index": index,
                    "gbps": 2 * params["bytes"] / timing["median_s"] / 1e9,
                    "verified": measure.checksum(src) == measure.checksum(dst),
                }
            )
            del src, dst
    return {"gpus": results}
