"""Real `nvidia-smi -q -x` captures (tests/fixtures/nvidia-smi-xml, from telegraf's test data, MIT) judged by
the same checks as a live node: identity read exactly, the verdicts a careful admin gives on reading each
file, and what a capture cannot hold said as such, never judged as a zero.

Where a test needs a fault no real capture shows, it edits a real capture and says which element it changed;
no capture here is invented."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES, gpudoctor, judge

from gpudoctor.facts import nvsmi_xml
from gpudoctor.facts.snapshot import replay_nvml, validate
from gpudoctor.model import Result, Status
from gpudoctor.paste.inputs import load

CAPTURES = FIXTURES / "nvidia-smi-xml"


def capture(name: str) -> dict[str, Any]:
    path = CAPTURES / f"{name}.xml"
    return nvsmi_xml.to_snapshot(path, path.read_bytes())


def edited(name: str, *edits: tuple[str, str]) -> dict[str, Any]:
    """A real capture with elements' text changed (old, new; every occurrence), for a fault no capture shows."""
    path = CAPTURES / f"{name}.xml"
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return nvsmi_xml.to_snapshot(path, text.encode())


def verdicts(results: dict[str, Result]) -> dict[str, str]:
    return {label: result.status.value for label, result in results.items()}


# name: (GPU UUIDs, PCI bus ids, driver, CUDA (NVML form), DTD version)
IDENTITY = {
    "a100-sxm4-v12": (["GPU-513536b6-7d19-9063-b049-1e69664bb298"], ["00000000:01:00.0"], "535.54.03", 12020, 12),
    "a10g": (["GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94"], ["00000000:00:1E.0"], "515.105.01", 11070, 11),
    "dual_a5000-v13": (
        ["GPU-12345678-aaaa-bbbb-cccc-0123456789ab", "GPU-12345678-aaaa-bbbb-cccc-0123456789cd"],
        ["00000000:81:00.0", "00000000:C1:00.0"],
        "590.44.01",
        13010,
        13,
    ),
    "gtx-1070-ti": (["GPU-f9ba66fc-a7f5-94c5-da19-019ef2f9c665"], ["00000000:01:00.0"], None, None, 10),
    "pro-6000-maxq-blackwell-v13": (
        ["GPU-12345678-aaaa-bbbb-cccc-0123456789ab"],
        ["00000000:61:00.0"],
        "590.44.01",
        13010,
        13,
    ),
    "quadro-p400": (["GPU-8f750be4-dfbc-23b9-b33f-da729a536494"], ["00000000:43:00.0"], "418.43", 10010, None),
    "rtx-3080-v13": (["GPU-19d6d965-2acc-f646-00f8-4c76979aabb4"], ["00000000:0C:00.0"], "595.58.03", 13020, 13),
    "tesla-t4": (["GPU-d37e67a5-91dd-3774-a5cb-99096249601a"], ["00000000:00:1E.0"], "515.105.01", 11070, 11),
}

