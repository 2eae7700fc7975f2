"""A stranger who reaches the cluster store and holds no credential writes nothing rank 0 or a node believes
(issue: a process outside the run could join as a node, post a failing report so `drain` drained it, post a
verdict, forge a plan, or crash rank 0 with junk). On torch's real TCPStore, with the run's secret and with
munge (a private munged made here), and a stranger's values in every place it could reach."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.cluster import credential as cred
from gpudoctor.cluster import messages
from gpudoctor.cluster.env import ClusterEnv
from gpudoctor.cluster.session import Member, Session
from gpudoctor.cluster.store import Control, choose_credential
from gpudoctor.report import document as doc

SECRET = {"GPUDOCTOR_RUN_SECRET": "correct horse battery staple"}


@pytest.fixture
def store() -> Any:
    from torch.distributed import TCPStore

    return TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=10), wait_for_workers=False)


def client(store: Any) -> Any:
    from torch.distributed import TCPStore

    return TCPStore("127.0.0.1", store.port, None, False, timedelta(seconds=10))


def env(rank: int, world: int = 3, launcher: str = "env", expected: tuple[str, ...] = ()) -> ClusterEnv:
    return ClusterEnv(rank, world, "127.0.0.1", 0, f"n{rank}", launcher, "env.0", expected=expected)


def control(store: Any, rank: int, credential: cred.Credential) -> Control:
    return Control(client(store), credential.prefix("env.0"), credential)


def good_report(rank: int, status: str = "pass") -> dict:
    return {"name": f"n{rank}", "rank": rank, "status": status, "exit_code": 0, "checks": [], "cluster_checks": []}


def test_a_value_is_believed_only_under_the_key_this_run_sealed_it_for() -> None:
    run = cred.from_environment(SECRET)
    sealed = run.seal("p/verdict/1", '{"status": "fail"}')
    assert run.open("p/verdict/1", sealed) == '{"status": "fail"}'
    assert run.open("p/verdict/2", sealed) is None  # moved to another node's key
    assert "fail" not in sealed and "status" not in sealed  # nobody without the key reads it
    mac, _, body = sealed.partition(":")
    flipped = ("A" if body[20] != "A" else "B").join((body[:20], body[21:]))
    assert run.open("p/verdict/1", f"{mac}:{flipped}") is None  # a changed ciphertext
    assert run.open("p/verdict/1", sealed.replace(":", "")) is None
    assert run.open("p/verdict/1", f"{mac}:!!not base64") is None
    assert run.seal("p/verdict/1", '{"status": "fail"}') != sealed  # a fresh nonce each time
    assert run.open("p/x", run.seal("p/x", "")) == ""
    assert (
        cred.from_environment({"GPUDOCTOR_RUN_SECRET": "another secret, long enough"}).open("p/verdict/1", sealed)
        is None
    )
    assert run.prefix("env.0") != cred.NONE.prefix("env.0") == "gpudoctor/env.0/"


def test_a_secret_that_is_no_secret_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(cred.CredentialError, match="at least 16"):
        cred.from_environment({"GPUDOCTOR_RUN_SECRET": "short"})
    secret = tmp_path / "secret"
    secret.write_text("x" * 32)
    secret.chmod(0o644)
    with pytest.raises(cred.CredentialError, match="may be read by others"):
        cred.from_environment({"GPUDOCTOR_RUN_SECRET_FILE": str(secret)})
    secret.chmod(0o600)
    assert cred.from_environment({"GPUDOCTOR_RUN_SECRET_FILE": str(secret)}).kind == "secret"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(cred.CredentialError, match="not a regular file"):
        cred.from_environment({"GPUDOCTOR_RUN_SECRET_FILE": str(fifo)})


def test_a_stranger_cannot_join_report_or_be_believed(store: Any) -> None:
    """Rank 0 with the secret; node 1 genuine; the stranger writes a failing report and a join for rank 2 (and
    junk for rank 1) under both the public prefix and the run's (it cannot name the run's, but even if it
    could, its values are unsealed)."""
    run = cred.from_environment(SECRET)
    stranger = client(store)
    for prefix in (cred.NONE.prefix("env.0"), run.prefix("env.0")):
        stranger.set(prefix + "join/2", '{"name": "n2"}')
        stranger.set(prefix + "report/2", '{"name": "n2", "rank": 2, "status": "fail", "exit_code": 1}')
        stranger.set(prefix + "beat/2", "1")
        stranger.append(prefix + "arrived/join", "2,junk,99,")
        stranger.append(prefix + "arrived/report", "2,")
    node = Session(env(1), 10, control(store, 1, run))
    node.join({"cluster_checks": []})
    node.share(good_report(1))
    leader = Session(env(0), 10, control(store, 0, run))
    members = {m.rank: m for m in leader.roster(join_s=3, report_s=3)}
    assert members[1].report == good_report(1)
    assert members[2].report is None and members[2].tampered and "did not seal" in members[2].lost
    summaries = [{"name": m.name, "rank": m.rank, "lost": m.lost, "tampered": m.tampered} for m in members.values()]
    cluster = doc.build_cluster([], summaries, {"host": "n0"}, False, False, "env", "secret")["cluster"]
    assert cluster["tampered"] == ["rank 2"] and "rank 2" not in cluster["failed_nodes"]
    node.close(0)


def test_a_forged_verdict_or_plan_is_waited_past(store: Any) -> None:
    run = cred.from_environment(SECRET)
    stranger = client(store)
    prefix = run.prefix("env.0")
    stranger.set(prefix + "end", "true")
    stranger.set(prefix + "verdict/1", '{"status": "fail", "findings": ["drain it"]}')
    stranger.set(prefix + "plan/cluster.links/0", '{"done": true}')
    node = Session(env(1), 10, control(store, 1, run))
    started = time.monotonic()
    assert node.await_leader("plan/cluster.links/0", time.monotonic() + 1.5) is None
    assert time.monotonic() - started >= 1.4  # waited past the forgery, did not take it
    leader = control(store, 0, run)
    leader.post("end", True)
    assert node.verdict() is None  # the only verdict there is the stranger's


def test_values_a_node_could_not_have_sent_are_reasons_never_crashes() -> None:
    assert messages.join_problem([], None) == "joined with a message that is not a join"
    assert "launcher runs this rank on node-1" in messages.join_problem({"name": "evil"}, "node-1")
    assert "not what a node sends" in messages.report_problem({"name": "n1", "rank": 1, "status": "bogus"}, 1)
    assert not messages.verdict_ok({"status": "bogus", "findings": []})
    assert not messages.plan_ok({"spans": {"1": [0, 1]}, "world_size": 2, "master_addr": "x", "port": 99999})
    assert not messages.outcome_ok({"status": "pass", "message": "", "ranks": [{"rank": "zero"}]})
    assert messages.report_problem(good_report(1), 1) is None


def test_a_forged_plan_cannot_redirect_a_node(store: Any) -> None:
    """Without a credential a plan could still be forged: a node meets only at rank 0's own address."""
    node = Session(env(1), 10, Control(client(store), "gpudoctor/env.0/"))
    plan = {
        "spans": {"1": [0, 1]},
        "world_size": 1,
        "master_addr": "10.9.9.9",
        "port": 2222,
        "timeout_s": 5,
        "params": {},
    }
    assert not node._plan_ok(plan)
    assert node._plan_ok({**plan, "master_addr": "127.0.0.1"})


