"""The program's own errors: what a pasted traceback shows of the user's code (a device-side assert, an illegal
memory access in its own kernel, a shape mismatch, a NaN loss, an allocation larger than the GPU). Such a paste
shows no fault of the machine: its verdict is a warning at most, with the next step for the program, and no
check of the machine fails because of it (paste/evidence.py attaches it here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.api import Remediation, Result, Status, check
from gpudoctor.judging import oom

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext

# torch around 2.1 misspelt the newer message's "total capacity" (c10/cuda/CUDACachingAllocator.cpp); the parser
# (judging/oom.py) reads the spelling torch prints today.
MISSPELT = ("total capacty of", "total capacity of")
TOO_LARGE = Remediation(
    "The allocation alone is larger than the whole GPU, so freeing memory or ending other processes cannot make it "
    "fit: the size comes from the program (a tensor shape computed wrongly, a batch, resolution or sequence far too "
    "large). Print the shapes at the line the traceback names, then lower the batch or input size, or split the "
    "model across GPUs.",
    ["nvidia-smi --query-gpu=index,name,memory.total --format=csv  # the memory each GPU has, to size the batch to"],
    source="c10/cuda/CUDACachingAllocator.cpp OutOfMemoryError ('Tried to allocate', 'total capacity'), read by "
    "gpudoctor/judging/oom.py; Kunhao-Liu/StyleGaussian#11 (130674.91 GiB asked on an 80 GB A100: a size the "
    "program computed), wxian3/NeuroLens#2",
)


@check("program.error", "The program's own errors")
def program_error(ctx: CheckContext) -> Result:
    """Nothing to measure: a program's error reaches gpudoctor only in a paste (`--from`)."""
    for line, found in out_of_memory(ctx.facts):
        if found.larger_than_gpu:
            return too_large(line, found)
    return Result(Status.SKIP, "no error of the program's own to judge (one is read from a paste: --from)")


def out_of_memory(facts: dict[str, Any]) -> list[tuple[dict[str, Any], oom.OutOfMemory]]:
    """Each pasted line where torch's allocator says it ran out of memory (whichever signature saw it), read."""
    read: dict[int, tuple[dict[str, Any], oom.OutOfMemory]] = {}
    for sighting in (facts.get("paste") or {}).get("signatures", []):
        found = oom.parse(str(sighting.get("text", "")).replace(*MISSPELT))
        if found is not None and sighting.get("line") not in read:
            read[sighting.get("line")] = (sighting, found)
    return list(read.values())


def too_large(sighting: dict[str, Any], found: oom.OutOfMemory) -> Result:
    where = f"cuda:{found.gpu}" if found.gpu is not None else "the GPU"
    return Result(
        Status.WARN,
        f"the program asks for {oom.gib(found.requested)} on {where}, more than its whole {oom.gib(found.total)}: "
        "not the machine's fault",
        aspect="larger-than-gpu",
        remediation=TOO_LARGE,
        quotes=[f"line {sighting.get('line')}: {sighting.get('text')}"],
    )
