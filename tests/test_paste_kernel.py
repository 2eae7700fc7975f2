"""The kernel-log reader over real dmesg / journalctl / syslog / lspci / /proc pastes (tests/fixtures/pastes/kernel
and bug-report, sources in SOURCES.md): the facts it records in the live shapes, the signatures of
data/signatures/kernel.toml it lets the engine find, what the judges make of them, and bad input."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from helpers.common import PASTES, read_alone, read_amid
from helpers.growth import LINEAR, K, growth

from gpudoctor.api import Status
from gpudoctor.checks.driver import judge_kernel_module
from gpudoctor.checks.health import judge_xid
from gpudoctor.facts.system import parse_events
from gpudoctor.paste import kernel, read
from gpudoctor.paste.found import Found
from gpudoctor.paste.signatures import table
from gpudoctor.registry import discover

KERNEL = PASTES / "kernel"
BUG_REPORT = PASTES / "bug-report"
OTHER_KINDS = ("collect_env", "nvidia-smi", "errors", "nccl")


def found_in(path: Path) -> Found:
    """The kernel reader alone over a fixture, lines split as paste.read splits them."""
    return read_alone(kernel.read, path.read_text(encoding="utf-8", errors="replace"))


def kernel_log(found: Found) -> dict[str, Any]:
    return found.facts["system"]["kernel_log"]


def xids(found: Found) -> dict[tuple[str, int], int]:
    return {(e["pci"], e["xid"]): e["count"] for e in kernel_log(found)["xids"]}


def sxids(found: Found) -> dict[tuple[str, int], tuple[bool, int]]:
    return {(e["pci"], e["sxid"]): (e["fatal"], e["count"]) for e in kernel_log(found)["sxids"]}


def groups(signature: dict[str, Any]) -> dict[str, Any]:
    """What a signature's pattern captured (the engine also keeps the whole line under "_match")."""
    return {k: v for k, v in signature["values"].items() if not k.startswith("_")}


def signature_ids(path: Path) -> list[str]:
    found = read(path.read_text(encoding="utf-8", errors="replace"))
    return sorted({s["id"] for s in found.signatures if s["id"].startswith("kernel-")})


# file -> (system.nvidia_module_version, nvml.driver_version) each fixture states, None where it states none
VERSIONS = {
    "api-mismatch-dmesg-515-vs-510.txt": ("510.73.05", "515.48.07"),
    "api-mismatch-journalctl-367.txt": ("367.35", "367.44"),
    "api-mismatch-new-wording-client-name-pid-595.txt": ("595.80", "595.84"),
    "api-mismatch-new-wording-journalctl-nvidia-powerd-575.txt": ("575.51.02", "570.133.07"),
    "api-mismatch-r570-dmesg-then-gsp-firmware-missing-rminitadapter.txt": ("570.144", "570.153.02"),
    "api-mismatch-syslog-hash012-escaped-535-vs-530.txt": ("530.30.02", "535.54.03"),
    "fallen-off-bus-multiline-no-xid-open-570-banner-with-date.txt": ("570.158.01", None),
    "loading-banner-open-kernel-module-530-arch.txt": ("530.41.03", None),
    "loading-banner-proprietary-285-x86-32bit-kern-log-2011.txt": ("285.03", None),
    "loading-banner-proprietary-331-with-uvm-2014.txt": ("331.113", None),
    "xid31-mmu-fault-open-595-with-banner-and-serial.txt": ("595.71.05", None),
}

