"""The host around the GPUs: shared memory, RAM and cores per GPU, limits, NUMA, NCCL/Gloo environment, InfiniBand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.api import (
    Metric,
    Remediation,
    Result,
    Row,
    Status,
    Unsafe,
    check,
    command,
    fix,
    from_rows,
    gpu_row,
    is_geforce,
    routes,
    word,
)

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext

GIB = 2**30
DISABLING_VARS = {
    "NCCL_P2P_DISABLE": "GPU peer-to-peer (NVLink/PCIe P2P) is off: collectives go through host memory",
    "NCCL_SHM_DISABLE": "shared-memory transport is off: intra-node traffic falls back to sockets",
    "NCCL_IB_DISABLE": "InfiniBand/RoCE is off: multi-node traffic falls back to TCP sockets",
}


def judge_shm(system: dict[str, Any], min_gib: float) -> Result:
    size = system.get("shm_bytes")
    if size is None:
        return Result(
            Status.WARN,
            "/dev/shm is missing: DataLoader workers and NCCL need it",
            remediation=_shm_fix(system),
        )
    metric = Metric("shm", round(size / GIB, 2), "GiB", expected=f">= {min_gib}", expected_source="config min_gib")
    if size < min_gib * GIB:
        return Result(
            Status.WARN,
            f"/dev/shm is {size / 2**20:.0f} MiB: DataLoader workers die with 'Bus error' and NCCL's "
            "shared-memory transport fails",
            metrics=[metric],
            remediation=_shm_fix(system),
        )
    return Result(Status.PASS, f"/dev/shm {size / GIB:.1f} GiB", metrics=[metric])


def _shm_fix(system: dict[str, Any]) -> Remediation:
    if system.get("container"):
        return Remediation(
            "Containers get 64 MB of /dev/shm unless told otherwise.",
            [
                "docker run --shm-size=16g ...  # or --ipc=host",
                "kubernetes: mount an emptyDir with medium: Memory at /dev/shm",
            ],
        )
    return Remediation("Enlarge the tmpfs at /dev/shm.", ["sudo mount -o remount,size=16G /dev/shm"])


def judge_memory(system: dict[str, Any], gpu_count: int, min_gib_per_gpu: float, min_cpus_per_gpu: int) -> Result:
    gpus = max(gpu_count, 1)
    ram = system.get("memory_bytes", 0) / GIB / gpus
    cpus = len(system.get("cpu_affinity") or []) / gpus
    metrics = [
        Metric("ram_per_gpu", round(ram, 1), "GiB", expected=f">= {min_gib_per_gpu}"),
        Metric("cpus_per_gpu", round(cpus, 1), "", expected=f">= {min_cpus_per_gpu}"),
    ]
    problems = []
    if ram < min_gib_per_gpu:
        problems.append(f"{ram:.1f} GiB RAM per GPU (data loading and pinned buffers need >= {min_gib_per_gpu})")
    if cpus < min_cpus_per_gpu:
        problems.append(f"{cpus:.1f} usable cores per GPU (DataLoader workers need >= {min_cpus_per_gpu})")
    if problems:
        return Result(
            Status.WARN,
            "; ".join(problems),
            metrics=metrics,
            remediation=Remediation(
                "Give the job more memory or cores, or use fewer GPUs per node.", ["nproc", "free -g", "taskset -cp $$"]
            ),
        )
    return Result(Status.PASS, f"{ram:.0f} GiB RAM and {cpus:.0f} cores per GPU", metrics=metrics)


def judge_limits(system: dict[str, Any], min_nofile: int) -> Result:
    limits = system.get("limits", {})
    problems = []
    if system.get("infiniband") and limits.get("memlock") is not None:
        problems.append(f"memlock limited to {limits['memlock'] // 1024} KiB: RDMA memory registration fails")
    nofile = limits.get("nofile")
    if nofile is not None and nofile < min_nofile:
        problems.append(f"open files limited to {nofile}: DataLoader workers fail with 'Too many open files'")
    if problems:
        return Result(
            Status.WARN,
            "; ".join(problems),
            remediation=Remediation(
                "Raise the limits for the job's user (limits.conf, or the container runtime's ulimits).",
                [
                    "ulimit -l unlimited; ulimit -n 1048576",
                    "ulimit -l; ulimit -n  # in a container: docker run --ulimit memlock=-1 --ulimit nofile=1048576",
                ],
            ),
        )
    memlock = "unlimited" if limits.get("memlock") is None else f"{limits['memlock'] // 1024} KiB"
    return Result(Status.PASS, f"memlock {memlock}, open files {nofile or 'unlimited'}")


def judge_numa(system: dict[str, Any], gpus: list[dict[str, Any]]) -> Result:
    nodes = system.get("numa_nodes", {})
    affinity = set(system.get("cpu_affinity", []))
    if len(nodes) < 2:
        return Result(Status.PASS, "one NUMA node: every core is local to every GPU")
    gpu_nodes = system.get("gpu_numa_nodes", {})
    rows: list[Row] = []
    far: dict[int, list[Any]] = {}
    for gpu in gpus:
        node = gpu_nodes.get(gpu.get("pci_bus_id") or "")
        local = set(nodes.get(str(node), [])) if node is not None and node >= 0 else set()
        if not local:
            rows.append(gpu_row(gpu, Status.SKIP, "NUMA node unknown"))
        elif affinity & local:
            rows.append(gpu_row(gpu, Status.PASS, f"NUMA node {node}, local cores usable"))
        else:
            rows.append(gpu_row(gpu, Status.WARN, f"on NUMA node {node} but this process may not run on its cores"))
            far.setdefault(node, []).append(gpu.get("index"))
    return from_rows(
        rows,
        "every GPU's NUMA node has cores this process can use",
        fix(
            "Bind each rank to the cores of its GPU's NUMA node, or widen the job's CPU set.",
            lambda: ["nvidia-smi topo -m", *numa_binds(far)],
        ),
    )


def numa_binds(far: dict[int, list[Any]]) -> list[str]:
    """`numactl --cpunodebind=1 --membind=1 python train.py  # the ranks on GPU 4, 5`, one per NUMA node."""
    return [
        f"numactl --cpunodebind={word(node, 'number')} --membind={word(node, 'number')} python train.py  "
        f"# the ranks on GPU {', '.join(word(i, 'number') for i in indexes)}"
        for node, indexes in far.items()
    ]


def judge_container(system: dict[str, Any]) -> Result:
    kind = system.get("container")
    return Result(Status.PASS, f"running in a container ({kind})" if kind else "not in a container")


def interface_matches(spec: str, interfaces: list[str]) -> list[str]:
    """NCCL_SOCKET_IFNAME syntax: comma-separated prefixes; ^ excludes, = asks for exact names."""
    exclude = spec.startswith("^")
    body = spec.lstrip("^")
    exact = body.startswith("=")
    names = [n for n in body.lstrip("=").split(",") if n]

    def hit(iface: str) -> bool:
        return any(iface == n if exact else iface.startswith(n) for n in names)

    return [i for i in interfaces if hit(i) != exclude]


# Interfaces other hosts cannot reach: container, VM and overlay bridges, tunnels, loopback.
VIRTUAL_PREFIXES = (
    "docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "tailscale", "wg", "vxlan", "tun", "tap",
    "lo", "ip6tnl", "tunl", "kube", "podman", "lxcbr", "vnet",
)  # fmt: skip
# NCCL's own choice with NCCL_SOCKET_IFNAME unset (NVIDIA/nccl src/misc/socket.cc, ncclFindInterfaces, at
# v2.30.7-1): names starting "ib", else any name not starting docker/lo/virbr, else docker, else lo, else virbr;
# the first stage that finds one wins, in getifaddrs order; bootstrap takes the first (one interface).
NCCL_STAGES = (
    lambda name: name.startswith("ib"),
    lambda name: not name.startswith(("docker", "lo", "virbr")),
    lambda name: name.startswith("docker"),
    lambda name: name.startswith("lo"),
    lambda name: name.startswith("virbr"),
)


def multi_node(env: dict[str, str]) -> bool:
    """Whether the job this runs in spans nodes: Slurm's node count, or torchrun's world beyond this node."""
    nodes = env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or ""
    world, local = env.get("WORLD_SIZE", ""), env.get("LOCAL_WORLD_SIZE", "")
    spans_torchrun = _count(world) > _count(local) > 0
    return _count(nodes) > 1 or spans_torchrun


def _count(text: str) -> int:
    """A count the environment states, in ASCII digits (nine at most); 0 for anything else."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0