# The verdicts read off each file (checks not named here skip: system, torch build, kernel log, workloads).
VERDICTS = {
    "a100-sxm4-v12": {
        "driver.nvml": "pass",
        "driver.gpu-count": "warn",  # attached_gpus 4, one <gpu> captured
        "driver.gpu-modes": "warn",  # MIG on with 4 instances; persistence off
        "driver.processes": "pass",
        "torch.cuda-driver": "warn",  # 535 runs cu126 only through minor-version compatibility
        "health.ecc": "pass",
        "health.throttle": "pass",
        "health.temperature": "pass",
        "health.power": "pass",
        "health.pcie": "pass",
    },
    "a10g": {
        "driver.nvml": "pass",
        "driver.gpu-count": "pass",
        "driver.gpu-modes": "warn",  # persistence off
        "driver.processes": "warn",  # Xorg holds 22 MiB
        "torch.cuda-driver": "warn",  # 515 / CUDA 11.7: older than every current wheel, runs CUDA 11.x builds
        "health.ecc": "pass",
        "health.row-remap": "pass",
        "health.throttle": "pass",
        "health.temperature": "pass",
        "health.power": "pass",
        "health.pcie": "warn",  # x8 of x16
    },
    "dual_a5000-v13": {
        "driver.nvml": "pass",
        "driver.gpu-count": "pass",
        "driver.gpu-modes": "pass",
        "driver.processes": "warn",  # llama-server on both GPUs
        "torch.cuda-driver": "pass",
        "health.ecc": "warn",  # ECC disabled
        "health.row-remap": "pass",
        "health.throttle": "pass",
        "health.temperature": "pass",
        "health.power": "pass",
        "health.pcie": "pass",  # Gen1 at idle of Gen4: a downshift, not a fault
    },
    "gtx-1070-ti": {
        "driver.nvml": "pass",
        "driver.gpu-count": "pass",
        "driver.gpu-modes": "pass",  # compute mode Default; the rest not in the capture
    },
    "pro-6000-maxq-blackwell-v13": {
        "driver.nvml": "pass",
        "driver.gpu-count": "pass",
        "driver.gpu-modes": "pass",
        "driver.processes": "warn",
        "torch.cuda-driver": "pass",
        "health.ecc": "warn",
        "health.row-remap": "pass",
        "health.throttle": "pass",
        "health.temperature": "pass",  # against the T.Limit margin (68 C)
        "health.power": "pass",
        "health.pcie": "warn",  # the host runs Gen4, the GPU supports Gen5
    },
    "quadro-p400": {
        "driver.nvml": "pass",
        "driver.gpu-count": "pass",
        "driver.gpu-modes": "warn",
        "driver.processes": "pass",
        "torch.cuda-driver": "warn",  # driver 418 / CUDA 10.1: runs CUDA 10.1 builds, no current wheel
        "health.throttle": "pass",  # gpu_idle only
        "health.temperature": "pass",
        "health.pcie": "pass",
    },
    "rtx-3080-v13": {
        "driver.nvml": "pass",
        "driver.gpu-count": "pass",
        "driver.gpu-modes": "warn",
        "driver.processes": "pass",
        "torch.cuda-driver": "pass",
        "health.throttle": "pass",
        "health.temperature": "pass",
        "health.power": "pass",
        "health.pcie": "pass",
    },
    "tesla-t4": {
        "driver.nvml": "pass",
        "driver.gpu-count": "pass",
        "driver.gpu-modes": "warn",
        "driver.processes": "warn",  # Xorg and a python process
        "torch.cuda-driver": "warn",  # 515: runs CUDA 11.x builds, no current wheel
        "health.ecc": "pass",
        "health.retired-pages": "pass",
        "health.throttle": "pass",
        "health.temperature": "pass",
        "health.power": "pass",
        "health.pcie": "warn",  # x8 of x16
    },
}


def test_every_shared_capture_is_here() -> None:
    assert sorted(p.stem for p in CAPTURES.glob("*.xml")) == sorted(IDENTITY)
    assert (CAPTURES / "LICENSE.telegraf").read_text().startswith("The MIT License")


@pytest.mark.parametrize("name", sorted(IDENTITY))
def test_identity_is_read_exactly(name: str) -> None:
    uuids, buses, driver, cuda, dtd = IDENTITY[name]
    snap = capture(name)
    gpus = snap["nvml"]["gpus"]
    assert [g["uuid"] for g in gpus] == uuids
    assert [g["pci_bus_id"] for g in gpus] == buses
    assert [g["index"] for g in gpus] == list(range(len(uuids)))
    assert snap["nvml"]["driver_version"] == driver
    assert snap["nvml"]["cuda_driver_version"] == cuda
    assert snap["capture"]["dtd_version"] == dtd
    assert snap["sources"] == ["nvml"]
    validate(snap, name)  # a capture's snapshot is a valid snapshot: `snapshot --from-xml` writes it


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_each_capture_gets_the_careful_admins_verdicts(name: str) -> None:
    results = judge(capture(name))
    got = verdicts(results)
    assert not [label for label, status in got.items() if status == "error"], got
    judged = {label: status for label, status in got.items() if status != "skip"}
    assert judged == VERDICTS[name]


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_what_a_capture_cannot_hold_skips_saying_so(name: str) -> None:
    results = judge(capture(name))
    for label in ("system.shm", "system.limits", "driver.kernel-module", "torch.import", "torch.arch"):
        assert results[label].status == Status.SKIP
        assert "not in this nvidia-smi capture" in results[label].summary, label
    assert results["health.xid"].summary == "not in this nvidia-smi capture: it holds no kernel log facts"
    assert results["health.nvlink"].summary == "NVLink state: not in this capture"


