"""The causes of a slow or broken network between nodes, over the findings they explain: NCCL on TCP sockets where the
node has RDMA NICs (a setting, a missing library or plugin, a container without the devices), GPUDirect RDMA off,
fewer NICs used than GPUs, NCCL's or gloo's sockets on an interface that is down, a bridge or the loopback, PCIe
ACS on the path, an IOMMU that translates the GPUs' or NICs' DMA, nodes whose settings differ; on rank 0, a slow
node whose traffic left on another network than the others'. The judges are gpudoctor/judging/network.py and
iommu.py; each cause leads, and the low bus bandwidth, the slow node and the failed or timed-out workload it
explains fold beneath it, as on one node."""

from __future__ import annotations

from typing import Any

from gpudoctor.diagnosis import Evidence, Found
from gpudoctor.judging import iommu, network, sockets
from gpudoctor.model import Cause, Remediation, Status

# The findings a network cause explains: the network's own checks, what NCCL's log and the NICs' state say, the
# user's nccl-tests run, and cluster mode's measurements between nodes.
CROSS_NODE = ("cluster.links", "cluster.allreduce", "cluster.ddp")
SYMPTOMS = ("network.nccl", "network.interfaces", "system.nccl-env", "system.infiniband", "bench.nccl-tests")
ACS_SOURCE = (
    "NCCL troubleshooting, 'PCI Access Control Services (ACS)': ACS redirects peer-to-peer PCIe traffic through the "
    "CPU root complex, which lowers bandwidth or makes NCCL hang; disable it "
    "(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html); NVIDIA/nccl issues 606, 2079"
)


def as_cause(found: network.NetCause, where: list[str] | None = None) -> Cause:
    return Cause(
        found.id,
        found.status,
        found.summary,
        found.remediation,
        where=where or [],
        evidence=list(found.evidence),
        source=found.source,
    )


def nccl_network(ev: Evidence) -> list[Found]:
    """What NCCL's log and the node's facts show (network.causes): the first cause leads and folds the network's
    findings and cross-node figures; each further one folds only its own check's finding."""
    found = network.causes(ev.facts)
    return [
        Found(as_cause(c), fold=(*SYMPTOMS, *CROSS_NODE) if i == 0 else ("network.nccl",)) for i, c in enumerate(found)
    ]


def socket_interfaces(ev: Evidence) -> list[Found]:
    """NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME on an interface the other nodes cannot reach (the status is the
    network.interfaces check's: it knows whether the run spans nodes); else, between nodes, the loopback or a
    bridge NCCL's log says it used."""
    judged = next((r for r in ev.of("network.interfaces") if r.status != Status.PASS), None)
    spans = judged is not None and judged.status == Status.FAIL
    problems = sockets.interface_problems(ev.section("system"))
    if not problems and network.between_nodes(ev.facts, network.fabric(ev.facts)):
        problems, spans = sockets.logged_problems(ev.facts), True  # what NCCL's log says it used, between nodes
    found = []
    for i, problem in enumerate(problems):
        cause = as_cause(sockets.interface_cause(problem, spans), [problem.setting])
        found.append(Found(cause, fold=("network.interfaces", "system.nccl-env", *CROSS_NODE) if i == 0 else ()))
    return found


def pcie_acs(ev: Evidence) -> list[Found]:
    """lspci's ACSCtl with SrcValid+ in a paste (the signature pcie-acs-enabled): peer-to-peer traffic between GPUs
    and to the NICs goes through the root complex; the P2P and network findings follow from it."""
    sightings = [s for s in ev.section("paste").get("signatures") or [] if s.get("id") == "pcie-acs-enabled"]
    owner = next((r for r in ev.failing("health.pcie") if r.remediation), None)
    if not sightings:
        return []
    cure = owner.remediation if owner else Remediation("Disable ACS on the bridges between GPUs and NICs.", [])
    return [
        Found(
            Cause(
                "pcie-acs-on",
                Status.WARN,
                "PCIe ACS is on between GPUs and NICs (lspci: ACSCtl SrcValid+): peer-to-peer and GPUDirect RDMA "
                "traffic is redirected through the CPU, slow or hanging",
                cure,
                evidence=[f"line {s.get('line')}: {s.get('text')}" for s in sightings[:3]],
                source=ACS_SOURCE,
            ),
            fold=("health.pcie", "p2p.access", "p2p.topology", "network.nccl", "bench.nccl-tests"),
        )
    ]


