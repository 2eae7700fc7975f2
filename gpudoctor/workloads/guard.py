"""Code gpudoctor runs in its own process and does not control (a check, a plugin's import) kept from ending
or stalling the run: `sys.exit`, `exit()` and `os._exit` become an error of that code, and a time limit
applies (the code goes on in a thread nobody waits for; the run does not)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn


class Stopped(Exception):
    """The guarded code tried to end the process, or did not finish in time: one line saying which."""


class TimedOut(Stopped):
    pass


def _no_exit(code: Any = 0) -> NoReturn:
    raise Stopped(f"called os._exit({code!r}), which would have ended gpudoctor")


@contextlib.contextmanager
def no_exit() -> Iterator[None]:
    """While inside: os._exit raises Stopped; SystemExit (sys.exit, exit(), quit()) becomes Stopped."""
    real = os._exit
    os._exit = _no_exit  # type: ignore[assignment]
    try:
        yield
    except SystemExit as exc:
        raise Stopped(f"called sys.exit({exc.code!r}), which would have ended gpudoctor") from None
    finally:
        os._exit = real


def call(fn: Callable[[], Any], limit_s: float, what: str) -> Any:
    """`fn()` under no_exit, given `limit_s` seconds: its value or its exception; TimedOut past the limit."""
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            with no_exit():
                outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread, which decides
            outcome["error"] = exc

    worker = threading.Thread(target=body, name=f"gpudoctor {what}", daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        raise TimedOut(f"{what} did not finish within its {limit_s:g} s limit (it is left running, not waited for)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
