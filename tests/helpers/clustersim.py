"""Synthetic clusters for the pair judges: every transfer a ring measurement or a re-test would make, drawn
from a model of the nodes (slow nodes, slow links, noise), judged by the same functions cluster.links runs,
and scored: which slow nodes were named (and drained), and which healthy ones were.

Noise: each pass of each transfer is multiplied by a log-normal factor (sigma), and, with `burst` > 0, a
pass is hit by a passing load with that probability (its figure drops to 30-80 %), as on hosts sharing cores.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from gpudoctor.judging import pairs
from gpudoctor.judging.compare import Fractions, Reference
from gpudoctor.model import Status

FRACTIONS = Fractions(0.8, 0.5)
BASE_GBPS = 10.0


@dataclass
class Cluster:
    """n nodes; slow nodes slow every transfer they send or receive by their factor; slow links slow one
    direction between two nodes."""

    n: int
    slow_nodes: dict[int, float] = field(default_factory=dict)
    slow_links: dict[tuple[int, int], float] = field(default_factory=dict)
    sigma: float = 0.05
    burst: float = 0.0
    absolute: float | None = None  # a reference for a node's figure (the NIC's rate), if the judge has one

    def rate(self, src: int, dst: int) -> float:
        factor = self.slow_nodes.get(src, 1.0) * self.slow_nodes.get(dst, 1.0)
        return BASE_GBPS * factor * self.slow_links.get((src, dst), 1.0)

    def one_pass(self, src: int, dst: int, rng: random.Random) -> float:
        value = self.rate(src, dst) * rng.lognormvariate(0.0, self.sigma)
        return value * rng.uniform(0.3, 0.8) if rng.random() < self.burst else value

    def measure(self, rounds: list[list[pairs.Pair]], rng: random.Random, passes: int = 2) -> list[dict]:
        found = []
        for round_pairs in rounds:
            for a, b in round_pairs:
                for src, dst in ((a, b), (b, a)):
                    passes_ = [self.one_pass(src, dst, rng) for _ in range(passes)]
                    found.append({"src": src, "dst": dst, "gbps": max(passes_), "passes": passes_, "verified": True})
        return found


@dataclass
class Outcome:
    drained: set[int]  # named FAIL and confirmed
    named: set[int]  # named (warn or fail) and confirmed
    unconfirmed: set[int]
    links: set[tuple[int, int]]  # slow links named (confirmed)
    majority: bool  # most nodes below the absolute reference: the check fails, no node drained


def judge(cluster: Cluster, rng: random.Random) -> Outcome:
    """One run of the links judge on a synthetic cluster: first look, re-test, confirmation."""
    names = {i: f"n{i}" for i in range(cluster.n)}
    absolute = Reference(cluster.absolute, "model NIC rate") if cluster.absolute else None
    first = cluster.measure(pairs.neighbour_rounds(list(range(cluster.n))), rng)
    look = pairs.first_look(first, names, FRACTIONS, absolute)
    retest = cluster.measure(pairs.retest_rounds(look), rng, pairs.RETEST_PASSES)
    nodes, links = pairs.confirm(look, retest)
    return Outcome(
        {n for n, v in nodes.items() if v.confirmed and v.status == Status.FAIL},
        {n for n, v in nodes.items() if v.confirmed and v.status != Status.PASS},
        {n for n, v in nodes.items() if v.confirmed is False and v.status != Status.PASS},
        {pair for pair, v in links.items() if v.confirmed},
        bool(look.majority),
    )


@dataclass
class Rates:
    runs: int = 0
    slow: int = 0  # slow nodes in all runs
    missed: int = 0  # slow nodes not named
    to_drain: int = 0  # slow nodes below the fail fraction
    not_drained: int = 0  # of those, not drained
    false_runs: int = 0  # runs that named a healthy node
    false_drain_runs: int = 0  # runs that drained a healthy node
    unconfirmed_runs: int = 0  # runs with an unconfirmed (warned, not drained) healthy node
    links: int = 0  # slow links in all runs
    links_missed: int = 0
    false_link_runs: int = 0  # runs that named a link that is not slow
    slow_node_links_runs: int = 0  # runs that named a link of a slow node (real slowness, put on a link)
    majority_runs: int = 0

    def add(self, cluster: Cluster, outcome: Outcome) -> None:
        slow = set(cluster.slow_nodes)
        failing = {n for n in slow if cluster.slow_nodes[n] < FRACTIONS.fail}
        self.runs += 1
        self.slow += len(slow)
        self.missed += len(slow - outcome.named)
        self.to_drain += len(failing)
        self.not_drained += len(failing - outcome.drained)
        self.false_runs += bool(outcome.named - slow)
        self.false_drain_runs += bool(outcome.drained - slow)
        self.unconfirmed_runs += bool(outcome.unconfirmed - slow)
        slow_links = set(cluster.slow_links)
        self.links += len(slow_links)
        self.links_missed += len(slow_links - outcome.links)
        self.false_link_runs += bool(outcome.links - slow_links - _touching(outcome.links, slow))
        self.slow_node_links_runs += bool(_touching(outcome.links, slow) - slow_links)
        self.majority_runs += outcome.majority


def _touching(links: set[tuple[int, int]], slow: set[int]) -> set[tuple[int, int]]:
    """Links named that have a slow node at one end: slow, but the node's slowness put on a link."""
    return {pair for pair in links if set(pair) & slow}


def rates(make: callable, runs: int, seed: int = 0) -> Rates:
    """Judge `runs` clusters made by `make(rng)`."""
    rng = random.Random(seed)
    found = Rates()
    for _ in range(runs):
        cluster = make(rng)
        found.add(cluster, judge(cluster, rng))
    return found


def spread_slow(n: int, k: int, factor: float, adjacent: bool, rng: random.Random) -> dict[int, float]:
    """k slow nodes: next to each other in the ring, or scattered."""
    if adjacent:
        start = rng.randrange(n)
        return {(start + i) % n: factor for i in range(k)}
    return dict.fromkeys(rng.sample(range(n), k), factor)
