"""Fix commands built from words: a value from the facts (a paste, a snapshot, a capture: text somebody else wrote)
goes into a command only after it is checked for what it must be (a version is a version, an interface name what
the kernel allows), and quoted for the shell; a value that fails its check drops the command, and the fix says
why. Pure; nothing here runs anything."""

from __future__ import annotations

from collections.abc import Callable

from gpudoctor.model import Remediation
from gpudoctor.words import KINDS, Unsafe, word

__all__ = ["KINDS", "Unsafe", "fix", "word"]


def fix(why: str, build: Callable[[], list[str]], instead: Remediation | None = None, source: str = "") -> Remediation:
    """A remediation whose commands `build` makes from checked words: where a value fails its check, no command,
    and the reason says which value and why (a command is never printed with a value it could not vouch for)."""
    try:
        commands = build()
    except Unsafe as exc:
        return Remediation(f"{why} (no command given: {exc})", [], instead, source)
    return Remediation(why, commands, instead, source)
