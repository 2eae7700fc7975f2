"""Verdicts checked against their primary sources (cited in gpudoctor/data): torch's arch rule, the torch
wheel matrix, CUDA's minimum drivers, NVIDIA's Xid catalogue, exact GPU identification from PCI ids, and
NVLink expectations from the links' real far ends."""

from __future__ import annotations

import copy
import re

import pytest
from fixtures.nodes import driver, node
from helpers.common import judge, load_snapshot, usable_gpus

from gpudoctor.checks import compute, health, torch_build
from gpudoctor.facts.system import parse_events
from gpudoctor.judging import compat, copies, ddp, expect, references, routes
from gpudoctor.judging.hardware import gpu_model

H100 = load_snapshot("h100-sxm-8x")


@pytest.mark.parametrize(
    "arch,capability,torch_cuda,runs",
    [
        ("sm_100f", (10, 3), "13.0", True),  # family-specific: every later minor of the family
        ("sm_120f", (12, 1), "13.0", True),
        ("sm_100", (10, 3), "13.0", True),
        ("sm_100a", (10, 3), "13.0", False),  # architecture-specific: exactly 10.0
        ("sm_90a", (9, 0), "13.0", True),
        ("compute_90a", (10, 0), "13.0", False),  # arch-specific PTX does not JIT forward
        ("compute_90", (10, 0), "13.0", False),  # torch's _check_capability judges PTX like a cubin: same major
        ("compute_100f", (12, 0), "13.0", False),  # family PTX stays in its family
        ("compute_100f", (10, 3), "13.0", True),
        ("sm_90", (10, 0), "13.0", False),  # cubins never cross a major
        ("sm_80", (8, 7), "13.0", False),  # torch excludes the integrated Orin from sm_80/86 ...
        ("sm_86", (8, 7), "13.0", False),
        ("sm_80", (8, 7), "13.2", True),  # ... until CUDA 13.2 unified Jetson and SBSA
        ("sm_70", (7, 2), "12.6", False),
        ("sm_100", (10, 1), "13.0", False),
        ("sm_101", (11, 0), "13.0", True),  # 10.1 was renamed 11.0 (Thor)
        ("sm_110", (10, 1), "13.0", True),
        ("sm_87", (8, 9), "13.0", False),
    ],
)
def test_torch_arch_rule(arch: str, capability: tuple[int, int], torch_cuda: str, runs: bool) -> None:
    assert compat.runs_on(arch, capability, torch_cuda) is runs


def with_gpus(capability: list[int], arch_list: list[str], name: str = "NVIDIA B300 SXM6 AC") -> dict:
    """The H100 node's torch and NVML facts with every GPU changed to another compute capability."""
    torch = copy.deepcopy(H100["torch"])
    torch["arch_list"] = arch_list
    for device in torch["devices"]:
        device["capability"] = capability
    gpus = [{**g, "name": name, "compute_capability": capability} for g in usable_gpus(H100)]
    return {"torch": torch, "gpus": gpus}


def test_a_family_cubin_covers_a_later_minor_of_its_family() -> None:
    node = with_gpus([10, 3], ["sm_90", "sm_100f"])
    assert torch_build.judge_arch(node["torch"], node["gpus"], "590.48.01").status.value == "pass"
    node = with_gpus([10, 3], ["sm_90", "sm_100a", "compute_90a"])
    result = torch_build.judge_arch(node["torch"], node["gpus"], "590.48.01")
    assert result.status.value == "fail" and "sm_103 has no kernels in this build" in result.summary


def test_no_build_is_named_that_lacks_the_gpu() -> None:
    """Thor (11.0) has kernels only in the aarch64 CUDA 13 builds; on x86_64 no official build fits."""
    assert compat.keep_driver_build([(11, 0)], "595.71.05", "linux_x86_64") is None
    assert compat.keep_driver_build([(11, 0)], "590.48.01", "linux_aarch64").name == "torch 2.15.0+cu130"
    assert compat.keep_driver_build([(11, 0)], "595.71.05", "linux_aarch64").name == "torch 2.15.0+cu132"
    node = with_gpus([11, 0], ["sm_90"], "NVIDIA Thor")
    result = torch_build.judge_arch(node["torch"], node["gpus"], "590.48.01")
    assert result.status.value == "fail" and "No official torch build has kernels for sm_110" in result.remediation.why
    assert result.remediation.commands == ["nvidia-smi --query-gpu=name,compute_cap --format=csv"]


