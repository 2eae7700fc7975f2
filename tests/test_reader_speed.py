"""Every kind of paste and every hostile shape of bench/readers.py is read at the rate docs/SECURITY.md
publishes (8 MB in under 10 s on 2 cores), and a paste that outlasts its time budget ends in one line.

The default run reads 512 KB of each hostile shape, against twice the published rate (a test shares the
machine with another worker); `-m slow` reads 8 MB of every case, each family of samples included, against
10 s. The figures themselves come from `python bench/readers.py` and are in docs/SECURITY.md."""

from __future__ import annotations

import contextlib
import importlib.util
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

from gpudoctor.facts.snapshot import SnapshotError
from gpudoctor.paste import inputs

BENCH = Path(__file__).resolve().parent.parent / "bench" / "readers.py"
PUBLISHED_S_PER_MB = 10 / 8


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_readers", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


READERS = bench()
HOSTILE = [pytest.param(*case, id=case[0]) for case in READERS.cases(set()) if case[0] in READERS.HOSTILE]
EVERY = [pytest.param(*case, id=case[0]) for case in READERS.cases(set())]


def read_for(text: str) -> float:
    """Seconds to read `text` as `check --from` reads a paste (without its time budget)."""
    data = text.encode()
    started = time.perf_counter()
    with contextlib.suppress(SnapshotError):  # nothing known in it: refused in one line, also a reading
        inputs.pasted_text("case.txt", data)
    return time.perf_counter() - started


@pytest.mark.parametrize("name, head, piece", HOSTILE)
def test_each_hostile_shape_is_read_at_the_published_rate(name: str, head: str, piece: str) -> None:
    size = 2**19
    took = read_for(READERS.built(head, piece, size))
    assert took < 2 * PUBLISHED_S_PER_MB * size / 2**20, f"{name}: {took:.2f} s for 512 KB"


@pytest.mark.slow
@pytest.mark.parametrize("name, head, piece", EVERY)
def test_8_mb_of_every_case_is_read_in_under_10_s(name: str, head: str, piece: str) -> None:
    took = read_for(READERS.built(head, piece, 8 * 2**20))
    assert took < 10, f"{name}: {took:.1f} s for 8 MB"


def test_a_paste_that_outlasts_its_budget_ends_in_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(inputs, "READ_SECONDS", 0.05)
    monkeypatch.setattr(inputs, "READ_SECONDS_PER_MB", 0.0)
    path = tmp_path / "huge.log"
    path.write_text(READERS.built("# nThread 1 nGpus 1\n", "#  size count\n", 2**21), encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(SnapshotError) as refused:
        inputs.load(path)
    assert time.perf_counter() - started < 2
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
    reader.join(10)
    assert len(said) == 1 and "reading it took longer than" in said[0]
