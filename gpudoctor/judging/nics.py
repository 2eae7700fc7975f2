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


# The share of the NICs' line rate a healthy all-reduce's bus bandwidth reaches between nodes, per fabric, with its
# source: InfiniBand and RoCE from NCCL's maintainers (references.per_nic: 48.5 GB/s per 400 Gb/s NIC, of its
# 50 GB/s); EFA from the published 4-node B200 run over EFA v4 (references.toml, link "efa"); TCP sockets from
# NCCL's own tracker: "we have not been able to reliably obtain more than 60% of wire speed over 32Gbps networks"
# with nccl-tests at large sizes (NVIDIA/nccl issue 209, cswinter, 2019-04-19), an upper figure, not a floor.
# Slingshot (CXI) and GPUDirect-TCPX have no published healthy figure here: a run over them is described, not judged.
SOCKET_SHARE = (
    0.6,
    "NCCL over TCP reaches at most 60 % of the wire speed (NVIDIA/nccl issue 209, cswinter, 2019-04, nccl-tests on "
    "32 Gb/s networks, large messages)",
)
FABRIC_NAMES = {"ib": "InfiniBand", "roce": "RoCE", "efa": "EFA", "socket": "TCP socket"}


def fabric_share(fabric: str | None) -> tuple[float, str] | None:
    """The share of the line rate a healthy all-reduce reaches on `fabric` ("ib", "roce", "efa", "socket"), and its
    source; None where nothing published says."""
    if fabric in ("ib", "roce"):
        nic = references.per_nic()
        return (nic.value / 50.0, f"{nic.value:g} GB/s per 400 Gb/s NIC ({nic.cite()})") if nic else None
    if fabric == "efa":
        found = [r for r in references.rows() if r.get("figure") == "nic_busbw_per_400g" and r.get("link") == "efa"]
        if found:
            row = found[0]
            return float(row["value"]) / 50.0, f"{row['value']} GB/s per 400 Gb/s EFA NIC ({row['source']})"
    if fabric == "socket":
        return SOCKET_SHARE
    return None


def fabric_of(net: str, nccl: dict[str, Any]) -> str | None:
    """The fabric NCCL's network name means: "Socket"; "IB", "IBext", "IBext_v8", "gIB" over IB or RoCE ports as
    its NET/IB line lists them; aws-ofi-nccl ("AWS Libfabric", "Libfabric", "OFI") with its provider; Google's
    GPUDirect-TCPX and -TCPXO plugins (named GPUDirectTCPX_v7 and FasTrak in their sources)."""
    name = net.lower()
    if name.startswith("socket"):
        return "socket"
    if name.startswith(("ib", "gib")):
        devices = [str(d) for d in nccl.get("ib_devices") or []]
        return "roce" if devices and all("/RoCE" in d for d in devices) else "ib"
    if "libfabric" in name or name.startswith("ofi") or nccl.get("ofi_provider"):
        provider = str(nccl.get("ofi_provider") or "")
        return provider if provider in ("efa", "cxi") else "ofi"
    if "tcpxo" in name or "fastrak" in name:
        return "tcpxo"
    if "tcpx" in name:
        return "tcpx"
    return None


def ports_fabric(ports: list[dict[str, Any]]) -> str:
    """The RDMA fabric of ports as ibstat or sysfs give them: RoCE where every link layer is Ethernet, else
    InfiniBand (a port without its link layer, as cluster mode's summaries carry it, is taken as InfiniBand: both
    have the same published share)."""
    layers = {str(p.get("link_layer") or "") for p in ports}
    return "roce" if ports and layers == {"Ethernet"} else "ib"


def network_expectation(
    nics: list[dict[str, Any]], left: list[str], whose: str, fabric: str | None = None
) -> Expectation | None:
    """What an all-reduce between nodes reaches when healthy over `nics` (NICs NCCL uses, each with its `gbits`):
    NICs x line rate x the share published for the fabric (`fabric`: the RDMA fabric NCCL's log says it chose,
    else the ports' own link layer; sockets are a cause, not the fabric's figure); `whose` names the node and
    `left` the ports left out."""
    gbits = sum(float(n.get("gbits") or 0) for n in nics)
    fabric = fabric if fabric in ("ib", "roce", "efa") else ports_fabric(nics)
    share = fabric_share(fabric)
    if not gbits or share is None:
        return None
    value, source = share
    others = f"; left out: {', '.join(left)}" if left else ""
    name = FABRIC_NAMES.get(fabric, fabric)
    return Expectation(
        gbits / 8 * value,
        f"{whose}: {len(nics)} NICs NCCL uses, {gbits:g} Gb/s of {name}{others}; x {value:.2f} of the line rate "
        f"({source})",
        of=f"a healthy {name} network of {len(nics)} NICs, {gbits:g} Gb/s",
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
