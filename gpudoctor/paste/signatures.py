r"""Error signatures: a line a program prints when one known thing is wrong, the check whose cause it is, and
the fix. The table is data (gpudoctor/data/signatures/*.toml), one entry per message, each citing the source
that prints it; this module loads it and finds its lines in a paste.

An entry:

    [[signature]]
    id = "driver-too-old"                  # unique over all files
    owner = "torch.cuda-driver"            # the check the cause belongs to (a check id `gpudoctor list` shows)
    status = "fail"                        # or "warn"
    needle = "is too old (found version"   # a literal every matching line holds (a fast first pass)
    pattern = 'driver on your system is too old \(found version (?P<found>\d+)\)'  # a TOML literal: one backslash
    facts = { found = "nvml.cuda_driver_version:int" }  # optional: named group -> fact path[:int|float|str];
                                           # `_match` is the whole line
    cause = "The driver ... (what it means)"
    fix = ["sudo apt-get install ..."]     # optional commands; {group} takes the match's group, {script|train.py}
                                           # the script a traceback in the paste runs (else the default)
    source = "c10/cuda/CUDAFunctions.cpp device_count_impl(), cudaErrorInsufficientDriver"
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpudoctor.judging.commands import Unsafe, word
from gpudoctor.paste.found import Found

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

READER = "error"
CONVERT = {"int": int, "float": float, "str": str}
WHOLE_LINE = "_match"  # a `facts` key that takes the whole line (the message), not a group


@dataclass(frozen=True)
class Signature:
    id: str
    owner: str
    status: str
    needle: str
    pattern: re.Pattern[str]
    facts: dict[str, str]
    cause: str
    fix: tuple[str, ...]
    source: str
    file: str
    summary: str = ""  # the verdict line, at most SUMMARY_CHARS
    fix_source: str = ""  # what says the fix cures it (the thread that resolved it, the vendor's document)
    fix_from: str = ""  # "owner": the owning check's own fix for what the paste shows (paste/cures.py)
    no_fix: str = ""  # why no command cures it (the cause is elsewhere, or only a person can act)

    @property
    def headline(self) -> str:
        """The verdict line: the signature's `summary`, else its cause's first clause."""
        return self.summary or self.cause.split(". ")[0].split(": ")[0].rstrip(".")

    def fixes(self, values: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The fix commands with the match's groups filled in, each value checked as one shell word and quoted
        (commands.word); a command whose value the paste does not give, or gives as no word, is left out, and
        the second list says why."""
        built, refused = [], []
        for command in self.fix:
            try:
                built.append(PLACE.sub(lambda m: _filled(values, m.group(1), m.group(2)), command))
            except Unsafe as exc:
                refused.append(str(exc))
        return built, refused


PLACE = re.compile(r"\{(\w+)(?:\|([^{}]*))?\}")  # {group}, or {name|default}: the default where the paste lacks it
WHOLE_PASTE = ("script",)  # the values a {name|default} may take from the paste as a whole, not from its match


def _filled(values: dict[str, Any], name: str, default: str | None) -> str:
    kind = "script" if name == "script" else "word"
    if default is not None:
        try:
            return word(values[name], kind) if values.get(name) else default
        except Unsafe:
            return default
    if values.get(name) in (None, ""):
        raise Unsafe(f"the paste does not show the {name}")
    return word(values[name], kind)


@functools.cache
def table() -> dict[str, Signature]:
    """Every signature, by id, from every file under data/signatures."""
    found: dict[str, Signature] = {}
    folder = resources.files("gpudoctor.data").joinpath("signatures")
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if item.name.endswith(".toml"):
            for entry in tomllib.loads(item.read_text(encoding="utf-8")).get("signature", []):
                signature = _signature(entry, item.name)
                if signature.id in found:
                    raise ValueError(f"signature {signature.id} is in {found[signature.id].file} and {item.name}")
                found[signature.id] = signature
    return found


def _signature(entry: dict[str, Any], file: str) -> Signature:
    return Signature(
        id=entry["id"],
        owner=entry["owner"],
        status=entry["status"],
        needle=entry["needle"],
        pattern=re.compile(entry["pattern"]),
        facts=dict(entry.get("facts", {})),
        cause=entry["cause"],
        fix=tuple(entry.get("fix", ())),
        source=entry["source"],
        file=file,
        summary=entry.get("summary", ""),
        fix_source=entry.get("fix_source", ""),
        fix_from=entry.get("fix_from", ""),
        no_fix=entry.get("no_fix", ""),
    )


@functools.cache
def _needles() -> tuple[str, ...]:
    return tuple(sorted({s.needle for s in table().values()}))


# A traceback's first frame of a script run as the main module: the program its fixes run again.
SCRIPT = re.compile(r'File "([^"\n]{1,300}\.py)", line \d{1,9}, in <module>')


def read(found: Found) -> None:
    """Every line that holds a signature's needle, searched with its pattern: a signature for each match, and
    the facts its groups carry; the script a traceback shows (`{script|train.py}` in a fix)."""
    for number in found.holding(_needles()):
        _match_line(found, number, found.lines[number])
    found.script = next(
        (m.group(1) for n in found.holding(("in <module>",)) if (m := SCRIPT.search(found.lines[n]))), None
    )


def _match_line(found: Found, number: int, line: str) -> None:
    for signature in table().values():
        if signature.needle not in line:
            continue
        match = signature.pattern.search(line)
        if not match:
            continue
        values = {k: v for k, v in match.groupdict().items() if v is not None}
        found.signature(signature.id, READER, number, values)
        carried = {**values, WHOLE_LINE: line.strip()}
        for group, target in signature.facts.items():
            if group in carried:
                path, _, kind = target.partition(":")
                found.fact(path, CONVERT[kind or "str"](carried[group]), READER, number)
