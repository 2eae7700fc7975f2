"""What a copy should reach: host to GPU over its PCIe (or C2C) link, GPU to GPU over NVLink or PCIe. Pure
functions of facts."""

from __future__ import annotations

from typing import Any

from gpudoctor.judging import references
from gpudoctor.judging.expect import Expectation, Peak
from gpudoctor.judging.hardware import gpu_model, pcie_gbps
from gpudoctor.judging.routes import link_rate, nvlink_theory, nvlinks_between, pcie_link


def pcie_copy_expectation(gpu: dict[str, Any], way: str = "h2d") -> Expectation | None:
    """Pinned copies between host and GPU (`way` h2d or d2h): over NVLink-C2C on a Grace part, else its PCIe
    link; the model's published figure over that link (a full-width one), else the link's line rate x what
    published copies reach of theirs. None for a MIG slice (its share of the copy engines is not published)."""
    if gpu.get("mig_slice"):
        return None
    model = gpu_model(gpu) or {}
    if model.get("c2c_gbps"):
        link, theory, said, rate = "c2c", float(model["c2c_gbps"]), "NVLink-C2C", _c2c_theory
    else:
        gen, width = pcie_link(gpu)
        link, theory, said, rate = f"pcie{gen}", pcie_gbps(gen, width), f"PCIe Gen{gen} x{width}", _pcie_theory
        if not theory:
            return None
        model = model if width in (16, None) else {}  # a narrower link than the published figure's
    found = references.healthy(f"{way}_gbps", model.get("model"), ("link",), link=link)
    if found:
        return Expectation(found.value, found.cite(), of=f"a healthy {found.model} over {said}")
    ratio = references.theory_ratio(f"{way}_gbps", rate)
    if ratio is None:
        return None
    return Expectation(theory * ratio[0], f"{said} ({theory:g} GB/s) x {ratio[1]}", of=f"a healthy {said} link")


def _pcie_theory(row: dict[str, Any], model: dict[str, Any]) -> float | None:
    """The x16 line rate of the PCIe generation a published host copy states."""
    link = str(row.get("link") or "")
    generation = link[4:] if link.startswith("pcie") else ""
    return pcie_gbps(int(generation), 16) if generation.isascii() and generation.isdigit() else None


def _c2c_theory(row: dict[str, Any], model: dict[str, Any]) -> float | None:
    return float(model["c2c_gbps"]) if row.get("link") == "c2c" and model.get("c2c_gbps") else None


def p2p_copy_expectation(a: dict[str, Any], b: dict[str, Any], p2p_ok: bool) -> Expectation | None:
    """A copy from one GPU to another: over the NVLinks they share (the model's published figure where every
    link is used, else the links' line rate x what published NVLink copies reach), else PCIe."""
    links, how = nvlinks_between(a, b)
    theory = link_rate(a, links) if links else None
    if theory:
        model = gpu_model(a) or {}
        found = references.healthy("p2p_gbps", model.get("model"), ("link",), link="nvlink")
        if found and links == model.get("nvlink_links"):
            return Expectation(found.value, found.cite(), of=f"a healthy {found.model} over NVLink")
        ratio = references.theory_ratio("p2p_gbps", nvlink_theory, link="nvlink")
        if ratio is None:
            return None
        said = f"NVLink x{links} {how}"
        return Expectation(theory * ratio[0], f"{said} ({theory:g} GB/s) x {ratio[1]}", of=f"a healthy {said}")
    base = pcie_copy_expectation(a)
    if base and not p2p_ok:
        return Expectation(
            base.value * STAGED,
            f"{base.source}, staged through host memory (no P2P) x {STAGED} (an estimate)",
            of="an estimate for a copy staged through host memory",
        )
    return base


# A copy between GPUs without P2P goes down to host memory and back up: two legs of the host link, pipelined
# by the CUDA driver. No published measurement; half the one-leg figure is an estimate and said so.
STAGED = 0.5


def pcie_peak(gpu: dict[str, Any]) -> Peak | None:
    """The host link's line rate: NVLink-C2C on a Grace part, else the PCIe link."""
    model = gpu_model(gpu) or {}
    if model.get("c2c_gbps") and not gpu.get("mig_slice"):
        return Peak(float(model["c2c_gbps"]), f"{model['model']} NVLink-C2C")
    gen, width = pcie_link(gpu)
    theory = pcie_gbps(gen, width)
    return Peak(theory, f"PCIe Gen{gen} x{width}") if theory else None


def p2p_peak(a: dict[str, Any], b: dict[str, Any]) -> Peak | None:
    """The faster of NVLink between the pair and their PCIe links: a copy cannot beat both."""
    links, _ = nvlinks_between(a, b)
    nvlink = link_rate(a, links) if links else None
    pcie = pcie_peak(a)
    if nvlink and (pcie is None or nvlink > pcie.value):
        return Peak(nvlink, f"NVLink x{links}")
    return pcie
