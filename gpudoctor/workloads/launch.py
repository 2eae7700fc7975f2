"""One worker process per GPU through torch.distributed (NCCL on GPUs, gloo on CPU).

The whole launch runs inside `isolate.run_isolated`, so the parent's timeout and tree kill cover
every rank. Ranks get the same environment torchrun gives (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), so a worker also runs on its own under torchrun. The launcher fails
fast: when one rank dies the others are stopped, and the result names the rank and what it was doing.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpudoctor.errors import InputError
from gpudoctor.model import Status
from gpudoctor.workloads.isolate import (
    WORKDIR_ENV,
    Outcome,
    die_with_parent,
    load_target,
    progress,
    python_module,
    read_progress,
    record_call,
    run_isolated,
)

FAULT_ENV = "GPUDOCTOR_INJECT_FAULT"
RENDEZVOUS_ENV = "GPUDOCTOR_RENDEZVOUS"  # set by this launcher for its ranks: file:<path>, or tcp (MASTER_ADDR/PORT)
FAULT_KINDS = ("hang", "crash", "exit", "raise", "corrupt")
FAIL_FAST_GRACE_S = 2.0


class FaultSpecError(InputError):
    """GPUDOCTOR_INJECT_FAULT does not parse."""


@dataclass(frozen=True)
class Fault:
    """A test hook: make one rank misbehave at a named phase (GPUDOCTOR_INJECT_FAULT=rank=1,kind=hang,at=x)."""

    rank: int
    kind: str
    at: str = ""

    @classmethod
    def parse(cls, text: str) -> Fault:
        try:
            fields = dict(item.split("=", 1) for item in text.split(","))
            fault = cls(int(fields.pop("rank")), fields.pop("kind"), fields.pop("at", ""))
        except (ValueError, KeyError) as exc:
            raise FaultSpecError(f"{FAULT_ENV}={text!r} is not rank=N,kind=K[,at=PHASE]") from exc
        if fields or fault.kind not in FAULT_KINDS:
            raise FaultSpecError(f"{FAULT_ENV}={text!r}: kind must be one of {', '.join(FAULT_KINDS)}")
        return fault

    @property
    def text(self) -> str:
        return f"rank={self.rank},kind={self.kind},at={self.at}"

    @classmethod
    def from_env(cls) -> Fault | None:
        text = os.environ.get(FAULT_ENV, "").strip()
        return cls.parse(text) if text else None


@dataclass
class RankContext:
    """What a worker function gets: its place in the job, its device, and the check's parameters."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: Any
    params: dict[str, Any]
    fault: Fault | None = None
    deadline: float = 0.0  # wall-clock time the whole launch must end by
    _seq: int = 0

    def phase(self, name: str) -> None:
        """Announce the next operation; a timeout report names the last one each rank announced."""
        self._seq += 1
        progress(f"rank{self.rank}", f"{self._seq}|{name}")
        if self.fault_here(name) and self.fault is not None:
            _trigger(self.fault.kind)

    def fault_here(self, name: str, kind: str | None = None) -> bool:
        f = self.fault
        return bool(f and f.rank == self.rank and name.startswith(f.at) and (kind is None or f.kind == kind))


def _trigger(kind: str) -> None:
    if kind == "hang":
        while True:
            time.sleep(3600)
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "exit":
        os._exit(3)
    if kind == "raise":
        raise RuntimeError("injected fault")


@dataclass
class RankReport:
    rank: int
    exit_code: int | None
    data: Any = None
    error: str = ""
    phase: str = ""
    stopped_by_launcher: bool = False
    exit_round: int | None = None
    seq: int = 0  # how many phases the rank announced: lower means behind


@dataclass(frozen=True)
class Span:
    """Where one node's ranks sit in a world spread over several nodes (cluster mode): ranks first_rank..
    first_rank + local count - 1 of world_size, meeting at master_addr:master_port."""

    first_rank: int
    world_size: int
    master_addr: str
    master_port: int


