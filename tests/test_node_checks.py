"""Node checks judged on fixture snapshots: every fault gives its exact status, summary and fix."""

from __future__ import annotations

import pytest
from conftest import SNAPSHOTS, judge, load_snapshot

from gpudoctor.facts.snapshot import replay_nvml

# fixture -> (check label, status, words in the summary, words in a remediation command)
FAULTS = {
    "fault-lost-gpu": ("driver.gpu-count", "fail", "1 GPU is lost (index 3)", "fallen off the bus"),
    "fault-gpu-lost-at-lookup": ("driver.gpu-count", "fail", "1 GPU is lost (index 3)", "fallen off the bus"),
    "fault-driver-470-symbols": (
        "torch.cuda-driver",
        "fail",
        "needs driver >= 580.65.06; this node has 470.256.02",
        "nvidia-smi",
    ),
    "fault-version-mismatch": ("driver.nvml", "fail", "driver/library version mismatch", "sudo reboot"),
    "fault-module-mismatch": (
        "driver.kernel-module",
        "fail",
        "kernel module 580.95.05, library 590.48.01",
        "rmmod nvidia_uvm",
    ),
    "fault-nouveau": ("driver.kernel-module", "fail", "nouveau driver is loaded", "blacklist nouveau"),
    "fault-persistence-off": ("driver.gpu-modes", "warn", "GPU 5: persistence mode off", "nvidia-persistenced"),
    "fault-compute-prohibited": (
        "driver.gpu-modes",
        "warn",
        "GPU 1: compute mode Prohibited",
        "nvidia-smi -i 1 -c DEFAULT",
    ),
    "fault-compute-exclusive": (
        "driver.gpu-modes",
        "warn",
        "GPU 1: compute mode Exclusive_Process",
        "nvidia-smi -i 1 -c DEFAULT",
    ),
    "fault-inforom-corrupt": ("driver.gpu-modes", "fail", "GPU 6: infoROM is corrupted", "nvidia-smi -q -i 6"),
    "fault-fabric-not-started": ("driver.fabric", "fail", "fabric not started", "nvidia-fabricmanager"),
    "fault-fabric-degraded": (
        "driver.fabric",
        "warn",
        "GPU 3: fabric at limited capacity; NVLink bandwidth degraded",
        "nvidia-smi -q -i 3 | grep -A12 -i fabric",
    ),
    "fault-fabric-route-unhealthy": (
        "driver.fabric",
        "fail",
        "GPU 5: fabric health unhealthy; route unhealthy",
        "journalctl -u nvidia-fabricmanager",
    ),
    "fault-other-process": ("driver.processes", "warn", "pid 4242 (python ZOMBIE) holds 30720 MiB", "kill"),
    "fault-cuda-visible-subset": (
        "driver.gpu-count",
        "warn",
        "torch sees 2 of 8 GPUs because CUDA_VISIBLE_DEVICES",
        "unset CUDA_VISIBLE_DEVICES",
    ),
    "fault-old-driver": (
        "torch.cuda-driver",
        "fail",
        "needs driver >= 580.65.06; this node has 535.104.05",
        "whl/cu126",
    ),
    "fault-minor-compat-driver": ("torch.cuda-driver", "warn", "minor-version compatibility", "nvidia-driver-570"),
    "fault-driver-before-wheel-update": (
        "torch.cuda-driver",
        "warn",
        "runs CUDA 13.0.2 only through minor-version compatibility (full support from 580.95.05)",
        "nvidia-driver-580",
    ),
    "fault-cpu-only-torch": (
        "torch.cuda-available",
        "fail",
        "CPU-only build on a machine with 8 NVIDIA GPUs",
        "whl/cu130",
    ),
    "fault-cuda-hidden": (
        "torch.cuda-available",
        "fail",
        "torch.cuda.is_available() is False",
        "unset CUDA_VISIBLE_DEVICES",
    ),
    "fault-v100-cu130": ("torch.arch", "fail", "GPU 0: sm_70 has no kernels in this build", "whl/cu126"),
    "fault-cudnn-mismatch": (
        "torch.cudnn",
        "fail",
        "cuDNN 9.10.0 loaded, torch was built with 9.24.0",
        "nvidia-cudnn-cu13",
    ),
    "fault-torchvision-mismatch": (
        "torch.torchvision",
        "fail",
        "torchvision 0.24.1 is not built for torch 2.14.1",
        "torchvision==0.29.*",
    ),
    "fault-nvcc-mismatch": ("torch.nvcc", "warn", "nvcc 12.4 on PATH but torch uses CUDA 13.0", "cuda-13.0"),
    "fault-torch-import-broken": (
        "torch.import",
        "fail",
        "libcudnn.so.9: cannot open shared object file",
        "LD_LIBRARY_PATH",
    ),
    "fault-small-shm": ("system.shm", "warn", "/dev/shm is 64 MiB", "--shm-size"),
    "fault-memlock-limited": ("system.limits", "warn", "memlock limited to 64 KiB", "ulimit -l unlimited"),
    "fault-numa-misbound": ("system.numa", "warn", "GPU 4: on NUMA node 1", "numactl"),
    "fault-nccl-p2p-disabled": ("system.nccl-env", "warn", "NCCL_P2P_DISABLE=1", "unset NCCL_P2P_DISABLE"),
    "fault-nccl-bad-ifname": (
        "system.nccl-env",
        "fail",
        "NCCL_SOCKET_IFNAME='ens9f0' matches no interface",
        "unset NCCL_SOCKET_IFNAME",
    ),
    "fault-ib-port-down": ("system.infiniband", "warn", "1 of 1 ports not active", "ibstat"),
    "fault-ecc-uncorrectable": ("health.ecc", "fail", "GPU 3: 2 uncorrectable ECC errors", "nvidia-smi -i 3 -r"),
    "fault-ecc-correctable-high": ("health.ecc", "warn", "GPU 3: 5000 correctable ECC errors", "nvidia-smi -i 3 -r"),
    "fault-row-remap-pending": ("health.row-remap", "fail", "GPU 4: a row remap is pending", "nvidia-smi -i 4 -r"),
    "fault-row-remap-failed": ("health.row-remap", "fail", "GPU 4: row remapping failed", "nvidia-smi -i 4 -r"),
    "fault-hw-slowdown": ("health.throttle", "fail", "GPU 2: HW slowdown, HW thermal slowdown active", "PERFORMANCE"),
    "fault-sw-thermal": ("health.throttle", "warn", "GPU 2: SW thermal slowdown active", "TEMPERATURE"),
    "fault-hot-gpu": (
        "health.temperature",
        "warn",
        "GPU 6: 41 C, 3 C below its thermal limit (T.Limit)",
        "TEMPERATURE",
    ),
    "fault-over-thermal-limit": (
        "health.temperature",
        "fail",
        "GPU 6: 41 C, at or over its thermal limit",
        "TEMPERATURE",
    ),
    "fault-power-capped": (
        "health.power",
        "warn",
        "GPU 7: power limit 400 W, below the default 700 W",
        "nvidia-smi -i 7 -pl",
    ),
    "fault-pcie-x8": ("health.pcie", "warn", "GPU 1: link is x8 of x16", "LnkSta"),
    "fault-pcie-replays": ("health.pcie", "warn", "GPU 1: 5000 PCIe replays", "LnkSta"),
    "fault-nvlink-down": ("health.nvlink", "fail", "GPU 5: 1 of 18 NVLinks down (links 7)", "nvlink -s"),
    "fault-nvlink-crc": ("health.nvlink", "warn", "link 3: 9000", "nvlink -e"),
    "fault-xid-79": (
        "health.xid",
        "fail",
        "GPU 3: Xid 79 (GPU has fallen off the bus: reboot the node)",
        "sudo reboot",
    ),
    "fault-xid-13": (
        "health.xid",
        "warn",
        "GPU 0: Xid 13 (graphics engine exception: restart the application)",
        "grep -iE",
    ),
}


