"""The operating system a paste's own paths show, where no output in it states one (collect_env's "OS:" does):
Windows by a drive letter's path into Python's packages, its libraries or programs (and PowerShell's prompt), macOS by
a user's home under /Users, Homebrew's /opt/homebrew, python.org's framework build or a .dylib. A paste that shows
paths of both (or a Linux one beside them: a WSL user's /mnt/c) says neither. Every pattern is bounded, so reading
is linear in the paste's length."""

from __future__ import annotations

import re

from gpudoctor.paste.found import Found

WINDOWS, MACOS = "Windows", "Darwin"  # as Python's platform.system() names them (what collect_env records)
MAC_NEEDLES = ("/Users/", "/opt/homebrew/", "Python.framework/", ".dylib")
MAC_PATH = re.compile(
    r"(?<![A-Za-z:])/Users/[^/\s]{1,100}/|/opt/homebrew/|/Library/Frameworks/Python\.framework/|\.dylib\b"
)
WINDOWS_NEEDLES = (":\\", "PS C:")
WINDOWS_PATH = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]:\\[^\s\"'<>|*?]{0,200}?(?:\\site-packages\\|\\Lib\\|\.dll\b|\.exe\b|\.pyd\b)"
    r"|^PS [A-Za-z]:\\"
)
LINUX_NEEDLES = ("/home/", "/opt/conda", "/mnt/", "/root/", "/workspace/", "dist-packages")  # Linux alone


def macos(found: Found) -> bool:
    return any(MAC_PATH.search(found.lines[n]) for n in found.holding(MAC_NEEDLES))


def windows(found: Found) -> bool:
    return any(WINDOWS_PATH.search(found.lines[n]) for n in found.holding(WINDOWS_NEEDLES))


def system(found: Found) -> str | None:
    """Windows or Darwin where the paste's paths show one of them alone, else None."""
    shown = [name for name, seen in ((WINDOWS, windows(found)), (MACOS, macos(found))) if seen]
    if len(shown) != 1 or found.holding(LINUX_NEEDLES):
        return None
    return shown[0]
