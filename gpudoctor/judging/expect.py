"""What a measured figure should be on this hardware, and the verdict. Pure functions of facts.

Every expectation carries its source, so a report says what a figure was judged against: the GPU
model table, the PCIe or NVLink link the facts show, a saved baseline, or a configured floor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpudoctor.judging import references
from gpudoctor.judging.hardware import gpu_model
from gpudoctor.model import Metric, Remediation, Result, Row, Status, from_rows


@dataclass
class Expectation:
    """A figure a healthy system reaches, and where that was published or measured. A published healthy figure
    is judged by the rule of gpudoctor.judging.references (pass at 0.85 of it, fail below the check's floor, a warning
    between); a saved baseline or a configured figure has `floor` set: one line, pass at or above it."""

    value: float
    source: str
    floor: float | None = None
    of: str = ""  # what the figure is, as a verdict line says it: "a healthy H100 SXM", "the saved baseline"

    @property
    def said(self) -> str:
        """What the figure is a figure of, in a few words (`of`, else what its kind makes it)."""
        if self.of:
            return self.of
        if self.floor is not None:
            return "the saved baseline" if self.source.startswith("baseline") else "the configured minimum"
        return "a healthy figure"

    def lines(self, floor: float) -> tuple[float, float]:
        """(pass line, fail line)."""
        if self.floor is not None:
            return self.value * self.floor, self.value * self.floor
        return references.lines(self.value, floor)


@dataclass
class Peak:
    """The most the hardware can deliver (a datasheet or link figure): a measurement far above it is wrong."""

    value: float
    source: str


# A figure this far above the datasheet is a timing error, not a fast GPU. Factory-overclocked boards and boost
# clocks measure up to 1.08x their datasheet (an RTX 4090 at 178.8 of 165.2 TFLOP/s fp16, references.toml);
# tests/test_references.py checks that no published healthy figure comes near this margin.
PEAK_MARGIN = 1.25


def measurement_error(value: float, peak: Peak | None) -> bool:
    """True for a figure more than PEAK_MARGIN above the hardware's peak: the timing is wrong, not the GPU fast."""
    return peak is not None and value > peak.value * PEAK_MARGIN


def verdict(
    name: str, value: float, unit: str, expected: Expectation | None, floor: float, peak: Peak | None = None
) -> tuple[Status, Metric]:
    """Fail above the peak (a measurement error, never a pass); else pass at or above the pass line, warn down
    to the fail line, fail below it (Expectation.lines). The metric carries both lines' reference as numbers."""
    if peak is not None and measurement_error(value, peak):
        return Status.FAIL, Metric(
            name,
            round(value, 3),
            unit,
            expected=round(peak.value * PEAK_MARGIN, 4),
            comparison="<=",
            expected_source=f"measurement error: above {PEAK_MARGIN:g} x the {peak.value:.4g} {unit} peak "
            f"({peak.source})",
            reference=round(peak.value, 4),
            reference_source=peak.source,
            reference_of="the hardware's peak: a measurement error",
        )
    if expected is None:
        return Status.PASS, Metric(name, round(value, 3), unit)
    passing, failing = expected.lines(floor)
    metric = Metric(
        name,
        round(value, 3),
        unit,
        expected=round(passing, 4),
        comparison=">=",
        expected_source=_lines_said(expected, passing, failing, unit),
        reference=round(expected.value, 4),
        reference_source=expected.source,
        reference_of=expected.said,
    )
    status = Status.PASS if value >= passing else Status.WARN if value >= failing else Status.FAIL
    return status, metric


def _lines_said(expected: Expectation, passing: float, failing: float, unit: str) -> str:
    if passing == failing:
        return f"{passing / expected.value:.2g} x {expected.value:.4g} {unit}, {expected.source}"
    return (
        f"pass >= {passing / expected.value:.2g} x healthy {expected.value:.4g} {unit}, "
        f"fail < {failing:.4g} ({failing / expected.value:.2g} x)"
    )


def gpu_verdict(
    figure: str, value: float, unit: str, expected: Expectation | None, floor: float, peak: Peak | None
) -> tuple[Status, Metric]:
    """`verdict` for one GPU's figure; the metric goes on the GPU's row, which says which GPU."""
    return verdict(figure, value, unit, expected, floor, peak)


Measured = list[tuple[dict[str, Any], dict[str, Any]]]


