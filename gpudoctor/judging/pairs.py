"""Judging nodes by measurements between pairs of them (pure: no torch), for the cross-node checks: the
links between nodes (cluster.links, one rank per node) and each node's share of the all-reduce across them
(cluster.allreduce, every GPU of both nodes), both measured by a workload that returns what `gathered` reads.

Nodes are measured in rounds of disjoint pairs: first each with its four nearest ring neighbours (i+-1,
i+-2: at most six rounds whatever the node count), each directed figure the better of two passes (three in
a re-test). A node's
figure is the lower of its best send and its best receive: a slow node is slow to every neighbour, while a
neighbour of it has other, fast, links. Then:
1. First look: each node's figure against the upper quartile of per-node figures (it stays with the
   healthy ones while fewer than three quarters look slow, and up to half the nodes slow make a little over
   half look slow) and against an absolute reference where there is one (so a slow majority is caught
   too), each with the noise allowance measured between the two passes. A transfer that is slow between two
   nodes not suspected is a suspect link. With two nodes the slow end cannot be told: only the link is judged.
2. Re-test: every suspect is paired with a node measured good, and every suspect link measured again, in one
   more round of disjoint pairs (good nodes pair up beside them, for a reference taken at the same time).
3. Confirm: a suspect is named only when the re-test agrees, at the re-test's verdict (a direct measurement
   against a good node, taken now), judged against both the good pairs re-tested alongside and the first
   look's reference, at the milder verdict of the two: on a shared machine the pairs alongside may run in a
   quiet moment the suspect's pair did not have. One that re-tests fine is unconfirmed (a warning, never
   drained), or cleared where every slow transfer it had was with a node confirmed slow.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.judging import compare
from gpudoctor.model import SEVERITY, Metric, Remediation, Result, Row, Status, worst

FIRST_RATE = 0.2  # the chance that noise makes any healthy node or link a suspect, per first look
CONFIRM_RATE = 0.05  # the chance that a healthy suspect re-tests slow as well (below the fail fraction)
# A straggler (below the straggler fraction, above the fail fraction) is confirmed at compare.FAMILY_RATE, as a
# figure judged once: a re-test compares pairs measured in different rounds, and on hosts sharing cores that
# noise has a longer tail than the passes' spread says (CI: three healthy hosts, a node at 0.68x of the one
# good pair, named a straggler at 5 %). Far below, where a drain is at stake, that tail does not reach.
STRAGGLER_RATE = compare.FAMILY_RATE
REFERENCE_PAIRS = 8  # good pairs re-measured beside the suspects in a re-test round, for its reference
MAX_RETEST_ROUNDS = 3
PASSES, RETEST_PASSES = 2, 3  # a re-test is few pairs: one more pass, and one passing load cannot confirm
FIRST_SHARE = 0.6  # of a check's time limit: the first look; the re-test gets the rest
Pair = tuple[int, int]


def ring_rounds(nodes: list[int]) -> list[list[Pair]]:
    """The ring's edges (i, i+1 mod n) in rounds of disjoint pairs: 1 round for 2 nodes, 2 for an even ring,
    3 for an odd one."""
    n = len(nodes)
    if n < 3:
        return [[(nodes[0], nodes[1])]] if n == 2 else []
    edges = [(nodes[i], nodes[(i + 1) % n]) for i in range(n)]
    if n % 2 == 0:
        return [edges[0::2], edges[1::2]]
    return [edges[0 : n - 1 : 2], edges[1 : n - 1 : 2], [edges[-1]]]


def neighbour_rounds(nodes: list[int]) -> list[list[Pair]]:
    """Every node with its ring neighbours and the ones beyond them (i+-1, i+-2), in at most six rounds of
    disjoint pairs whatever the node count. With only i+-1, a healthy node between two slow ones looks slow,
    and alternating slow nodes make every transfer alike; with four neighbours a healthy node has a fast one
    unless all four are slow."""
    rounds = ring_rounds(nodes)
    n = len(nodes)
    if n == 4:
        rounds.append([(nodes[0], nodes[2]), (nodes[1], nodes[3])])
    elif n >= 5:
        cycles = [nodes[0::2] + nodes[1::2]] if n % 2 else [nodes[0::2], nodes[1::2]]
        skip = [ring_rounds(cycle) for cycle in cycles]
        rounds += [[pair for r in skip if i < len(r) for pair in r[i]] for i in range(max(map(len, skip)))]
    return rounds


def node_figures(transfers: list[dict[str, Any]]) -> dict[int, float]:
    """Each node's figure: the lower of its best send and its best receive."""
    sends: dict[int, float] = {}
    receives: dict[int, float] = {}
    for t in transfers:
        sends[t["src"]] = max(sends.get(t["src"], 0.0), t["gbps"])
        receives[t["dst"]] = max(receives.get(t["dst"], 0.0), t["gbps"])
    return {node: min(sends[node], receives[node]) for node in sends if node in receives}