@pytest.mark.parametrize("fixture", sorted(FAULTS))
def test_fault_is_found_with_its_fix(fixture: str) -> None:
    label, status, summary, command = FAULTS[fixture]
    results = judge(fixture)
    result = results[label]
    assert result.status.value == status, result.summary
    assert summary in result.summary
    assert result.remediation is not None
    assert any(command in c for c in result.remediation.commands), result.remediation.commands


@pytest.mark.parametrize("fixture", sorted(FAULTS))
def test_fault_changes_only_its_own_finding(fixture: str) -> None:
    """A fault fixture differs from the healthy node only in the finding it is about (and its consequences)."""
    allowed = {
        FAULTS[fixture][0],
        "torch.cuda-available",
        "system.memory",
        "driver.gpu-count",
        "driver.fabric",
        "torch.arch",
    }
    bad = {label for label, r in judge(fixture).items() if r.status.value in ("warn", "fail", "error")}
    assert bad <= allowed, bad


def test_fault_table_covers_every_fault_fixture() -> None:
    on_disk = {p.stem for p in SNAPSHOTS.glob("fault-*.json")}
    assert on_disk - set(FAULTS) == {
        "fault-notsupported-gpu",
        "fault-kernel-log-unreadable",
        "fault-gpus-hidden-by-cgroup",
        "fault-gpu-lost-in-topology",
    }


@pytest.mark.parametrize("fixture", ["h100-sxm-8x"])
def test_healthy_nvlink_node_passes_everything_that_applies(fixture: str) -> None:
    results = judge(fixture, expect_gpus=8)
    assert {r.status.value for r in results.values()} <= {"pass", "skip"}
    assert results["health.nvlink"].summary == "every NVLink up with few errors"
    assert results["driver.fabric"].status.value == "pass"


