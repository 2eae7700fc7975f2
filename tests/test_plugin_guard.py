"""Plugins as root (issue: a 0777 folder holding a 0666 file owned by `nobody` ran as uid 0; a plugin's
`sys.exit(0)` or `os._exit(0)` ended gpudoctor with exit 0 and no report, which npd reads as healthy; a
blocking plugin import or quick check ran until killed; a FIFO named `x.py` hung the import)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from helpers.common import SNAPSHOTS, gpudoctor

from gpudoctor.registry import unsafe_for_root

HEALTHY = str(SNAPSHOTS / "h100-sxm-8x.json")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the rule is root's; CI runs as root")

PLUGIN = '''
import os, sys, time
from gpudoctor.model import Result, Status
from gpudoctor.registry import check

@check("site.exits", "calls sys.exit")
def exits(ctx):
    """Ends the process, as a careless plugin does."""
    sys.exit(0)

@check("site.underscore", "calls os._exit")
def underscore(ctx):
    """Ends the process without cleanup."""
    os._exit(0)

@check("site.blocks", "blocks", timeout_s=2)
def blocks(ctx):
    """Never returns."""
    time.sleep(3600)

@check("site.meddles", "changes the facts other checks read")
def meddles(ctx):
    """Marks every GPU's ECC counters clean."""
    for gpu in ctx.nvml.get("gpus", []):
        gpu["ecc_errors"] = {}
        gpu["name"] = "changed"
    return Result(Status.PASS, "meddled")

@check("site.reads", "reads what the one before changed")
def reads(ctx):
    """Names the first GPU."""
    return Result(Status.PASS, ctx.nvml["gpus"][0]["name"])
