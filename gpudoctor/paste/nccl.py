"""NCCL_DEBUG=INFO/WARN logs as users paste them: with NCCL's "host:pid:tid [dev] NCCL INFO " prefixes, the
timestamp 2.26+ puts before WARN lines, launcher prefixes (pdsh's "10.0.0.1: ", torchrun's "[rank0]: "),
CloudWatch's timestamp lines between them, or with the prefixes stripped by the user. The same reader reads the
log cluster mode captures from each rank of its cross-node workloads (NCCL_DEBUG_FILE).

What it records:
- `nccl.version` and `nccl.cuda` ("NCCL version 2.18.1+cuda12.1"), and `torch.nccl.version` unless the log
  shows that another program carries the NCCL (nccl-tests' header, TensorFlow's bundled build);
- `nvml.cuda_driver_version` ("cudaDriverVersion 12020", an int as NVML gives it);
- `nccl.net` (the network NCCL chose: "IB", "Socket", a plugin's name, from "Using network" or else from the
  channels, "OFI" where aws-ofi-nccl selected a provider, "GPUDirectTCPX" from that plugin's own lines),
  `nccl.plugin` (the network plugin loaded, or "internal" where none was found), `nccl.ofi_provider` and
  `nccl.ofi_nics` (aws-ofi-nccl's libfabric provider, "efa" or "cxi", and the NICs it found);
- `nccl.interfaces` (the socket interfaces used for bootstrap, NET/Socket and IB's out-of-band channel),
  `nccl.bootstrap` (the bootstrap's alone), `nccl.ib_devices` ("mlx5_0:1/IB");
- `nccl.transports` (sorted, e.g. ["NET/IB/GDRDMA", "P2P/IPC", "SHM"]), `nccl.net_devices` (the NIC indexes the
  channels between nodes use, "via NET/IB/3"), `nccl.gdrdma` ("on", "off" or "partial": the share of those
  channels with /GDRDMA; else 2.23+'s "Connected all rings, use ring PXN 0 GDR 1"), `nccl.gdr_disabled` (each
  "GPU Direct RDMA Disabled" line: the HCA, and the GPU and PCI distance where NCCL judged them too far apart),
  `nccl.no_rdma` (why NCCL found no RDMA network: "no IB device", "no libibverbs", "no OFI provider", "network
  not found");
- `nccl.channels` (the most channels a communicator shows), `nccl.trees` (its tree lines), `nccl.nvls`
  (multicast available), `nccl.ranks` (the largest nranks), `nccl.nodes` and `nccl.local_ranks` (nNodes and
  localRanks, 2.19+), `nccl.warnings` (each distinct WARN text), `nccl.net_warnings` (each distinct WARN that
  NCCL's network code or a network plugin printed: its text, the file or function that printed it, whether a
  plugin did, and its line; gpudoctor/judging/net_warnings.py judges them);
- `system.env.NCCL_*` from "NCCL_X set by environment to V" (NCCL prints what it read; integer parameters
  as it parsed them);
- `nccl.launch_nodes`: the nodes a launch command pasted beside the log asks for (torchrun's --nnodes, DeepSpeed's
  --num_nodes, Accelerate's --num_machines), read as "launch command".

Formats: NVIDIA/nccl src/debug.cc (prefixes), src/init.cc (version, "Using network", "nNodes"), src/misc/
cudawrap.cc (cudaDriverVersion), src/bootstrap.cc, src/transport/net_socket.cc and net_ib (interfaces, "No device
found", "GPU Direct RDMA Disabled for HCA"), src/graph/paths.cc ("GPU Direct RDMA Disabled for GPU ... (distance
a > b)"), src/net.cc / src/plugin (plugin loading), src/transport/p2p.cc, shm.cc, net.cc, coll_net.cc
(channels), src/graph/connect.cc and tuning.cc (channel counts, trees), src/transport/nvls.cc, src/misc/param.cc
and socket.cc (the environment), by release in tests/fixtures/pastes/nccl/FORMATS.md; aws-ofi-nccl's
"NET/OFI" lines in tests/fixtures/pastes/fabrics/SOURCES.md. WARN lines with a known cause are signatures
(data/signatures/nccl.toml), matched by the signature engine."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpudoctor.paste.found import QUOTED, Found

READER = "NCCL log"
LAUNCHER = "launch command"
# The node count of the launchers users paste: torchrun / torch.distributed.run's --nnodes, a count or <min>:<max>
# (torch/distributed/run.py, "--nnodes", "--nnodes=1:4"; torch.distributed.launch took --nnodes too), DeepSpeed's
# --num_nodes (deepspeed/launcher/runner.py) and Accelerate's --num_machines (accelerate/commands/launch.py).
LAUNCH_FLAGS = ("--nnodes", "--num_nodes", "--num-nodes", "--num_machines", "--num-machines")
LAUNCH_NODES = re.compile(
    r"(?<!\S)--(?:nnodes|num[_-]nodes|num[_-]machines)[= ]\s{0,3}(\d{1,5})(?::(\d{1,5}))?(?![\w.:])"
)
MAX_WARNINGS = 100  # distinct WARN texts kept; a flood repeats a few
MAX_NET_WARNINGS = 20  # the network's WARN lines kept with their source and line: the first are the ones to read
SOURCE_CHARS = 120  # of the text before "NCCL WARN": the printer's file:line or function (a longer one is cut)

VERSION = re.compile(r"(?:^|[\s:\]>])NCCL version (\d+\.\d+\.\d+)[^+\s]*\+cuda(\S+)")
CUDA = re.compile(r"\d+\.\d+")
# "[0]eth0:10.0.0.1<0>" (bootstrap.cc and net_socket.cc up to 2.7), "eth0:10.0.0.1<0>" (later), IPv6 too.
# A name of at most 15 characters (the kernel's IFNAMSIZ, 16 with its NUL) and an address of at most 64 (IPv6
# with a zone): unbounded, both rescanned the rest of a long line from every start, in quadratic time.
INTERFACE = re.compile(r"(?:\[\d+\])?([^\s:\[\]<>]{1,15}):[^\s<]{1,64}<\d+>")
USING = re.compile(r"(Bootstrap|NET/Socket) ?: Using(.*)")
IB_USING = re.compile(r"NET/IB ?: Using(.*?)(?:; OOB (.*))?$")
IB_DEVICE = re.compile(r"\[\d+\]([^\s:\[\]]+):(\d+)/(\S+)")
ENV = re.compile(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.+)")
NRANKS = re.compile(r"\bnranks (\d+)\b")
NNODES = re.compile(r"\bnRanks \d+ nNodes (\d+) localRanks (\d+)\b")
TIMESTAMP = re.compile(r"\[\d{4}-\d\d-\d\d[ T][\d:.,]+\]\s*")
# "via NET/IB/3/GDRDMA", "via NET/AWS Libfabric/0", "via NET/IB/0(4)/GDRDMA" (PXN through rank 4's NIC).
NET_CHANNEL = re.compile(r"NET/([^/]{1,40})/(\d{1,4})(?:\(\d{1,7}\))?(/GDRDMA)?")
RING = re.compile(r"^Channel \d{1,3}/(\d{1,3}) ?:(?:\s+\d{1,7})+\s*$")
COLL_CHANNELS = re.compile(r"^(\d{1,4}) coll channels,")
OLD_RING = re.compile(r"^Ring (\d{1,3}) :\s+\d+(?:\s+\d+)+\s*$")
LOADED = re.compile(r"^NET/Plugin ?: Loaded (?:net )?plugin (.{1,60}?) \(v\d+\)")
# "NET/OFI Initializing aws-ofi-nccl 1.14.0" (1.9 on); "NET/OFI Using aws-ofi-nccl 1.4.0" before (src/nccl_ofi_net.c,
# ofi_init: "Using " PACKAGE_STRING), "NET/OFI Using aws-ofi-rccl 1.4.0" in ROCm's fork.
OFI_START = re.compile(r"^NET/OFI (?:Initializing|Using) (aws-ofi-[nr]ccl \S{1,40})")
OFI_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is (\w{1,20})(?:.*?\(found (\d{1,5}) nics?\))?")
OFI_FILTER = re.compile(r"^NET/OFI Setting provider_filter to (\w{1,20})")
# src/transport/generic.cc (2.23+), ncclTransportRingConnect: "Connected all rings, use ring PXN %d GDR %d", GDR 0
# where a ring's connection between nodes goes without GPUDirect RDMA on some rank.
RING_GDR = re.compile(r"^Connected all rings, use ring PXN \d GDR ([01])\b")
# Google's GPUDirect-TCPX plugin logs through NCCL's logger with __PRETTY_FUNCTION__ for the file
# (google/nccl-plugin-gpudirecttcpx src/adapter/nccl/debug.h; its functions return tcpxResult_t), so its lines read
# "tcpxResult_t tcpxCommProgress(tcpxComm*):1231 NCCL WARN ..., nic 0, enp12s0, ..." (net_tcpx.cc).
TCPX_SOURCE = "tcpxResult_t "
TCPX_NIC = re.compile(r"\bnic (\d{1,3}), ([^\s,]{1,15}),")
TCPX_NET = "GPUDirectTCPX"  # the plugin's ncclNet name without its "_v7" (src/nccl_plugin.cc)
# The plugin's INFO lines read "NET/GPUDirectTCPX : nthreads: 1" ("NET/" PRODUCT_NAME, src/net_tcpx.cc); the
# GPUDirect-TCPXO plugin's banner "NET/FasTrak <time>: Initializing network FasTrak, version: 1.0.17" (a real log:
# tests/fixtures/pastes/fabrics/SOURCES.md; its source is not public).
TCPX_INFO = "NET/GPUDirectTCPX"
FASTRAK_INFO = ("NET/FasTrak", "Initializing network FasTrak, version: ")
GDR_HCA = re.compile(r"^NET/IB ?: GPU Direct RDMA Disabled for HCA (\d{1,4}) '([^']{1,40})'")
GDR_GPU = re.compile(r"GPU Direct RDMA Disabled for GPU (\S{1,20}) / HCA (\d{1,4}) \(distance (\d{1,2}) > (\d{1,2})\)")
# "Using network Socket" and its plugin lines, "NET/Plugin : No plugin found (libnccl-net.so)" and every later
# wording (FORMATS.md): no external network plugin was loaded.
NO_PLUGIN = ("No plugin found", "Could not find:", "Using internal network plugin", "using internal implementation")
# Why NCCL found no RDMA network: net_ib.cc's "NET/IB : No device found.", ibvwrap's WARN "Failed to open
# libibverbs.so[.1]", aws-ofi-nccl's WARNs when libfabric offers no provider (and libfabric's own "<warn>
# fi_getinfo: provider efa output empty list"), net.cc's WARN "Error: network %s not found." (NCCL_NET names a
# network no plugin gives).
NO_RDMA = (
    ("NET/IB : No device found", "no IB device"),
    ("NET/IB: No device found", "no IB device"),
    ("Failed to open libibverbs", "no libibverbs"),
    ("fi_getinfo() call failed", "no OFI provider"),
    ("Could not find any optimal provider", "no OFI provider"),
    ("No eligible providers", "no OFI provider"),
    ("output empty list", "no OFI provider"),
    ("Error: network ", "network not found"),
)
# A WARN about the network between nodes, by what printed it (the text before "NCCL WARN": NCCL's "file.cc:line",
# 2.30's "file.cc:line (function)", a plugin's __FILE__ or function; FORMATS.md) or by its text: NCCL's network
# transports and their plugin loader (src/net.cc, src/plugin/net.cc, src/transport/net.cc, net_ib.cc and net_ib/,
# net_socket.cc, coll_net.cc), the verbs and socket wrappers (src/misc/ibvwrap.cc, ibvsymbols.cc, socket.cc), the
# bootstrap and the proxy that makes connections (src/bootstrap.cc, src/proxy.cc); nccl-rdma-sharp-plugins'
# files (src/ib_plugin.c, p2p_plugin.c, ucx_plugin.c, ibvwrap.c); GPUDirect-TCPX's functions (TCPX_SOURCE);
# aws-ofi-nccl's and the plugins' texts, which start "NET/<name>" (aws-ofi-nccl's NCCL_OFI_WARN prefixes "NET/OFI ").
NET_FILES = (
    "net",
    "net_ib",
    "net_socket",
    "coll_net",
    "ibvwrap",
    "ibvsymbols",
    "socket",
    "bootstrap",
    "proxy",
    "ib_plugin",
    "p2p_plugin",
    "ucx_plugin",
)
NET_FOLDERS = ("net_ib/", "plugin/net")
NCCL_FILES = (".cc", ".h", ".cu")  # NCCL's own sources; a plugin's WARN names a .c file or a function
NET_TEXTS = ("NET/", "Net : ", "Call to ibv_", "Error: network ", "Failed to open libibverbs")
# Lines whose "host:pid:tid [dev] NCCL INFO " prefix the user removed start with one of these.
BARE = (
    "Bootstrap",
    "NET/",
    "Using network ",
    "cudaDriverVersion ",
    "Channel ",
    "CollNet ",
    "Ring ",
    "NVLS multicast support is ",
    "NCCL_",
    "comm 0x",
    "ncclCommInitRank",
    "Trees [",
    "Connected all rings",
)
CHANNELS = ("Channel ", "CollNet ", "Ring ")
# The NCCL of nccl-tests or of TensorFlow's bundled build is not torch's: nccl-tests' header (src/util.cu
# "# nThread %d nGpus %d ...", "# Using devices", "#  Rank %2d Group %2d Pid %6d on %10s device %2d ..."; before
# groups "#   Rank %2d Pid %6d on %10s device %2d ..."), TensorFlow's bazel paths and unexpanded version macros.
OTHER_PROGRAM = ("# nThread ", "# Using devices", "nccl_archive", "+cudaCUDA_MAJOR")
NCCL_TESTS_RANK = re.compile(r"#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s")


@dataclass
class NcclLog:
    """What is recorded once the whole log is read: lists, the largest communicator, whose NCCL it is."""

    interfaces: dict[str, int] = field(default_factory=dict)  # name -> first line
    bootstrap: dict[str, int] = field(default_factory=dict)
    ib_devices: dict[str, int] = field(default_factory=dict)
    transports: dict[str, int] = field(default_factory=dict)
    net_devices: dict[int, int] = field(default_factory=dict)
    gdr_channels: list[int] = field(default_factory=lambda: [0, 0])  # NET channels with, without /GDRDMA
    gdr_line: int | None = None
    no_rdma: dict[str, int] = field(default_factory=dict)
    gdr_disabled: dict[str, tuple[dict, int]] = field(default_factory=dict)  # each line's HCA (and GPU), once
    channel_net: tuple[str, int] | None = None  # the network the channels name, where "Using network" is cut
    ring_gdr: tuple[bool, int] | None = None  # "Connected all rings, use ring PXN 0 GDR 1" (2.23+)
    ofi_selected: int | None = None  # the line where aws-ofi-nccl selected a provider
    plugin: tuple[str, int] | None = None  # the plugin loaded, else "internal" where none was found
    channels: tuple[int, int] | None = None  # the most channels a communicator shows, and where
    nodes: tuple[int, int, int] | None = None  # the largest nNodes, its localRanks, and where
    warnings: set[str] = field(default_factory=set)
    net_warnings: dict[str, dict] = field(default_factory=dict)  # text -> its source and line, the first seen
    ranks: tuple[int, int] | None = None  # (nranks, line)
    version: tuple[str, int] | None = None
    other_program: bool = False


def read(found: Found) -> None:
    """Every NCCL log line; nothing from lines that are not NCCL's. Beside them, the node count of a pasted launch
    command (`launch_nodes`)."""
    launch_nodes(found)
    log = NcclLog()
    for number in found.holding(("NCCL", "nccl", "Pid", "fi_getinfo", *OTHER_PROGRAM, *BARE)):
        line = found.lines[number]
        if "NCCL" in line or "nccl" in line or "# " in line:
            read_line(found, log, number, line)
        elif line.lstrip(" \t>").startswith(BARE):
            message(found, log, number, bare(line), prefixed=False)
        elif "<warn> fi_getinfo" in line:
            _seen(log.no_rdma, line, number)
    record(found, log)


def launch_nodes(found: Found) -> None:
    """`nccl.launch_nodes`: the most nodes a pasted launch command asks for (the upper bound of torchrun's
    <min>:<max>), where the paste shows how the job that met NCCL's error was started."""
    for number in found.holding(LAUNCH_FLAGS):
        for match in LAUNCH_NODES.finditer(found.lines[number]):
            found.fact("nccl.launch_nodes", int(match.group(2) or match.group(1)), LAUNCHER, number)