# file -> {(pci, xid): count}
XIDS = {
    "xid119-gsp-rpc-timeout-h100-dmesg-T.txt": {("0000:9b:00", 119): 5},
    "xid13-xid109-peermem-dmesg-ctime.txt": {("0000:cb:00", 13): 3, ("0000:cb:00", 109): 1},
    "xid13-xid43-dmesg-decode-iso.txt": {("0000:38:00", 13): 16, ("0000:38:00", 43): 1},
    "xid149-xid154-gb200-nvlink-recovery-action-from-gpud-tests.txt": {
        ("0009:01:00", 149): 3,
        ("0009:01:00", 154): 1,
        ("0008:01:00", 149): 2,
        ("0008:01:00", 154): 1,
        ("0019:01:00", 154): 1,
        ("0018:01:00", 154): 1,
    },
    "xid31-mmu-fault-2026-format.txt": {("0000:01:00", 31): 1},
    "xid31-mmu-fault-open-595-with-banner-and-serial.txt": {("0000:01:00", 31): 1},
    "xid31-xid13-xid32-r418-era-old-format.txt": {("0000:01:00", 31): 1, ("0000:01:00", 13): 4, ("0000:01:00", 32): 1},
    "xid45-caused-by-previous-xid145-xid149-journal.txt": {
        ("0000:dc:00", 45): 2,
        ("0000:ed:00", 45): 2,
        ("0000:ba:00", 45): 2,
        ("0000:97:00", 45): 1,
    },
    "xid48-dbe-xid63-page-retirement-r390-dmesg-T.txt": {("0000:8a:00", 48): 1, ("0000:8a:00", 63): 1},
    "xid63-row-remapper-new-row-marked.txt": {("0000:10:1c", 63): 1},
    "xid79-sxid20034-nvswitch-fallen-off-bus.txt": {("0000:91:00", 79): 1},
}

# file -> the kernel-* signatures the paste holds
SIGNATURES = {
    "api-mismatch-dmesg-515-vs-510.txt": ["kernel-api-mismatch"],
    "api-mismatch-journalctl-367.txt": ["kernel-api-mismatch"],
    "api-mismatch-new-wording-client-name-pid-595.txt": ["kernel-api-mismatch"],
    "api-mismatch-new-wording-journalctl-nvidia-powerd-575.txt": ["kernel-api-mismatch"],
    "api-mismatch-r570-dmesg-then-gsp-firmware-missing-rminitadapter.txt": [
        "kernel-api-mismatch",
        "kernel-rminitadapter-firmware-missing",
    ],
    "api-mismatch-syslog-hash012-escaped-535-vs-530.txt": ["kernel-api-mismatch"],
    "fallen-off-bus-multiline-no-xid-open-570-banner-with-date.txt": ["kernel-gpu-fallen-off-bus"],
    "gsp-rm-alloc-failed-reset-required-dmesg-T.txt": ["kernel-reset-required"],
    "lspci-kernel-driver-in-use-nouveau.txt": ["kernel-nouveau-bound"],
    "no-nvidia-adapter-found-init-module-failed.txt": ["kernel-no-nvidia-gpu"],
    "nouveau-bound-old-style-dmesg.txt": ["kernel-nouveau-bound"],
    "open-kernel-module-gpu-without-gsp-not-supported.txt": ["kernel-open-module-needs-gsp"],
    "rminitadapter-failed-gsp-firmware-rtx3090-550.txt": ["kernel-gfw-boot-incomplete", "kernel-gsp-init-failed"],
    "rminitadapter-failed-old-wording-bearing-minor-number.txt": ["kernel-rminitadapter-failed"],
    "rminitadapter-failed-osinitnvmapping-cannot-attach-gpu.txt": ["kernel-rminitadapter-failed"],
    "rminitadapter-failed-syslog-kubernetes-node-0x24-0x72-1568.txt": ["kernel-rminitadapter-failed"],
    "rminitadapter-failed-vgpu-ocp-0x11-0x45-2525.txt": ["kernel-rminitadapter-failed"],
    "xid119-gsp-rpc-timeout-h100-dmesg-T.txt": ["kernel-gsp-rpc-reset-needed"],
    "xid79-sxid20034-nvswitch-fallen-off-bus.txt": ["kernel-gpu-fallen-off-bus"],
}


