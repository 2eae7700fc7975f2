"""Judging what users have (issue 29): `--from` reads pasted text by content, readers turn it into the facts
the judges read, error signatures speak for the check that owns their cause, conflicts are findings, and
`--live` judges this machine against a paste. The readers' own tests are tests/test_paste_*.py."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from helpers.common import FIXTURES, GPUDOCTOR, gpudoctor

from gpudoctor import paste
from gpudoctor.facts import snapshot
from gpudoctor.model import Result, Status
from gpudoctor.paste import evidence, inputs, signatures
from gpudoctor.report import document as doc

PASTES = FIXTURES / "pastes"
KINDS = ("collect_env", "nvidia-smi", "kernel", "nccl", "errors", "issues", "bug-report")
KINDS += ("libraries", "services", "containers", "network", "program")  # issue 39: the errors around the GPU
KINDS += ("apps",)  # issue 49: the applications' own lines
READABLE = sorted(p for kind in KINDS for p in (PASTES / kind).glob("*.txt")) + sorted(
    (PASTES / "written").glob("*.md")
)
TOO_OLD = PASTES / "errors" / "driver-too-old-found-11040-runtimeerror-with-smi-header.txt"
BUS_ERROR = PASTES / "errors" / "shm-bus-error-dataloader-worker-killed-newer-wording.txt"


def checks_of(proc: subprocess.CompletedProcess[str]) -> dict[str, dict]:
    document = json.loads(proc.stdout)
    return {f"{c['check_id']}:{c['aspect']}" if c.get("aspect") else c["check_id"]: c for c in document["checks"]}


def by_check(proc: subprocess.CompletedProcess[str]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for c in json.loads(proc.stdout)["checks"]:
        found.setdefault(c["check_id"], []).append(c)
    return found


# Real samples that hold nothing to read: what would say something was cut off or is a picture.
UNREADABLE = {
    "nvidia-bug-report-sh-console-banner.txt": "the script's banner, before any log",
    "found-no-nvidia-driver-colab-cpu-runtime-partial.txt": "the traceback is cut before its message",
    "torch-not-compiled-with-cuda-windows-conda-module-cuda-partial.txt": "cut before its message",
    "torchvision-nms-does-not-exist-register-fake-torch-2.4-partial.txt": "cut before its message",
    "nccl-tests-206-ibv-reg-mr-iova2-cannot-allocate-memory-ulimit-l.txt": "the error is in a screenshot",
    "fabricmanager-systemctl-status-active-running-healthy-bottlerocket-partial.txt": "a healthy service: no error",
}


@pytest.mark.parametrize("path", READABLE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_sample_is_read_and_judged_without_a_broken_check(path: Path) -> None:
    """Each real sample is read (something recognised), its facts pass the snapshot schema, and every quick
    check judges or skips: none breaks on facts a paste holds only in part. A sample with nothing to read gets a
    report that says nothing was judged and what to paste instead."""
    if path.name in UNREADABLE:
        nothing_read(gpudoctor("check", "--from", str(path), "--json"))
        return
    facts = inputs.load(path)
    assert facts["paste"]["kinds"], f"nothing read from {path.name}"
    proc = gpudoctor("check", "--from", str(path), "--json")
    assert proc.returncode in (0, 1), proc.stderr
    document = json.loads(proc.stdout)
    jsonschema.validate(document, doc.schema())
    assert document["paste"]["kinds"] == facts["paste"]["kinds"]
    broken = [c for c in document["checks"] if c["status"] == "error"]
    assert broken == [], broken
    assert not [c["summary"] for c in document["checks"] if cut_to_fit(c)], "a summary is a sentence, not a page"


def cut_to_fit(check: dict) -> bool:
    """Whether a result's summary was too long and was cut by the report (its whole moved to `detail`)."""
    summary, detail = check["summary"], check.get("detail") or ""
    return len(summary) > 200 or (summary.endswith("…") and detail.startswith(summary[:-1]))


