"""How two GPUs reach each other and what a collective over them should reach: NVLinks, PCIe paths as NCCL
names them (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE), the ring a collective takes. Pure functions of facts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import permutations
from typing import Any

from gpudoctor.facts.identity import same_pci
from gpudoctor.judging import references
from gpudoctor.judging.expect import Expectation
from gpudoctor.judging.hardware import efficiency, gpu_model, nvlink_gbps, pcie_gbps


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
    if text.isascii() and text.isdigit() and int(text) < len(NCCL_PATHS):
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
    ratio = references.theory_ratio("allreduce_busbw", nvlink_theory, algo="ring", nodes=1)
    if not rate or ratio is None:
        return None
    return Expectation(
        rate * ratio[0], f"NVLink {rate:g} GB/s per GPU x {ratio[1]}", of=f"a healthy {len(gpus)}-GPU NVLink ring"
    )


def active_links(gpu: dict[str, Any]) -> int:
    return sum(1 for link in gpu.get("nvlinks") or [] if link["active"])


def nvlink_theory(row: dict[str, Any], model: dict[str, Any]) -> float | None:
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
