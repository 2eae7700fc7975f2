"""gpudoctor's own checks, one module per area, found by walking this package (gpudoctor.registry.discover).

ORDER is the order of their areas in a report: the facts first (quick), then the workloads from quick to slow.
A module not named here comes after them, in name order. The registry and the engine name no check: a new
area is a module here, and a name in ORDER where it should not come last.
"""

ORDER = (
    "driver",
    "torch_build",
    "system",
    "network",
    "health",
    "allreduce",
    "p2p",
    "bandwidth",
    "compute",
    "sdc",
    "memtest",
    "ddp",
    "load",
    "links",
    "cluster",
    "benchmarks",
    "nvbandwidth",
    "dcgm",
)
