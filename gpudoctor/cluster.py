"""Cluster mode: one gpudoctor per node, started by torchrun or srun, talking through torch.distributed.

The launcher's environment says who is who (torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Slurm:
SLURM_PROCID and the step's node list, its first node the master). Control goes through torch.distributed's
TCPStore (torchrun's own agent store, or one rank 0 serves): every node joins, beats every 2 s, shares its
own report, and takes part in the cross-node workloads rank 0 plans. Rank 0 never waits on a node that
stopped beating, and every wait has a deadline, so a node that dies, hangs or never joins is named and the
others finish. No messages go anywhere torch.distributed would not send them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from gpudoctor.launch import LaunchResult, RankReport, Span, caused_elsewhere, free_port, judge_ranks, launch
from gpudoctor.model import Result, Row, Status

STORE_ERRORS = (RuntimeError, OSError)  # the store went away: its server (rank 0, or the agent) ended

BEAT_S = 2.0
BEAT_STALE_S = 15.0  # a node silent this long is gone (killed, network down, machine lost)
POLL_S = 0.2
UNTIL_RANK_0_ENDS_S = 24 * 3600.0  # a bound only: the wait ends as soon as rank 0 ends or stops beating
SLURM_PORT_BASE = 29500


class ClusterEnvError(ValueError):
    """The launcher's environment is inconsistent (a usage error)."""