def test_old_driver_warns_naming_the_newest_build_it_runs() -> None:
    """A capture holds no torch facts: a node on an old driver may run an old torch well (a working torch 1.x
    cu113 on R470 was once failed here), so it warns, naming the newest torch build the driver runs on its
    GPUs, and offers both ways: keep the driver with that build, or upgrade it for the newest."""
    result = judge(capture("quadro-p400"))["torch.cuda-driver"]
    assert result.status == Status.WARN
    assert result.summary == "driver 418.43 runs torch 1.8.1+cu101 at the newest; torch 2.15.0+cu132 needs >= 595.71.05"
    assert result.remediation.why.startswith(
        "Driver 418.43 (CUDA 10.1): torch 1.8.1+cu101 (CUDA 10.1.243) is the newest official build it runs."
    )
    assert "R595 or newer" in result.remediation.commands[0]  # the capture does not say the distribution
    assert result.remediation.instead.commands == [
        "pip install torch==1.8.1+cu101 torchvision==0.9.1+cu101 -f https://download.pytorch.org/whl/torch_stable.html"
    ]
    a10g = judge(capture("a10g"))["torch.cuda-driver"].remediation.why
    assert "torch 2.7.1+cu118 (CUDA 11.8.0) is the newest official build it runs, through minor-version" in a10g
    assert "(torch 2.0.1+cu117 fully)" in a10g


def test_driver_between_family_and_build_minimum_warns_and_new_driver_names_its_newest_build() -> None:
    a100 = judge(capture("a100-sxm4-v12"))["torch.cuda-driver"]
    assert a100.status == Status.WARN and "minor-version compatibility" in a100.remediation.why
    assert a100.remediation.commands == [
        "pip install torch==2.15.0+cu126 torchvision --index-url https://download.pytorch.org/whl/cu126"
    ]  # keeping the driver ranks first: it keeps the newest release
    newest = judge(capture("rtx-3080-v13"))["torch.cuda-driver"]
    assert newest.status == Status.PASS
    assert newest.summary == "driver 595.58.03 runs torch 2.15.0+cu130, the newest torch; cu132 needs >= 595.71.05"


def test_narrow_link_is_flagged_and_idle_downshift_is_not() -> None:
    t4 = judge(capture("tesla-t4"))["health.pcie"]
    assert t4.summary.startswith("GPU 0: link is x8 of x16")
    a5000 = judge(capture("dual_a5000-v13"))["health.pcie"]
    assert a5000.status == Status.PASS
    assert all("Gen4" in row.summary and "train down at idle" in row.summary for row in a5000.rows)


def test_mig_instances_and_partial_node_are_reported() -> None:
    results = judge(capture("a100-sxm4-v12"))
    assert "MIG is on (4 instances)" in results["driver.gpu-modes"].summary
    assert "persistence mode off" in results["driver.gpu-modes"].rows[0].summary
    assert results["driver.gpu-count"].summary == "the capture lists 1 of the node's 4 GPUs: the other 3 are not judged"
    assert judge(capture("a100-sxm4-v12"), expect_gpus=4)["driver.gpu-count"].status == Status.WARN
    assert judge(capture("a100-sxm4-v12"), expect_gpus=8)["driver.gpu-count"].status == Status.FAIL


def test_remapped_rows_not_reported_are_not_called_unsupported_on_an_a100() -> None:
    result = judge(capture("a100-sxm4-v12"))["health.row-remap"]
    assert result.summary == "remapped rows not reported for this GPU (GPUs before Ampere have none)"