def pass_sigma(transfers: list[dict[str, Any]]) -> float | None:
    """The log-spread of a transfer's figure (its best pass), from the difference between its two best passes:
    with three passes, one that a passing load took down counts for nothing, as it does in the figure."""
    best = [sorted(t["passes"], reverse=True)[:2] for t in transfers if len(t["passes"]) >= 2]
    return compare.sigma_between([(a, b) for a, b in best])


def spread(transfers: list[dict[str, Any]], clearly_slow: set[int]) -> tuple[float | None, str]:
    """The noise of one transfer's figure: the larger of the spread between the passes of every transfer (a
    median of many: with three nodes only two transfers may be healthy, and one passing load in them would
    hide a slow node) and the spread from one transfer to another among those touching no clearly slow node
    (healthy links differ, a busy machine loads rounds unevenly, and a slow node's transfers, steady at its
    limit, would understate it)."""
    between = pass_sigma(transfers) or 0.0
    healthy = [t for t in transfers if t["src"] not in clearly_slow and t["dst"] not in clearly_slow]
    across = compare.sigma_across([t["gbps"] for t in healthy]) or 0.0
    if across > between:
        return across, f"from one to another of {len(healthy)} transfers touching no clearly slow node"
    return between, f"between the passes of {len(transfers)} transfers"


@dataclass
class FirstLook:
    """The ring measurement, judged: suspect nodes and links, against what reference and allowance."""

    names: dict[int, str]
    transfers: list[dict[str, Any]]
    figures: dict[int, float]
    reference: compare.Reference  # for a node's figure
    link_reference: compare.Reference  # for one transfer
    allow: compare.Allowance
    fractions: compare.Fractions
    absolute: compare.Reference | None = None
    floor: float = 0.75
    nodes: dict[int, Status] = field(default_factory=dict)
    links: dict[Pair, Status] = field(default_factory=dict)
    majority: list[int] = field(default_factory=list)  # most nodes below the absolute reference

    @property
    def clearly_slow(self) -> set[int]:
        """The suspects below the fail fraction (and the allowance)."""
        return {node for node, status in self.nodes.items() if status == Status.FAIL}

    @property
    def good(self) -> list[int]:
        """The nodes not suspected, best first."""
        return sorted((n for n in self.figures if n not in self.nodes), key=lambda n: -self.figures[n])


def first_look(
    transfers: list[dict[str, Any]],
    names: dict[int, str],
    fractions: compare.Fractions,
    absolute: compare.Reference | None = None,
    floor: float = 0.75,
) -> FirstLook:
    figures = node_figures(transfers)
    tests = len(figures) + len(transfers)
    look = FirstLook(
        names,
        transfers,
        figures,
        compare.upper_quartile_reference(list(figures.values()), "per-node figures"),
        compare.median_reference([t["gbps"] for t in transfers], "transfers"),
        compare.allowance(pass_sigma(transfers), tests, "between two passes of every transfer", FIRST_RATE),
        fractions,
        absolute,
        floor,
    )
    if len(figures) > 2:
        _suspect_nodes(look)
        # Judged again with the noise among the nodes that are not clearly slow: a slow node's transfers,
        # steady at its limit, would understate it.
        look.allow = _first_allowance(transfers, look.clearly_slow, tests)
        look.nodes, look.majority = {}, []
        _suspect_nodes(look)
    _suspect_links(look)
    return look