@dataclass(frozen=True)
class ClusterEnv:
    """Where this node stands in the cluster run, from the launcher's environment."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int
    node: str
    launcher: str  # "torchrun", "slurm" or "env" (RANK/WORLD_SIZE set by hand or by another launcher)
    run_id: str
    agent_store: bool = False  # torchrun's agent serves the store at MASTER_ADDR:MASTER_PORT
    expected: tuple[str, ...] = ()  # node names in rank order, where the launcher says (Slurm's node list)

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def expected_name(self, rank: int) -> str:
        return self.expected[rank] if rank < len(self.expected) else f"rank {rank}"


def detect(environ: Mapping[str, str] = os.environ) -> ClusterEnv | None:
    """The cluster this process runs in, or None for a single node (no launcher, or a world of one)."""
    if "RANK" in environ and "WORLD_SIZE" in environ:
        env = _from_torchrun(environ)
    elif "SLURM_PROCID" in environ and "SLURM_STEP_NUM_TASKS" in environ:
        env = _from_slurm(environ)
    else:
        return None
    return env if env.world_size > 1 else None


def _int(environ: Mapping[str, str], name: str, minimum: int = 0) -> int:
    value = environ.get(name, "")
    if not value.strip().isdigit() or int(value) < minimum:
        raise ClusterEnvError(f"{name}={value!r} is not a whole number >= {minimum}")
    return int(value)


def _node_name(environ: Mapping[str, str]) -> str:
    return environ.get("SLURMD_NODENAME") or socket.gethostname()


def _from_torchrun(environ: Mapping[str, str]) -> ClusterEnv:
    rank, world = _int(environ, "RANK"), _int(environ, "WORLD_SIZE", 1)
    if rank >= world:
        raise ClusterEnvError(f"RANK={rank} is outside WORLD_SIZE={world}")
    if int(environ.get("LOCAL_WORLD_SIZE", "1") or 1) > 1:
        raise ClusterEnvError("cluster mode runs one gpudoctor per node: start it with --nproc-per-node 1")
    if world > 1 and not environ.get("MASTER_ADDR"):
        raise ClusterEnvError("MASTER_ADDR is not set: start gpudoctor with torchrun or srun")
    port = _int(environ, "MASTER_PORT", 1) if world > 1 else 0
    elastic = "TORCHELASTIC_RUN_ID" in environ
    run_id = environ.get("TORCHELASTIC_RUN_ID", "env") + "." + environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return ClusterEnv(
        rank,
        world,
        environ.get("MASTER_ADDR", ""),
        port,
        _node_name(environ),
        "torchrun" if elastic else "env",
        run_id,
        agent_store=environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true",
    )


def _from_slurm(environ: Mapping[str, str]) -> ClusterEnv:
    """Inside an srun step (SLURM_STEP_NUM_TASKS is set only there: a batch script's own environment has
    SLURM_PROCID=0 too, and must not wait for ranks that never come)."""
    rank, world = _int(environ, "SLURM_PROCID"), _int(environ, "SLURM_STEP_NUM_TASKS", 1)
    nodes = environ.get("SLURM_STEP_NUM_NODES")
    if nodes and int(nodes) != world:
        raise ClusterEnvError(f"cluster mode runs one task per node: srun gave {world} tasks on {nodes} nodes")
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or ""
    hosts = expand_hostlist(nodelist)
    if not hosts:
        raise ClusterEnvError(f"SLURM_STEP_NODELIST={nodelist!r} names no node")
    job = environ.get("SLURM_JOB_ID", "0")
    step = environ.get("SLURM_STEP_ID", "0")
    default_port = SLURM_PORT_BASE + (int(job) % 1000 if job.isdigit() else 0)
    port = _int(environ, "MASTER_PORT", 1) if environ.get("MASTER_PORT") else default_port
    return ClusterEnv(
        rank,
        world,
        environ.get("MASTER_ADDR") or hosts[0],
        port,
        _node_name(environ),
        "slurm",
        f"slurm.{job}.{step}",
        expected=tuple(hosts) if len(hosts) == world else (),
    )


def expand_hostlist(text: str) -> list[str]:
    """A Slurm host list ("gpu[001-003,7],login1") as names: `scontrol show hostnames` where Slurm is
    installed, else the same expansion done here (ranges keep their zero padding)."""
    text = text.strip()
    if not text:
        return []
    scontrol = shutil.which("scontrol")
    if scontrol:
        proc = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True, text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.split()
    return [name for part in _top_level_parts(text) for name in _expand_one(part)]


def _top_level_parts(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ClusterEnvError(f"host list {text!r} has an unclosed bracket")
    return [*parts, text[start:]]


def _expand_one(pattern: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    names = []
    for item in match.group(1).split(","):
        low, _, high = item.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ClusterEnvError(f"host list range {item!r} in {pattern!r} is not N or N-M")
        for number in range(int(low), int(high or low) + 1):
            names += [f"{head}{number:0{len(low)}d}{rest}" for rest in _expand_one(tail)]
    return names


class Control:
    """The cluster's key-value store under this run's prefix: JSON values, deadlines on every wait."""

    def __init__(self, env: ClusterEnv, connect_s: float) -> None:
        from torch.distributed import TCPStore

        serve = env.leader and not env.agent_store
        self.store = TCPStore(
            env.master_addr,
            env.master_port,
            None,
            serve,
            timedelta(seconds=connect_s),
            wait_for_workers=False,
            multi_tenant=serve,
        )
        self.prefix = f"gpudoctor/{env.run_id}/"

    def post(self, key: str, value: Any) -> None:
        self.store.set(self.prefix + key, json.dumps(value))

    def read(self, key: str) -> Any | None:
        """The value, or None while nobody has posted it."""
        full = self.prefix + key
        return json.loads(self.store.get(full)) if self.store.check([full]) else None

    def read_many(self, keys: list[str]) -> list[Any | None]:
        """Several values in one round trip when all are there, else one by one (None where missing)."""
        full = [self.prefix + k for k in keys]
        if full and self.store.check(full):
            return [json.loads(v) for v in self.store.multi_get(full)]
        return [self.read(k) for k in keys]

    def clone(self) -> Control:
        twin = object.__new__(Control)
        twin.store, twin.prefix = self.store.clone(), self.prefix
        return twin


@dataclass
class Member:
    """A node as rank 0 sees it."""

    rank: int
    name: str
    joined: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    last_beat: int = -1
    beat_seen_at: float = field(default_factory=time.monotonic)
    lost: str = ""  # why it is gone, once it is
    span: range = range(0)  # its ranks in the last cross-node workload

    @property
    def alive(self) -> bool:
        return self.joined is not None and not self.lost


@dataclass
class WorkloadOutcome:
    """A cross-node workload as rank 0 saw it: every member node's ranks, and the nodes lost on the way."""

    members: list[Member]
    ranks: list[RankReport]
    lost: list[Member]
    result: LaunchResult

    def node_of(self, rank: int) -> Member | None:
        return next((m for m in self.members if rank in m.span), None)