def test_the_same_name_twice_is_one_node_not_two(store: Any) -> None:
    leader = Session(env(0), 10, Control(client(store), "p/"))
    leader.members = {0: Member(0, "n0", joined={"name": "n0"}), 1: Member(1, "rank 1")}
    assert "which rank 0 already is" in leader._join_problem(leader.members[1], {"name": "n0"})


@pytest.fixture
def munged(tmp_path: Path) -> dict[str, str]:
    """A private munge daemon (its own key and socket) for this test."""
    if not (shutil.which("munged") and shutil.which("munge")) or os.geteuid() != 0:
        pytest.skip("munged needs to be installed and this test to run as root")
    key = tmp_path / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    folder = tempfile.mkdtemp(prefix="gd-munge-")  # the socket's folder: open to every user, as /run/munge is
    os.chmod(folder, 0o755)
    started = subprocess.run(
        ["munged", f"--key-file={key}", f"--socket={folder}/m.socket", f"--pid-file={folder}/m.pid",
         f"--log-file={folder}/m.log", f"--seed-file={folder}/m.seed", "--force"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if started.returncode:
        pytest.skip(f"munged did not start: {started.stderr.strip()}")
    yield {cred.MUNGE_SOCKET_ENV: f"{folder}/m.socket"}
    subprocess.run(["kill", Path(folder, "m.pid").read_text().strip()], check=False)
    shutil.rmtree(folder, ignore_errors=True)


def test_munge_hands_the_key_to_each_node_and_to_nobody_else(store: Any, munged: dict[str, str]) -> None:
    assert cred.munge_available(munged)
    leader = choose_credential(env(0, launcher="slurm"), client(store), 5, munged)
    node = choose_credential(env(1, launcher="slurm"), client(store), 5, munged)
    assert leader.kind == node.kind == "munge" and leader.key == node.key
    rank_2 = client(store).get(cred.handoff_key("env.0", 2)).decode()
    assert cred.munge_accept(rank_2, "env.0", 2, munged) == leader.key
    assert cred.munge_accept(rank_2, "env.0", 2, munged) is None  # munge refuses a replay
    other = cred.munge_issue("env.0", 2, leader.key, 60, munged)
    assert cred.munge_accept(other, "env.0", 1, munged) is None  # rank 2's credential is not rank 1's
    socket = f"--socket={munged[cred.MUNGE_SOCKET_ENV]}"
    as_nobody = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "munge", socket,
         "--string=gpudoctor:env.0:1:" + "00" * 32],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert as_nobody.returncode == 0
    assert cred.munge_accept(as_nobody.stdout.strip(), "env.0", 1, munged) is None  # made by another user


def test_a_node_that_gets_no_credential_it_can_accept_says_so(store: Any, munged: dict[str, str]) -> None:
    client(store).set(cred.handoff_key("env.0", 1), "MUNGE:forged:")
    with pytest.raises(cred.CredentialError, match="no munge credential from rank 0"):
        choose_credential(env(1, launcher="slurm"), client(store), 1, munged)


def test_the_stores_listen_on_master_addr_only(store: Any) -> None:
    """torch's TCPStore server listens on every interface unless handed a socket: rank 0's store gets one bound
    to MASTER_ADDR's address; a name that is not this host's, or this host's name on a loopback address other
    nodes cannot mean, is left to torch."""
    from gpudoctor.workloads.launch import bound_listener, free_port

    fd = bound_listener("127.0.0.1", free_port())
    assert fd is not None
    with socket.socket(fileno=fd) as sock:
        assert sock.getsockname()[0] == "127.0.0.1"
    assert bound_listener("192.0.2.1", free_port()) is None  # TEST-NET-1: no address of this host
    assert bound_listener("no-such-host.invalid", free_port()) is None
    leader = ClusterEnv(0, 2, "127.0.0.1", free_port(), "n0", "env", "env.0")
    control = Control.connect(leader, 5, {})
    assert f"127.0.0.1:{leader.master_port}" in _listening(os.getpid())
    assert f"*:{leader.master_port}" not in _listening(os.getpid())
    del control


def test_a_one_node_workload_meets_in_a_file_and_listens_on_nothing_but_loopback() -> None:
    """The single-node workload's ranks rendezvous in a FileStore in the launch's private folder: no TCPStore
    on every interface while it runs (gloo's own pairs stay on loopback)."""
    import psutil

    from gpudoctor.workloads.launch import launch

    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        me = psutil.Process()
        while not done.is_set():
            for child in me.children(recursive=True):
                seen.update(_listening(child.pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        params = {"sizes": [4096, 1 << 20], "warmup": 2, "iters": 30, "out_of_place": True}
        outcome = launch("gpudoctor.checks.ranks.allreduce:worker", 2, "gloo", params, 120)
    finally:
        done.set()
        watcher.join()
    assert outcome.status.value == "pass", outcome.message
    assert seen and all(address.startswith("127.0.0.1:") for address in seen), seen


def _listening(pid: int) -> set[str]:
    """The TCP addresses process `pid` listens on, as `ss` writes them."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3] for line in out.splitlines() if f"pid={pid}," in line}
