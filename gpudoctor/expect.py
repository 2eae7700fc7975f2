"""What a measured figure should be on this hardware, and the verdict. Pure functions of facts.

Every expectation carries its source, so a report says what a figure was judged against: the GPU
model table, the PCIe or NVLink link the facts show, a saved baseline, or a configured floor.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import permutations
from typing import Any

from gpudoctor.facts.identity import same_pci
from gpudoctor.hardware import efficiency, gpu_model, nvlink_gbps, pcie_gbps
from gpudoctor.model import Metric, Remediation, Result, Row, Status, from_rows


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
    return Expectation(value, f"config {name}") if value else None


def nvlink_generation(gpu: dict[str, Any]) -> int | None:
    versions = [link.get("version") for link in gpu.get("nvlinks") or [] if link["active"]]
    model = gpu_model(gpu)
    return (model or {}).get("nvlink_gen") or (versions[0] if versions else None)


def link_rate(gpu: dict[str, Any], links: int) -> float | None:
    """Per-direction bandwidth of `links` of this GPU's NVLinks, at its model's or its generation's rate."""
    return nvlink_gbps(nvlink_generation(gpu), links, (gpu_model(gpu) or {}).get("nvlink_link_gbps"))


def nvlinks_between(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, str]:
    """How many NVLinks join two GPUs, and how: directly (a bridge or a cube mesh), through NVSwitch (each
    GPU's switch links carry its traffic to any peer), or, for facts recorded without the links' far ends,
    every active link (as an NVSwitch node would be)."""
    links_a, links_b = (
        [lk for lk in a.get("nvlinks") or [] if lk["active"]],
        [lk for lk in b.get("nvlinks") or [] if lk["active"]],
    )
    if not links_a or not links_b:
        return 0, ""
    if all(lk.get("remote_type") is None for lk in links_a + links_b):
        return min(len(links_a), len(links_b)), "per GPU"
    direct = sum(
        1
        for lk in links_a
        if lk.get("remote_type") == "gpu" and same_pci(lk.get("remote_pci_bus_id"), b.get("pci_bus_id"))
    )
    if direct:
        return direct, "bridged" if len(links_a) == direct else "direct"
    switched = [sum(1 for lk in links if lk.get("remote_type") == "switch") for links in (links_a, links_b)]
    return (min(switched), "per GPU via NVSwitch") if min(switched) else (0, "")


def hop_expectation(a: dict[str, Any], b: dict[str, Any], route: Route) -> Expectation | None:
    """What one hop of an all-reduce ring carries between two GPUs over the transport NCCL will use: NVLink
    where they share links and P2P is allowed, else PCIe (peer to peer, or staged through host memory); none
    where NCCL must fall back to its network transport."""
    links, how = nvlinks_between(a, b)
    theory = link_rate(a, links) if links and route.p2p else None
    if theory:
        eff = efficiency("nvlink_allreduce")
        return Expectation(theory * eff, f"NVLink {nvlink_generation(a)} x{links} {how} ({theory:g} GB/s) x {eff}")
    slowest = min((pcie_gbps(*pcie_link(g)) or 0, pcie_link(g)) for g in (a, b))
    if not slowest[0] or route.kind == "NET":
        return None
    kind = "pcie_allreduce_p2p" if route.p2p else "pcie_allreduce_no_p2p"
    gen, width = slowest[1]
    return Expectation(
        slowest[0] * efficiency(kind),
        f"PCIe Gen{gen} x{width} ({slowest[0]:g} GB/s), {route.said} x {efficiency(kind)}",
    )


@dataclass(frozen=True)
class Route:
    """The transport NCCL uses between two GPUs of a node: P2P (NVLink or PCIe), SHM (through host memory)
    or NET (its network transport, when P2P and SHM are both off), and why."""

    kind: str
    said: str

    @property
    def p2p(self) -> bool:
        return self.kind == "P2P"


# NCCL's path types, nearest first (NCCL_P2P_LEVEL names them, or numbers them 0..5), and NVML's common PCIe
# ancestor (nvmlGpuTopologyLevel_t) as the path NCCL sees: INTERNAL and SINGLE a PCIe switch (PIX), MULTIPLE
# several switches (PXB), HOSTBRIDGE and NODE through the CPU (PHB), SYSTEM across CPUs (SYS).
NCCL_PATHS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
ANCESTOR_PATH = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "PHB", 50: "SYS"}
NCCL_DEFAULT_P2P_LEVEL = "PXB"  # P2P through PCIe switches, not through the CPU (NCCL's default on x86)