def kernel_fixtures() -> list[Path]:
    return sorted(KERNEL.glob("*.txt"))


@pytest.mark.parametrize("path", kernel_fixtures(), ids=lambda p: p.name)
def test_every_kernel_fixture_gives_exactly_its_versions_xids_and_signatures(path: Path) -> None:
    found = found_in(path)
    module, library = VERSIONS.get(path.name, (None, None))
    assert found.facts["system"].get("nvidia_module_version") == module
    assert found.facts["nvml"].get("driver_version") == library
    assert found.facts["system"].get("kernel_modules") == (["nouveau"] if "nouveau" in path.name else None)
    assert not found.conflicts
    if path.name.startswith("lspci"):
        assert "kernel_log" not in found.facts["system"], "lspci output is not a kernel log"
    else:
        log = kernel_log(found)
        assert (log["readable"], log["reason"], log["source"]) == (True, None, "pasted kernel log")
        assert xids(found) == XIDS.get(path.name, {})
    assert signature_ids(path) == sorted(SIGNATURES.get(path.name, []))


def test_nvswitch_sxids_are_counted_per_switch_and_fatal() -> None:
    found = found_in(KERNEL / "xid79-sxid20034-nvswitch-fallen-off-bus.txt")
    # The "Severity 1 Engine instance" and "Data {...}" lines are detail lines of the same events, not events.
    assert sxids(found) == {
        ("0000:06:00.0", 20034): (True, 1),
        ("0000:05:00.0", 20034): (True, 2),
        ("0000:07:00.0", 20034): (True, 1),
    }


def test_event_times_are_read_from_each_log_wrapper() -> None:
    """dmesg -T and dmesg --decode --time-format iso give ISO times as the live reader's ISO stamps; syslog's
    stamp has no year and is kept as written; seconds since boot are no time."""
    ctime = kernel_log(found_in(KERNEL / "xid119-gsp-rpc-timeout-h100-dmesg-T.txt"))["xids"][0]
    assert (ctime["first_time"], ctime["last_time"]) == ("2025-02-23T16:24:18", "2025-02-23T16:30:13")
    assert ctime["last_line"].startswith("[Sun Feb 23 16:30:13 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1240590")
    iso = kernel_log(found_in(KERNEL / "xid13-xid43-dmesg-decode-iso.txt"))["xids"][0]
    assert (iso["first_time"], iso["count"]) == ("2025-01-21T04:41:44", 16)
    uptime = kernel_log(found_in(KERNEL / "xid31-mmu-fault-2026-format.txt"))["xids"][0]
    assert uptime["first_time"] is None
    line = (KERNEL / "rminitadapter-failed-syslog-kubernetes-node-0x24-0x72-1568.txt").read_text().splitlines()[0]
    syslog = line.split("NVRM:")[0] + "NVRM: Xid (PCI:0000:0a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen"
    found = Found([syslog])
    kernel.read(found)
    assert kernel_log(found)["xids"][0]["first_time"] == "Dec 2 11:49:53"


def test_a_paste_of_the_live_iso_format_gives_what_the_live_parser_gives() -> None:
    """The same lines as `dmesg --time-format iso` prints them (what read_kernel_log parses on a node): the
    pasted reader's entries equal system.parse_events', so health.xid judges a paste as a live node."""
    events = [
        line.split("] ", 1)[1]
        for name in ("xid79-sxid20034-nvswitch-fallen-off-bus.txt", "xid31-xid13-xid32-r418-era-old-format.txt")
        for line in (KERNEL / name).read_text().splitlines()
        if "Xid" in line
    ]
    text = "\n".join(f"2024-05-0{i % 9 + 1}T10:00:0{i % 10},123456+00:00 {event}" for i, event in enumerate(events))
    found = Found(text.split("\n"))
    kernel.read(found)
    live = parse_events(text)
    assert kernel_log(found)["xids"] == live["xids"]
    assert kernel_log(found)["sxids"] == live["sxids"]
    assert len(live["xids"]) == 4 and len(live["sxids"]) == 3