@dataclass
class LaunchResult:
    """PASS (every rank returned), ERROR (a rank failed) or TIMEOUT (a rank never arrived, or a collective
    hung); `message` names the rank and what it was doing."""

    status: Status
    message: str
    ranks: list[RankReport] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def data(self) -> list[Any]:
        return [r.data for r in self.ranks]


def launch(
    worker: str,
    world_size: int,
    backend: str,
    params: dict[str, Any],
    timeout_s: float,
    fault: Fault | None = None,
    span: Span | None = None,
) -> LaunchResult:
    """Run `module:function(ctx)` on `world_size` ranks here and gather what each returns; with a `span`, these
    ranks are this node's share of a world over several nodes. A test's `fault` reaches the ranks as the
    environment hook a user would set (GPUDOCTOR_INJECT_FAULT), which the ranks read."""
    payload = {
        "worker": worker,
        "world_size": world_size,
        "backend": backend,
        "params": params,
        "deadline": time.time() + timeout_s,
        "span": span.__dict__ if span else None,
    }
    env = {FAULT_ENV: fault.text} if fault else None
    return _interpret(run_isolated("gpudoctor.workloads.launch:run_ranks", payload, timeout_s, env))


def _interpret(outcome: Outcome) -> LaunchResult:
    if outcome.status == Status.PASS:
        ranks = [RankReport(**r) for r in outcome.data["ranks"]]
        return judge_ranks(ranks, outcome.elapsed_s)
    if outcome.status == Status.TIMEOUT:
        stuck = _stuck_ranks(outcome.progress)
        return LaunchResult(Status.TIMEOUT, _stuck_message(outcome.progress), stuck, outcome.elapsed_s)
    return LaunchResult(
        Status.ERROR, f"launcher {outcome.message}: {outcome.stderr_tail[-300:]}", elapsed_s=outcome.elapsed_s
    )


def judge_ranks(ranks: list[RankReport], elapsed: float) -> LaunchResult:
    """What happened, naming the rank that caused it. Ranks that gave up waiting for a peer (gloo raises a
    timeout; NCCL's watchdog aborts the process with SIGABRT and records nothing) are a consequence: the
    cause is the rank that never arrived, the one still running or furthest behind."""
    failed = [r for r in ranks if r.exit_code != 0 and not r.stopped_by_launcher]
    if not failed:
        return LaunchResult(Status.PASS, f"{len(ranks)} ranks finished", ranks, elapsed)
    waited = [r for r in failed if _gave_up_waiting(r, ranks)]
    if len(waited) == len(failed):
        return _timed_out(waited, ranks, elapsed)
    first = min(
        (r for r in failed if r not in waited),
        key=lambda r: (_lost_a_peer(r.error), r.exit_round or 0, not r.error.startswith("crashed"), r.rank),
    )
    return LaunchResult(Status.ERROR, f"rank {first.rank} {first.error} during '{first.phase}'", ranks, elapsed)


def _gave_up_waiting(rank: RankReport, ranks: list[RankReport]) -> bool:
    """A collective timeout: recorded as one (gloo, NCCL blocking wait), or an abort (NCCL's watchdog) while
    another rank was still running or behind it."""
    if _is_timeout(rank.error):
        return True
    aborted = rank.error.startswith("crashed (SIGABRT)")
    return aborted and any(r.stopped_by_launcher or r.seq < rank.seq for r in ranks)


def _timed_out(waited: list[RankReport], ranks: list[RankReport], elapsed: float) -> LaunchResult:
    """Every failed rank gave up waiting: name the ranks still running, else those behind the rest."""
    running = [r for r in ranks if r not in waited and r.exit_code != 0]
    lowest = min((r.seq for r in running), default=None)
    behind = [r for r in running if r.seq == lowest] or [r for r in waited if r.seq < max(w.seq for w in waited)]
    waiting = [r for r in waited if r not in behind]
    where = waiting[0].phase
    if not behind:
        return LaunchResult(
            Status.TIMEOUT, f"all ranks timed out in '{where}': the collective never completed", ranks, elapsed
        )
    names = ", ".join(f"rank {r.rank} (in '{r.phase}')" for r in behind)
    gave_up = f"rank{'s' if len(waiting) > 1 else ''} {', '.join(str(r.rank) for r in waiting)}"
    return LaunchResult(
        Status.TIMEOUT, f"{names} never arrived; {gave_up} gave up waiting in '{where}'", ranks, elapsed
    )


