"""Node checks judged on fixture snapshots: every fault gives its exact status, summary and fix."""

from __future__ import annotations

import copy

import pytest
from fixtures.nodes import (
    FABRIC_HEALTHY,
    cuda_fails,
    driver,
    driver_470,
    fabric,
    fabric_everywhere,
    kernel_log,
    lose_gpu,
    lose_handle,
    node,
    not_supported_everywhere,
    process,
    torch_sees,
)
from helpers.common import SNAPSHOTS, judge, load_snapshot

from gpudoctor.facts.snapshot import replay_nvml

FABRIC_HEALTH_FIELDS = (
    "bandwidth_degraded",
    "route_recovery",
    "route_unhealthy",
    "access_timeout_recovery",
    "configuration",
    "summary",
)

ROUTE_UNHEALTHY = node(calls=fabric(5, health_mask=FABRIC_HEALTHY["health_mask"] - 16, health_summary=2))
OTHER_PROCESS = node(
    calls={
        "nvmlDeviceGetComputeRunningProcesses(gpu0)": [process(4242, 30 * 2**30)],
        "nvmlDeviceGetGraphicsRunningProcesses(gpu0)": [process(2105, None)],
    },
    system={
        "gpu_processes": {
            "4242": {"name": "python", "status": "zombie"},
            "2105": {"name": "Xorg", "status": "sleeping"},
        }
    },
)
NO_GPU_SEEN = cuda_fails("No CUDA GPUs are available")
# fault -> (the node: a healthy one and its difference, check label, status, words in the summary, words in a
# remediation command)
FAULTS = {
    "lost-gpu": (node(calls=lose_gpu(3)), "driver.gpu-count", "fail", "1 GPU is lost (index 3)", "fallen off the bus"),
    "gpu-lost-at-lookup": (
        node(calls=lose_handle(3), torch=torch_sees([0, 1, 2, 4, 5, 6, 7])),
        "driver.gpu-count",
        "fail",
        "1 GPU is lost (index 3)",
        "fallen off the bus",
    ),
    "driver-470-symbols": (
        node("v100-sxm-8x", calls=driver_470),
        "torch.cuda-driver",
        "fail",
        "driver 470.256.02 is too old for torch's CUDA 13.0.2 (it needs >= 580.65.06)",
        "nvidia-smi",
    ),
    "version-mismatch": (
        node(
            calls=lambda _: {"nvmlInit()": {"nvml_error": 18}},
            system={"nvidia_module_version": "580.95.05"},
            torch=cuda_fails("CUDA driver initialization failed"),
        ),
        "driver.nvml",
        "fail",
        "driver/library version mismatch",
        "sudo reboot",
    ),
    "module-mismatch": (
        node(system={"nvidia_module_version": "580.95.05"}),
        "driver.kernel-module",
        "fail",
        "kernel module 580.95.05, library 590.48.01",
        "rmmod nvidia_uvm",
    ),
    "nouveau": (
        node(system={"kernel_modules": ["nouveau"]}),
        "driver.kernel-module",
        "fail",
        "nouveau driver is loaded",
        "blacklist nouveau",
    ),
    "persistence-off": (
        node(calls={"nvmlDeviceGetPersistenceMode(gpu5)": 0}),
        "driver.gpu-modes",
        "warn",
        "GPU 5: persistence mode off",
        "nvidia-persistenced",
    ),
    "compute-prohibited": (
        node(calls={"nvmlDeviceGetComputeMode(gpu1)": 2}),
        "driver.gpu-modes",
        "warn",
        "GPU 1: compute mode Prohibited",
        "nvidia-smi -i 1 -c DEFAULT",
    ),
    "compute-exclusive": (
        node(calls={"nvmlDeviceGetComputeMode(gpu1)": 3}),
        "driver.gpu-modes",
        "warn",
        "GPU 1: compute mode Exclusive_Process",
        "nvidia-smi -i 1 -c DEFAULT",
    ),
    "inforom-corrupt": (
        node(calls={"nvmlDeviceValidateInforom(gpu6)": {"nvml_error": 14}}),
        "driver.gpu-modes",
        "fail",
        "GPU 6: infoROM is corrupted",
        "nvidia-smi -q -i 6",
    ),
    "fabric-not-started": (
        node(calls=fabric_everywhere(8, state=1), torch=cuda_fails("CUDA error 802: system not yet initialized")),
        "driver.fabric",
        "fail",
        "fabric not started",
        "nvidia-fabricmanager",
    ),
    # Health as the fabric manager reports it on a degraded NVSwitch tray and on a broken route.
    "fabric-degraded": (
        node(calls=fabric(3, health_mask=FABRIC_HEALTHY["health_mask"] - 1, health_summary=3)),
        "driver.fabric",
        "warn",
        "GPU 3: fabric at limited capacity; NVLink bandwidth degraded",
        "nvidia-smi -q -i 3 | grep -A12 -i fabric",
    ),
    "fabric-route-unhealthy": (
        ROUTE_UNHEALTHY,
        "driver.fabric",
        "fail",
        "GPU 5: fabric health unhealthy; route unhealthy",
        "journalctl -u nvidia-fabricmanager",
    ),
    "other-process": (
        OTHER_PROCESS,
        "driver.processes",
        "warn",
        "pid 4242 (python ZOMBIE) holds 30720 MiB",
        "ps -o pid,ppid,user,stat,etime,args -p 4242,2105",
    ),
    "cuda-visible-subset": (
        node(system={"env": {"CUDA_VISIBLE_DEVICES": "0,1"}}, torch=torch_sees([0, 1])),
        "driver.gpu-count",
        "warn",
        "torch sees 2 of 8 GPUs because CUDA_VISIBLE_DEVICES",
        "unset CUDA_VISIBLE_DEVICES",
    ),
    "old-driver": (
        node(calls=driver("535.104.05", 12020)),
        "torch.cuda-driver",
        "fail",
        "driver 535.104.05 is too old for torch's CUDA 13.0.2 (it needs >= 580.65.06)",
        "whl/cu126",
    ),
    "minor-compat-driver": (
        node(calls=driver("550.54.15", 12040), torch={"cuda": "12.8"}),
        "torch.cuda-driver",
        "warn",
        "minor-version compatibility",
        "R570 or newer",
    ),
    "driver-before-wheel-update": (
        node(calls=driver("580.82.07", 13000)),
        "torch.cuda-driver",
        "warn",
        "runs CUDA 13.0.2 only through minor-version compatibility (full support from 580.95.05)",
        "R580 or newer",
    ),
    "cpu-only-torch": (
        node(torch={**cuda_fails(None), "version": "2.14.1+cpu", "cuda": None, "arch_list": []}),
        "torch.cuda-available",
        "fail",
        "CPU-only build on a machine with 8 NVIDIA GPUs",
        "whl/cu130",
    ),
    "cuda-hidden": (
        node(system={"env": {"CUDA_VISIBLE_DEVICES": ""}}, torch=NO_GPU_SEEN),
        "torch.cuda-available",
        "fail",
        "but torch cannot use them",
        "unset CUDA_VISIBLE_DEVICES",
    ),
    "v100-cu130": (
        node("v100-sxm-8x"),
        "torch.arch",
        "fail",
        "GPUs 0-7: sm_70 has no kernels in this build",
        "whl/cu126",
    ),
    "cudnn-mismatch": (
        node(torch={"cudnn": {"available": True, "version": 91000, "compiled": [9, 24, 0], "error": None}}),
        "torch.cudnn",
        "fail",
        "cuDNN 9.10.0 loaded, torch was built with 9.24.0",
        "nvidia-cudnn-cu13",
    ),
    "torchvision-mismatch": (
        node(
            torch={
                "torchvision": {
                    "installed": True,
                    "version": "0.24.1",
                    "ops_ok": False,
                    "error": "RuntimeError: operator torchvision::nms does not exist",
                }
            }
        ),
        "torch.torchvision",
        "fail",
        "torchvision 0.24.1 is not built for torch 2.14.1+cu130 (PyTorch pairs it with 0.29.1)",
        "pip install torch==2.14.1+cu130 torchvision==0.29.1+cu130 --index-url https://download.pytorch.org/whl/cu130",
    ),
    "nvcc-mismatch": (
        node(system={"nvcc": {"path": "/usr/local/cuda-12.4/bin/nvcc", "version": "12.4"}}),
        "torch.nvcc",
        "warn",
        "nvcc 12.4 on PATH but torch uses CUDA 13.0",
        "cuda-13.0",
    ),
    "torch-import-broken": (
        node(
            torch=lambda _: {
                "importable": False,
                "import_error": "OSError: libcudnn.so.9: cannot open shared object file: No such file or directory",
            }
        ),
        "torch.import",
        "fail",
        "libcudnn.so.9: cannot open shared object file",
        "LD_LIBRARY_PATH",
    ),
    "small-shm": (
        node(system={"shm_bytes": 64 * 2**20, "container": "docker"}),
        "system.shm",
        "warn",
        "/dev/shm is 64 MiB",
        "--shm-size",
    ),
    "memlock-limited": (
        node(system={"limits": {"memlock": 65536, "nofile": 1024}}),
        "system.limits",
        "warn",
        "memlock limited to 64 KiB",
        "ulimit -l unlimited",
    ),
    "numa-misbound": (
        node(system={"cpu_affinity": list(range(8))}),
        "system.numa",
        "warn",
        "GPUs 4-7: on NUMA node 1",
        "numactl",
    ),
    "nccl-p2p-disabled": (
        node(system={"env": {"NCCL_P2P_DISABLE": "1"}}),
        "system.nccl-env",
        "warn",
        "NCCL_P2P_DISABLE=1",
        "unset NCCL_P2P_DISABLE",
    ),
    "nccl-bad-ifname": (
        node(system={"env": {"NCCL_SOCKET_IFNAME": "ens9f0"}}),
        "system.nccl-env",
        "fail",
        "NCCL_SOCKET_IFNAME='ens9f0' matches no interface",
        "unset NCCL_SOCKET_IFNAME",
    ),
    "ib-port-down": (
        node(
            system={
                "infiniband": [
                    {
                        "device": "mlx5_0",
                        "port": 1,
                        "state": "1: DOWN",
                        "rate": "10 Gb/sec (4X SDR)",
                        "link_layer": "InfiniBand",
                    }
                ]
            }
        ),
        "system.infiniband",
        "warn",
        "1 of 1 ports not active",
        "ibstat",
    ),
    "ecc-uncorrectable": (
        load_snapshot("fault-ecc-uncorrectable"),
        "health.ecc",
        "fail",
        "GPU 3: 2 uncorrectable ECC errors",
        "nvidia-smi -i 3 -r",
    ),
    "ecc-correctable-high": (
        load_snapshot("fault-ecc-correctable-high"),
        "health.ecc",
        "warn",
        "GPU 3: 5000 correctable ECC errors",
        "nvidia-smi -i 3 -r",
    ),
    "row-remap-pending": (
        node(calls={"nvmlDeviceGetRemappedRows(gpu4)": [0, 1, 1, 0]}),
        "health.row-remap",
        "fail",
        "GPU 4: a row remap is pending",
        "nvidia-smi -i 4 -r",
    ),
    "row-remap-failed": (
        node(calls={"nvmlDeviceGetRemappedRows(gpu4)": [0, 8, 0, 1]}),
        "health.row-remap",
        "fail",
        "GPU 4: row remapping failed",
        "nvidia-smi -i 4 -r",
    ),
    "hw-slowdown": (
        node(calls={"nvmlDeviceGetCurrentClocksEventReasons(gpu2)": 0x8 | 0x40}),
        "health.throttle",
        "fail",
        "GPU 2: HW slowdown, HW thermal slowdown active",
        "PERFORMANCE",
    ),
    "sw-thermal": (
        node(calls={"nvmlDeviceGetCurrentClocksEventReasons(gpu2)": 0x20}),
        "health.throttle",
        "warn",
        "GPU 2: SW thermal slowdown active",
        "TEMPERATURE",
    ),
    "hot-gpu": (
        node(calls={"nvmlDeviceGetMarginTemperature(gpu6)": 3}),
        "health.temperature",
        "warn",
        "GPU 6: 41 C, 3 C below its thermal limit (T.Limit)",
        "TEMPERATURE",
    ),
    "over-thermal-limit": (
        node(calls={"nvmlDeviceGetMarginTemperature(gpu6)": -2}),
        "health.temperature",
        "fail",
        "GPU 6: 41 C, at or over its thermal limit",
        "TEMPERATURE",
    ),
    "power-capped": (
        node(calls={"nvmlDeviceGetEnforcedPowerLimit(gpu7)": 400000}),
        "health.power",
        "warn",
        "GPU 7: power limit 400 W, below the default 700 W",
        "nvidia-smi -i 7 -pl",
    ),
    "pcie-x8": (
        node(calls={"nvmlDeviceGetCurrPcieLinkWidth(gpu1)": 8}),
        "health.pcie",
        "warn",
        "GPU 1: link is x8 of x16",
        "LnkSta",
    ),
    "pcie-replays": (
        node(calls={"nvmlDeviceGetPcieReplayCounter(gpu1)": 5000}),
        "health.pcie",
        "warn",
        "GPU 1: 5000 PCIe replays",
        "LnkSta",
    ),
    "nvlink-down": (
        node(calls={"nvmlDeviceGetNvLinkState(gpu5,7)": 0}),
        "health.nvlink",
        "fail",
        "GPU 5: 1 of 18 NVLinks down (links 7)",
        "nvlink -s",
    ),
    "nvlink-crc": (
        node(calls={"nvmlDeviceGetNvLinkErrorCounter(gpu5,3,2)": 9000}),
        "health.nvlink",
        "warn",
        "link 3: 9000",
        "nvlink -e",
    ),
    "xid-79": (
        load_snapshot("fault-xid-79"),
        "health.xid",
        "fail",
        "GPU 3: Xid 79 (GPU has fallen off the bus: reboot the node)",
        "sudo reboot",
    ),
    "xid-13": (
        node(system=kernel_log(("0000:18:00", 13, "Graphics Exception"))),
        "health.xid",
        "warn",
        "GPU 0: Xid 13 (graphics engine exception: restart the application)",
        "grep -iE",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_found_with_its_fix(fault: str) -> None:
    snapshot, label, status, summary, command = FAULTS[fault]
    results = judge(snapshot)
    result = results[label]
    assert result.status.value == status, result.summary
    assert summary in result.summary
    assert result.remediation is not None
    assert any(command in c for c in result.remediation.commands), result.remediation.commands


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_changes_only_its_own_finding(fault: str) -> None:
    """A fault node differs from the healthy node only in the finding it is about (and its consequences)."""
    allowed = {
        FAULTS[fault][1],
        "torch.cuda-available",
        "system.memory",
        "driver.gpu-count",
        "driver.fabric",
        "torch.arch",
    }
    bad = {label for label, r in judge(FAULTS[fault][0]).items() if r.status.value in ("warn", "fail", "error")}
    assert bad <= allowed, bad


def test_every_fault_file_is_in_the_table() -> None:
    on_disk = {p.stem.removeprefix("fault-") for p in SNAPSHOTS.glob("fault-*.json")}
    assert on_disk and on_disk <= set(FAULTS)


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
    from gpudoctor.facts.nvml import decode_fabric_health

    health = decode_fabric_health(mask, summary)
    assert [(s.value, text) for s, text in fabric_health_problems(health)] == problems


def test_driver_without_the_versioned_fabric_struct_still_reports_registration() -> None:
    """Drivers older than the versioned call (FunctionNotFound) answer the original struct: state only."""
    snap = copy.deepcopy(ROUTE_UNHEALTHY)
    snap["nvml_calls"] = {k: v for k, v in snap["nvml_calls"].items() if "FabricInfoV" not in k}
    fabric = replay_nvml(snap)["gpus"][5]["fabric"]
    assert fabric == {
        "state": "completed",
        "status": 0,
        "health": dict.fromkeys(FABRIC_HEALTH_FIELDS),
        "cluster_uuid": None,
        "clique_id": None,
    }


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
    results = judge(node(calls=not_supported_everywhere(2)))
    assert not [r for r in results.values() if r.status.value in ("error", "fail", "warn")]
    ecc = results["health.ecc"]
    assert [r.status.value for r in ecc.rows].count("skip") == 1
    assert "not available on GPU 2" in ecc.summary


def test_unreadable_kernel_log_skips_with_the_reason() -> None:
    unreadable = kernel_log(
        readable=False,
        reason="dmesg: read kernel buffer failed: Operation not permitted; "
        "journalctl -k: no kernel messages visible (no journal, or no permission to read it)",
    )
    result = judge(node(system=unreadable))["health.xid"]
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
    no_health = dict.fromkeys(FABRIC_HEALTH_FIELDS)  # every health field N/A, as the capture shows
    assert gpu["fabric"] == {
        "state": "completed",
        "status": 0,
        "health": no_health,
        "cluster_uuid": None,
        "clique_id": None,
    }
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

    from helpers.common import gpudoctor

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
