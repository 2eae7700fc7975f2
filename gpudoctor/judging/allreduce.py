"""All-reduce figures, judged (pure: no torch): the sizes swept, nccl-tests' bus bandwidth, the slowest rank's
time per size, and the verdict on the largest message. Shared by allreduce.bandwidth (one node) and
cluster.allreduce (every node at once)."""

from __future__ import annotations

from typing import Any

from gpudoctor.judging import expect
from gpudoctor.model import Metric, Remediation, Result, Status

MIB = 2**20
GPU_SIZES = [MIB * 4**k for k in range(6)]  # 1 MiB .. 1 GiB
CPU_SIZES = [64 * 1024 * 4**k for k in range(5)]  # 64 KiB .. 16 MiB


def bus_factor(world: int) -> float:
    """nccl-tests: an all-reduce moves 2(n-1)/n of the data over each rank's link."""
    return 2 * (world - 1) / world


def combine(per_rank: list[dict[str, Any]], world: int) -> list[dict[str, Any]]:
    """One row per size: the slowest rank's median (the collective ends when the last rank does)."""
    rows = []
    for i, first in enumerate(per_rank[0]["rows"]):
        size = first["bytes"]
        row = {"bytes": size, "wrong": sum(r["rows"][i]["wrong"] for r in per_rank)}
        for mode in ("in_place", "out_of_place"):
            if first[mode] is None:
                continue
            seconds = max(r["rows"][i][mode]["median_s"] for r in per_rank)
            algbw = size / seconds / 1e9
            row[mode] = {"time_us": seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(world)}
        rows.append(row)
    return rows


def size_metrics(row: dict[str, Any]) -> list[Metric]:
    """One message size's figures, the size and the operation as labels (one series each)."""
    metrics = []
    for op in ("in_place", "out_of_place"):
        if row.get(op):
            labels = {"bytes": row["bytes"], "op": op}
            metrics.append(Metric("busbw", round(row[op]["busbw_gbps"], 3), "GB/s", labels=labels))
            metrics.append(Metric("algbw", round(row[op]["algbw_gbps"], 3), "GB/s", labels=labels))
            metrics.append(Metric("time", round(row[op]["time_us"], 1), "us", labels=labels))
    return metrics


def nccl_metrics(nccl: dict[str, Any]) -> list[Metric]:
    """NCCL's version, and each NCCL_* variable set (container images set NCCL_VERSION, users NCCL_DEBUG...)
    as one `nccl_env` series with the variable as a label: metric names stay lower snake case and stable."""
    return [
        Metric(name, value) if name == "nccl_version" else Metric("nccl_env", value, labels={"variable": name})
        for name, value in nccl.items()
    ]


def judge(
    rows: list[dict[str, Any]],
    world: int,
    device: str,
    expected: expect.Expectation | None,
    floor: float,
    nccl: dict[str, Any],
) -> Result:
    """Verified first; then the largest message's in-place busbw against the expectation."""
    wrong = sum(r["wrong"] for r in rows)
    metrics = [m for r in rows[:-1] for m in size_metrics(r)] + nccl_metrics(nccl)
    if wrong:
        return Result(
            Status.FAIL,
            f"all-reduce returned {wrong} wrong values: the interconnect or a GPU corrupts data",
            basis="data",
            metrics=metrics + size_metrics(rows[-1]),
            remediation=Remediation(
                "Wrong sums with no error reported point at broken P2P (IOMMU/ACS), a failing link or GPU memory.",
                [
                    "sudo dmesg | grep -iE 'xid|iommu|dmar'",
                    "NCCL_P2P_DISABLE=1 gpudoctor check --only allreduce  # if this passes, P2P is the culprit",
                ],
            ),
        )
    if world < 2:  # one rank's all-reduce is a local copy or nothing: its "bandwidth" is no figure at all
        return Result(
            Status.PASS,
            f"1 rank ({'NCCL' if device == 'cuda' else 'gloo'}): every size verified; bandwidth not measured "
            "(no peer to exchange with)",
            metrics=nccl_metrics(nccl),
        )
    largest = rows[-1]["in_place"]
    size = f"{rows[-1]['bytes'] // MIB} MiB" if rows[-1]["bytes"] >= MIB else f"{rows[-1]['bytes'] // 1024} KiB"
    text = f"{world} ranks ({'NCCL' if device == 'cuda' else 'gloo'}), busbw {largest['busbw_gbps']:.2f} GB/s at {size}"
    status, metric = expect.verdict("busbw", largest["busbw_gbps"], "GB/s", expected, floor)
    metric.baseline = True
    metric.labels = {"bytes": rows[-1]["bytes"], "op": "in_place"}
    metrics[:0] = [metric, *size_metrics(rows[-1])[1:]]
    if expected is None:
        if device != "cuda":
            return Result(
                Status.PASS,
                f"{text}; verified; gloo over loopback measures "
                "the host, so bandwidth is judged only against a saved baseline",
                basis="figure",
                metrics=metrics,
            )
        return Result(
            Status.WARN,
            f"{text}; no expectation for this topology (unknown link): measured and verified only",
            basis="figure",
            metrics=metrics,
        )
    if status != Status.PASS:
        return Result(
            status,
            f"{world} ranks ({'NCCL' if device == 'cuda' else 'gloo'}), {metric.said(labels=False)} at {size}",
            basis="figure",
            metrics=metrics,
            remediation=Remediation(
                "Low bus bandwidth means a degraded link, disabled P2P or NVLink, or a wrong NCCL transport.",
                [
                    "nvidia-smi topo -m",
                    "nvidia-smi nvlink -s",
                    "NCCL_DEBUG=INFO gpudoctor check --only allreduce 2>&1 | grep -i 'via'",
                ],
            ),
        )
    return Result(
        status,
        f"{world} ranks ({'NCCL' if device == 'cuda' else 'gloo'}), {metric.said(labels=False)} at {size}",
        basis="figure",
        metrics=metrics,
    )
