"""Every paste ends in a command that cures it: each signature carries its fix, the owner's cure for what the
paste shows (paste/cures.py, the same fix engine a live run uses), or the reason no command cures it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.common import gpudoctor
from test_hostile_commands import judged_safe

from gpudoctor.paste import cures, signatures


def test_every_signature_has_a_fix_the_owners_cure_or_says_why_none() -> None:
    lacking = [
        s.id
        for s in signatures.table().values()
        if not s.fix and not (s.fix_from == "owner" and s.id in cures.cured()) and not s.no_fix
    ]
    assert lacking == []
    assert {s.id for s in signatures.table().values() if s.fix_from == "owner"} <= set(cures.cured())


@pytest.mark.parametrize("signature_id", cures.cured())
def test_every_cure_gives_commands_the_shell_reads_from_a_bare_paste(signature_id: str) -> None:
    cured = cures.cure(signature_id, {}, {})
    assert cured is not None and cured.why
    for command in [*cured.commands, *(cured.instead.commands if cured.instead else [])]:
        assert not judged_safe(command), command


def checks(tmp_path: Path, text: str) -> dict[str, dict]:
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    document = json.loads(gpudoctor("check", "--from", str(paste), "--json").stdout)
    found = {c["check_id"]: c for c in document["checks"] if c["status"] != "skip"}
    for cause in document["causes"]:  # a finding a cause explains gives its fix to the cause
        for label in cause["explains"]:
            found[label.split(":")[0]]["remediation"] = cause["remediation"]
    return found


def commands(check: dict) -> list[str]:
    fix = check["remediation"] or {}
    return [*fix.get("commands", []), *((fix.get("instead") or {}).get("commands", []))]


def test_a_gpu_torch_has_no_kernels_for_gets_the_build_that_has_them(tmp_path: Path) -> None:
    found = checks(
        tmp_path,
        "UserWarning:\nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
        "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 "
        "sm_90.\n",
    )["torch.arch"]
    installs = [c for c in commands(found) if c.startswith("pip install torch==")]
    assert found["status"] == "fail" and installs, found
    assert all("+cu12" not in c or "+cu128" in c or "+cu129" in c for c in installs), "a build with sm_120 kernels"


def test_no_kernel_image_without_the_gpu_named_gets_both_builds_a_gpu_can_need(tmp_path: Path) -> None:
    """The message names no GPU: it is newer than the build's arch list or older, so the cure installs the newest
    build (newest GPUs) and, instead, the newest build that still has kernels for the oldest GPUs official builds
    cover; both after the two commands that tell which."""
    found = checks(tmp_path, "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    fix = found["torch.arch"]["remediation"]
    assert any("compute_cap" in c for c in fix["commands"])
    newest = [c for c in fix["commands"] if c.startswith("pip install torch==")]
    older = [c for c in (fix["instead"] or {}).get("commands", []) if c.startswith("pip install torch==")]
    assert len(newest) == 1 and len(older) == 1, fix
    assert newest != older
    assert "sm_" in fix["why"] and "sm_" in fix["instead"]["why"]


@pytest.mark.parametrize(
    ("line", "cure"),
    [
        (
            "RuntimeError: CUDA error: forward compatibility was attempted on non supported HW",
            r"cuda-compat|ubuntu-drivers",
        ),
        (
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 803: system has unsupported display "
            "driver / cuda driver combination",
            r"sudo reboot",
        ),
        ("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.", r"sudo reboot"),
    ],
)
def test_a_driver_that_cannot_start_cuda_gets_a_command_that_cures_it(tmp_path: Path, line: str, cure: str) -> None:
    """Where the cause depends on the node, the commands that tell which come first, then the cure that fits the
    common case; never only words."""
    found = checks(tmp_path, line + "\n")["torch.cuda-available"]
    said = commands(found)
    assert any(re.search(cure, c) for c in said), said


def test_an_extension_built_for_another_torch_is_rebuilt_against_this_one(tmp_path: Path) -> None:
    found = checks(
        tmp_path,
        "    from mypkg import _C\nImportError: /opt/src/mypkg/_C.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
        "_ZN3c1015SmallVectorBaseIjE8grow_podEPKvmm\n",
    )["torch.import"]
    said = commands(found)
    assert any("--no-build-isolation" in c and "mypkg" in c and "--no-deps" in c for c in said), said


def test_a_line_two_signatures_read_is_judged_by_the_one_with_the_cure(tmp_path: Path) -> None:
    """cuDNN 9's loader line is read by the general 'cuDNN not found' signature (no one command) and by the cuDNN 9
    one (its commands): one verdict, the one that cures it; a general signature alone still speaks."""
    paste = tmp_path / "paste.txt"
    paste.write_text(
        "Unable to load any of {libcudnn_cnn.so.9.1.0, libcudnn_cnn.so.9.1, libcudnn_cnn.so.9, libcudnn_cnn.so}\n"
    )
    document = json.loads(gpudoctor("check", "--from", str(paste), "--json").stdout)
    said = [c for c in document["checks"] if c["check_id"] == "torch.cudnn"]
    assert [c["aspect"] for c in said] == ["cudnn9-not-on-library-path"], said
    assert said[0]["remediation"]["commands"]
    alone = checks(tmp_path, "OSError: libcudnn.so.7: cannot open shared object file: No such file or directory\n")
    assert alone["torch.cudnn"]["aspect"] == "libcudnn-not-found"


def test_a_driver_too_old_gets_the_build_it_runs_from_the_cuda_it_reports(tmp_path: Path) -> None:
    found = checks(
        tmp_path,
        "RuntimeError: The NVIDIA driver on your system is too old (found version 12040). Please update your GPU "
        "driver by downloading and installing a new version\n",
    )["torch.cuda-driver"]
    assert "11040" not in json.dumps(found), "the paste's own number, never a stock example"
    assert any(c.startswith("pip install torch==") and "+cu12" in c for c in commands(found)), commands(found)
    assert "CUDA 12.4" in found["remediation"]["why"]


def test_a_cpu_only_torch_gets_a_cuda_build_in_its_place(tmp_path: Path) -> None:
    found = checks(tmp_path, "AssertionError: Torch not compiled with CUDA enabled\n")["torch.cuda-available"]
    assert any(c.startswith("pip install --force-reinstall torch==") and "+cu" in c for c in commands(found))


def test_no_driver_gets_the_install_commands(tmp_path: Path) -> None:
    found = checks(tmp_path, "RuntimeError: Found no NVIDIA driver on your system. Please check that you have\n")
    said = commands(found["driver.nvml"])
    assert "nvidia-smi" in said and any("install" in c for c in said), said


def test_torchvision_ops_missing_gets_a_matching_pair(tmp_path: Path) -> None:
    found = checks(tmp_path, "RuntimeError: operator torchvision::nms does not exist\n")["torch.torchvision"]
    assert any(c.startswith("pip install --force-reinstall torch==") and "torchvision" in c for c in commands(found))


def test_the_owners_cure_is_the_one_its_declaration_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check names its cure in `@check(..., cure=...)`; the paste finds it through gpudoctor.declarations, which
    reads the declarations from the check modules' source (no check module is imported for it)."""
    from gpudoctor import declarations

    declared = declarations.cures()
    assert set(declared.values()) == set(cures.CURES), "every cure named is one, and every cure is named"
    assert declared["torch.arch"] == "gpu-arch" and declared["driver.nvml"] == "no-driver"
    assert {s.owner for s in signatures.table().values() if s.id in cures.cured()} <= set(declared)
    assert cures.cure("cuda-no-kernel-image", {"capability": "120"}, {}) is not None
    monkeypatch.setattr(declarations, "cures", lambda: {**declared, "torch.arch": ""})
    assert cures.cure("cuda-no-kernel-image", {"capability": "120"}, {}) is None
    assert "cuda-no-kernel-image" not in cures.cured()


