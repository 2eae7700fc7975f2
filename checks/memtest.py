"""GPU memory test: fill a share of free memory with patterns, read them back, count the bad words.

Patterns: walking ones (one bit set, moving through all 32), seeded random (regenerated to verify), and
address-in-address (each word holds its own index, which catches aliased or misrouted addresses). The test
runs in checks/ranks/memtest.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.api import Metric, Remediation, Result, Status, Work, check, command, from_rows, gpu_row

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext


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
            rows.append(gpu_row(gpu, Status.FAIL, text, figures, "data"))
        else:
            text = f"{mib} MiB, {len(m['bad'])} patterns, no bad words"
            rows.append(gpu_row(gpu, Status.PASS, text, figures, "data"))
    return from_rows(
        rows,
        f"{len(rows)} GPUs: every pattern read back intact",
        Remediation(
            "Memory that does not hold its data corrupts training silently: drain the node, reset the GPU, check "
            "row remapping and ECC, and replace the GPU if errors recur.",
            [command("sudo nvidia-smi -i {gpu} -r"), command("nvidia-smi -q -d ROW_REMAPPER,ECC -i {gpu}")],
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
    work=Work(2, {"cuda": 1.5}),
)
def memtest(ctx: CheckContext) -> Result:
    """Write and verify walking-bit, seeded-random and address patterns over a share of free memory."""
    params = {
        "share": min(ctx.settings["share"] * ctx.work_factor, ctx.settings["full_share"]),
        "walking_bits": min(ctx.scaled(ctx.settings["walking_bits"], 1), 32),
        "seed": ctx.settings["seed"],
    }
    data = ctx.run_isolated("gpudoctor.checks.ranks.memtest:measure_memory", params)
    if failed := ctx.failed(data):
        return failed
    return judge(ctx.with_gpus(data["gpus"]))