def read_line(found: Found, log: NcclLog, number: int, line: str) -> None:
    if any(marker in line for marker in OTHER_PROGRAM) or ("Pid" in line and NCCL_TESTS_RANK.search(line)):
        log.other_program = True
    if "NCCL version " in line and (match := VERSION.search(line)):
        version(found, log, number, match)
        return
    start = line.find("NCCL INFO ")
    if start >= 0:
        tcpx(log, number, line, start)
        message(found, log, number, line[start + 10 :].strip())
        return
    start = line.find("NCCL WARN ")
    if start >= 0:
        tcpx(log, number, line, start)
        warning(found, log, number, line[start + 10 :].strip())
        net_warning(log, number, source(line, start), line[start + 10 :].strip())
        return
    if line.lstrip(" \t>").startswith(BARE):
        message(found, log, number, bare(line), prefixed=False)


def bare(line: str) -> str:
    """A line without NCCL's prefix: its text without a quote marker or a leading timestamp."""
    text = line.strip().lstrip("> \t")
    return TIMESTAMP.sub("", text, count=1) if text.startswith("[") else text


def version(found: Found, log: NcclLog, number: int, match: re.Match[str]) -> None:
    """VERSION_STRING (src/init.cc): "NCCL version 2.18.1+cuda12.1"; a build that left the CUDA macros
    unexpanded ("+cudaCUDA_MAJOR.CUDA_MINOR") says no CUDA version."""
    found.fact("nccl.version", match.group(1), READER, number)
    if CUDA.fullmatch(match.group(2)):
        found.fact("nccl.cuda", match.group(2), READER, number)
    if log.version is None:
        log.version = (match.group(1), number)


