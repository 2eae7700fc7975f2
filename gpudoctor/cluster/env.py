"""Where this node stands in a cluster run, read from the launcher's environment (pure: no torch, no store).

torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (c10d or static rendezvous; the agent's own store).
srun: SLURM_PROCID and the step's node list, its first node the master. A batch script's own shell (no srun
step) is not a cluster run, and neither is a world of one.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from gpudoctor.errors import InputError

SLURM_PORT_BASE = 29500
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")  # a host name, as Slurm and DNS allow them


class ClusterEnvError(InputError):
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


WHOLE = re.compile(r"^\s*[0-9]{1,10}\s*$")
MAX_NODES = 100_000  # more than any cluster has: a bound on what a variable can make gpudoctor expand


def _int(environ: Mapping[str, str], name: str, minimum: int = 0, maximum: int = MAX_NODES) -> int:
    value = environ.get(name, "")
    if not WHOLE.match(value) or not minimum <= int(value) <= maximum:
        raise ClusterEnvError(f"{name}={value[:40]!r} is not a whole number from {minimum} to {maximum}")
    return int(value)


def _node_name(environ: Mapping[str, str]) -> str:
    """This node's name as the launcher knows it: only the characters host names have (it names folders and
    reaches `scontrol`)."""
    name = environ.get("SLURMD_NODENAME") or socket.gethostname()
    if not NODE_NAME.match(name):
        raise ClusterEnvError(f"node name {name!r} is not a host name (letters, digits, '.', '-', '_')")
    return name


def _from_torchrun(environ: Mapping[str, str]) -> ClusterEnv:
    rank, world = _int(environ, "RANK"), _int(environ, "WORLD_SIZE", 1)
    if rank >= world:
        raise ClusterEnvError(f"RANK={rank} is outside WORLD_SIZE={world}")
    if environ.get("LOCAL_WORLD_SIZE") and _int(environ, "LOCAL_WORLD_SIZE", 1) > 1:
        raise ClusterEnvError("cluster mode runs one gpudoctor per node: start it with --nproc-per-node 1")
    if world > 1 and not environ.get("MASTER_ADDR"):
        raise ClusterEnvError("MASTER_ADDR is not set: start gpudoctor with torchrun or srun")
    port = _int(environ, "MASTER_PORT", 1, 65535) if world > 1 else 0
    elastic = "TORCHELASTIC_RUN_ID" in environ
    run_id = environ.get("TORCHELASTIC_RUN_ID", "env") + "." + environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if len(run_id) > 200 or not run_id.isprintable():
        raise ClusterEnvError(f"TORCHELASTIC_RUN_ID={run_id[:40]!r}... is not a run id torchrun makes")
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
    nodes = _int(environ, "SLURM_STEP_NUM_NODES", 1) if environ.get("SLURM_STEP_NUM_NODES") else world
    if nodes != world:
        raise ClusterEnvError(f"cluster mode runs one task per node: srun gave {world} tasks on {nodes} nodes")
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or ""
    hosts = expand_hostlist(nodelist)
    if not hosts:
        raise ClusterEnvError(f"SLURM_STEP_NODELIST={nodelist!r} names no node")
    job = str(_int(environ, "SLURM_JOB_ID", 0, 2**32)) if environ.get("SLURM_JOB_ID") else "0"
    step = str(_int(environ, "SLURM_STEP_ID", 0, 2**32)) if environ.get("SLURM_STEP_ID") else "0"
    default_port = SLURM_PORT_BASE + int(job) % 1000
    port = _int(environ, "MASTER_PORT", 1, 65535) if environ.get("MASTER_PORT") else default_port
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
    parts = _top_level_parts(text)
    count = sum(_count_one(part) for part in parts)
    if count > MAX_NODES:
        raise ClusterEnvError(f"host list {text[:60]!r} names {count:,} nodes; gpudoctor takes at most {MAX_NODES:,}")
    scontrol = shutil.which("scontrol")
    if scontrol:
        proc = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True, text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.split()
    return [name for part in parts for name in _expand_one(part)]


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


BRACKETS = re.compile(r"\[([^\]]*)\]")


def _ranges(group: str, pattern: str) -> list[tuple[str, int]]:
    """A bracket's items ("001-003,7") as (first number as written, how many from it)."""
    found = []
    for item in group.split(","):
        low, _, high = item.partition("-")
        if not WHOLE.match(low) or (high and not WHOLE.match(high)):
            raise ClusterEnvError(f"host list range {item[:40]!r} in {pattern[:60]!r} is not N or N-M")
        found.append((low.strip(), max(int(high or low) - int(low) + 1, 0)))
    return found


def _count_one(pattern: str) -> int:
    """How many names `_expand_one(pattern)` makes, without making them."""
    return math.prod(sum(size for _, size in _ranges(group, pattern)) for group in BRACKETS.findall(pattern))


def _expand_one(pattern: str) -> list[str]:
    match = BRACKETS.search(pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    names = []
    for low, size in _ranges(match.group(1), pattern):
        for number in range(int(low), int(low) + size):
            names += [f"{head}{number:0{len(low)}d}{rest}" for rest in _expand_one(tail)]
    return names
