"""Reading what users have: the text they paste (collect_env, nvidia-smi's table, -q, -L and topo -m, kernel
and NCCL logs, nccl-tests, nvbandwidth and dcgmi diag outputs (text and JSON), ibstat and ibstatus, tracebacks, an
nvidia-bug-report.log, or a whole issue body mixing them) turned into the facts
the judges read. One table of readers; every reader reads every line and records only what it recognises, so
a mix is read as well as one kind alone. Nothing in a paste is executed."""

from __future__ import annotations

import importlib
from typing import Any

from gpudoctor.paste.found import Found

# name -> module under gpudoctor.paste with read(found). Order matters only for which of two equal facts
# counts as first seen: the more direct witness first.
READERS = {
    "nvidia-smi": "nvsmi",
    "kernel log": "kernel",
    "collect_env": "collect_env",
    "NCCL log": "nccl",
    "nccl-tests": "nccl_tests",
    "nvbandwidth": "nvbandwidth",
    "dcgmi diag": "dcgm_diag",
    "ibstat": "ibstat",
    "error": "signatures",
    "error code": "codes",  # after the signatures: a line one of them read is left to it
    "prose": "prose",  # last: a fact an output stated is not read again from a sentence
}
# The readers of words rather than of a tool's output: a paste holding only these held no output gpudoctor reads.
NOT_OUTPUTS = ("error", "error code", "prose")


def read(text: str) -> Found:
    """Every reader over `text`'s lines."""
    found = Found.of(text)
    for module in READERS.values():
        importlib.import_module(f"gpudoctor.paste.{module}").read(found)
    return found


def summary(found: Found) -> dict[str, Any]:
    """The snapshot's `paste` section: what was read, from where, what disagreed, which errors were seen."""
    return {
        "kinds": dict(found.kinds),
        "facts_from": {path: where.as_dict() for path, where in sorted(found.origins.items())},
        "conflicts": [
            {"fact": path, "values": [{"value": value, **where.as_dict()} for value, where in values]}
            for path, values in found.conflicts.items()
        ],
        "signatures": found.signatures,
        **({"script": found.script} if found.script else {}),
        **({"package": found.package} if found.package else {}),
        **({"python": found.python} if found.python else {}),
        **({"apps": list(found.apps)} if found.apps else {}),
    }


# The command whose output gives a paste each source's facts.
OUTPUTS = {
    "nvml": "nvidia-smi",
    "torch": "python -m torch.utils.collect_env",
    "kernel_log": "sudo dmesg -T | grep -E 'NVRM|Xid|nvidia'",
}
# What would give the facts a paste lacks, per source: said in the skip of every check that needs them.
WOULD_GIVE = {
    "nvml": f"run `nvidia-smi -q -x` on the node and judge that, or add `{OUTPUTS['nvml']}`'s output",
    "torch": f"add the output of `{OUTPUTS['torch']}`",
    "system": "run `gpudoctor check` on the node itself",
    "kernel_log": f"add `{OUTPUTS['kernel_log']}`",
    "nvcc": "add `nvcc --version`",
}


def derive(found: Found) -> None:
    """What follows from what the paste states: an official torch build's arch list (torch.toml), a GPU's
    compute capability from its name (hardware.toml), the operating system its own paths show (paths.py)."""
    from gpudoctor.judging import compat, hardware

    torch, system = found.facts["torch"], found.facts["system"]
    if found.shown_os:
        found.derived("system.os", found.shown_os, f"the paste's own paths are {found.shown_os}'s (paste/paths.py)")
    platform = compat.platform_key(system.get("os") or "Linux", system.get("machine") or "x86_64")
    if torch.get("version") and torch.get("cuda") and "arch_list" not in torch:
        build = compat.build(str(torch["version"]), compat.variant_of(torch), platform)
        if build and build.arch and (build.toolkit or "").startswith(f"{torch['cuda']}."):
            why = f"the arch list of the official {build.name} build (gpudoctor/data/torch.toml)"
            found.derived("torch.arch_list", list(build.arch), why)
    _driver_against_its_cuda(found)
    if torch.get("importable") is False:
        found.derived("torch.import_error", "torch did not import where the paste was made", "importable: False")
    for gpu in found.facts["nvml"].get("gpus", []):
        model = hardware.gpu_model(gpu) if "compute_capability" not in gpu else None
        if model and model.get("compute_capability"):
            capability = [int(part) for part in str(model["compute_capability"]).split(".")]
            found.derived(f"nvml.gpus.{gpu['index']}.compute_capability", capability, f"{gpu.get('name')}'s, by name")


