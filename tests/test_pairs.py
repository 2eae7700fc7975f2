"""The pair judge of cluster.links and the per-node all-reduce (gpudoctor/judging/pairs.py), on synthetic measurements:
the rounds, the first look against the upper quartile of per-node figures and an absolute reference, the
noise allowance, the re-test against good nodes, and what is named, unconfirmed or cleared. Each case the
old rule got wrong (the median of transfers, no allowance, no re-test) is here with the figures it got wrong."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from helpers.clustersim import FRACTIONS, Cluster, judge

from gpudoctor.judging import pairs
from gpudoctor.judging.compare import Reference
from gpudoctor.model import Status


def names(n: int) -> dict[int, str]:
    return {i: f"n{i}" for i in range(n)}


def scale(transfer: dict, factor: float) -> None:
    """A load on a transfer: its figure and every pass times `factor`."""
    transfer["gbps"] *= factor
    transfer["passes"] = [p * factor for p in transfer["passes"]]


def look_at(cluster: Cluster, seed: int = 0, absolute: Reference | None = None) -> pairs.FirstLook:
    transfers = cluster.measure(pairs.neighbour_rounds(list(range(cluster.n))), random.Random(seed))
    return pairs.first_look(transfers, names(cluster.n), FRACTIONS, absolute)


def full_run(cluster: Cluster, seed: int = 0, absolute: Reference | None = None):
    rng = random.Random(seed)
    transfers = cluster.measure(pairs.neighbour_rounds(list(range(cluster.n))), rng)
    look = pairs.first_look(transfers, names(cluster.n), FRACTIONS, absolute)
    retest = cluster.measure(pairs.retest_rounds(look), rng, pairs.RETEST_PASSES)
    nodes, links = pairs.confirm(look, retest)
    return look, nodes, links, pairs.results(look, nodes, links, "transfers", "node_link_bandwidth")


@pytest.mark.parametrize("n", range(2, 14))
def test_ring_rounds_cover_every_neighbour_pair_once_in_at_most_three_disjoint_rounds(n: int) -> None:
    rounds = pairs.ring_rounds(list(range(n)))
    assert len(rounds) <= 3
    for round_pairs in rounds:
        nodes = [x for pair in round_pairs for x in pair]
        assert len(nodes) == len(set(nodes)), "a node is in one pair per round"
    assert {frozenset(p) for r in rounds for p in r} == {frozenset((i, (i + 1) % n)) for i in range(n)}


@pytest.mark.parametrize("n", [*range(2, 14), 100, 1001])
def test_neighbour_rounds_pair_every_node_with_four_neighbours_in_at_most_six_rounds(n: int) -> None:
    rounds = pairs.neighbour_rounds(list(range(n)))
    assert len(rounds) <= 6
    for round_pairs in rounds:
        nodes = [x for pair in round_pairs for x in pair]
        assert len(nodes) == len(set(nodes))
    wanted = {frozenset((i, (i + d) % n)) for i in range(n) for d in (1, 2)} - {frozenset((i,)) for i in range(n)}
    measured = [frozenset(p) for r in rounds for p in r]
    assert set(measured) == wanted and len(measured) == len(set(measured)), "each neighbour pair once"


def test_every_pair_is_measured_once_each_way() -> None:
    for n in (2, 3, 6):
        directed = [
            (t["src"], t["dst"]) for t in Cluster(n).measure(pairs.neighbour_rounds(list(range(n))), random.Random())
        ]
        assert len(directed) == len(set(directed))
        assert all(a != b for a, b in itertools.chain(directed))


def test_one_slow_node_of_three_is_named_where_the_median_of_transfers_missed_it() -> None:
    """The issue's 3-node case: node 2 slow both ways; 4 of the 6 transfers touch it, so the median of transfers
    was the slow rate and nobody was named. Its figure against the other nodes' is 0.01x."""
    look, nodes, links, results = full_run(Cluster(3, {2: 0.01}))
    assert set(look.nodes) == {2}
    assert nodes[2].status == Status.FAIL and nodes[2].confirmed
    assert "re-tested against n" in nodes[2].summary and "confirmed" in nodes[2].summary
    assert results[0].status == Status.FAIL and [r.node for r in results[0].rows if r.status != Status.PASS] == ["n2"]
    assert links == {}