def message(found: Found, log: NcclLog, number: int, text: str, prefixed: bool = True) -> None:
    """One INFO message, prefix removed; without NCCL's prefix (`prefixed` False) a network name must be one
    word, as NCCL's own are ("IB", "Socket", "IBext_v8"), so prose that starts alike is not read. Later releases
    say "Failed to open libibverbs.so[.1]" as INFO, not WARN."""
    if "libibverbs" in text:
        _seen(log.no_rdma, text, number)
    if text.startswith("cudaDriverVersion "):
        value = text[18:].strip()
        if value.isascii() and value.isdigit():
            found.fact("nvml.cuda_driver_version", int(value), READER, number)
    elif text.startswith(("Bootstrap", "NET/Socket")):
        sockets(log, number, text)
    elif text.startswith("NET/"):
        network(found, log, number, text)
    elif text.startswith("Using network "):
        name = text[14:].strip()
        if name and (prefixed or " " not in name):
            found.fact("nccl.net", name, READER, number)
    elif text.startswith(CHANNELS) or (text[:1].isascii() and text[:1].isdigit()) or text.startswith("Trees ["):
        channel(found, log, number, text)
    elif text.startswith("NVLS multicast support is "):
        found.fact("nccl.nvls", not text[26:].startswith("not "), READER, number)
    elif text.startswith("NCCL_"):
        environment(found, number, text)
    elif "nranks " in text or "nRanks " in text:
        communicator(log, number, text)
    elif "GPU Direct RDMA Disabled for GPU" in text:
        gdr_disabled(log, number, text)
    elif match := RING_GDR.match(text):
        log.ring_gdr = (match.group(1) == "1", number)


