"""Host facts that decide whether multi-GPU training works: shared memory, limits, NUMA, network, logs."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import resource
import shlex
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import psutil

from gpudoctor.facts import devices, iommu

ENV_PREFIXES = (
    "NCCL_",
    "GLOO_",
    "CUDA_",
    "TORCH_NCCL_",
    "TORCH_DISTRIBUTED",
    "OMP_NUM_THREADS",
    "NVIDIA_",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES",
    "SLURM_STEP_NUM_NODES",
)
# A MIG instance's Xid names it after the PCI address: "Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 94".
XID_PATTERN = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)(?: GPU-I:\d+)?(?: GPU-CI:\d+)?\): (\d+)")
SXID_PATTERN = re.compile(r"SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+), (Fatal|Non-fatal)", re.IGNORECASE)
TIME_PATTERN = re.compile(r"\[?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")


def start_nvcc() -> subprocess.Popen[str] | None:
    """`nvcc --version`, started early so it overlaps the other facts."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    return subprocess.Popen(
        [nvcc, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def collect_nvcc(proc: subprocess.Popen[str] | None) -> dict[str, Any]:
    if proc is None:
        return {"path": None, "version": None}
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return {"path": proc.args[0], "version": None}
    match = re.search(r"release (\d+\.\d+)", out)
    return {"path": proc.args[0], "version": match.group(1) if match else None}


def _interface_addresses(root: Path) -> list[dict[str, Any]]:
    """Every IPv4/IPv6 address in the order getifaddrs gives them (the order NCCL considers interfaces in),
    with whether its interface is up and whether it is virtual (no device behind it in /sys/class/net)."""
    stats = psutil.net_if_stats()
    families = {socket.AF_INET: 4, socket.AF_INET6: 6}
    return [
        {
            "name": name,
            "family": families[a.family],
            "address": a.address.partition("%")[0],
            "up": bool(stats.get(name) and stats[name].isup),
            "virtual": not (root / "sys/class/net" / name / "device").exists(),
        }
        for name, addresses in psutil.net_if_addrs().items()
        for a in addresses
        if a.family in families
    ]


def _links(root: Path) -> list[dict[str, Any]]:
    """Every network interface (with an address or not) as sysfs tells it: up, virtual (no device behind it),
    a bridge and whether one of its ports is a physical NIC (a host's br0 over its NIC, not Docker's docker0),
    and the line rate in Mb/s (veth, bridges and a link that is down have none)."""
    stats = psutil.net_if_stats()
    found = []
    for name in sorted(stats):
        folder = root / "sys/class/net" / name
        ports = sorted(p.name for p in (folder / "brif").glob("*")) if (folder / "bridge").exists() else None
        found.append(
            {
                "name": name,
                "up": bool(stats[name].isup),
                "virtual": not (folder / "device").exists(),
                "bridge": ports is not None,
                "bridge_physical": any((root / "sys/class/net" / p / "device").exists() for p in ports or []),
                "speed_mbps": stats[name].speed or None,
            }
        )
    return found


def _rdma_devices(root: Path) -> list[str] | None:
    """What /dev/infiniband holds (uverbsN, rdma_cm): NCCL opens the NICs through them; None where it is not
    there at all (no RDMA stack on the host; a container started without the devices shows it empty or absent)."""
    folder = root / "dev/infiniband"
    try:
        return sorted(p.name for p in folder.iterdir())
    except OSError:
        return None


def gather(root: Path = Path("/")) -> dict[str, Any]:
    found = devices.gather(root)
    return {
        "hostname": os.uname().nodename,
        "kernel": os.uname().release,
        "machine": platform.machine(),
        "os": platform.system(),
        "os_release": _os_release(root),
        "shm_bytes": _shm_bytes(root / "dev/shm"),
        "memory_bytes": psutil.virtual_memory().total,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "numa_nodes": _numa_nodes(root),
        "limits": _limits(),
        "container": _container(root),
        "kernel_modules": _modules(root),
        "nvidia_module_version": _nvidia_module_version(root),
        "devices": found,
        "interfaces": sorted(psutil.net_if_addrs()),
        "interface_addresses": _interface_addresses(root),
        "links": _links(root),
        "infiniband": _infiniband(root),
        "rdma_devices": _rdma_devices(root),
        "iommu": iommu.gather(root, [g["address"] for g in found["nvidia_gpus"]]),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "euid": os.geteuid(),
    }


def gpu_context(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """What the host says about the GPUs NVML listed: the processes holding them, their NUMA nodes."""
    pids = [p["pid"] for g in gpus for p in g.get("processes") or []]
    return {
        "gpu_processes": describe_processes(pids),
        "gpu_numa_nodes": gpu_numa_nodes([g["pci_bus_id"] for g in gpus if g.get("pci_bus_id")]),
    }


def _shm_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def _numa_nodes(root: Path) -> dict[str, list[int]]:
    nodes = {}
    for node in sorted((root / "sys/devices/system/node").glob("node[0-9]*")):
        with contextlib.suppress(OSError):
            nodes[node.name[4:]] = parse_cpulist((node / "cpulist").read_text())
    return nodes


def parse_cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus += range(int(lo), int(hi) + 1)
        elif part:
            cpus.append(int(part))
    return cpus


def _limits() -> dict[str, int | None]:
    def soft(which: int) -> int | None:
        value = resource.getrlimit(which)[0]
        return None if value == resource.RLIM_INFINITY else value

    return {"memlock": soft(resource.RLIMIT_MEMLOCK), "nofile": soft(resource.RLIMIT_NOFILE)}


def _os_release(root: Path) -> dict[str, str]:
    """ID, ID_LIKE, VERSION_ID and VERSION_CODENAME of os-release(5): which driver packages this node's
    distribution ships."""
    for name in ("etc/os-release", "usr/lib/os-release"):
        with contextlib.suppress(OSError, ValueError):
            fields = dict(
                line.split("=", 1) for line in (root / name).read_text().splitlines() if "=" in line and line[:1] != "#"
            )
            wanted = ("ID", "ID_LIKE", "VERSION_ID", "VERSION_CODENAME")
            return {key.lower(): " ".join(shlex.split(fields[key])) for key in wanted if key in fields}
    return {}


def _container(root: Path) -> str | None:
    if (root / ".dockerenv").exists():
        return "docker"
    if (root / "run/.containerenv").exists():
        return "podman"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    with contextlib.suppress(OSError):
        cgroup = (root / "proc/1/cgroup").read_text()
        for marker in ("kubepods", "docker", "containerd", "lxc"):
            if marker in cgroup:
                return marker
    return None


def _modules(root: Path) -> list[str]:
    try:
        lines = (root / "proc/modules").read_text().splitlines()
    except OSError:
        return []
    return sorted(line.split()[0] for line in lines if line.startswith(("nvidia", "nouveau", "nv_peer_mem")))


def _nvidia_module_version(root: Path) -> str | None:
    """The loaded kernel module's version; NVML's library version must match it."""
    try:
        text = (root / "proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def _infiniband(root: Path) -> list[dict[str, Any]]:
    ports = []
    for port in sorted((root / "sys/class/infiniband").glob("*/ports/*")):
        with contextlib.suppress(OSError):
            ports.append(
                {
                    "device": port.parent.parent.name,
                    "port": int(port.name),
                    "state": (port / "state").read_text().strip(),
                    "rate": (port / "rate").read_text().strip(),
                    "link_layer": (port / "link_layer").read_text().strip() if (port / "link_layer").exists() else None,
                    "numa_node": _numa_of(port.parent.parent / "device"),
                }
            )
    return ports


def _numa_of(device: Path) -> int | None:
    """The NUMA node a PCI device hangs off (sysfs says -1 where the platform does not tell)."""
    try:
        node = int((device / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


# This boot's kernel log, first reader that works. Where kernel.dmesg_restrict stops dmesg, members of the
# adm or systemd-journal groups can still read the kernel messages through the journal.
KERNEL_LOG_READERS = (
    ("dmesg", ["dmesg", "--time-format", "iso"]),
    ("journalctl -k", ["journalctl", "-k", "-b", "-q", "--no-pager", "-o", "short-iso"]),
)


def read_kernel_log() -> dict[str, Any]:
    """Xid (GPU) and SXid (NVSwitch) events from the kernel log; unreadable without privilege on many
    systems, which is said."""
    reasons = []
    for name, argv in KERNEL_LOG_READERS:
        text, reason = _read_with(name, argv)
        if reason is None:
            return {"readable": True, "reason": None, "source": name, **parse_events(text)}
        reasons.append(reason)
    return {"readable": False, "reason": "; ".join(reasons), "source": None, "xids": [], "sxids": []}


def _read_with(name: str, argv: list[str]) -> tuple[str, str | None]:
    """The reader's output, or why it gave none. An empty log counts as unreadable: a running kernel always
    has messages, and journalctl prints nothing (exit 0) to a user who may not read the system journal."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        return "", f"{name}: not installed"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"{name} could not run: {exc}"
    if proc.returncode != 0:
        reason = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
        return "", reason if reason.startswith(f"{name}:") else f"{name}: {reason}"
    if not proc.stdout.strip():
        return "", f"{name}: no kernel messages visible (no journal, or no permission to read it)"
    return proc.stdout, None


def parse_events(text: str) -> dict[str, list[dict[str, Any]]]:
    """Xid and SXid lines, one entry per device and code however often it repeats (a flood of thousands
    of the same Xid is one entry with its count, first and last time and line)."""
    seen: dict[str, dict[tuple[str, int], dict[str, Any]]] = {"xids": {}, "sxids": {}}
    for line in text.splitlines():
        if hit := match_event(line):
            kind, pci, code, fields = hit
            time_match = TIME_PATTERN.match(line.strip())
            count_event(seen[kind], line, pci, code, fields, time_match.group(1) if time_match else None)
    return {kind: list(entries.values()) for kind, entries in seen.items()}


def match_event(line: str) -> tuple[str, str, int, dict[str, Any]] | None:
    """An Xid or SXid line as ("xids" or "sxids", PCI address, code, the entry's own fields); None otherwise."""
    if match := XID_PATTERN.search(line):
        return "xids", match.group(1), int(match.group(2)), {"xid": int(match.group(2))}
    if match := SXID_PATTERN.search(line):
        code = int(match.group(2))
        return "sxids", match.group(1), code, {"sxid": code, "fatal": match.group(3).lower() == "fatal"}
    return None


EVENT_LINE_CHARS = 300  # of an event's first and last line, kept in its entry


def count_event(
    seen: dict[tuple[str, int], dict[str, Any]],
    line: str,
    pci: str,
    code: int,
    fields: dict[str, Any],
    time: str | None,
) -> None:
    """One more of a device's code: a flood is one entry with its count, first and last time and line."""
    text = line.strip()[:EVENT_LINE_CHARS]
    entry = seen.setdefault(
        (pci.lower(), code), {"pci": pci, **fields, "count": 0, "first_time": time, "first_line": text}
    )
    entry.update(count=entry["count"] + 1, last_time=time, last_line=text)


def describe_processes(pids: list[int]) -> dict[str, dict[str, Any]]:
    """Name, state, owner and parent of the processes NVML says hold GPU memory (host PIDs may be invisible in a
    container: NVML answers in the host's PID namespace)."""
    return {str(pid): describe_process(pid) for pid in sorted(set(pids))}


def describe_process(pid: int) -> dict[str, Any]:
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return {"name": proc.name(), "status": proc.status(), "user": proc.username(), "ppid": proc.ppid()}
    except (psutil.Error, KeyError):  # KeyError: a uid with no name in this container's passwd
        return {"name": None, "status": "not visible"}


def gpu_numa_nodes(bus_ids: list[str], root: Path = Path("/")) -> dict[str, int | None]:
    """Each GPU's NUMA node from sysfs (NVML's 00000000:3B:00.0 is sysfs's 0000:3b:00.0)."""
    nodes: dict[str, int | None] = {}
    for bus_id in bus_ids:
        domain, _, rest = bus_id.partition(":")
        path = root / "sys/bus/pci/devices" / f"{domain[-4:]}:{rest}".lower() / "numa_node"
        try:
            nodes[bus_id] = int(path.read_text())
        except (OSError, ValueError):
            nodes[bus_id] = None
    return nodes
