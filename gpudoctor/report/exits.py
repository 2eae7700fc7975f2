"""Every exit code gpudoctor gives, and how a run's results map to them: gpudoctor's own, and the codes of the
monitoring plugins it answers as (Nagios, node-problem-detector). Each code means one thing whatever happens,
because job hooks act on it: 0 keeps a node in service, 1 drains it, anything else says it was not judged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudoctor.model import Cause, Result, Status

EXIT_OK = 0  # every check passed (warnings allowed)
EXIT_FAIL = 1  # a check failed, or warned under --strict: the node is bad
EXIT_USAGE = 2  # bad input: nothing was judged
EXIT_BROKEN = 3  # gpudoctor itself broke, or could not deliver its report: the node is not judged
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, from the first instant

# The Nagios plugin guidelines' return codes.
NAGIOS_OK, NAGIOS_WARNING, NAGIOS_CRITICAL, NAGIOS_UNKNOWN = 0, 1, 2, 3
NAGIOS_CODES = {Status.PASS: NAGIOS_OK, Status.SKIP: NAGIOS_OK, Status.WARN: NAGIOS_WARNING}  # others: CRITICAL

# A node-problem-detector custom plugin's: 0 OK, 1 NonOK.
NPD_OK, NPD_PROBLEM = 0, 1


def exit_code(results: list[Result], strict: bool, interrupted: bool, causes: Sequence[Cause] = ()) -> int:
    """0 no failures (warnings allowed), 1 any fail/error/timeout of a result or a cause (or a warning with
    --strict), 130 interrupted."""
    if interrupted:
        return EXIT_INTERRUPTED
    statuses = [r.status for r in results] + [c.status for c in causes]
    if any(s.is_failure for s in statuses):
        return EXIT_FAIL
    if strict and Status.WARN in statuses:
        return EXIT_FAIL
    return EXIT_OK


def report_code(document: dict[str, Any]) -> int:
    """The report's own exit code: what the console, JSON and every file format exit with."""
    return int(document["exit_code"])


def nagios_code(document: dict[str, Any]) -> int:
    """The Nagios state of the report's status: OK (pass, skip), WARNING (warn), CRITICAL (anything else)."""
    return NAGIOS_CODES.get(Status(document["status"]), NAGIOS_CRITICAL)


def npd_code(document: dict[str, Any]) -> int:
    """NonOK where the run's own exit code is not 0 (so --strict counts warnings), else OK."""
    return NPD_OK if document["exit_code"] == EXIT_OK else NPD_PROBLEM