@pytest.mark.parametrize(
    ("mask", "summary", "problems"),
    [
        (0, 0, []),
        (426, 1, []),
        (426 - 2 + 1, 0, [("warn", "NVLink bandwidth degraded")]),
        (426 - 128 + 64, 3, [("warn", "at limited capacity"), ("warn", "access timeout recovery in progress")]),
        (
            426 - 256 + 5 * 256,
            2,
            [("fail", "health unhealthy"), ("fail", "incorrect configuration: insufficient NVLinks")],
        ),
        (None, None, []),
    ],
)
def test_fabric_health_mask_is_decoded(mask, summary, problems) -> None:
    from gpudoctor.checks.driver import fabric_health_problems

    assert [(s.value, text) for s, text in fabric_health_problems(mask, summary)] == problems


def test_driver_without_the_versioned_fabric_struct_still_reports_registration() -> None:
    """Drivers older than the versioned call (FunctionNotFound) answer the original struct: state only."""
    snap = load_snapshot("fault-fabric-route-unhealthy")
    snap["nvml_calls"] = {k: v for k, v in snap["nvml_calls"].items() if "FabricInfoV" not in k}
    fabric = replay_nvml(snap)["gpus"][5]["fabric"]
    assert fabric == {"state": 3, "status": 0, "health_mask": None, "health_summary": None}


def test_consumer_card_skips_what_it_lacks_and_judges_idle_pcie_correctly() -> None:
    results = judge("rtx2080s-consumer-1x")
    assert results["health.ecc"].status.value == "skip"
    assert results["health.row-remap"].status.value == "skip"
    assert results["health.pcie"].status.value == "pass"
    assert "Gen1 now: links train down at idle" in results["health.pcie"].rows[0].summary
    assert results["health.temperature"].rows[0].summary == "40 C, 57 C below the 97 C slowdown threshold"
    assert results["driver.gpu-modes"].status.value == "warn"


def test_mixed_models_warn_about_device_order() -> None:
    result = judge("mixed-l40s-rtx2080s")["driver.gpu-count"]
    assert result.status.value == "warn"
    assert result.remediation.commands == ["export CUDA_DEVICE_ORDER=PCI_BUS_ID"]


def test_mig_gpu_is_named() -> None:
    result = judge("h100-mig-1x")["driver.gpu-modes"]
    assert result.status.value == "warn" and "MIG is on" in result.summary


def test_gpu_answering_not_supported_everywhere_is_not_available_not_a_crash() -> None:
    results = judge("fault-notsupported-gpu")
    assert not [r for r in results.values() if r.status.value in ("error", "fail", "warn")]
    ecc = results["health.ecc"]
    assert [r.status.value for r in ecc.rows].count("skip") == 1
    assert "not available on GPU 2" in ecc.summary


def test_unreadable_kernel_log_skips_with_the_reason() -> None:
    result = judge("fault-kernel-log-unreadable")["health.xid"]
    assert result.status.value == "skip"
    assert "Operation not permitted" in result.summary


def test_no_driver_fails_the_driver_check_and_skips_gpu_checks() -> None:
    results = judge("no-driver")
    assert results["driver.nvml"].status.value == "fail"
    assert "nvidia-container-toolkit" in " ".join(results["driver.nvml"].remediation.commands)
    assert results["health.ecc"].summary.startswith("NVML is not available (library-not-found)")
    assert results["torch.cudnn"].status.value == "pass"


def test_expected_gpu_count_mismatch_fails() -> None:
    result = judge("l40s-pcie-4x", expect_gpus=8)["driver.gpu-count"]
    assert result.status.value == "fail" and result.summary == "found 4 GPUs, expected 8"


def test_the_gateway_decodes_recorded_answers_into_facts() -> None:
    """What the gateway makes of NVML's raw answers, written out by hand for one GPU of two nodes (the
    recordings hold pynvml's values: milliwatts, bytes, enum numbers, struct fields)."""
    h100 = replay_nvml(load_snapshot("h100-sxm-8x"))
    gpu = h100["gpus"][3]
    assert (gpu["name"], gpu["pci_bus_id"], gpu["pci_device_id"]) == (
        "NVIDIA H100 80GB HBM3",
        "00000000:48:00.0",
        0x233010DE,
    )
    assert (gpu["memory_total_mib"], gpu["power_limit_w"], gpu["compute_capability"]) == (81559, 700.0, [9, 0])
    assert gpu["ecc_mode"] == {"current": True, "pending": True} and gpu["retired_pages"] is None
    assert gpu["pcie"] == {"gen": 5, "max_gen": 5, "gpu_max_gen": 5, "width": 16, "max_width": 16, "replays": 9}
    assert len(gpu["nvlinks"]) == 18 and gpu["nvlinks"][17]["remote_type"] == "switch"
    assert gpu["fabric"] == {"state": 3, "status": 0, "health_mask": 0, "health_summary": 0}
    assert h100["topology"]["common_ancestor"][0][7] == 50 and h100["topology"]["p2p_read"][0][1] == 0
    rtx = replay_nvml(load_snapshot("rtx2080s-consumer-1x"))["gpus"][0]
    assert (rtx["ecc_mode"], rtx["remapped_rows"], rtx["temperature_slowdown_c"]) == (None, None, 97)
    assert rtx["pcie"]["gen"] == 1 and rtx["nvlinks"] == [] and rtx["processes"] == []


