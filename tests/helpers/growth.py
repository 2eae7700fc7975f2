"""Linear time, tested so that a busy machine cannot fail it: the work on an input K times larger, over the work on
the smaller one, in one run. Linear reading grows about K times, quadratic K*K times; LINEAR bounds the growth
between them. Work is the CPU time of the thread that reads (time.thread_time), not the wall clock: a machine at
load 15 slows the wall clock of both sizes, unevenly, but hardly the CPU time either takes, and a thread another
test left running is not counted. Each size is the best of REPEATS, measured in turn after a warm-up, each
measurement as many calls as make it measurable (timeit's way). Absolute speeds belong in bench/ (bench/readers.py's
s/MB are in docs/SECURITY.md)."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

K = 8  # the larger input is K times the smaller
LINEAR = 3 * K  # the most a linear reader may grow over K times the input (quadratic: K * K = 64)
REPEATS = 5
MEASURABLE_S = 0.0002  # CPU seconds one measurement of the smaller input lasts at the least
STEADY_REPEATS = 3  # where one call on the smaller input takes 100 times that: a burst of noise is a small part of it
TRIES = 3  # a growth past LINEAR is measured again, this many times in all: steep reading is steep every time


def cpu_seconds(read: Callable[[T], object], given: T, calls: int = 1) -> float:
    """CPU seconds of `calls` calls of read(given), without the garbage collector's pauses."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        started = time.thread_time()
        for _ in range(calls):
            read(given)
        return time.thread_time() - started
    finally:
        if was_enabled:
            gc.enable()


def growth(read: Callable[[T], object], small: T, large: T, repeats: int = REPEATS) -> float:
    """How many times the work on `large` is the work on `small` (each the best of `repeats` measurements taken in
    turn: a burst of another process's work on the same core slows one pair, not one size), confirmed."""
    return confirmed(lambda: _growth(read, small, large, repeats))


def _growth(read: Callable[[T], object], small: T, large: T, repeats: int) -> float:
    read(small)  # the first call also compiles, caches and imports: not counted
    once = cpu_seconds(read, small)
    calls = max(1, math.ceil(MEASURABLE_S / max(once, 1e-7)))
    repeats = min(repeats, STEADY_REPEATS) if once > 100 * MEASURABLE_S else repeats
    return growth_of(lambda given: cpu_seconds(read, given, calls), small, large, repeats)


def confirmed(measure: Callable[[], float]) -> float:
    """The least of up to TRIES growths, measured again only while past LINEAR. On a shared virtual machine the
    host can take the CPU from the guest mid-measurement and the guest still counts that time to the thread, in every
    repeat of one burst (a clean clone's CI run saw a linear search grow 58 times, 8 times on the next run): noise
    passes, a quadratic reader grows K*K times on every try."""
    least = measure()
    for _ in range(TRIES - 1):
        if least < LINEAR:
            break
        least = min(least, measure())
    return least


def growth_of(measure: Callable[[T], float], small: T, large: T, repeats: int = STEADY_REPEATS) -> float:
    """The same for work another process does and measures (a browser's renderer): `measure` gives the CPU seconds
    of the work on an input, the first time only to warm up."""
    measure(small)
    pairs = [(measure(small), measure(large)) for _ in range(repeats)]
    return min(took for _, took in pairs) / max(min(took for took, _ in pairs), 1e-9)
