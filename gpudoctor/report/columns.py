"""A table of plain text in columns, laid out without Rich: `gpudoctor list` prints its ASCII rows through it (Rich's
import and layout would cost it more than `--help` does in all). The width is the one Rich would choose (COLUMNS,
else the terminal's, else 80; never under MIN_WIDTH); a cell too wide for its column wraps at its spaces, and a
word too long for it is cut; no line ends in spaces and none begins with `$` (only a command does)."""

from __future__ import annotations

import os
from collections.abc import Sequence

MIN_WIDTH = 40  # COLUMNS=0 printed nothing, COLUMNS=5 a letter a line: a report needs this much to be read
GAP = "  "


def terminal_width(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The width Rich's console takes (rich/console.py, Console.size): COLUMNS where it is digits, else the first of
    stdin, stdout and stderr that is a terminal, else 80; at least MIN_WIDTH."""
    width = 0
    for descriptor in (0, 1, 2):
        try:
            width = os.get_terminal_size(descriptor).columns
            break
        except (OSError, ValueError):
            continue
    columns = environ.get("COLUMNS", "")
    if columns.isascii() and columns.isdigit():
        width = int(columns)
    return max(width or 80, MIN_WIDTH)


def plain(cells: Sequence[str]) -> bool:
    """Whether every cell is printable ASCII, whose width is its length (a wide or combining character is not)."""
    return all(cell.isascii() and cell.isprintable() for cell in cells)


def lines(rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """`rows` (the header first) laid out in columns no wider together than `width` (the widest column gives up
    space first, down to a character), each cell wrapped in its column."""
    widths = _widths(rows, width)
    laid = []
    for row in rows:
        wrapped = [_wrap(cell, column) for cell, column in zip(row, widths, strict=True)]
        for depth in range(max(len(cell) for cell in wrapped)):
            parts = [(c[depth] if depth < len(c) else "").ljust(w) for c, w in zip(wrapped, widths, strict=True)]
            laid.append(_unlike_a_command(GAP.join(parts).rstrip()))
    return laid


def _widths(rows: Sequence[Sequence[str]], width: int) -> list[int]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    room = max(width - len(GAP) * (len(widths) - 1), len(widths))
    while sum(widths) > room:
        widest = widths.index(max(widths))
        widths[widest] -= max(1, min(sum(widths) - room, widths[widest] - sorted(widths)[-2]))
    return widths


def _wrap(cell: str, width: int) -> list[str]:
    """`cell` in lines of at most `width`, broken at its spaces; a word longer than a line is cut."""
    wrapped: list[str] = []
    line = ""
    for word in cell.split():
        while len(word) > width:
            if line:
                wrapped.append(line)
                line = ""
            wrapped.append(word[:width])
            word = word[width:]
        if line and len(line) + 1 + len(word) <= width:
            line = f"{line} {word}"
        else:
            if line:
                wrapped.append(line)
            line = word
    return [*wrapped, line] if line or not wrapped else wrapped


def _unlike_a_command(line: str) -> str:
    """As the console's `emit`: a line that would begin with `$` begins with `…` instead."""
    text = line.lstrip()
    return f"{line[: len(line) - len(text)]}…{text}" if text.startswith("$") else line
