"""The console's front: what to do first, fix commands that copy back whole at any width, a saved report named as
such, progress in the unit the report counts, whole sentences in `list`, and examples at the end of --help."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES
from rich.console import Console

from gpudoctor.cli import CHECK_EXAMPLES, EXAMPLES, build_parser
from gpudoctor.declarations import first_sentence
from gpudoctor.model import Remediation, Result, Row, Status
from gpudoctor.registry import discover
from gpudoctor.report import console
from gpudoctor.report import document as doc

CAPTURE = FIXTURES / "nvidia-smi-xml" / "tesla-t4.xml"
META = {"host": "node01", "started_at": "2026-11-23T10:00:00+00:00", "duration_s": 2.5, "level": "quick"}
URL = "pip install torch==2.15.0+cu132 torchvision --index-url https://download.pytorch.org/whl/cu132"
DRIVER = "nvidia-smi | head -4  # then install NVIDIA driver R595 or newer (>= 595.71.05)  # or your distribution's driver package"  # noqa: E501
LONGEST = "sudo apt-get install -y " + " ".join(f"libnccl2=2.{i}.7-1+cuda13.0" for i in range(12))  # over 200 chars
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def result(check_id: str, status: Status, summary: str, fix: Remediation | None = None, **more: Any) -> Result:
    found = Result(status, summary, remediation=fix, **more)
    found.check_id = check_id
    return found


def node_results() -> list[Result]:
    """A pass, a warning with two ways to fix it, a failing GPU, and a check that broke, in report order."""
    return [
        result("driver.nvml", Status.PASS, "driver 590.48.01, 8 GPUs"),
        result(
            "torch.cuda-driver",
            Status.WARN,
            "driver 515.105.01 (CUDA 11.7): torch 2.15.0+cu132 needs >= 595.71.05",
            Remediation("Upgrade the driver.", [DRIVER, URL], instead=Remediation("Keep the driver.", [LONGEST])),
        ),
        result("system.shm", Status.PASS, "/dev/shm 256.0 GiB"),
        result(
            "health.xid",
            Status.FAIL,
            "GPU 3: Xid 79 (GPU has fallen off the bus: reboot the node)",
            Remediation("Drain the node first.", ["sudo dmesg -T | grep -iE 'xid|sxid'", "sudo reboot"]),
            rows=[Row(Status.PASS, "no Xid", index=0), Row(Status.FAIL, "Xid 79", index=3)],
        ),
        result("system.limits", Status.ERROR, "the check broke: KeyError 'memlock'"),
    ]


def node_document(results: list[Result], source: str = "live") -> dict[str, Any]:
    return doc.build(results, {**META, "source": source}, doc.exit_code(results, False, False), False)


def cluster_document() -> tuple[dict[str, Any], list[Result]]:
    rows = [Row(Status.FAIL, "slow both ways: 3.0 GB/s", node="gpu0017"), Row(Status.PASS, "fine", node="gpu0001")]
    skew = "NCCL 2.21.5 on 1 node, 2.27.7 on the others"
    results = [
        result("cluster.links", Status.FAIL, "gpu0017 is slow both ways", Remediation("Drain.", [LONGEST]), rows=rows),
        result("cluster.skew", Status.WARN, skew, Remediation("Align.", [URL])),
    ]
    nodes = [{"name": f"gpu{i:04d}", "rank": i, "status": "pass", "exit_code": 0, "checks": []} for i in (0, 1, 17)]
    return doc.build_cluster(results, nodes, {**META, "source": "live"}, False, False, "slurm"), results


def shown(render: Callable[..., None], *args: Any, width: int = 100, **options: Any) -> str:
    out = Console(record=True, width=width, file=io.StringIO())
    render(out, *args, **options)
    return out.export_text()


def commands_in(results: list[Result]) -> list[str]:
    fixes = [r.remediation for r in results if r.remediation]
    return [c for fix in fixes + [f.instead for f in fixes if f.instead] for c in fix.commands]


# --- do this first ----------------------------------------------------------------------------------------------
def test_the_report_opens_with_what_to_do_failures_first_each_with_its_commands() -> None:
    found = node_results()
    lines = shown(console.render, node_document(found), found).splitlines()
    assert lines[1] == console.FIRST_TITLE, "the block follows the summary line"
    block = lines[1 : lines.index("driver")]
    heads = [line.split()[:2] for line in block if line[:1].isupper()]
    assert heads == [["FAIL", "health.xid"], ["ERROR", "system.limits"], ["WARN", "torch.cuda-driver"]]
    xid = next(i for i, line in enumerate(block) if "health.xid" in line)
    assert "GPU 3: Xid 79" in block[xid] and block[xid + 1].strip() == "$ sudo dmesg -T | grep -iE 'xid|sxid'"
    assert "node01: the check broke" in next(line for line in block if "system.limits" in line), "where: the node"
    warned = next(i for i, line in enumerate(block) if "torch.cuda-driver" in line)
    assert [line.strip() for line in block[warned + 1 :] if "$" in line] == [f"$ {DRIVER}", f"$ {URL}"]
    assert f"$ {LONGEST}" not in block, "the second way is in the full list only"


def test_a_report_where_everything_passed_has_no_block() -> None:
    found = [r for r in node_results() if r.status == Status.PASS]
    assert console.FIRST_TITLE not in shown(console.render, node_document(found), found)


def test_the_cluster_report_opens_with_what_to_do_naming_the_nodes() -> None:
    document, found = cluster_document()
    text = shown(console.render_cluster, document, found)
    block = text[text.index(console.FIRST_TITLE) : text.index("named, worst first")]
    assert block.index("cluster.links") < block.index("cluster.skew")
    assert "gpu0017 is slow both ways" in block and "cluster: NCCL 2.21.5 on 1 node" in block
    assert f"$ {LONGEST}\n" in block and f"$ {URL}\n" in block


# --- commands copy back whole -----------------------------------------------------------------------------------
def stream(width: int | None, terminal: bool) -> tuple[Console, Callable[[], str]]:
    """A terminal (colours, at `width`), or a plain stream as a pipe or a file (Rich's own width when None)."""
    out = io.StringIO()
    if terminal:
        return Console(file=out, width=width, force_terminal=True, color_system="truecolor"), out.getvalue
    return Console(file=out, width=width) if width else Console(file=out), out.getvalue


@pytest.mark.parametrize(("width", "terminal"), [(40, True), (80, True), (120, True), (None, False), (40, False)])
@pytest.mark.parametrize("cluster", [False, True])
def test_fix_commands_copy_back_exactly_and_no_line_ends_in_a_space(
    width: int | None, terminal: bool, cluster: bool
) -> None:
    document, found = cluster_document() if cluster else (node_document(node_results()), node_results())
    out, text = stream(width, terminal)
    (console.render_cluster if cluster else console.render)(out, document, found, verbose=False)
    plain = ANSI.sub("", text())
    copied = [line.strip()[2:] for line in plain.splitlines() if line.strip().startswith("$ ")]
    for command in commands_in(found):
        assert command in copied, (command, copied)
    assert set(copied) <= set(commands_in(found))
    assert not [line for line in plain.splitlines() if line != line.rstrip()]
    assert max(map(len, commands_in(found))) > 200


def test_a_piped_check_prints_its_commands_whole() -> None:
    """A real run through a pipe at Rich's default 80 columns: the commands the JSON report holds are in the
    console's text, each whole on one line."""
    args = ["check", "--from", str(CAPTURE), "--only", "torch.cuda-driver", "driver.gpu-modes"]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    text = subprocess.run([sys.executable, "-m", "gpudoctor", *args], capture_output=True, text=True, env=env).stdout
    saved = json.loads(subprocess.run([sys.executable, "-m", "gpudoctor", *args, "--json"], capture_output=True,
                                      text=True, env=env).stdout)  # fmt: skip
    fixes = [c["remediation"] for c in saved["checks"] if c["remediation"] and c["status"] != "pass"]
    commands = [c for fix in fixes for c in fix["commands"] + (fix["instead"] or {"commands": []})["commands"]]
    assert any(len(c) > 80 for c in commands), "the capture's fix has a long command (its --index-url)"
    lines = [line.strip() for line in text.splitlines()]
    assert all(f"$ {command}" in lines for command in commands)
    assert not [line for line in text.splitlines() if line != line.rstrip()]


# --- a saved report says so -------------------------------------------------------------------------------------
def test_a_saved_report_says_when_and_where_it_ran_not_live() -> None:
    found = node_results()
    live = shown(console.render, node_document(found), found, width=200).splitlines()[0]
    assert live.endswith("· node01 · level quick · live")
    saved = shown(console.render, node_document(found), found, width=200, saved=True).splitlines()[0]
    assert saved.endswith("· saved report from 2026-11-23T10:00:00+00:00 on node01 · level quick")
    snapshot = shown(console.render, node_document(found, "snapshot:n.json"), found, width=200, saved=True)
    assert snapshot.splitlines()[0].endswith("on node01 · level quick · snapshot:n.json")
    document, results = cluster_document()
    assert "saved report from 2026-11-23" in shown(console.render_cluster, document, results, saved=True)


def test_gpudoctor_report_says_its_report_is_saved(tmp_path: Path) -> None:
    """`gpudoctor report DOC.json` draws the saved report's header; a run's own console says live."""
    saved = tmp_path / "node.json"
    run = [sys.executable, "-m", "gpudoctor", "check", "--from", str(CAPTURE), "--only", "driver", "-o", str(saved)]
    env = {**os.environ, "COLUMNS": "300"}
    live = subprocess.run(run, capture_output=True, text=True, env=env).stdout.splitlines()[0]
    assert "saved report" not in live
    again = subprocess.run([sys.executable, "-m", "gpudoctor", "report", str(saved)], capture_output=True, text=True,
                           env=env).stdout.splitlines()[0]  # fmt: skip
    assert "· saved report from " in again and "· live" not in again, again


# --- progress counts what the report counts ---------------------------------------------------------------------
def test_the_summary_says_how_many_checks_gave_its_results() -> None:
    found = node_results()
    more = [*found, result("torch.cuda-driver", Status.PASS, "the other aspect", aspect="runtime")]
    line = shown(console.render, node_document(more), more, width=200).splitlines()[0]
    assert "(6 results from 5 checks) in 2.5 s" in line
    assert "results from" not in shown(console.render, node_document(found), found, width=200).splitlines()[0]
    two = [more[1], more[-1]]
    assert "(2 results from 1 check) in" in shown(console.render, node_document(two), two, width=200)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_pipe_hears_of_each_check_started_once_the_run_is_slow() -> None:
    out, clock = io.StringIO(), Clock()
    progress = console.LiveProgress(Console(file=out), 4, quiet_s=3.0, clock=clock)
    with progress.context():
        for seconds, check_id in ((0.5, "driver.nvml"), (2.0, "torch.import"), (4.0, "ddp.train"), (9.0, "load.x")):
            clock.now = 100.0 + seconds
            progress("start", check_id, f"{check_id} title")
            progress("done", check_id, f"{check_id} title")
    assert out.getvalue() == "[3/4] ddp.train: ddp.train title ...\n[4/4] load.x: load.x title ...\n"


def test_a_quick_run_stays_silent_in_a_pipe_and_a_terminal_keeps_its_live_line() -> None:
    out, clock = io.StringIO(), Clock()
    progress = console.LiveProgress(Console(file=out), 2, clock=clock)
    with progress.context():
        progress("start", "driver.nvml", "NVML")
        progress("done", "driver.nvml", "NVML")
    assert out.getvalue() == ""
    terminal = console.LiveProgress(Console(file=io.StringIO(), force_terminal=True), 38, quiet_s=0, clock=clock)
    with terminal.context():
        terminal("done", "driver.nvml", "NVML")
        clock.now += 60
        terminal("start", "ddp.train", "ResNet DDP")
        assert terminal.progress is not None
        assert terminal.progress.tasks[0].description == "[2/38] ddp.train: ResNet DDP"


# --- list: whole first sentences --------------------------------------------------------------------------------
def test_every_builtin_description_is_a_whole_sentence() -> None:
    for spec in discover(entry_points=False).specs:
        words = spec.description.split()
        assert spec.description[-1] in ".)]", (spec.id, spec.description)
        assert not spec.description.endswith((";", ",")), spec.id
        assert words[-1].lower() not in ("a", "the", "and", "of"), spec.id


@pytest.mark.parametrize(
    ("docstring", "sentence"),
    [
        ("One line.", "One line."),
        ("Runs over\n    two lines; judging a\n    capture. Then more.", "Runs over two lines; judging a capture."),
        ("Stops at the paragraph\n\n    Second paragraph.", "Stops at the paragraph"),
        ("Abbreviations, e.g. this, i.e. that. End.", "Abbreviations, e.g. this, i.e. that."),
        ("torch.version.cuda against the driver.", "torch.version.cuda against the driver."),
    ],
)
def test_a_description_is_the_first_sentence_of_the_first_paragraph(docstring: str, sentence: str) -> None:
    assert first_sentence(docstring) == sentence


def test_a_description_too_long_is_cut_at_a_word() -> None:
    cut = first_sentence("word " * 200, limit=50)
    assert cut.endswith("word...") and len(cut) <= 50


def test_list_shows_the_whole_sentence_with_no_trailing_spaces() -> None:
    env = {**os.environ, "COLUMNS": "400"}
    text = subprocess.run([sys.executable, "-m", "gpudoctor", "list"], capture_output=True, text=True, env=env).stdout
    line = next(line for line in text.splitlines() if line.startswith("torch.cuda-driver "))
    assert line.endswith("the driver against every current torch CUDA wheel.")
    assert not [line for line in text.splitlines() if line != line.rstrip()]


# --- --help ends with examples ----------------------------------------------------------------------------------
def help_text(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*args, "--help"])
    return out.getvalue()


@pytest.mark.parametrize(("args", "pairs"), [((), EXAMPLES), (("check",), CHECK_EXAMPLES)])
def test_help_ends_with_examples_that_parse(args: tuple[str, ...], pairs: tuple[tuple[str, str], ...]) -> None:
    text = help_text(*args)
    tail = text[text.index("examples:") :].splitlines()[1:]
    commands = [line.strip() for line in tail if not line.strip().startswith("#")]
    assert commands == [command for command, _ in pairs], "each command whole, on its own line, last"
    for command in commands:
        words = shlex.split(command)
        build_parser().parse_args(words[words.index("gpudoctor") + 1 :])
    for wanted in ("--level standard", "--from", "srun ", "torchrun ", "-m gpudoctor check"):
        assert wanted in text
    if not args:
        assert "gpudoctor report rank0.json --html page.html" in text