def test_fixtures_are_current(tmp_path) -> None:
    from fixtures import make_snapshots

    make_snapshots.write(tmp_path)
    for path in SNAPSHOTS.glob("*.json"):
        assert (tmp_path / path.name).read_text() == path.read_text(), f"{path.name}: run make_snapshots.py"


def test_bogus_socket_interfaces_found_live_and_gloo_really_fails() -> None:
    """Real environment: the live gather reads the variables, and gloo itself cannot start with them."""
    import json

    from conftest import gpudoctor

    env = {"NCCL_SOCKET_IFNAME": "bogus0", "GLOO_SOCKET_IFNAME": "bogus0"}
    proc = gpudoctor("check", "--only", "system.nccl-env", "allreduce", "--timeout", "60", "--json", env=env)
    by_id = {c["check_id"]: c for c in json.loads(proc.stdout)["checks"]}
    finding = by_id["system.nccl-env"]
    assert finding["status"] == "fail"
    assert "NCCL_SOCKET_IFNAME='bogus0' matches no interface" in finding["summary"]
    assert "GLOO_SOCKET_IFNAME='bogus0' names an interface that does not exist" in finding["summary"]
    assert by_id["allreduce.bandwidth"]["status"] == "error"
    assert "bogus0" in by_id["allreduce.bandwidth"]["summary"]


def test_kernel_log_unreadable_for_a_non_root_user(tmp_path, monkeypatch) -> None:
    """Real environment: dmesg and journalctl run as `nobody` (through setpriv) where the kernel restricts
    dmesg; neither shows a kernel message, and the check says why for each."""
    import os
    import shutil
    from pathlib import Path

    from gpudoctor.checks.health import judge_xid

    from gpudoctor.facts.system import read_kernel_log

    setpriv, dmesg, journalctl = shutil.which("setpriv"), shutil.which("dmesg"), shutil.which("journalctl")
    restricted = Path("/proc/sys/kernel/dmesg_restrict")
    if os.geteuid() != 0 or not (setpriv and dmesg and journalctl) or restricted.read_text().strip() != "1":
        pytest.skip("needs root, setpriv, journalctl and kernel.dmesg_restrict=1 to run as an unprivileged user")
    for tool in (dmesg, journalctl):
        wrapper = tmp_path / Path(tool).name
        wrapper.write_text(f'#!/bin/sh\nexec {setpriv} --reuid=65534 --regid=65534 --clear-groups {tool} "$@"\n')
        wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    log = read_kernel_log()
    assert log["readable"] is False and log["source"] is None
    dmesg_reason, journal_reason = log["reason"].split("; ")
    assert dmesg_reason.startswith("dmesg: ") and "not permitted" in dmesg_reason
    assert journal_reason.startswith("journalctl -k: ")
    result = judge_xid(log, load_snapshot("h100-sxm-8x")["nvml"]["gpus"])
    assert result.status.value == "skip" and "not permitted" in result.summary


def test_journal_is_read_where_dmesg_is_restricted(tmp_path, monkeypatch) -> None:
    """dmesg refuses (as under kernel.dmesg_restrict=1) and the journal, readable by the adm and
    systemd-journal groups, holds an Xid: it is found, and the fix reads the same place."""
    import os

    from gpudoctor.checks.health import judge_xid

    from gpudoctor.facts.system import read_kernel_log

    tools = {
        "dmesg": "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1",
        "journalctl": "echo 'NVRM: Xid (PCI:0000:48:00): 79, pid=1234, GPU has fallen off the bus.'",
    }
    for name, body in tools.items():
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    log = read_kernel_log()
    assert (log["readable"], log["source"], [x["xid"] for x in log["xids"]]) == (True, "journalctl -k", [79])
    result = judge_xid(log, load_snapshot("h100-sxm-8x")["nvml"]["gpus"])
    assert result.status.value == "fail" and "Xid 79 (GPU has fallen off the bus: reboot the node)" in result.summary
    assert result.remediation.commands[:2] == ["journalctl -k -b | grep -iE 'xid|sxid'", "sudo reboot"]