def test_mig_attributed_xids_are_read() -> None:
    """kernel_rc.c adds " GPU-I:%02u" (and " GPU-CI:%02u") to the PCI attribute of an Xid inside a MIG instance;
    the lines are NVIDIA's own examples (kern_gpu_error_cont_ga100.c comment, quoted in kernel/FORMATS.md)."""
    lines = [
        "[ 100.1] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, "
        "D-RST: No",
        "[ 100.2] NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 95, pid=7062, Uncontained: LTC TAG (0x2, 0x1). "
        "RST: Yes",
    ]
    found = Found(lines)
    kernel.read(found)
    assert xids(found) == {("0000:01:00", 94): 1, ("0000:01:00", 95): 1}


def test_proc_driver_nvidia_version_gives_the_module_version_but_is_no_kernel_log() -> None:
    expected = {
        "proc-driver-nvidia-version-open-525-arch.txt": "525.60.11",
        "proc-driver-nvidia-version-open-565-ubuntu24.txt": "565.57.01",
        "proc-driver-nvidia-version-jetson-orin-aarch64-l4t-35.3.1.txt": "35.3.1",  # as system.py reads it
    }
    for name, version in expected.items():
        found = found_in(BUG_REPORT / name)
        assert found.facts["system"] == {"nvidia_module_version": version}, name
    assert found_in(BUG_REPORT / "nvidia-bug-report-sh-console-banner.txt").kinds == {}


def test_nouveau_bound_is_a_loaded_module_but_blacklists_and_candidates_are_not() -> None:
    for name in ("lspci-kernel-driver-in-use-nouveau.txt", "nouveau-bound-old-style-dmesg.txt"):
        assert found_in(KERNEL / name).facts["system"]["kernel_modules"] == ["nouveau"], name
    not_bound = [
        "\tKernel modules: nouveau, nvidia_drm, nvidia",
        "blacklist nouveau",
        "[    0.000000] Command line: BOOT_IMAGE=/vmlinuz root=/dev/sda1 modprobe.blacklist=nouveau",
        "options nouveau modeset=0",
    ]
    assert with_row_remap("\n".join(not_bound)).facts == ONLY_ROW_REMAP


def test_the_kernel_module_judge_says_reboot_for_an_api_mismatch_and_blacklist_for_nouveau() -> None:
    found = found_in(KERNEL / "api-mismatch-dmesg-515-vs-510.txt")
    result = judge_kernel_module(found.facts["nvml"], found.facts["system"])
    assert result.status is Status.FAIL
    assert result.summary.startswith("kernel module 510.73.05, library 515.48.07")
    assert result.remediation is not None and "sudo reboot" in result.remediation.commands
    found = found_in(KERNEL / "lspci-kernel-driver-in-use-nouveau.txt")
    result = judge_kernel_module(found.facts["nvml"], found.facts["system"])
    assert result.status is Status.FAIL and "nouveau" in result.summary


