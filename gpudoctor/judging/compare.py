"""Figures against a reference, allowing for the noise measured in the same run (pure; no torch).

A verdict that names a node drains it, so it must hold under noise at 2 nodes and at 1,000:
- The reference is the hardware's own expectation where one exists (a configured figure, a saved baseline,
  the NIC's rate), else the median of per-node figures, which a slow minority cannot move.
- The allowance: a figure is outside noise only below exp(-z * sigma) x the reference. sigma is the spread of
  one figure in log terms, measured in this run (between two passes of the same measurement, or across the
  nodes); z grows with the number of figures judged at once, so the chance that noise alone names any one
  of them stays at `family_rate` (a Bonferroni bound) whether 3 or 3,000 figures are judged.
- Then the fractions: below `straggler` x the reference a figure warns, below `fail` x it fails, in both
  cases only where it is also below the allowance. Where the allowance is below the fail fraction the
  spread is too wide to tell a node at that fraction from noise, and the report says so (unstable).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from gpudoctor.model import Metric, Status

FAMILY_RATE = 0.01  # the chance, per judging, that noise alone names any one healthy figure
MIN_SIGMA = 0.02  # no measurement is steadier than this, whatever a quiet run suggests
MAD_TO_SIGMA = 1.4826  # the median absolute deviation of a normal distribution, in standard deviations
MIN_ACROSS = 5  # the fewest figures whose spread across nodes says anything
WINSORISED_AT_2_5 = 0.979  # the variance of a standard normal clipped at +-2.5


@dataclass(frozen=True)
class Reference:
    """What a figure is judged against, and where that comes from."""

    value: float
    source: str


@dataclass(frozen=True)
class Allowance:
    """How far below the reference noise alone can take a figure: exp(-z * sigma)."""

    sigma: float
    z: float
    source: str

    @property
    def bound(self) -> float:
        return math.exp(-self.z * self.sigma)

    def describe(self) -> str:
        return f"noise allowance {self.bound:.2f}x ({self.z:.1f} sigma, sigma {self.sigma:.3f} {self.source})"


@dataclass(frozen=True)
class Fractions:
    straggler: float
    fail: float


PEER_GPUS = Fractions(straggler=0.9, fail=0.8)  # GPUs of one node against the median of their peers


def allowance(sigma: float | None, tests: int, source: str, family_rate: float = FAMILY_RATE) -> Allowance:
    """The allowance for `tests` figures judged at once, each with log-spread `sigma` (at least MIN_SIGMA)."""
    z = statistics.NormalDist().inv_cdf(1 - family_rate / max(1, tests))
    return Allowance(max(sigma or 0.0, MIN_SIGMA), z, source)


def sigma_between(pairs: list[tuple[float, float]]) -> float | None:
    """The log-spread of one measurement from pairs of repeats of the same thing (two passes of a transfer):
    the median absolute difference of their logarithms, scaled to a standard deviation. Robust: a few wild
    pairs do not move it, and a slow node (slow in both passes) adds nothing to it. None without pairs."""
    diffs = [abs(math.log(a) - math.log(b)) for a, b in pairs if a > 0 and b > 0]
    return MAD_TO_SIGMA * statistics.median(diffs) / math.sqrt(2) if diffs else None


def sigma_across(values: list[float]) -> float | None:
    """The log-spread of figures across nodes (robust while a minority are slow), or None where there are
    too few to say."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < MIN_ACROSS:
        return None
    middle = statistics.median(logs)
    return robust_spread([x - middle for x in logs])


def robust_spread(deviations: list[float]) -> float:
    """A standard deviation that few outliers move but that is nearly as steady as the plain one: deviations
    clipped at 2.5 times the median absolute deviation's sigma, then their root mean square (a winsorised
    estimate; a normal sample clipped there keeps 97.9 % of its variance, corrected for)."""
    mad = MAD_TO_SIGMA * statistics.median(abs(d) for d in deviations)
    limit = 2.5 * mad
    clipped = [max(-limit, min(limit, d)) for d in deviations]
    return math.sqrt(sum(d * d for d in clipped) / len(clipped) / WINSORISED_AT_2_5)


def median_reference(values: list[float], what: str) -> Reference:
    return Reference(statistics.median(values), f"median of {len(values)} {what}")


def upper_quartile_reference(values: list[float], what: str) -> Reference:
    """The 75th percentile: it stays with the healthy figures while fewer than three quarters are low."""
    if len(values) < 2:
        return Reference(values[0], f"the only {what}")
    upper = statistics.quantiles(values, n=4, method="inclusive")[2]
    return Reference(upper, f"upper quartile of {len(values)} {what}")


def judge(value: float, reference: Reference, allow: Allowance, fractions: Fractions) -> tuple[Status, float]:
    """The figure's status and its ratio to the reference."""
    ratio = value / reference.value if reference.value > 0 else 1.0
    if ratio < min(fractions.fail, allow.bound):
        return Status.FAIL, ratio
    if ratio < min(fractions.straggler, allow.bound):
        return Status.WARN, ratio
    return Status.PASS, ratio


def unstable(allow: Allowance, fractions: Fractions) -> bool:
    """The spread is too wide to tell a figure at the fail fraction from noise."""
    return allow.bound < fractions.fail


def figure(
    name: str, value: float, unit: str, reference: Reference, allow: Allowance, labels: dict[str, str | int]
) -> Metric:
    """A judged figure as a metric: its reference as the expectation, and how it was judged as the source."""
    return Metric(
        name,
        round(value, 4),
        unit,
        expected=round(reference.value, 4),
        expected_source=f"{reference.source}; {allow.describe()}",
        labels=labels,
    )
