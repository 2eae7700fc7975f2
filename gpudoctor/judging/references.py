"""Healthy figures published for each GPU model (gpudoctor/data/references.toml, each with its source, date and
conditions), and the one rule that turns a healthy figure into a verdict.

The rule, for every figure gpudoctor judges against a published one (docs/REFERENCES.md says why):
- pass at or above PASS_AT (0.85) of the healthy figure: published healthy runs of one model under one set of
  conditions agree within about 2% at their peak (8x H100 NVLS all-reduce 470.7, 478.9, 480 GB/s; 8x A100 Ring
  230.8, 231.6, 235.3), and the same healthy runs read 0.89-0.95 of their peak at 256 MiB (419.5 of 470.7,
  222.4 of 235.3: tests/fixtures/benchmarks/nccl-tests), so a healthy node measured at smaller sizes, or with
  an older NCCL, still passes;
- fail below the check's `floor` (0.75 by default) of it: NVIDIA's own diagnostic (DCGM, nvvs/diag-skus.yaml.in)
  fails each SKU below 0.75 of what its profiler measured there;
- between the two, a warning: slower than healthy nodes of the model, not slow enough to call broken.

Where no measurement of the model under the conditions is published, the healthy figure is derived from the
datasheet times the lowest ratio of measured to datasheet figures of the models that have both, and said so."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from gpudoctor.judging.hardware import hardware, load_data

PASS_AT = 0.85
FAIL_BELOW = 0.75

# How much a published figure counts, best first: a run published with its conditions, then what the
# vendor's own people state, a cloud's expected figure, one derived by its source from a run, the figure DCGM's
# profiler measured for the SKU, a bare statement, a crowd-contributed run. Health-check floors are never a
# healthy figure.
KINDS = ("measured", "maintainer_statement", "vendor_baseline", "derived", "dcgm_profiler", "statement", "community")
CONDITIONS = ("gpus", "nodes", "algo", "link", "mesh", "nics", "nic_gbits")


@dataclass(frozen=True)
class Healthy:
    """A figure a healthy system of this model reaches, and where that was published."""

    value: float
    unit: str
    model: str
    kind: str
    source: str
    date: str
    conditions: str
    stated: frozenset[str] = frozenset()  # which of CONDITIONS the published row states
    gpus: int | None = None  # the size of the published run

    def cite(self) -> str:
        """`model, conditions: source, date`: what the report says beside the figure."""
        said = f"{self.model}, {self.conditions}" if self.conditions else self.model
        return f"{said}: {self.source}{f', {self.date}' if self.date else ''}"


def rows() -> list[dict[str, Any]]:
    return load_data("references.toml").get("reference", [])


def kind_of(row: dict[str, Any]) -> str:
    return str(row.get("kind") or "measured")


def healthy(figure: str, model: str | None, require: tuple[str, ...] = (), **conditions: Any) -> Healthy | None:
    """The published healthy figure for `model`'s `figure` under `conditions` (gpus, nodes, algo, link, mesh,
    nics, nic_gbits; None means any): rows stating a different condition are out, and so are rows that do not
    state each condition in `require` (a figure for "8 GPUs" is no figure for any count); of the rest, those
    stating the most of the conditions asked, then the best kind, then the median of their values."""
    if not model:
        return None
    fits = [
        r
        for r in rows()
        if usable(r)
        and r.get("figure") == figure
        and r.get("model") == model
        and all(key in r for key in require)
        and all(_agrees(r, k, v) for k, v in conditions.items())
    ]
    if not fits:
        return None
    stated = max(_stated(r, conditions) for r in fits)
    return _healthy(best([r for r in fits if _stated(r, conditions) == stated]))


def per_nic() -> Healthy | None:
    """What one 400 Gb/s NIC carries of a healthy all-reduce between nodes, for any GPU (nccl-tests' maintainers
    state it for ConnectX-7 at NDR): the best-kind published figure, median of its kind."""
    found = [r for r in rows() if usable(r) and r.get("figure") == "nic_busbw_per_400g" and "model" not in r]
    found = [r for r in found if r.get("nic_gbits") == 400] or found  # stated for 400G NICs, not scaled to them
    if not found:
        return None
    row = best(found)
    return _healthy(row, "any GPU", "per 400 Gb/s NIC, " + kind_of(row).replace("_", " "))


def one_gpu_per_node() -> Healthy | None:
    """What one NIC carries one way when each node sends from one GPU through one NIC (cluster.links' one rank
    per node): a published two-node run of that shape at 400 Gb/s, lower than the per-NIC figure of full nodes
    (31.9 against 48.5 GB/s), so a full node's figure would fail a healthy link."""
    found = [r for r in rows() if usable(r) and r.get("figure") == "nic_busbw_one_gpu_per_node"]
    return _healthy(best(found), "one GPU and one NIC per node") if found else None


