"""On every rank of cluster.links (one per node): a short probe that sizes each pair's transfers, then every
pass of every round of pairs, each pair exchanging its buffer both ways, timed by the sender and verified by
the receiver. Transfers are named by the nodes' cluster ranks.

Each rank also says what carried its traffic (`capture`, `used`; cluster.allreduce's ranks too): with NCCL, NCCL's
own log of its choices (NCCL_DEBUG=INFO for INIT, NET and BOOTSTRAP, written to a file of the rank's own and read
by gpudoctor's NCCL-log reader, the same that reads a pasted log); with gloo, the interface its TCP sockets use
(GLOO_SOCKET_IFNAME, else the address the host name resolves to, as torch's gloo backend chooses). With each, the
node's IPv4 networks per interface, so rank 0 can tell a node on another network than the others."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gpudoctor.api import RankContext, measure
from gpudoctor.judging import net_warnings, pairs
from gpudoctor.paste import nccl
from gpudoctor.paste.found import Found

PROBE_BYTES = 2**20
MIN_BYTES = 64 * 1024
BUDGET_SHARE = 0.5  # of an attempt's time: what its transfers may take by the probe's figures
RETEST_ROUNDS_BUDGETED = pairs.MAX_RETEST_ROUNDS + 1  # and a round of good pairs alone


def measure_links(ctx: RankContext) -> dict[str, Any]:
    """This node's part of the rounds: the probe where no sizes were given, then every pass of every round,
    each pair exchanging its buffer both ways. Transfers are named by the nodes' cluster ranks."""
    p = ctx.params
    folder = capture(ctx)
    node_of = {first: int(node) for node, (first, _) in p["spans"].items()}
    me = node_of[ctx.rank]
    at = {node: first for first, node in node_of.items()}
    if p["rounds"]:  # a re-test: the pairs rank 0 chose, less any node that has left since
        rounds = [[(a, b) for a, b in round_pairs if a in at and b in at] for round_pairs in p["rounds"]]
    else:
        rounds = pairs.neighbour_rounds(sorted(at, key=at.get))
    ack = torch.zeros(1, device=ctx.device)
    sizes = {tuple(map(int, k.split("-"))): v for k, v in p["pair_sizes"].items()} if p["pair_sizes"] else None
    if sizes is None:
        sizes = _probe(ctx, rounds, me, at, ack)
    sent: dict[tuple[int, int], list[float]] = {}
    wrong: dict[int, int] = {}
    for number in range(p["passes"]):
        for index, round_pairs in enumerate(rounds):
            ctx.phase(f"links pass {number} round {index}")
            dist.barrier()
            for a, b in round_pairs:
                if me in (a, b):
                    size = sizes[(min(a, b), max(a, b))]
                    _exchange(ctx, (a, b), me, at, size, ack, p["warmup"], p["iters"], sent, wrong)
    dist.barrier()  # nobody leaves (and loads the machine tearing down) while another pair still measures
    return {
        "node": me,
        "sent": [
            {"src": src, "dst": dst, "bytes": sizes[(min(src, dst), max(src, dst))], "passes": v, "gbps": max(v)}
            for (src, dst), v in sent.items()
        ],
        "wrong": wrong,
        "sizes": {f"{a}-{b}": v for (a, b), v in sizes.items()},
        "transport": used(ctx, folder),
    }


def _probe(ctx: RankContext, rounds: list[list[pairs.Pair]], me: int, at: dict[int, int], ack: Any) -> dict:
    """Every pair's speed from a short exchange, gathered on every rank, then each pair's transfer size: the
    largest that lets every pass of every round (and a re-test) end within the budget."""
    p = ctx.params
    probe = min(PROBE_BYTES, p["bytes"])
    found: dict[tuple[int, int], list[float]] = {}
    for index, round_pairs in enumerate(rounds):
        ctx.phase(f"links probe round {index}")
        dist.barrier()
        for a, b in round_pairs:
            if me in (a, b):
                _exchange(ctx, (a, b), me, at, probe, ack, 1, 2, found, {})
    everyone: list[Any] = [None] * ctx.world_size
    mine = {"left_s": ctx.deadline - time.time(), "speeds": {f"{s}-{d}": v for (s, d), v in found.items()}}
    dist.all_gather_object(everyone, mine)
    return plan_sizes(everyone, rounds, p["warmup"] + p["iters"], p["bytes"])


def budget_blocks(rounds: list[list[pairs.Pair]]) -> int:
    """The transfers one pair makes in an attempt's budget: each pass of each round, and a re-test's, both ways."""
    return (pairs.PASSES * len(rounds) + pairs.RETEST_PASSES * RETEST_ROUNDS_BUDGETED) * 2


def plan_sizes(
    everyone: list[dict[str, Any]], rounds: list[list[pairs.Pair]], reps: int, largest: int
) -> dict[pairs.Pair, int]:
    """Each pair's transfer size from what every rank gathered (its probe speeds and its time left): the same
    on every rank, as both ends of a pair must send and receive the same bytes, so the time left is the least
    any rank had, not this rank's own clock."""
    speeds = {tuple(map(int, k.split("-"))): max(v) for rank in everyone for k, v in rank["speeds"].items()}
    block_s = min(rank["left_s"] for rank in everyone) * BUDGET_SHARE / budget_blocks(rounds)
    return {
        (min(a, b), max(a, b)): transfer_size(min(speeds[(a, b)], speeds[(b, a)]), block_s, reps, largest)
        for round_pairs in rounds
        for a, b in round_pairs
    }


def transfer_size(gbps: float, block_s: float, reps: int, largest: int) -> int:
    """The bytes per transfer that make `reps` of them take `block_s` at `gbps`, between MIN_BYTES and the
    largest, in whole 4 KiB pages."""
    fits = int(gbps * 1e9 * block_s / reps) // 4096 * 4096
    return max(MIN_BYTES, min(largest, fits))


