"""The network between nodes, judged from what NCCL's log says it chose (gpudoctor/paste/nccl.py, a paste or the log
cluster mode captures per rank) and what the node's facts say it has (RDMA ports from sysfs or ibstat, the kernel
modules, the container, the interfaces and the settings): the transport, the NICs, GPUDirect RDMA; what an
all-reduce between nodes should reach on the transport NCCL chose and on the one it should have chosen; and the
causes that explain the difference, each with the command that shows it and the setting that cures it. Pure
functions of facts.

The figure for a fabric is its NICs times their line rate times the share of it a healthy all-reduce reaches there,
as published (fabric_share); the NICs NCCL uses are gpudoctor.judging.nics's. The sockets' interfaces and what
carried cluster mode's workloads are gpudoctor/judging/sockets.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpudoctor.judging import nics
from gpudoctor.judging.expect import Expectation
from gpudoctor.model import Remediation, Status

# What each name NCCL gives its network ("Using network X", "via NET/X/0") is, in gpudoctor's words.
FABRICS = {
    "socket": "TCP sockets",
    "ib": "InfiniBand",
    "roce": "RoCE",
    "efa": "AWS EFA",
    "cxi": "HPE Slingshot (CXI)",
    "ofi": "libfabric",
    "tcpx": "GPUDirect-TCPX",
    "tcpxo": "GPUDirect-TCPXO",
}
RDMA = ("ib", "roce", "efa", "cxi")
# The share of the line rate each fabric's healthy all-reduce reaches, with its source: nics.fabric_share.
fabric_share = nics.fabric_share
fabric_of = nics.fabric_of
# The distance NCCL takes GPUDirect RDMA over by default (src/graph/paths.cc: PATH_PXB), and the values of
# NCCL_NET_GDR_LEVEL that turn it off.
GDR_OFF_LEVELS = ("0", "LOC")
# NCCL settings that change the network between nodes: two nodes that differ in one of them do not run alike.
NETWORK_SETTINGS = (
    "NCCL_IB_DISABLE",
    "NCCL_NET",
    "NCCL_IB_HCA",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_IB_GID_INDEX",
    "NCCL_CROSS_NIC",
    "NCCL_NET_PLUGIN",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_ALGO",
    "NCCL_PROTO",
)
SHOW = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET python train.py 2>&1 | grep -E 'Using network|NET/|GPU Direct RDMA'"


@dataclass(frozen=True)
class Choice:
    """What NCCL's log says it chose for traffic between nodes."""

    fabric: str | None  # a key of FABRICS
    net: str  # NCCL's own name for it
    nics: list[str]  # the NICs it names (IB devices), else the NIC indexes its channels use
    nic_count: int  # NICs it uses: listed, counted by its OFI plugin, or seen on its channels
    gdr: str | None  # "on", "off", "partial" (channels), None where the log does not show it
    bootstrap: list[str]
    nodes: int | None
    local_ranks: int | None
    channels: int | None
    trees: bool

    def said(self, whole: bool = False) -> str:
        """ "NET/IB (InfiniBand), 8 NICs, GPUDirect RDMA on"; `whole`: the NICs' names, the nodes, channels and
        bootstrap too."""
        parts = [f"NET/{self.net}" + (f" ({FABRICS[self.fabric]})" if self.fabric else "")]
        if self.nic_count:
            names = ", ".join(self.nics[:4]) + (", ..." if len(self.nics) > 4 else "")
            listed = f" ({names})" if names and whole else ""
            parts.append(f"{self.nic_count} NIC{'s' if self.nic_count != 1 else ''}{listed}")
        if self.gdr:
            parts.append(f"GPUDirect RDMA {self.gdr}")
        if whole and self.nodes and self.local_ranks:
            parts.append(f"{self.nodes} nodes of {self.local_ranks} ranks")
        if whole and self.channels:
            parts.append(f"{self.channels} channels" + (", rings and trees" if self.trees else ""))
        if whole and self.bootstrap:
            parts.append(f"bootstrap on {', '.join(self.bootstrap)}")
        return ", ".join(parts)


