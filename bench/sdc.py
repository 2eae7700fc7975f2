"""What compute.sdc costs, measured in one run: its workload at the check's own settings on every device (one rank per
GPU, or two gloo ranks on the CPU), each rank's time in the operations and their repeats, the digests, the fp64
reference and the comparison with its peers, the launch's whole time with the ranks' start-up; then (`--standard`)
a whole `gpudoctor check --level standard` on this machine, and compute.sdc's share of the workloads' time in it.

    python bench/sdc.py [--device cpu|cuda] [--rounds 3] [--standard]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from gpudoctor.judging import sdc
from gpudoctor.workloads.launch import launch

GPUDOCTOR = shutil.which("gpudoctor") or os.path.join(os.path.dirname(sys.executable), "gpudoctor")
WORKER = "gpudoctor.checks.ranks.sdc:worker"
PHASES = ("compute", "digest", "reference", "compare")


def workload(device: str, ranks: int) -> tuple[float, list[dict]]:
    """One launch at the check's default settings: its wall time, and each rank's seconds per phase."""
    params = {"n": sdc.SIZES[device], "seed": sdc.SEED, "repeats": 5, "reference_rows": 64}
    started = time.monotonic()
    outcome = launch(WORKER, ranks, "nccl" if device == "cuda" else "gloo", params, 600)
    wall = time.monotonic() - started
    if outcome.status != "pass":
        sys.exit(f"the workload did not finish: {outcome.message}")
    return wall, [rank["seconds"] for rank in outcome.data]


def standard_share() -> None:
    """A whole standard run: compute.sdc's duration against every workload's."""
    started = time.monotonic()
    proc = subprocess.run([GPUDOCTOR, "check", "--level", "standard", "--json"], capture_output=True, text=True)
    wall = time.monotonic() - started
    checks = json.loads(proc.stdout)["checks"]
    workloads = {c["check_id"]: c["duration_s"] for c in checks if c["duration_s"] > 0.5}
    mine = workloads.get("compute.sdc", 0.0)
    print(f"--level standard: {wall:.1f} s; workloads {sum(workloads.values()):.1f} s")
    print(
        f"compute.sdc {mine:.1f} s: {mine / sum(workloads.values()):.3f} of the workloads, {mine / wall:.3f} of the run"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--standard", action="store_true", help="also a whole standard run, for the share")
    args = parser.parse_args()
    ranks = 2
    if args.device == "cuda":
        import torch

        ranks = torch.cuda.device_count()
    walls, per_rank = [], []
    for _ in range(args.rounds):
        wall, seconds = workload(args.device, ranks)
        walls.append(wall)
        per_rank += seconds
    print(f"{args.device}, {ranks} ranks, n={sdc.SIZES[args.device]}, 5 repeats, {args.rounds} rounds (medians)")
    print(f"launch, start-up included: {statistics.median(walls):.2f} s")
    work = [sum(s.get(p, 0.0) for p in PHASES) for s in per_rank]
    for phase in PHASES:
        spent = statistics.median(s.get(phase, 0.0) for s in per_rank)
        print(f"  {phase:<10} {spent:.3f} s per rank")
    spent, launch_s = statistics.median(work), statistics.median(walls)
    print(f"  {'all':<10} {spent:.3f} s per rank: {spent / launch_s:.3f} of the launch")
    if args.standard:
        standard_share()


if __name__ == "__main__":
    main()
