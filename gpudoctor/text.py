"""The one gate for text from outside: every string from a paste, a snapshot, a file name, the environment or
another node passes `harmless` (or `one_line`) before it reaches a terminal, a file or an error line. Pure, with
no import of gpudoctor's own, so the front door (an error line) can use it without loading anything else."""

from __future__ import annotations

import unicodedata

# The one gate for text from outside (a paste, a snapshot, a file name, the environment, another node): every
# character a terminal obeys or that shows nothing where it stands becomes a visible escape; a line break and a tab
# stay (`one_line` escapes them too). Escaped by Unicode general category: Cc, the C0 and C1 controls (ESC starts
# cursor moves, concealed text, a window title, a clipboard write: ECMA-48 CSI, OSC, DCS, APC; CR and BS rewrite a
# line); Cf, the format characters (the bidirectional controls that can show a command backwards, "Trojan
# Source", CVE-2021-42574; zero-width characters hiding inside a word; the tag characters); Zl and Zp, the line and
# paragraph separators; Cs, a lone surrogate; Cn, a code point this Python's Unicode database does not assign.
ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})
KEPT = frozenset("\n\t")
CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if chr(c) not in KEPT}


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def harmless(text: str) -> str:
    """`text` with every control character a terminal would obey, and every character that reorders or hides text
    unseen, written as a visible escape."""
    text = text.translate(CONTROLS)
    if text.isascii():
        return text
    return "".join(_escape(c) if c > "\x7f" and unicodedata.category(c) in ESCAPED else c for c in text)


def one_line(text: str) -> str:
    """`text` made harmless, its line breaks and tabs escaped too: an error line, a quotation."""
    return harmless(text).replace("\n", "\\n").replace("\t", "\\t")