@pytest.mark.parametrize(
    "capability,driver,platform,build,runs",
    [
        ((9, 0), "590.48.01", "linux_x86_64", "2.15.0+cu130", "full"),  # cu132 is built with 13.2.2 (595.71.05)
        ((9, 0), "595.71.05", "linux_x86_64", "2.15.0+cu132", "full"),
        ((9, 0), "535.104.05", "linux_x86_64", "2.15.0+cu126", "compat"),  # CUDA 12's family minimum
        ((7, 0), "595.71.05", "linux_x86_64", "2.15.0+cu126", "full"),  # Volta left the CUDA 13 builds
        ((6, 1), "595.71.05", "linux_x86_64", "2.15.0+cu126", "full"),
        ((3, 7), "595.71.05", "linux_x86_64", "2.7.1+cu118", "full"),  # Kepler's last official kernels
        ((8, 6), "470.82.01", "linux_x86_64", "2.7.1+cu118", "compat"),  # CUDA 11's family minimum 450.80.02
        ((7, 5), "418.87.00", "linux_x86_64", "1.8.1+cu101", "full"),  # no minor-version compatibility before 11
        ((6, 1), "384.81", "linux_x86_64", "1.1.0+cu90", "full"),
        ((12, 0), "570.124.06", "linux_x86_64", "2.11.0+cu128", "full"),  # RTX 50 below 580: the last cu128
        ((8, 6), "472.12", "windows", "2.7.1+cu118", "compat"),  # Windows numbers: CUDA 11 from 452.39
    ],
)
def test_the_newest_build_a_driver_runs(
    capability: tuple[int, int], driver: str, platform: str, build: str, runs: str
) -> None:
    chosen = compat.keep_driver_build([capability], driver, platform)
    assert (chosen.name, compat.driver_runs(driver, chosen)) == (f"torch {build}", runs)


def test_no_build_runs_on_a_driver_older_than_every_toolkit_of_the_gpu() -> None:
    assert compat.keep_driver_build([(10, 0)], "470.82.01", "linux_x86_64") is None  # Blackwell: CUDA 12.8 on


def test_build_matrix_and_minimum_drivers_follow_the_release_notes() -> None:
    assert compat.default_build("linux_x86_64") == compat.build("2.15.0", "cu132", "linux_x86_64")
    assert compat.default_build("linux_x86_64").toolkit == "13.2.2"
    assert [b.tag for b in compat.cuda_builds("linux_x86_64")[:3]] == ["cu132", "cu130", "cu126"]
    minimum = compat.nvidia_table()["toolkit_minimum_linux"]
    assert (minimum["11.0"], minimum["13.1"], minimum["13.2"]) == ("450.51.05", "590.44.01", "595.45.04")
    assert (minimum["12.6.3"], minimum["12.8.1"], minimum["13.0.2"]) == ("560.35.05", "570.124.06", "580.95.05")
    assert (minimum["10.2"], minimum["10.0"], minimum["9.2"]) == ("440.33", "410.48", "396.26")


def test_driver_judged_against_the_toolkit_the_wheel_was_built_with() -> None:
    """580.82.07 runs CUDA 13.0 GA but not the 13.0.2 the cu130 wheel is built with: a warning, not a pass."""
    result = judge(node(calls=driver("580.82.07", 13000)))["torch.cuda-driver"]
    assert result.status.value == "warn"
    assert "runs CUDA 13.0.2 only through minor-version compatibility (full support from 580.95.05)" in result.summary
    assert judge("h100-sxm-8x")["torch.cuda-driver"].summary == "driver 590.48.01 supports torch's CUDA 13.0.2"


def xid_result(log: str, gpus: list[dict] | None = None):
    events = parse_events(log)
    return health.judge_xid({"readable": True, "source": "dmesg", **events}, gpus or usable_gpus(H100))