def caused_elsewhere(result: LaunchResult) -> bool:
    """A failure these ranks only suffered (cluster mode): each failed rank gave up waiting for, or lost, a
    peer on another node, or the whole launch ran out of time waiting."""
    failed = [r for r in result.ranks if r.exit_code != 0 and not r.stopped_by_launcher]
    if not failed:
        return result.status == Status.TIMEOUT
    return all(_is_timeout(r.error) or _lost_a_peer(r.error) or r.error.startswith("crashed (SIGABRT)") for r in failed)


# How gloo and torch's TCPStore client say a connection went away under them ("Failed to recv, got 0 bytes.
# Connection was likely closed. Did the remote server shutdown or crash?" when a peer dies in rendezvous).
PEER_LOSS = (
    "connection closed by peer",
    "connection reset by peer",
    "connection was likely closed",
    "broken pipe",
    "remote worker",
    "socket closed",
)


def _lost_a_peer(error: str) -> bool:
    """An error that only says another rank went away: a consequence, not the cause."""
    return any(marker in error.lower() for marker in PEER_LOSS)


def _is_timeout(error: str) -> bool:
    text = error.lower()
    return "timed out" in text or "timeout" in text


def _stuck_message(progress_by_name: dict[str, str]) -> str:
    phases = {name: _split_phase(value) for name, value in progress_by_name.items() if name.startswith("rank")}
    if not phases:
        return "the launcher never started a rank"
    low = min(seq for seq, _ in phases.values())
    laggards = sorted(n for n, (seq, _) in phases.items() if seq == low)
    where = phases[laggards[0]][1]
    if len(laggards) == len(phases):
        return f"all ranks stuck in '{where}'"
    return f"{', '.join(n.replace('rank', 'rank ') for n in laggards)} stuck in '{where}' while the others waited"


def _stuck_ranks(progress_by_name: dict[str, str]) -> list[RankReport]:
    """The ranks still running when the launch ran out of time, each at the phase it last announced (in
    cluster mode rank 0 sets them beside the other nodes' ranks to name the one that held everyone up)."""
    stuck = []
    for name, value in sorted(progress_by_name.items()):
        if name.startswith("rank") and name[4:].isascii() and name[4:].isdigit():
            seq, phase = _split_phase(value)
            stuck.append(RankReport(int(name[4:]), None, phase=phase, stopped_by_launcher=True, seq=seq))
    return stuck


