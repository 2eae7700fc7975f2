"""Every kind of paste and every hostile shape of bench/readers.py is read in linear time, and a paste that
outlasts its time budget ends in one line, the reading left behind.

Linear: the work on K times the input over the work on the input (tests/helpers/growth.py: CPU time, each size
the best of a few, in one run), under LINEAR; a quadratic reader grows K * K times. Each case is read at 128 KB
and 1 MB: a reader that keeps every conflicting value (collect_env's repeated blocks, 340 s for 8 MB before the
cap) grows 41 times there, 16 at 256 KB. The families of samples are marked `slow` (`-m 'not slow'` leaves them
out). The absolute rate (s/MB, 8 MB of every case) is `python bench/readers.py`'s, published
in docs/SECURITY.md: a figure of one machine, not a test."""

from __future__ import annotations

import contextlib
import importlib.util
import threading
from pathlib import Path
from types import ModuleType

import pytest
from helpers.growth import LINEAR, K, growth

from gpudoctor.facts.snapshot import SnapshotError
from gpudoctor.paste import inputs

BENCH = Path(__file__).resolve().parent.parent / "bench" / "readers.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_readers", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


READERS = bench()
HOSTILE = [pytest.param(*case, id=case[0]) for case in READERS.cases(set()) if case[0] in READERS.HOSTILE]
FAMILIES = [pytest.param(*case, id=case[0]) for case in READERS.cases(set()) if case[0] not in READERS.HOSTILE]
SIZE = 2**20


def read(text: str) -> None:
    """Read `text` as `check --from` reads a paste (without its time budget)."""
    with contextlib.suppress(SnapshotError):  # nothing known in it: refused in one line, also a reading
        inputs.pasted_text("case.txt", text.encode())


def grew(head: str, piece: str, tail: str) -> float:
    """How many times the work on SIZE characters of the case is the work on SIZE / K."""
    return growth(read, READERS.built(head, piece, SIZE // K, tail), READERS.built(head, piece, SIZE, tail))


def test_a_quadratic_reader_is_caught() -> None:
    """The control: a reader that looks back over every line before each one (as the repeated conflicting
    collect_env blocks did) grows past LINEAR, at sizes where it finishes; the same lines read once, not."""

    def looking_back(text: str) -> None:
        lines = text.split("\n")
        for at, line in enumerate(lines):
            line in lines[:at]  # noqa: B015 - the work is the point

    small, large = (READERS.built("", "x\n", size) for size in (2**16 // K // 4, 2**16 // 4))
    assert growth(looking_back, small, large) > LINEAR
    assert growth(lambda text: set(text.split("\n")), small, large) < LINEAR


@pytest.mark.parametrize("name, head, piece, tail", HOSTILE)
def test_each_hostile_shape_is_read_in_linear_time(name: str, head: str, piece: str, tail: str) -> None:
    times = grew(head, piece, tail)
    assert times < LINEAR, f"{name}: {times:.0f} times the work on {K} times the input"


@pytest.mark.slow  # the hostile shapes above are built to be slow; each family's own readers are tested on its samples
@pytest.mark.parametrize("name, head, piece, tail", FAMILIES)
def test_each_family_of_samples_is_read_in_linear_time(name: str, head: str, piece: str, tail: str) -> None:
    times = grew(head, piece, tail)
    assert times < LINEAR, f"{name}: {times:.0f} times the work on {K} times the input"


def test_a_paste_that_outlasts_its_budget_ends_in_one_line(tmp_path: Path, monkeypatch) -> None:
    """A reading held until `load` has answered: the budget ends it, not waited for, in the one line that names
    the budget."""
    monkeypatch.setattr(inputs, "READ_SECONDS", 0.05)
    monkeypatch.setattr(inputs, "READ_SECONDS_PER_MB", 0.0)
    held = threading.Event()
    monkeypatch.setattr(inputs, "pasted_text", lambda *args: held.wait(120))  # a hang's guard
    path = tmp_path / "huge.log"
    path.write_text("# nThread 1 nGpus 1\n#  size count\n", encoding="utf-8")
    try:
        with pytest.raises(SnapshotError) as refused:
            inputs.load(path)
    finally:
        held.set()
    message = str(refused.value)
    assert "\n" not in message and "huge.log: reading it took longer than 0 s" in message
    assert inputs.read_budget(8 * 2**20) == 0.05  # the budget the message names


def test_the_budget_grows_with_the_input_and_holds_in_any_thread(tmp_path: Path, monkeypatch) -> None:
    """The budget is 10 s and 1 s per MB; a library caller reading in its own thread is bounded too."""
    assert inputs.read_budget(0) == inputs.READ_SECONDS
    assert inputs.read_budget(64 * 2**20) == inputs.READ_SECONDS + 64 * inputs.READ_SECONDS_PER_MB
    monkeypatch.setattr(inputs, "READ_SECONDS", 0.05)
    monkeypatch.setattr(inputs, "READ_SECONDS_PER_MB", 0.0)
    path = tmp_path / "huge.log"
    path.write_text(READERS.built("# nThread 1 nGpus 1\n", "#  size count\n", 2**21), encoding="utf-8")
    said: list[str] = []

    def read() -> None:
        try:
            inputs.load(path)
        except SnapshotError as exc:
            said.append(str(exc))

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(120)  # a hang's guard: the budget ends the reading in 0.05 s
    assert len(said) == 1 and "reading it took longer than" in said[0]
