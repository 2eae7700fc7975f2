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
from gpudoctor.judging import references
from gpudoctor.judging.hardware import efficiency, gpu_model, nvlink_gbps, pcie_gbps
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


def hop(a: dict[str, Any], b: dict[str, Any], route: Route) -> Hop | None:
    """One hop of an all-reduce ring between two GPUs over the transport NCCL will use, at its line rate:
    NVLink where they share links and P2P is allowed, else PCIe (peer to peer, or staged through host memory);
    none where NCCL must fall back to its network transport."""
    links, how = nvlinks_between(a, b)
    theory = link_rate(a, links) if links and route.p2p else None
    if theory:
        return Hop(theory, f"NVLink {nvlink_generation(a)} x{links} {how} ({theory:g} GB/s)", "nvlink")
    slowest = min((pcie_gbps(*pcie_link(g)) or 0, pcie_link(g)) for g in (a, b))
    if not slowest[0] or route.kind == "NET":
        return None
    gen, width = slowest[1]
    kind = "pcie_allreduce_p2p" if route.p2p else "pcie_allreduce_no_p2p"
    return Hop(slowest[0], f"PCIe Gen{gen} x{width} ({slowest[0]:g} GB/s), {route.said}", kind)


@dataclass(frozen=True)
class Hop:
    """A ring hop's line rate per direction, how it is made, and its kind: "nvlink", or the PCIe estimate that
    applies (hardware.toml [efficiency])."""

    rate: float
    said: str
    kind: str

    @property
    def nvlink(self) -> bool:
        return self.kind == "nvlink"


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
    """Large-message bus bandwidth a healthy node of this topology reaches with NCCL. Where the best ring
    through every GPU is NVLink all the way (NVSwitch, a fully connected mesh, a cube mesh, a bridged pair), NCCL
    runs rings over every link at once, so the figure is the GPU's whole NVLink: the published figure for the
    model, GPU count and algorithm (references.toml), else the NVLink line rate x what published ring runs reach
    of it. Where a hop is PCIe, that hop sets the figure (PCIe estimates, hardware.toml [efficiency])."""
    if len(gpus) < 2:
        return None
    hops = ring_hops(gpus, topology, env or {})
    if hops is None:
        return None
    ring = best_ring(len(gpus), lambda i, j: hops[(i, j)].rate)
    i, j = min(zip(ring, [*ring[1:], ring[0]], strict=True), key=lambda pair: hops[pair].rate)
    if hops[(i, j)].nvlink:
        return nvlink_allreduce(gpus, algorithm(env or {}))
    slowest = hops[(i, j)]
    uneven = len({h.rate for h in hops.values()}) > 1
    note = f" (slowest ring hop: GPU {gpus[i].get('index')} - GPU {gpus[j].get('index')})" if uneven else ""
    eff = efficiency(slowest.kind)
    return Expectation(
        slowest.rate * eff,
        f"{slowest.said} x {eff} (an estimate: no published PCIe figure){note}",
        of=f"an estimate for a healthy {len(gpus)}-GPU PCIe ring",
    )


def algorithm(env: dict[str, str]) -> str | None:
    """The all-reduce algorithm NCCL_ALGO forces, in references.toml's words; None where NCCL chooses."""
    forced = (env.get("NCCL_ALGO") or "").strip().lower()
    names = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree", "collnetdirect": "collnet"}
    return names.get(forced) if forced and "," not in forced and not forced.startswith("^") else None


def nvlink_allreduce(gpus: list[dict[str, Any]], algo: str | None) -> Expectation | None:
    """An all-NVLink ring's figure: published for the model (Ring unless NCCL_ALGO names another: every
    algorithm reaches Ring's figure, NVLS more), else derived from the slowest GPU's NVLink line rate."""
    model = gpu_model(gpus[0]) or {}
    wanted = algo or "ring"
    stated = ("gpus", "algo")
    found = references.healthy("allreduce_busbw", model.get("model"), stated, gpus=len(gpus), nodes=1, algo=wanted)
    if found is not None:
        faster = references.healthy(
            "allreduce_busbw", model.get("model"), ("algo",), gpus=len(gpus), nodes=1, algo="nvls"
        )
        note = ""
        if algo is None and faster and faster.value > found.value:
            note = f"; NVLS, where NCCL uses it, gives ~{faster.value:.4g} GB/s"
        return Expectation(found.value, found.cite() + note, of=f"a healthy {len(gpus)}x {found.model}")
    rate = min((link_rate(g, active_links(g)) or 0.0) for g in gpus)
    ratio = references.theory_ratio("allreduce_busbw", _nvlink_theory, algo="ring", nodes=1)
    if not rate or ratio is None:
        return None
    return Expectation(
        rate * ratio[0], f"NVLink {rate:g} GB/s per GPU x {ratio[1]}", of=f"a healthy {len(gpus)}-GPU NVLink ring"
    )


def active_links(gpu: dict[str, Any]) -> int:
    return sum(1 for link in gpu.get("nvlinks") or [] if link["active"])


def _nvlink_theory(row: dict[str, Any], model: dict[str, Any]) -> float | None:
    """A model's whole NVLink line rate per direction (a row of a fully connected node of it)."""
    return nvlink_gbps(model.get("nvlink_gen"), model.get("nvlink_links") or 0, model.get("nvlink_link_gbps"))