def nccl_route(a: dict[str, Any], b: dict[str, Any], topology: dict[str, Any], env: dict[str, str]) -> Route:
    """The transport NCCL picks between GPUs `a` and `b` under the node's NCCL_* settings."""
    no_p2p = p2p_refused(a, b, topology, env)
    if no_p2p is None:
        return Route("P2P", f"P2P on (path {p2p_path(a, b, topology)}, {p2p_allowed(env)})")
    if nccl_int(env.get("NCCL_SHM_DISABLE")):
        return Route("NET", f"{no_p2p}: NET (NCCL_SHM_DISABLE={env['NCCL_SHM_DISABLE']})")
    return Route("SHM", f"{no_p2p}: SHM")


def nccl_int(text: str | None) -> int:
    """An NCCL integer parameter as NCCL reads it (src/misc/param.cc, ncclLoadParam): `strtoll(str, NULL, 0)`,
    so the longest number at the start in C's notation (0x1f, 017, 12) counts and the rest is ignored, and no
    number at all ("banana") is 0; unset or empty is the default, 0 for the *_DISABLE switches."""
    found = NCCL_NUMBER.match(text or "")
    if not found or not found.group(2):
        return 0
    sign = -1 if found.group(1) == "-" else 1
    digits = found.group(2)
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") and len(digits) > 1 else 10
    return sign * int(digits[2:] if base == 16 else digits, base)


