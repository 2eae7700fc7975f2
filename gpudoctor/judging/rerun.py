"""The fix that runs a user's nccl-tests run again (checks/benchmarks.py): gpudoctor's own `{rerun}` in a
command's text becomes the run's own command line, its collective, ranks and hosts filling checked slots."""

from __future__ import annotations

from typing import Any

from gpudoctor.command import Command, command
from gpudoctor.judging.commands import fix, word
from gpudoctor.model import Remediation

# Where a fix runs the test again: the run's own collective, its ranks (one process per GPU, on its hosts) and
# sizes up to 8 GiB; filled in from the run (rerun), after any variables the fix sets.
RERUN = "{rerun}"


def rerun_in(cure: Remediation | None, run: dict[str, Any]) -> Remediation | None:
    """The fix with RERUN made this run's command (rerun); a run whose collective, ranks or hosts are
    not words a command may hold loses those commands, and the reason says so."""
    if cure is None or not any(RERUN in c for c in cure.commands):
        return cure

    def built() -> list[Command]:
        return [rerun(c, run) if RERUN in c else c for c in cure.commands]

    return fix(cure.why, built, cure.instead, cure.source)


def rerun(fix_command: str, run: dict[str, Any]) -> Command:
    """`NCCL_X=1 {rerun} | grep ...` (gpudoctor's own text) as this run's command: one process per GPU, as
    nccl-tests' README runs it (`mpirun -np 8 -H a:4,b:4 ./build/all_reduce_perf -b 1G -e 8G -f 2 -g 1`); under
    mpirun each setting goes to every rank (-x). The run's collective, ranks and hosts fill checked slots."""
    before, _, after = fix_command.partition(RERUN)
    program = "./build/{collective}_perf -b 1G -e 8G -f 2 -g 1" + after
    ranks, hosts = run.get("ranks") or 1, run.get("hosts") or []
    collective = run.get("collective") or "all_reduce"
    if ranks <= 1:
        return command(before + program, collective=collective)
    spread = len(hosts) > 1 and ranks % len(hosts) == 0
    each = ranks // len(hosts) if spread else 0
    placed = [f"{word(host, 'node')}:{each}" for host in hosts] if spread else []
    exported = "".join("-x " + setting + " " for setting in before.split())
    launcher = "mpirun -np {count} " + ("-H {hosts} " if spread else "")
    return command(launcher + exported + program, collective=collective, count=ranks, hosts=",".join(placed))