SYSTEM_ERROR = "c10d-nccl-system-error"
SHM_SOURCE = (
    "NCCL troubleshooting: ncclSystemError means a call to an external library or the system failed, NCCL_DEBUG=WARN "
    "names it; Sharing Data / Docker: to share data between ranks NCCL needs shared system memory (/dev/shm) and "
    "pinned memory, and Docker's default is too small: --shm-size=1g --ulimit memlock=-1 "
    "(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html, "
    "troubleshooting/runtime_and_mpi_issues.html); Docker run reference, --ipc=host and --shm-size (64 MB by default), "
    "https://docs.docker.com/reference/cli/docker/container/run/; Kubernetes emptyDir with medium: Memory, "
    "https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"
)
SHM_CURE = Remediation(
    "Between the GPUs of one node NCCL talks through shared memory (/dev/shm) and pinned memory: give the container "
    "more, or run with NCCL_DEBUG=WARN to see the call that failed.",
    [
        "df -h /dev/shm  # in a container: Docker's default is 64 MB",
        "docker run --ipc=host ...  # or --shm-size=1g --ulimit memlock=-1; Compose: ipc: host or shm_size: 1gb; "
        "Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm",
        "NCCL_DEBUG=WARN torchrun ... 2>&1 | grep 'NCCL WARN'  # your launch: the WARN names the call that failed",
    ],
    source=SHM_SOURCE,
)


SOCKETS_SOURCE = (
    "NCCL troubleshooting, IP Network Interfaces: an interface that is up but cannot reach the other nodes makes NCCL "
    "fail in its init functions or hang; NCCL_SOCKET_IFNAME names the one to use "
    "(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html, env.html#nccl-socket-ifname); "
    "Docker, host network driver, https://docs.docker.com/engine/network/drivers/host/; Kubernetes PodSpec "
    "hostNetwork, https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/"
)
SOCKETS_CURE = Remediation(
    "Between nodes NCCL's system calls are its sockets: name the interface on the nodes' own network, and give "
    "containers the host's network, or run with NCCL_DEBUG=WARN to see the call that failed.",
    [
        "ip -brief address  # on each node: the interface on the network the nodes share; docker0, br-*, veth* and lo "
        "reach no other node",
        "export NCCL_SOCKET_IFNAME=eth0  # that interface's name (or a prefix: NCCL_SOCKET_IFNAME=^docker,lo,veth), on "
        "every node",
        "docker run --network=host ...  # ranks in containers: a bridge network hides the nodes from each other; "
        "Kubernetes: hostNetwork: true",
        "NCCL_DEBUG=WARN torchrun ... 2>&1 | grep 'NCCL WARN'  # your launch: the WARN names the call that failed",
    ],
    source=SOCKETS_SOURCE,
)


def spans_nodes(facts: dict[str, Any]) -> bool:
    """Whether the facts show a job over several nodes: NCCL's own, or a pasted launch command's node count."""
    nccl = facts.get("nccl") or {}
    return int(nccl.get("launch_nodes") or 0) > 1 or network.between_nodes(facts, network.fabric(facts))


def one_node(facts: dict[str, Any]) -> bool:
    """Whether the facts show every NCCL rank on one host (NCCL's own nNodes 1, or an nccl-tests run whose device
    list names one host for several GPUs) and nothing of traffic between nodes."""
    nccl = facts.get("nccl") or {}
    runs = (facts.get("benchmarks") or {}).get("nccl_tests") or []
    shown = int(nccl.get("nodes") or 0) == 1 or any(
        len(run.get("hosts") or []) == 1 and len(run.get("devices") or []) > 1 for run in runs
    )
    return shown and not spans_nodes(facts)


def system_errors(ev: Evidence) -> list[str]:
    """The lines of NCCL's "unhandled system error" (torch's wording, nccl-tests' failure line), quoted; none where
    NCCL printed a WARN line, which names the call and has a signature of its own."""
    if ev.section("nccl").get("warnings"):
        return []
    sightings = [s for s in ev.section("paste").get("signatures") or [] if s.get("id") == SYSTEM_ERROR]
    runs = (ev.section("benchmarks").get("nccl_tests")) or []
    failed = [r["failure"] for r in runs if "unhandled system error" in str(r.get("failure") or "")]
    return [f"line {s.get('line')}: {s.get('text')}" for s in sightings[:2]] + failed[:1]