class Session:
    """This node's part in a cluster run."""

    def __init__(self, env: ClusterEnv, connect_s: float) -> None:
        self.env = env
        self.control = Control(env, connect_s)
        self.members: dict[int, Member] = {}
        self._beats_read_at = 0.0
        self._stop = threading.Event()
        self._beats = threading.Thread(target=self._beat, args=(self.control.clone(),), daemon=True)

    # --- every node ---------------------------------------------------------------------------------------
    def join(self, info: dict[str, Any]) -> None:
        self.control.post(f"join/{self.env.rank}", {"name": self.env.node, **info})
        self._beats.start()

    def _beat(self, control: Control) -> None:
        """A counter, raised every BEAT_S while this process lives; a failed post (a congested link, the
        store's host gone) is simply tried again next time."""
        count = 0
        while not self._stop.wait(BEAT_S if count else 0):
            count += 1
            with contextlib.suppress(*STORE_ERRORS):
                control.post(f"beat/{self.env.rank}", count)

    def share(self, report: dict[str, Any]) -> None:
        self.control.post(f"report/{self.env.rank}", report)

    def close(self, wait_s: float = 10.0) -> None:
        """Rank 0 announces the end and waits for the others to say goodbye (it may serve the store); the
        others keep beating until rank 0 ends (or is gone), so rank 0 never mistakes a finished node for a
        lost one."""
        if self.env.leader:
            self.control.post("end", True)
            deadline = time.monotonic() + wait_s
            waiting = [m for m in self.members.values() if m.alive and m.rank != 0]
            while waiting and time.monotonic() < deadline:
                self._refresh_beats()
                waiting = [m for m in waiting if m.alive and self.control.read(f"bye/{m.rank}") is None]
                time.sleep(POLL_S)
        else:
            self.await_key("end", time.monotonic() + UNTIL_RANK_0_ENDS_S)
            with contextlib.suppress(*STORE_ERRORS):
                self.control.post(f"bye/{self.env.rank}", True)
        self._stop.set()

    def leader_gone(self) -> bool:
        """Rank 0 stopped beating (or the store went away with it)."""
        try:
            beat = self.control.read("beat/0")
        except STORE_ERRORS:
            return True
        now = time.monotonic()
        if beat != getattr(self, "_leader_beat", None):
            self._leader_beat, self._leader_seen = beat, now
        return now - getattr(self, "_leader_seen", now) > BEAT_STALE_S

    def await_key(self, key: str, deadline: float) -> Any | None:
        """A value rank 0 posts, or None once rank 0 is gone, the run ended, or the deadline passed."""
        while time.monotonic() < deadline:
            try:
                value = self.control.read(key)
                if value is not None:
                    return value
                if self.control.read("end") is not None:
                    return None
            except STORE_ERRORS:
                return None
            if self.leader_gone():
                return None
            time.sleep(POLL_S)
        return None

    def take_part(
        self, check_id: str, worker: str, params: dict[str, Any], local_ranks: int, backend: str, timeout_s: float
    ) -> LaunchResult | None:
        """Run this node's ranks of a cross-node workload when rank 0's plan includes it; post what they
        returned. None when this node is not in the plan (or rank 0 is gone)."""
        self.control.post(f"ready/{check_id}/{self.env.rank}", {"local_ranks": local_ranks})
        plan = self.await_key(f"plan/{check_id}", time.monotonic() + timeout_s + 60)
        if plan is None or str(self.env.rank) not in plan["spans"]:
            return None
        first, size = plan["spans"][str(self.env.rank)]
        span = Span(first, plan["world_size"], plan["master_addr"], plan["port"])
        outcome = launch(worker, size, backend, params, plan["timeout_s"], span=span)
        self.control.post(
            f"outcome/{check_id}/{self.env.rank}",
            {"status": outcome.status.value, "message": outcome.message, "ranks": [r.__dict__ for r in outcome.ranks]},
        )
        return outcome

    # --- rank 0 -------------------------------------------------------------------------------------------
    def roster(self, join_s: float, report_s: float) -> list[Member]:
        """Every node: joined or not, reported or lost. Waits for joins up to `join_s`, then for reports up to
        `report_s`, never for a node that stopped beating."""
        self.members = {r: Member(r, self.env.expected_name(r)) for r in range(self.env.world_size)}
        self._wait(join_s, lambda m: m.joined is not None, "joined")
        for member in self.members.values():
            if member.joined is None:
                member.lost = f"never joined within {join_s:g} s"
        self._wait(report_s, lambda m: m.report is not None or not m.alive, "reported")
        for member in self.members.values():
            if member.alive and member.report is None:
                member.lost = f"sent no report within {report_s:g} s"
        return list(self.members.values())

    def _wait(self, limit_s: float, done: Any, what: str) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            self._refresh()
            if all(done(m) for m in self.members.values()):
                return
            time.sleep(POLL_S)

    def _refresh(self) -> None:
        for member in self.members.values():
            if member.joined is None:
                member.joined = self.control.read(f"join/{member.rank}")
                if member.joined:
                    member.name = member.joined["name"]
                    member.beat_seen_at = time.monotonic()
            if member.alive and member.report is None:
                member.report = self.control.read(f"report/{member.rank}")
        self._refresh_beats()

    def _refresh_beats(self) -> None:
        """Every other live node's beat counter, read at most once per beat in one request where all exist
        (a thousand nodes cost rank 0 one store round trip every 2 s, not one per node per poll)."""
        now = time.monotonic()
        if now - self._beats_read_at < BEAT_S:
            return
        self._beats_read_at = now
        watched = [m for m in self.members.values() if m.alive and m.rank != self.env.rank]
        for member, beat in zip(watched, self.control.read_many([f"beat/{m.rank}" for m in watched]), strict=True):
            if beat is not None and beat != member.last_beat:
                member.last_beat, member.beat_seen_at = beat, now
            elif now - member.beat_seen_at > BEAT_STALE_S:
                at = self.control.read(f"at/{member.rank}") or "its own checks"
                member.lost = f"stopped answering (no heartbeat for {BEAT_STALE_S:g} s) during {at}"

    def mark(self, check_id: str) -> None:
        """Where this node is: rank 0 names it if the node goes silent."""
        self.control.post(f"at/{self.env.rank}", check_id)

    def lead(
        self,
        check_id: str,
        worker: str,
        params: dict[str, Any],
        local_ranks: int,
        backend: str,
        timeout_s: float,
        participants: list[Member],
    ) -> WorkloadOutcome:
        """Plan a cross-node workload over the participants that say they are ready, run rank 0's share,
        and gather every node's outcome; a node that stops beating is lost, not waited for."""
        self.control.post(f"ready/{check_id}/0", {"local_ranks": local_ranks})
        ready = self._gather(participants, f"ready/{check_id}", time.monotonic() + 60)
        members = [m for m in participants if m.rank in ready]
        spans, first = {}, 0
        for member in members:
            size = int(ready[member.rank]["local_ranks"])
            spans[str(member.rank)] = [first, size]
            member.span = range(first, first + size)
            first += size
        plan = {
            "spans": spans,
            "world_size": first,
            "master_addr": self.env.master_addr,
            "port": free_port("0.0.0.0"),
            "timeout_s": timeout_s,
        }
        self.control.post(f"plan/{check_id}", plan)
        mine = launch(
            worker, spans["0"][1], backend, params, timeout_s, span=Span(0, first, plan["master_addr"], plan["port"])
        )
        self.control.post(f"outcome/{check_id}/0", {"status": mine.status.value, "message": mine.message})
        outcomes = self._gather(members, f"outcome/{check_id}", time.monotonic() + timeout_s + 30, frozenset({0}))
        ranks = list(mine.ranks)
        for rank in sorted(outcomes):
            ranks += [RankReport(**r) for r in outcomes[rank].get("ranks", [])]
        lost = [m for m in members if m.rank not in outcomes and m.rank != 0]
        for member in lost:
            member.lost = member.lost or f"sent no result for {check_id}"
        return WorkloadOutcome(members, ranks, lost, _overall(ranks, lost))

    def _gather(
        self, members: list[Member], key: str, deadline: float, skip: frozenset[int] = frozenset()
    ) -> dict[int, Any]:
        found: dict[int, Any] = {}
        while time.monotonic() < deadline:
            self._refresh_beats()
            for member in members:
                if member.rank not in found and member.rank not in skip:
                    value = self.control.read(f"{key}/{member.rank}")
                    if value is not None:
                        found[member.rank] = value
            if all(m.rank in found or m.rank in skip or not m.alive for m in members):
                break
            time.sleep(POLL_S)
        return found