def test_processes_are_named_as_nvidia_smi_read_them() -> None:
    summary = judge(capture("tesla-t4"))["driver.processes"].summary
    assert "pid 675 (Xorg graphics) holds 22 MiB" in summary  # /usr/lib/xorg/Xorg, as a name
    assert "pid 5762 (python) holds 1005 MiB" in summary


def test_partial_capture_is_judged_on_what_it_has() -> None:
    results = judge(capture("gtx-1070-ti"))
    assert results["health.ecc"].summary == "ECC mode: not in this capture"
    assert results["health.power"].summary == "power limit: not in this capture"
    assert results["health.temperature"].summary == "39 C; slowdown temperature: not in this capture"
    assert results["health.pcie"].summary == "Gen1 x16 now; PCIe maximum link: not in this capture"
    assert results["driver.processes"].summary == "process list: not in this capture"
    assert results["driver.gpu-modes"].summary == (
        "1 GPU: compute mode Default; not in this capture: persistence, MIG, infoROM"
    )
    assert results["torch.cuda-driver"].summary == "the driver version is not in this capture"


@pytest.mark.parametrize("name", sorted(IDENTITY))
def test_capture_facts_have_the_documented_shape(name: str) -> None:
    from gpudoctor.facts import schema

    nvml = capture(name)["nvml"]
    assert set(nvml) <= set(schema.NvmlFacts.__annotations__)
    for gpu in nvml["gpus"]:
        assert set(gpu) <= set(schema.GpuFacts.__annotations__)
        assert set(gpu["not_captured"]) <= set(schema.FACT_NAMES) | {"name", "uuid", "pci_device_id"}
        for process in gpu["processes"] or []:
            assert set(process) <= set(schema.Process.__annotations__)


def test_fields_a_capture_lacks_are_never_zero() -> None:
    gpu = capture("gtx-1070-ti")["nvml"]["gpus"][0]
    for fact in ("ecc_mode", "retired_pages", "remapped_rows", "power_limit_w", "clock_event_reasons"):
        assert gpu[fact] is None and fact in gpu["not_captured"]
    assert gpu["ecc_errors"] == dict.fromkeys(
        ("volatile_uncorrected", "volatile_corrected", "aggregate_uncorrected", "aggregate_corrected")
    )
    t4 = capture("tesla-t4")["nvml"]["gpus"][0]
    assert t4["retired_pages"] == {"sbe": 0, "dbe": 0, "pending": False}
    assert "retired_pages" not in t4["not_captured"]


def test_both_clock_reason_spellings_and_every_ecc_form() -> None:
    hw = ("<clocks_throttle_reason_hw_slowdown>Not Active", "<clocks_throttle_reason_hw_slowdown>Active")
    assert judge(edited("quadro-p400", hw))["health.throttle"].summary == "GPU 0: HW slowdown active"
    sw = ("<clocks_event_reason_sw_thermal_slowdown>Not Active", "<clocks_event_reason_sw_thermal_slowdown>Active")
    assert judge(edited("rtx-3080-v13", sw))["health.throttle"].status == Status.WARN
    v13 = edited(
        "pro-6000-maxq-blackwell-v13",
        ("<current_ecc>Disabled", "<current_ecc>Enabled"),
        ("<pending_ecc>Disabled", "<pending_ecc>Enabled"),
        ("<sram_uncorrectable_secded>N/A<", "<sram_uncorrectable_secded>2<"),
    )
    assert judge(v13)["health.ecc"].summary == "GPU 0: 2 uncorrectable ECC errors since boot"
    v11 = edited(
        "tesla-t4", ("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>")
    )
    assert judge(v11)["health.ecc"].summary == "GPU 0: 3 uncorrectable ECC errors since boot"
    corrected = edited("tesla-t4", ("<dram_correctable>0<", "<dram_correctable>500<"))
    assert judge(corrected)["health.ecc"].status == Status.WARN


def test_row_remap_and_retirement_faults_fail() -> None:
    pending = edited("a10g", ("<remapped_row_pending>No", "<remapped_row_pending>Yes"))
    assert judge(pending)["health.row-remap"].summary == "GPU 0: a row remap is pending: reset the GPU to apply it"
    retiring = edited("tesla-t4", ("<pending_retirement>No", "<pending_retirement>Yes"))
    assert judge(retiring)["health.retired-pages"].status == Status.FAIL


