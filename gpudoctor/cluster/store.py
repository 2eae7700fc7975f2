"""The cluster's key-value store: torch.distributed's TCPStore under this run's prefix, JSON values.

Waiting costs the store almost nothing, whatever the node count: a node waiting for a key rank 0 posts holds
one blocking `wait` on it (at most a heartbeat long, then it looks whether rank 0 still beats); rank 0
waiting for a key from every node holds one blocking `wait` on all the missing keys, and when that times out
reads one arrival list (each node appends its rank to it after posting) and fetches what arrived with one
`multi_get`. No wait reads N keys in a loop.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from gpudoctor.cluster.env import ClusterEnv

STORE_ERRORS = (RuntimeError, OSError)  # the store went away: its server (rank 0, or the agent) ended


class Control:
    """The store under one run's prefix; every wait has a limit."""

    def __init__(self, store: Any, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    @classmethod
    def connect(cls, env: ClusterEnv, connect_s: float) -> Control:
        """torchrun's agent store where the agent serves one, else the store rank 0 serves."""
        from torch.distributed import TCPStore

        serve = env.leader and not env.agent_store
        store = TCPStore(
            env.master_addr,
            env.master_port,
            None,
            serve,
            timedelta(seconds=connect_s),
            wait_for_workers=False,
            multi_tenant=serve,
        )
        return cls(store, f"gpudoctor/{env.run_id}/")

    def clone(self) -> Control:
        """A second connection, for a thread of its own (a connection serves one request at a time)."""
        return Control(self.store.clone(), self.prefix)

    def post(self, key: str, value: Any) -> None:
        self.store.set(self.prefix + key, json.dumps(value))

    def post_many(self, values: dict[str, Any]) -> None:
        """Several keys in one round trip."""
        if values:
            self.store.multi_set([self.prefix + k for k in values], [json.dumps(v) for v in values.values()])

    def present(self, key: str) -> bool:
        return bool(self.store.check([self.prefix + key]))

    def read(self, key: str) -> Any | None:
        """The value, or None while nobody has posted it."""
        return self.fetch([key])[0] if self.present(key) else None

    def fetch(self, keys: list[str]) -> list[Any]:
        """Keys known to be there, in one round trip."""
        return [json.loads(v) for v in self.store.multi_get([self.prefix + k for k in keys])] if keys else []

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
        """The ranks that posted their `topic/<rank>` key so far: one round trip."""
        key = self.prefix + f"arrived/{topic}"
        if not self.store.check([key]):
            return set()
        return {int(r) for r in self.store.get(key).decode().split(",") if r}

    def claim(self, key: str, value: str) -> str:
        """Set `key` to `value` unless someone set it first; the value that stands. Rank 0 and a node that
        gives up waiting race for the same slot, and exactly one of them wins."""
        return self.store.compare_set(self.prefix + key, "", value).decode()