def test_a_cure_a_declaration_names_is_a_word() -> None:
    from gpudoctor.declarations import declared_in
    from gpudoctor.registry import check

    with pytest.raises(ValueError, match="cure"):
        check("site.a", "A check", cure="pip install x")
    with pytest.raises(ValueError, match="cure"):
        declared_in('@check("site.a", "A check", cure="rm -rf /")\ndef a(ctx):\n    pass\n')
    assert declared_in('@check("site.a", "A check", cure="gpu-arch")\ndef a(ctx):\n    pass\n')[0].cure == "gpu-arch"


def test_no_signature_is_named_in_the_cures_and_what_one_stands_for_is_a_finding_its_owner_has() -> None:
    """A cure reads what the paste shows, never which signature matched: the signature's data says which of its
    owner's own findings it stands for (`stands_for`), and that finding is one the owner judges (NVML's statuses)."""
    from gpudoctor.judging import nvml_init

    source = Path(cures.__file__).read_text(encoding="utf-8")
    assert [s for s in signatures.table() if f'"{s}"' in source and s not in cures.CURES] == []  # a cure's own name
    standing = {s.id: s.stands_for for s in signatures.table().values() if s.stands_for}
    assert standing and all(signatures.table()[i].owner == "driver.nvml" for i in standing), standing
    assert set(standing.values()) <= set(nvml_init.INIT_FINDINGS)
    loaded = cures.cure("nvml-cannot-initialize", {}, {})
    missing = cures.cure("libnvidia-ml-not-found", {}, {})
    assert loaded is not None and missing is not None and loaded.why != missing.why
    assert loaded.why == nvml_init.failure({"status": "driver-not-loaded"}, {}, {})[1].why


# TensorFlow's CUDA library loader (tensorflow/tsl/platform/default/dso_loader.cc) and torch's import of the same
# missing library: each gets its own framework's cure.
TF_LOADER = (
    "2023-01-01 10:00:00.000000: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load "
    "dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file or "
    "directory"
)
TORCH_IMPORT = "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"


def test_a_library_tensorflow_cannot_load_gets_tensorflows_cure_and_never_a_torch_reinstall(tmp_path: Path) -> None:
    fix = commands(checks(tmp_path, TF_LOADER + "\n")["torch.import"])
    assert fix[0].startswith("pip install 'tensorflow[and-cuda]'")
    assert not any("torch==" in c for c in fix)


def test_a_library_torch_cannot_load_keeps_the_torch_cure(tmp_path: Path) -> None:
    fix = commands(checks(tmp_path, TORCH_IMPORT + "\n")["torch.import"])
    assert any("torch==" in c for c in fix) and not any("tensorflow" in c for c in fix)