def _overall(ranks: list[RankReport], lost: list[Member]) -> LaunchResult:
    if lost:
        names = "; ".join(f"{m.name} {m.lost}" for m in lost)
        return LaunchResult(Status.ERROR, names, sorted(ranks, key=lambda r: r.rank))
    return judge_ranks(sorted(ranks, key=lambda r: r.rank), 0.0)


@dataclass
class ClusterContext:
    """What a cluster check sees: this node's session and, on rank 0, every node of the run."""

    session: Session
    nodes: list[Member] = field(default_factory=list)

    @property
    def leader(self) -> bool:
        return self.session.env.leader

    @property
    def leader_name(self) -> str:
        env = self.session.env
        return env.expected[0] if env.expected else env.master_addr

    def node_summaries(self) -> list[dict[str, Any]]:
        """Rank 0: each node's report (see node_report), or what is known of a node that sent none."""
        return [
            {**(m.report or {}), "name": m.name, "rank": m.rank, "lost": m.lost or None}
            if m.report and not m.lost
            else {"name": m.name, "rank": m.rank, "lost": m.lost, "exit_code": None, "status": "error", "checks": []}
            for m in self.nodes
        ]

    def participants(self, check_id: str) -> list[Member]:
        return [m for m in self.nodes if m.alive and m.report and check_id in m.report.get("cluster_checks", [])]

    def run(
        self, check_id: str, worker: str, params: dict[str, Any], local_ranks: int, backend: str, timeout_s: float
    ) -> WorkloadOutcome | Result:
        """Rank 0: the whole world's outcome, or the result naming the node that failed it. Elsewhere: the
        result saying how this node's own share went (rank 0 judges the whole)."""
        if not self.leader:
            mine = self.session.take_part(check_id, worker, params, local_ranks, backend, timeout_s)
            return own_part(mine, self.leader_name)
        members = self.participants(check_id)
        self.session.mark(check_id)
        outcome = self.session.lead(check_id, worker, params, local_ranks, backend, timeout_s, members)
        return outcome if outcome.result.status == Status.PASS else blame(outcome)