def test_fabric_state_in_words() -> None:
    up = edited("a100-sxm4-v12", ("<state>N/A</state>", "<state>Completed</state>"), ("<status>N/A", "<status>Success"))
    assert judge(up)["driver.fabric"].status == Status.PASS
    down = edited("a100-sxm4-v12", ("<state>N/A</state>", "<state>Not Started</state>"))
    assert "fabric not started" in judge(down)["driver.fabric"].summary
    unhealthy = edited(
        "rtx-3080-v13",
        ("<state>N/A</state>", "<state>Completed</state>"),
        ("<status>N/A", "<status>Success"),
        ("<summary>N/A", "<summary>Unhealthy"),
        ("<route_unhealthy>N/A", "<route_unhealthy>True"),
    )
    result = judge(unhealthy)["driver.fabric"]
    assert result.status == Status.FAIL and "route unhealthy" in result.summary
    assert judge(capture("a10g"))["driver.fabric"].summary == "NVSwitch fabric state: not in this capture"


def test_vgpu_and_windows_captures_are_judged_on_what_they_have() -> None:
    vgpu = edited(
        "tesla-t4",
        ("<virtualization_mode>Pass-Through", "<virtualization_mode>VGPU"),
        ("<retired_count>0</retired_count>", "<retired_count>N/A</retired_count>"),
        ("<pending_retirement>No", "<pending_retirement>N/A"),
        ("<enforced_power_limit>70.00 W", "<enforced_power_limit>N/A"),
        ("<max_link_width>16x", "<max_link_width>N/A"),
    )
    assert vgpu["nvml"]["gpus"][0]["virtualization_mode"] == "VGPU"
    results = judge(vgpu)
    assert not [r for r in results.values() if r.status == Status.ERROR]
    assert results["health.retired-pages"].summary.startswith("no page retirement")
    assert results["health.power"].summary == "power limits not available"
    wddm = edited(
        "tesla-t4",
        ("<current_dm>N/A", "<current_dm>WDDM"),
        ("<used_memory>22 MiB", "<used_memory>Not available in WDDM driver model"),
    )
    assert wddm["nvml"]["gpus"][0]["driver_model"] == "WDDM"
    assert "pid 675 (Xorg graphics) holds an unknown amount of memory" in judge(wddm)["driver.processes"].summary


def test_a_windows_capture_redirected_by_powershell_is_read(tmp_path: Path) -> None:
    """PowerShell 5's `>` writes UTF-16 with a byte-order mark and CRLF line ends."""
    path = tmp_path / "t4-windows.xml"
    path.write_bytes((CAPTURES / "tesla-t4.xml").read_text().replace("\n", "\r\n").encode("utf-16"))
    snap = load(path)
    assert snap["capture"]["dtd_version"] == 11
    assert verdicts(judge(snap)) == verdicts(judge(capture("tesla-t4")))


def test_check_from_a_capture_as_a_user_runs_it(tmp_path: Path) -> None:
    path = CAPTURES / "quadro-p400.xml"
    proc = gpudoctor("check", "--from", str(path), "--json", "--strict")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["host"] == "quadro-p400.xml (nvidia-smi capture)"
    assert report["source"] == f"snapshot:{path}"
    assert not [c for c in report["checks"] if c["status"] == "error"]
    console = gpudoctor("check", "--from", str(CAPTURES / "dual_a5000-v13.xml"))
    assert console.returncode == 0, console.stderr
    assert "checks skipped: not in this nvidia-smi capture: it holds no torch facts" in console.stdout


