"""What a value from outside must be before a fix command may hold it: each kind of word as a whole-value
pattern (re.fullmatch), bounded, with no character a shell reads as anything but a letter of a word. Pure, with no
import of gpudoctor's own: the result model aims commands at GPUs with it (model.aimed), the fix builders
(judging/commands.py) at everything else."""

from __future__ import annotations

import re
import shlex
from typing import Any

KINDS = {
    "version": re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}"),  # 12, 12.4, 2.15.0, 580.159.04
    "release": re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}(?:(?:a|b|rc)\d{1,4})?(?:\.post\d{1,4})?(?:\.dev\d{1,12})?"),
    "variant": re.compile(r"cu\d{2,4}|cpu|rocm\d{1,2}(?:\.\d{1,2}){0,2}|xpu"),  # a wheel's local tag
    "number": re.compile(r"\d{1,12}"),
    # Linux interface names: at most 15 bytes (IFNAMSIZ 16, with its NUL), no '/', no white space, not '.' or '..'
    # (net/core/dev.c dev_valid_name); kept to the characters names are made of, never one that reads as an option.
    "interface": re.compile(r"(?!\.{1,2}$)[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}"),
    "variable": re.compile(r"[A-Z_][A-Z0-9_]{0,63}"),  # an environment variable's name
    # A host name as Slurm lists it; never ALL, which scontrol and sinfo read as every node (scontrol(1)).
    "node": re.compile(r"(?!(?i:all)\Z)[A-Za-z0-9][A-Za-z0-9._-]{0,252}"),
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
