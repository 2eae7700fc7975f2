"""Cluster mode's cost against the node count, measured in one run on namespace hosts (tests/helpers/netns.py).

For N = 2, 3, 4 hosts: the wall time of the quick cluster checks (join, every node's report to rank 0,
nodes and skew) and of the links test (ring neighbours, both ways, 16 MiB per transfer), each from the start
of the first gpudoctor to the end of the last; and the bytes of every node's report rank 0 reads. Needs root.

    python bench/cluster_scale.py [--nodes 2 3 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from helpers.netns import Hosts

GPUDOCTOR = str(Path(sys.executable).with_name("gpudoctor"))


def srun_env(hosts: Hosts, i: int) -> dict[str, str]:
    n = len(hosts.names)
    return {
        **os.environ,
        "GLOO_SOCKET_IFNAME": "eth0",
        "SLURM_PROCID": str(i),
        "SLURM_STEP_NUM_TASKS": str(n),
        "SLURM_STEP_NUM_NODES": str(n),
        "SLURM_STEP_NODELIST": f"node-[0-{n - 1}]",
        "SLURMD_NODENAME": hosts.names[i],
    }


def timed_run(hosts: Hosts, folder: Path, only: list[str]) -> tuple[float, int]:
    """Seconds for the whole cluster run, and the bytes of the node reports rank 0 gathered."""
    out = folder / "-".join(only)
    out.mkdir()
    started = time.monotonic()
    procs = [
        hosts.start(
            i, [GPUDOCTOR, "check", "--only", *only, "-o", f"{out}/{{node}}.json"], srun_env(hosts, i), out / f"{i}.log"
        )
        for i in range(len(hosts.names))
    ]
    for proc in procs:
        proc.wait(timeout=900)
    elapsed = time.monotonic() - started
    leader = json.loads((out / "node-0.json").read_text())
    return elapsed, sum(len(json.dumps(n)) for n in leader["cluster"]["nodes"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 3, 4])
    counts = parser.parse_args().nodes
    print(f"{'nodes':>5}  {'quick (nodes, skew)':>20}  {'links':>8}  {'report bytes':>12}")
    for n in counts:
        hosts = Hosts(n)
        try:
            with tempfile.TemporaryDirectory() as folder:
                quick, size = timed_run(hosts, Path(folder), ["cluster.nodes", "cluster.skew"])
                links, _ = timed_run(hosts, Path(folder), ["cluster.links"])
        finally:
            hosts.remove()
        print(f"{n:>5}  {quick:>18.1f} s  {links:>6.1f} s  {size:>12}")


if __name__ == "__main__":
    main()