def test_snapshot_from_xml_judges_the_same(tmp_path: Path) -> None:
    out = tmp_path / "t4.json"
    assert gpudoctor("snapshot", "--from-xml", str(CAPTURES / "tesla-t4.xml"), "-o", str(out)).returncode == 0
    converted = load(out)
    assert converted["capture"]["file"] == "tesla-t4.xml"
    assert verdicts(judge(converted)) == verdicts(judge(capture("tesla-t4")))


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("<?xml version='1.0'?><foo/>", "is XML but not an nvidia-smi -q -x capture (root <foo>"),
        ("<nvidia_smi_log><gpu>", "is XML that does not parse"),
        ("<nvidia_smi_log><driver_version>550.1</driver_version></nvidia_smi_log>", "with no <gpu> element"),
        ("<nvidia_smi_log><gpu", "is XML that does not parse"),
    ],
)
def test_files_that_are_not_captures_are_one_line_errors(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "node.xml"
    path.write_text(content)
    for args, said in ((["check", "--from", str(path)], words), (["snapshot", "--from-xml", str(path)], words)):
        proc = gpudoctor(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert said in proc.stderr, args


def test_a_snapshot_is_not_taken_for_a_capture(tmp_path: Path) -> None:
    proc = gpudoctor("snapshot", "--from-xml", str(FIXTURES / "snapshots" / "h100-sxm-8x.json"))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("is not an nvidia-smi -q -x capture (XML starting with <nvidia_smi_log>)")


def test_capture_metrics_pass_promtool(tmp_path: Path) -> None:
    from test_monitoring import promtool

    prom = tmp_path / "gpu.prom"
    gpudoctor("check", "--from", str(CAPTURES / "a100-sxm4-v12.xml"), "--prom-file", str(prom))
    proc = subprocess.run([promtool(), "check", "metrics"], input=prom.read_text(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r'gpudoctor_check_status\{[^}]*check="torch.cuda-driver"', prom.read_text())


def test_judging_a_capture_imports_neither_torch_nor_pynvml() -> None:
    """A capture is judged on a laptop or a support desk: no GPU stack is needed, and none is loaded."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpudoctor", "check", "--from", str(CAPTURES / "tesla-t4.xml")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "pynvml" not in imported


# A real H100 (driver 580.159.04) lent to this project: its snapshot, its quick report as it ran there, and its
# own `nvidia-smi -q -x` capture, all taken minutes apart by tests/fixtures/real/capture.sh's steps.
REAL = FIXTURES / "real"
H100 = "H100-80GB-HBM3"
SAME_FACTS = (
    "name",
    "uuid",
    "pci_bus_id",
    "pci_device_id",
    "memory_total_mib",
    "persistence_mode",
    "compute_mode",
    "mig_mode",
    "ecc_mode",
    "ecc_errors",
    "retired_pages",
    "remapped_rows",
    "clock_event_reasons",
    "temperature_slowdown_c",
    "temperature_shutdown_c",
    "power_limit_w",
    "power_default_limit_w",
    "pcie",
    "processes",
)


def test_a_real_h100_snapshot_replays_and_is_judged_as_it_was_live() -> None:
    snap = load(REAL / f"{H100}.snapshot.json")
    assert replay_nvml(snap) == snap["nvml"]
    offline = judge(snap)
    live = json.loads((REAL / f"{H100}.quick.json").read_text())
    for check in live["checks"]:  # the verdicts (the words of a summary are this version's)
        label = check["check_id"] + (f":{check['aspect']}" if check["aspect"] else "")
        assert offline[label].status.value == check["status"], label


def test_a_real_h100_capture_reads_what_nvml_gave_on_the_same_gpu() -> None:
    """The capture reader against the live NVML gateway on one GPU: the same facts where the capture holds
    them (its T.Limit-relative thresholds made absolute), and the same verdict from every check it can judge."""
    capture_snap = load(REAL / f"{H100}.nvidia-smi-q-x.xml")
    live_snap = load(REAL / f"{H100}.snapshot.json")
    read, gathered = capture_snap["nvml"]["gpus"][0], live_snap["nvml"]["gpus"][0]
    assert {fact: read[fact] for fact in SAME_FACTS} == {fact: gathered[fact] for fact in SAME_FACTS}
    assert read["temperature_slowdown_c"] == 89
    from_capture, from_live = judge(capture_snap), judge(live_snap)
    judged = [label for label, result in from_capture.items() if result.status != Status.SKIP]
    assert len(judged) == 11
    for label in judged:
        assert from_capture[label].status == from_live[label].status, label
    assert from_capture["health.temperature"].summary == from_live["health.temperature"].summary