def test_two_adjacent_slow_nodes_of_five_are_both_named_and_their_neighbours_not() -> None:
    """The issue's 5-node case: nodes 3 and 4, ring neighbours, slow; 10 transfers, median slow, no one named."""
    _, nodes, _, results = full_run(Cluster(5, {3: 0.01, 4: 0.01}, sigma=0.05))
    named = {n for n, v in nodes.items() if v.confirmed and v.status == Status.FAIL}
    assert named == {3, 4}
    assert [r.node for r in results[0].rows if r.status == Status.FAIL] == ["n3", "n4"]
    assert not [r for r in results[0].rows if r.node in ("n0", "n1", "n2") and r.status != Status.PASS]


def test_a_healthy_node_between_two_slow_ones_is_cleared_not_named() -> None:
    """With ring neighbours only, node 3 between slow 2 and 4 had no fast link: it was always named. With four
    neighbours it has fast ones; and where all its slow transfers are with nodes confirmed slow, a re-test
    against a good node clears it."""
    cluster = Cluster(12, {2: 0.2, 4: 0.2, 1: 0.2, 5: 0.2})  # node 3's four neighbours are all slow
    look, nodes, _, _ = full_run(cluster)
    assert 3 in look.nodes, "its first look is slow: every neighbour is"
    assert nodes[3].status == Status.PASS and nodes[3].confirmed is False
    assert nodes[3].summary.startswith("slow only with n1, n2, n4, n5 (named slow)")
    assert {n for n, v in nodes.items() if v.confirmed} == {1, 2, 4, 5}


def test_alternating_slow_nodes_are_told_apart_by_the_second_neighbours() -> None:
    """Half the nodes slow, every other one: with ring neighbours every transfer is slow-to-healthy and alike."""
    cluster = Cluster(8, dict.fromkeys((1, 3, 5, 7), 0.3))
    _, nodes, _, _ = full_run(cluster)
    assert {n for n, v in nodes.items() if v.confirmed and v.status == Status.FAIL} == {1, 3, 5, 7}


def test_a_slow_link_between_fast_nodes_is_named_as_the_link() -> None:
    _, nodes, links, results = full_run(Cluster(6, slow_links={(1, 2): 0.2}))
    assert nodes == {} and set(links) == {(1, 2)}
    assert links[(1, 2)].confirmed and links[(1, 2)].status == Status.FAIL
    link_result = results[1]
    assert link_result.aspect == "links" and link_result.rows[0].node == "n1" and link_result.rows[0].peer == "n2"
    assert (
        link_result.summary.startswith("slow link n1 -> n2: 2") and "GB/s re-tested: confirmed" in link_result.summary
    )


def test_with_two_nodes_the_slow_end_cannot_be_told() -> None:
    _, nodes, links, results = full_run(Cluster(2, slow_links={(0, 1): 0.2}))
    assert nodes == {} and set(links) == {(0, 1)}
    assert results[0].status == Status.PASS
    assert "with two nodes the slow end cannot be told" in results[1].summary


def test_two_equally_slow_nodes_are_caught_by_an_absolute_reference() -> None:
    """Two nodes both slow both ways look alike to each other: only the hardware's expectation tells."""
    _, _, links, results = full_run(Cluster(2, {0: 0.5, 1: 0.5}), absolute=Reference(10.0, "model NIC"))
    assert set(links) and all(v.confirmed for v in links.values())
    assert results[1].status == Status.FAIL and "10 GB/s x 0.75 (model NIC)" in results[0].summary