def ring_hops(
    gpus: list[dict[str, Any]], topology: dict[str, Any], env: dict[str, str]
) -> dict[tuple[int, int], Hop] | None:
    """Every ordered pair's hop over NCCL's transport, or None when some hop has none."""
    hops = {}
    for i, j in permutations(range(len(gpus)), 2):
        found = hop(gpus[i], gpus[j], nccl_route(gpus[i], gpus[j], topology, env))
        if found is None:
            return None
        hops[(i, j)] = found
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
    return pcie_gbps(int(link[4:]), 16) if link.startswith("pcie") and link[4:].isdigit() else None


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
        ratio = references.theory_ratio("p2p_gbps", _nvlink_theory, link="nvlink")
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


def nccl_nics(
    ports: list[dict[str, Any]], gpu_numa: set[int], env: dict[str, str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The RDMA ports NCCL would carry traffic between nodes over, and why each other one is left out: active
    ports named by NCCL_IB_HCA (NCCL's syntax: prefixes, `=` exact, `^` to exclude, `:port`), near a GPU (on
    a NUMA node that holds GPUs: NCCL pairs each GPU with its nearest NIC), on the fabric carrying the most and
    at its fastest speed (storage and front-end NICs run slower or on another link layer, and NCCL's GPU-near
    choice leaves them)."""
    used, left = [], []
    for port in ports:
        why = _left_out(port, ports, gpu_numa, env)
        if why:
            left.append(f"{port.get('device')}:{port.get('port')} {why}")
        else:
            used.append({**port, "gbits": port_gbits(port)})
    return used, left


def port_gbits(port: dict[str, Any]) -> float:
    """'400 Gb/sec (4X NDR)' -> 400."""
    found = re.match(r"\s*([\d.]+)", str(port.get("rate") or ""))
    return float(found.group(1)) if found else 0.0


def _left_out(port: dict[str, Any], ports: list[dict[str, Any]], gpu_numa: set[int], env: dict[str, str]) -> str:
    if "ACTIVE" not in str(port.get("state", "")):
        return "not active"
    if not hca_selected(port, env.get("NCCL_IB_HCA")):
        return f"not in NCCL_IB_HCA={env['NCCL_IB_HCA']}"
    active = [p for p in ports if "ACTIVE" in str(p.get("state", "")) and hca_selected(p, env.get("NCCL_IB_HCA"))]
    near = [p for p in active if p.get("numa_node") in gpu_numa]
    if near and port not in near:
        return f"on NUMA node {port.get('numa_node')}, which holds no GPU (storage or front-end)"
    pool = near or active
    fabric = main_fabric(pool)
    if port.get("link_layer") != fabric:
        return f"{port.get('link_layer')} beside {fabric} (another fabric)"
    fastest = max((p for p in pool if p.get("link_layer") == fabric), key=port_gbits)
    if port_gbits(port) < port_gbits(fastest):
        return f"{port_gbits(port):g} Gb/s beside {port_gbits(fastest):g} Gb/s (storage or front-end)"
    return ""


def main_fabric(ports: list[dict[str, Any]]) -> Any:
    """The link layer carrying the most bandwidth: eight 100 Gb/s InfiniBand ports beside one 200 Gb/s
    Ethernet front-end port are the GPUs' fabric."""
    totals: dict[Any, float] = {}
    for port in ports:
        totals[port.get("link_layer")] = totals.get(port.get("link_layer"), 0.0) + port_gbits(port)
    return max(totals, key=lambda layer: totals[layer])


def hca_selected(port: dict[str, Any], spec: str | None) -> bool:
    """NCCL_IB_HCA as NCCL reads it (src/transport/net_ib.cc, parseStringList/matchIfList): a comma list of
    device names, each a prefix unless the list starts with `=`, a leading `^` excluding them, `:N` a port."""
    if not spec:
        return True
    text = spec.strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    text = text.lstrip("=")
    hit = False
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, number = item.partition(":")
        device = str(port.get("device") or "")
        named = device == name if exact else device.startswith(name)
        hit = hit or (named and (not number or number == str(port.get("port"))))
    return hit != exclude


def network_expectation(nics: list[dict[str, Any]], left: list[str], whose: str) -> Expectation | None:
    """What an all-reduce between nodes reaches when healthy over `nics` (NICs NCCL uses, each with its
    `gbits`): the published figure per 400 Gb/s NIC, scaled to their speed; `whose` names the node and `left`
    the ports left out."""
    gbits = sum(float(n.get("gbits") or 0) for n in nics)
    nic = references.per_nic()
    if not gbits or nic is None:
        return None
    others = f"; left out: {', '.join(left)}" if left else ""
    return Expectation(
        gbits / 400 * nic.value,
        f"{whose}: {len(nics)} NICs NCCL uses, {gbits:g} Gb/s{others}; x {nic.value:g} GB/s per 400 Gb/s "
        f"({nic.cite()})",
        of=f"a healthy network of {len(nics)} NICs, {gbits:g} Gb/s",
    )


def named_ports(ports: list[dict[str, Any]], devices: list[str]) -> list[dict[str, Any]]:
    """The ports NCCL's log says it uses ("NET/IB : Using [0]mlx5_0:1/IB ..." read as "mlx5_0:1/IB"), or all
    of them where the log names none or none of them."""
    named = {d.split("/")[0] for d in devices}
    chosen = [p for p in ports if f"{p.get('device')}:{p.get('port')}" in named]
    return chosen or ports
