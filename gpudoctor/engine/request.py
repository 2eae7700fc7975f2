"""A run as it was asked for: what the command line or the Python API said, before the config file is read.

The command line builds one from its options (cli.request_from), the Python API from keyword arguments
(probe.run), `baseline save` directly; planning (engine.planning) reads it and never changes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudoctor.errors import InputError


@dataclass(frozen=True)
class Request:
    """What to run and how; None or empty means "as the config file says, else the default".

    files: the report files asked for, as (option, path) pairs (("output", "r.json"), ("html", "r.html")):
    planning checks that each can be written before any check runs, and in cluster mode fills in `{node}`.
    cluster: run this node's part of a cluster run where the launcher's environment says it is one."""

    level: str | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    from_file: str | None = None  # a snapshot, a capture or a paste to judge instead of this machine
    live: bool = False  # with from_file naming a paste: judge this machine, running the checks it points to
    config: str | None = None
    checks_dirs: tuple[str, ...] = ()
    baseline: str | None = None
    strict: bool | None = None
    timeout: float | None = None
    budget: float | None = None  # --budget: the whole run ends within this many seconds (engine/budget.py)
    expect_gpus: int | None = None
    device: str | None = None
    cluster: bool = False
    files: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        """Lists, as argparse and Python callers pass them, are kept as tuples: a request cannot change. Numbers
        are in the range the config file holds them to (config.value_range), or an InputError."""
        from gpudoctor.config import out_of_range

        for name in ("only", "skip", "checks_dirs"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "files", tuple((option, path) for option, path in self.files))
        for name in ("timeout", "budget", "expect_gpus"):
            said = out_of_range(name, getattr(self, name)) if getattr(self, name) is not None else None
            if said:
                raise InputError(said)
