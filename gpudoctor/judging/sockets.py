"""The sockets between nodes: the interfaces NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME name (down, a container or VM
bridge, the loopback, without an address: unreachable from other nodes), and what carried cluster mode's
cross-node workloads, node by node (gloo's interface and network, or NCCL's choice from its log): a slow node on
another network than the others, or on a slow link of theirs, with the setting or the commands that show and fix
it. Pure functions of facts, and of what each node's ranks said (checks/ranks/links.used)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from gpudoctor.command import Command, command, commands, literal
from gpudoctor.judging import net_warnings
from gpudoctor.judging.commands import fix
from gpudoctor.judging.network import FABRICS, RDMA, SHOW, NetCause, choice
from gpudoctor.model import Remediation, Result, Row, Status

# --- the interfaces NCCL's and gloo's sockets use ---------------------------------------------------------------

SOCKET_SETTINGS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
# Bridges a container or VM runtime makes: private networks, the same address on every host (Docker's docker0 is
# 172.17.0.1 everywhere), which no other node reaches.
PRIVATE_BRIDGES = ("docker", "br-", "virbr", "cni", "podman", "lxcbr", "cali", "flannel", "kube")


@dataclass(frozen=True)
class Interface:
    """A problem with the interface a socket setting names: the setting, its value, the interface, what is
    wrong with it ("a bridge", "down", "loopback", "without an address") and the interface to use instead."""

    setting: str
    value: str
    name: str
    problem: str
    instead: str | None


def selected(setting: str, value: str, names: list[str]) -> list[str]:
    """The interfaces a setting selects: GLOO_SOCKET_IFNAME's exact names (a comma list), NCCL_SOCKET_IFNAME's
    prefixes ('=' exact, '^' excluding)."""
    if setting == "GLOO_SOCKET_IFNAME":
        wanted = [n.strip() for n in value.split(",") if n.strip()]
        return [n for n in wanted if n in names]
    exclude = value.startswith("^")
    body = value.lstrip("^")
    exact = body.startswith("=")
    prefixes = [p for p in body.lstrip("=").split(",") if p]
    hit = [n for n in names if any(n == p if exact else n.startswith(p) for p in prefixes)]
    return [n for n in names if n not in hit] if exclude else hit


def links_of(system: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each interface by name: the node's links (up, bridge and its ports, speed), with the addresses it holds."""
    found = {str(link.get("name")): {**link, "addresses": []} for link in system.get("links") or []}
    for address in system.get("interface_addresses") or []:
        entry = found.setdefault(
            str(address.get("name")), {"name": address.get("name"), "up": address.get("up"), "addresses": []}
        )
        entry["addresses"].append(str(address.get("address")))
    return found


def private_bridge(link: dict[str, Any]) -> bool:
    """A bridge that holds no physical port (Docker's, libvirt's, a CNI's), or one a runtime names as its own."""
    name = str(link.get("name") or "")
    if name.startswith(PRIVATE_BRIDGES):
        return True
    return bool(link.get("bridge")) and not link.get("bridge_physical")


def problem_of(link: dict[str, Any]) -> str | None:
    name = str(link.get("name") or "")
    ipv4 = [a for a in link.get("addresses") or [] if "." in a]
    if link.get("up") is False:
        return "down"
    if name.startswith("lo") and all(a.startswith("127.") or a == "::1" for a in link.get("addresses") or []):
        return "the loopback interface"
    if private_bridge(link):
        return "a container or VM bridge (a private network other nodes cannot reach)"
    if not ipv4 and not [a for a in link.get("addresses") or [] if not a.startswith("fe80")]:
        return "without an address other nodes can reach"
    return None


def good_interface(links: dict[str, dict[str, Any]]) -> str | None:
    """The interface to use instead: up, with a routable address, not loopback or a private bridge; a physical one
    first, then the first in the kernel's order."""
    fine = [link for link in links.values() if problem_of(link) is None]
    physical = [link for link in fine if not link.get("virtual")]
    pick = (physical or fine or [None])[0]
    return str(pick["name"]) if pick else None


def interface_problems(system: dict[str, Any]) -> list[Interface]:
    """The socket settings (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) whose every selected interface is down, a
    private bridge, the loopback, or has no address; a setting that selects none is system.nccl-env's."""
    env, links = system.get("env") or {}, links_of(system)
    if not links:
        return []
    found = []
    for setting in SOCKET_SETTINGS:
        value = str(env.get(setting) or "").strip()
        chosen = selected(setting, value, list(links)) if value else []
        problems = [(name, problem_of(links[name])) for name in chosen]
        if chosen and all(problem for _, problem in problems):
            name, problem = problems[0]
            found.append(Interface(setting, value, name, str(problem), good_interface(links)))
    return found


