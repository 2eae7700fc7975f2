"""The program's own errors: what a pasted traceback shows of the user's code (a device-side assert, an illegal
memory access in its own kernel, a shape mismatch, a NaN loss, an allocation larger than the GPU). Such a paste
shows no fault of the machine: its verdict is a warning at most, with the next step for the program, and no
check of the machine fails because of it (paste/evidence.py attaches it here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.api import Result, Status, check

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext


@check("program.error", "The program's own errors", uses=("torch",))
def program_error(ctx: CheckContext) -> Result:
    """Nothing to measure: a program's error reaches gpudoctor only in a paste (`--from`)."""
    return Result(Status.SKIP, "a program's own error is read from a paste (--from)")