def _exchange(
    ctx: RankContext,
    pair: pairs.Pair,
    me: int,
    at: dict[int, int],
    size: int,
    ack: Any,
    warmup: int,
    iters: int,
    sent: dict[tuple[int, int], list[float]],
    wrong: dict[int, int],
) -> None:
    """Both directions of one pair: this rank sends (timed) then receives (verified), or the other way."""
    a, b = pair
    buffer = torch.empty(size // 4, device=ctx.device)
    for src, dst in ((a, b), (b, a)):
        if me == src:
            sent.setdefault((src, dst), []).append(_send(ctx, buffer, ack, at[dst], warmup, iters))
        elif me == dst:
            wrong[src] = wrong.get(src, 0) + _receive(ctx, buffer, ack, at[src], src, warmup, iters)


def _send(ctx: RankContext, buffer: Any, ack: Any, peer: int, warmup: int, iters: int) -> float:
    buffer.fill_(ctx.rank + 1)

    def exchange() -> None:
        dist.send(buffer, peer)
        dist.recv(ack, peer)

    times = measure.time_repeats(exchange, ctx.device, warmup, iters)
    return buffer.numel() * 4 / measure.summary(times)["median_s"] / 1e9


def _receive(ctx: RankContext, buffer: Any, ack: Any, peer: int, src: int, warmup: int, iters: int) -> int:
    """Deliveries that are not the sender's values (the buffer is cleared before each one)."""
    wrong = [0]

    def exchange() -> None:
        dist.recv(buffer, peer)
        dist.send(ack, peer)

    def verify() -> None:
        wrong[0] += int((buffer != peer + 1).any())

    measure.time_repeats(exchange, ctx.device, warmup, iters, prepare=buffer.zero_, check=verify)
    return wrong[0]


LOG_BYTES = 4 * 2**20  # of NCCL's log read per rank: INIT and NET lines of one communicator are a few KB
# What NCCL prints of its choice: the network, plugin, NICs, GPUDirect RDMA, channels (INIT, NET) and the
# bootstrap's interface (BOOTSTRAP, 2.24+).
SUBSYSTEMS = "INIT,NET,BOOTSTRAP"


def capture(ctx: RankContext) -> Path | None:
    """Before NCCL's first call in this rank: its log to a folder of this rank's own (NCCL reads NCCL_DEBUG at its
    first message). A user's own NCCL_DEBUG_FILE is left alone, and read nothing from."""
    if ctx.backend != "nccl" or os.environ.get("NCCL_DEBUG_FILE"):
        return None
    folder = Path(tempfile.mkdtemp(prefix="gpudoctor-nccl-"))
    os.environ["NCCL_DEBUG_FILE"] = str(folder / "nccl.%p.log")
    if os.environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        os.environ["NCCL_DEBUG"] = "INFO"
    os.environ.setdefault("NCCL_DEBUG_SUBSYS", SUBSYSTEMS)
    return folder


def used(ctx: RankContext, folder: Path | None) -> dict[str, Any]:
    """What this rank's traffic went over: NCCL's choices from its log, or gloo's interface; and this node's
    networks."""
    networks = local_networks()
    if ctx.backend == "nccl":
        return {"backend": "nccl", "nccl": read_log(folder), "networks": networks}
    name, address = gloo_interface(networks)
    return {"backend": "gloo", "interface": name, "address": address, "networks": networks}


def read_log(folder: Path | None) -> dict[str, Any]:
    """NCCL's facts from its log (gpudoctor.paste.nccl), its warnings and network WARNs cut to the first few, with
    how many network WARNs were left out (net_warnings.cut: every rank's outcome goes over the store)."""
    if folder is None:
        return {}
    text = ""
    for path in sorted(folder.glob("nccl.*.log")):
        with open(path, encoding="utf-8", errors="replace") as log:
            text += log.read(LOG_BYTES - len(text))
        path.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
    found = Found.of(text)
    nccl.read(found)
    said = net_warnings.cut(found.facts.get("nccl") or {})
    env = (found.facts.get("system") or {}).get("env") or {}
    return {**said, "settings": env}


def local_networks() -> dict[str, dict[str, Any]]:
    """Each interface: whether it is up, and its IPv4 networks as address/prefix ("10.0.0.3/24")."""
    import psutil

    stats = psutil.net_if_stats()
    found: dict[str, dict[str, Any]] = {}
    for name, addresses in psutil.net_if_addrs().items():
        cidrs = [
            str(ipaddress.ip_interface(f"{a.address}/{a.netmask}"))
            for a in addresses
            if a.family == socket.AF_INET and a.netmask
        ]
        found[name] = {"up": bool(stats.get(name) and stats[name].isup), "cidrs": cidrs}
    return found


def gloo_interface(networks: dict[str, dict[str, Any]]) -> tuple[str | None, str | None]:
    """The interface and address gloo's sockets use: the first GLOO_SOCKET_IFNAME names, else the interface holding
    the address the host name resolves to (torch's createDefaultDevice), else the loopback (its fallback)."""
    named = os.environ.get("GLOO_SOCKET_IFNAME", "").split(",")[0].strip()
    if named:
        cidrs = (networks.get(named) or {}).get("cidrs") or []
        return named, cidrs[0].split("/")[0] if cidrs else None
    try:
        address = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)[0][4][0]
    except (OSError, IndexError):
        return "lo", "127.0.0.1"
    holder = next((n for n, net in networks.items() if any(c.split("/")[0] == address for c in net["cidrs"])), None)
    return holder or ("lo" if address.startswith("127.") else None), address