NCCL_NUMBER = re.compile(r"^\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def p2p_refused(a: dict[str, Any], b: dict[str, Any], topology: dict[str, Any], env: dict[str, str]) -> str | None:
    """Why NCCL will not use P2P between `a` and `b`, or None when it will."""
    if nccl_int(env.get("NCCL_P2P_DISABLE")):
        return f"P2P off (NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']})"
    if not nvlinks_between(a, b)[0]:
        status = p2p_status(topology, a.get("index"), b.get("index"))
        if status is None:
            return "P2P status unknown (NVML did not answer)"
        if status != 0:
            return "P2P unsupported by NVML"
    path = p2p_path(a, b, topology)
    if NCCL_PATHS.index(path) > NCCL_PATHS.index(p2p_level(env.get("NCCL_P2P_LEVEL"))):
        return f"path {path} beyond {p2p_allowed(env)}"
    return None


def p2p_path(a: dict[str, Any], b: dict[str, Any], topology: dict[str, Any]) -> str:
    """The path between two GPUs as NCCL names it: NVL over shared NVLinks, else from the common PCIe ancestor."""
    if nvlinks_between(a, b)[0]:
        return "NVL"
    return ANCESTOR_PATH.get(pair_value(topology, "common_ancestor", a.get("index"), b.get("index")), "SYS")


def p2p_allowed(env: dict[str, str]) -> str:
    """The P2P level in force, in words: NCCL_P2P_LEVEL as set, or NCCL's default."""
    level = p2p_level(env.get("NCCL_P2P_LEVEL"))
    return (
        f"NCCL_P2P_LEVEL={env['NCCL_P2P_LEVEL']} {level}"
        if "NCCL_P2P_LEVEL" in env
        else f"NCCL's default level {level}"
    )


def p2p_level(value: str | None) -> str:
    """NCCL_P2P_LEVEL as a path name (it takes the names or 0..5); NCCL's default when unset or unreadable."""
    if value is None:
        return NCCL_DEFAULT_P2P_LEVEL
    text = value.strip().upper()
    if text.isdigit() and int(text) < len(NCCL_PATHS):
        return NCCL_PATHS[int(text)]
    return text if text in NCCL_PATHS else NCCL_DEFAULT_P2P_LEVEL


def pcie_link(gpu: dict[str, Any]) -> tuple[int | None, int | None]:
    """The link's capability (max generation and width), not its idle state."""
    link = gpu.get("pcie") or {}
    return link.get("max_gen") or link.get("gen"), link.get("max_width") or link.get("width")


def p2p_status(topology: dict[str, Any], a: int | None, b: int | None) -> int | None:
    """NVML's P2P read status between two GPUs by NVML index (0 is OK)."""
    return pair_value(topology, "p2p_read", a, b)


def pair_value(topology: dict[str, Any], matrix: str, a: int | None, b: int | None) -> Any:
    """One entry of a pairwise topology matrix (`p2p_read`, `common_ancestor`) by NVML index: the matrices are
    in `indexes` order; None for a GPU not in them."""
    indexes = topology.get("indexes") or []
    if a not in indexes or b not in indexes:
        return None
    return (topology.get(matrix) or [])[indexes.index(a)][indexes.index(b)]


MAX_RING_SEARCH = 10  # GPUs; beyond, the ring is taken in index order (an exact search grows as 2**n)


def allreduce_expectation(
    gpus: list[dict[str, Any]], topology: dict[str, Any], env: dict[str, str] | None = None
) -> Expectation | None:
    """Large-message bus bandwidth a healthy node of this topology reaches with NCCL: the slowest hop of the
    best ring through every GPU. On an NVSwitch node every hop is NVLink; with NVLink-bridged pairs, a ring
    over more than two GPUs must cross PCIe between pairs, and that hop sets the figure."""
    if len(gpus) < 2:
        return None
    hops = ring_hops(gpus, topology, env or {})
    if hops is None:
        return None
    ring = best_ring(len(gpus), lambda i, j: hops[(i, j)].value)
    i, j = min(zip(ring, [*ring[1:], ring[0]], strict=True), key=lambda pair: hops[pair].value)
    slowest = hops[(i, j)]
    uneven = len({h.value for h in hops.values()}) > 1
    note = f" (slowest ring hop: GPU {gpus[i].get('index')} - GPU {gpus[j].get('index')})" if uneven else ""
    return Expectation(slowest.value, slowest.source + note)


def ring_hops(
    gpus: list[dict[str, Any]], topology: dict[str, Any], env: dict[str, str]
) -> dict[tuple[int, int], Expectation] | None:
    """Every ordered pair's hop expectation over NCCL's transport, or None when some hop has none."""
    hops = {}
    for i, j in permutations(range(len(gpus)), 2):
        hop = hop_expectation(gpus[i], gpus[j], nccl_route(gpus[i], gpus[j], topology, env))
        if hop is None:
            return None
        hops[(i, j)] = hop
    return hops


def best_ring(n: int, weight: Callable[[int, int], float]) -> list[int]:
    """The order of 0..n-1 whose cycle has the largest smallest hop (exact for up to MAX_RING_SEARCH GPUs)."""
    if n <= 2 or n > MAX_RING_SEARCH:
        return list(range(n))
    # best[mask][v]: the largest bottleneck of a path from 0 through `mask` ending at v, and where it came from
    best: dict[tuple[int, int], tuple[float, int]] = {(1, 0): (float("inf"), -1)}
    for mask in range(1, 1 << n):
        for v in range(n):
            if (mask, v) not in best:
                continue
            for w in range(n):
                if mask & (1 << w):
                    continue
                value = min(best[(mask, v)][0], weight(v, w))
                key = (mask | (1 << w), w)
                if key not in best or value > best[key][0]:
                    best[key] = (value, v)
    full = (1 << n) - 1
    end = max(range(1, n), key=lambda v: min(best[(full, v)][0], weight(v, 0)))
    ring, mask, v = [], full, end
    while v != -1:
        ring.append(v)
        v, mask = best[(mask, v)][1], mask & ~(1 << v)
    return ring[::-1]


def pcie_copy_expectation(gpu: dict[str, Any]) -> Expectation | None:
    """Pinned copies over the GPU's PCIe link; none for a MIG slice (its share of the copy engines is not
    published)."""
    if gpu.get("mig_slice"):
        return None
    gen, width = pcie_link(gpu)
    theory = pcie_gbps(gen, width)
    if not theory:
        return None
    return Expectation(
        theory * efficiency("pcie_copy"), f"PCIe Gen{gen} x{width} ({theory:g} GB/s) x {efficiency('pcie_copy')}"
    )


def p2p_copy_expectation(a: dict[str, Any], b: dict[str, Any], p2p_ok: bool) -> Expectation | None:
    """A copy from one GPU to another: over the NVLinks they share, else PCIe (half, staged through the host,
    without P2P)."""
    links, how = nvlinks_between(a, b)
    theory = link_rate(a, links) if links else None
    if theory:
        eff = efficiency("pcie_copy")
        return Expectation(theory * eff, f"NVLink x{links} {how} ({theory:g} GB/s) x {eff}")
    base = pcie_copy_expectation(a)
    if base and not p2p_ok:
        return Expectation(base.value * 0.5, base.source + ", staged through host memory (no P2P) x 0.5")
    return base


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


def pcie_peak(gpu: dict[str, Any]) -> Peak | None:
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


def model_expectation(gpu: dict[str, Any], key: str, kind: str) -> Expectation | None:
    """The GPU model's datasheet figure `key` (hardware.toml), times what a healthy GPU reaches of it."""
    model = gpu_model(gpu)
    if not model or key not in model:
        return None
    source = f"{model['model']} datasheet {model[key]:g} x {efficiency(kind)}"
    if gpu.get("mig_slice"):
        share = slice_share(gpu, key)
        if share is None:
            return None
        return Expectation(model[key] * efficiency(kind) * share[0], f"{source} x {share[0]:.3g} ({share[1]})")
    return Expectation(model[key] * efficiency(kind), source)
