"""The front door opens at once: `--help`, `--version` and `list` load only what their answer needs, listed here
module by module (a module added to one of these paths fails this test until it is meant to be there)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What printing the help or the version needs: the command line, the format table (its choices and file options)
# with the exit codes and result vocabulary it names.
HELP = {
    "gpudoctor",
    "gpudoctor.cli",
    "gpudoctor.errors",
    "gpudoctor.model",
    "gpudoctor.report",
    "gpudoctor.report.exits",
    "gpudoctor.report.formats",
    "gpudoctor.text",  # the gate every error line passes (stdlib only)
}
# `list` also reads every check's declaration: the registry, the check modules with the pure judges they name,
# and the console it prints through.
LIST = HELP | {
    "gpudoctor.api",
    "gpudoctor.registry",
    "gpudoctor.workloads",
    "gpudoctor.workloads.guard",
    "gpudoctor.facts",
    "gpudoctor.facts.identity",
    "gpudoctor.facts.nvml",
    "gpudoctor.facts.schema",
    "gpudoctor.judging",
    "gpudoctor.report.console",
    "gpudoctor.checks",
    "gpudoctor.checks.ranks",
    "gpudoctor.words",
    "gpudoctor.command",  # the checks declare their commands' templates (gpudoctor/command.py)
}
# Never on these paths: the GPU stack, the engine and what only a run needs (`list` reads versions with packaging,
# which the torch judges use at import).
NEVER = ("torch", "pynvml", "psutil", "gpudoctor.engine", "gpudoctor.context", "gpudoctor.cluster", "gpudoctor.paste",
         "gpudoctor.diagnosis", "gpudoctor.facts.system", "gpudoctor.workloads.launch")  # fmt: skip

PROBE = """
import contextlib, io, json, sys
from gpudoctor import cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    cli.main(sys.argv[1:])
json.dump(sorted(sys.modules), sys.__stdout__)
"""


def loaded(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout))


def ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "gpudoctor" or m.startswith("gpudoctor.")}


@pytest.mark.parametrize("argv", [("--help",), ("--version",), ("check", "--help")])
def test_help_and_version_load_the_command_line_and_the_format_table_only(argv: tuple[str, ...]) -> None:
    modules = loaded(*argv)
    assert ours(modules) == HELP
    assert not any(m.startswith((*NEVER, "packaging")) or m == "rich" or m.startswith("rich.") for m in modules)


def test_list_loads_the_declarations_and_the_pure_judges_only() -> None:
    modules = loaded("list")
    checks = {m for m in ours(modules) if m.startswith("gpudoctor.checks.") and m != "gpudoctor.checks.ranks"}
    judging = {m for m in ours(modules) if m.startswith("gpudoctor.judging.")}
    assert ours(modules) - checks - judging == LIST
    assert "gpudoctor.checks.ddp" in checks and "gpudoctor.judging.expect" in judging
    assert not [m for m in modules if m.startswith(NEVER)], "no torch, NVML, engine, cluster or workload machinery"


def test_every_api_name_is_declared_and_loads() -> None:
    import gpudoctor.api as api

    assert set(api.__all__) == set(api.PROVIDERS)
    assert all(getattr(api, name) is not None for name in api.__all__)
