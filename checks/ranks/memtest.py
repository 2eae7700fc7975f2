"""In memory.test's isolated process (or on its ranks, through the launch layer): patterns written over a
share of every GPU's free memory and read back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gpudoctor.api import RankContext, measure, progress

CHUNK_WORDS = 64 * 2**20  # 256 MiB of int32 per pattern chunk


def patterns(walking_bits: int, seed: int) -> list[tuple[str, Callable[[int, int, Any], Any]]]:
    """(name, fill(start, count, device) -> int32 tensor) for each pattern; fills are deterministic."""

    def constant(value: int) -> Callable[[int, int, Any], Any]:
        return lambda start, count, device: torch.full((count,), value, dtype=torch.int32, device=device)

    def random(start: int, count: int, device: Any) -> Any:
        gen = torch.Generator(device=device).manual_seed(seed + start)
        return torch.randint(-(2**31), 2**31 - 1, (count,), generator=gen, dtype=torch.int32, device=device)

    def address(start: int, count: int, device: Any) -> Any:
        return torch.arange(start, start + count, dtype=torch.int64, device=device).to(torch.int32)

    step = max(1, 32 // walking_bits)
    walking = [(f"walking bit {b}", constant(-(2**31) if b == 31 else 1 << b)) for b in range(0, 32, step)]
    return [*walking, ("seeded random", random), ("address in address", address)]


def test_device(
    device: Any,
    words: int,
    walking_bits: int,
    seed: int,
    on_phase: Callable[[str], None] = lambda name: None,
    tamper: Callable[[Any, str], None] = lambda buffer, name: None,
) -> dict[str, Any]:
    """Write and verify every pattern over `words` int32 words on `device`; bad words per pattern.

    `tamper` runs between writing and verifying (a test hook that flips bits, as failing memory would).
    """
    buffer = torch.empty(words, dtype=torch.int32, device=device)
    bad: dict[str, int] = {}
    for name, fill in patterns(walking_bits, seed):
        on_phase(f"write {name}")
        for start in range(0, words, CHUNK_WORDS):
            count = min(CHUNK_WORDS, words - start)
            buffer[start : start + count] = fill(start, count, device)
        tamper(buffer, name)
        on_phase(f"verify {name}")
        wrong = 0
        for start in range(0, words, CHUNK_WORDS):
            count = min(CHUNK_WORDS, words - start)
            wrong += int((buffer[start : start + count] != fill(start, count, device)).sum())
        bad[name] = wrong
    del buffer
    return {"words": words, "bad": bad}


def measure_memory(params: dict[str, Any]) -> dict[str, Any]:
    """In the isolated child: every GPU, a share of its free memory."""
    results = []
    for index in range(measure.cuda_devices()):
        free, _ = torch.cuda.mem_get_info(index)
        words = int(free * params["share"]) // 4
        outcome = test_device(
            torch.device("cuda", index),
            words,
            params["walking_bits"],
            params["seed"],
            lambda phase, i=index: progress("memtest", f"GPU {i} {phase}"),
        )
        results.append({"cuda_index": index, **outcome})
    return {"gpus": results}


def worker(ctx: RankContext) -> dict[str, Any]:
    """The same test through the launch layer (one rank per device); a `corrupt` fault flips a bit."""

    def flip_one_bit(buffer: Any, name: str) -> None:
        if name == "address in address" and ctx.fault_here("verify", "corrupt"):
            buffer[buffer.numel() // 2] ^= 1 << 7

    p = ctx.params
    return test_device(ctx.device, p["words"], p["walking_bits"], p["seed"], ctx.phase, flip_one_bit)