def _first_allowance(transfers: list[dict[str, Any]], clearly_slow: set[int], tests: int) -> compare.Allowance:
    sigma, source = spread(transfers, clearly_slow)
    return compare.allowance(sigma, tests, source, FIRST_RATE)


def _suspect_nodes(look: FirstLook) -> None:
    below_absolute = [n for n, v in look.figures.items() if _absolute(look, v, look.allow) != Status.PASS]
    if len(below_absolute) * 2 > len(look.figures):
        look.majority = sorted(below_absolute)  # the fabric or the reference: no node is drained for it
    for node, value in look.figures.items():
        status = compare.judge(value, look.reference, look.allow, look.fractions)[0]
        if not look.majority:
            status = worst([status, _absolute(look, value, look.allow)])
        if status != Status.PASS:
            look.nodes[node] = status


def _absolute(look: FirstLook, value: float, allow: compare.Allowance) -> Status:
    if look.absolute is None:
        return Status.PASS
    return compare.judge(value, look.absolute, allow, compare.Fractions(look.floor, look.floor))[0]


def _suspect_links(look: FirstLook) -> None:
    between = _between_good(look)
    if len(look.figures) > 2:
        look.link_reference = compare.median_reference(
            [t["gbps"] for t in between] or [t["gbps"] for t in look.transfers], "transfers between nodes not suspected"
        )
    ordered, own = _link_figures(between)
    for t in between:
        pair = frozenset((t["src"], t["dst"]))
        reference = look.link_reference if len(look.figures) == 2 else _other_links(ordered, own[pair])
        status = _link_status(look, t, look.transfers, reference, look.allow)
        if status != Status.PASS:
            look.links[(t["src"], t["dst"])] = status


def _between_good(look: FirstLook) -> list[dict[str, Any]]:
    return [t for t in look.transfers if t["src"] not in look.nodes and t["dst"] not in look.nodes]


MIN_OTHER_TRANSFERS = 2  # a link is compared with at least this many transfers of other node pairs


def _link_figures(between: list[dict[str, Any]]) -> tuple[list[float], dict[frozenset[int], list[float]]]:
    """The transfers between nodes not suspected: every figure sorted, and each node pair's own figures."""
    own: dict[frozenset[int], list[float]] = {}
    for t in between:
        own.setdefault(frozenset((t["src"], t["dst"])), []).append(t["gbps"])
    return sorted(t["gbps"] for t in between), own


def _other_links(ordered: list[float], own: list[float]) -> compare.Reference | None:
    """What a link is judged against: the median of the transfers between other pairs of nodes not suspected
    (`ordered`, sorted, less the link's `own`), never a median its own transfers are in (with three nodes and
    one slow, the two directions of the one good pair would be judged against each other). None where too
    few other pairs were measured."""
    if len(ordered) - len(own) < MIN_OTHER_TRANSFERS:
        return None
    value = median_without(ordered, own)
    return compare.Reference(value, f"median of {len(ordered) - len(own)} transfers between other pairs not suspected")


