"""Fix commands built from words: a value from the facts (a paste, a snapshot, a capture: text somebody else wrote)
goes into a command only after it is checked for what it must be (a version is a version, an interface name what
the kernel allows), and quoted for the shell; a value that fails its check drops the command, and the fix says
why. Pure; nothing here runs anything."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from gpudoctor.model import Remediation

# What each kind of value may be. Each is the whole of the value (re.fullmatch), bounded, and has no character a
# shell reads as anything but a letter of a word.
KINDS = {
    "version": re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}"),  # 12, 12.4, 2.15.0, 580.159.04
    "release": re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}(?:(?:a|b|rc)\d{1,4})?(?:\.post\d{1,4})?(?:\.dev\d{1,12})?"),
    "variant": re.compile(r"cu\d{2,4}|cpu|rocm\d{1,2}(?:\.\d{1,2}){0,2}|xpu"),  # a wheel's local tag
    "number": re.compile(r"\d{1,12}"),
    # Linux interface names: at most 15 bytes (IFNAMSIZ 16, with its NUL), no '/', no white space, not '.' or '..'
    # (net/core/dev.c dev_valid_name); kept to the characters names are made of, never one that reads as an option.
    "interface": re.compile(r"(?!\.{1,2}$)[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}"),
    "variable": re.compile(r"[A-Z_][A-Z0-9_]{0,63}"),  # an environment variable's name
    "node": re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})"),  # a host name as Slurm lists it
    "word": re.compile(r"[A-Za-z0-9_.:@%+,/=-]{1,200}"),  # a path, a package, a library name
}


class Unsafe(ValueError):
    """A value that is not what its place in a command must be; the message says which and what it was."""


def word(value: Any, kind: str) -> str:
    """`value` as one shell word, where it is a `kind` (KINDS); raises Unsafe where it is not."""
    text = str(value)
    if not KINDS[kind].fullmatch(text):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise Unsafe(f"{shown!r} is not a {kind}")
    return shlex.quote(text)


def fix(why: str, build: Callable[[], list[str]], instead: Remediation | None = None, source: str = "") -> Remediation:
    """A remediation whose commands `build` makes from checked words: where a value fails its check, no command,
    and the reason says which value and why (a command is never printed with a value it could not vouch for)."""
    try:
        commands = build()
    except Unsafe as exc:
        return Remediation(f"{why} (no command given: {exc})", [], instead, source)
    return Remediation(why, commands, instead, source)
