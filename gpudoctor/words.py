"""What a value from outside must be before a fix command may hold it: each kind of word as a whole-value
pattern (re.fullmatch), bounded, with no character a shell reads as anything but a letter of a word. Pure, with no
import of gpudoctor's own: the result model aims commands at GPUs with it (model.aimed), the fix builders
(judging/commands.py) at everything else."""

from __future__ import annotations

import re
import shlex
from typing import Any

# re.ASCII: \d is an ASCII digit (never '²' or '１'), as the shell and every tool reading the command count them.
KINDS = {
    "version": re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}", re.ASCII),  # 12, 12.4, 2.15.0, 580.159.04
    "release": re.compile(
        r"\d{1,4}(?:\.\d{1,6}){0,3}(?:(?:a|b|rc)\d{1,4})?(?:\.post\d{1,4})?(?:\.dev\d{1,12})?", re.ASCII
    ),
    "variant": re.compile(r"cu\d{2,4}|cpu|rocm\d{1,2}(?:\.\d{1,2}){0,2}|xpu", re.ASCII),  # a wheel's local tag
    "number": re.compile(r"\d{1,12}", re.ASCII),
    # Linux interface names: at most 15 bytes (IFNAMSIZ 16, with its NUL), no '/', no white space, not '.' or '..'
    # (net/core/dev.c dev_valid_name); kept to the characters names are made of, never one that reads as an option.
    "interface": re.compile(r"(?!\.{1,2}$)[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}", re.ASCII),
    "variable": re.compile(r"[A-Z_][A-Z0-9_]{0,63}", re.ASCII),  # an environment variable's name
    # A host name as Slurm lists it; never ALL, which scontrol and sinfo read as every node (scontrol(1)).
    "node": re.compile(r"(?!(?i:all)\Z)[A-Za-z0-9][A-Za-z0-9._-]{0,252}", re.ASCII),
    # A path, a package, a library name: never one a program reads as an option (a leading dash).
    "word": re.compile(r"[A-Za-z0-9_.:@%+,/=][A-Za-z0-9_.:@%+,/=-]{0,199}", re.ASCII),
    # A Python script a command runs (`python SCRIPT`): a path ending in .py; one whose name starts with a dash
    # gets "./" (RELATIVE), so `python -mhttp.server.py` can never be printed for a file of that name.
    "script": re.compile(r"[A-Za-z0-9_.:@%+,/=][A-Za-z0-9_.:@%+,/=-]{0,196}\.py", re.ASCII),
    # Lists, comma-joined (`nvidia-smi -i 0,3`, `kill -9 12 34`'s PIDs, `scontrol update NodeName=a,b`).
    "gpus": re.compile(r"[A-Za-z0-9][A-Za-z0-9:._-]{0,99}(?:,[A-Za-z0-9][A-Za-z0-9:._-]{0,99}){0,1023}", re.ASCII),
    "numbers": re.compile(r"\d{1,12}(?:,\d{1,12}){0,1023}", re.ASCII),
    "nodes": re.compile(
        r"(?!(?i:all)(?:,|\Z))[A-Za-z0-9][A-Za-z0-9._-]{0,252}(?:,(?!(?i:all)(?:,|\Z))[A-Za-z0-9][A-Za-z0-9._-]{0,252}){0,1023}",
        re.ASCII,
    ),
}
RELATIVE = ("script",)  # kinds a leading dash is made a relative path for, rather than refused


class Unsafe(ValueError):
    """A value that is not what its place in a command must be; the message says which and what it was."""


def word(value: Any, kind: str) -> str:
    """`value` as one shell word, where it is a `kind` (KINDS); raises Unsafe where it is not."""
    text = str(value)
    if kind in RELATIVE and text.startswith("-"):
        text = f"./{text}"
    if not KINDS[kind].fullmatch(text):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise Unsafe(f"{shown!r} is not a {kind}")
    return shlex.quote(text)