def xid_line(xid: int, text: str = "", gpu_bus: str = "0000:18:00", time: str = "2026-11-20T03:12:01") -> str:
    return f"{time},123456+00:00 NVRM: Xid (PCI:{gpu_bus}): {xid}, pid=4242, name=python, {text}"


@pytest.mark.parametrize(
    "xid,status,words",
    [
        (63, "pass", "noted: GPU 0: Xid 63 (GPU memory row remapping / page retirement event)"),
        (92, "warn", "Xid 92 (high single-bit ECC error rate: no immediate action; investigate if it recurs)"),
        (94, "warn", "Xid 94 (contained memory error: restart the application)"),
        (121, "warn", "Xid 121 (corrected C2C (Grace-GPU NVLink) errors: no immediate action"),
        (13, "warn", "Xid 13 (graphics engine exception: restart the application)"),
        (46, "fail", "Xid 46 (GPU stopped processing: reset the GPU)"),
        (62, "fail", "Xid 62 (internal micro-controller halt: reset the GPU)"),
        (79, "fail", "Xid 79 (GPU has fallen off the bus: reboot the node)"),
        (109, "fail", "Xid 109 (context switch timeout: reset the GPU)"),
        (110, "fail", "Xid 110 (security fault: reset the GPU)"),
        (136, "fail", "Xid 136 (NVLink training failed: reset the GPU)"),
        (143, "fail", "Xid 143 (GPU initialization error: reset the GPU)"),
        (145, "warn", "Xid 145 (NVLink RLW error: severity is in its subcode; Xid 154 carries the driver's verdict)"),
        (151, "fail", "Xid 151 (key rotation error: restart the VM)"),
        (155, "warn", "Xid 155 (NVLink link down flagged intentional; no other sign of a link fault)"),
        (156, "fail", "Xid 156 (resource retirement event: reset the GPU)"),
        (157, "warn", "Xid 157 (resource retirement failure (no spare resources): no immediate action"),
        (158, "fail", "Xid 158 (GPU fatal timeout: reset the GPU)"),
        (999, "warn", "Xid 999 (not in NVIDIA's catalogue for Ampere and newer)"),
    ],
)
def test_xid_graded_by_the_catalogue(xid: int, status: str, words: str) -> None:
    result = xid_result(xid_line(xid))
    assert result.status.value == status, result.summary
    assert words in result.summary


