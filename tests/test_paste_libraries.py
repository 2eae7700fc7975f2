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


# CPython's traceback of an import that loads a compiled module (traceback.format_exception's frame lines), as an
# extension package built for CUDA 12 raises it beside a torch of CUDA 11.
PACKAGE_TRACEBACK = """Traceback (most recent call last):
  File "/home/user/train.py", line 2, in <module>
    import example_ext
  File "/home/user/env/lib/python3.10/site-packages/example_ext/__init__.py", line 3, in <module>
    from ._C import kernel
ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"""
TORCH_TRACEBACK = """Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/transformers/__init__.py", line 26, in <module>
    import torch
  File "/usr/local/lib/python3.10/dist-packages/torch/__init__.py", line 235, in <module>
    from torch._C import *
ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"""


def test_the_package_is_the_innermost_frame_unless_torch_own_load_failed() -> None:
    assert read(PACKAGE_TRACEBACK).package == "example_ext"
    assert read(TORCH_TRACEBACK).package is None
    assert read("!pip install example-ext\nImportError: libcudart.so.12: cannot open shared object file").package == (
        "example-ext"
    )
    assert read("pip install -U --no-cache-dir torch\nImportError: x").package is None
    assert read("pip install example-ext -f https://example.org/whl/cu118.html").package == "example-ext"
    for line in ("pip install -r requirements.txt", "pip install -e .", "pip install ./dist/example_ext-1.0.whl"):
        assert read(line).package is None, line
    assert read("pip install --index-url https://example.org/simple example-ext").package == "example-ext"


def test_without_a_frame_the_package_is_the_module_the_failing_import_statement_names() -> None:
    """CPython's traceback prints each frame's source line right above the exception line (traceback module,
    "print_exception"): a paste cut to its last two lines still names the module whose import failed."""
    assert (
        read("from example_ext import kernels\nImportError: libcudart.so.12: cannot open shared object file").package
        == "example_ext"
    )
    assert (
        read("    import example_ext.ops as ops\nOSError: libcublas.so.11: cannot open shared object file").package
        == "example_ext"
    )
    assert read("from torch._C import *\nImportError: libcudart.so.12: cannot open shared object file").package is None
    assert read("from example_ext import kernels\nprint('ok')\nImportError: x").package is None
    assert read("# from example_ext import kernels\nImportError: x").package is None


def cure_of(package: str | None, torch_cuda: str | None) -> list[str]:
    from gpudoctor.paste import cures

    facts = {"paste": {"package": package} if package else {}, "torch": {"cuda": torch_cuda} if torch_cuda else {}}
    made = cures.cure("cuda-library-not-found", {"library": "libcudart.so.12"}, facts)
    assert made is not None
    return [*made.commands, *(made.instead.commands if made.instead else [])]


def test_a_package_built_for_another_cuda_major_gets_its_build_for_torch_or_a_torch_for_its_cuda() -> None:
    """CUDA's binary compatibility holds within a major: a package loading libcudart.so.12 beside torch of CUDA 11
    (or an unknown CUDA) needs its build for torch's CUDA, a source build, or a torch of CUDA 12."""
    for torch_cuda in ("11.3", None):
        commands = cure_of("example_ext", torch_cuda)
        assert (
            "pip show example_ext  # the version installed; its releases say which CUDA each build is for" in commands
        )
        assert any("--no-binary example_ext example_ext" in c for c in commands)
        assert any("torch==" in c and "+cu12" in c for c in commands)


def test_torch_own_cuda_runtime_missing_keeps_the_library_path_cure() -> None:
    for package, torch_cuda in ((None, "11.3"), ("example_ext", "12.1")):
        commands = cure_of(package, torch_cuda)
        assert 'echo "$LD_LIBRARY_PATH"' in commands and not any("example_ext" in c for c in commands)


def test_an_imported_package_module_is_not_the_script_its_fixes_rerun() -> None:
    """A package's __init__.py runs "in <module>" as it is imported: the script is the frame outside the packages."""
    assert read(PACKAGE_TRACEBACK).script == "/home/user/train.py"
    assert read(PACKAGE_TRACEBACK.replace('/home/user/train.py", line 2', '<input>", line 1')).script is None


# ComfyUI's Windows portable runs its own Python from the portable folder (ComfyUI
# .ci/windows_nvidia_base_files/run_nvidia_gpu.bat: `.\python_embeded\python.exe -s ComfyUI\main.py`): a traceback
# through it names the folder, and a pip of another Python would install torch where ComfyUI never looks.
PORTABLE_CPU_TORCH = r"""  File "C:\CUI\python_embeded\Lib\site-packages\torch\cuda\__init__.py", line 310
    raise AssertionError("Torch not compiled with CUDA enabled")
AssertionError: Torch not compiled with CUDA enabled"""


def test_a_comfyui_portable_paste_reinstalls_torch_with_the_portables_own_python() -> None:
    from gpudoctor.paste import cures, summary

    found = read(PORTABLE_CPU_TORCH)
    assert summary(found)["python"] == "comfyui-portable"
    made = cures.cure("torch-not-compiled-with-cuda", {}, {"paste": summary(found)})
    assert made is not None
    assert made.commands[0].startswith(r".\python_embeded\python.exe -s -m pip install --force-reinstall torch==")
    assert "--index-url https://download.pytorch.org/whl/cu" in made.commands[0]
    plain = read(PORTABLE_CPU_TORCH.replace("python_embeded", "python310"))
    assert "python" not in summary(plain)
    made = cures.cure("torch-not-compiled-with-cuda", {}, {"paste": summary(plain)})
    assert made is not None and made.commands[0].startswith("pip install --force-reinstall torch==")
