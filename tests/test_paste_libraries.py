"""Signatures of libraries built for another torch or CUDA (gpudoctor/data/signatures/libraries.toml): the lines
written from the emitters' sources (glibc's dlopen error for the library an extension links), and what each line
is not."""

from __future__ import annotations

import pytest

from gpudoctor.paste import read, signatures

SPLIT = "extension-needs-split-torch-cuda"


def sighted(text: str) -> list[tuple[str, dict[str, str]]]:
    return [(s["id"], s["values"]) for s in read(text).signatures]


@pytest.mark.parametrize("half", ["libtorch_cuda_cu.so", "libtorch_cuda_cpp.so"])
def test_an_extension_asking_for_a_half_of_the_split_torch_cuda_library_was_built_for_another_torch(half: str) -> None:
    """torch/utils/cpp_extension.py (torch 1.8-2.0) linked both halves where torch/lib had them; glibc's dlopen
    names the first it cannot open. The generic missing-library signature does not claim the line as well."""
    line = f"ImportError: {half}: cannot open shared object file: No such file or directory"
    assert sighted(line) == [(SPLIT, {"library": half})]


def test_torch_own_cuda_library_missing_stays_the_missing_library() -> None:
    line = "OSError: libtorch_cuda.so: cannot open shared object file: No such file or directory"
    assert sighted(line) == [("cuda-library-not-found", {"library": "libtorch_cuda.so"})]


def test_the_fix_reads_torch_build_and_rebuilds_the_extension_against_it() -> None:
    commands, refused = signatures.table()[SPLIT].fixes({"library": "libtorch_cuda_cu.so"})
    assert not refused
    assert any("torch.version.cuda" in c for c in commands)
    assert any("--no-build-isolation" in c and "rebuild the extension" in c for c in commands)