def tcpx(log: NcclLog, number: int, line: str, start: int) -> None:
    """A line the GPUDirect-TCPX plugin logged (its function where NCCL's file would be): the plugin is loaded
    and, on a line of its own traffic ("nic 0, enp12s0, ..."), the NIC index it carries it over."""
    if TCPX_SOURCE not in line[max(0, start - 200) : start]:
        return
    if log.plugin is None or log.plugin[0] == "internal":
        log.plugin = (TCPX_NET, number)
    if match := TCPX_NIC.search(line, start):
        log.net_devices.setdefault(int(match.group(1)), number)
        if log.channel_net is None:
            log.channel_net = (TCPX_NET, number)


def sockets(log: NcclLog, number: int, text: str) -> None:
    """ "Bootstrap : Using eth0:10.0.0.1<0>" (bootstrap.cc; "Bootstrap: Using" from 2.24), "NET/Socket :
    Using [0]eth0:10.0.0.1<0>" (net_socket.cc)."""
    if match := USING.match(text):
        names = INTERFACE.findall(match.group(2))
        add(log.interfaces, names, number)
        if match.group(1) == "Bootstrap":
            add(log.bootstrap, names, number)


def network(found: Found, log: NcclLog, number: int, text: str) -> None:
    """NET/IB's devices, GPU Direct RDMA off for an HCA, no device found; plugin loading; aws-ofi-nccl's
    "NET/OFI" lines."""
    if text.startswith("NET/IB") and (match := GDR_HCA.match(text)):
        disabled(log, {"hca": match.group(2)}, number)
    elif text.startswith("NET/IB"):
        infiniband(log, number, text)
    elif text.startswith("NET/Plugin"):
        plugin(log, number, text)
    elif text.startswith("NET/OFI"):
        ofi(found, log, number, text)
    elif text.startswith((TCPX_INFO, FASTRAK_INFO[0])):
        google_plugin(log, number, text)
    elif "GPU Direct RDMA Disabled for GPU" in text:
        gdr_disabled(log, number, text)
    _seen(log.no_rdma, text, number)


