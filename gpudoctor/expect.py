"""What a measured figure should be on this hardware, and the verdict. Pure functions of facts.

Every expectation carries its source, so a report says what a figure was judged against: the GPU
model table, the PCIe or NVLink link the facts show, a saved baseline, or a configured floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudoctor.hardware import efficiency, gpu_model, nvlink_gbps, pcie_gbps
from gpudoctor.model import Metric, Status


@dataclass
class Expectation:
    """A figure a healthy system reaches; `floor` (when set) overrides the check's pass fraction."""

    value: float
    source: str
    floor: float | None = None


@dataclass
class Peak:
    """The most the hardware can deliver (a datasheet or link figure): a measurement far above it is wrong."""

    value: float
    source: str


PEAK_MARGIN = 1.1  # boost clocks and rounding on datasheets stay within this; a figure above it is a timing error


def measurement_error(value: float, peak: Peak | None) -> bool:
    """True for a figure more than 10% above the hardware's peak: the timing is wrong, not the GPU fast."""
    return peak is not None and value > peak.value * PEAK_MARGIN


def verdict(
    name: str, value: float, unit: str, expected: Expectation | None, floor: float, peak: Peak | None = None
) -> tuple[Status, Metric]:
    """Fail above the peak (a measurement error, never a pass); else pass at or above `floor` x expected (DCGM
    judges at 0.75x of a known-good figure), else fail."""
    if peak is not None and measurement_error(value, peak):
        return Status.FAIL, Metric(
            name,
            round(value, 3),
            unit,
            expected=f"<= {peak.value * PEAK_MARGIN:.4g}",
            expected_source=f"measurement error: above {PEAK_MARGIN:g} x the {peak.value:.4g} {unit} peak "
            f"({peak.source})",
        )
    if expected is None:
        return Status.PASS, Metric(name, round(value, 3), unit)
    floor = expected.floor or floor
    minimum = expected.value * floor
    metric = Metric(
        name,
        round(value, 3),
        unit,
        expected=f">= {minimum:.4g}",
        expected_source=f"{floor:g} x {expected.value:.4g} {unit}, {expected.source}",
    )
    return (Status.PASS if value >= minimum else Status.FAIL), metric


def pick(*candidates: Expectation | None) -> Expectation | None:
    """The first expectation that exists: a baseline beats a configured floor beats the hardware table."""
    return next((c for c in candidates if c is not None), None)


def from_setting(value: float, name: str) -> Expectation | None:
    return Expectation(value, f"config {name}") if value else None


def active_nvlinks(gpu: dict[str, Any]) -> int:
    return sum(1 for link in gpu.get("nvlinks") or [] if link["active"])


def nvlink_generation(gpu: dict[str, Any]) -> int | None:
    versions = [link.get("version") for link in gpu.get("nvlinks") or [] if link["active"]]
    model = gpu_model(gpu.get("name"))
    return (model or {}).get("nvlink_gen") or (versions[0] if versions else None)


def pcie_link(gpu: dict[str, Any]) -> tuple[int | None, int | None]:
    """The link's capability (max generation and width), not its idle state."""
    link = gpu.get("pcie") or {}
    return link.get("max_gen") or link.get("gen"), link.get("max_width") or link.get("width")


def allreduce_expectation(gpus: list[dict[str, Any]], topology: dict[str, Any]) -> Expectation | None:
    """Large-message bus bandwidth a healthy node of this topology reaches with NCCL."""
    if len(gpus) < 2:
        return None
    if all(active_nvlinks(g) for g in gpus):
        per_gpu = min(nvlink_gbps(nvlink_generation(g), active_nvlinks(g)) or 0 for g in gpus)
        if per_gpu:
            links = min(active_nvlinks(g) for g in gpus)
            gen = nvlink_generation(gpus[0])
            return Expectation(
                per_gpu * efficiency("nvlink_allreduce"),
                f"NVLink {gen} x{links} per GPU ({per_gpu:g} GB/s) x {efficiency('nvlink_allreduce')}",
            )
    slowest = min((pcie_gbps(*pcie_link(g)) or 0, pcie_link(g)) for g in gpus)
    if not slowest[0]:
        return None
    p2p = topology.get("p2p_read") or []
    all_p2p = all(v in (None, 0) for row in p2p for v in row)
    kind = "pcie_allreduce_p2p" if all_p2p else "pcie_allreduce_no_p2p"
    gen, width = slowest[1]
    return Expectation(
        slowest[0] * efficiency(kind),
        f"PCIe Gen{gen} x{width} ({slowest[0]:g} GB/s), P2P {'on' if all_p2p else 'off'}, x {efficiency(kind)}",
    )


def pcie_copy_expectation(gpu: dict[str, Any]) -> Expectation | None:
    gen, width = pcie_link(gpu)
    theory = pcie_gbps(gen, width)
    if not theory:
        return None
    return Expectation(
        theory * efficiency("pcie_copy"), f"PCIe Gen{gen} x{width} ({theory:g} GB/s) x {efficiency('pcie_copy')}"
    )


def p2p_copy_expectation(a: dict[str, Any], b: dict[str, Any], p2p_ok: bool) -> Expectation | None:
    if active_nvlinks(a) and active_nvlinks(b):
        links = min(active_nvlinks(a), active_nvlinks(b))
        theory = nvlink_gbps(nvlink_generation(a), links)
        if theory:
            return Expectation(
                theory * efficiency("pcie_copy"), f"NVLink x{links} ({theory:g} GB/s) x {efficiency('pcie_copy')}"
            )
    base = pcie_copy_expectation(a)
    if base and not p2p_ok:
        return Expectation(base.value * 0.5, base.source + ", staged through host memory (no P2P) x 0.5")
    return base


def model_peak(gpu: dict[str, Any], key: str) -> Peak | None:
    """The GPU model's datasheet figure `key` as a ceiling."""
    model = gpu_model(gpu.get("name"))
    if not model or key not in model:
        return None
    return Peak(float(model[key]), f"{model['model']} datasheet")


def pcie_peak(gpu: dict[str, Any]) -> Peak | None:
    gen, width = pcie_link(gpu)
    theory = pcie_gbps(gen, width)
    return Peak(theory, f"PCIe Gen{gen} x{width}") if theory else None


def p2p_peak(a: dict[str, Any], b: dict[str, Any]) -> Peak | None:
    """The faster of NVLink between the pair and their PCIe links: a copy cannot beat both."""
    links = min(active_nvlinks(a), active_nvlinks(b))
    nvlink = nvlink_gbps(nvlink_generation(a), links) if links else None
    pcie = pcie_peak(a)
    if nvlink and (pcie is None or nvlink > pcie.value):
        return Peak(nvlink, f"NVLink x{links}")
    return pcie


def model_expectation(gpu: dict[str, Any], key: str, kind: str) -> Expectation | None:
    """The GPU model's datasheet figure `key` (hardware.toml), times what a healthy GPU reaches of it."""
    model = gpu_model(gpu.get("name"))
    if not model or key not in model:
        return None
    return Expectation(model[key] * efficiency(kind), f"{model['model']} datasheet {model[key]:g} x {efficiency(kind)}")