def choice(nccl: dict[str, Any]) -> Choice | None:
    """What NCCL's log (the `nccl` facts) says it chose, or None where it names no network."""
    net = str(nccl.get("net") or "")
    if not net:
        return None
    devices = [str(d).split("/")[0] for d in nccl.get("ib_devices") or []]
    channels = [f"NIC {n}" for n in nccl.get("net_devices") or []]
    fabric = fabric_of(net, nccl)
    count = len(devices) or int(nccl.get("ofi_nics") or 0) or len(channels)
    return Choice(
        fabric=fabric,
        net=net,
        nics=devices or channels,
        nic_count=0 if fabric == "socket" else count,
        gdr=None if fabric == "socket" else nccl.get("gdrdma"),
        bootstrap=[str(b) for b in nccl.get("bootstrap") or []],
        nodes=nccl.get("nodes"),
        local_ranks=nccl.get("local_ranks"),
        channels=nccl.get("channels"),
        trees=bool(nccl.get("trees")),
    )


# --- what the fabric should give ------------------------------------------------------------------------------


def expectation(fabric: str | None, gbits: list[float], whose: str) -> Expectation | None:
    """What an all-reduce between nodes reaches over NICs of these line rates (Gb/s) on `fabric`."""
    share = fabric_share(fabric)
    total = sum(gbits)
    if share is None or not total:
        return None
    value, source = share
    return Expectation(
        total / 8 * value,
        f"{whose}: {len(gbits)} x {FABRICS.get(fabric or '', fabric)} NIC{'s' if len(gbits) != 1 else ''}, "
        f"{total:g} Gb/s, x {value:.2f} ({source})",
        of=f"a healthy {FABRICS.get(fabric or '', fabric)} network of {total:g} Gb/s",
    )


def rdma_ports(facts: dict[str, Any], named: bool = True) -> tuple[list[dict[str, Any]], list[str]]:
    """The RDMA ports NCCL would use here (nics.nccl_nics: active, NCCL_IB_HCA, near the GPUs, one fabric and
    speed), and why the others are left out; `named` False: whatever NCCL_IB_HCA says (the ports the node has)."""
    system = facts.get("system") or {}
    numa = {n for n in (system.get("gpu_numa_nodes") or {}).values() if isinstance(n, int)}
    ports = system.get("infiniband") or []
    if not any("ACTIVE" in str(p.get("state", "")) for p in ports):
        return [], []
    env = {k: v for k, v in (system.get("env") or {}).items() if named or k != "NCCL_IB_HCA"}
    return nics.nccl_nics(ports, numa, env)


def port_fabric(ports: list[dict[str, Any]]) -> str | None:
    layers = {str(p.get("link_layer") or "") for p in ports}
    if not ports:
        return None
    return "roce" if layers == {"Ethernet"} else "ib"


def socket_gbits(facts: dict[str, Any], names: list[str]) -> list[float]:
    """The line rate of the interfaces NCCL's sockets use, from the node's links (sysfs speed, Mb/s)."""
    links = {str(link.get("name")): link for link in (facts.get("system") or {}).get("links") or []}
    speeds = [links[n].get("speed_mbps") for n in names if n in links]
    return [s / 1000 for s in speeds if isinstance(s, int | float) and s > 0]


@dataclass
class Fabric:
    """The network between nodes as the facts show it: what NCCL chose, the RDMA ports the node has, and the
    figure each should give."""

    chosen: Choice | None
    ports: list[dict[str, Any]] = field(default_factory=list)  # RDMA ports NCCL would use
    left_out: list[str] = field(default_factory=list)
    best: str | None = None  # the fabric NCCL should use here
    expected_chosen: Expectation | None = None
    expected_best: Expectation | None = None


