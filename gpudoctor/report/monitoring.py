"""What the formats monitoring systems parse (report/nagios.py, npd.py, junit.py) share: the worst finding, a
result's label, and text made one line and cut to a byte limit. Each reads the report document only."""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.model import SEVERITY, Status


def worst_finding(document: dict[str, Any]) -> dict[str, Any] | None:
    """What the report leads with: the most severe of the causes the diagnosis found (as a finding labelled
    `cause:<id>`) and the non-passing results no cause explains, a cause first among equals, then run order."""
    causes = [
        {"check_id": "cause", "aspect": c["id"], "status": c["status"], "summary": c["summary"]}
        for c in document.get("causes") or []
        if c["status"] not in ("pass", "skip")
    ]
    bad = [r for r in document["checks"] if r["status"] not in ("pass", "skip") and not r.get("explained_by")]
    return max([*causes, *bad], key=lambda r: SEVERITY[Status(r["status"])], default=None)


def label(result: dict[str, Any]) -> str:
    """`check_id`, or `check_id:aspect` for a result about one aspect of its check."""
    return result["check_id"] + (f":{result['aspect']}" if result["aspect"] else "")


def one_line(text: str) -> str:
    """Whitespace runs (newlines included) as one space, and `|` (a plugin's perfdata separator) as `/`."""
    return re.sub(r"\s+", " ", text).strip().replace("|", "/")


def cut(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, cut between characters, `...` where it was cut."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode(errors="ignore") + "..."