def infiniband(log: NcclLog, number: int, text: str) -> None:
    """ "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/RoCE [RO]; OOB eth0:10.0.0.1<0>" (net_ib)."""
    match = IB_USING.match(text)
    if not match:
        return
    devices = [f"{name}:{port}/{layer}" for name, port, layer in IB_DEVICE.findall(match.group(1))]
    add(log.ib_devices, devices, number)
    if match.group(2):
        add(log.interfaces, INTERFACE.findall(match.group(2)), number)


def plugin(log: NcclLog, number: int, text: str) -> None:
    """ "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)"; "No plugin found" and its later wordings (a
    plugin loaded after a name that was not found wins)."""
    if match := LOADED.match(text):
        if log.plugin is None or log.plugin[0] == "internal":
            log.plugin = (match.group(1).strip(), number)
    elif any(said in text for said in NO_PLUGIN) and log.plugin is None:
        log.plugin = ("internal", number)


def ofi(found: Found, log: NcclLog, number: int, text: str) -> None:
    """aws-ofi-nccl (the plugin for EFA and, through libfabric, Slingshot's CXI): "NET/OFI Initializing
    aws-ofi-nccl 1.11.0-aws", "NET/OFI Selected Provider is efa (found 16 nics)", "NET/OFI Setting
    provider_filter to efa" (the provider it asks for, where the log stops before it selects one)."""
    if match := OFI_START.match(text):
        log.plugin = (match.group(1), number)
    elif match := OFI_PROVIDER.match(text):
        log.ofi_selected = number
        found.fact("nccl.ofi_provider", match.group(1).lower(), READER, number)
        if match.group(2):
            found.fact("nccl.ofi_nics", int(match.group(2)), READER, number)
    elif (match := OFI_FILTER.match(text)) and "ofi_provider" not in found.facts.get("nccl", {}):
        found.fact("nccl.ofi_provider", match.group(1).lower(), READER, number)


