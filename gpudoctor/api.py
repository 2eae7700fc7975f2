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

Each name loads its module when a check module first asks for it (PEP 562), so a run that imports a check
module loads neither the engine nor the workload machinery before it needs them: a check module names
`CheckContext` under `if TYPE_CHECKING:` (its annotations are never evaluated), and the rest it names are the
declaration, the result vocabulary and the pure judges. `gpudoctor list` imports no check module at all: it reads
each built-in declaration from the package's index of them or their source (gpudoctor.declarations).
"""

# ruff: noqa: F401  (the imports under TYPE_CHECKING are the API's one list, never run: type checkers read
# them, and _providers reads them from this file's source for __all__ and the lazy __getattr__)
from __future__ import annotations

import ast
import importlib
from pathlib import Path
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


def _providers() -> dict[str, str]:
    """Each name of the imports above (the one list of the API, as a type checker reads it) and the module it
    comes from, read from this file's own source; the same idea as scientific-python's lazy_loader, which reads
    its names from a stub (https://scientific-python.org/specs/spec-0001/)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imports = [n for n in block.body if isinstance(n, ast.ImportFrom) and n.module]
    return {alias.asname or alias.name: str(n.module) for n in imports for alias in n.names}


PROVIDERS = _providers()  # name -> the module it is imported from
__all__ = sorted(PROVIDERS)


def __getattr__(name: str) -> Any:
    provider = PROVIDERS.get(name)
    if provider is None:
        raise AttributeError(f"module 'gpudoctor.api' has no attribute {name!r}")
    module = importlib.import_module(provider)
    # as `from provider import name` reads it: the provider's attribute, else its submodule of that name
    value = getattr(module, name) if hasattr(module, name) else importlib.import_module(f"{provider}.{name}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