def logged_problems(facts: dict[str, Any]) -> list[Interface]:
    """The interface NCCL's log says its bootstrap (else its sockets) used, where it is the loopback or a container
    or VM bridge: NCCL's own choice (NCCL_SOCKET_IFNAME unset: nothing else was up) or the setting's."""
    nccl = facts.get("nccl") or {}
    value = str(((facts.get("system") or {}).get("env") or {}).get("NCCL_SOCKET_IFNAME") or "")
    for name in [str(n) for n in nccl.get("bootstrap") or nccl.get("interfaces") or []]:
        if name.startswith("lo"):
            return [Interface("NCCL_SOCKET_IFNAME", value, name, "the loopback interface", None)]
        if name.startswith(PRIVATE_BRIDGES):
            problem = "a container or VM bridge (a private network other nodes cannot reach)"
            return [Interface("NCCL_SOCKET_IFNAME", value, name, problem, None)]
    return []


def interface_cause(problem: Interface, spans_nodes: bool) -> NetCause:
    down = problem.problem == "down"
    status = Status.FAIL if down or spans_nodes else Status.WARN
    effect = "NCCL" if problem.setting.startswith("NCCL") else "torch.distributed's gloo backend"
    said = f"{problem.setting}={problem.value!r} puts {effect}'s sockets on {problem.name}, which is {problem.problem}"
    if not problem.value:
        said = f"NCCL's log shows it on {problem.name} ({problem.setting} unset), which is {problem.problem}"

    def built() -> list[Command]:
        made = [literal("ip -brief addr")]
        if problem.instead:
            made.append(command("export {variable}={interface}", variable=problem.setting, interface=problem.instead))
        return made

    instead = f"; {problem.instead} can carry it" if problem.instead else ""
    return NetCause(
        f"socket-interface-{'down' if down else 'unreachable'}",
        status,
        said + instead,
        fix(
            f"Between nodes {effect} connects to the address each node's {problem.setting} interface holds: one that "
            "is down, a private bridge (every host's docker0 is 172.17.0.1) or the loopback is unreachable from the "
            "other nodes, so the job hangs at its first collective or fails to start. Set it to the interface on the "
            "network the nodes share.",
            built,
        ),
        [said],
        "NCCL environment variables, NCCL_SOCKET_IFNAME (NCCL skips docker* and lo unless told), "
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html; NVIDIA/nccl issue 286 (sjeaugey: lo "
        "cannot be used between two nodes); torch.distributed, GLOO_SOCKET_IFNAME, "
        "https://pytorch.org/docs/stable/distributed.html#choosing-the-network-interface-to-use",
    )


# --- what carried cluster mode's cross-node workloads ------------------------------------------------------------

MAX_NETWORKS = 64  # interfaces a node's rank may report; more is not a node's report


def transport_of(data: Any) -> dict[str, Any] | None:
    """A rank's `transport` (checks/ranks/links.used) as another node sent it: the backend, gloo's interface and
    address, NCCL's facts from its log, the node's networks; None where it is not that shape."""
    if not isinstance(data, dict) or data.get("backend") not in ("gloo", "nccl"):
        return None
    networks = data.get("networks")
    if not isinstance(networks, dict) or len(networks) > MAX_NETWORKS:
        return None
    clean = {
        str(name)[:15]: {"up": bool(net.get("up")), "cidrs": [str(c)[:64] for c in (net.get("cidrs") or [])[:16]]}
        for name, net in networks.items()
        if isinstance(net, dict) and isinstance(net.get("cidrs", []), list)
    }
    said = {"backend": data["backend"], "networks": clean}
    for key in ("interface", "address"):
        value = data.get(key)
        said[key] = str(value)[:64] if isinstance(value, str) else None
    said["nccl"] = net_warnings.cut(data["nccl"]) if isinstance(data.get("nccl"), dict) else {}
    return said


def network_of(address: str | None, networks: dict[str, dict[str, Any]]) -> str | None:
    """The IPv4 network ("10.0.0.0/24") of the interface holding `address`."""
    for net in networks.values():
        for cidr in net["cidrs"]:
            try:
                interface = ipaddress.ip_interface(cidr)
            except ValueError:
                continue
            if str(interface.ip) == address:
                return str(interface.network)
    return None


def carried(transport: dict[str, Any]) -> str:
    """ "gloo over TCP on eth0" / "NCCL over NET/IB (InfiniBand), 8 NICs, GPUDirect RDMA on"."""
    if transport["backend"] == "gloo":
        return f"gloo over TCP on {transport.get('interface') or 'an interface gloo did not name'}"
    chosen = choice(transport["nccl"])
    return f"NCCL over {chosen.said()}" if chosen else "NCCL (its log named no network)"


def said_transports(per_node: dict[str, dict[str, Any]]) -> str:
    """What carried the workload, nodes grouped by it: "gloo over TCP on eth0 (node-0, node-1), eth1 (node-2)";
    one way for every node is said once."""
    groups: dict[str, list[str]] = {}
    for node, transport in sorted(per_node.items()):
        groups.setdefault(carried(transport), []).append(node)
    if len(groups) == 1:
        return next(iter(groups))
    gloo = "gloo over TCP on "
    if all(how.startswith(gloo) for how in groups):
        return gloo + ", ".join(f"{how.removeprefix(gloo)} ({', '.join(nodes)})" for how, nodes in groups.items())
    return "; ".join(f"{how} ({', '.join(nodes)})" for how, nodes in groups.items())


def judge_transport(per_node: dict[str, dict[str, Any]], slow: set[str]) -> Result:
    """Each node's transport (aspect "transport"): a slow node whose traffic left on another network than the
    others', where it has an interface on theirs (the setting to change), or on the same network (its link is
    slow); with NCCL, a node on another transport than the others (sockets beside RDMA) or without GPUDirect RDMA
    where they have it."""
    rows = [transport_row(node, t, per_node, slow) for node, t in sorted(per_node.items())]
    bad = [row for row, _ in rows if row.status != Status.PASS]
    cure = next((fix_ for row, fix_ in rows if fix_ is not None and row.status != Status.PASS), None)
    said = said_transports(per_node)
    if not bad:
        return Result(Status.PASS, said, rows=[row for row, _ in rows], aspect="transport")
    summary = f"{bad[0].node}: {bad[0].summary}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
    return Result(
        Status.WARN,
        summary,
        rows=[row for row, _ in rows],
        remediation=cure,
        aspect="transport",
        detail=f"measured over {said}",
    )


def transport_row(
    node: str, transport: dict[str, Any], per_node: dict[str, dict[str, Any]], slow: set[str]
) -> tuple[Row, Remediation | None]:
    others = {n: t for n, t in per_node.items() if n != node}
    if transport["backend"] == "nccl":
        return nccl_row(node, transport, others)
    found = gloo_row(node, transport, others) if node in slow else None
    return found or (Row(Status.PASS, carried(transport), node=node), None)


def gloo_row(
    node: str, transport: dict[str, Any], others: dict[str, dict[str, Any]]
) -> tuple[Row, Remediation | None] | None:
    """A slow node: on another network than the other nodes (and an interface of its own on theirs), or on theirs
    (its link is what is slow)."""
    mine = network_of(transport.get("address"), transport["networks"])
    theirs = [network_of(t.get("address"), t["networks"]) for t in others.values()]
    common = max(set(theirs) - {None}, key=theirs.count, default=None)
    interface = transport.get("interface")
    if common and mine != common:
        better = interface_on(common, transport["networks"])
        said = (
            f"its traffic left on {interface} ({mine or 'no known network'}), not on {common}, the network the "
            "other nodes use"
        )
        if better:
            said += f", where its {better} is"
        return Row(Status.WARN, said, node=node), switch_fix("GLOO_SOCKET_IFNAME", better, node)
    if interface:
        said = f"slow over {interface} ({mine}), the network the other nodes use: the link itself is slow"
        shared = another_network(mine, transport, others)
        return Row(Status.WARN, said, node=node), slow_link_fix(interface, node, shared)
    return None


def another_network(mine: str | None, transport: dict[str, Any], others: dict[str, dict[str, Any]]) -> tuple | None:
    """Another network every node has an interface on that is up (a data network beside a management one), and
    this node's interface on it: (network, interface), or None."""

    def nets(t: dict[str, Any]) -> set[str]:
        found = set()
        for net in t["networks"].values():
            for cidr in net["cidrs"] if net["up"] else []:
                try:
                    interface = ipaddress.ip_interface(cidr)
                except ValueError:
                    continue
                if not interface.is_loopback and not interface.is_link_local:
                    found.add(str(interface.network))
        return found

    shared = nets(transport).intersection(*(nets(t) for t in others.values())) - {mine}
    for network in sorted(shared):
        interface = interface_on(network, transport["networks"])
        if interface:
            return network, interface
    return None


def interface_on(network: str, networks: dict[str, dict[str, Any]]) -> str | None:
    for name, net in networks.items():
        for cidr in net["cidrs"]:
            try:
                if net["up"] and str(ipaddress.ip_interface(cidr).network) == network:
                    return name
            except ValueError:
                continue
    return None


def switch_fix(setting: str, better: str | None, node: str) -> Remediation:
    nccl_setting = "NCCL_SOCKET_IFNAME" if setting == "GLOO_SOCKET_IFNAME" else setting

    def built() -> list[Command]:
        if not better:
            return [command("ip -brief addr  # on {node}", node=node)]
        return [
            command("export {variable}={interface}  # on {node}", variable=setting, interface=better, node=node),
            command(
                "export {variable}={interface}  # on {node}, for NCCL (GPUs)",
                variable=nccl_setting,
                interface=better,
                node=node,
            ),
        ]

    return fix(
        "A node whose sockets use another network than the others' reaches them over whatever links that network "
        f"has (a management NIC, a slower port): set {setting} on that node to its interface on the network the "
        "others use (NCCL_SOCKET_IFNAME for NCCL's bootstrap and sockets).",
        built,
    )


def slow_link_fix(interface: str, node: str, shared: tuple | None = None) -> Remediation:
    """Look at the slow link (speed, errors, a shaper); where every node also shares another network, the setting
    that moves the job's sockets onto it, as the other way."""

    def built() -> list[Command]:
        return commands(
            "ip -s link show {interface}  # on {node}",
            "ethtool {interface}  # on {node}",
            "tc qdisc show dev {interface}  # on {node}",
            interface=interface,
            node=node,
        )

    def moved() -> list[Command]:
        network, other = shared or ("", "")
        template = (
            "export GLOO_SOCKET_IFNAME={interface} NCCL_SOCKET_IFNAME={interface}  # on {node}; on each node its "
            "interface on {network}"
        )
        return [command(template, interface=other, node=node, network=network)]

    instead = None
    if shared:
        instead = fix(
            f"Every node also has an interface on {shared[0]}: where that is the faster network, put the job's "
            "sockets on it, on every node.",
            moved,
        )
    return fix(
        "The node is slow over the network every node uses: its link is (a port trained down, a shaper, errors). "
        "Look at the link's speed, errors and queueing.",
        built,
        instead,
    )


def nccl_row(node: str, transport: dict[str, Any], others: dict[str, dict[str, Any]]) -> tuple[Row, Remediation | None]:
    mine = choice(transport["nccl"])
    theirs = [choice(t["nccl"]) for t in others.values()]
    fabrics = [c.fabric for c in theirs if c]
    common = max(set(fabrics), key=fabrics.count, default=None)
    gdr = [c.gdr for c in theirs if c and c.gdr]
    said = carried(transport)
    if mine and common in RDMA and mine.fabric != common:
        text = f"{said}, where the other nodes use {FABRICS[common]}: RDMA is not used on this node"
        return Row(Status.WARN, text, node=node), Remediation(
            "NCCL on this node found no RDMA network (settings, the verbs library, the devices): its log says why.",
            [SHOW],
        )
    if mine and mine.gdr == "off" and "on" in gdr:
        text = f"{said}, where the other nodes have GPUDirect RDMA"
        return Row(Status.WARN, text, node=node), Remediation(
            "GPUDirect RDMA is off here alone: the peer memory module (nvidia-peermem) or the GPU-NIC distance.",
            ["lsmod | grep -E 'nvidia_peermem|nv_peer_mem'", SHOW],
        )
    return Row(Status.PASS, said, node=node), None


def transports(outcome: Any) -> dict[str, dict[str, Any]]:
    """What carried each node's traffic in a cross-node workload's outcome, as its first rank said it
    (checks/ranks/links.used), checked for its shape."""
    found: dict[str, dict[str, Any]] = {}
    for report in outcome.ranks:
        member = outcome.node_of(report.rank)
        said = transport_of((report.data or {}).get("transport")) if member and isinstance(report.data, dict) else None
        if member and said and member.name not in found:
            found[member.name] = said
    return found


def with_transport(judged: list[Result] | Result, outcome: Any) -> list[Result]:
    """The verdicts with what carried the workload said in the first one's summary ("over gloo over TCP on eth0"),
    and judged per node (aspect "transport") with the nodes the verdicts name slow (a re-test that cleared one
    aside); and the network WARNs each node's NCCL log held (net_warnings.across_nodes), where one did."""
    results = judged if isinstance(judged, list) else [judged]
    carried = transports(outcome)
    if not carried:
        return results
    slow = {
        row.node
        for result in results
        for row in result.rows
        if row.node and not row.peer and row.status not in (Status.PASS, Status.SKIP) and row.confirmed is not False
    }
    said = f"measured over {said_transports(carried)}"
    results[0].detail = "\n".join(text for text in (said, results[0].detail) if text)
    warned = net_warnings.across_nodes(carried)
    return [*results, judge_transport(carried, slow), *([warned] if warned else [])]