'''


def site(tmp_path: Path, text: str = PLUGIN, name: str = "local.py") -> Path:
    folder = tmp_path / "site"
    folder.mkdir(mode=0o755, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(text))
    (folder / name).chmod(0o644)
    return folder


def test_no_plugin_ends_or_stalls_the_run_or_changes_another_checks_facts(tmp_path: Path) -> None:
    """The blocking check is ended by its own 2 s limit (its row says so; the helper's 300 s is a guard against a
    hang) and the run goes on to the checks after it."""
    proc = gpudoctor("check", "--from", HEALTHY, "--checks-dir", str(site(tmp_path)), "--json")
    document = json.loads(proc.stdout)
    by_id = {c["check_id"]: c for c in document["checks"]}
    assert proc.returncode == 1
    assert by_id["site.exits"]["status"] == "error" and "called sys.exit(0)" in by_id["site.exits"]["summary"]
    assert by_id["site.underscore"]["status"] == "error" and "os._exit(0)" in by_id["site.underscore"]["summary"]
    assert by_id["site.blocks"]["status"] == "timeout" and "within its 2 s limit" in by_id["site.blocks"]["summary"]
    assert by_id["site.meddles"]["status"] == "pass"
    assert by_id["site.reads"]["summary"] == "NVIDIA H100 80GB HBM3", "it reads the facts, not another's changes"


@pytest.mark.parametrize("call", ["sys.exit(0)", "os._exit(0)", "time.sleep(3600)"])
def test_an_import_that_ends_or_blocks_is_a_broken_plugin(tmp_path: Path, call: str, monkeypatch) -> None:
    from gpudoctor import registry

    monkeypatch.setattr(registry, "IMPORT_LIMIT_S", 2.0)
    folder = site(tmp_path, f"import os, sys, time\n{call}\n")
    found = registry.discover([folder], entry_points=False)
    [(source, why)] = found.broken
    assert source.endswith("local.py")
    assert ("within its 2 s limit" if "sleep" in call else "which would have ended gpudoctor") in why


def test_a_fifo_named_like_a_plugin_is_not_imported(tmp_path: Path) -> None:
    folder = site(tmp_path, "X = 1\n")
    os.mkfifo(folder / "evil.py")
    proc = gpudoctor("check", "--from", HEALTHY, "--checks-dir", str(folder), "--json", timeout=60)
    loads = [c for c in json.loads(proc.stdout)["checks"] if c["check_id"] == "plugins.load"]
    assert len(loads) == 1 and "evil.py failed to load: not imported: it is not a regular file" in loads[0]["summary"]


@ROOT_ONLY
@pytest.mark.parametrize(
    ("folder_mode", "file_mode", "owner", "words"),
    [
        (0o777, 0o644, 0, "is writable by group and others (mode 777)"),
        (0o775, 0o644, 0, "is writable by group (mode 775)"),
        (0o755, 0o666, 0, "local.py failed to load: not imported: it is writable by group and others"),
        (0o755, 0o644, 65534, "local.py failed to load: not imported: it is owned by uid 65534"),
    ],
)
def test_as_root_code_others_can_write_is_refused(
    tmp_path: Path, folder_mode: int, file_mode: int, owner: int, words: str
) -> None:
    folder = site(tmp_path, "raise SystemExit('ran as root')\n")
    (folder / "local.py").chmod(file_mode)
    os.chown(folder / "local.py", owner, 0)
    folder.chmod(folder_mode)
    proc = gpudoctor("check", "--from", HEALTHY, "--checks-dir", str(folder), "--json", timeout=60)
    assert "ran as root" not in proc.stdout + proc.stderr
    assert words in proc.stdout + proc.stderr
    if folder_mode != 0o755:
        assert proc.returncode == 2 and "as root, gpudoctor imports nothing from it" in proc.stderr


def test_the_rule_is_roots_only_and_a_sticky_folder_above_is_fine(tmp_path: Path) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    inner = sticky / "site"
    inner.mkdir(mode=0o755)
    assert unsafe_for_root(inner, euid=0) == ""
    sticky.chmod(0o777)
    assert "which is writable by group and others" in unsafe_for_root(inner, euid=0)
    assert unsafe_for_root(inner, euid=1000) == ""


def test_everything_a_plugin_shows_is_harmless_to_a_terminal() -> None:
    """A plugin's title, description, aspect, remediation (and its `instead`), row names and figures' text reach
    the console and `list` as visible escapes, never as erase-line or hidden text, and cut to a readable size."""
    from gpudoctor.model import Metric, Remediation, Result, Row, Status
    from gpudoctor.registry import SPEC_ATTR, check
    from gpudoctor.vetting import MAX_TEXT, vetted

    evil = "\x1b[2K\x1b[1A"

    @check("site.evil", f"looks fine{evil}\x9b8m")
    def evil_check(ctx: object) -> None:
        """Hides\x1b[8m"""

    spec = getattr(evil_check, SPEC_ATTR)
    assert "\x1b" not in spec.title + spec.description and "\x9b" not in spec.title and "\\x1b[2K" in spec.title
    fix = Remediation(f"why{evil}", [f"rm -rf /{evil}"], instead=Remediation("x" * 9_000, [f"ok{evil}"]))
    row = Row(Status.FAIL, f"row{evil}", name=f"GPU{evil}", node=f"n{evil}", metrics=[Metric("m", f"v{evil}")])
    [item] = vetted(Result(Status.FAIL, "s", aspect=f"a{evil}", remediation=fix, rows=[row], title=f"t{evil}"))
    texts = [item.aspect, item.title, fix.why, *fix.commands, *fix.instead.commands, row.summary, row.name, row.node]
    assert all("\x1b" not in t and "\\x1b" in t for t in texts), texts
    assert "\x1b" not in row.metrics[0].value and len(fix.instead.why) < MAX_TEXT + 40


@pytest.mark.parametrize("bad", [{"title": ""}, {"title": 7}, {"timeout_s": -1}, {"timeout_s": float("nan")}])
def test_a_declaration_with_no_title_or_a_meaningless_time_limit_is_refused(bad: dict) -> None:
    from gpudoctor.registry import check

    with pytest.raises(ValueError, match=r"site\.odd"):
        check("site.odd", **{"title": "t", **bad})
