"""A paste from a Mac: where its own paths show macOS, CUDA's absence is the platform's, not a fault to install away.
PyTorch's macOS builds have no CUDA (PyTorch, Get Started: "MacOS Binaries dont support CUDA"; NVIDIA's CUDA
Toolkit dropped macOS after 10.2), and Apple silicon has no NVIDIA GPU at all: a program that asks for CUDA there is
told to use Apple's GPU through the MPS backend, or the CPU. Each sighting that says CUDA is missing becomes
`cuda-on-macos` (data/signatures/platform.toml), a warning of the program's, never a machine's failure; the paths are
read by paste/paths.py."""

from __future__ import annotations

from gpudoctor.paste import paths
from gpudoctor.paste.found import Found

ON_MACOS = "cuda-on-macos"
# What says "no CUDA here" in a paste (data/signatures): a CPU build, no driver library, no GPU, no NCCL.
CUDA_ABSENT = frozenset(
    {
        "torch-not-compiled-with-cuda",
        "torch-compiled-without-cuda",
        "no-nvidia-driver",
        "libcuda-not-found",
        "torch-no-cuda-gpus",
        "torch-nccl-no-gpus",
        "torch-nccl-not-built",
    }
)


def recast(found: Found) -> None:
    """On a Mac, every sighting that says CUDA is missing is the platform's: `cuda-on-macos` at the same line, once."""
    if not any(s["id"] in CUDA_ABSENT for s in found.signatures) or found.shown_os != paths.MACOS:
        return
    kept, seen = [], set()
    for sighting in found.signatures:
        if sighting["id"] in CUDA_ABSENT:
            sighting = {**sighting, "id": ON_MACOS, "values": {}}
            if sighting["text"] in seen:
                continue
            seen.add(sighting["text"])
        kept.append(sighting)
    found.signatures[:] = kept
