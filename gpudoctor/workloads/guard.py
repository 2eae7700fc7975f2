"""Code gpudoctor runs in its own process and does not control (a check, a plugin's import) kept from ending
or stalling the run: `sys.exit`, `exit()` and `os._exit` become an error of that code, and a time limit
applies (the code goes on in a thread nobody waits for; the run does not). Work whose deadline must end it, not
only stop waiting for it (a pattern running in C holds the interpreter, so no timer in the same process can stop
it), runs in a forked child that is killed at its deadline (`in_child`)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import threading
import time
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


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def prctl(option: int, value: int) -> None:
    """Linux's prctl(2); elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def in_child(fn: Callable[[], Any], limit_s: float, what: str) -> Any:
    """`fn()` in a forked child: its value or its exception (pickled back through a pipe); TimedOut, the child
    killed, at `limit_s`, or at once where this process is interrupted. The child dies with this process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(fn, write_end)
    os.close(write_end)
    try:
        payload = _collect(read_end, time.monotonic() + limit_s, what, limit_s)
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    kind, value = pickle.loads(payload)  # our own child's answer
    if kind == "error":
        raise value
    return value


def _child(fn: Callable[[], Any], out: int) -> NoReturn:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    try:
        with no_exit():
            outcome: tuple[str, Any] = ("value", fn())
    except BaseException as exc:
        outcome = ("error", exc)
    try:
        payload = pickle.dumps(outcome)
    except Exception as exc:  # an answer that does not pickle: said as one line
        payload = pickle.dumps(("error", Stopped(f"its answer could not be handed back ({type(exc).__name__})")))
    with os.fdopen(out, "wb") as pipe:
        pipe.write(payload)
    os._exit(0)


def _collect(fd: int, deadline: float, what: str, limit_s: float) -> bytes:
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimedOut(f"{what} did not finish within its {limit_s:g} s limit (it was stopped)")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    if not chunks:
        raise Stopped(f"{what} ended without an answer (its process died)")
    return b"".join(chunks)