def test_health_xid_judges_pasted_xids_against_the_gpus() -> None:
    gpu = {"index": 4, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:9B:00.0"}
    other = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:18:00.0"}
    result = judge_xid(kernel_log(found_in(KERNEL / "xid119-gsp-rpc-timeout-h100-dmesg-T.txt")), [other, gpu])
    assert result.status is Status.FAIL
    rows = {row.index: row for row in result.rows}
    assert rows[0].status is Status.PASS
    assert rows[4].status is Status.FAIL and rows[4].summary.startswith("Xid 119 (GSP RPC timeout")
    assert "x5, 2025-02-23T16:24:18 to 2025-02-23T16:30:13" in rows[4].summary
    gb200 = kernel_log(found_in(KERNEL / "xid149-xid154-gb200-nvlink-recovery-action-from-gpud-tests.txt"))
    verdict = judge_xid(gb200, [{"index": 0, "name": "NVIDIA GB200", "pci_bus_id": "00000019:01:00.0"}])
    assert verdict.status is Status.FAIL and "GPU Reset Required" in verdict.rows[0].summary


def test_a_multi_line_api_mismatch_cut_after_its_first_line_states_no_module_version() -> None:
    first = (KERNEL / "api-mismatch-dmesg-515-vs-510.txt").read_text().splitlines()[0]
    found = read(first)
    assert "nvidia_module_version" not in found.facts["system"] and "driver_version" not in found.facts["nvml"]
    assert found.facts["system"]["kernel_log"]["xids"] == []
    mismatch = [s for s in found.signatures if s["id"] == "kernel-api-mismatch"]
    assert mismatch and groups(mismatch[0]) == {"client_version": "515.48.07"}


def test_quoted_and_prefixed_pastes_read_alike() -> None:
    """Markdown quote markers, CRLF line ends and a blank line in the middle, as issue bodies carry them."""
    original = (KERNEL / "api-mismatch-journalctl-367.txt").read_text()
    quoted = "\r\n".join("> " + line for line in original.splitlines())
    found = read(
        "```\r\n" + quoted + "\r\n```\r\n\r\n" + (KERNEL / "xid63-row-remapper-new-row-marked.txt").read_text()
    )
    assert found.facts["system"]["nvidia_module_version"] == "367.35"
    assert found.facts["nvml"]["driver_version"] == "367.44"
    assert xids_of(found) == {("0000:10:1c", 63): 1}


def xids_of(found: Found) -> dict[tuple[str, int], int]:
    return {(e["pci"], e["xid"]): e["count"] for e in found.facts["system"]["kernel_log"]["xids"]}


def test_two_different_module_versions_are_a_conflict_not_a_pick() -> None:
    found = read(
        (KERNEL / "loading-banner-open-kernel-module-530-arch.txt").read_text()
        + (BUG_REPORT / "proc-driver-nvidia-version-open-565-ubuntu24.txt").read_text()
    )
    assert found.facts["system"]["nvidia_module_version"] == "530.41.03"
    assert [value for value, _ in found.conflicts["system.nvidia_module_version"]] == ["530.41.03", "565.57.01"]


ROW_REMAP = (KERNEL / "xid63-row-remapper-new-row-marked.txt").read_text().strip()
ONLY_ROW_REMAP = {
    "nvml": {},
    "torch": {},
    "system": {
        "kernel_log": {
            "readable": True,
            "reason": None,
            "source": "pasted kernel log",
            "xids": [
                {
                    "pci": "0000:10:1c",
                    "xid": 63,
                    "count": 1,
                    "first_time": None,
                    "first_line": ROW_REMAP,
                    "last_time": None,
                    "last_line": ROW_REMAP,
                }
            ],
            "sxids": [],
        }
    },
}


def with_row_remap(text: str) -> Found:
    return read_amid(text, ROW_REMAP, kernel.read)


@pytest.mark.parametrize("kind", OTHER_KINDS)
def test_other_kinds_of_paste_give_the_kernel_reader_nothing_of_their_own(kind: str) -> None:
    for path in sorted((PASTES / kind).glob("*.txt")):
        found = with_row_remap(path.read_text(encoding="utf-8", errors="replace"))
        assert found.facts == ONLY_ROW_REMAP, path.name
        assert found.kinds == {kernel.READER: 1}, path.name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n\n",
        "NVRM",
        "NVRM: Xid (PCI:0000:01",
        "NVRM: Xid (PCI:0000:01:00): ",
        "NVRM: Xid (PCI:zzzz): 79, pid=1",
        "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 60",
        "NVRM: API mismatch: the client has the version ",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  ",
        "nouveau",
    ],
)
def test_truncated_lines_give_no_event_and_no_version(text: str) -> None:
    assert with_row_remap(text).facts == ONLY_ROW_REMAP