def google_plugin(log: NcclLog, number: int, text: str) -> None:
    """Google's GPUDirect-TCPX plugin by its INFO lines, GPUDirect-TCPXO's (FasTrak) by its banner, with its
    version."""
    if log.plugin is not None and log.plugin[0] != "internal":
        return
    if text.startswith(TCPX_INFO):
        log.plugin = (TCPX_NET, number)
    elif FASTRAK_INFO[1] in text:
        version = text.split(FASTRAK_INFO[1], 1)[1].split(" ", 1)[0][:20]
        log.plugin = (f"FasTrak {version}".strip(), number)


def gdr_disabled(log: NcclLog, number: int, text: str) -> None:
    """paths.cc: "GPU Direct RDMA Disabled for GPU ca000 / HCA 0 (distance 7 > 4)": NCCL_NET_GDR_LEVEL's bound."""
    if match := GDR_GPU.search(text):
        said = {"gpu": match.group(1), "hca": match.group(2), "distance": int(match.group(3))}
        said["limit"] = int(match.group(4))
        disabled(log, said, number)


def disabled(log: NcclLog, said: dict, number: int) -> None:
    if len(log.gdr_disabled) < MAX_WARNINGS:
        log.gdr_disabled.setdefault(str(said), (said, number))


def channel(found: Found, log: NcclLog, number: int, text: str) -> None:
    """A channel's connection ("Channel 00/0 : 1[1] -> 9[1] [send] via NET/IB/1/GDRDMA", "Ring 00 : 15 -> 0
    [send] via NET/Socket/0"), a ring's order ("Channel 00/32 :    0   1   2", "Ring 00 :  0 1 2 3"), the channel
    count of a communicator ("32 coll channels, 32 collnet channels, ..."), its trees ("Trees [0] 1/-1/-1->0")."""
    if text.startswith(CHANNELS) and " via " in text:
        via = text[text.rfind(" via ") + 5 :]
        kind = transport(via)
        if kind:
            add(log.transports, [kind], number)
        if kind and kind.startswith("NET/") and (match := NET_CHANNEL.match(via.strip())):
            net_channel(log, number, match)
    elif match := RING.match(text) or COLL_CHANNELS.match(text):
        log.channels = most(log.channels, int(match.group(1)), number)
    elif match := OLD_RING.match(text):
        log.channels = most(log.channels, int(match.group(1)) + 1, number)
    elif text.startswith("Trees ["):
        found.fact("nccl.trees", True, READER, number)


