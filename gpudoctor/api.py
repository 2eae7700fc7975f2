"""The check-author API: everything a check module imports, from one place.

    from gpudoctor.api import CheckContext, Result, Status, check

    @check("site.gpu-model", "Every GPU is the site's model", needs=("nvml",), settings={"model": "H100"})
    def gpu_model(ctx: CheckContext) -> Result:
        \"\"\"Every GPU's name contains the configured model.\"\"\"
        wrong = [g for g in ctx.gpus if ctx.settings["model"] not in (g.get("name") or "")]
        return Result(Status.FAIL if wrong else Status.PASS, f"{len(wrong)} GPUs of another model")

- Declare: `check` (id, title, level, needs: the fact sources and conditions it cannot run without, uses:
  sources it reads when present, min_gpus, timeout_s, settings with defaults).
- Read facts: `ctx.gpus` (usable GPUs), `ctx.nvml`, `ctx.torch`, `ctx.system`, `ctx.kernel_log`, `ctx.env`,
  `ctx.devices` (torch's numbering), `ctx.settings`; `ctx.baseline(figure)` for a saved figure.
- Run workloads: `ctx.run_isolated(target, payload)` (one process session) and `ctx.launch(worker, params)`
  (one rank per GPU through torch.distributed; the worker gets a `RankContext`). Each returns the data, or
  the `Result` that says how it hung or failed; both run under the check's timeout and leave no process.
- Judge a figure against a reference with the noise allowance measured in the same run: `compare`.
- Return `Result`s (or `from_rows` of per-GPU `gpu_row`s); the engine stamps the check id and title.
  Checks never print.
"""

from __future__ import annotations

from gpudoctor.context import CheckContext
from gpudoctor.facts.identity import gpu_for_cuda_index, pci_address, same_pci
from gpudoctor.facts.nvml import usable
from gpudoctor.facts.schema import FACT_NAMES, GpuFacts, not_captured
from gpudoctor.judging import compare, compat, expect, references, visible
from gpudoctor.judging.hardware import cuda_version_text, gpu_model, is_geforce, load_data
from gpudoctor.model import SEVERITY, Metric, Remediation, Result, Row, Status, from_rows, gpu_label, gpu_row, worst
from gpudoctor.registry import check
from gpudoctor.workloads import measure
from gpudoctor.workloads.isolate import progress
from gpudoctor.workloads.launch import RankContext, init_rank

__all__ = [
    "FACT_NAMES",
    "SEVERITY",
    "CheckContext",
    "GpuFacts",
    "Metric",
    "RankContext",
    "Remediation",
    "Result",
    "Row",
    "Status",
    "check",
    "compare",
    "compat",
    "cuda_version_text",
    "expect",
    "from_rows",
    "gpu_for_cuda_index",
    "gpu_label",
    "gpu_model",
    "gpu_row",
    "init_rank",
    "is_geforce",
    "load_data",
    "measure",
    "not_captured",
    "pci_address",
    "progress",
    "references",
    "same_pci",
    "usable",
    "visible",
    "worst",
]