def nccl_system_error_one_node(ev: Evidence) -> list[Found]:
    """NCCL's "unhandled system error" with no WARN line that names the call, from a run whose ranks are all on one
    node: there NCCL's system calls are its shared and pinned memory, most often a container's small /dev/shm."""
    quoted = system_errors(ev)
    if not quoted or not one_node(ev.facts):
        return []
    cause = Cause(
        "nccl-system-error-one-node",
        Status.WARN,
        "NCCL's system error with every rank on one node: its shared memory (/dev/shm) is the call to suspect, most "
        "often a container's 64 MB",
        SHM_CURE,
        evidence=quoted,
        source=SHM_SOURCE,
    )
    return [Found(cause, fold=("torch.nccl", "bench.nccl-tests", "system.shm"))]


def nccl_system_error_between_nodes(ev: Evidence) -> list[Found]:
    """NCCL's "unhandled system error" with no WARN line, from a job over several nodes (a launch command's node
    count, NCCL's own): the calls between nodes are its sockets, on an interface the other nodes cannot reach."""
    quoted = system_errors(ev)
    if not quoted or not spans_nodes(ev.facts):
        return []
    cause = Cause(
        "nccl-system-error-between-nodes",
        Status.WARN,
        "NCCL's system error in a job over several nodes: its sockets between the nodes are the call to suspect (an "
        "interface the others cannot reach, a container's bridge network)",
        SOCKETS_CURE,
        evidence=quoted,
        source=SOCKETS_SOURCE,
    )
    return [Found(cause, fold=("torch.nccl", "bench.nccl-tests", "network.interfaces"))]


# Peer-to-peer between GPUs: the findings an IOMMU that translates their DMA explains, beside the network's.
P2P = ("p2p.access", "allreduce.bandwidth", "bench.nvbandwidth")


def iommu_translated(ev: Evidence) -> list[Found]:
    """GPUs or RDMA NICs in IOMMU groups that translate their DMA (system.iommu) where peer-to-peer or the network
    between nodes is slow or failing, or NCCL's log has GPUDirect RDMA off: P2P's and the network's findings fold
    beneath it (after the settings and ACS, which name a cure of their own)."""
    symptoms = (*P2P, "network.nccl", "bench.nccl-tests", *CROSS_NODE)
    found = iommu.cause(ev.facts, symptoms=bool(ev.failing(*symptoms)))
    return [Found(as_cause(found), fold=symptoms)] if found else []


# --- rank 0 of a cluster run ----------------------------------------------------------------------------------


def node_paths(ev: Evidence) -> list[Found]:
    """A node the cross-node checks named slow whose traffic left on another network than the others' (or over a
    slow link of theirs): the transport finding of cluster.links or cluster.allreduce, as the cause."""
    judged = [r for r in ev.of(*CROSS_NODE) if r.aspect == "transport" and r.status not in (Status.PASS, Status.SKIP)]
    if not judged:
        return []
    first = judged[0]
    bad = [row for row in first.rows if row.node and row.status != Status.PASS]
    nodes = sorted({str(row.node) for row in bad})
    return [
        Found(
            Cause(
                "node-network-path",
                Status.WARN,
                f"{bad[0].node}: {bad[0].summary}" if bad else first.summary,
                first.remediation,
                where=nodes,
                evidence=[f"{row.node}: {row.summary}" for row in first.rows],
                source="torch.distributed, choosing the network interface (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME), "
                "https://pytorch.org/docs/stable/distributed.html#choosing-the-network-interface-to-use",
            ),
            fold=CROSS_NODE,
        )
    ]


def node_settings(ev: Evidence) -> list[Found]:
    """Nodes whose NCCL network settings differ (each node's report: its NCCL_* environment): they connect over
    the weaker setting, or not at all; cluster.skew's finding and the cross-node ones fold beneath it."""
    values: dict[str, dict[str, list[str]]] = {}
    for node in ev.nodes:
        settings = (node.get("software") or {}).get("settings") or {}
        for key in network.NETWORK_SETTINGS:
            values.setdefault(key, {}).setdefault(str(settings.get(key, "unset")), []).append(str(node.get("name")))
    differing = {key: by for key, by in values.items() if len(by) > 1}
    if not differing:
        return []
    said = "; ".join(
        f"{key}: " + ", ".join(f"{v} on {', '.join(nodes)}" for v, nodes in sorted(by.items()))
        for key, by in differing.items()
    )
    cause = as_cause(network.differ(said), sorted(differing))
    return [Found(cause, fold=("cluster.skew", *CROSS_NODE))]


RULES = (
    socket_interfaces,
    nccl_network,
    pcie_acs,
    iommu_translated,
    nccl_system_error_one_node,
    nccl_system_error_between_nodes,
)
CLUSTER_RULES = (node_settings, node_paths)