def judge_per_gpu(
    measured: Measured,
    judge_one: Callable[[dict[str, Any], dict[str, Any]], Row],
    ok_summary: str,
    remediation: Remediation,
) -> Result:
    """Each GPU's (measurement, facts) pair judged on its own into one row that carries its figures."""
    return from_rows([judge_one(m, gpu) for m, gpu in measured], ok_summary, remediation)


def pick(*candidates: Expectation | None) -> Expectation | None:
    """The first expectation that exists: a baseline beats a configured floor beats the hardware table."""
    return next((c for c in candidates if c is not None), None)


def from_setting(value: float, name: str) -> Expectation | None:
    """A figure the config sets as the minimum (`min_busbw_gbps`): one line, exactly there; none when unset."""
    return Expectation(value, f"config {name}", floor=1.0) if value else None


def model_peak(gpu: dict[str, Any], key: str) -> Peak | None:
    """The GPU model's datasheet figure `key` as a ceiling (a MIG slice's share of it)."""
    model = gpu_model(gpu)
    if not model or key not in model:
        return None
    if gpu.get("mig_slice"):
        share = slice_share(gpu, key)
        return Peak(model[key] * share[0], f"{model['model']} datasheet, {share[1]}") if share else None
    return Peak(float(model[key]), f"{model['model']} datasheet")


def slice_share(gpu: dict[str, Any], key: str) -> tuple[float, str] | None:
    """A MIG slice's share of its GPU for the datasheet figure `key`: memory bandwidth by its share of the
    memory (a slice owns its memory controllers), compute by its share of the SMs (the table's SM count for
    the whole GPU); None where a share cannot be told."""
    mig = gpu.get("mig_slice") or {}
    if key == "hbm_gbps":
        part, whole, unit = mig.get("memory_mib"), gpu.get("memory_total_mib"), "MiB"
    else:
        part, whole, unit = mig.get("sms"), (gpu_model(gpu) or {}).get("sms"), "SMs"
    if not part or not whole:
        return None
    return part / whole, f"MIG {mig.get('profile')} slice: {part}/{whole} {unit}"


def unknown_model_note(gpu: dict[str, Any], key: str = "hbm_gbps") -> str:
    """Said of a GPU the hardware table does not know, or a MIG slice whose share of the GPU's figure `key`
    cannot be told: its figures are judged against a baseline only."""
    mig = gpu.get("mig_slice")
    if mig and gpu_model(gpu) is not None:
        if slice_share(gpu, key) is not None:
            return ""
        return f"; a MIG {mig['profile']} slice: its share of the GPU is unknown, judged against a saved baseline only"
    if gpu_model(gpu) is not None:
        return ""
    return f"; {gpu.get('name') or 'this GPU'} is not in the hardware table: judged against a saved baseline only"


# gpudoctor's own figures and the published figure each is judged against (references.toml)
FIGURE_OF = {
    "bf16_tflops": "matmul_bf16_tflops",
    "tf32_tflops": "matmul_tf32_tflops",
    "fp16_tflops": "matmul_fp16_tflops",
    "hbm_gbps": "hbm_gbps",
}


def model_expectation(gpu: dict[str, Any], key: str) -> Expectation | None:
    """What a healthy GPU of this model measures for the datasheet figure `key`: the published measurement
    (references.toml), else the datasheet x the measured ratio of the models that have both; a MIG slice's
    share of it."""
    found = references.model_figure(FIGURE_OF[key], gpu_model(gpu))
    if found is None:
        return None
    if gpu.get("mig_slice"):
        share = slice_share(gpu, key)
        if share is None:
            return None
        return Expectation(found.value * share[0], f"{found.cite()} x {share[0]:.3g} ({share[1]})", of=_slice_of(found))
    return Expectation(found.value, found.cite(), of=f"a healthy {found.model}")


def _slice_of(found: references.Healthy) -> str:
    return f"a healthy {found.model}'s share for this MIG slice"


def sustained_expectation(gpu: dict[str, Any]) -> Expectation | None:
    """What a healthy GPU of this model holds in bf16 with every GPU loaded for a minute (settled under its power
    limit): the published sustained measurement, else its burst figure scaled as the models that have both
    measured (references.sustained_figure); a MIG slice's share of it."""
    found = references.sustained_figure("matmul_bf16_tflops_sustained", gpu_model(gpu))
    if found is None:
        return None
    if gpu.get("mig_slice"):
        share = slice_share(gpu, "bf16_tflops")
        if share is None:
            return None
        return Expectation(found.value * share[0], f"{found.cite()} x {share[0]:.3g} ({share[1]})", of=_slice_of(found))
    return Expectation(found.value, found.cite(), of=f"a healthy {found.model}, sustained")