def fabric(facts: dict[str, Any]) -> Fabric:
    nccl = facts.get("nccl") or {}
    chosen = choice(nccl)
    ports, left = rdma_ports(facts)
    best = port_fabric(ports) or (chosen.fabric if chosen and chosen.fabric in RDMA else None)
    found = Fabric(chosen, ports, left, best)
    gbits = [float(p["gbits"]) for p in ports]
    if best in ("ib", "roce") and ports:
        per_node = int(nccl.get("local_ranks") or 0) or len(gbits)
        found.expected_best = expectation(best, gbits[:per_node], "each node")
    if chosen and chosen.fabric == best:
        found.expected_chosen = found.expected_best
    elif chosen and chosen.fabric == "socket":
        names = [str(i) for i in nccl.get("interfaces") or []]
        found.expected_chosen = expectation("socket", socket_gbits(facts, names), "the socket interfaces")
    return found


# --- causes ---------------------------------------------------------------------------------------------------


@dataclass
class NetCause:
    """A cause of a slow or broken network between nodes, as the facts show it: what it is, its status, what it
    rests on and what says so, and the cure (the command that shows it, the setting that fixes it)."""

    id: str
    status: Status
    summary: str
    remediation: Remediation
    evidence: list[str] = field(default_factory=list)
    source: str = ""


def truthy(value: Any) -> bool:
    """An integer NCCL setting that is on (NCCL reads a number; anything else as 0)."""
    text = str(value or "").strip()
    return text.isascii() and text.lstrip("-").isdigit() and int(text[:12]) != 0


def causes(facts: dict[str, Any]) -> list[NetCause]:
    """Every cause the facts show, the one to act on first first: the RDMA network not used, GPUDirect RDMA off,
    fewer NICs than GPUs, settings that differ between the nodes of a log."""
    found = fabric(facts)
    return [
        *rdma_unused(facts, found),
        *gdr_off(facts, found),
        *fewer_nics(facts, found),
        *settings_differ(facts),
    ]


def env_of(facts: dict[str, Any]) -> dict[str, str]:
    """The NCCL settings the facts show: the node's environment (or what NCCL's log says it read), and what an
    nccl-tests command line in the same file passed (mpirun's -x NCCL_IB_DISABLE=1)."""
    runs = (facts.get("benchmarks") or {}).get("nccl_tests") or []
    passed = {k: str(v) for run in runs for k, v in (run.get("env") or {}).items() if str(k).startswith("NCCL_")}
    return {**passed, **((facts.get("system") or {}).get("env") or {})}


def rdma_unused(facts: dict[str, Any], found: Fabric) -> list[NetCause]:
    """NCCL on TCP sockets (or failing to start) where the facts say why RDMA was not used: a setting turned it
    off, NCCL_NET named a network no plugin gives, the verbs library or the OFI provider was missing, a container
    without the RDMA devices."""
    env, nccl = env_of(facts), facts.get("nccl") or {}
    no_rdma = set(nccl.get("no_rdma") or [])
    on_sockets = found.chosen is not None and found.chosen.fabric == "socket"
    have = f"{len(found.ports)} active RDMA port{'s' if len(found.ports) != 1 else ''} here" if found.ports else ""
    status = Status.FAIL if found.ports else Status.WARN
    if "network not found" in no_rdma or (str(env.get("NCCL_NET") or "").lower() == "socket" and found.ports):
        return [net_setting(env.get("NCCL_NET"), "network not found" in no_rdma, have)]
    if "no OFI provider" in no_rdma:
        return [ofi_no_provider(facts)]
    if not between_nodes(facts, found):
        return []  # one node: NCCL needs no network, and a missing verbs library or IB turned off costs nothing
    if truthy(env.get("NCCL_IB_DISABLE")):
        return [ib_disabled(env["NCCL_IB_DISABLE"], have, status, on_sockets)]
    if "no libibverbs" in no_rdma:
        return [no_verbs(facts, have, status)]
    container = (facts.get("system") or {}).get("container")
    devices = (facts.get("system") or {}).get("rdma_devices")
    if (container and found.ports and devices == []) or ("no IB device" in no_rdma and found.ports and on_sockets):
        return [hidden_devices(container, have, "no IB device" in no_rdma)]
    return []


