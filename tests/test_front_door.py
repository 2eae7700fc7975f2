"""The front door opens at once: `--help`, `--version` and `list` load only what their answer needs, listed here
module by module (a module added to one of these paths fails this test until it is meant to be there)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

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
# `list` also reads every check's declaration (gpudoctor.declarations: the package's index, made from the modules'
# sources), running no check module and not importing the registry: the package that orders the areas, and the
# plain columns it prints in (no Rich: its import and layout cost more than all of --help). No plugin is installed
# here, so neither importlib.metadata nor the guard a plugin's import runs under is loaded.
LIST = HELP | {
    "gpudoctor.declarations",
    "gpudoctor.facts",
    "gpudoctor.facts.sources",  # the fact sources a check may name
    "gpudoctor.report.columns",
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
    assert not [m for m in modules if m == "rich" or m.startswith(("rich.", "importlib.metadata"))]


def test_the_declarations_list_reads_are_those_the_check_modules_make() -> None:
    from gpudoctor.declarations import Declared, builtin_modules, declared_in
    from gpudoctor.registry import discover, listing

    sources = {name: importlib.util.find_spec(f"gpudoctor.checks.{name}") for name in builtin_modules()}
    read = {name: declared_in(spec.loader.get_source(spec.name)) for name, spec in sources.items()}  # type: ignore
    assert None not in read.values(), "every built-in module's declarations are read from its source"
    made = [Declared(s.id, s.level, s.description, s.source, s.cure) for s in discover(entry_points=False).specs]
    assert [d for found in read.values() for d in found or ()] == made == listing().declared
    assert len(made) > 40


def test_list_reads_the_index_only_where_it_was_made_from_these_declarations(monkeypatch, tmp_path: Path) -> None:
    """The index (python -m gpudoctor.docgen writes it) answers where its digest is the declarations' now; one
    made from other declarations (an edited check), or unreadable, leaves them to be read from the source."""
    from gpudoctor import declarations

    scanned = declarations.builtin_declarations.__wrapped__()
    header, first, *rest = declarations.index_text().splitlines()
    digest = header.rsplit(" ", 1)[1]
    first = first.replace(scanned[0].description, "From the index.")
    written = tmp_path / "declarations.tsv"
    monkeypatch.setattr(declarations, "INDEX", written)
    for made_from, description in ((digest, "From the index."), ("00000000", scanned[0].description)):
        written.write_text("\n".join([declarations.INDEX_HEADER + made_from, first, *rest]))
        assert declarations.builtin_declarations.__wrapped__()[0].description == description
    for broken in ("", declarations.INDEX_HEADER + digest + "\nan\tunfinished\trow"):
        written.write_text(broken)
        assert declarations.builtin_declarations.__wrapped__() == scanned


def test_a_declaration_not_written_in_literals_is_left_to_the_import() -> None:
    from gpudoctor.declarations import Declared, declared_in

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


def test_list_lays_out_its_columns_without_rich_within_the_width() -> None:
    from gpudoctor.report.columns import MIN_WIDTH, lines, plain, terminal_width

    rows = [("id", "level", "description"), ("a.b", "quick", "one two three four five six seven"), ("c.d", "full", "")]
    wide = lines(rows, 80)
    assert wide == ["id   level  description", "a.b  quick  one two three four five six seven", "c.d  full"]
    narrow = lines([*rows, ("e.f", "quick", "twelve-chars $ rm -rf / " + "x" * 30)], 24)
    assert all(len(line) <= 24 and line == line.rstrip() for line in narrow), narrow
    assert narrow[:4] == [
        "id   level  description",
        "a.b  quick  one two",
        "            three four",
        "            five six",
    ]
    assert narrow[-5:-2] == ["e.f  quick  twelve-chars", "            …$ rm -rf /", "            xxxxxxxxxxxx"], narrow
    assert plain(["driver.nvml", "NVML initialises."]) and not plain(["検査"]) and not plain(["a\x1b[2J"])
    assert terminal_width({"COLUMNS": "120"}) == 120 and terminal_width({"COLUMNS": "5"}) == MIN_WIDTH


def test_list_imports_importlib_metadata_only_where_a_distribution_may_declare_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpudoctor import declarations

    other = tmp_path / "other-1.0.dist-info"
    other.mkdir()
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    (tmp_path / "bare-2.0.dist-info").mkdir()
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert not declarations.may_declare_plugins()
    vendor = tmp_path / "Vendor_Checks-1.0.DIST-INFO"
    vendor.mkdir()
    (vendor / "entry_points.txt").write_text("[gpudoctor.checks]\nthing = vendor_checks\n")
    assert declarations.may_declare_plugins()
    zipped = tmp_path / "modules.zip"
    zipped.write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(zipped)])
    assert declarations.may_declare_plugins(), "a zip file on sys.path may hold distributions"