def test_a_slow_majority_fails_the_check_but_drains_no_node() -> None:
    """Every node at half the configured figure: the fabric or the reference is wrong, and draining them all
    would empty the cluster on a wrong expectation."""
    look, _, _, results = full_run(Cluster(6), absolute=Reference(20.0, "expected_gbps (config)"))
    assert look.majority == list(range(6))
    assert results[0].status == Status.FAIL and results[0].summary.startswith("most nodes (6 of 6: n0, n1")
    assert not [r for r in results[0].rows if r.status.is_failure], "no node row fails: none is drained"


def test_a_suspect_that_re_tests_fine_is_unconfirmed_and_not_drained() -> None:
    cluster = Cluster(6)
    transfers = cluster.measure(pairs.neighbour_rounds(list(range(6))), random.Random(1))
    for t in transfers:  # node 4 hit by a passing load in the ring measurement only
        if 4 in (t["src"], t["dst"]):
            scale(t, 0.3)
    look = pairs.first_look(transfers, names(6), FRACTIONS)
    assert set(look.nodes) == {4}
    nodes, _ = pairs.confirm(look, cluster.measure(pairs.retest_rounds(look), random.Random(2)))
    assert nodes[4].status == Status.WARN and nodes[4].confirmed is False
    assert nodes[4].summary.endswith(": unconfirmed, not drained")


def test_a_re_test_that_never_ran_leaves_suspects_unconfirmed() -> None:
    look = look_at(Cluster(4, {1: 0.1}))
    nodes, _ = pairs.confirm(look, [])
    assert nodes[1].confirmed is False and nodes[1].status == Status.WARN
    assert "not re-tested" in nodes[1].summary