def test_xid_154_carries_the_drivers_verdict() -> None:
    line = xid_line(154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
    result = xid_result(xid_line(145) + "\n" + line)
    assert result.status.value == "fail"
    assert "Xid 154 (the driver's verdict: Node Reboot Required)" in result.summary
    assert "sudo reboot" in result.remediation.commands
    reset = xid_result(xid_line(154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"))
    assert reset.status.value == "fail" and "sudo nvidia-smi -i 0 -r" in reset.remediation.commands
    recovered = xid_result(xid_line(154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"))
    assert recovered.status.value == "pass"


def test_xid_155_fails_only_with_a_corroborating_signal() -> None:
    gpus = copy.deepcopy(usable_gpus(H100))
    gpus[0]["nvlinks"][4]["active"] = False
    assert xid_result(xid_line(155), gpus).status.value == "fail"
    verdict = xid_line(154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
    assert xid_result(xid_line(155) + "\n" + verdict).status.value == "fail"


def test_an_xid_flood_is_one_finding_with_its_count_and_span() -> None:
    lines = [xid_line(13, time=f"2026-11-20T03:{i // 60:02d}:{i % 60:02d}") for i in range(3600)]
    events = parse_events("\n".join(lines))
    assert len(events["xids"]) == 1 and events["xids"][0]["count"] == 3600
    result = xid_result("\n".join(lines))
    assert "GPU 0: Xid 13 (graphics engine exception: restart the application) x3600, " in result.summary
    assert "2026-11-20T03:00:00 to 2026-11-20T03:59:59" in result.summary


def test_nvswitch_sxids_from_the_same_log() -> None:
    fatal = "2026-11-20T03:12:05,1+00:00 nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 44 TSTATE"
    benign = "2026-11-20T03:12:06,1+00:00 nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 12028, Non-fatal, Link 32"
    result = xid_result(fatal + "\n" + benign)
    assert result.status.value == "fail"
    assert "NVSwitch 0000:05:00.0: SXid 24007 (fatal)" in result.summary
    assert "NVSwitch 0000:06:00.0: SXid 12028 (non-fatal)" in result.summary
    assert any("nvidia-fabricmanager" in c for c in result.remediation.commands)


@pytest.mark.parametrize(
    "name,pci_id,model",
    [
        ("NVIDIA L40", 0x26B510DE, "L40"),
        ("NVIDIA L4", 0x27B810DE, "L4"),
        ("NVIDIA A10G", 0x223710DE, "A10G"),
        ("NVIDIA A10", 0x223610DE, "A10"),
        ("NVIDIA H200 NVL", 0x233B10DE, "H200 NVL"),
        ("NVIDIA H200", 0x233510DE, "H200 SXM"),
        ("NVIDIA GH200 480GB", 0x234210DE, "GH200 96GB HBM3"),
        ("NVIDIA GB200", 0x294110DE, "GB200"),
        ("NVIDIA B200", 0x290110DE, "B200"),
        ("NVIDIA B300 SXM6 AC", 0x318210DE, "B300"),
        (
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            0x2BB410DE,
            "RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        ),
        ("NVIDIA GeForce RTX 4090 D", 0x268510DE, None),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 0x275710DE, None),
        ("GeForce RTX 4090", None, "GeForce RTX 4090"),  # older drivers drop "NVIDIA "; no PCI id: the name
        ("NVIDIA H100 PCIe", None, "H100 PCIe"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", None, None),
    ],
)
def test_gpus_are_identified_exactly(name: str, pci_id: int | None, model: str | None) -> None:
    found = gpu_model({"name": name, "pci_device_id": pci_id})
    assert (found or {}).get("model") == model


def test_every_gpu_entry_names_its_source_and_unique_pci_ids() -> None:
    from gpudoctor.judging.hardware import hardware

    ids = [i for entry in hardware()["gpu"] for i in entry["pci_ids"]]
    assert len(ids) == len(set(ids))
    assert all(entry.get("source") for entry in hardware()["gpu"])


def test_an_unknown_gpu_is_judged_against_a_baseline_only() -> None:
    gpu = {"index": 0, "name": "NVIDIA GeForce RTX 4090 D", "pci_device_id": 0x268510DE}
    measured = [
        ({"cuda_index": 0, "bf16": {"tflops": 150, "rel_error": 1e-3}, "tf32": {"tflops": 80, "rel_error": 1e-3}}, gpu)
    ]
    result = compute.judge(measured, 0.75, {})
    assert result.status.value == "warn"
    assert "is not in the hardware table: judged against a saved baseline only" in result.summary
    baseline = {p: expect.Expectation(f, "baseline b.json", floor=0.9) for p, f in (("bf16", 150.0), ("tf32", 80.0))}
    assert compute.judge(measured, 0.75, baseline).status.value == "pass"


def test_bridged_pairs_bind_a_four_gpu_ring_to_pcie() -> None:
    """4x H100 NVL as two bridged pairs: a ring over four GPUs crosses PCIe between the pairs, so the
    expectation is PCIe's (here without P2P between the pairs), not 12 NVLinks'."""
    snap = load_snapshot("h100-nvl-4x")
    exp = routes.allreduce_expectation(usable_gpus(snap), snap["nvml"]["topology"])
    assert exp.value == pytest.approx(63.0 * 0.40)
    assert (
        exp.source.startswith("PCIe Gen5 x16 (63 GB/s), P2P unsupported by NVML: SHM")
        and "slowest ring hop" in exp.source
    )
    pair = usable_gpus(snap)[:2]
    ring = references.theory_ratio("allreduce_busbw", routes.nvlink_theory, algo="ring", nodes=1)[0]
    assert routes.allreduce_expectation(pair, snap["nvml"]["topology"]).value == pytest.approx(12 * 25 * ring)
    copy_01 = copies.p2p_copy_expectation(pair[0], pair[1], True)
    assert copy_01.source.startswith("NVLink x12 bridged (300 GB/s)")
    assert copies.p2p_copy_expectation(usable_gpus(snap)[0], usable_gpus(snap)[2], False).source.startswith("PCIe Gen5")


def test_ga102_nvlink_runs_at_its_own_link_rate() -> None:
    snap = load_snapshot("a6000-2x")
    exp = routes.allreduce_expectation(usable_gpus(snap), snap["nvml"]["topology"])
    ring = references.theory_ratio("allreduce_busbw", routes.nvlink_theory, algo="ring", nodes=1)[0]
    assert exp.value == pytest.approx(4 * 14.0625 * ring)
    assert exp.source.startswith("NVLink 56.25 GB/s per GPU")


def test_unused_nvlinks_of_a_bridged_board_are_not_down() -> None:
    assert judge("h100-nvl-4x")["health.nvlink"].rows[0].summary == "12 NVLinks up (6 more unused on this board)"
    snap = load_snapshot("h100-nvl-4x")
    gpu = copy.deepcopy(usable_gpus(snap)[1])
    for link in gpu["nvlinks"][8:12]:
        link["active"] = False
    row = health.nvlink_row(gpu, 100)
    assert row.status.value == "fail" and row.summary.startswith("4 of 12 NVLinks down (inactive: links 8, 9, 10, 11")


@pytest.mark.parametrize("fixture", ["h100-nvl-4x", "a6000-2x"])
def test_bridged_nodes_pass_what_applies(fixture: str) -> None:
    results = judge(fixture, expect_gpus=len(usable_gpus(load_snapshot(fixture))))
    assert {r.status.value for r in results.values()} <= {"pass", "skip"}, {
        k: r.summary for k, r in results.items() if r.status.value not in ("pass", "skip")
    }


def test_gpus_without_bf16_train_fp16_with_loss_scaling() -> None:
    p = ddp.resolve({}, "cuda", [(7, 0)] * 8)
    assert p["precision"] == "fp16" and "fp16 autocast with loss scaling" in ddp.describe(p, "cuda")
    assert ddp.resolve({}, "cuda", [(9, 0)])["precision"] == "bf16"
    assert ddp.resolve({"precision": "fp32"}, "cuda", [(7, 5)])["precision"] == "fp32"


def torch_with_vision(version: str = "2.15.0+cu132", cuda: str | None = "13.2", **vision: object) -> dict:
    """torch facts as the torch gateway writes them, with a torchvision that is fine unless told otherwise
    (`vision_version` and `vision_cuda` are torchvision's own)."""
    seen = {"installed": True, "version": vision.pop("vision_version", "0.29.2"), "requires_torch": ">=2.14.0"}
    seen |= {"ops_ok": True, "error": None, "cuda": vision.pop("vision_cuda", cuda), "cuda_ops_ok": None}
    return {"version": version, "cuda": cuda, "torchvision": {**seen, **vision}}


def test_torchvision_is_judged_by_what_it_declares_not_by_a_formula() -> None:
    """torch 2.15.0 with torchvision 0.29.2 (declares torch>=2.14.0, ops load): what the registry served on
    2026-11-24, once a false FAIL wanting a torchvision 0.30 that did not exist."""
    result = torch_build.judge_torchvision(torch_with_vision())
    assert result.status.value == "pass", result.summary
    assert "declares torch>=2.14.0" in result.summary
    newer = torch_build.judge_torchvision(torch_with_vision("2.99.0+cu132"))
    assert newer.status.value == "pass" and "newer than gpudoctor's tables" in newer.summary


@pytest.mark.parametrize(
    "torch_facts,said",
    [
        (torch_with_vision("2.6.0+cu124", "12.4", requires_torch="==2.5.1", vision_version="0.20.1"), "torch==2.5.1"),
        (torch_with_vision(vision_cuda=None), "CPU build beside torch's CUDA 13.2"),
        (torch_with_vision(vision_cuda="12.8"), "built for CUDA 12.8, torch for CUDA 13.2"),
        (torch_with_vision(ops_ok=False, error="RuntimeError: operator torchvision::nms does not exist"), "nms"),
        (torch_with_vision(cuda_ops_ok=False, cuda_error="NotImplementedError: no CUDA kernel"), "GPU ops fail"),
    ],
)
def test_a_torchvision_that_does_not_fit_fails_with_a_fix_that_keeps_torch(torch_facts: dict, said: str) -> None:
    result = torch_build.judge_torchvision(torch_facts)
    assert result.status.value == "fail" and said in result.summary, result.summary
    command = result.remediation.commands[0]
    release, _, tag = torch_facts["version"].partition("+")
    assert command.startswith(f"pip install torch=={release}+{tag} ") and "--force-reinstall" not in command
    assert "torchvision" in command
    assert command.endswith(f"--index-url https://download.pytorch.org/whl/{tag}")


def test_a_kernel_module_is_never_said_to_match_a_library_whose_version_is_unknown() -> None:
    """NVML failing with a version mismatch: the library's version is unknown and differs; once this passed
    with "kernel module 530.30.02 matches the library"."""
    from gpudoctor.checks import driver as driver_checks

    system = {"kernel_modules": ["nvidia"], "nvidia_module_version": "530.30.02"}
    for status in ("version-mismatch", "error"):
        result = driver_checks.judge_kernel_module({"status": status}, system)
        assert result.status.value == "skip" and "matches" not in result.summary, result.summary
        assert "530.30.02" in result.summary and "see driver.nvml" in result.summary


@pytest.mark.parametrize(
    "error,code,command",
    [
        (
            "Error 804: forward compatibility was attempted on non supported HW (Triggered internally at "
            "/pytorch/c10/cuda/CUDAFunctions.cpp:109.)",
            804,
            None,
        ),
        ("CUDA error: system has unsupported display driver / cuda driver combination", 803, None),
        ("CUDA error 802: system not yet initialized", 802, "sudo systemctl enable --now nvidia-fabricmanager"),
        ("CUDA unknown error - this may be due to an incorrectly set up environment", 999, "sudo modprobe nvidia-uvm"),
    ],
)
def test_cuda_init_errors_are_read_against_nvidias_list(error: str, code: int, command: str | None) -> None:
    """Every CUDA error torch can surface at init, by its number, enum or message (CUDA's driver_types.h and
    the CUDA Compatibility guide, in data/nvidia.toml), with its cause and the commands its fix names."""
    node = copy.deepcopy(H100)
    node["torch"].update(cuda_available=False, cuda_init_error=error, device_count=0, devices=[])
    result = torch_build.judge_cuda_available(node["torch"], node["nvml"], {})
    assert result.status.value == "fail" and f"CUDA error {code}" in result.remediation.why, result.remediation.why
    assert command is None or command in result.remediation.commands
    driver_verdict = torch_build.judge_cuda_driver(node["torch"], node["nvml"])
    if code in (803, 804):  # forward-compatibility libraries: the driver's version says nothing of what runs
        assert driver_verdict.status.value == "skip" and "minor-version" not in driver_verdict.summary


UBUNTU_JAMMY = {"id": "ubuntu", "id_like": "debian", "version_id": "22.04", "version_codename": "jammy"}
DEBIAN_12 = {"id": "debian", "version_id": "12", "version_codename": "bookworm"}
ROCKY_9 = {"id": "rocky", "id_like": "rhel centos fedora", "version_id": "9.4"}


@pytest.mark.parametrize(
    "minimum,os_release,commands",
    [
        # Ubuntu ships -server packages only for its production branches (jammy: 535, 550, 580): once the fix
        # said nvidia-driver-530-server and nvidia-driver-465-server, which never existed.
        ("530.30.02", UBUNTU_JAMMY, ["sudo apt install nvidia-driver-535-server"]),
        ("465.19.01", UBUNTU_JAMMY, ["sudo apt install nvidia-driver-535-server"]),
        ("580.65.06", UBUNTU_JAMMY, ["sudo apt install nvidia-driver-580-server"]),
        ("525.60.13", DEBIAN_12, ["sudo apt install nvidia-driver"]),  # bookworm ships R535
        ("525.60.13", ROCKY_9, ["sudo dnf module enable -y nvidia-driver:525-open", "sudo dnf install -y nvidia-open"]),
        ("470.42.01", ROCKY_9, ["sudo dnf module install -y nvidia-driver:470-dkms"]),  # before the open modules
    ],
)
def test_driver_upgrades_name_a_package_the_nodes_distribution_ships(
    minimum: str, os_release: dict, commands: list[str]
) -> None:
    assert compat.driver_install(minimum, os_release) == commands


def test_every_driver_command_names_a_branch_that_exists_and_reaches_the_minimum() -> None:
    """Over every minimum in the release notes and every distribution the data names, the branch a fix names
    is one of NVIDIA's, reaches the minimum, and on Ubuntu is one that release ships a -server package for."""
    branches = {b["branch"]: b for b in compat.nvidia_table()["driver_branch"]}
    ubuntu = compat.nvidia_table()["distro_packages"]["ubuntu"]
    for minimum in compat.nvidia_table()["toolkit_minimum_linux"].values():
        branch = compat.driver_branch(minimum)
        if branch is None:
            continue
        latest = branches[branch].get("latest_linux")
        assert branch >= int(minimum.split(".")[0]) and (latest is None or not compat.older(latest, minimum))
        for codename in ("focal", "jammy", "noble"):
            command = compat.driver_install(minimum, {"id": "ubuntu", "version_codename": codename})[-1]
            served = re.search(r"nvidia-driver-(\d+)-server$", command)
            assert served is None or int(served.group(1)) in ubuntu[f"{codename}_server"]


@pytest.mark.parametrize(
    "torch_version,tag,command",
    [
        (
            "2.5.1",
            "cu124",
            "pip install torch==2.5.1+cu124 torchvision==0.20.1+cu124 --index-url https://download.pytorch.org/whl/cu124",
        ),
        (
            "1.12.1",
            "cu113",
            "pip install torch==1.12.1+cu113 torchvision==0.13.1+cu113 --extra-index-url https://download.pytorch.org/whl/cu113",
        ),
        (
            "1.7.1",
            "cu101",
            "pip install torch==1.7.1+cu101 torchvision==0.8.2+cu101 -f https://download.pytorch.org/whl/torch_stable.html",
        ),
    ],
)
def test_install_commands_take_the_form_pytorchs_pages_give_each_release(
    torch_version: str, tag: str, command: str
) -> None:
    """PyTorch's previous-versions page: find-links with local versions (1.2-1.10), the variant's extra index
    (1.11-1.13), the variant's index (2.0 on); always with the variant's local version, so that pip replaces
    the same release installed in another variant."""
    assert (
        compat.same_build_command({"version": f"{torch_version}+{tag}"}, compat.paired_torchvision(torch_version))
        == command
    )


def test_a_build_never_covers_a_gpu_newer_than_its_cuda_knows() -> None:
    """A torch 1.x cu10x build with a `compute_37` entry on an sm_86 GPU passed here and failed for the user:
    CUDA 10.2 knows nothing past 7.5 (its cuDNN and cuBLAS ship no Ampere code), and torch's own check wants
    an entry of the GPU's major."""
    arch = ["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "compute_37"]
    assert not compat.covered((8, 6), arch, "10.2")
    assert compat.covered((7, 5), arch, "10.2")
    assert not compat.covered((8, 9), ["sm_80", "sm_86", "compute_86"], "11.1")  # 11.1 knows up to 8.6


def test_a_cuda_10_build_is_judged_against_its_own_minimum() -> None:
    """CUDA 10 had no minor-version compatibility: a torch 1.x cu102 build needs the 10.2 toolkit's driver
    (>= 440.33, Table 3), and once every cu10x build warned 'no minimum driver known'."""
    torch = {"version": "1.12.1+cu102", "cuda": "10.2", "importable": True}
    old = torch_build.judge_cuda_driver(torch, {"driver_version": "418.67", "gpus": []})
    assert old.status.value == "fail" and "(it needs >= 440.33)" in old.summary
    fine = torch_build.judge_cuda_driver(torch, {"driver_version": "470.256.02", "gpus": []})
    assert fine.status.value == "pass"