def _driver_against_its_cuda(found: Found) -> None:
    """A driver version and a CUDA driver version from two places that cannot both be one driver's (torch
    saying "found version 11040" beside a collect_env block with driver 550): a conflict of their own."""
    from gpudoctor.judging import compat
    from gpudoctor.judging.hardware import cuda_version_text

    nvml = found.facts["nvml"]
    driver, cuda = nvml.get("driver_version"), cuda_version_text(nvml.get("cuda_driver_version"))
    minimum = compat.toolkit_minimum(cuda) if driver and cuda else None
    if minimum and compat.older(str(driver), minimum):
        said = [(driver, found.origins["nvml.driver_version"])]
        said.append((f"CUDA {cuda}, which needs driver >= {minimum}", found.origins["nvml.cuda_driver_version"]))
        found.conflicts["nvml.driver_version and nvml.cuda_driver_version"] = said


# The reader whose kind of text gives each source's facts: where the paste holds it, what is missing is not
# in it, and naming the same command again would not help.
GIVEN_BY = {"nvml": "nvidia-smi", "torch": "collect_env", "kernel_log": "kernel log", "nvcc": "collect_env"}


def would_give(source: str, kinds: list[str]) -> str:
    """The command that would give a source's facts, or that the text that usually does holds none of them."""
    if GIVEN_BY.get(source) in kinds:
        return f"the {GIVEN_BY[source]} output in it does not show it"
    return WOULD_GIVE[source]


def _printed(found: Found, path: str) -> bool:
    """The fact is there and a tool's output stated it, not a sentence (prose never says that the driver answered)."""
    origin = found.origins.get(path)
    return origin is not None and origin.reader != "prose"


def to_snapshot(name: str, found: Found) -> dict[str, Any]:
    """The paste's facts as a snapshot: a source is listed only where the paste held facts of it, each GPU
    lists what it lacks as not captured, and the `paste` section says what came from where."""
    from gpudoctor import __version__
    from gpudoctor.facts.schema import FACT_NAMES, SCHEMA, SCHEMA_VERSION

    derive(found)
    nvml, torch, system = (found.facts.get(k) or {} for k in ("nvml", "torch", "system"))
    if _printed(found, "nvml.driver_version") or nvml.get("gpus"):
        nvml.setdefault("status", "ok")  # a driver version or a GPU list printed: the driver answered
    if nvml:
        for gpu in nvml.get("gpus", []):
            held = set(gpu) | ({"pcie_max"} if (gpu.get("pcie") or {}).get("max_gen") is not None else set())
            gpu["not_captured"] = sorted(set(FACT_NAMES) - held)
    # A source counts as gathered only where the paste shows what its checks judge: NVML's own view (a status,
    # a driver version, GPUs), torch's version or import, the node's memory (a whole system gather, never in a
    # paste). What is read beyond that (a CUDA driver version from torch's error, the OS from collect_env) is
    # still there for the checks that take it, and an error signature speaks for the checks that skip.
    sources = [
        s
        for s, there in (
            ("nvml", "status" in nvml),
            ("torch", "version" in torch or "importable" in torch),
            ("system", "memory_bytes" in system),
        )
        if there
    ]
    if "kernel_log" in system:
        sources.append("kernel_log")
    if "nvcc" in system:
        sources.append("nvcc")
    extra = {k: v for k, v in found.facts.items() if k not in ("nvml", "torch", "system")}
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "taken_at": None,
        "sources": sources,
        "capture": {"format": "pasted text", "file": name, "kinds": sorted(found.kinds)},
        "nvml": nvml,
        "nvml_calls": {},
        "torch": torch,
        "system": system,
        "gather_s": 0.0,
        **extra,
        "paste": summary(found),
    }