def test_re_test_rounds_pair_each_suspect_with_a_distinct_good_node_and_keep_reference_pairs() -> None:
    look = look_at(Cluster(20, {3: 0.1, 9: 0.1}, slow_links={(14, 15): 0.1}))
    rounds = pairs.retest_rounds(look)
    assert len(rounds) == 1
    (retest,) = rounds
    nodes = [x for pair in retest for x in pair]
    assert len(nodes) == len(set(nodes))
    suspects = {3, 9}
    partners = {b for a, b in retest if a in suspects}
    assert len(partners) == 2 and not partners & suspects and not partners & {14, 15}
    assert (14, 15) in retest
    reference = [p for p in retest if not set(p) & (suspects | partners | {14, 15})]
    assert len(reference) == min(pairs.REFERENCE_PAIRS, (20 - 6) // 2)


def test_every_judged_figure_says_its_reference_and_allowance() -> None:
    _, _, _, results = full_run(Cluster(5, {2: 0.1}, sigma=0.05))
    for row in results[0].rows:
        (figure,) = row.metrics
        assert figure.expected is not None and figure.labels == {"node": row.node}
        assert "noise allowance" in figure.expected_source
    said = results[0]
    assert "n2: " in said.summary and len(said.summary) < 200, "the named node leads, in one short line"
    assert "reference" in said.detail and "noise allowance" in said.detail, "the reference and allowance beside it"


def test_too_noisy_to_judge_is_said_and_names_nobody() -> None:
    _, _, _, results = full_run(Cluster(6, sigma=0.6))
    assert "unstable" in results[0].summary and results[0].status == Status.WARN
    assert not [r for r in results[0].rows if r.status.is_failure]


@pytest.mark.parametrize(("n", "slow"), [(3, {1: 0.3}), (8, {5: 0.4}), (64, {10: 0.3, 11: 0.3, 40: 0.3})])
def test_noise_names_no_healthy_node_and_misses_no_slow_one(n: int, slow: dict[int, float]) -> None:
    """Many runs at 10 % noise with passing loads (5 % of passes drop to 30-80 %), as on hosts sharing cores."""
    for seed in range(40 if n < 64 else 10):
        outcome = judge(Cluster(n, slow, sigma=0.1, burst=0.05), random.Random(seed))
        assert outcome.named - set(slow) == set(), f"seed {seed} named a healthy node"
        assert outcome.named >= set(slow), f"seed {seed} missed {set(slow) - outcome.named}"


def test_a_link_is_never_judged_against_itself() -> None:
    """Three nodes, node 2 slow: the only transfers between nodes not suspected are the two directions of
    0-1, so their median was made of the link being judged, and one direction slower than the other (a core
    busy under one of the ranks, as on namespace hosts sharing two cores) was named a slow link. A link is
    judged against other pairs' transfers; with none, only against an absolute reference (where one is set,
    both ends' own figures fall below it with the link, and the check says so)."""
    for seed in range(20):
        _, nodes, links, _ = full_run(Cluster(3, {2: 0.02}, slow_links={(0, 1): 0.55}, sigma=0.05), seed)
        assert nodes[2].confirmed and links == {}, f"seed {seed}: {sorted(links)}"


def test_the_median_without_a_pair_is_the_median_of_the_rest() -> None:
    import statistics

    rng = random.Random(3)
    for _ in range(200):
        values = [round(rng.uniform(0, 5), 1) for _ in range(rng.randint(3, 30))]
        removed = rng.sample(values, rng.randint(1, 2))
        rest = list(values)
        for value in removed:
            rest.remove(value)
        assert pairs.median_without(sorted(values), removed) == statistics.median(rest)


def test_one_good_pairs_lopsided_directions_do_not_clear_a_slow_node() -> None:
    """Three nodes, node 2 slow: the re-test measures 2 against 0 and the good pair 0-1 beside it. A load on
    one core slows 0 -> 1 threefold for that round; one pair's two directions are one difference, not a
    spread, and taken as the re-test's noise they widened the allowance past 0.07x and left node 2
    unconfirmed (seen in CI on three namespace hosts)."""
    cluster = Cluster(3, {2: 0.06}, sigma=0.05)
    look = pairs.first_look(cluster.measure(pairs.neighbour_rounds([0, 1, 2]), random.Random(4)), names(3), FRACTIONS)
    retest = cluster.measure(pairs.retest_rounds(look), random.Random(5), pairs.RETEST_PASSES)
    for t in retest:
        if (t["src"], t["dst"]) == (0, 1):
            scale(t, 1 / 3)
    nodes, _ = pairs.confirm(look, retest)
    assert nodes[2].confirmed and nodes[2].status == Status.FAIL, nodes[2].summary


@pytest.mark.parametrize(("slow", "named"), [(1.0, False), (0.3, True)])
def test_a_reference_pair_in_a_quiet_moment_does_not_confirm_a_loaded_node(slow: float, named: bool) -> None:
    """Seen in CI, three healthy namespace hosts on two busy cores: node-1 was slow in the ring under a load
    (0.38x), slow again in its re-test pair (0.44x), while the one good pair, measured in a round of its own,
    ran in a quiet moment at twice the ring's level; against that one figure node-1 was confirmed and
    drained. Against the ring's own reference its re-test was 0.86x. A node slow in itself (0.3x) is slow
    against both and stays named."""
    cluster = Cluster(3, {1: slow} if slow < 1 else {}, sigma=0.03)
    transfers = cluster.measure(pairs.neighbour_rounds([0, 1, 2]), random.Random(7))
    for t in transfers:
        if 1 in (t["src"], t["dst"]) and slow == 1.0:  # the load, on node-1's pairs, in the ring
            scale(t, 0.38)
    look = pairs.first_look(transfers, names(3), FRACTIONS)
    assert set(look.nodes) == {1}
    retest = cluster.measure(pairs.retest_rounds(look), random.Random(8), pairs.RETEST_PASSES)
    for t in retest:
        factor = 2.0 if 1 not in (t["src"], t["dst"]) else (0.88 if slow == 1.0 else 1.0)
        scale(t, factor)  # the good pair quiet (2x); node-1's pair loaded (0.44x of it) when healthy
    nodes, _ = pairs.confirm(look, retest)
    assert nodes[1].confirmed is named, nodes[1].summary
    assert nodes[1].status == (Status.FAIL if named else Status.WARN), nodes[1].summary


@pytest.mark.parametrize(("slow", "named"), [(1.0, False), (0.3, True)])
def test_a_quiet_reference_round_does_not_confirm_a_loaded_link(slow: float, named: bool) -> None:
    """The links' side of the same case: 1 -> 2 slowed by a load in the ring (0.35x) and in its re-test
    (0.45x of good pairs that ran at twice the ring's level), healthy; a link slow in itself stays named."""
    cluster = Cluster(6, slow_links={(1, 2): slow} if slow < 1 else {}, sigma=0.03)
    transfers = cluster.measure(pairs.neighbour_rounds(list(range(6))), random.Random(3))
    for t in transfers:
        if (t["src"], t["dst"]) == (1, 2) and slow == 1.0:
            scale(t, 0.35)
    look = pairs.first_look(transfers, names(6), FRACTIONS)
    assert set(look.links) == {(1, 2)} and look.nodes == {}
    retest = cluster.measure(pairs.retest_rounds(look), random.Random(4), pairs.RETEST_PASSES)
    for t in retest:
        factor = 2.0 if {t["src"], t["dst"]} != {1, 2} else (0.9 if slow == 1.0 else 1.0)
        scale(t, factor)
    _, links = pairs.confirm(look, retest)
    assert links[(1, 2)].confirmed is named, links[(1, 2)].summary


def test_both_ends_of_a_pair_plan_the_same_transfer_size() -> None:
    """Seen in CI: each rank sized a slow pair's transfer from its own clock after the probe, so the two ends
    of node-0 <-> node-3 planned 3,297,280 and 3,293,184 bytes and gloo aborted the rank ("Received data size
    doesn't match expected size"). Every rank now plans from what all of them gathered: the least time left."""
    from gpudoctor.checks.ranks import links

    rounds = [[(0, 1)], [(1, 0)]]
    speeds = {"0-1": [0.0105, 0.0103], "1-0": [0.0101]}
    gathered = [{"left_s": 100.11, "speeds": speeds}, {"left_s": 100.06, "speeds": {}}]
    own_clock = {
        links.transfer_size(0.0101, left * links.BUDGET_SHARE / links.budget_blocks(rounds), 7, 4 << 20)
        for left in (100.11, 100.06)
    }
    assert len(own_clock) == 2, "the old way: two sizes for one pair"
    planned = links.plan_sizes(gathered, rounds, 7, 4 << 20)
    assert planned == {(0, 1): links.transfer_size(0.0101, 100.06 * 0.5 / links.budget_blocks(rounds), 7, 4 << 20)}


@pytest.mark.parametrize(("slow", "named"), [(1.0, False), (0.1, True)])
def test_a_loaded_re_test_with_no_good_pair_beside_it_does_not_confirm_a_link(slow: float, named: bool) -> None:
    """Seen in CI, five namespace hosts with node-2 and node-3 limited to 100 Mbit/s: the healthy link
    node-1 -> node-0 was slow in the ring (0.3x) and slow again in its re-test, which a load on the machine
    (the other test worker) took to 0.25x. No good pair could run beside it (the good nodes were 0, 1 and 4),
    so it was judged against the ring's transfers alone, measured in a quieter moment, and confirmed. Its ends
    are now re-tested against node-4 too, in the same re-test: under the same load they are as slow, and the
    link is unconfirmed; a link slow in itself (0.1x) is slow against them too, and named."""
    cluster = Cluster(5, {2: 0.0125, 3: 0.0125}, slow_links={(1, 0): slow} if slow < 1 else {}, sigma=0.05)
    transfers = cluster.measure(pairs.neighbour_rounds(list(range(5))), random.Random(11))
    for t in transfers:
        if (t["src"], t["dst"]) == (1, 0) and slow == 1.0:
            scale(t, 0.3)
    look = pairs.first_look(transfers, names(5), FRACTIONS)
    assert set(look.nodes) == {2, 3} and set(look.links) == {(1, 0)}
    rounds = pairs.retest_rounds(look)
    assert {(0, 4), (1, 4)} <= {pair for r in rounds for pair in r}, rounds
    retest = cluster.measure(rounds, random.Random(12), pairs.RETEST_PASSES)
    for t in retest:
        if not {t["src"], t["dst"]} & {2, 3}:  # the load: every transfer between good nodes, the link's too
            scale(t, 0.25)
    nodes, links = pairs.confirm(look, retest)
    assert nodes[2].confirmed and nodes[3].confirmed
    assert links[(1, 0)].confirmed is named, links[(1, 0)].summary
    assert "re-tested alongside" in links[(1, 0)].reference.source or named


def test_a_re_tested_pair_keeps_its_own_transfer_size_not_its_slow_neighbours() -> None:
    """Every pair's size was the smallest either node had: node-0 and node-1, healthy neighbours of a node at
    100 Mbit/s, were re-tested with the slow pair's 64 KiB, where the ring measured them with 4 MiB, and short
    transfers read slower. A pair measured in the ring keeps its size; a new pair takes its slower node's
    fastest pair's size (a slow node's stays small, so the re-test still fits its budget)."""
    big, small = 4 << 20, 64 << 10
    sizes = {"0-1": big, "0-2": small, "1-2": small, "0-4": big, "1-4": big, "2-4": small, "2-3": small}
    planned = pairs.retest_sizes(sizes, [[(0, 1), (2, 4)], [(3, 0)], [(1, 4)]])
    assert planned == {"0-1": big, "2-4": small, "0-3": small, "1-4": big}


def _transfer(src: int, dst: int, best: float, spread: float, passes: int) -> dict:
    """One transfer whose passes lie `spread` apart in log terms, the best first."""
    values = [best * math.exp(-spread * i) for i in range(passes)]
    return {"src": src, "dst": dst, "gbps": best, "passes": values, "verified": True}


@pytest.mark.parametrize(("again", "named"), [(0.66, False), (0.3, True)])
def test_three_healthy_busy_nodes_one_slow_twice_by_the_run_to_run_noise_is_not_named(
    again: float, named: bool
) -> None:
    """Seen in CI, three healthy namespace hosts with a niced process taking the idle cores: node-0 was slow in the
    ring (0.30x) and its re-test pair 0.68x of the one good pair, measured in a round of its own, with passes 0.24
    apart (log) for the ratio: at a 5 % chance per confirmation it was named a straggler. A straggler is now
    confirmed at a 1 % chance, as a figure judged once is (a failure, far below, still at 5 %): a node at 0.66x of
    the good pair is unconfirmed, one at 0.3x is named."""
    ring = [(0, 1, 0.15), (1, 0, 0.152), (1, 2, 0.504), (2, 1, 0.49), (2, 0, 0.15), (0, 2, 0.148)]
    look = pairs.first_look([_transfer(s, d, v, 0.15, 2) for s, d, v in ring], names(3), FRACTIONS)
    assert set(look.nodes) == {0}
    assert pairs.retest_rounds(look) == [[(0, 1)], [(1, 2)]]
    good = 0.2414
    retest = [_transfer(0, 1, good * again, 0.16, 3), _transfer(1, 0, good * again * 1.05, 0.16, 3)]
    retest += [_transfer(1, 2, good, 0.16, 3), _transfer(2, 1, good * 1.05, 0.16, 3)]
    nodes, _ = pairs.confirm(look, retest)
    assert nodes[0].confirmed is named, nodes[0].summary
