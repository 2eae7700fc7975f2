"""One node's part in a cluster run, through the store: it joins, beats every 2 s, shares its own report,
takes part in the cross-node workloads rank 0 plans, and learns rank 0's verdict about itself before it ends.

Rank 0 never waits on a node that stopped beating, and every wait has a deadline, so a node that dies, hangs
or never joins is named and the others finish. Keys are per cross-node check and per attempt
(`ready/<check>/<attempt>/<rank>`, `plan/<check>/<attempt>`, `outcome/<check>/<attempt>/<rank>`). A node
that gives up waiting for a plan withdraws by claiming its slot, and rank 0 claims every slot it plans
with, so rank 0 never plans with a node that left: one of the two claims wins.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.cluster import messages
from gpudoctor.cluster.env import ClusterEnv
from gpudoctor.cluster.store import STORE_ERRORS, Control
from gpudoctor.model import Status
from gpudoctor.workloads.launch import LaunchResult, RankReport, Span, free_port, judge_ranks, launch

BEAT_S = 2.0
BEAT_STALE_S = 15.0  # a node silent this long is gone (killed, network down, machine lost)
READY_WAIT_S = 60.0  # how long rank 0 waits for the nodes to say they are ready for a cross-node check
OUTCOME_GRACE_S = 30.0  # beyond a workload's own limit, for a node's outcome to arrive
PLANNED, GONE = "planned", "gone"


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
    tampered: bool = False  # what it sent was replaced by a value this run did not seal: not the node's doing
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


def attempt_key(check_id: str, attempt: int) -> str:
    return f"{check_id}/{attempt}"


class Session:
    """This node's part in a cluster run."""

    def __init__(self, env: ClusterEnv, connect_s: float, control: Control | None = None) -> None:
        self.env = env
        self.control = control or Control.connect(env, connect_s)
        self.members: dict[int, Member] = {}
        self._beats_read_at = 0.0
        self._leader_beat: Any = None
        self._leader_seen = time.monotonic()
        self._stop = threading.Event()
        self._beats = threading.Thread(target=self._beat, args=(self.control.clone(),), daemon=True)

    # --- every node ---------------------------------------------------------------------------------------
    def join(self, info: dict[str, Any]) -> None:
        """Post a first beat (so rank 0 can read every joined node's beat in one request), then the join."""
        self.control.post(f"beat/{self.env.rank}", 0)
        self.control.post(f"join/{self.env.rank}", {"name": self.env.node, **info})
        self.control.arrive("join", self.env.rank)
        self._beats.start()

    def _beat(self, control: Control) -> None:
        """A counter, raised every BEAT_S while this process lives; a failed post (a congested link, the
        store's host gone) is simply tried again next time."""
        for count in itertools.count(1):
            if self._stop.wait(BEAT_S):
                return
            with contextlib.suppress(*STORE_ERRORS):
                control.post(f"beat/{self.env.rank}", count)

    def share(self, report: dict[str, Any]) -> None:
        self.control.post(f"report/{self.env.rank}", report)
        self.control.arrive("report", self.env.rank)

    def mark(self, check_id: str) -> None:
        """Where this node is: rank 0 names it if the node goes silent."""
        with contextlib.suppress(*STORE_ERRORS):
            self.control.post(f"at/{self.env.rank}", check_id)

    def leader_gone(self) -> bool:
        """Rank 0 stopped beating (or the store went away with it)."""
        try:
            beat = self.control.read("beat/0")
        except STORE_ERRORS:
            return True
        now = time.monotonic()
        if beat != self._leader_beat:
            self._leader_beat, self._leader_seen = beat, now
        return now - self._leader_seen > BEAT_STALE_S

    def await_leader(self, key: str, deadline: float, valid: Callable[[Any], bool] = lambda v: True) -> Any | None:
        """A value rank 0 posts: one blocking wait at a time, at most a beat long, then a look at whether
        rank 0 still beats or has ended the run. None once rank 0 is gone or ended, or the deadline passed. A
        value that is not this run's, or not `valid`, is not rank 0's: it is waited past."""
        while time.monotonic() < deadline:
            try:
                if self.control.wait([key], min(BEAT_S, deadline - time.monotonic())):
                    value = self.control.fetch([key])[0]
                    if value is not None and valid(value):
                        return value
                    time.sleep(min(BEAT_S, max(deadline - time.monotonic(), 0)))
                elif key != "end" and self.control.present("end"):
                    return None
            except STORE_ERRORS:
                return None
            if self.leader_gone():
                return None
        return None

    def take_part(self, check_id: str, attempt: int, local_ranks: int, wait_s: float) -> dict[str, Any] | None:
        """Say this node is ready for an attempt of a cross-node check, and wait for rank 0's plan. A node
        that gives up withdraws by claiming its slot; if rank 0 claimed it first, its plan is on the way."""
        base = attempt_key(check_id, attempt)
        self.say_ready(base, {"local_ranks": local_ranks})
        plan = self.await_leader(f"plan/{base}", time.monotonic() + wait_s, self._plan_ok)
        if plan is None:
            with contextlib.suppress(*STORE_ERRORS):
                if self.control.claim(f"slot/{base}/{self.env.rank}", GONE) == PLANNED:
                    plan = self.await_leader(f"plan/{base}", time.monotonic() + BEAT_STALE_S, self._plan_ok)
        return plan

    def _plan_ok(self, plan: Any) -> bool:
        """A plan rank 0 could have made: well formed, and meeting at rank 0's own address."""
        return messages.plan_ok(plan) and (plan.get("done") is True or plan["master_addr"] == self.env.master_addr)

    def say_ready(self, base: str, value: dict[str, Any]) -> None:
        """Ready for an attempt (`{"local_ranks": n}`), or absent from it (`{"absent": why}`)."""
        self.control.post(f"ready/{base}/{self.env.rank}", value)
        self.control.arrive(f"ready/{base}", self.env.rank)

    def follow(self, run: Attempt, wait_s: float) -> list[LaunchResult | None]:
        """Every attempt rank 0 plans for a cross-node check, until it says the check is done: this node's
        ranks run its share of each (rank 0's plan adds to `run`'s parameters), and post what they returned.
        None for an attempt it was not in."""
        outcomes: list[LaunchResult | None] = []
        for attempt in itertools.count():
            plan = self.take_part(run.check_id, attempt, run.local_ranks, wait_s)
            if plan is None or plan.get("done"):
                return outcomes
            if str(self.env.rank) not in plan["spans"]:
                outcomes.append(None)
                continue
            first, size = plan["spans"][str(self.env.rank)]
            span = Span(first, plan["world_size"], plan["master_addr"], plan["port"])
            params = {**run.params, **plan["params"]}  # rank 0 sets the stage: probe, pairs, sizes
            outcome = launch(run.worker, size, run.backend, params, plan["timeout_s"], span=span)
            self._post_outcome(attempt_key(run.check_id, attempt), outcome)
            outcomes.append(outcome)
        return outcomes

    def _post_outcome(self, base: str, outcome: LaunchResult) -> None:
        self.control.post(
            f"outcome/{base}/{self.env.rank}",
            {"status": outcome.status.value, "message": outcome.message, "ranks": [r.__dict__ for r in outcome.ranks]},
        )
        self.control.arrive(f"outcome/{base}", self.env.rank)

    def verdict(self) -> dict[str, Any] | None:
        """Rank 0's verdict about this node, posted before it ends the run; None when rank 0 is gone."""
        if self.await_leader("end", time.monotonic() + UNTIL_RANK_0_ENDS_S) is None:
            return None
        with contextlib.suppress(*STORE_ERRORS):
            verdict = self.control.read(f"verdict/{self.env.rank}")
            return verdict if messages.verdict_ok(verdict) else None
        return None

    def close(self, wait_s: float = 10.0) -> None:
        """Rank 0 waits (briefly: it may serve the store) for the others to say goodbye; the others say it.
        Every node beats until here, so rank 0 never mistakes a finished node for a lost one."""
        with contextlib.suppress(*STORE_ERRORS):
            if self.env.leader:
                waiting = [m for m in self.members.values() if m.alive and m.rank != 0]
                self._collect("bye", waiting, time.monotonic() + wait_s)
            else:
                self.control.post(f"bye/{self.env.rank}", True)
                self.control.arrive("bye", self.env.rank)
        self._stop.set()

    # --- rank 0 -------------------------------------------------------------------------------------------
    def roster(self, join_s: float, report_s: float) -> list[Member]:
        """Every node: joined or not, reported or lost. Waits for joins up to `join_s`, then for reports up to
        `report_s`, never for a node that stopped beating."""
        self.members = {r: Member(r, self.env.expected_name(r)) for r in range(self.env.world_size)}
        now = time.monotonic()
        joins = self._collect("join", list(self.members.values()), now + join_s, self._join_problem)
        for rank, joined in sorted(joins.items()):
            member = self.members[rank]
            member.joined, member.name, member.beat_seen_at = joined, joined["name"], time.monotonic()
        for member in self.members.values():
            if member.joined is None:
                member.lost = member.lost or f"never joined within {join_s:g} s"
        alive = [m for m in self.members.values() if m.alive]
        for rank, report in self._collect("report", alive, time.monotonic() + report_s, _report_problem).items():
            self.members[rank].report = report
        for member in alive:
            if member.alive and member.report is None:
                member.lost = f"sent no report within {report_s:g} s"
        return list(self.members.values())

    def _join_problem(self, member: Member, joined: Any) -> str | None:
        expected = self.env.expected[member.rank] if member.rank < len(self.env.expected) else None
        problem = messages.join_problem(joined, expected)
        taken = [
            m.rank
            for m in self.members.values()
            if m.joined and isinstance(joined, dict) and m.name == joined.get("name")
        ]
        return problem or (f"joined as {joined['name']!r}, which rank {taken[0]} already is" if taken else None)

    def _collect(
        self,
        topic: str,
        members: list[Member],
        deadline: float,
        problem: Callable[[Member, Any], str | None] = lambda member, value: None,
    ) -> dict[int, Any]:
        """Each member's `topic/<rank>` value as it arrives: one blocking wait on the missing keys (at most a
        beat long), else one read of the topic's arrival list; one multi_get for what arrived. A member that
        stops beating is not waited for; one whose value is not this run's, or has a `problem`, is lost with
        the reason."""
        found: dict[int, Any] = {}
        while True:
            self._refresh_beats()
            waiting = [m for m in members if m.rank not in found and not m.lost]
            left = deadline - time.monotonic()
            if not waiting or left <= 0:
                return found
            keys = [f"{topic}/{m.rank}" for m in waiting]
            if self.control.wait(keys, min(BEAT_S, left)):
                arrived = waiting
            else:
                posted = self.control.arrivals(topic)
                arrived = self._there(topic, [m for m in waiting if m.rank in posted])
            values = self.control.fetch([f"{topic}/{m.rank}" for m in arrived])
            for member, value in zip(arrived, values, strict=True):
                why = TAMPERED if value is None else problem(member, value)
                if why:
                    member.lost, member.tampered = f"{why} ({topic})", value is None
                else:
                    found[member.rank] = value
                    if topic == "join":
                        member.joined, member.name = value, value["name"]

    def _there(self, topic: str, said: list[Member]) -> list[Member]:
        """The members whose `topic/<rank>` key is really there, of those the arrival list names: one request,
        and one per member only where the list names a key that is not there (nobody of this run does that:
        a node appends after posting)."""
        if not said or self.control.all_present([f"{topic}/{m.rank}" for m in said]):
            return said
        return [m for m in said if self.control.present(f"{topic}/{m.rank}")]

    def _refresh_beats(self) -> None:
        """Every other live node's beat counter, at most once per beat, in one request."""
        now = time.monotonic()
        if now - self._beats_read_at < BEAT_S:
            return
        self._beats_read_at = now
        watched = [m for m in self.members.values() if m.alive and m.rank != self.env.rank]
        for member, beat in zip(watched, self.control.fetch([f"beat/{m.rank}" for m in watched]), strict=True):
            if isinstance(beat, int) and beat != member.last_beat:
                member.last_beat, member.beat_seen_at = beat, now
            elif now - member.beat_seen_at > BEAT_STALE_S:
                at = self.control.read(f"at/{member.rank}") or "its own checks"
                member.lost = f"stopped answering (no heartbeat for {BEAT_STALE_S:g} s) during {at}"

    def lead(self, run: Attempt, participants: list[Member]) -> WorkloadOutcome:
        """Plan one attempt of a cross-node workload, run rank 0's share, and gather every node's outcome; a
        node that stops beating is lost, not waited for."""
        members, plan = self.plan(run, participants)
        params = {**run.params, **plan["params"]}
        span = Span(0, plan["world_size"], plan["master_addr"], plan["port"])
        mine = launch(run.worker, plan["spans"]["0"][1], run.backend, params, run.timeout_s, span=span)
        others = [m for m in members if m.rank != 0]
        base = attempt_key(run.check_id, run.attempt)
        outcomes = self._collect(
            f"outcome/{base}", others, time.monotonic() + run.timeout_s + OUTCOME_GRACE_S, _outcome_problem
        )
        ranks = list(mine.ranks)
        for rank in sorted(outcomes):  # each checked by messages.outcome_ok
            ranks += [RankReport(**r) for r in outcomes[rank].get("ranks", [])]
        lost = [m for m in others if m.rank not in outcomes]
        for member in lost:
            member.lost = member.lost or f"sent no result for {run.check_id} within {run.timeout_s:g} s"
        return WorkloadOutcome(members, ranks, lost, _overall(ranks, lost, mine.elapsed_s))

    def plan(self, run: Attempt, participants: list[Member]) -> tuple[list[Member], dict[str, Any]]:
        """Rank 0: the members of an attempt (the participants that said they are ready and whose slot rank 0
        wins, so never a node that gave up) and the plan it posts for them."""
        base = attempt_key(run.check_id, run.attempt)
        self.say_ready(base, {"local_ranks": run.local_ranks})
        ready = self._collect(f"ready/{base}", participants, time.monotonic() + READY_WAIT_S, _ready_problem)
        members = [
            m for m in participants if m.rank in ready and "absent" not in ready[m.rank] and self._claimed(base, m.rank)
        ]
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
            "timeout_s": run.timeout_s,
            "params": {**run.plan_params, "spans": spans},
        }
        self.control.post(f"plan/{base}", plan)
        return members, plan

    def _claimed(self, base: str, rank: int) -> bool:
        return rank == 0 or self.control.claim(f"slot/{base}/{rank}", PLANNED) == PLANNED

    def end_check(self, check_id: str, attempts: int) -> None:
        """Rank 0: no further attempt of this check; the nodes waiting for one move on."""
        self.control.post(f"plan/{attempt_key(check_id, attempts)}", {"done": True})

    def announce(self, verdicts: dict[int, dict[str, Any]]) -> None:
        """Rank 0: every node's verdict in one request, then the end of the run."""
        with contextlib.suppress(*STORE_ERRORS):
            self.control.post_many({f"verdict/{rank}": v for rank, v in verdicts.items()})
            self.control.post("end", True)


