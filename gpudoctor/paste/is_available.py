"""torch's answer that it sees no GPU as users paste it: torch.cuda.is_available() and False, the result on the next
line that is not blank (Python's interactive prompt, IPython's `Out[n]:`), or after it on the same line (a comment, a
sentence). It is torch-cuda-not-available's fact (data/signatures/node.toml), sighted on the False."""

from __future__ import annotations

import re

from gpudoctor.paste.found import Found

SIGNATURE = "torch-cuda-not-available"
NEEDLE = "cuda.is_available()"
# The call as a statement: the prompt's (">>> ", "In [2]: ", "... "), bare or printed, nothing after it.
CALL = re.compile(r"^\s{0,8}(?:>>>|\.\.\.|In \[\d{1,6}\]:)?\s{0,4}(?:print\()?torch\.cuda\.is_available\(\)\)?\s{0,8}$")
# The interpreter's answer: False alone, or IPython's output cell.
ANSWER = re.compile(r"^\s{0,8}(?:Out\[\d{1,6}\]:\s{0,4})?False\s{0,8}$")
# The answer on the call's own line: a comment or a sentence after the call.
SAID = re.compile(
    r"torch\.cuda\.is_available\(\)\)?\s{0,4}(?:#\s{0,4}|=|==|:|->|returns?\s|is\s|gives\s)\s{0,4}False\b"
)
LOOK_AHEAD = 3  # lines after the call in which its answer is looked for, blank lines skipped


def sight(found: Found, reader: str) -> None:
    """The signature on the first False that answers the call in the paste."""
    for number in found.holding((NEEDLE,)):
        line = found.lines[number]
        if SAID.search(line):
            found.signature(SIGNATURE, reader, number, {})
            return
        if CALL.match(line):
            answer = _answer(found, number)
            if answer is not None:
                found.signature(SIGNATURE, reader, answer, {})
                return


def _answer(found: Found, call: int) -> int | None:
    for number in range(call + 1, min(call + 1 + LOOK_AHEAD, len(found.lines))):
        line = found.lines[number]
        if not line.strip():
            continue
        return number if ANSWER.match(line) else None
    return None
