"""The cluster's key-value store: torch.distributed's TCPStore under this run's prefix, JSON values.

Waiting costs the store almost nothing, whatever the node count: a node waiting for a key rank 0 posts holds
one blocking `wait` on it (at most a heartbeat long, then it looks whether rank 0 still beats); rank 0
waiting for a key from every node holds one blocking `wait` on all the missing keys, and when that times out
reads one arrival list (each node appends its rank to it after posting) and fetches what arrived with one
`multi_get`. No wait reads N keys in a loop.

Every value is sealed with the run's credential and read back only if this run sealed it under that very key
(credential.py); anything else reads as never posted.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from gpudoctor.cluster import credential as cred
from gpudoctor.cluster.env import ClusterEnv
from gpudoctor.workloads.launch import bound_listener

STORE_ERRORS = (RuntimeError, OSError)  # the store went away: its server (rank 0, or the agent) ended


class Control:
    """The store under one run's prefix, every value sealed with the run's credential; every wait has a
    limit."""

    def __init__(self, store: Any, prefix: str, credential: cred.Credential = cred.NONE) -> None:
        self.store = store
        self.prefix = prefix
        self.credential = credential

    @classmethod
    def connect(cls, env: ClusterEnv, connect_s: float, environ: Mapping[str, str] = os.environ) -> Control:
        """torchrun's agent store where the agent serves one, else the store rank 0 serves, listening on
        MASTER_ADDR's address only where it is one of this host's; then the run's credential (raises
        CredentialError where it is promised and cannot be had)."""
        TCPStore = quiet_store_class()

        serve = env.leader and not env.agent_store
        listener = bound_listener(env.master_addr, env.master_port) if serve else None
        store = TCPStore(
            env.master_addr,
            env.master_port,
            None,
            serve,
            timedelta(seconds=connect_s),
            wait_for_workers=False,
            multi_tenant=serve and listener is None,
            master_listen_fd=listener,
        )
        credential = choose_credential(env, store, connect_s, environ)
        return cls(store, credential.prefix(env.run_id), credential)

    def clone(self) -> Control:
        """A second connection, for a thread of its own (a connection serves one request at a time)."""
        return Control(self.store.clone(), self.prefix, self.credential)

    def _seal(self, key: str, value: Any) -> str:
        return self.credential.seal(self.prefix + key, json.dumps(value))

    def _open(self, key: str, raw: bytes) -> Any | None:
        text = self.credential.open(self.prefix + key, raw.decode(errors="replace"))
        try:
            return json.loads(text) if text is not None else None
        except ValueError:
            return None

    def post(self, key: str, value: Any) -> None:
        self.store.set(self.prefix + key, self._seal(key, value))

    def post_many(self, values: dict[str, Any]) -> None:
        """Several keys in one round trip."""
        if values:
            self.store.multi_set([self.prefix + k for k in values], [self._seal(k, v) for k, v in values.items()])

    def present(self, key: str) -> bool:
        return self.all_present([key])

    def all_present(self, keys: list[str]) -> bool:
        """Whether every key is there: one round trip."""
        return bool(self.store.check([self.prefix + k for k in keys]))

    def read(self, key: str) -> Any | None:
        """The value, or None while nobody has posted it (or what is there is not this run's)."""
        return self.fetch([key])[0] if self.present(key) else None

    def fetch(self, keys: list[str]) -> list[Any]:
        """Keys known to be there, in one round trip; None for a value this run did not seal."""
        if not keys:
            return []
        return [
            self._open(k, raw)
            for k, raw in zip(keys, self.store.multi_get([self.prefix + k for k in keys]), strict=True)
        ]

    def wait(self, keys: list[str], seconds: float) -> bool:
        """Block until every key is there (True) or `seconds` pass (False)."""
        try:
            self.store.wait([self.prefix + k for k in keys], timedelta(seconds=max(seconds, 0.01)))
        except STORE_ERRORS as exc:
            if "timeout" not in str(exc).lower():
                raise
            return False
        return True

    def arrive(self, topic: str, rank: int) -> None:
        """Say that this rank's `topic/<rank>` key is posted (after posting it)."""
        self.store.append(self.prefix + f"arrived/{topic}", f"{rank},")

    def arrivals(self, topic: str) -> set[int]:
        """The ranks that say they posted their `topic/<rank>` key so far: one round trip. Only a hint: what
        they posted is opened and checked like any value."""
        key = self.prefix + f"arrived/{topic}"
        if not self.store.check([key]):
            return set()
        ranks = self.store.get(key).decode(errors="replace").split(",")
        return {int(r) for r in ranks if r.strip().isascii() and r.strip().isdigit() and len(r) < 10}

    def claim(self, key: str, value: str) -> str | None:
        """Set `key` to `value` unless someone set it first; the value that stands (None if it is not this
        run's). Rank 0 and a node that gives up waiting race for the same slot, and exactly one of them wins."""
        standing = self.store.compare_set(self.prefix + key, "", self._seal(key, value))
        return self._open(key, standing)


CPP_LOG_ENV = "TORCH_CPP_LOG_LEVEL"


def quiet_store_class() -> Any:
    """torch's TCPStore, torch imported with its C++ log at FATAL unless the user set a level: a store that
    cannot be reached otherwise prints ~6 KB of C++ frames before gpudoctor's one line saying so. The level
    is read once, when torch loads; the variable is taken away again so workloads log as they would."""
    if CPP_LOG_ENV in os.environ or "torch" in sys.modules:
        from torch.distributed import TCPStore
    else:
        os.environ[CPP_LOG_ENV] = "FATAL"
        try:
            from torch.distributed import TCPStore
        finally:
            os.environ.pop(CPP_LOG_ENV, None)
    return TCPStore


def choose_credential(env: ClusterEnv, store: Any, wait_s: float, environ: Mapping[str, str]) -> cred.Credential:
    """The secret the launcher handed every node; else, under Slurm, the key rank 0 hands out through munge;
    else none (the run goes on unsealed and its report says so)."""
    given = cred.from_environment(environ)
    if given is not None:
        return given
    if env.launcher != "slurm" or not cred.munge_available(environ):
        return cred.NONE
    if env.leader:
        return cred.munge_lead(store, env.run_id, env.world_size, wait_s + 60, environ)
    return cred.munge_follow(store, env.run_id, env.rank, wait_s, environ)