def median_without(ordered: list[float], removed: list[float]) -> float:
    """The median of a sorted list with a few of its values taken out (each once per time it is given), without
    copying the list: the removed values' places shift the middle indexes."""
    places: list[int] = []
    for value in sorted(removed):
        place = bisect.bisect_left(ordered, value)
        while place in places:
            place += 1
        places.append(place)
    remaining = len(ordered) - len(places)

    def nth(n: int) -> float:
        for place in places:
            if place <= n:
                n += 1
        return ordered[n]

    return (nth((remaining - 1) // 2) + nth(remaining // 2)) / 2


def _link_status(
    look: FirstLook,
    t: dict[str, Any],
    measured: list[dict[str, Any]],
    reference: compare.Reference | None,
    allow: compare.Allowance,
) -> Status:
    """A transfer against the links' reference (with two nodes: against the other direction, as the slow end
    cannot be told; with no other pair to compare: against nothing but), and against the absolute reference."""
    if len(look.figures) == 2:
        back = next((u["gbps"] for u in measured if (u["src"], u["dst"]) == (t["dst"], t["src"])), t["gbps"])
        reference = compare.Reference(max(back, t["gbps"]), "the other direction")
    status = compare.judge(t["gbps"], reference, allow, look.fractions)[0] if reference else Status.PASS
    return status if look.majority else worst([status, _absolute(look, t["gbps"], allow)])


def retest_rounds(look: FirstLook) -> list[list[Pair]]:
    """Each suspect link measured again, each suspect node against a distinct good node (worst first), and a
    few good pairs beside them (in a round of their own where every good node is a partner), so a re-tested
    pair is judged against good pairs measured at the same time, under the same load; where no two good nodes
    are free of the suspect links for that, each link's ends against a third good node (its controls); as
    many rounds of disjoint pairs as that takes (rarely more than two). The passes go round every round in
    turn, so every round is measured in the same stretch of time."""
    links = list(dict.fromkeys(tuple(sorted(pair)) for pair in look.links))
    ends = {node for pair in links for node in pair}
    nodes = sorted(look.nodes, key=lambda n: look.figures[n])
    good = look.good
    controls = [c for c in link_controls(links, good) if c not in links] if len(set(good) - ends) < 2 else []
    rounds: list[list[Pair]] = []
    while (links or nodes or controls) and len(rounds) < MAX_RETEST_ROUNDS:
        used: set[int] = set()
        pairs = _disjoint(links, used)
        for node in list(nodes):
            partner = next((g for g in good if g not in used), None)
            if partner is None:
                break
            pairs.append((node, partner))
            used |= {node, partner}
            nodes.remove(node)
        pairs += _disjoint(controls, used)
        if not pairs:
            break
        free = [g for g in good if g not in used and g not in ends][: 2 * REFERENCE_PAIRS]
        rounds.append(pairs + list(zip(free[0::2], free[1::2], strict=False)))
    if rounds and not any(set(pair) <= set(good) - ends for r in rounds for pair in r):
        # Every good node was a partner: good pairs in a round of their own, measured now, not in the first look.
        spare = [g for g in good if g not in ends][: 2 * REFERENCE_PAIRS]
        rounds.append(list(zip(spare[0::2], spare[1::2], strict=False)))
    return [r for r in rounds if r]


def _disjoint(wanted: list[Pair], used: set[int]) -> list[Pair]:
    """The wanted pairs that share no node with `used` or with each other, taken out of `wanted` (in order)."""
    taken = []
    for a, b in list(wanted):
        if not {a, b} & used:
            taken.append((a, b))
            used |= {a, b}
            wanted.remove((a, b))
    return taken


def link_controls(links: list[Pair], good: list[int]) -> list[Pair]:
    """For each suspect link, both its ends against one good node outside it (one that is no suspect link's
    end where there is one): what the same two nodes reach with another node, measured in the same re-test.
    A load on the machine then slows the link and its controls alike; a slow link is slow between two nodes
    that are fast with a third."""
    ends = {node for pair in links for node in pair}
    controls: list[Pair] = []
    for a, b in links:
        third = [g for g in good if g not in (a, b)]
        if not third:
            continue
        c = next((g for g in third if g not in ends), third[0])
        controls += [p for p in ((min(a, c), max(a, c)), (min(b, c), max(b, c))) if p not in controls]
    return controls


@dataclass
class Named:
    """What the re-test made of one suspect: its status, whether the re-test agreed, the figure it was judged
    by (with its reference and allowance), and the words for the first look and the re-test."""

    status: Status
    confirmed: bool | None
    value: float
    reference: compare.Reference
    allow: compare.Allowance
    first: str
    again: str

    @property
    def summary(self) -> str:
        return f"{self.first}; {self.again}"


@dataclass
class Retest:
    """The re-test's measurements, and what a re-tested pair is judged against: the good pairs measured the
    same way in the same re-test, else (none could be: fewer than two good nodes) the good nodes' own
    figures from the first look."""

    measured: dict[Pair, dict[str, Any]]
    good_pairs: list[float]
    sigma: float
    tests: int

    def reference(self, look: FirstLook) -> compare.Reference:
        if self.good_pairs:
            return compare.median_reference(self.good_pairs, "good pairs re-tested alongside")
        good = [look.figures[n] for n in look.good]
        return compare.median_reference(good or list(look.figures.values()), "good nodes' own figures in the ring")

    @property
    def allow(self) -> compare.Allowance:
        """Two figures of like noise compared: the ratio spreads sqrt(1 + 1/m) times as wide as one figure,
        m the figures behind the reference."""
        return self._allowance(CONFIRM_RATE)

    @property
    def straggler_allow(self) -> compare.Allowance:
        """The same, at the rate a straggler is confirmed at (STRAGGLER_RATE)."""
        return self._allowance(STRAGGLER_RATE)

    def _allowance(self, rate: float) -> compare.Allowance:
        behind = max(1, len(self.good_pairs))
        return compare.allowance(
            self.sigma * math.sqrt(1 + 1 / behind), self.tests, "between passes, for a ratio of two figures", rate
        )

    def noise_explains(self, status: Status, value: float, reference: compare.Reference, look: FirstLook) -> bool:
        """A straggler's re-test within the straggler's allowance of its reference: noise may explain it."""
        judged = compare.judge(value, reference, self.straggler_allow, look.fractions)[0]
        return status == Status.WARN and judged == Status.PASS


def _directions(measured: dict[Pair, dict[str, Any]], look: FirstLook) -> float:
    """The re-test's own noise: how far the two directions of a pair differ (they run one after the other,
    so a load that comes and goes within a round shows there), over the pairs that are not a suspect link
    and touch no clearly slow node (either may be slow one way only)."""
    slow = look.clearly_slow
    links = {frozenset(pair) for pair in look.links}
    both = [
        (measured[(a, b)]["gbps"], measured[(b, a)]["gbps"])
        for a, b in measured
        if a < b and (b, a) in measured and not {a, b} & slow and frozenset((a, b)) not in links
    ]
    if len(both) < MIN_DIRECTION_PAIRS:
        return 0.0  # one pair's two directions are one difference, not a spread (a load on one core, 9x)
    return compare.sigma_between(both) or 0.0


MIN_DIRECTION_PAIRS = 3  # pairs whose two directions say how noisy the re-test was


def pair_figure(measured: dict[Pair, dict[str, Any]], a: int, b: int) -> float:
    """What two nodes measured together: the slower of the two directions."""
    return min(measured[(a, b)]["gbps"], measured[(b, a)]["gbps"])


def confirm(look: FirstLook, transfers: list[dict[str, Any]]) -> tuple[dict[int, Named], dict[Pair, Named]]:
    """Every suspect node and link after the re-test: named (the re-test agreed, at its verdict), unconfirmed,
    or cleared (slow only with nodes named slow)."""
    measured = {(t["src"], t["dst"]): t for t in transfers}
    suspects = set(look.nodes) | {n for pair in look.links for n in pair}
    good_pairs = [
        pair_figure(measured, a, b) for a, b in measured if a < b and (b, a) in measured and not {a, b} & suspects
    ]
    sigma = max(look.allow.sigma, spread(transfers, look.clearly_slow)[0] or 0.0, _directions(measured, look))
    retest = Retest(measured, good_pairs, sigma, len(look.nodes) + len(look.links))
    nodes = {node: _confirm_node(look, node, retest) for node in look.nodes}
    slow = {node for node, named in nodes.items() if named.confirmed}
    for node, named in nodes.items():
        peers = _slow_peers(look, node)
        if peers and peers <= slow - {node} and named.status != Status.FAIL:
            # Its first look is explained by its slow neighbours: only a failing re-test still names it.
            named.status, named.confirmed = Status.PASS, False
            named.first = f"slow only with {', '.join(look.names[n] for n in sorted(peers))} (named slow)"
    links = {pair: _confirm_link(look, pair, retest) for pair in look.links}
    return nodes, links


def _confirm_node(look: FirstLook, node: int, retest: Retest) -> Named:
    value = look.figures[node]
    first = f"{value:.3g} GB/s at best ({value / look.reference.value:.2f}x) in the ring"
    allow = retest.allow
    partner = next((b for a, b in retest.measured if a == node), None)
    if partner is None:
        return Named(Status.WARN, False, value, look.reference, allow, first, "not re-tested: no good node was free")
    again = pair_figure(retest.measured, node, partner)
    reference = retest.reference(look)
    status, ratio = compare.judge(again, reference, allow, look.fractions)
    ring_status, ring_ratio = compare.judge(again, look.reference, allow, look.fractions)
    if SEVERITY[ring_status] < SEVERITY[status]:
        # Slow only against a reference taken in a quieter moment: fine against what the ring's good nodes did.
        status, ratio, reference = ring_status, ring_ratio, look.reference
    if not look.majority:
        status = worst([status, _absolute(look, again, allow)])
    said = f"{again:.3g} GB/s ({ratio:.2f}x) re-tested against {look.names[partner]}"
    if retest.noise_explains(status, again, reference, look):
        status, allow = Status.PASS, retest.straggler_allow
    if status == Status.PASS:
        return Named(Status.WARN, False, again, reference, allow, first, f"{said}: unconfirmed, not drained")
    return Named(status, True, again, reference, allow, first, f"{said}: confirmed")


def _slow_peers(look: FirstLook, node: int) -> set[int]:
    """The nodes it had a slow transfer with in the first look."""
    return {
        t["dst"] if t["src"] == node else t["src"]
        for t in look.transfers
        if node in (t["src"], t["dst"])
        and compare.judge(t["gbps"], look.link_reference, look.allow, look.fractions)[0] != Status.PASS
    }


def _confirm_link(look: FirstLook, pair: Pair, retest: Retest) -> Named:
    first_value = next(t["gbps"] for t in look.transfers if (t["src"], t["dst"]) == pair)
    first = f"{first_value:.3g} GB/s in the ring"
    allow = retest.allow
    references = _link_references(look, pair, retest)
    shown = references[0] or look.absolute or look.link_reference  # what the report names as the reference
    again = retest.measured.get(pair)
    if again is None:
        return Named(Status.WARN, False, first_value, shown, allow, first, "not re-tested")
    measured = list(retest.measured.values())
    # The milder verdict: the transfers alongside may have run in a quieter moment, or the ring in one.
    status, shown = min(
        ((_link_status(look, again, measured, reference, allow), reference or shown) for reference in references),
        key=lambda judged: SEVERITY[judged[0]],
    )
    said = f"{again['gbps']:.3g} GB/s re-tested"
    if len(look.figures) > 2 and retest.noise_explains(status, again["gbps"], shown, look):
        status, allow = Status.PASS, retest.straggler_allow
    if status == Status.PASS:
        return Named(Status.WARN, False, again["gbps"], shown, allow, first, f"{said}: unconfirmed")
    return Named(status, True, again["gbps"], shown, allow, first, f"{said}: confirmed")


def _link_references(look: FirstLook, pair: Pair, retest: Retest) -> list[compare.Reference | None]:
    """What a re-tested link is judged against: the transfers between good nodes re-tested alongside it (its
    ends' controls and the good pairs: the same stretch of time) and the ring's links; where the re-test
    measured none, the ring's other links alone (never a median the link's own transfers are in)."""
    suspect = {frozenset(p) for p in look.links}
    now = [
        t["gbps"]
        for (a, b), t in retest.measured.items()
        if a not in look.nodes and b not in look.nodes and frozenset((a, b)) not in suspect
    ]
    if now:
        alongside = compare.median_reference(now, "transfers between good nodes re-tested alongside")
        return [alongside, look.link_reference]
    ordered, own = _link_figures(_between_good(look))
    return [_other_links(ordered, own.get(frozenset(pair), []))]


SLOW_NODE = Remediation(
    "A node slow to every peer has a degraded NIC, cable, switch port or a rate limit of its own; an unconfirmed "
    "one was slow once and fine against a good node (noise, or a passing load): watch it, do not drain it.",
    ["ibstat", "grep -H . /sys/class/net/*/speed  # each interface's speed in Mb/s", "tc qdisc show"],
)
SLOW_LINK = Remediation(
    "A link slow between two otherwise fast nodes is a cable, a switch port or a route between them.",
    ["ibdiagnet", "perfquery"],
)


def results(look: FirstLook, nodes: dict[int, Named], links: dict[Pair, Named], what: str, metric: str) -> list[Result]:
    """The node result (a row per node, the worst named first in its summary) and, where any, the link result.
    `what` says what was measured; `metric` names a node's figure."""
    rows = [_node_row(look, node, nodes.get(node), metric) for node in sorted(look.figures)]
    head = f"{len(look.figures)} nodes, {what}; reference {look.reference.value:.3g} GB/s ({look.reference.source})"
    if look.absolute:
        head += f" and {look.absolute.value:.3g} GB/s x {look.floor:g} ({look.absolute.source})"
    head += f"; {look.allow.describe()}"
    if compare.unstable(look.allow, look.fractions):
        head += f"; unstable: too noisy to tell a node at {look.fractions.fail:g}x from noise"
    out = [_node_result(rows, head, look)]
    if links:
        out.append(_link_result(look, links, metric))
    return out


def _node_result(rows: list[Row], head: str, look: FirstLook) -> Result:
    status = worst([r.status for r in rows])
    if compare.unstable(look.allow, look.fractions) and status == Status.PASS:
        status = Status.WARN
    bad = sorted((r for r in rows if r.status != Status.PASS), key=_worst_row)
    named = "; ".join(f"{r.where}: {r.summary}" for r in bad[:3]) + (
        f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
    )
    noisy = "; unstable: too noisy to judge" if compare.unstable(look.allow, look.fractions) else ""
    summary = f"{named} ({len(look.figures)} nodes{noisy})" if bad else head
    if look.majority:
        status = Status.FAIL
        names = ", ".join(look.names[n] for n in look.majority[:5])
        summary = (
            f"most nodes ({len(look.majority)} of {len(look.figures)}: {names}) are below the absolute reference: "
            f"the fabric or the reference is wrong, and no node is drained for it; {summary}"
        )
    remedy = SLOW_NODE if bad or look.majority else None
    return Result(status, summary, remediation=remedy, rows=rows, detail=head if bad or look.majority else None)


def _worst_row(row: Row) -> tuple[int, float]:
    ratio = next((m.value / m.expected for m in row.metrics if m.expected), 1.0)
    return (-SEVERITY[row.status], ratio)


def _node_row(look: FirstLook, node: int, named: Named | None, metric: str) -> Row:
    name = look.names[node]
    if named is not None:
        figure = compare.figure(metric, named.value, "GB/s", named.reference, named.allow, {"node": name})
        return Row(named.status, named.summary, node=name, metrics=[figure], confirmed=named.confirmed, basis="figure")
    value = look.figures[node]
    figure = compare.figure(metric, value, "GB/s", look.reference, look.allow, {"node": name})
    text = f"{value:.3g} GB/s at best, {value / look.reference.value:.2f}x the reference"
    if node in look.majority:
        return Row(
            Status.WARN,
            f"{text}; below {look.floor:g}x the absolute reference, as are most nodes",
            node=name,
            metrics=[figure],
            basis="figure",
        )
    return Row(Status.PASS, text, node=name, metrics=[figure], basis="figure")


def _link_result(look: FirstLook, links: dict[Pair, Named], metric: str) -> Result:
    rows = [
        Row(
            named.status,
            named.summary,
            node=look.names[src],
            peer=look.names[dst],
            confirmed=named.confirmed,
            metrics=[compare.figure(metric, named.value, "GB/s", named.reference, named.allow, {})],
            basis="figure",
        )
        for (src, dst), named in sorted(links.items())
    ]
    note = " (with two nodes the slow end cannot be told)" if len(look.figures) == 2 else ""
    shown = "; ".join(f"{r.where}: {r.summary}" for r in rows[:3])
    return Result(
        worst([r.status for r in rows]), f"slow link {shown}{note}", aspect="links", rows=rows, remediation=SLOW_LINK
    )


# --- a pair measurement over every node, its suspects re-tested, judged on rank 0 ------------------------
def confirmed_pairs(
    first: Any,
    again: Callable[[dict[str, Any]], Any],
    fractions: compare.Fractions,
    reference: tuple[compare.Reference | None, float],
    what: str,
    metrics: tuple[str, str] = ("node_link_bandwidth", "link_bandwidth"),
) -> list[Result] | Result:
    """A pair measurement over every node (`first`, the outcome of a worker whose ranks return `node`, `sent`,
    `wrong` and `sizes` as cluster.links' does) judged against the nodes' figures and `reference` (an absolute
    one, and the fraction of it that passes); its suspects re-tested by `again(plan)`, a second attempt of the
    same worker with `plan` as rank 0's additions to its parameters (its outcome, or the Result saying which
    node failed it); the verdicts. `metrics` name a node's figure and one transfer's."""
    names = {m.rank: m.name for m in first.members}
    transfers, sizes, wrong = gathered(first)
    if wrong:
        return corrupted(wrong, names)
    look = first_look(transfers, names, fractions, *reference)
    rounds = retest_rounds(look)
    failed: list[Result] = []
    retest: list[dict[str, Any]] = []
    if rounds:
        outcome = again({"rounds": rounds, "pair_sizes": retest_sizes(sizes, rounds), "passes": RETEST_PASSES})
        if isinstance(outcome, Result):
            failed.append(outcome)  # the suspects stay unconfirmed; the node that failed the re-test is named
        else:
            retest, _, wrong = gathered(outcome)
            if wrong:
                return corrupted(wrong, names)
    nodes, slow_links = confirm(look, retest)
    said = f"{len(transfers)} {what}" + (f", {len(retest)} re-tested" if retest else "")
    judged = results(look, nodes, slow_links, said, metrics[0])
    judged[0].metrics = [_transfer_metric(metrics[1], t, names, "first") for t in transfers] + [
        _transfer_metric(metrics[1], t, names, "retest") for t in retest
    ]
    return judged + failed


def retest_sizes(sizes: dict[str, int], rounds: list[list[Pair]]) -> dict[str, int]:
    """A re-tested pair's transfer size: its own in the first look where it was measured there (so its figure
    is comparable with the ring's), else the size of its slower node's fastest pair (what the probe found
    that node can move in its share of the budget). Never the smallest size either node had: a healthy
    neighbour of a slow node would be re-tested at the slow pair's size, and short transfers read slower."""
    largest: dict[int, int] = {}
    for key, size in sizes.items():
        for node in map(int, key.split("-")):
            largest[node] = max(largest.get(node, size), size)
    planned = {}
    for pairs_ in rounds:
        for a, b in pairs_:
            key = f"{min(a, b)}-{max(a, b)}"
            planned[key] = sizes.get(key, min(largest[a], largest[b]))
    return planned


def gathered(outcome: Any) -> tuple[list[dict[str, Any]], dict[str, int], list[tuple[int, int]]]:
    """Every transfer, the sizes used, and the (src, dst) of every delivery that arrived wrong."""
    transfers = [t for r in outcome.ranks for t in r.data["sent"]]
    sizes = next(r.data["sizes"] for r in outcome.ranks)
    wrong = [(int(src), r.data["node"]) for r in outcome.ranks for src, n in r.data["wrong"].items() if n]
    return transfers, sizes, wrong


def _transfer_metric(name: str, t: dict[str, Any], names: dict[int, str], stage: str) -> Metric:
    labels = {"src": names[t["src"]], "dst": names[t["dst"]], "stage": stage}
    return Metric(name, round(t["gbps"], 4), "GB/s", labels=labels)


def corrupted(wrong: list[tuple[int, int]], names: dict[int, str]) -> Result:
    """Deliveries that arrived wrong: the link between the two (sender, wire or receiver) corrupts data."""
    rows = [
        Row(Status.FAIL, "data arrived corrupted", node=names[src], peer=names[dst], confirmed=None, basis="data")
        for src, dst in sorted(set(wrong))
    ]
    text = ", ".join(f"{names[s]} -> {names[d]}" for s, d in sorted(set(wrong)))
    return Result(Status.FAIL, f"data arrived corrupted on {text}", aspect="links", rows=rows)