def _report_problem(member: Member, value: Any) -> str | None:
    return messages.report_problem(value, member.rank)


def _outcome_problem(member: Member, value: Any) -> str | None:
    return None if messages.outcome_ok(value) else "sent a workload outcome that is not one"


def _ready_problem(member: Member, value: Any) -> str | None:
    return None if messages.ready_ok(value) else "said it was ready with a message that is not one"


TAMPERED = "its message was replaced by one this run did not seal: someone outside the run writes to the store"
UNTIL_RANK_0_ENDS_S = 24 * 3600.0  # a bound only: the wait ends as soon as rank 0 ends or stops beating


@dataclass
class Attempt:
    """One attempt of a cross-node workload: the worker, its parameters (those rank 0 adds for every node in
    `plan_params`), each node's rank count, the backend and the time limit."""

    check_id: str
    attempt: int
    worker: str
    params: dict[str, Any]
    local_ranks: int
    backend: str
    timeout_s: float
    plan_params: dict[str, Any] = field(default_factory=dict)


def _overall(ranks: list[RankReport], lost: list[Member], elapsed_s: float) -> LaunchResult:
    ordered = sorted(ranks, key=lambda r: r.rank)
    if lost:
        return LaunchResult(Status.ERROR, "; ".join(f"{m.name} {m.lost}" for m in lost), ordered, elapsed_s)
    return judge_ranks(ordered, elapsed_s)
