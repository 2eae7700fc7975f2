"""A fix command: gpudoctor's own shell text with named slots, each filled by one function (`command`, `fill`) with
a value checked for its slot's kind (words.py) and quoted for the shell. The one way a command is built: never by
formatting text into it, never by replacing text in another command.

    command("nvidia-smi -q -i {gpu}")                  # an open slot, filled where the GPUs are known
    command("kill {pid}", pid=452)                     # 'kill 452'
    command("python {script}", script="-m.py")         # 'python ./-m.py': a script is never an option
    command("pip install torch=={release}", release="2.15.0; rm -rf ~")   # raises Unsafe

A `Command` is a `str` (what every report prints and writes), holding its template and the words it was filled
with. Text with no slots is a literal command, taken as gpudoctor's own (`Remediation` wraps its strings so; a
plugin's are its own). Pure."""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.words import Unsafe, word

# Each slot's kind (words.KINDS). A slot not named here is a word (a path, a package, a library name).
SLOTS = {
    "gpu": "gpus",
    "pid": "numbers",
    "pids": "number",
    "major": "number",
    "check": "word",
    "collective": "word",
    "hosts": "word",
    "count": "number",
    "script": "script",
    "node": "node",
    "nodes": "nodes",
    "interface": "interface",
    "variable": "variable",
    "version": "version",
    "release": "release",
    "vision": "release",
    "variant": "variant",
    "driver": "version",
    "cuda": "version",
    "branch": "number",
    "port": "number",
}
# A slot: {name} or {name|default}, the default gpudoctor's own text used where the value is missing or fails.
SLOT = re.compile(r"\{([a-z][a-z0-9_]{0,30})(?:\|([^{}]{0,200}))?\}")


class Command(str):
    """A command line: its text, the template it was made from, the values its slots were filled with (name, value)
    and the words they became, and the slots still open."""

    template: str
    values: tuple[tuple[str, Any], ...]
    words: tuple[str, ...]
    open: tuple[str, ...]

    def __new__(
        cls,
        text: str,
        template: str | None = None,
        values: tuple[tuple[str, Any], ...] = (),
        words: tuple[str, ...] = (),
        still: tuple[str, ...] = (),
    ) -> Command:
        made = super().__new__(cls, text)
        made.template = text if template is None else template
        made.values, made.words, made.open = values, words, still
        return made

    @classmethod
    def literal(cls, text: str) -> Command:
        """gpudoctor's own text as one command, nothing in it a slot."""
        return text if isinstance(text, Command) else cls(str(text))

    def fill(self, **values: Any) -> Command:
        """This command with its open slots named in `values` filled; raises Unsafe where a value fails its kind."""
        return command(self.template, **{**dict(self.values), **values}) if self.open else self


def command(template: str, **values: Any) -> Command:
    """`template` with each slot filled: the value checked for the slot's kind (SLOTS; a word otherwise) and quoted;
    a list fills the slot with each of its values, space-separated (`kill {pids}`); a missing value takes the slot's
    default, else leaves the slot open (shown as `<name>` and never printed by a
    report: `aimed` fills a GPU slot or drops the command). Raises Unsafe where a value fails its check."""
    filled: list[tuple[str, Any]] = []
    quoted: list[str] = []
    still: list[str] = []

    def put(found: re.Match[str]) -> str:
        name, default = found.group(1), found.group(2)
        value = values.get(name)
        if value in (None, ""):
            if default is not None:
                return default
            still.append(name)
            return f"<{name}>"
        several = value if isinstance(value, list | tuple) else [value]
        try:
            made = [word(one, SLOTS.get(name, "word")) for one in several]
        except Unsafe:
            if default is not None:
                return default
            raise
        filled.append((name, value))
        quoted.extend(made)
        return " ".join(made)

    text = SLOT.sub(put, template)
    return Command(text, template, tuple(filled), tuple(quoted), tuple(still))


def commands(*templates: str, **values: Any) -> list[Command]:
    """Several commands filled from the same values."""
    return [command(t, **values) for t in templates]


def literal(text: str) -> Command:
    return Command.literal(text)


__all__ = ["SLOTS", "Command", "Unsafe", "command", "commands", "literal"]
