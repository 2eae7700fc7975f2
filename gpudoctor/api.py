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

Each name loads its module when a check module first asks for it (PEP 562), so `gpudoctor list`, which imports
every check module to read its declaration, loads neither the engine nor the workload machinery: a check module
names `CheckContext` under `if TYPE_CHECKING:` (its annotations are never evaluated), and the rest it names are
the declaration, the result vocabulary and the pure judges.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudoctor.command import Command, command
    from gpudoctor.context import CheckContext
    from gpudoctor.facts.identity import gpu_for_cuda_index, pci_address, same_pci
    from gpudoctor.facts.nvml import usable
    from gpudoctor.facts.schema import FACT_NAMES, GpuFacts, not_captured
    from gpudoctor.judging import compare, compat, copies, expect, nics, references, routes, visible
    from gpudoctor.judging.commands import Unsafe, fix, word
    from gpudoctor.judging.hardware import cuda_version_text, gpu_model, is_geforce, load_data
    from gpudoctor.model import (
        SEVERITY,
        Metric,
        Remediation,
        Result,
        Row,
        Status,
        aimed,
        bad_summary,
        from_rows,
        gpu_label,
        gpu_row,
        places,
        worst,
    )
    from gpudoctor.registry import Work, check
    from gpudoctor.workloads import measure
    from gpudoctor.workloads.isolate import progress
    from gpudoctor.workloads.launch import RankContext, init_rank

# Where each name lives: a module (for a name that is one) or the module that defines it.
PROVIDERS = {
    "Command": "gpudoctor.command",
    "command": "gpudoctor.command",
    "CheckContext": "gpudoctor.context",
    "gpu_for_cuda_index": "gpudoctor.facts.identity",
    "pci_address": "gpudoctor.facts.identity",
    "same_pci": "gpudoctor.facts.identity",
    "usable": "gpudoctor.facts.nvml",
    "FACT_NAMES": "gpudoctor.facts.schema",
    "GpuFacts": "gpudoctor.facts.schema",
    "not_captured": "gpudoctor.facts.schema",
    "Unsafe": "gpudoctor.judging.commands",
    "fix": "gpudoctor.judging.commands",
    "word": "gpudoctor.judging.commands",
    "compare": "gpudoctor.judging.compare",
    "compat": "gpudoctor.judging.compat",
    "expect": "gpudoctor.judging.expect",
    "routes": "gpudoctor.judging.routes",
    "copies": "gpudoctor.judging.copies",
    "nics": "gpudoctor.judging.nics",
    "references": "gpudoctor.judging.references",
    "visible": "gpudoctor.judging.visible",
    "cuda_version_text": "gpudoctor.judging.hardware",
    "gpu_model": "gpudoctor.judging.hardware",
    "is_geforce": "gpudoctor.judging.hardware",
    "load_data": "gpudoctor.judging.hardware",
    **dict.fromkeys(
        (
            "SEVERITY",
            "aimed",
            "bad_summary",
            "Metric",
            "Remediation",
            "Result",
            "Row",
            "Status",
            "from_rows",
            "gpu_label",
            "gpu_row",
            "places",
            "worst",
        ),
        "gpudoctor.model",
    ),
    "check": "gpudoctor.registry",
    "Work": "gpudoctor.registry",
    "measure": "gpudoctor.workloads.measure",
    "progress": "gpudoctor.workloads.isolate",
    "RankContext": "gpudoctor.workloads.launch",
    "init_rank": "gpudoctor.workloads.launch",
}
MODULES = {"compare", "compat", "copies", "expect", "nics", "references", "routes", "visible", "measure"}

__all__ = [
    "FACT_NAMES",
    "SEVERITY",
    "CheckContext",
    "Command",
    "GpuFacts",
    "Metric",
    "RankContext",
    "Remediation",
    "Result",
    "Row",
    "Status",
    "Unsafe",
    "Work",
    "aimed",
    "bad_summary",
    "check",
    "command",
    "compare",
    "compat",
    "copies",
    "cuda_version_text",
    "expect",
    "fix",
    "from_rows",
    "gpu_for_cuda_index",
    "gpu_label",
    "gpu_model",
    "gpu_row",
    "init_rank",
    "is_geforce",
    "load_data",
    "measure",
    "nics",
    "not_captured",
    "pci_address",
    "places",
    "progress",
    "references",
    "routes",
    "same_pci",
    "usable",
    "visible",
    "word",
    "worst",
]


def __getattr__(name: str) -> Any:
    provider = PROVIDERS.get(name)
    if provider is None:
        raise AttributeError(f"module 'gpudoctor.api' has no attribute {name!r}")
    module = importlib.import_module(provider)
    value = module if name in MODULES else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
