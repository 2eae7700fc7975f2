"""The front door opens at once: `--help`, `--version` and `list` load only what their answer needs, listed here
module by module (a module added to one of these paths fails this test until it is meant to be there)."""

from __future__ import annotations

import importlib.util
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
# `list` also reads every check's declaration from its module's source (registry.listing), running no check module:
# the registry (with the fact sources a check may name, and the guard a plugin's import runs under), the package
# that orders the areas, and the console it prints through.
LIST = HELP | {
    "gpudoctor.registry",
    "gpudoctor.workloads",
    "gpudoctor.workloads.guard",
    "gpudoctor.facts",
    "gpudoctor.facts.schema",
    "gpudoctor.report.console",
    "gpudoctor.checks",
}
# Never on these paths: the GPU stack, the judges with their tables, the engine and what only a run needs.
NEVER = ("torch", "pynvml", "psutil", "packaging", "gpudoctor.judging", "gpudoctor.paste", "gpudoctor.diagnosis",
         "gpudoctor.checks.", "gpudoctor.api", "gpudoctor.engine", "gpudoctor.context", "gpudoctor.cluster",
         "gpudoctor.facts.system", "gpudoctor.facts.nvml", "gpudoctor.workloads.launch")  # fmt: skip

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
    assert not any(m.startswith(NEVER) or m == "rich" or m.startswith("rich.") for m in modules)


def test_list_reads_the_declarations_without_running_a_check_module_or_a_judge() -> None:
    modules = loaded("list")
    assert ours(modules) == LIST
    assert not [m for m in modules if m.startswith(NEVER)], "no check module, judge, table, GPU library or engine"


def test_the_declarations_list_reads_are_those_the_check_modules_make() -> None:
    from gpudoctor.registry import Declared, builtin_modules, declared_in, discover, listing

    sources = {name: importlib.util.find_spec(f"gpudoctor.checks.{name}") for name in builtin_modules()}
    read = {name: declared_in(spec.loader.get_source(spec.name)) for name, spec in sources.items()}  # type: ignore
    assert None not in read.values(), "every built-in module's declarations are read from its source"
    made = [Declared(s.id, s.level, s.description, s.source) for s in discover(entry_points=False).specs]
    assert [d for found in read.values() for d in found or ()] == made == listing().declared
    assert len(made) > 40


def test_a_declaration_not_written_in_literals_is_left_to_the_import() -> None:
    from gpudoctor.registry import Declared, declared_in

    literal = '@check(\n    "site.a",\n    "A check",\n    level="full",\n)\ndef a(\n    ctx: Any,\n) -> Result:\n'
    assert declared_in(literal + '    """Says so. More."""\n    return 1\n') == [Declared("site.a", "full", "Says so.")]
    assert declared_in(literal + "    return 1\n") == [Declared("site.a", "full", "A check")]
    assert declared_in('@check(ID, "A check")\ndef a(ctx):\n    """Says so."""\n') is None
    assert declared_in('@check("site.a", TITLES["a"])\ndef a(ctx):\n    pass\n') is None
    with pytest.raises(ValueError, match="level"):
        declared_in('@check("site.a", "A check", "fast")\ndef a(ctx):\n    pass\n')


def test_every_api_name_is_declared_and_loads() -> None:
    import gpudoctor.api as api

    assert set(api.__all__) == set(api.PROVIDERS)
    assert all(getattr(api, name) is not None for name in api.__all__)
