"""What torch says when a GPU allocation fails, read into figures: which GPU (torch's numbering), how much was
asked for, how much the GPU has and had free, and which processes held memory there.

torch's caching allocator (c10/cuda/CUDACachingAllocator.cpp, strings in libc10_cuda.so) words it, since 2.1:
    CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.18 GiB of which 9.56 GiB
    is free. Process 591 has 60.75 GiB memory in use. Including non-PyTorch memory, this process has ...
and before 2.1:
    CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already
    allocated; 2.75 MiB free; 14.60 GiB reserved in total by PyTorch)
Every pattern here is searched on its own and bounded, so reading any text takes time linear in its length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60}
UNITS |= {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
SIZE = r"(\d{1,12}(?:\.\d{1,6})?) ([KMGTPE]?i?B)"
MARK = "CUDA out of memory"
TRIED = re.compile(rf"Tried to allocate {SIZE}")
TRIED_HUGE = "Tried to allocate more than 1EB memory"
NEW_GPU = re.compile(rf"GPU (\d{{1,4}}) has a total capacity of {SIZE} of which {SIZE} is free")
OLD_GPU = re.compile(rf"\(GPU (\d{{1,4}}); {SIZE} total capacity;")
OLD_FREE = re.compile(rf"; {SIZE} free;")
OLD_WINDOW = 200  # characters after the old form's "(GPU n; ... total capacity;" where its free figure is
PROCESS = re.compile(rf"Process (\d{{1,10}}) has {SIZE} memory in use")
THIS = re.compile(rf"this process has {SIZE} memory in use")


@dataclass(frozen=True)
class OutOfMemory:
    """One failed allocation as torch reported it; None where the message does not say."""

    gpu: int | None = None  # torch's device index (cuda:N), not nvidia-smi's
    requested: int | None = None  # bytes
    total: int | None = None
    free: int | None = None
    processes: dict[int, int] = field(default_factory=dict)  # every process torch named on the GPU -> bytes
    this_process: int | None = None

    @property
    def larger_than_gpu(self) -> bool:
        """The request alone is more than the GPU holds: no other process is to blame."""
        return self.requested is not None and self.total is not None and self.requested > self.total

    def said(self) -> str:
        """`on cuda:0: asked for 1.0 GiB with 9.6 GiB free of 79.2 GiB`, as far as torch said."""
        where = f" on cuda:{self.gpu}" if self.gpu is not None else ""
        parts = [f"asked for {gib(self.requested)}" if self.requested is not None else ""]
        if self.free is not None and self.total is not None:
            parts.append(f"with {gib(self.free)} free of {gib(self.total)}")
        text = " ".join(p for p in parts if p)
        return f"{where}: {text}" if text else where


def parse(text: str) -> OutOfMemory | None:
    """The first out-of-memory report in `text`, or None when it holds none."""
    start = text.find(MARK)
    if start < 0:
        return None
    body = text[start : start + 4000]  # one report: torch's message is a few hundred characters
    tried = TRIED.search(body)
    requested = size(*tried.groups()) if tried else (2**60 if TRIED_HUGE in body else None)
    gpu, total, free = _capacity(body)
    this = THIS.search(body)
    return OutOfMemory(
        gpu=gpu,
        requested=requested,
        total=total,
        free=free,
        processes={int(pid): size(n, unit) for pid, n, unit in PROCESS.findall(body)},
        this_process=size(*this.groups()) if this else None,
    )


def _capacity(body: str) -> tuple[int | None, int | None, int | None]:
    found = NEW_GPU.search(body)
    if found:
        index, total, total_unit, free, free_unit = found.groups()
        return int(index), size(total, total_unit), size(free, free_unit)
    found = OLD_GPU.search(body)
    if not found:
        return None, None, None
    index, total, unit = found.groups()
    rest = OLD_FREE.search(body[found.end() : found.end() + OLD_WINDOW])
    return int(index), size(total, unit), size(*rest.groups()) if rest else None


def size(number: str, unit: str) -> int:
    return int(float(number) * UNITS.get(unit, 1))


def gib(count: int | None) -> str:
    return "?" if count is None else f"{count / 2**30:.1f} GiB"
