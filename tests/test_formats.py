"""The format registry (report/formats.py): the CLI's --format choices and file options are its entries, every
entry renders through its own module, loaded only when used; every report file a run writes is named on stderr
(not where stdout is a monitoring plugin's answer); a format added to the table is offered and written with no
other change; each exit code is defined once (report/exits.py)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.common import SNAPSHOTS, gpudoctor

from gpudoctor import cli, probe
from gpudoctor.report import exits, formats

FAILING = str(SNAPSHOTS / "fault-xid-79.json")
NOT_REPORT_FILES = {"--config", "--baseline", "--from"}  # options that name a file gpudoctor reads
PACKAGE = Path(cli.__file__).parent


def subparser(command: str) -> argparse.ArgumentParser:
    actions = cli.build_parser()._actions
    return next(a for a in actions if isinstance(a, argparse._SubParsersAction)).choices[command]


def suffix(fmt: formats.Format) -> str:
    """A file name ending its option takes (--prom-file: FILE.prom)."""
    return Path(fmt.metavar).suffix or ".out"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "report.json"
    assert gpudoctor("check", "--from", FAILING, "--format", "npd", "-o", str(path)).returncode == 1
    return path


@pytest.mark.parametrize("command", ["check", "report"])
def test_the_clis_formats_and_file_options_are_the_registrys(command: str) -> None:
    actions = subparser(command)._actions
    assert next(a for a in actions if a.dest == "format").choices == formats.STDOUT
    files = {a.dest: tuple(a.option_strings) for a in actions if a.metavar and "FILE" in a.metavar}
    files = {dest: flags for dest, flags in files.items() if not NOT_REPORT_FILES & set(flags)}
    assert files == {f.dest: f.option for f in formats.FILES}
    assert tuple(files) == formats.REPORT_FILES


def test_every_entry_renders_through_its_own_module(saved: Path) -> None:
    report = probe.load(str(saved))
    for fmt in formats.TABLE:
        assert fmt.stdout or fmt.option, f"{fmt.name} reaches neither stdout nor a file"
        assert callable(fmt.hook(fmt.function)), fmt.name
        assert probe.render(report, fmt.name).strip(), fmt.name
    with pytest.raises(probe.UsageError, match="no format 'yaml'; one of console, json, nagios"):
        probe.render(report, "yaml")


def test_the_registry_loads_no_format_module_until_one_is_used() -> None:
    code = (
        "import sys; from gpudoctor.report import formats; "
        "print(sorted(f.module for f in formats.TABLE if f.module in sys.modules))"
    )
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert said.strip() == "[]"


@pytest.mark.parametrize("fmt", formats.FILES, ids=lambda f: f.name)
def test_check_says_where_it_wrote_each_file(tmp_path: Path, fmt: formats.Format) -> None:
    path = tmp_path / f"out{suffix(fmt)}"
    proc = gpudoctor("check", "--from", FAILING, "--only", "health.xid", fmt.option[-1], str(path))
    assert proc.returncode == 1 and path.is_file(), proc.stderr
    assert f"gpudoctor: wrote {fmt.what} to {path}\n" in proc.stderr


@pytest.mark.parametrize("fmt", formats.FILES, ids=lambda f: f.name)
def test_report_says_where_it_wrote_each_file(saved: Path, tmp_path: Path, fmt: formats.Format) -> None:
    """As given on the command line: a relative path stays relative."""
    name = f"again{suffix(fmt)}"
    proc = gpudoctor("report", str(saved), fmt.option[0], name, cwd=tmp_path)
    assert proc.returncode == 1 and (tmp_path / name).is_file(), proc.stderr
    assert proc.stderr == f"gpudoctor: wrote {fmt.what} to {name}\n"


def test_report_writes_the_json_report_again_recounted(saved: Path, tmp_path: Path) -> None:
    document = json.loads(saved.read_text())
    document.update(exit_code=0, status="pass")
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(document))
    proc = gpudoctor("report", str(stale), "-o", str(tmp_path / "again.json"))
    assert proc.returncode == 1 and json.loads((tmp_path / "again.json").read_text())["status"] == "fail"


@pytest.mark.parametrize("plugin", [f.name for f in formats.TABLE if f.plugin])
def test_a_plugins_answer_on_stdout_keeps_stderr_for_errors(tmp_path: Path, plugin: str) -> None:
    """cron mails, and node-problem-detector logs as an error, whatever its plugin writes on stderr."""
    path = tmp_path / "gpudoctor.prom"
    proc = gpudoctor("check", "--from", FAILING, "--only", "health.xid", "--format", plugin, "--prom-file", str(path))
    assert proc.returncode == {"nagios": 2, "npd": 1}[plugin] and path.is_file() and proc.stderr == ""


@pytest.mark.parametrize(
    ("fmt", "code"), [("console", 1), ("json", 1), ("nagios", exits.NAGIOS_CRITICAL), ("npd", exits.NPD_PROBLEM)]
)
def test_report_exits_with_its_formats_code(saved: Path, fmt: str, code: int) -> None:
    assert formats.FORMATS[fmt].exit_code(json.loads(saved.read_text())) == code
    assert gpudoctor("report", str(saved), "--format", fmt).returncode == code


def test_a_format_added_to_the_table_is_offered_and_written(
    monkeypatch: pytest.MonkeyPatch, saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One entry (here one whose module is the JSON report's) and the CLI offers and writes it."""
    extra = formats.Format("copy", "gpudoctor.report.document", "the copy", "copy", "dumps", True, ("--copy",))
    table = (*formats.TABLE, extra)
    monkeypatch.setattr(formats, "FORMATS", {f.name: f for f in table})
    monkeypatch.setattr(formats, "STDOUT", (*formats.STDOUT, "copy"))
    monkeypatch.setattr(formats, "FILES", (*formats.FILES, extra))
    monkeypatch.setattr(formats, "REPORT_FILES", (*formats.REPORT_FILES, "copy"))
    assert cli.main(["report", str(saved), "--format", "copy", "--copy", str(tmp_path / "c.json")]) == 1
    said = capsys.readouterr()
    assert json.loads(said.out) == json.loads((tmp_path / "c.json").read_text())
    assert said.err == f"gpudoctor: wrote the copy to {tmp_path / 'c.json'}\n"


def test_each_exit_code_is_defined_once() -> None:
    source = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    for name in ("EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_BROKEN", "EXIT_INTERRUPTED", "NAGIOS_UNKNOWN"):
        defined = re.findall(rf"^[A-Z_, ]*\b{name}\b[A-Z_, ]* = ", source, re.M)
        assert len(defined) == 1, (name, defined)
    assert "def exit_code(" in Path(exits.__file__).read_text()
    assert "def exit_code(" not in (PACKAGE / "report" / "document.py").read_text()


def test_only_nagios_answers_an_unjudged_run_on_stdout() -> None:
    for fmt in formats.STDOUT:
        proc = gpudoctor("check", "--format", fmt, "--only", "no-such-check")
        unjudged = formats.FORMATS[fmt].unjudged
        assert proc.returncode == (exits.NAGIOS_UNKNOWN if unjudged else exits.EXIT_USAGE), fmt
        assert proc.stdout.startswith("GPUDOCTOR UNKNOWN - ") is (fmt == "nagios"), (fmt, proc.stdout)
