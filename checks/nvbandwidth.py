"""nvbandwidth's output (text and --json), read from a file by `gpudoctor check --from` (gpudoctor/paste/
nvbandwidth.py), judged: each GPU's host, GPU-to-GPU and local copies against the published healthy figure for
its model over its native link. A GPU the output does not name, or a model with no published figure, is said to
be unjudgeable. Pure judges of facts; nothing runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.api import Remediation, Result, Status, check, command, copies, expect, gpu_model, references
from gpudoctor.judging.bench import Judged, combine, judged

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext

# nvbandwidth's test cases and what they measure, as published figures name them.
NVBANDWIDTH = {
    "host_to_device_memcpy_ce": "h2d",
    "host_to_device_memcpy_sm": "h2d",
    "device_to_host_memcpy_ce": "d2h",
    "device_to_host_memcpy_sm": "d2h",
    "device_to_device_memcpy_read_ce": "p2p",
    "device_to_device_memcpy_write_ce": "p2p",
    "device_to_device_memcpy_read_sm": "p2p",
    "device_to_device_memcpy_write_sm": "p2p",
    "device_local_copy": "hbm",
}


@check(
    "bench.nvbandwidth",
    "nvbandwidth output against published healthy figures",
    needs=("benchmarks",),
)
def nvbandwidth(ctx: CheckContext) -> Result:
    """Each GPU's host copies, GPU-to-GPU copies and local copies in an nvbandwidth output, against the
    published figure for its model over its native link."""
    section = (ctx.facts.get("benchmarks") or {}).get("nvbandwidth") or {}
    cases = section.get("testcases") or []
    if not cases:
        return Result(Status.SKIP, "no nvbandwidth output in this file")
    devices = section.get("devices") or [{"index": g.get("index"), "name": g.get("name")} for g in ctx.gpus]
    rows = [row for case in cases for row in judge_case(case, devices)]
    return combine(rows, "figure") if rows else Result(Status.SKIP, "no nvbandwidth test case gpudoctor judges")


def judge_case(case: dict[str, Any], devices: list[dict[str, Any]]) -> list[Judged]:
    kind = NVBANDWIDTH.get(str(case.get("name")))
    if kind is None or (case.get("status") or "Passed").lower() not in ("passed", "pass"):
        return []
    cells = gpu_cells(case, kind)
    return [judge_figure(index, case["name"], kind, peer, value, devices) for index, peer, value in cells]


def gpu_cells(case: dict[str, Any], kind: str) -> list[tuple[int, int | None, float]]:
    """(GPU, peer, figure) per matrix cell: host copies are one row (CPU) by GPU columns, GPU-to-GPU copies a
    GPU by GPU matrix, local copies one row by GPU columns."""
    matrix = case.get("matrix") or []
    columns = case.get("columns") or []
    found = []
    for r, line in enumerate(matrix):
        for c, value in enumerate(line):
            if value is None or c >= len(columns):
                continue
            gpu = _index(columns[c])
            if kind == "p2p":
                src = _index((case.get("rows") or [])[r]) if r < len(case.get("rows") or []) else None
                if src is not None and gpu is not None and src != gpu:
                    found.append((src, gpu, float(value)))
            elif gpu is not None:
                found.append((gpu, None, float(value)))
    return found


def _index(label: Any) -> int | None:
    text = str(label).strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def judge_figure(
    index: int, case: str, kind: str, peer: int | None, value: float, devices: list[dict[str, Any]]
) -> Judged:
    device = next((d for d in devices if d.get("index") == index), {})
    model = gpu_model({"name": device.get("name")}) or {}
    where = f"-> GPU {peer} " if peer is not None else ""
    expected = cell_expectation(kind, model)
    figure = value * 2 if kind == "hbm" else value  # nvbandwidth counts one direction of a local copy
    status, metric = expect.verdict(kind, figure, "GB/s", expected, references.FAIL_BELOW)
    metric.labels = {"case": case, "gpu": index, **({"peer": peer} if peer is not None else {})}
    counted = " (read + write)" if kind == "hbm" else ""
    if expected is None:
        name = device.get("name") or "not named in the output"
        return judged(
            Status.SKIP,
            f"{where}{case}: {figure:.4g} GB/s{counted}; unjudgeable: the GPU ({name}) has no published figure",
            [metric],
            Remediation("The verdict needs the GPU model.", ["nvidia-smi -L  # add its output to the file"]),
            index,
        )
    text = f"{where}{case}{counted}: {metric.said(labels=False)}"
    if status == Status.PASS:
        return judged(status, text, [metric], index=index)
    return judged(
        status,
        text,
        [metric],
        Remediation(
            "A copy below healthy GPUs of its model: a PCIe link trained down (generation or width), host memory "
            "on the far socket, P2P off, or a degraded NVLink.",
            [command("nvidia-smi -q -d PCIE -i {gpu}"), "nvidia-smi topo -m", "nvidia-smi nvlink -s"],
        ),
        index,
    )


def cell_expectation(kind: str, model: dict[str, Any]) -> expect.Expectation | None:
    """The healthy figure for the model over its native link (the datasheet's PCIe generation, x16, or its
    NVLink-C2C, or all its NVLinks)."""
    if not model:
        return None
    if kind in ("h2d", "d2h"):
        gpu = {"name": model["names"][0], "pcie": {"max_gen": model.get("pcie_gen"), "max_width": 16}}
        return copies.pcie_copy_expectation(gpu, kind)
    if kind == "hbm":
        return expect.model_expectation({"name": model["names"][0]}, "hbm_gbps")
    found = references.healthy("p2p_gbps", model["model"], ("link",), link="nvlink")
    if found:
        return expect.Expectation(found.value, found.cite())
    return None
