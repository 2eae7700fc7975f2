"""What the readers of a paste found: facts in the snapshot's own shape (facts/schema.py), where each came
from (reader, line number, the line itself), facts that two places state differently, and error signatures.

A reader never decides a verdict: it records what the text says. A value found twice alike is kept once
(the first place is its origin); found twice unalike, both are kept as a conflict and the first stays the
fact, so a judge still has one to read and the conflict is a finding of its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.files import MAX_DEPTH, depth

QUOTED = 300  # characters of a line kept as evidence
SIGHTINGS = 20  # lines kept per signature, values per conflicting fact: a flood of one error (timestamped, so
# each line differs) is one finding


@dataclass(frozen=True)
class Origin:
    """Where a fact or a signature was read: the reader, the 1-based line number in the paste, the line."""

    reader: str
    line: int
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"reader": self.reader, "line": self.line, "text": self.text}


LONGEST_NUMBER = 40  # digits: the longest number a GPU tool prints is a 32-digit UUID's hex, a 20-digit counter
DIGIT_RUN = re.compile(rf"\d{{{LONGEST_NUMBER + 1},}}")


def _cut_number(match: re.Match[str]) -> str:
    return match.group()[:LONGEST_NUMBER] + "…"


@dataclass
class Found:
    lines: list[str]
    facts: dict[str, dict[str, Any]] = field(default_factory=lambda: {"nvml": {}, "torch": {}, "system": {}})
    origins: dict[str, Origin] = field(default_factory=dict)
    conflicts: dict[str, list[tuple[Any, Origin]]] = field(default_factory=dict)
    signatures: list[dict[str, Any]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)  # reader -> how many things it recognised
    script: str | None = None  # the script a traceback shows run as the main module
    package: str | None = None  # the package whose import failed: a traceback's innermost site-packages folder
    python: str | None = None  # the bundled Python a path shows (compat.BUNDLED_PIP's names), where one does
    shown_os: str | None = None  # the operating system the paste's own paths show (paths.py), where they show one
    apps: tuple[str, ...] = ()  # the applications the paste shows (signatures.APPS), whose own fixes lead
    _sighted: dict[str, set[str]] = field(default_factory=dict, init=False)  # signature id -> its lines kept
    text: str = field(init=False)  # the lines joined by "\n": what `holding` and `matching` search in one pass

    def __post_init__(self) -> None:
        self.text = "\n".join(self.lines)

    @classmethod
    def of(cls, text: str) -> Found:
        """A paste's text split into lines as every reader reads them (any newline convention), each run of more
        than LONGEST_NUMBER digits cut to that many and marked: no reader then converts a number Python refuses
        (over 4,300 digits) or one that takes quadratic time to convert."""
        text = DIGIT_RUN.sub(_cut_number, text.replace("\r\n", "\n").replace("\r", "\n"))
        return cls(text.split("\n"))

    def holding(self, needles: Iterable[str]) -> list[int]:
        """The numbers (0-based, ascending) of the lines that hold any of `needles`, found with str.find over the
        whole text: a reader then visits only its own lines, whatever else a paste holds."""
        text, starts = self.text, set()
        for needle in needles:
            at = text.find(needle)
            while at >= 0:
                starts.add(text.rfind("\n", 0, at) + 1)
                at = text.find(needle, self._next_line(at))
        return self._numbers(sorted(starts))

    def matching(self, pattern: re.Pattern[str]) -> list[int]:
        """The numbers (0-based, ascending) of every line a match of `pattern` over the whole text touches
        (anchor it at `^` with re.MULTILINE, so that a line gives one match however often it holds the text): a
        match that runs over a newline names all the lines it spans, so the line a reader wants is among them."""
        numbers: list[int] = []
        text, count = self.text, self.text.count
        line = at = 0
        for match in pattern.finditer(text):
            start, end = match.span()
            line += count("\n", at, start)
            at = start
            if numbers and numbers[-1] >= line:
                continue
            if end - start > 1 and (spans := count("\n", start, end - 1)):
                numbers.extend(range(line, line + spans + 1))
            else:
                numbers.append(line)
        return numbers

    def _next_line(self, at: int) -> int:
        """Where the line after the one at offset `at` begins (past the end where there is none)."""
        end = self.text.find("\n", at)
        return len(self.text) + 1 if end < 0 else end + 1

    def _numbers(self, starts: list[int]) -> list[int]:
        """The line numbers of ascending offsets where lines begin."""
        numbers, line, at = [], 0, 0
        for start in starts:
            line += self.text.count("\n", at, start)
            numbers.append(line)
            at = start
        return numbers

    def origin(self, reader: str, line: int) -> Origin:
        """`line` is 0-based, an index into `lines`."""
        text = self.lines[line].strip() if 0 <= line < len(self.lines) else ""
        return Origin(reader, line + 1, text if len(text) <= QUOTED else text[: QUOTED - 3] + "...")

    def fact(self, path: str, value: Any, reader: str, line: int) -> None:
        """Record the fact at `path`, dotted in the snapshot ("torch.version", "nvml.driver_version",
        "torch.cudnn.version", "system.shm_bytes"); `line` is 0-based. None is a value ("CUDA used to build
        PyTorch: None" says a CPU build): a reader that found nothing records nothing."""
        where = self.origin(reader, line)
        self.kinds[reader] = self.kinds.get(reader, 0) + 1
        *parents, leaf = path.split(".")
        node = self._node(parents)
        if leaf not in node or _completes(value, node[leaf]):
            node[leaf] = value
            self.origins[path] = where
        elif node[leaf] != value and not _completes(node[leaf], value):
            known = self.conflicts.setdefault(path, [(node[leaf], self.origins[path])])
            if len(known) < SIGHTINGS and all(v != value for v, _ in known):
                known.append((value, where))

    def derived(self, path: str, value: Any, why: str) -> None:
        """A fact the paste does not state but that follows from what it states and gpudoctor's own tables
        (an official build's arch list from its version); `why` says so. Never over a stated fact."""
        *parents, leaf = path.split(".")
        node = self._node(parents)
        if leaf not in node:
            node[leaf] = value
            self.origins[path] = Origin("derived", 0, why)

    def gpu(self, index: int, facts: dict[str, Any], reader: str, line: int) -> None:
        """Record facts of the GPU nvidia-smi numbers `index` (GpuFacts fields: name, pci_bus_id, uuid, ...)."""
        gpus = self.facts["nvml"].setdefault("gpus", [])
        while len(gpus) <= index:
            gpus.append({"index": len(gpus)})
        for name, value in facts.items():
            self.fact(f"nvml.gpus.{index}.{name}", value, reader, line)

    def append(self, path: str, item: Any, reader: str, line: int) -> None:
        """Add `item` to the list at `path` ("system.kernel_log.xids"); where each came from is the item's
        own business (give it `line`)."""
        *parents, leaf = path.split(".")
        self._node(parents).setdefault(leaf, []).append(item)
        self.origins.setdefault(path, self.origin(reader, line))
        self.kinds[reader] = self.kinds.get(reader, 0) + 1

    def signature(self, id: str, reader: str, line: int, values: dict[str, Any] | None = None) -> None:
        """An error signature (data/signatures.toml `id`) at `line` (0-based), with what it carried."""
        where = self.origin(reader, line)
        seen = self._sighted.setdefault(id, set())
        if len(seen) >= SIGHTINGS or where.text in seen:
            return
        seen.add(where.text)
        self.signatures.append({"id": id, **where.as_dict(), "values": dict(values or {})})
        self.kinds[reader] = self.kinds.get(reader, 0) + 1

    def _node(self, parents: list[str]) -> dict[str, Any]:
        node: Any = self.facts
        for key in parents:
            if isinstance(node, list):
                node = node[int(key)]
                continue
            node = node.setdefault(key, {})
        return node


def _completes(whole: Any, cut: Any) -> bool:
    """`whole` is the text `cut` is a shortened form of (nvidia-smi's table cuts names to "NVIDIA GeForce ..."),
    or the record `cut` holds part of (the table's GPU-Util beside a query's utilization.gpu and .memory)."""
    if isinstance(whole, dict) and isinstance(cut, dict):
        return whole != cut and all(key in whole and whole[key] == value for key, value in cut.items())
    if not (isinstance(whole, str) and isinstance(cut, str) and cut.endswith("...")):
        return False
    return whole != cut and whole.startswith(cut[:-3].rstrip())


def json_blocks(found: Found, key: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Each JSON object in the paste with `key` at its top: the lines it spans (0-based, end exclusive) and the
    object. jsoncpp's styled output puts the opening brace on a line of its own, the key on the next. An object
    nested deeper than any tool writes (files.MAX_DEPTH) is no tool's, and is left unread: the decoder's own
    recursion fails past about a thousand levels, and a reader walking it could fail below that."""
    quoted = f'"{key}"'
    blocks: list[tuple[int, int, dict[str, Any]]] = []
    decoder = json.JSONDecoder()
    after = -1
    for number in found.holding((quoted,)):
        if number <= after or not found.lines[number].lstrip().startswith(quoted):
            continue
        start = next((n for n in range(number - 1, max(number - 4, -1), -1) if found.lines[n].strip() == "{"), None)
        if start is None:
            continue
        text = "\n".join(found.lines[start : start + 200_000])
        try:
            obj, size = decoder.raw_decode(text.lstrip())
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get(key), dict) and depth(obj) <= MAX_DEPTH:
            after = start + text.lstrip()[:size].count("\n")
            blocks.append((start, after + 1, obj))
    return blocks


def listed(value: Any) -> list[Any]:
    """A JSON value that should be a list, as one: anything else (a string, a number, null) as none."""
    return value if isinstance(value, list) else []