def _split_phase(value: str) -> tuple[int, str]:
    seq, _, name = value.partition("|")
    return (int(seq), name) if seq.isascii() and seq.isdigit() else (0, value)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def bound_listener(host: str, port: int) -> int | None:
    """A socket listening on `host`'s own address only, to hand to torch's TCPStore (`master_listen_fd`): its
    server otherwise listens on every interface, and takes no address to bind. None (torch's own way) where
    `host` does not resolve to an address here, or names this host by a loopback address that other nodes
    cannot mean (Debian's `127.0.1.1 <hostname>`): only a literal loopback address binds to loopback."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    for family, kind, proto, _, address in infos:
        if ipaddress.ip_address(address[0]).is_loopback and not _literal_loopback(host):
            continue
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(4096)
        except OSError:
            sock.close()
            continue
        return sock.detach()
    return None


def _literal_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def run_ranks(payload: dict[str, Any]) -> dict[str, Any]:
    """Inside the isolated child: start one process per rank, fail fast, gather their results."""
    workdir = Path(os.environ[WORKDIR_ENV])
    spec_path = workdir / "ranks.json"
    spec_path.write_text(json.dumps(payload))
    local = payload["world_size"]
    span = Span(**payload["span"]) if payload["span"] else Span(0, local, "", 0)
    # gpudoctor may itself run under torchrun: its ranks are not torchrun's workers, and with the agent's
    # TORCHELASTIC_USE_AGENT_STORE they would all wait as clients for a store nobody serves.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC_")}
    base_env = {**inherited, "WORLD_SIZE": str(span.world_size), "LOCAL_WORLD_SIZE": str(local)}
    if payload["span"]:  # rank 0's store listens on MASTER_ADDR's address only
        base_env |= {"MASTER_ADDR": span.master_addr, "MASTER_PORT": str(span.master_port), RENDEZVOUS_ENV: "tcp"}
    else:  # one node: the ranks meet in a file in the launch's private folder, and nothing listens
        base_env |= {RENDEZVOUS_ENV: f"file:{workdir / 'rendezvous'}"}
        base_env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # As torchrun does: ranks that each take every core for their own ops (OpenMP threads spin after a
    # parallel region) starve each other and the collectives' threads. A user's own setting wins.
    base_env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // local)))
    ranks = range(span.first_rank, span.first_rank + local)
    procs = [_start_rank(rank, rank - span.first_rank, spec_path, base_env, workdir) for rank in ranks]
    stopped, exited = _wait_fail_fast(procs)
    phases = read_progress(workdir)
    reports = [
        _rank_report(rank, procs[i], workdir, phases, i in stopped, exited.get(i)) for i, rank in enumerate(ranks)
    ]
    return {"ranks": [r.__dict__ for r in reports]}


def _start_rank(
    rank: int, local_rank: int, spec_path: Path, base_env: dict[str, str], workdir: Path
) -> subprocess.Popen[bytes]:
    env = {**base_env, "RANK": str(rank), "LOCAL_RANK": str(local_rank)}
    with open(workdir / f"rank{rank}.log", "wb") as log:
        return subprocess.Popen(
            python_module("gpudoctor.workloads.launch", str(spec_path)),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
        )


def _wait_fail_fast(procs: list[subprocess.Popen[bytes]]) -> tuple[set[int], dict[int, int]]:
    """Wait for every rank; once one fails, give the rest a grace period, then stop them.

    Returns the ranks stopped, and for each rank that exited the poll round it was first seen gone in (the
    first rank to fail is the cause; the others usually fail because their peer vanished).
    """
    failed_at = None
    exited: dict[int, int] = {}
    round_ = 0
    while any(p.poll() is None for p in procs):
        round_ += 1
        exited.update({r: round_ for r, p in enumerate(procs) if p.returncode is not None and r not in exited})
        if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > FAIL_FAST_GRACE_S:
            stopped = {r for r, p in enumerate(procs) if p.poll() is None}
            for rank in stopped:
                procs[rank].kill()
                procs[rank].wait()
            return stopped, exited
        time.sleep(0.05)
    exited.update({r: round_ + 1 for r in range(len(procs)) if r not in exited})
    return set(), exited


def _rank_report(
    rank: int,
    proc: subprocess.Popen[bytes],
    workdir: Path,
    phases: dict[str, str],
    stopped: bool,
    exit_round: int | None,
) -> RankReport:
    seq, phase = _split_phase(phases.get(f"rank{rank}", "0|startup"))
    report = RankReport(rank, proc.returncode, phase=phase, stopped_by_launcher=stopped, exit_round=exit_round, seq=seq)
    result_path = workdir / f"rank{rank}.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    report.data = result.get("data")
    report.error = _rank_error(proc.returncode, result.get("error", ""), workdir, rank)
    return report


def _rank_error(returncode: int | None, recorded: str, workdir: Path, rank: int) -> str:
    """What went wrong on a rank. An error the rank recorded comes first: a rank that raised "connection
    reset by peer" and then died of a signal while tearing down (gloo aborts at exit) lost a peer; it did not
    crash on its own."""
    if not returncode:
        return ""
    if returncode > 0:
        return recorded or f"exited with code {returncode}: {_last_line(workdir, rank)}"
    signalled = f"crashed ({signal.Signals(-returncode).name})"
    log = _log(workdir, rank)
    if NCCL_WATCHDOG_TIMEOUT in log:
        return "timed out in a collective (NCCL's watchdog aborted it)"
    if recorded:
        return f"{recorded} (then {signalled} at exit)"
    thrown = _thrown(log)
    return f"{signalled}: {thrown}" if thrown else signalled


TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'\s*\n\s*what\(\):\s*(.*)")


def _thrown(log: str) -> str:
    """What a C++ exception nobody caught said before the process aborted (gloo's transport threads, c10d)."""
    found = TERMINATE.findall(log)
    if not found:
        return ""
    kind, what = found[-1]
    return f"{kind}: {what.strip()}"[:300]


def _last_line(workdir: Path, rank: int) -> str:
    lines = _log(workdir, rank).strip().splitlines()
    return lines[-1][:300] if lines else "no output"


def _log(workdir: Path, rank: int) -> str:
    try:
        return (workdir / f"rank{rank}.log").read_text(errors="replace")
    except OSError:
        return ""


# What ProcessGroupNCCL's watchdog prints before it aborts a rank whose collective ran past the timeout
# (TORCH_NCCL_ASYNC_ERROR_HANDLING, default 3: the process is killed without recording an error).
NCCL_WATCHDOG_TIMEOUT = "Watchdog caught collective operation timeout"


def collective_timeout(deadline: float) -> float:
    """40 % of the time left when a rank joins: a peer that never arrives then fails the waiting ranks'
    collective well before the launch's own limit, so the result names the rank that is missing."""
    return max(1.0, (deadline - time.time()) * 0.4)


def init_rank(backend: str, deadline: float, params: dict[str, Any]) -> RankContext:
    """Join the process group the way torchrun-started code does; usable on its own under torchrun.

    `deadline` is the wall-clock time the whole launch must end by; the collective timeout is derived from
    what is left of it once torch is imported. The test hook GPUDOCTOR_INJECT_FAULT is read here, on the
    rank, from the environment it inherited.
    """
    fault = Fault.from_env()
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    ctx = RankContext(rank, world, local_rank, backend, torch.device("cpu"), params, fault, deadline)
    ctx.phase("rendezvous")
    if backend == "nccl":
        from gpudoctor.workloads.measure import cuda_devices

        index = local_rank % cuda_devices()  # several ranks may share a GPU (NCCL >= 2.30)
        torch.cuda.set_device(index)
        ctx.device = torch.device("cuda", index)
    timeout = timedelta(seconds=collective_timeout(deadline))
    store = rendezvous_store(rank, world, timeout)
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout, store=store)
    return ctx


