"""Run gpudoctor from Python: the same run the `gpudoctor check` command makes (both build an
engine.Request and run it), and every format it writes.

    from gpudoctor import probe

    report = probe.run(only=["health", "driver"])         # gathers only the facts those checks need
    report.exit_code, report.document["status"]           # 0/1, and the JSON report as a dict
    for result in report.results:                         # Result objects: status, summary, rows, metrics
        ...
    print(probe.render(report, "nagios"))                 # console, json, nagios, npd, junit, prometheus, html
    report = probe.load("rank0.json")                     # a saved report, to render again

    report = probe.run(level="standard", cluster=True)    # this node's part of a cluster run (torchrun, srun)

Bad input raises `probe.InputError` (also named `probe.UsageError`) with a one-line message.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from gpudoctor import engine
from gpudoctor.engine import Report, Request
from gpudoctor.errors import InputError
from gpudoctor.report import formats

UsageError = InputError  # the name this API documented first


def run(**options: Any) -> Report:
    """Gather the facts the selected checks need, run them, and build the report (no output anywhere). The keyword
    arguments are the fields of the Request `gpudoctor check` builds from its options (engine/request.py: level,
    only, skip, from_file for --from, live, config, checks_dirs, baseline, strict, timeout, budget, expect_gpus,
    device, cluster, files); an unknown one is a UsageError.

    With `cluster=True`, where the launcher's environment says this process is one node of a cluster run
    (torchrun or srun, one per node), it runs this node's part: rank 0 returns the cluster report (its
    document has a `cluster` object), every other node its own report with rank 0's verdict about it.
    Elsewhere it runs this node alone."""
    unknown = sorted(set(options) - {f.name for f in fields(Request)})
    if unknown:
        raise UsageError(f"probe.run has no option {unknown[0]!r}; the options are Request's fields")
    return engine.run(Request(**options))


def load(path: str) -> Report:
    """A saved JSON report, to render again in any format (a report moved off an air-gapped cluster, or one a
    monitoring pipeline stored); a file that is not one raises an InputError (ReportError) naming the problem."""
    from gpudoctor.report import document

    doc, results = document.load(Path(path))
    return Report(results, doc)


def render(report: Report, fmt: str, verbose: bool = False) -> str:
    """The report as text in any format of the registry (report/formats.py: console, json, nagios, ...)."""
    if fmt not in formats.FORMATS:
        raise UsageError(f"no format {fmt!r}; one of {', '.join(formats.FORMATS)}")
    return formats.text(fmt, report.document, report.results, verbose)