def most(kept: tuple[int, int] | None, value: int, number: int) -> tuple[int, int]:
    return kept if kept and kept[0] >= value else (value, number)


def net_channel(log: NcclLog, number: int, match: re.Match[str]) -> None:
    log.net_devices.setdefault(int(match.group(2)), number)
    if log.channel_net is None:
        log.channel_net = (match.group(1), number)
    log.gdr_channels[0 if match.group(3) else 1] += 1
    if log.gdr_line is None:
        log.gdr_line = number


def communicator(log: NcclLog, number: int, text: str) -> None:
    """ "comm 0x... rank 0 nranks 16 cudaDev 0 ..." (the largest communicator), and from 2.19 "comm 0x... rank 0
    nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0" (init.cc): the nodes and the ranks on each."""
    if match := NRANKS.search(text):
        ranks = int(match.group(1))
        if log.ranks is None or ranks > log.ranks[0]:
            log.ranks = (ranks, number)
    if (match := NNODES.search(text)) and (log.nodes is None or int(match.group(1)) > log.nodes[0]):
        log.nodes = (int(match.group(1)), int(match.group(2)), number)


def transport(via: str) -> str | None:
    """A channel's transport without device numbers or modes: "NET/IB/0/GDRDMA" -> "NET/IB/GDRDMA",
    "P2P/IPC/read" -> "P2P/IPC", "SHM/direct/direct" and "direct shared memory" -> "SHM"."""
    via = via.strip()
    parts = via.split("/")
    if parts[0] in ("NET", "COLLNET") and len(parts) > 1:
        return f"{parts[0]}/{parts[1]}{'/GDRDMA' if '/GDRDMA' in via else ''}"
    if parts[0] == "P2P" and len(parts) > 1:
        return f"P2P/{parts[1].partition('(')[0].strip()}"
    if parts[0] == "SHM" or via.startswith("direct shared memory"):
        return "SHM"
    return None


def environment(found: Found, number: int, text: str) -> None:
    """ "NCCL_SOCKET_IFNAME set by environment to eth0", "NCCL_IB_HCA set to mlx5_4", and param.cc's
    integers "NCCL_IB_DISABLE set by environment to 0." (the trailing period is the format's)."""
    match = ENV.fullmatch(text.strip())
    if not match:
        return
    value = match.group(2).strip()
    if value.endswith(".") and value.isascii() and value[:-1].lstrip("-").isdigit():
        value = value[:-1]
    found.fact(f"system.env.{match.group(1)}", value, READER, number)


def warning(found: Found, log: NcclLog, number: int, text: str) -> None:
    _seen(log.no_rdma, text, number)
    if not text or text in log.warnings or len(log.warnings) >= MAX_WARNINGS:
        return
    log.warnings.add(text)
    found.append("nccl.warnings", text[:QUOTED], READER, number)


def source(line: str, start: int) -> str:
    """What printed the WARN at `start`: the text between the prefix's "[dev] " and "NCCL WARN" ("transport/
    net_ib.cc:1296", "init.cc:2570 (ncclCommInitRank)", "tcpxResult_t tcpxCommProgress(tcpxComm*):1231"), "" where
    the user cut the prefix."""
    before = line[max(0, start - SOURCE_CHARS) : start].rstrip()
    return before[before.rfind("] ") + 1 :].strip()


def printed_by(source: str) -> str:
    """The file (or function) a WARN's source names: "transport/net_ib.cc" of "transport/net_ib.cc:1296"."""
    return source.split(":", 1)[0].split(" ")[-1]