def rendezvous_store(rank: int, world: int, timeout: timedelta) -> Any:
    """Where gpudoctor's launcher started the ranks, the store they meet in: a file in the launch's private
    folder on one node; across nodes rank 0's TCPStore, listening on MASTER_ADDR's address only. Under a
    torchrun of the user's own, None: torch's env:// rendezvous."""
    import torch.distributed as dist

    how = os.environ.get(RENDEZVOUS_ENV, "")
    if how.startswith("file:"):
        return dist.FileStore(how.removeprefix("file:"), world)
    if how != "tcp":
        return None
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    listener = bound_listener(host, port) if rank == 0 else None
    return dist.TCPStore(host, port, world, rank == 0, timeout, master_listen_fd=listener)


def _rank_main(spec_path: str) -> int:
    die_with_parent()
    spec = json.loads(Path(spec_path).read_text())
    rank = int(os.environ["RANK"])
    progress(f"rank{rank}", "0|startup")
    return record_call(lambda: _run_rank(spec, rank), Path(spec_path).with_name(f"rank{rank}.json"))


def _run_rank(spec: dict[str, Any], rank: int) -> Any:
    fault = Fault.from_env()
    if fault and fault.rank == rank and fault.at == "startup":
        _trigger(fault.kind)
    ctx = init_rank(spec["backend"], spec["deadline"], spec["params"])
    data = load_target(spec["worker"])(ctx)
    ctx.phase("shutdown")
    import torch.distributed as dist

    dist.destroy_process_group()
    return data


if __name__ == "__main__":
    sys.exit(_rank_main(sys.argv[1]))