def test_binary_junk_is_read_without_error_and_gives_nothing_of_its_own() -> None:
    rng = random.Random(29)
    junk = bytes(rng.randrange(256) for _ in range(200_000)).decode("latin-1")
    assert with_row_remap(junk).facts == ONLY_ROW_REMAP


def test_a_20_mb_log_is_read_whole_and_in_linear_time() -> None:
    """A flood: 20 MB of real Xid, API mismatch, RmInitAdapter and noise lines, about 330,000 lines, every Xid
    counted; K times the log is about K times the work (tests/helpers/growth.py, from 0.5 to 4 MB)."""
    chunk = "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in [*kernel_fixtures(), *sorted((PASTES / "nccl").glob("*.txt"))]
    )

    def lines(size: int) -> list[str]:
        return ((chunk + "\n") * (size // len(chunk) + 1)).split("\n")

    grew = growth(lambda log: kernel.read(Found(log)), lines(4_000_000 // K), lines(4_000_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the log"
    text = (chunk + "\n") * (20_000_000 // len(chunk) + 1)
    found = Found(text.split("\n"))
    kernel.read(found)
    log = kernel_log(found)
    copies = text.count("Xid (PCI:0000:38:00): 13,")
    assert {(e["pci"], e["xid"]): e["count"] for e in log["xids"]}[("0000:38:00", 13)] == copies
    # The log holds every module version of the fixtures: the first is the fact, the others its conflict.
    assert len(found.conflicts["system.nvidia_module_version"]) > 5


def test_every_kernel_signature_is_well_formed_owned_by_a_check_and_met_in_a_fixture() -> None:
    checks = {spec.id for spec in discover(entry_points=False).specs}
    mine = {sid: sig for sid, sig in table().items() if sig.file == "kernel.toml"}
    assert len(mine) >= 12
    met = {sid for ids in SIGNATURES.values() for sid in ids}
    for sid, sig in mine.items():
        assert sid.startswith("kernel-") and sig.owner in checks, sid
        assert sig.status in ("fail", "warn") and sig.cause and sig.source and sig.fix, sid
    # Two have no real sample (SOURCES.md): their lines are written from kmod's and nv.c's format strings.
    assert set(mine) - met == {"kernel-module-signature-rejected", "kernel-probe-not-called"}
    found = read("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service")
    assert [(s["id"], groups(s)) for s in found.signatures if s["id"].startswith("kernel-")] == [
        ("kernel-module-signature-rejected", {"module": "nvidia"})
    ]
    probe = "[    2.1] NVRM: The NVIDIA probe routine was not called for 1 device(s)."
    assert [s["id"] for s in read(probe).signatures] == ["kernel-probe-not-called"]


def test_signature_values_carry_the_failure_codes() -> None:
    found = read((KERNEL / "rminitadapter-failed-syslog-kubernetes-node-0x24-0x72-1568.txt").read_text())
    first = next(s for s in found.signatures if s["id"] == "kernel-rminitadapter-failed")
    assert groups(first) == {"pci": "0000:0a:00.0", "init_status": "0x24", "rm_status": "0x72", "line": "1568"}
    assert first["line"] == 1
    found = read((KERNEL / "rminitadapter-failed-gsp-firmware-rtx3090-550.txt").read_text())
    gsp = next(s for s in found.signatures if s["id"] == "kernel-gsp-init-failed")
    assert groups(gsp) == {"pci": "0000:98:00.0", "init_status": "0x62", "rm_status": "0x65", "line": "1792"}
    found = read((KERNEL / "xid79-sxid20034-nvswitch-fallen-off-bus.txt").read_text())
    # The Xid 79 line is health.xid's; the device print beside it is the driver.gpu-count signature.
    off = [s for s in found.signatures if s["id"] == "kernel-gpu-fallen-off-bus"]
    assert [(s["line"], groups(s)) for s in off] == [(4, {"pci": "0000:91:00.0"})]