def about_network(source: str, text: str) -> bool:
    """Whether NCCL's network code or a network plugin printed this WARN (NET_FILES, NET_TEXTS)."""
    if text.startswith(NET_TEXTS) or TCPX_SOURCE in source:
        return True
    path = printed_by(source)
    return path.rsplit("/", 1)[-1].split(".", 1)[0] in NET_FILES or any(f in path for f in NET_FOLDERS)


def net_warning(log: NcclLog, number: int, source: str, text: str) -> None:
    """A WARN about the network, once per text: its line (counted from 1), what printed it, whether a plugin did."""
    if not text or len(log.net_warnings) >= MAX_NET_WARNINGS or text in log.net_warnings:
        return
    if about_network(source, text):
        path = printed_by(source)
        plugin = (bool(path) and not path.endswith(NCCL_FILES)) or text.startswith("NET/OFI")
        log.net_warnings[text] = {"line": number + 1, "source": source, "text": text[:QUOTED], "plugin": plugin}


def _seen(reasons: dict[str, int], text: str, number: int) -> None:
    """Why NCCL found no RDMA network, where the line says so (NO_RDMA)."""
    for said, reason in NO_RDMA:
        if said in text:
            reasons.setdefault(reason, number)


def add(seen: dict, items: list, number: int) -> None:
    for item in items:
        seen.setdefault(item, number)


def record(found: Found, log: NcclLog) -> None:
    for path, seen in (
        ("nccl.interfaces", log.interfaces),
        ("nccl.bootstrap", log.bootstrap),
        ("nccl.ib_devices", log.ib_devices),
        ("nccl.transports", log.transports),
        ("nccl.net_devices", log.net_devices),
        ("nccl.no_rdma", log.no_rdma),
    ):
        if seen:
            found.fact(path, sorted(seen), READER, min(seen.values()))
    if log.ranks:
        found.fact("nccl.ranks", log.ranks[0], READER, log.ranks[1])
    if log.version and not log.other_program:
        found.fact("torch.nccl.version", log.version[0], READER, log.version[1])
    record_network(found, log)


def socket(log: NcclLog, nccl: dict) -> bool:
    """The network between nodes is NCCL's socket transport, as the log names it."""
    return str(nccl.get("net") or (log.channel_net or ("",))[0]).lower().startswith("socket")


def record_network(found: Found, log: NcclLog) -> None:
    """GPUDirect RDMA over the channels between nodes; the network the channels name where no "Using network"
    line survives; nodes and their devices from the prefixes, where nNodes is not in the log."""
    nccl = found.facts.get("nccl", {})
    with_gdr, without = log.gdr_channels
    if log.gdr_line is not None and (log.channel_net or ("", 0))[0] != "Socket":
        state = "on" if not without else "off" if not with_gdr else "partial"
        found.fact("nccl.gdrdma", state, READER, log.gdr_line)
    if log.gdr_line is None and log.ring_gdr and (log.nodes is None or log.nodes[0] > 1) and not socket(log, nccl):
        found.fact("nccl.gdrdma", "on" if log.ring_gdr[0] else "off", READER, log.ring_gdr[1])
    if log.channel_net and "net" not in nccl:
        found.fact("nccl.net", log.channel_net[0], READER, log.channel_net[1])
    elif "net" not in nccl and log.ofi_selected is not None:
        # aws-ofi-nccl chose a provider, so its network initialised: NCCL takes a plugin's network before its own
        # (src/net.cc, ncclNetInit), and the log names it no other way where "Using network" is cut
        found.fact("nccl.net", "OFI", READER, log.ofi_selected)
    if log.gdr_disabled:
        items = list(log.gdr_disabled.values())
        found.fact("nccl.gdr_disabled", [item for item, _ in items], READER, min(line for _, line in items))
    if log.net_warnings:
        kept = list(log.net_warnings.values())
        found.fact("nccl.net_warnings", kept, READER, kept[0]["line"] - 1)
    if log.plugin:
        found.fact("nccl.plugin", log.plugin[0], READER, log.plugin[1])
    if log.channels:
        found.fact("nccl.channels", log.channels[0], READER, log.channels[1])
    if log.nodes:
        found.fact("nccl.nodes", log.nodes[0], READER, log.nodes[2])
        found.fact("nccl.local_ranks", log.nodes[1], READER, log.nodes[2])
