"""The front door: the README stays short and true, the docs' generated tables stay current with the check
declarations (`python -m gpudoctor.docgen`), and every relative link in README.md and docs/ leads somewhere."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor import docgen
from gpudoctor.registry import CheckSpec

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
FROM_PYPI = re.compile(r"pip install (?:-U |--upgrade )?gpudoctor(?=[\s=<>!~\[`'\"]|$)", re.M)
LOUD = ("pass", "warn", "fail")  # the console writes these in capitals, skip and error as they are
VERDICT = re.compile(r"^(PASS|WARN|FAIL|skip|error)\s+(\S+\.\S+)", re.M)  # a status, then a check id


def prose(text: str) -> str:
    """The text without code blocks and inline code, where brackets are code, not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as hyphens, a
    repeated one numbered."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(f"{slug}-{counts[slug]}" if slug in counts else slug)
        counts[slug] = counts.get(slug, 0) + 1
    return found


def ci_test_command() -> str:
    return next(line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv"))


def test_the_generated_tables_are_current() -> None:
    stale = docgen.stale(ROOT / "docs")
    assert stale == [], "the check or settings table is out of date: run `python -m gpudoctor.docgen`"


def test_the_generator_imports_no_torch() -> None:
    code = "import sys; from gpudoctor import docgen; docgen.tables(); print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_a_changed_declaration_makes_the_tables_stale_and_the_command_rewrites_them(tmp_path: Path, capsys) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    checks = docs / "CHECKS.md"
    checks.write_text(checks.read_text().replace("| `driver.nvml` | quick |", "| `driver.nvml` | standard |"))
    assert docgen.main(["--check", "--docs", str(docs)]) == 1
    assert "out of date: CHECKS.md; run `python -m gpudoctor.docgen`" in capsys.readouterr().err
    assert docgen.main(["--docs", str(docs)]) == 0
    assert checks.read_text() == (ROOT / "docs" / "CHECKS.md").read_text()
    assert docgen.main(["--check", "--docs", str(docs)]) == 0


def test_a_table_shows_what_each_check_declares(monkeypatch) -> None:
    spec = CheckSpec(
        "site.fans", "Fans", "quick", lambda ctx: None, ("nvml",), ("system",), timeout_s=30,
        description="Every fan spins.", settings={"min_rpm": 500, "floor": 0.75},
    )  # fmt: skip
    table = docgen.check_table([spec])
    assert "| `site.fans` | quick | Every fan spins. | `nvml`; reads `system` | 30 s |" in table
    with pytest.raises(docgen.DocgenError, match=r"site\.fans declares setting 'min_rpm'"):
        docgen.settings_table([spec])
    spec.settings = {"floor": 0.75, "bytes": 2**28, "name": "", "on": True}
    for key in ("bytes", "name", "on"):
        monkeypatch.setitem(docgen.MEANINGS, f"site.fans {key}", key[0])
    rows = docgen.settings_table([spec]).splitlines()[2:]
    assert rows[0].startswith("| `site.fans` | `floor` | number 0..1 | `0.75` | a figure passes from 0.85")
    assert rows[1] == "| `site.fans` | `bytes` | number >= 0 | `268435456` (256 MiB) | b |"
    assert rows[2:] == ['| `site.fans` | `name` | string | `""` | n |', "| `site.fans` | `on` | boolean | `true` | o |"]


def test_missing_markers_are_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "CHECKS.md").write_text("# Checks\n")
    (tmp_path / "CONFIG.md").write_text("# Config\n")
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m gpudoctor.docgen: docs/CHECKS.md lacks the markers of the check table (")
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    broken = []
    for document in DOCUMENTS:
        for target in LINK.findall(prose(document.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (document.parent / path).resolve() if path else document
            if not resolved.exists():
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_is_short_and_keeps_its_two_set_up_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 230
    assert [line for line in lines if len(line) > 120] == [ci_test_command()], "only the CI command, verbatim"
    assert "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gpudoctor check" in lines
    assert "python -m pip install ./gpudoctor" in README.read_text()


def test_nothing_tells_anyone_to_install_gpudoctor_from_pypi() -> None:
    """gpudoctor is not on PyPI: `pip install gpudoctor` would fail, or install a stranger's package."""
    assert FROM_PYPI.search("run `pip install gpudoctor` first") and FROM_PYPI.search("pip install -U gpudoctor\n")
    assert not FROM_PYPI.search("pip install ./gpudoctor && pip install gpudoctor-0.1.0-py3-none-any.whl")
    places = [README, *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").iterdir(), ROOT / "pyproject.toml"]
    places += (ROOT / "gpudoctor").rglob("*.py")
    said = [str(p.relative_to(ROOT)) for p in places if FROM_PYPI.search(p.read_text())]
    assert said == []


def test_the_node_wide_hooks_run_the_gpudoctor_the_readme_installs() -> None:
    readme = README.read_text()
    assert "python3 -m venv /opt/gpudoctor" in readme
    assert "python3 -m venv --system-site-packages /opt/gpudoctor" in readme
    for hook in ("slurm-prolog.sh", "slurm-healthcheck.sh", "gpudoctor.cron", "slurm-preflight.sbatch"):
        assert "/opt/gpudoctor/bin" in (ROOT / "examples" / hook).read_text(), hook


def test_the_readme_sample_output_is_what_the_command_says() -> None:
    """The sample's verdicts and exit code are the ones the command gives today (its wording and wrapping may
    move with the console; what it judged may not)."""
    sample = README.read_text().split("## Sample output", 1)[1].split("```\n", 2)[1]
    command = sample.splitlines()[0].removeprefix("$ gpudoctor ").split()
    gpudoctor = Path(sys.executable).with_name("gpudoctor")
    proc = subprocess.run([str(gpudoctor), *command, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    checks = json.loads(proc.stdout)["checks"]
    shown = {(c["status"].upper() if c["status"] in LOUD else c["status"], c["check_id"]) for c in checks}
    assert set(VERDICT.findall(sample)) == shown
    assert sample.rstrip().endswith(f"exit code {proc.returncode}")


@pytest.mark.parametrize("document", [README, ROOT / "docs" / "CONFIG.md"], ids=lambda p: p.name)
def test_the_config_snippets_are_configs_gpudoctor_accepts(document: Path, tmp_path: Path) -> None:
    from gpudoctor import config

    snippet = tmp_path / "site.toml"
    snippet.write_text(document.read_text().split("```toml\n", 1)[1].split("```", 1)[0])
    loaded = config.load(snippet)
    config.validate_checks(loaded, docgen.builtin_specs())
    assert loaded.top["level"] == "standard" and loaded.checks["health.ecc"] == {"correctable_warn": 100}


def test_every_sample_in_the_readme_and_docs_is_what_the_command_prints_today() -> None:
    """The README's, REPORTS.md's and OFFLINE.md's samples are real runs of the files they name
    (tests/helpers/docsamples.py rewrites them): a console change that alters what a sample shows fails here."""
    from helpers import docsamples

    found = list(docsamples.samples())
    assert {s.document.name for s in found} == {"README.md", "REPORTS.md", "OFFLINE.md"}
    stale = [f"{s.document.name}: {s.command}" for s in found if not docsamples.same(s.block, s.run(), s.live)]
    assert stale == [], "run `python tests/helpers/docsamples.py` and read the diff"
