"""The NICs NCCL carries traffic between nodes over, and what they should give: NCCL_IB_HCA's syntax, the GPU's
NUMA node, the main fabric; the figure per NIC. Pure functions of facts."""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.judging import references
from gpudoctor.judging.expect import Expectation


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


# NVML's topology levels as `topo -m` names them (nvmlGpuTopologyLevel_t, nvml.h).
LEVELS = {10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def nearest_nics(topology: dict[str, Any]) -> list[dict[str, Any]]:
    """Each GPU row's nearest NIC in `topo -m` (NVML's topology: `indexes` and each NIC's `levels` in their
    order) with its PCIe distance: {"gpu": 0, "nic": "mlx5_0", "level": 10, "distance": "PIX"}; on a tie the
    NIC named first in the matrix. A GPU with no NIC cell read is left out."""
    listed = [n for n in topology.get("nics") or [] if isinstance(n, dict) and isinstance(n.get("levels"), list)]
    nearest = []
    for position, index in enumerate(topology.get("indexes") or []):
        known = [(n["levels"][position], n) for n in listed if position < len(n["levels"])]
        known = [(level, n) for level, n in known if level in LEVELS]
        if known:
            level, nic = min(known, key=lambda pair: pair[0])
            name = nic.get("device") or nic.get("name")
            nearest.append({"gpu": index, "nic": name, "level": level, "distance": LEVELS[level]})
    return nearest
