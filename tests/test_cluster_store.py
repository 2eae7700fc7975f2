"""Cluster mode's messages through the store: keys per check and attempt, a node that gave up never planned
with (on torch's real TCPStore, in threads), and waits whose cost to the store does not grow with the node
count (a counting store)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from gpudoctor.cluster import session as session_mod
from gpudoctor.cluster.env import ClusterEnv
from gpudoctor.cluster.session import Attempt, Member, Session
from gpudoctor.cluster.store import Control


def env(rank: int, world: int, port: int = 0) -> ClusterEnv:
    return ClusterEnv(rank, world, "127.0.0.1", port, f"n{rank}", "env", "test")


@pytest.fixture
def store():
    from torch.distributed import TCPStore

    server = TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=10), wait_for_workers=False)
    yield server


def session(store: Any, rank: int, world: int) -> Session:
    from torch.distributed import TCPStore

    client = TCPStore("127.0.0.1", store.port, None, False, timedelta(seconds=10))
    return Session(env(rank, world, store.port), 10, Control(client, "gpudoctor/test/"))


def members(world: int) -> list[Member]:
    return [Member(r, f"n{r}", joined={"name": f"n{r}"}) for r in range(world)]


def test_a_node_that_gave_up_waiting_is_not_planned_with(store: Any) -> None:
    """The issue's stale key: a node whose wait for a plan ran out left its `ready` key behind, and rank 0
    planned with it, then marked it lost. Now it withdraws by claiming its slot, and rank 0 leaves it out."""
    leader, quitter, stayer = (session(store, r, 3) for r in range(3))
    gave_up = quitter.take_part("cluster.links", 0, 1, wait_s=0.5)
    assert gave_up is None
    waiting: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: waiting.update(plan=stayer.take_part("cluster.links", 0, 1, 30)))
    thread.start()
    run = Attempt("cluster.links", 0, "w:w", {}, 1, "gloo", 60)
    planned, plan = leader.plan(run, members(3))
    thread.join(30)
    assert [m.rank for m in planned] == [0, 2]
    assert sorted(plan["spans"]) == ["0", "2"] and plan["world_size"] == 2
    assert waiting["plan"] == plan, "the node that stayed gets the plan"


def test_rank_0_claims_first_and_the_late_quitter_still_takes_part(store: Any) -> None:
    leader, node = session(store, 0, 2), session(store, 1, 2)
    node.say_ready("cluster.links/0", {"local_ranks": 1})
    assert leader.control.claim("slot/cluster.links/0/1", session_mod.PLANNED) == "planned"
    assert node.control.claim("slot/cluster.links/0/1", session_mod.GONE) == "planned", "one claim wins: rank 0's"


def test_keys_are_per_check_and_attempt(store: Any) -> None:
    leader, node = session(store, 0, 2), session(store, 1, 2)
    found: dict[int, Any] = {}

    def follow() -> None:
        for attempt in range(3):
            found[attempt] = node.take_part("cluster.links", attempt, 1, 30)

    thread = threading.Thread(target=follow)
    thread.start()
    for attempt in range(2):
        leader.plan(Attempt("cluster.links", attempt, "w:w", {}, 1, "gloo", 60, {"attempt": attempt}), members(2))
    leader.end_check("cluster.links", 2)
    thread.join(30)
    assert [found[a]["params"]["attempt"] for a in (0, 1)] == [0, 1]
    assert found[2] == {"done": True}


class CountingStore:
    """TCPStore's calls as a dictionary, each counted, and the blocking waits (the beats); a wait that times out
    sleeps its timeout."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.calls = 0
        self.waits = 0
        self.lock = threading.Lock()

    def _count(self) -> None:
        with self.lock:
            self.calls += 1

    def set(self, key: str, value: str) -> None:
        self._count()
        self.values[key] = value.encode()

    def get(self, key: str) -> bytes:
        self._count()
        return self.values[key]

    def check(self, keys: list[str]) -> bool:
        self._count()
        return all(k in self.values for k in keys)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        self._count()
        return [self.values[k] for k in keys]

    def multi_set(self, keys: list[str], values: list[str]) -> None:
        self._count()
        self.values.update({k: v.encode() for k, v in zip(keys, values, strict=True)})

    def append(self, key: str, value: str) -> None:
        self._count()
        self.values[key] = self.values.get(key, b"") + value.encode()

    def compare_set(self, key: str, expected: str, desired: str) -> bytes:
        self._count()
        if key not in self.values and expected == "":
            self.values[key] = desired.encode()
        return self.values[key]

    def wait(self, keys: list[str], timeout: timedelta) -> None:
        self._count()
        self.waits += 1
        if not all(k in self.values for k in keys):
            time.sleep(timeout.total_seconds())
            raise RuntimeError("wait timeout")

    def clone(self) -> CountingStore:
        return self


def requests_while_waiting(world: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Rank 0 collecting reports (half of them there) and a node waiting for a plan, each for 10 beats of time:
    the requests and the beats (blocking waits) each made. A busy machine fits fewer beats in that time, the same
    requests in each."""
    fake = CountingStore()
    leader = Session(env(0, world), 1, Control(fake, "p/"))
    leader.members = {m.rank: m for m in members(world)}
    for rank in range(world):
        fake.values[f"p/beat/{rank}"] = b"1"
    half = {rank: {"rank": rank} for rank in range(0, world, 2)}
    for rank, report in half.items():
        Control(fake, "p/").post(f"report/{rank}", report)
        Control(fake, "p/").arrive("report", rank)
    fake.calls = fake.waits = 0
    assert leader._collect("report", list(leader.members.values()), time.monotonic() + 10 * BEAT) == half
    by_rank_0 = fake.calls, fake.waits
    fake.calls = fake.waits = 0
    assert Session(env(1, world), 1, Control(fake, "p/")).await_leader("plan/x/0", time.monotonic() + 10 * BEAT) is None
    return by_rank_0, (fake.calls, fake.waits)


BEAT = 0.1


def test_waiting_costs_a_few_requests_per_beat_whatever_the_node_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1,000 nodes the old polling made about 5 requests per node every 0.2 s on rank 0's store (20,000 a
    second); now rank 0 makes one blocking wait, one read of an arrival list and one multi_get per beat."""
    monkeypatch.setattr(session_mod, "BEAT_S", BEAT)
    few = requests_while_waiting(10)
    many = requests_while_waiting(1000)
    for calls, beats in (*few, *many):
        assert beats >= 1 and calls <= 5 * beats + 1, f"{calls} requests in {beats} beats"
    per_beat = [[calls / beats for calls, beats in waiting] for waiting in (few, many)]
    assert all(abs(a - b) <= 1 for a, b in zip(*per_beat, strict=True)), f"{few} at 10 nodes, {many} at 1,000"
