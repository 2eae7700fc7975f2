"""A deadline that ends the work: a paste is read in a forked child killed at its budget, so a pattern running in C
(which holds the interpreter: no timer in the same process can stop it) ends with one line, and SIGTERM ends the
command at once; no child is left either way."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gpudoctor.workloads import guard


def backtrack(*_: object) -> None:
    """A pattern that backtracks exponentially (nested unbounded repeats) on a line that almost matches: it would
    run for longer than the universe has existed, all of it inside the regex engine's C code."""
    re.match(r"(a+)+$", "a" * 64 + "b")


def test_a_pattern_stuck_in_c_is_stopped_at_its_deadline(no_leftovers) -> None:
    with pytest.raises(guard.TimedOut, match=r"did not finish within its 0\.5 s limit"):
        guard.in_child(backtrack, 0.5, "reading x")


def test_the_childs_answer_and_its_exception_come_back(no_leftovers) -> None:
    assert guard.in_child(lambda: {"facts": [1, "two"]}, 30, "reading x") == {"facts": [1, "two"]}
    with pytest.raises(ValueError, match=r"bad paste"):
        guard.in_child(lambda: (_ for _ in ()).throw(ValueError("bad paste")), 30, "reading x")
    with pytest.raises(guard.Stopped, match=r"os\._exit"):
        guard.in_child(lambda: os._exit(3), 30, "reading x")


def test_a_child_that_dies_is_one_line(no_leftovers) -> None:
    with pytest.raises(guard.Stopped, match="ended without an answer"):
        guard.in_child(lambda: os.kill(os.getpid(), signal.SIGKILL), 30, "reading x")


SIGTERMED = """
import re, signal, sys
from gpudoctor import cli
from gpudoctor.workloads import guard
signal.signal(signal.SIGTERM, cli._interrupt)
print("reading", flush=True)
try:
    guard.in_child(lambda: re.match(r'(a+)+$', 'a' * 64 + 'b'), 3600, "reading x")
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_sigterm_ends_a_reading_at_once_and_its_child_with_it() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SIGTERMED], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "reading\n"
    children = _children_soon(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 130  # a guard against a hang, not a timing: before, only SIGKILL ended it
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def _children_soon(pid: int) -> list[psutil.Process]:
    for _ in range(200):
        found = psutil.Process(pid).children()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("the reading child never started")


def test_a_paste_past_its_budget_is_one_line(tmp_path, monkeypatch, no_leftovers) -> None:
    from gpudoctor import paste
    from gpudoctor.facts.snapshot import SnapshotError
    from gpudoctor.paste import inputs

    monkeypatch.setattr(inputs, "READ_SECONDS", 0.5)
    monkeypatch.setattr(paste, "read", backtrack)
    path = tmp_path / "slow.txt"
    path.write_text("RuntimeError: CUDA error: out of memory\n")
    with pytest.raises(SnapshotError, match=r"reading it took longer than 1 s"):
        inputs.load(path)