def test_gzip_standard_input_and_text_that_starts_like_json_or_xml_are_read(tmp_path: Path) -> None:
    text = TOO_OLD.read_text()
    packed = tmp_path / "nvidia-bug-report.log.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    for variant in (f"[rank0]: {text}", f"<details>\n{text}</details>\n"):
        (tmp_path / "p.txt").write_text(variant)
        assert inputs.load(tmp_path / "p.txt")["paste"]["signatures"], variant[:20]
    assert inputs.load(packed)["paste"]["signatures"]
    proc = subprocess.run(
        [GPUDOCTOR, "check", "--from", "-", "--json"], input=text, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1 and "torch.cuda-driver" in {c["check_id"] for c in json.loads(proc.stdout)["checks"]}


@pytest.mark.parametrize(
    "content, said",
    [
        (b"", "is empty: nothing to judge"),
        (b" \n\t\n", "is empty: nothing to judge"),
        (b"\x00\x01\x02\xff binary junk" * 100, "is not text"),
        (b"\x1f\x8b\x08\x00 not really gzip", "is gzip that does not open"),
        (TOO_OLD.read_text().encode("utf-16"), None),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, content: bytes, said: str | None) -> None:
    path = tmp_path / "paste.txt"
    path.write_bytes(content)
    proc = gpudoctor("check", "--from", str(path))
    if said is None:  # UTF-16 with a BOM is text like any other: the driver is too old
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        return
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and said in proc.stderr, proc.stderr


def nothing_read(proc: subprocess.CompletedProcess[str]) -> None:
    """A report, not a refusal: every check skipped, and first a warning that nothing was judged, naming what
    gpudoctor looked for and the outputs to paste instead."""
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    document = json.loads(proc.stdout)
    first, *rest = document["checks"]
    assert (first["check_id"], first["status"], document["paste"]["kinds"]) == ("paste.read", "warn", {})
    assert first["summary"] == "nothing judged: no output or error gpudoctor knows"
    said = first["remediation"]["why"]
    assert all(kind in said for kind in paste.READERS if kind not in paste.NOT_OUTPUTS)
    assert "error messages it knows" in said and "prose" not in said
    assert first["remediation"]["commands"] == ["nvidia-smi", "python -m torch.utils.collect_env", EXPECTED_DMESG]
    assert {c["status"] for c in rest} == {"skip"}


EXPECTED_DMESG = "sudo dmesg -T | grep -E 'NVRM|Xid|nvidia'"


NOTHING_KNOWN = [
    "just some words\nnothing a GPU tool says\n",
    "Epoch 3: loss 0.412\n",
    "最牡慢敧",
    "[rank0]: epoch 3 done\n",
    "<details><summary>log</summary>\nall fine\n</details>\n",
]


@pytest.mark.parametrize("text", NOTHING_KNOWN)
def test_text_with_nothing_known_gets_a_report_of_what_was_looked_for(tmp_path: Path, text: str) -> None:
    path = tmp_path / "paste.txt"
    path.write_text(text, encoding="utf-8")
    nothing_read(gpudoctor("check", "--from", str(path), "--json"))
    console = gpudoctor("check", "--from", str(path))
    lines = console.stdout.splitlines()
    assert lines[2:4] == ["do this first", "WARN     paste.read     nothing judged: no output or error gpudoctor knows"]
    assert "$ python -m torch.utils.collect_env" in console.stdout


def test_a_gzip_that_unpacks_past_the_limit_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(snapshot, "MAX_INPUT_BYTES", 1000)
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(b"x" * 5000))
    with pytest.raises(snapshot.SnapshotError, match="more than"):
        inputs.load(path)


def test_nothing_in_a_paste_is_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"$(touch {marker})\n`touch {marker}`\n" + TOO_OLD.read_text() + f"; touch {marker}\n"
    (tmp_path / "p.txt").write_text(text)
    assert gpudoctor("check", "--from", str(tmp_path / "p.txt")).returncode == 1
    assert not marker.exists()


# The evidence rules, on a table of one signature.
ONE = signatures.Signature(
    id="test-too-old",
    owner="torch.cuda-driver",
    status="fail",
    needle="too old",
    pattern=signatures.re.compile(r"too old \(found version (?P<found>\d+)\)"),
    facts={},
    cause="The driver is too old for this torch.",
    fix=("upgrade to a driver for CUDA {found}",),
    source="c10/cuda/CUDAFunctions.cpp",
    file="test.toml",
)
SIGHTED = {"paste": {"signatures": [{"id": "test-too-old", "reader": "error", "line": 3, "text": "x too old",
                                     "values": {"found": "11040"}}] * 2, "conflicts": []}}  # fmt: skip


@pytest.fixture
def one_signature(monkeypatch) -> None:
    monkeypatch.setattr(evidence, "table", lambda: {ONE.id: ONE})


def test_a_signature_is_the_verdict_of_a_check_that_could_not_judge(one_signature: None) -> None:
    [result] = evidence.attach("torch.cuda-driver", [Result(Status.SKIP, "not in this paste")], SIGHTED)
    assert result.status == Status.FAIL and result.aspect == "test-too-old"
    assert result.summary == "The driver is too old for this torch"
    assert result.quotes == ["line 3 (and 1 more line like it): x too old"]
    assert result.remediation.commands == ["upgrade to a driver for CUDA 11040"]
    assert result.remediation.source == "c10/cuda/CUDAFunctions.cpp"


def test_a_signature_is_quoted_beside_a_failing_verdict_and_stands_beside_a_passing_one(one_signature: None) -> None:
    [failed] = evidence.attach("torch.cuda-driver", [Result(Status.FAIL, "driver 470 < 525")], SIGHTED)
    assert failed.summary == "driver 470 < 525" and failed.quotes == ["line 3 (and 1 more line like it): x too old"]
    [raised] = evidence.attach("torch.cuda-driver", [Result(Status.WARN, "runs only through compat")], SIGHTED)
    assert raised.status == Status.FAIL, "the error happened: a warning beside it is a failure"
    passed, added = evidence.attach("torch.cuda-driver", [Result(Status.PASS, "driver 550 runs cu121")], SIGHTED)
    assert passed.status == Status.PASS and added.status == Status.WARN and "the facts here pass" in added.summary
    assert evidence.attach("torch.arch", [Result(Status.PASS, "ok")], SIGHTED)[0].summary == "ok", "not its owner"


def test_two_values_of_one_fact_are_a_finding_naming_both_places() -> None:
    found = paste.Found(["Nvidia driver version: 470.82.01", "| NVIDIA-SMI 535.54.03  Driver Version: 535.54.03 |"])
    found.fact("nvml.driver_version", "470.82.01", "collect_env", 0)
    found.fact("nvml.driver_version", "535.54.03", "nvidia-smi", 1)
    found.fact("nvml.driver_version", "470.82.01", "collect_env", 0)
    [result] = evidence.conflict_results({"paste": paste.summary(found)})
    assert result.status == Status.WARN and result.check_id == "paste.conflicts"
    assert result.summary == "the paste states nvml.driver_version 2 ways (lines 1 and 2); the first was judged"
    assert result.quotes == ["line 1 (collect_env): 470.82.01", "line 2 (nvidia-smi): 535.54.03"]


def test_every_signature_names_a_check_that_exists() -> None:
    from gpudoctor.registry import discover

    ids = {s.id for s in discover([]).specs}
    table = signatures.table()
    assert table, "the signature table is empty"
    assert {s.owner for s in table.values()} <= ids


def test_live_runs_the_checks_the_paste_points_to_on_this_machine(tmp_path: Path) -> None:
    """A DataLoader bus error pasted, judged on this machine: system.shm runs here (this /dev/shm), and the
    paste's line stands beside its verdict; nothing else runs."""
    proc = gpudoctor("check", "--from", str(BUS_ERROR), "--live", "--json", timeout=120)
    checks = by_check(proc)
    assert set(checks) - {"plugins.load"} == {"system.shm"}, list(checks)
    texts = " ".join(c["summary"] for c in checks["system.shm"])
    assert "a DataLoader worker crashes" in texts
    assert any(q.startswith("line 1") for c in checks["system.shm"] for q in c.get("quotes", []))
    assert json.loads(proc.stdout)["source"].startswith("live, with the paste")


def test_live_believes_only_what_this_machine_confirms(tmp_path: Path) -> None:
    """A pasted failure this machine cannot check (no GPU here) is what the paste says, a warning with the command
    that confirms it on the machine it came from: never a failed live report, never a reboot for a machine nobody
    saw fail."""
    paste = tmp_path / "rminit.txt"
    paste.write_text("NVRM: RmInitAdapter failed! (0x22:0x56:667)\nNVRM: rm_init_adapter failed, device minor 0\n")
    proc = gpudoctor("check", "--from", str(paste), "--live", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    [said] = by_check(proc)["driver.gpu-count"]
    assert said["status"] == "warn" and said["summary"].startswith("the paste says ")
    assert said["remediation"]["commands"] == [
        "gpudoctor check --only driver.gpu-count  # on the machine the paste is from"
    ]
    assert "reboot" not in proc.stdout and "poweroff" not in proc.stdout


SHM_UNLINKED = (
    "node1:12:34 [0] misc/shmutils.cc:87 NCCL WARN Error: unlink shared memory /dev/shm/nccl-abc123 failed, error: "
    "No such file or directory (2)\n"
)


def test_live_never_leads_with_a_paste_over_this_machines_own_verdict(tmp_path: Path) -> None:
    """A pasted systemd-removed-shm line, on a machine whose own system.shm passes: the machine's verdict stands,
    the paste's line is shown as the paste's and leads nothing (no logind.conf edit under "do this first"); offline,
    the same paste still fails with its cure."""
    paste = tmp_path / "shm.txt"
    paste.write_text(SHM_UNLINKED)
    config = tmp_path / "shm.toml"
    config.write_text("[checks.system.shm]\nmin_gib = 0.001\n")
    proc = gpudoctor("check", "--from", str(paste), "--live", "--config", str(config), "--json", timeout=120)
    document = json.loads(proc.stdout)
    assert proc.returncode == 0 and document["causes"] == [], proc.stdout
    own, pasted = by_check(proc)["system.shm"]
    assert own["status"] == "pass" and not own.get("quotes")
    assert pasted["status"] == "pass" and pasted["summary"].startswith("the paste says ")
    assert "system.shm passed on this machine" in pasted["summary"] and pasted["quotes"][0].startswith("line 1: ")
    shown = gpudoctor("check", "--from", str(paste), "--live", "--config", str(config), timeout=120).stdout
    assert "do this first" not in shown and "RemoveIPC" not in shown, shown
    offline = by_check(gpudoctor("check", "--from", str(paste), "--json", timeout=120))["system.shm"]
    assert [r["status"] for r in offline] == ["fail"] and "RemoveIPC" in json.dumps(offline)


def test_live_runs_the_paste_s_workloads_only_at_their_level(tmp_path: Path) -> None:
    """A watchdog timeout points at the all-reduce workload, a standard-level check: at --level quick it is named
    and skipped with the level it needs, not run."""
    paste = tmp_path / "watchdog.txt"
    paste.write_text(
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
    )
    proc = gpudoctor("check", "--from", str(paste), "--live", "--json", "--level", "quick", timeout=120)
    [said] = by_check(proc)["allreduce.bandwidth"]
    assert said["status"] == "warn" and "--level standard" in said["remediation"]["why"], said
    assert said["metrics"] == [] and said["rows"] == [], "the workload did not run: it measured nothing"


def test_live_without_a_paste_is_a_usage_error(tmp_path: Path) -> None:
    proc = gpudoctor("check", "--live")
    assert proc.returncode == 2 and "--from" in proc.stderr
    proc = gpudoctor("check", "--live", "--from", str(FIXTURES / "snapshots" / "a6000-2x.json"))
    assert proc.returncode == 2 and "is a snapshot or a capture" in proc.stderr


def test_what_follows_from_a_paste_is_derived_and_said_so() -> None:
    """An official build's arch list from its version, a GPU's capability from its name; a driver and a CUDA
    driver version that cannot be one driver's are a conflict."""
    found = paste.Found(["PyTorch version: 1.7.0+cu110", "GPU 0: GeForce RTX 3090", "driver 450.80.02", "11040"])
    found.fact("torch.version", "1.7.0+cu110", "collect_env", 0)
    found.fact("torch.cuda", "11.0", "collect_env", 0)
    found.gpu(0, {"name": "GeForce RTX 3090"}, "collect_env", 1)
    found.fact("nvml.driver_version", "450.80.02", "collect_env", 2)
    found.fact("nvml.cuda_driver_version", 12020, "error", 3)
    facts = paste.to_snapshot("p.txt", found)
    assert "sm_80" in facts["torch"]["arch_list"] and "sm_86" not in facts["torch"]["arch_list"]
    assert facts["nvml"]["gpus"][0]["compute_capability"] == [8, 6]
    assert facts["paste"]["facts_from"]["torch.arch_list"]["reader"] == "derived"
    [conflict] = facts["paste"]["conflicts"]
    assert conflict["fact"] == "nvml.driver_version and nvml.cuda_driver_version"
    assert conflict["values"][1]["value"] == "CUDA 12.2, which needs driver >= 535.54.03"


MIXED = PASTES / "written" / "issue-body-driver-470-torch-cu121-2x3090.md"


def _rtx3090(index: int, bus: str) -> dict:
    return {
        "index": index, "name": "NVIDIA GeForce RTX 3090", "pci_bus_id": bus, "compute_capability": [8, 6],
        "persistence_mode": False, "compute_mode": "default", "memory_total_mib": 24268, "memory_used_mib": 5,
        "temperature_c": 34, "power_limit_w": 350.0, "processes": [],
    }  # fmt: skip


SAME_FACTS = {
    "schema": "gpudoctor.snapshot",
    "schema_version": 3,
    "sources": ["nvml", "torch"],
    "nvml": {
        "status": "ok", "driver_version": "470.82.01", "cuda_driver_version": 11040,
        "gpus": [_rtx3090(0, "00000000:01:00.0"), _rtx3090(1, "00000000:21:00.0")],
    },
    "torch": {
        "importable": True, "version": "2.4.1+cu121", "cuda": "12.1", "cuda_available": False,
        "cuda_init_error": "The NVIDIA driver on your system is too old (found version 11040).",
        "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        "torchvision": {"installed": True, "version": "0.19.1", "ops_ok": True},
    },
    "system": {"os": "Linux", "machine": "x86_64", "os_release": {"id": "ubuntu", "version_id": "20.04"}},
    "nvml_calls": {},
}  # fmt: skip


def test_a_mixed_paste_gives_the_verdicts_of_a_snapshot_holding_the_same_facts(tmp_path: Path) -> None:
    """The issue body (an error, nvidia-smi's table, collect_env) against a snapshot of the facts it states:
    every check both judge comes out the same; the paste's error line stands beside the driver verdict."""
    (tmp_path / "same.json").write_text(json.dumps(SAME_FACTS))
    pasted = checks_of(gpudoctor("check", "--from", str(MIXED), "--json"))
    known = checks_of(gpudoctor("check", "--from", str(tmp_path / "same.json"), "--json"))
    both = [c for c in pasted if c in known and "skip" not in (pasted[c]["status"], known[c]["status"])]
    assert {"torch.cuda-driver", "torch.cuda-available", "torch.arch", "driver.gpu-count"} <= set(both)
    assert {c: pasted[c]["status"] for c in both} == {c: known[c]["status"] for c in both}
    assert pasted["torch.cuda-driver"]["status"] == "fail" and any(
        q.startswith("line 13") for q in pasted["torch.cuda-driver"].get("quotes", [])
    )
    assert "paste.conflicts" not in {c.split(":")[0] for c in pasted}, "a name cut to 'NVIDIA GeForce ...' agrees"
