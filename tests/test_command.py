"""One way to build a command (gpudoctor/command.py): named slots filled with values checked for their kind and quoted,
a Command in every Remediation, every printed command one the shell reads into the words it was filled with, and no
command built by formatting text or by replacing text in another command anywhere in the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import bashlex
import pytest
from helpers.common import PASTES, ROOT, SNAPSHOTS
from test_hostile_commands import without_comment

from gpudoctor import probe
from gpudoctor.command import SLOTS, Command, command
from gpudoctor.model import Remediation, Row, Status, aimed
from gpudoctor.words import KINDS, Unsafe


def test_a_slot_takes_a_value_of_its_kind_quoted() -> None:
    assert command("kill {pids}", pids=[12, 34]) == "kill 12 34"
    assert command("python {script}", script="-mhttp.server.py") == "python ./-mhttp.server.py"
    with pytest.raises(Unsafe):
        command("ls {path}", path="/tmp/a b")  # a word never holds a space
    with pytest.raises(Unsafe):
        command("pip install torch=={release}", release="2.15.0; curl x | sh")
    with pytest.raises(Unsafe):
        command("export NCCL_SOCKET_IFNAME={interface}", interface="-eth0")
    assert command("CUDA_LAUNCH_BLOCKING=1 python {script|train.py}") == "CUDA_LAUNCH_BLOCKING=1 python train.py"
    assert command("python {script|train.py}", script="$(reboot).py") == "python train.py"


def test_every_slot_names_a_kind_of_word() -> None:
    assert set(SLOTS.values()) <= set(KINDS)


def test_an_open_slot_is_filled_where_the_gpus_are_known_or_the_command_is_left_out() -> None:
    open_ = command("nvidia-smi -q -i {gpu}")
    assert open_.open == ("gpu",) and "{" not in open_
    cure = Remediation("why", [open_, "nvidia-smi -L"])
    bad = [Row(Status.FAIL, "x", index=3), Row(Status.FAIL, "y", index=5)]
    assert aimed(cure, bad).commands == ["nvidia-smi -q -i 3,5", "nvidia-smi -L"]
    assert aimed(cure, []).commands == ["nvidia-smi -L"]
    hostile = [Row(Status.FAIL, "x", pci_bus_id="00000000:3B:00.0; reboot")]
    assert aimed(cure, hostile).commands == ["nvidia-smi -L"]


def test_text_given_to_a_remediation_is_a_literal_command() -> None:
    fixed = Remediation("why", ["nvidia-smi", command("kill {pid}", pid=1)])
    assert all(isinstance(c, Command) for c in fixed.commands)
    assert fixed.commands[0].template == "nvidia-smi" and not fixed.commands[0].words


def cases() -> list[Path]:
    snapshots = sorted(SNAPSHOTS.glob("*.json"))
    pastes = [p for folder in sorted(PASTES.iterdir()) if folder.is_dir() for p in sorted(folder.glob("*.txt"))[:6]]
    return snapshots + pastes


def all_commands(report: probe.Report) -> list[object]:
    found = []
    fixes = [r.remediation for r in report.results]
    for fix in fixes:
        while fix is not None:
            found += fix.commands
            fix = fix.instead
    return found


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.name)
def test_every_printed_command_is_a_command_the_shell_reads_into_its_words(path: Path) -> None:
    for made in all_commands(probe.run(from_file=str(path))):
        assert isinstance(made, Command), repr(made)
        code = without_comment(made)
        tokens = [w for tree in bashlex.parse(code) for w in _words(tree)]
        for name, value in made.values:
            for one in map(str, value if isinstance(value, list | tuple) else [value]):
                if one in code:
                    assert any(one in token for token in tokens), (made, name, one, tokens)
                else:  # a slot in the command's comment: there as written
                    assert one in made[len(code) :], (made, name, one)


def _words(tree: object) -> list[str]:
    found: list[str] = []

    class Visitor(bashlex.ast.nodevisitor):
        def visitword(self, node: object, word: str) -> None:
            found.append(word)

    Visitor().visit(tree)
    return found


# A string that starts like a command a fix prints (or the placeholders the old ways used).
COMMAND_START = re.compile(
    r"(?:sudo|pip|python|nvidia-smi|gpudoctor check|scontrol|docker|kubectl|export|unset|kill|ps|mpirun|srun|"
    r"torchrun|printf|apt|dnf|zypper|modprobe|wget|start|echo|grep|ls|ip|ethtool|ibv_devinfo|[A-Z][A-Z0-9_]+=\S)"
    r"(?: |$)"
)
OLD_WAYS = ("<GPU>", '.partition(" ./build/")', '.replace("pip install', "`([^`]+)`")


def python_files() -> list[Path]:
    return [p for folder in ("gpudoctor", "checks") for p in sorted((ROOT / folder).rglob("*.py"))]


def test_no_command_is_built_by_formatting_text() -> None:
    """An f-string or .format() whose text starts like a command is a command built by formatting: every value
    goes through a slot instead."""
    found = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            head = None
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                head = str(node.values[0].value)
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "format":
                value = getattr(node.func, "value", None)
                head = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
            if head is not None and COMMAND_START.match(head):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {head[:50]!r}")
    assert not found, found


def test_no_command_is_made_by_replacing_text_in_another() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {way}" for path in python_files() for way in OLD_WAYS if way in path.read_text()
    ]
    assert not found, found