def nccl_interface(addresses: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The address NCCL bootstraps over when NCCL_SOCKET_IFNAME is unset (its stages, in getifaddrs order;
    IPv6 loopback skipped; interfaces that are down skipped, as NCCL does from 2.28.3)."""
    usable = [a for a in addresses if a.get("up", True) and a.get("address") != "::1"]
    for stage in NCCL_STAGES:
        found = [a for a in usable if stage(a["name"])]
        if found:
            return found[0]
    return None


def reachable(address: dict[str, Any]) -> bool:
    """An address on a physical interface that other hosts can route to (not link-local, not loopback)."""
    ip = str(address.get("address", ""))
    local = ip.startswith(("fe80:", "169.254.", "127.")) or ip == "::1"
    return not local and not address.get("virtual", False) and not address["name"].startswith(VIRTUAL_PREFIXES)


def interface_finding(system: dict[str, Any], spans_nodes: bool) -> tuple[Status, str, str] | None:
    """On a multi-node job with NCCL_SOCKET_IFNAME unset: the interface NCCL would choose, where other nodes
    cannot reach it (a bridge, veth, tunnel, loopback or a link-local address); None where it is fine or the
    facts do not say."""
    env, addresses = system.get("env", {}), system.get("interface_addresses")
    if len(env.get("NCCL_SOCKET_IFNAME", "")) > 1 or not addresses or not (spans_nodes or multi_node(env)):
        return None
    chosen = nccl_interface(addresses)
    if chosen and reachable(chosen):
        return None
    better = next((a for a in addresses if a.get("up", True) and reachable(a)), None)
    said = f"{chosen['name']} ({chosen['address']})" if chosen else "no interface"
    if better is None:
        text = f"multi-node job, but NCCL would use {said}: this node has no interface other nodes can reach"
        return (Status.FAIL, text, "ip -brief addr")
    text = (
        f"multi-node job with NCCL_SOCKET_IFNAME unset: NCCL would bootstrap over {said}, which other nodes "
        f"cannot reach; {better['name']} ({better['address']}) can"
    )
    try:
        return (Status.WARN, text, command("export NCCL_SOCKET_IFNAME={interface}", interface=better["name"]))
    except Unsafe as exc:
        return (Status.WARN, f"{text} (no command given: {exc})", "ip -brief addr")


def judge_nccl_env(system: dict[str, Any], geforce_pairs: bool = False, spans_nodes: bool = False) -> Result:
    """`geforce_pairs`: two or more GeForce boards here, where NCCL_P2P_DISABLE is the fix, not a hazard;
    `spans_nodes`: a cluster run (else the job's environment says whether it spans nodes)."""
    env = system.get("env", {})
    interfaces = system.get("interfaces", [])
    findings: list[tuple[Status, str, str]] = []
    for var, effect in DISABLING_VARS.items():
        value = env.get(var, "")
        if routes.nccl_int(value) and not (geforce_pairs and var == "NCCL_P2P_DISABLE"):
            findings.append((Status.WARN, f"{var}={value}: {effect}", command("unset {variable}", variable=var)))
        elif value.strip() and not routes.NCCL_NUMBER.match(value):
            said = f"{var}={value[:40]!r} is no number: NCCL reads it as 0, so it changes nothing"
            findings.append((Status.WARN, said, command("export {variable}=1  # or unset {variable}", variable=var)))
    interface = interface_finding(system, spans_nodes)
    if interface:
        findings.append(interface)
    if "NCCL_SOCKET_IFNAME" in env and not interface_matches(env["NCCL_SOCKET_IFNAME"], interfaces):
        findings.append(
            (
                Status.FAIL,
                f"NCCL_SOCKET_IFNAME={env['NCCL_SOCKET_IFNAME']!r} matches no interface "
                f"({', '.join(interfaces)}): NCCL cannot initialise",
                "unset NCCL_SOCKET_IFNAME",
            )
        )
    gloo = env.get("GLOO_SOCKET_IFNAME")
    if gloo is not None and not all(name in interfaces for name in gloo.split(",")):
        findings.append(
            (
                Status.FAIL,
                f"GLOO_SOCKET_IFNAME={gloo!r} names an interface that does not exist "
                f"({', '.join(interfaces)}): gloo cannot initialise",
                "unset GLOO_SOCKET_IFNAME",
            )
        )
    if not findings:
        return Result(Status.PASS, "no NCCL or Gloo setting disables a transport or names a missing interface")
    status = Status.FAIL if any(s == Status.FAIL for s, _, _ in findings) else Status.WARN
    return Result(
        status,
        "; ".join(text for _, text, _ in findings),
        remediation=Remediation(
            "Settings left over from debugging another system, or NCCL's own interface choice where other nodes "
            "cannot reach it (it prefers ib*, then any interface but docker*/lo*/virbr*, in the kernel's order).",
            [cmd for _, _, cmd in findings] + ["ip -brief link"],
        ),
    )


def judge_infiniband(system: dict[str, Any]) -> Result:
    ports = system.get("infiniband", [])
    if not ports:
        return Result(Status.SKIP, "no InfiniBand/RoCE devices")
    down = [p for p in ports if "ACTIVE" not in p["state"]]
    listing = ", ".join(f"{p['device']}/{p['port']} {p['state'].split(':')[-1].strip()} {p['rate']}" for p in ports)
    if down:
        return Result(
            Status.WARN,
            f"{len(down)} of {len(ports)} ports not active: {listing}",
            remediation=Remediation(
                "A port that is not ACTIVE carries no multi-node traffic.",
                ["ibstat", "sudo systemctl status opensm  # subnet manager, on one node of the fabric"],
            ),
        )
    return Result(Status.PASS, f"{len(ports)} ports active: {listing}")


@check("system.shm", "Shared memory is large enough", uses=("system",), settings={"min_gib": 1.0})
def shm(ctx: CheckContext) -> Result:
    """/dev/shm size (DataLoader workers crash in containers with the 64 MB default)."""
    return judge_shm(ctx.system, ctx.settings["min_gib"])


@check(
    "system.memory",
    "RAM and cores per GPU",
    needs=("system",),
    uses=("nvml",),
    settings={"min_gib_per_gpu": 8.0, "min_cpus_per_gpu": 2},
)
def memory(ctx: CheckContext) -> Result:
    """Host memory and usable cores per GPU."""
    return judge_memory(ctx.system, len(ctx.gpus), ctx.settings["min_gib_per_gpu"], ctx.settings["min_cpus_per_gpu"])


@check("system.limits", "memlock and open-files limits", uses=("system",), settings={"min_nofile": 4096})
def limits(ctx: CheckContext) -> Result:
    """memlock (RDMA) and open-files (DataLoader) limits."""
    return judge_limits(ctx.system, ctx.settings["min_nofile"])


@check("system.numa", "GPUs' NUMA nodes are reachable", needs=("nvml", "system"))
def numa(ctx: CheckContext) -> Result:
    """Each GPU's NUMA node against the process's CPU affinity."""
    return judge_numa(ctx.system, ctx.gpus)


@check("system.container", "Container detection", uses=("system",))
def container(ctx: CheckContext) -> Result:
    """Whether this runs in a container (it changes the fixes for shm and limits)."""
    return judge_container(ctx.system)


@check("system.nccl-env", "NCCL and Gloo environment", needs=("system",), uses=("nvml",))
def nccl_env(ctx: CheckContext) -> Result:
    """NCCL_*_DISABLE hazards; NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME naming interfaces that do not exist; on a
    multi-node job, the interface NCCL would choose by itself where other nodes cannot reach it."""
    geforce = sum(is_geforce(g.get("name")) for g in ctx.gpus) > 1
    return judge_nccl_env(ctx.system, geforce, spans_nodes=ctx.cluster is not None)


@check("system.infiniband", "InfiniBand ports are up", uses=("system",))
def infiniband(ctx: CheckContext) -> Result:
    """InfiniBand/RoCE devices, their port state and rate."""
    return judge_infiniband(ctx.system)