def own_part(outcome: LaunchResult | None, leader: str) -> Result:
    """A node's view of a cross-node workload: its ranks finished, failed on their own (this node's fault),
    or failed because a peer went away (a warning: rank 0 names the node at fault)."""
    if outcome is None:
        return Result(Status.SKIP, f"not in the cross-node run (rank 0 on {leader} did not plan it, or is gone)")
    ranks = f"ranks {outcome.ranks[0].rank}-{outcome.ranks[-1].rank}" if outcome.ranks else "its ranks"
    if outcome.status == Status.PASS:
        return Result(Status.PASS, f"took part with {ranks}; judged by rank 0 on {leader}")
    if caused_elsewhere(outcome):
        return Result(Status.WARN, f"{ranks} lost a peer on another node ({outcome.message}); rank 0 names it")
    return Result(outcome.status, f"this node's {outcome.message}")


def blame(outcome: WorkloadOutcome) -> Result:
    """The failed cross-node workload, naming the node: one that went silent, else the node of the rank that
    caused the failure."""
    rows = [Row(Status.FAIL, f"lost: {m.lost}", node=m.name) for m in outcome.lost]
    message = outcome.result.message
    if not rows:
        culprits = sorted({m.name for m in map(outcome.node_of, _ranks_named(message)) if m})
        rows = [Row(outcome.result.status, message, node=name) for name in culprits]
        message = re.sub(r"rank (\d+)", lambda g: _on_node(outcome, int(g.group(1))), message)
    return Result(outcome.result.status, message, rows=rows)


def _ranks_named(message: str) -> list[int]:
    return [int(n) for n in re.findall(r"rank (\d+)", message)]


def _on_node(outcome: WorkloadOutcome, rank: int) -> str:
    member = outcome.node_of(rank)
    return f"rank {rank} on {member.name}" if member else f"rank {rank}"


def node_report(
    env: ClusterEnv, document: dict[str, Any], facts: dict[str, Any], cluster_checks: list[str]
) -> dict[str, Any]:
    """What a node tells rank 0: its own verdict and checks, its figures, its software and its network."""
    checks = document["checks"]
    return {
        "name": env.node,
        "rank": env.rank,
        "status": document["status"],
        "exit_code": document["exit_code"],
        "checks": checks,
        "failing": [c["check_id"] for c in checks if c["status"] in ("fail", "error", "timeout")],
        "warning": [c["check_id"] for c in checks if c["status"] == "warn"],
        "figures": {
            f"{c['check_id']}:{m['name']}": m["value"]
            for c in checks
            for m in c["metrics"]
            if m["baseline"] and isinstance(m["value"], int | float)
        },
        "software": software(facts),
        "infiniband": (facts.get("system") or {}).get("infiniband") or [],
        "cluster_checks": cluster_checks,
    }


SKEW_PREFIXES = ("NCCL_", "GLOO_", "TORCH_")
BY_DESIGN = ("_SOCKET_IFNAME",)  # interface names differ between nodes by design


def software(facts: dict[str, Any]) -> dict[str, Any]:
    """What must be the same on every node: versions and the distributed settings."""
    nvml, torch, system = facts.get("nvml") or {}, facts.get("torch") or {}, facts.get("system") or {}
    env = system.get("env") or {}
    return {
        "versions": {
            "driver": nvml.get("driver_version"),
            "cuda driver": nvml.get("cuda_driver_version"),
            "torch": torch.get("version"),
            "torch CUDA": torch.get("cuda"),
            "NCCL": (torch.get("nccl") or {}).get("version"),
            "cuDNN": (torch.get("cudnn") or {}).get("version"),
            "torchvision": (torch.get("torchvision") or {}).get("version"),
        },
        "settings": {k: v for k, v in env.items() if k.startswith(SKEW_PREFIXES) and not k.endswith(BY_DESIGN)},
    }