def usable(row: dict[str, Any]) -> bool:
    """A published figure of healthy hardware: a health check's floor is not one, nor a run marked unhealthy."""
    return kind_of(row) in KINDS and row.get("healthy", True)


def best(found: list[dict[str, Any]]) -> dict[str, Any]:
    """Of several published figures, the best kind's, and of those the median (the lower of two middles)."""
    rank = min(KINDS.index(kind_of(r)) for r in found)
    ranked = sorted((r for r in found if KINDS.index(kind_of(r)) == rank), key=lambda r: float(r["value"]))
    return ranked[(len(ranked) - 1) // 2]


def _agrees(row: dict[str, Any], key: str, wanted: Any) -> bool:
    return wanted is None or key not in row or row[key] == wanted


def _stated(row: dict[str, Any], conditions: dict[str, Any]) -> int:
    return sum(1 for k, v in conditions.items() if v is not None and row.get(k) == v)


def _healthy(row: dict[str, Any], model: str | None = None, conditions: str | None = None) -> Healthy:
    return Healthy(
        float(row["value"]),
        str(row.get("unit", "")),
        model or str(row["model"]),
        kind_of(row),
        str(row.get("source", "")),
        str(row.get("date", "")),
        _conditions(row) if conditions is None else conditions,
        frozenset(k for k in CONDITIONS if k in row),
        int(row["gpus"]) if row.get("gpus") else None,
    )


def states(found: Healthy, *keys: str) -> bool:
    """The published figure states every one of `keys`."""
    return all(k in found.stated for k in keys)


def _conditions(row: dict[str, Any]) -> str:
    """The conditions that matter for judging, in few words: "8 GPUs, NVLS, at 8 GiB"."""
    parts = []
    if row.get("nodes", 1) and row.get("nodes", 1) > 1:
        parts.append(f"{row['nodes']} nodes")
    if row.get("gpus"):
        parts.append(f"{row['gpus']} GPUs")
    if row.get("algo"):
        parts.append(str(row["algo"]).upper() if row["algo"] != "ring" else "Ring")
    if row.get("link"):
        parts.append(str(row["link"]))
    if row.get("bytes"):
        parts.append(f"at {size_text(int(row['bytes']))}")
    if kind_of(row) != "measured":
        parts.append(kind_of(row).replace("_", " "))
    return ", ".join(parts)


def size_text(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


# A figure gpudoctor measures, the datasheet key it relates to (hardware.toml), and the reference figure.
DATASHEET = {
    "matmul_bf16_tflops": "bf16_tflops",
    "matmul_tf32_tflops": "tf32_tflops",
    "matmul_fp16_tflops": "fp16_tflops",
    "hbm_gbps": "hbm_gbps",
}


@cache
def datasheet_ratio(figure: str) -> tuple[float, str] | None:
    """The lowest (published healthy figure / datasheet figure) over every model that has both, and whose: what
    a healthy GPU reaches of its datasheet at the least. A figure derived from a datasheet must not fail a healthy
    GPU whose datasheet overstates it (power-limited PCIe boards reach 0.59-0.67 of their bf16 datasheet), and
    still fails one at a third of its speed."""
    key = DATASHEET.get(figure)
    if key is None:
        return None
    ratios = []
    for model in hardware()["gpu"]:
        found = healthy(figure, model["model"]) if model.get(key) else None
        if found is not None:
            ratios.append((found.value / float(model[key]), model["model"]))
    if not ratios:
        return None
    ratio, lowest = min(ratios)
    said = f"the lowest measured/datasheet ratio of {len(ratios)} models in references.toml ({lowest}'s {ratio:.2f})"
    return ratio, said


def from_datasheet(figure: str, model: dict[str, Any]) -> Healthy | None:
    """A healthy figure derived from the datasheet where none is published for the model: datasheet x the
    measured ratio of the models that have both; said so."""
    key, ratio = DATASHEET.get(figure), datasheet_ratio(figure)
    if key is None or ratio is None or not model.get(key):
        return None
    value = float(model[key]) * ratio[0]
    source = f"no published measurement: {model['source']} {model[key]:g} x {ratio[1]}"
    return Healthy(value, "", model["model"], "datasheet", source, "", "derived from the datasheet")


def model_figure(figure: str, model: dict[str, Any] | None, **conditions: Any) -> Healthy | None:
    """The published healthy figure for the model, else one derived from its datasheet."""
    if model is None:
        return None
    return healthy(figure, model["model"], **conditions) or from_datasheet(figure, model)


# A figure measured under sustained load, and the burst figure of the same work (a few seconds, before the GPU
# settles under its power limit) it is derived from where no sustained one is published for the model.
SUSTAINED = {"matmul_bf16_tflops_sustained": "matmul_bf16_tflops"}


@cache
def sustained_ratio(figure: str) -> tuple[float, str] | None:
    """The lowest (published sustained figure / published burst figure) over the models that have both: what a
    healthy GPU keeps of its burst speed once every GPU has run for a minute, at the least."""
    burst = SUSTAINED[figure]
    ratios = []
    models = {str(r["model"]) for r in rows() if r.get("figure") == figure and usable(r) and r.get("model")}
    for model in sorted(models):
        held, short = healthy(figure, model), healthy(burst, model)
        if held is not None and short is not None:
            ratios.append((held.value / short.value, model))
    if not ratios:
        return None
    ratio, lowest = min(ratios)
    said = f"the lowest sustained/burst ratio of {len(ratios)} models in references.toml ({lowest}'s {ratio:.2f})"
    return ratio, said


def sustained_figure(figure: str, model: dict[str, Any] | None) -> Healthy | None:
    """The published sustained figure for the model, else its burst figure x the lowest sustained/burst ratio
    measured on the models that have both (said so): never the burst figure itself, which a healthy GPU under
    sustained load does not hold."""
    if model is None:
        return None
    found = healthy(figure, model["model"])
    ratio, burst = sustained_ratio(figure), model_figure(SUSTAINED[figure], model)
    if found is not None or ratio is None or burst is None:
        return found
    source = f"no published sustained measurement: {burst.cite()} x {ratio[1]}"
    return Healthy(burst.value * ratio[0], burst.unit, model["model"], "derived", source, "", "sustained, derived")


@cache
def theory_ratio(
    figure: str, theory: Callable[[dict[str, Any], dict[str, Any]], float | None], **conditions: Any
) -> tuple[float, str] | None:
    """The median of (published healthy figure / its link's theoretical rate) over the rows of `figure` that
    meet `conditions` and whose model's theory is known: what a healthy link carries of its line rate."""
    models = {m["model"]: m for m in hardware()["gpu"]}
    ratios = []
    for row in rows():
        if not usable(row) or row.get("figure") != figure or row.get("model") not in models:
            continue
        if any(row.get(k) != v for k, v in conditions.items()):
            continue
        rate = theory(row, models[row["model"]])
        if rate:
            ratios.append(float(row["value"]) / rate)
    if not ratios:
        return None
    ratio = statistics.median(ratios)
    return ratio, f"the median of {len(ratios)} published {figure} figures over their line rate ({ratio:.2f})"


def lines(reference: float, floor: float = FAIL_BELOW) -> tuple[float, float]:
    """(pass line, fail line) for a healthy figure: PASS_AT and the check's floor of it (the pass line never
    below the floor)."""
    return reference * max(PASS_AT, floor), reference * floor
