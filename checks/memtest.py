"""GPU memory test: fill a share of free memory with patterns, read them back, count the bad words.

Patterns: walking ones (one bit set, moving through all 32), seeded random (regenerated to verify), and
address-in-address (each word holds its own index, which catches aliased or misrouted addresses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpudoctor.api import CheckContext, Metric, RankContext, Remediation, Result, Status, check, from_rows, gpu_row

CHUNK_WORDS = 64 * 2**20  # 256 MiB of int32 per pattern chunk


def patterns(walking_bits: int, seed: int) -> list[tuple[str, Callable[[int, int, Any], Any]]]:
    """(name, fill(start, count, device) -> int32 tensor) for each pattern; fills are deterministic."""
    import torch

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
    import torch

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
    import torch

    from gpudoctor.api import measure, progress

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


def judge(measured: list[tuple[dict[str, Any], dict[str, Any]]]) -> Result:
    """Each GPU's (measurement, facts) pair: any bad word fails that GPU."""
    rows = []
    for m, gpu in measured:
        bad = {name: n for name, n in m["bad"].items() if n}
        mib = m["words"] * 4 // 2**20
        figures = [Metric("bad_words", n, labels={"pattern": name}) for name, n in m["bad"].items()]
        figures.append(Metric("tested_memory", mib, "MiB"))
        if bad:
            text = f"{sum(bad.values())} bad words in {mib} MiB ({', '.join(f'{k}: {v}' for k, v in bad.items())})"
            rows.append(gpu_row(gpu, Status.FAIL, text, figures))
        else:
            rows.append(gpu_row(gpu, Status.PASS, f"{mib} MiB, {len(m['bad'])} patterns, no bad words", figures))
    return from_rows(
        rows,
        f"{len(rows)} GPUs: every pattern read back intact",
        Remediation(
            "Memory that does not hold its data corrupts training silently: drain the node, reset the GPU, check "
            "row remapping and ECC, and replace the GPU if errors recur.",
            ["sudo nvidia-smi -i <GPU> -r", "nvidia-smi -q -d ROW_REMAPPER,ECC -i <GPU>"],
        ),
        [Metric("bad_words_total", sum(sum(m["bad"].values()) for m, _ in measured))],
    )


@check(
    "memory.test",
    "GPU memory test",
    level="standard",
    needs=("gpu", "live", "torch"),
    timeout_s=300,
    settings={"share": 0.25, "full_share": 0.8, "walking_bits": 4, "seed": 1234},
)
def memtest(ctx: CheckContext) -> Result:
    """Write and verify walking-bit, seeded-random and address patterns over a share of free memory."""
    params = {
        "share": min(ctx.settings["share"] * ctx.work_factor, ctx.settings["full_share"]),
        "walking_bits": min(ctx.settings["walking_bits"] * ctx.work_factor, 32),
        "seed": ctx.settings["seed"],
    }
    data = ctx.run_isolated("gpudoctor.checks.memtest:measure_memory", params)
    if isinstance(data, Result):
        return data
    return judge(ctx.with_gpus(data["gpus"]))
