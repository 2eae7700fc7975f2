"""How often the cluster judges miss a slow node or name a healthy one, on synthetic clusters from 2 to 1,000
nodes (tests/helpers/clustersim.py: the same functions cluster.links runs, on figures drawn from a model of slow
nodes, slow links and noise). Prints the table docs/CLUSTER.md holds. No GPU, no network: only arithmetic.

    python bench/cluster_judges.py [--runs 200] [--seed 1]

Noise: each pass of each transfer is multiplied by a log-normal factor of the given sigma; "bursts" adds a
passing load that takes 5 % of passes down to 30-80 % (hosts sharing cores). A slow node slows every transfer
it sends or receives; a slow link one direction between two healthy nodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from helpers.clustersim import Cluster, rates, spread_slow

SIZES = (2, 3, 8, 64, 256, 1000)
SCENARIOS = [
    # (label, the cluster for n nodes given a random generator, smallest n it applies to)
    ("healthy, sigma 0.05", lambda n, r: Cluster(n, sigma=0.05), 2),
    ("healthy, sigma 0.15", lambda n, r: Cluster(n, sigma=0.15), 2),
    ("healthy, sigma 0.10 + bursts", lambda n, r: Cluster(n, sigma=0.1, burst=0.05), 2),
    (
        "1 node at 0.3x, 0.10 + bursts",
        lambda n, r: Cluster(n, spread_slow(n, 1, 0.3, False, r), sigma=0.1, burst=0.05),
        3,
    ),
    ("1 node at 0.6x, sigma 0.05", lambda n, r: Cluster(n, spread_slow(n, 1, 0.6, False, r), sigma=0.05), 3),
    (
        "1 node at 0.75x, sigma 0.05 (a limit)",
        lambda n, r: Cluster(n, spread_slow(n, 1, 0.75, False, r), sigma=0.05),
        3,
    ),
    ("1 node at 0.6x, sigma 0.15 (a limit)", lambda n, r: Cluster(n, spread_slow(n, 1, 0.6, False, r), sigma=0.15), 3),
    (
        "n/8 adjacent at 0.3x, 0.10 + bursts",
        lambda n, r: Cluster(n, spread_slow(n, n // 8, 0.3, True, r), sigma=0.1, burst=0.05),
        8,
    ),
    (
        "n/2 scattered at 0.3x, sigma 0.10",
        lambda n, r: Cluster(n, spread_slow(n, max(1, n // 2), 0.3, False, r), sigma=0.1),
        3,
    ),
    (
        "n/2 scattered at 0.6x, sigma 0.10 (a limit)",
        lambda n, r: Cluster(n, spread_slow(n, max(1, n // 2), 0.6, False, r), sigma=0.1),
        3,
    ),
    (
        "n/2 scattered at 0.3x, sigma 0.15",
        lambda n, r: Cluster(n, spread_slow(n, max(1, n // 2), 0.3, False, r), sigma=0.15),
        3,
    ),
    ("1 link at 0.3x one way, sigma 0.05", lambda n, r: Cluster(n, slow_links={(0, 1): 0.3}, sigma=0.05), 2),
    (
        "every node at 0.5x an absolute reference (2 nodes: the link)",
        lambda n, r: Cluster(n, sigma=0.05, absolute=20.0),
        2,
    ),
]


def runs_for(n: int, runs: int) -> int:
    return runs if n <= 64 else max(10, runs // 4) if n <= 256 else max(5, runs // 10)


def percent(part: int, whole: int) -> str:
    return "-" if whole == 0 else f"{100 * part / whole:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    print(
        "| scenario | nodes | runs | slow missed | slow to drain, not drained | runs naming a healthy node "
        "| runs draining a healthy node | runs with a healthy node unconfirmed | slow links missed "
        "| runs naming a link not slow | runs naming a link of a slow node | runs failing as most nodes below |"
    )
    print("|" + " --- |" * 12)
    for label, make, smallest in SCENARIOS:
        for n in SIZES:
            if n < smallest:
                continue
            found = rates(lambda r, n=n, make=make: make(n, r), runs_for(n, args.runs), args.seed)
            print(
                f"| {label} | {n} | {found.runs} | {percent(found.missed, found.slow)} "
                f"| {percent(found.not_drained, found.to_drain)} | {percent(found.false_runs, found.runs)} "
                f"| {percent(found.false_drain_runs, found.runs)} | {percent(found.unconfirmed_runs, found.runs)} "
                f"| {percent(found.links_missed, found.links)} | {percent(found.false_link_runs, found.runs)} "
                f"| {percent(found.slow_node_links_runs, found.runs)} | {percent(found.majority_runs, found.runs)} |",
                flush=True,
            )
    print(f"\n{time.monotonic() - started:.0f} s, seed {args.seed}")


if __name__ == "__main__":
    main()