def between_nodes(facts: dict[str, Any], found: Fabric) -> bool:
    """Whether the facts show traffic between nodes, or a node made for it: NCCL's nodes or its channels over a
    network, an nccl-tests run over several hosts, RDMA ports, an IPoIB interface, a job that spans nodes."""
    nccl = facts.get("nccl") or {}
    runs = (facts.get("benchmarks") or {}).get("nccl_tests") or []
    return (
        int(nccl.get("nodes") or 0) > 1
        or bool(nccl.get("net_devices"))
        or any(str(t).startswith("NET/") for t in nccl.get("transports") or [])
        or any(len(run.get("hosts") or []) > 1 for run in runs)
        or bool(found.ports)
        or any(str(name).startswith("ib") for name in nccl.get("interfaces") or [])
        or spans_nodes((facts.get("system") or {}).get("env") or {})
    )


def spans_nodes(env: dict[str, str]) -> bool:
    """Whether the job this runs in spans nodes: Slurm's node count (the job's or the step's), or a torchrun world
    beyond this node."""

    def count(key: str) -> int:
        text = str(env.get(key) or "").strip()
        return int(text[:9]) if text.isascii() and text.isdigit() else 0

    nodes = max(count(k) for k in ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_STEP_NUM_NODES"))
    return nodes > 1 or count("WORLD_SIZE") > count("LOCAL_WORLD_SIZE") > 0


def _shown(extra: list[str]) -> list[str]:
    return [*extra, SHOW]


def ib_disabled(value: str, have: str, status: Status, on_sockets: bool) -> NetCause:
    said = "NCCL carries traffic between nodes over TCP sockets" if on_sockets else "NCCL will use TCP sockets"
    return NetCause(
        "nccl-ib-disabled",
        status,
        f"NCCL_IB_DISABLE={value} turns InfiniBand and RoCE off: {said}" + (f" ({have})" if have else ""),
        Remediation(
            "NCCL_IB_DISABLE is read as a number: anything but 0 leaves NCCL only its socket transport between "
            "nodes, a tenth or less of what RDMA NICs carry. Unset it where the job is launched (every node).",
            _shown(["unset NCCL_IB_DISABLE"]),
        ),
        [f"NCCL_IB_DISABLE={value}"],
        "NCCL environment variables, NCCL_IB_DISABLE ('Define and set to 1 to disable the IB/RoCE transport that "
        "is to be used by NCCL. Instead, NCCL will fallback to using IP sockets'), "
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    )


def net_setting(value: str | None, missing: bool, have: str) -> NetCause:
    if missing:
        summary = f"NCCL_NET={value!r} names a network no loaded plugin gives (NCCL: 'Error: network ... not found')"
        if not value:
            summary = "NCCL was asked for a network no loaded plugin gives (NCCL: 'Error: network ... not found')"
        why = (
            "NCCL_NET names the network NCCL must use; where its plugin (aws-ofi-nccl for 'AWS Libfabric', the "
            "RDMA-SHARP plugin for 'IBext') is not on the library path, NCCL refuses to start ('invalid usage'). "
            "Load the plugin (a module, the EFA installer, the container's plugin folder on LD_LIBRARY_PATH), or "
            "unset NCCL_NET to let NCCL choose."
        )
        commands = [
            "ldconfig -p | grep -E 'libnccl-net'",
            "echo $LD_LIBRARY_PATH",
            "unset NCCL_NET  # or load the plugin",
        ]
        status = Status.FAIL
    else:
        summary = f"NCCL_NET={value!r} makes NCCL use TCP sockets ({have})"
        why = "NCCL_NET=Socket forces the socket transport between nodes; unset it to use the RDMA NICs."
        commands, status = ["unset NCCL_NET"], Status.FAIL
    return NetCause(
        "nccl-net-setting",
        status,
        summary,
        Remediation(why, _shown(commands)),
        [*([f"NCCL_NET={value}"] if value else []), *(["NCCL WARN Error: network ... not found."] if missing else [])],
        "NCCL environment variables, NCCL_NET ('Forces NCCL to use a specific network ... If the network is not "
        "found, NCCL will fail'), https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html; "
        "eth-cscs/cscs-docs docs/software/communication/nccl.md (PR 75): 'network AWS Libfabric not found' when "
        "the aws-ofi-nccl plugin is not loaded",
    )


def ofi_no_provider(facts: dict[str, Any]) -> NetCause:
    container = (facts.get("system") or {}).get("container")
    where = " in this container" if container else ""
    return NetCause(
        "nccl-ofi-no-provider",
        Status.FAIL,
        f"aws-ofi-nccl found no libfabric provider (EFA){where}: NCCL falls back to TCP sockets or fails",
        Remediation(
            "libfabric lists no EFA device: the instance has none, the EFA driver is not loaded, or a container was "
            "started without the devices under /dev/infiniband. Pass them to the container (docker run --device "
            "for each /dev/infiniband/uverbsN, or the EFA device plugin on Kubernetes) and check again.",
            [
                "ls /dev/infiniband",
                "fi_info -p efa -t FI_EP_RDM",
                "docker run --device=/dev/infiniband/uverbs0 ...  # each uverbsN, as ls /dev/infiniband lists them",
            ],
        ),
        ["NET/OFI: no libfabric provider"],
        "aws/aws-ofi-nccl issue 1020 (sean-smith, 2025-10-17: 'we weren't exposing the /dev/infiniband devices on "
        "the container'); NVIDIA/nccl issue 229 (sjeaugey: the OFI plugin did not initialise, so NCCL tried "
        "InfiniBand and fell back on sockets)",
    )


def no_verbs(facts: dict[str, Any], have: str, status: Status) -> NetCause:
    distro = ((facts.get("system") or {}).get("os_release") or {}).get("id") or ""
    install = (
        "sudo dnf install -y rdma-core libibverbs"
        if distro in ("rhel", "rocky", "almalinux", "centos", "fedora", "amzn")
        else "sudo apt-get install -y libibverbs1 ibverbs-providers"
    )
    return NetCause(
        "nccl-no-libibverbs",
        status,
        "NCCL could not load libibverbs, so it cannot use InfiniBand or RoCE" + (f" ({have})" if have else ""),
        Remediation(
            "NCCL reaches RDMA NICs through libibverbs (rdma-core); without it NCCL uses TCP sockets between nodes. "
            "Install it on the node, or in the container image the job runs in.",
            ["ldconfig -p | grep libibverbs", install],
        ),
        ["NCCL WARN Failed to open libibverbs.so[.1]"],
        "NVIDIA/nccl src/misc/ibvwrap.cc (WARN 'Failed to open libibverbs.so[.1]', then the socket transport); "
        "NVIDIA/nccl-tests issue 82",
    )


def hidden_devices(container: str | None, have: str, logged: bool) -> NetCause:
    where = f"this container ({container})" if container else "this node"
    return NetCause(
        "rdma-devices-hidden",
        Status.FAIL,
        f"{where} cannot see the RDMA devices (/dev/infiniband), so NCCL finds no InfiniBand or RoCE device"
        + (f" ({have} on the host)" if have else ""),
        Remediation(
            "NCCL opens the NICs through /dev/infiniband/uverbsN; a container started without them (or without "
            "IPC_LOCK) has only TCP sockets between nodes. Start it with the devices.",
            [
                "ls -l /dev/infiniband",
                "docker run --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1 ...",
            ],
        ),
        [*(["NCCL: NET/IB : No device found"] if logged else []), *(["/dev/infiniband: empty"] if container else [])],
        "NVIDIA/nccl src/transport/net_ib.cc ('NET/IB : No device found.', then NET/Socket); NCCL troubleshooting, "
        "'Docker': run containers with the InfiniBand devices, https://docs.nvidia.com/deeplearning/nccl/"
        "user-guide/docs/troubleshooting.html",
    )


def gdr_off(facts: dict[str, Any], found: Fabric) -> list[NetCause]:
    """GPUDirect RDMA off: the peer memory module missing (NCCL: 'GPU Direct RDMA Disabled for HCA'), a GPU too far
    from its NIC ('... for GPU x / HCA n (distance a > b)'), NCCL_NET_GDR_LEVEL turning it off, or the channels
    between nodes running without it."""
    nccl, env = facts.get("nccl") or {}, env_of(facts)
    disabled = [d for d in nccl.get("gdr_disabled") or [] if isinstance(d, dict)]
    far = [d for d in disabled if "distance" in d]
    module = [d for d in disabled if "distance" not in d]
    level = str(env.get("NCCL_NET_GDR_LEVEL") or "").strip().upper()
    if level in GDR_OFF_LEVELS:
        return [gdr_level(level)]
    if module:
        return [no_peer_memory(facts, module)]
    if far:
        return [too_far(far)]
    if found.chosen and found.chosen.gdr == "off" and found.chosen.fabric in ("ib", "roce"):
        return [no_peer_memory(facts, [])]
    apart = far_in_topology(facts)
    return [too_far(apart)] if apart and between_nodes(facts, found) else []


# NCCL takes GPUDirect RDMA within PXB (src/graph/paths.cc, PATH_PXB). Grace boards reach their NICs over
# NVLink-C2C, which topo -m shows as SYS.
GDR_WITHIN = 20
GRACE = ("GH200", "GB200", "GB300")


def far_in_topology(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """GPUs whose nearest NIC in `topo -m` (or NVML's topology) is beyond a PCIe switch (PHB, NODE, SYS: through the
    CPU or the other socket) on a board where another GPU has one beside it; as the log's lines say them."""
    nvml = facts.get("nvml") or {}
    gpus = nvml.get("gpus") or []
    if any(any(g in str(gpu.get("name") or "") for g in GRACE) for gpu in gpus):
        return []
    nearest = nics.nearest_nics(nvml.get("topology") or {})
    if not any(n["level"] <= GDR_WITHIN for n in nearest):
        return []  # no GPU has a NIC beside it: the board's own layout, not one GPU's
    return [
        {"gpu": f"GPU {n['gpu']}", "hca": n["nic"], "distance": n["distance"], "limit": "PXB"}
        for n in nearest
        if n["level"] > GDR_WITHIN
    ]


def gdr_level(level: str) -> NetCause:
    return NetCause(
        "nccl-gdr-level",
        Status.WARN,
        f"NCCL_NET_GDR_LEVEL={level} turns GPUDirect RDMA off: traffic between nodes is staged through host memory",
        Remediation(
            "Unset it to let NCCL use GPUDirect RDMA where the GPU and NIC are close.",
            _shown(["unset NCCL_NET_GDR_LEVEL"]),
        ),
        [f"NCCL_NET_GDR_LEVEL={level}"],
        "NCCL environment variables, NCCL_NET_GDR_LEVEL (LOC: never use GPU Direct RDMA), "
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    )


def no_peer_memory(facts: dict[str, Any], module: list[dict[str, Any]]) -> NetCause:
    hcas = ", ".join(dict.fromkeys(str(d.get("hca")) for d in module)) or "its NICs"
    loaded = {"nvidia_peermem", "nv_peer_mem"} & set((facts.get("system") or {}).get("kernel_modules") or [])
    version = str((facts.get("nccl") or {}).get("version") or "")
    said = (
        f"GPUDirect RDMA is off on {hcas}: the NICs cannot reach GPU memory, so traffic between nodes is staged "
        "through host memory"
    )
    if loaded:
        why = (
            f"{', '.join(sorted(loaded))} is loaded, yet NCCL turned GPUDirect RDMA off: NCCL 2.22.3 and older look "
            "only for nv_peer_mem's entry under /sys/kernel/mm/memory_peers, which nvidia-peermem does not make on "
            "some kernels (DGX OS 25.01: all-reduce between 2 nodes fell from ~180 to ~10 GB/s). Upgrade NCCL."
        )
        commands = [
            "ls /sys/kernel/mm/memory_peers/",
            "pip install -U nvidia-nccl-cu12  # or the NCCL your framework ships",
        ]
    else:
        why = (
            "The NIC reads and writes GPU memory directly only with the peer memory module (nvidia-peermem, from the "
            "driver; nv_peer_mem, older) loaded, or with DMA-BUF (NCCL 2.19+, the open kernel modules). Load it on "
            "every node, and at boot."
        )
        commands = [
            "lsmod | grep -E 'nvidia_peermem|nv_peer_mem'",
            "sudo modprobe nvidia-peermem && echo nvidia-peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf",
        ]
    return NetCause(
        "nccl-gdr-off",
        Status.WARN,
        said + (f" (NCCL {version})" if version else ""),
        Remediation(why, _shown(commands)),
        [f"GPU Direct RDMA Disabled for HCA {d.get('hca')}" for d in module]
        or ["channels between nodes without /GDRDMA"],
        "NVIDIA/nccl issue 1676 (xman1979, 2025-04: 'GPU Direct RDMA Disabled for HCA' after nv_peer_mem became "
        "nvidia-peermem, NCCL <= 2.22.3; ~180 -> ~10 GB/s); issue 1537; NVIDIA GPUDirect RDMA documentation "
        "(nvidia-peermem)",
    )


def too_far(far: list[dict[str, Any]]) -> NetCause:
    first = far[0]
    gpu = str(first.get("gpu"))
    said = f"{gpu if gpu.startswith('GPU') else 'GPU ' + gpu} / HCA {first.get('hca')}: distance "
    said += f"{first.get('distance')} > {first.get('limit')}" + (f", and {len(far) - 1} more" if len(far) > 1 else "")
    return NetCause(
        "nic-far-from-gpu",
        Status.WARN,
        f"GPUDirect RDMA is off where a GPU's NIC is too far away on the PCIe tree ({said}): across the CPU or the "
        "other socket, traffic between nodes goes through host memory",
        Remediation(
            "NCCL takes GPUDirect RDMA only within NCCL_NET_GDR_LEVEL of the GPU (a PCIe switch by default). Use the "
            "NIC beside each GPU (nvidia-smi topo -m: PIX or PXB), or, where none is near, NCCL_NET_GDR_LEVEL=SYS "
            "(NCCL's maintainers: it may not be faster when the data crosses the CPU).",
            ["nvidia-smi topo -m", "export NCCL_NET_GDR_LEVEL=SYS  # only to compare: measure both"],
        ),
        [said],
        "NVIDIA/nccl issue 1151 (sjeaugey, 2024-01-19: 'You may force the use of GPU Direct RDMA setting "
        "NCCL_NET_GDR_LEVEL=SYS, but it may not give you better performance if the NIC and GPU are not on the same "
        "PCI switch'); src/graph/paths.cc ncclTopoCheckGdr",
    )


def gpus_per_node(facts: dict[str, Any]) -> int | None:
    """GPUs (ranks) per node: NCCL's localRanks, else the most GPUs one host of an nccl-tests run shows."""
    nccl = facts.get("nccl") or {}
    if nccl.get("local_ranks"):
        return int(nccl["local_ranks"])
    per_host: dict[str, int] = {}
    for run in (facts.get("benchmarks") or {}).get("nccl_tests") or []:
        for device in run.get("devices") or []:
            per_host[str(device.get("host"))] = per_host.get(str(device.get("host")), 0) + 1
    return max(per_host.values(), default=0) or None


def fewer_nics(facts: dict[str, Any], found: Fabric) -> list[NetCause]:
    """NCCL using fewer RDMA NICs than the node has for its GPUs (NCCL_IB_HCA, a port down); GPUs sharing NICs
    where the node has fewer than GPUs (NCCL pairs each GPU with its nearest NIC: src/graph/search.cc)."""
    chosen, gpus = found.chosen, gpus_per_node(facts)
    if chosen is None or chosen.fabric not in RDMA or not chosen.nic_count:
        return []
    have = len(rdma_ports(facts, named=False)[0])
    hca = env_of(facts).get("NCCL_IB_HCA")
    if have > chosen.nic_count and (gpus is None or chosen.nic_count < gpus):
        return [unused_nics(chosen, have, hca)]
    if gpus and chosen.nic_count < gpus and have <= chosen.nic_count:
        return [shared_nics(chosen, gpus)]
    return []


def unused_nics(chosen: Choice, have: int, hca: str | None) -> NetCause:
    setting = f" (NCCL_IB_HCA={hca})" if hca else ""
    return NetCause(
        "nccl-nics-unused",
        Status.WARN,
        f"NCCL uses {chosen.nic_count} of the {have} RDMA NICs here{setting}: the others carry nothing",
        Remediation(
            "NCCL spreads traffic between nodes over the NICs it uses; a NCCL_IB_HCA that names a few, or NICs down "
            "on some node, leave the others idle. List them all (or unset NCCL_IB_HCA).",
            _shown(["ibstat | grep -E 'CA |State|Rate'", "unset NCCL_IB_HCA" if hca else "ibstat"]),
        ),
        [f"{chosen.nic_count} NICs in NCCL's log, {have} active RDMA ports"],
        "NCCL environment variables, NCCL_IB_HCA, https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    )


def shared_nics(chosen: Choice, gpus: int) -> NetCause:
    return NetCause(
        "nccl-nics-shared",
        Status.WARN,
        f"{chosen.nic_count} NIC{'s' if chosen.nic_count != 1 else ''} for {gpus} GPUs a node: GPUs share NICs, so "
        "each node's share of an all-reduce is at most what those NICs carry",
        Remediation(
            "NCCL pairs each GPU with its nearest NIC; with fewer NICs than GPUs they take turns. Expect the figure of "
            "the NICs there are, or add NICs (one per GPU on HGX boards).",
            ["nvidia-smi topo -m", "ibstat | grep -E 'CA |State|Rate'"],
        ),
        [f"{chosen.nic_count} NICs, {gpus} GPUs per node"],
        "NVIDIA/nccl src/graph/search.cc (channels pair GPUs with NICs); NVIDIA/nccl-tests issue 267",
    )


def settings_differ(facts: dict[str, Any]) -> list[NetCause]:
    """A log from several nodes whose NCCL settings differ ("NCCL_IB_DISABLE set by environment to 1" on one, 0 on
    another): the paste's conflicts on those settings."""
    conflicts = (facts.get("paste") or {}).get("conflicts") or []
    differing = [c for c in conflicts if str(c.get("fact", "")).removeprefix("system.env.") in NETWORK_SETTINGS]
    if not differing:
        return []
    said = "; ".join(
        f"{c['fact'].removeprefix('system.env.')}: "
        + " / ".join(f"{v.get('value')} (line {v.get('line')})" for v in c.get("values") or [])
        for c in differing
    )
    return [differ(said)]


def differ(said: str) -> NetCause:
    return NetCause(
        "nccl-settings-differ",
        Status.WARN,
        f"the nodes run with different NCCL network settings: {said}",
        Remediation(
            "Nodes that disagree on the transport, the NICs or GPUDirect RDMA connect over the weakest of them, or "
            "not at all. Set these the same on every node (the job's environment, /etc/nccl.conf).",
            ["env | grep ^NCCL_  # on every node", "cat /etc/nccl.conf ~/.nccl.conf 2>/dev/null"],
        ),
        [said],
        "NCCL environment variables: settings are read per process (environment, /etc/nccl.conf, ~/.nccl.conf), "
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    )
