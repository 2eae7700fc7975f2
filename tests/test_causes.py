"""The cause, not its symptoms (gpudoctor/diagnosis): each rule against what NVML, torch and the checks really
say in that state, and the report leading with the cause and the command that cures it.

Another process on the GPU is what NVML answered on a real H100 (tests/fixtures/real/h100-2026-11-26); the
figures are the ones gpudoctor measured there on 2026-11-26 (compute.gemm bf16 263 TFLOP/s with another job
computing; ddp.train out of memory with another process holding 74 GiB)."""

from __future__ import annotations

import copy
import os
from typing import Any

import psutil
import pytest
from fixtures.nodes import lose_gpu, node
from helpers.common import FIXTURES, load_snapshot, usable_gpus
from helpers.growth import LINEAR, K, growth
from helpers.occupancy import occupancy_calls, readings, replay, watched, with_occupancy

from gpudoctor.checks import compute, driver, torch_build
from gpudoctor.context import Observer, out_of_memory
from gpudoctor.diagnosis import Evidence, diagnose, occupancy
from gpudoctor.facts.nvml import Gateway
from gpudoctor.facts.occupancy import Watch
from gpudoctor.judging import ddp, oom
from gpudoctor.judging.visible import visible
from gpudoctor.model import Metric, Remediation, Result, Status

H100 = load_snapshot("h100-sxm-8x")
USER = psutil.Process().username()
ONE_H100 = [usable_gpus(H100)[0]]


@pytest.fixture
def stranger() -> Any:
    """A process this machine can see that is not gpudoctor's: it stands for the other job NVML names."""
    import subprocess

    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc.pid
    proc.kill()
    proc.wait()


def gemm_on_gpu0(tflops: float) -> Result:
    """compute.gemm's verdict on one H100 measuring `tflops` bf16 (TF32 at the same share of its figure)."""
    measured = [({"bf16": {"tflops": tflops, "rel_error": 1e-3}, "tf32": {"tflops": tflops / 2, "rel_error": 1e-4}},
                 ONE_H100[0])]  # fmt: skip
    result = compute.judge(measured, 0.75, {})
    result.check_id = "compute.gemm"
    return result


def ddp_out_of_memory() -> Result:
    p = ddp.resolve({**ddp.SETTINGS}, "cuda", [(9, 0)])
    result = ddp.judge([{"rank": 0, "oom": True, "requested": 128, "fits": 64}], p, "cuda", None, ddp.SETTINGS)[0]
    result.check_id = "ddp.train"
    return result


def processes_result(facts: dict[str, Any]) -> Result:
    result = driver.judge_processes(usable_gpus(facts), (facts.get("system") or {}).get("gpu_processes", {}))
    result.check_id = "driver.processes"
    return result


# --- what NVML answers, read -------------------------------------------------------------------------------


def test_the_gateway_reads_who_computes_and_who_only_holds_memory() -> None:
    computing = Gateway(replay("computing")).occupancy(0)
    holding = Gateway(replay("holding")).occupancy(0)
    idle = Gateway(replay("idle")).occupancy(0)
    assert computing["processes"] == [
        {"pid": 452, "used_mib": 9322, "kinds": ["compute"], "mig_instance": None, "sm_util": 100}
    ]
    assert computing["utilization"] == {"gpu": 99, "memory": 34}
    assert holding["processes"] == [
        {"pid": 591, "used_mib": 62216, "kinds": ["compute"], "mig_instance": None, "sm_util": 0}
    ]
    assert idle["processes"] == [] and idle["utilization"] == {"gpu": 0, "memory": 0}


def test_a_driver_without_per_process_figures_says_so_and_the_gpus_own_utilisation_decides() -> None:
    calls = {
        **occupancy_calls(readings("computing")[0]),
        "nvmlDeviceGetProcessUtilization(gpu0,last2s)": {"nvml_error": 3},
    }
    reading = Gateway(_replay_calls(calls)).occupancy(0)
    assert reading["processes"][0]["sm_util"] is None
    use = occupancy.from_watch({"check": "compute.gemm", "samples": [{"t": 0, **reading}]})[0]
    assert use.computing and use.utilization == 100


def _replay_calls(calls: dict[str, Any]) -> Any:
    from gpudoctor.facts.fake import ReplayNvml

    return ReplayNvml({"nvmlInit()": None, **calls})


def test_the_watch_takes_a_reading_before_the_workload_and_never_blames_its_own_processes() -> None:
    """A process there before the workload started is another's; one that appears while it runs is the
    workload's own when it is this process or one below it, or when this machine cannot see it (a container
    sees NVML's host PIDs)."""
    mine = os.getpid()
    calls = occupancy_calls(readings("computing")[1])
    later = [
        {"pid": mine, "usedGpuMemory": 2**30},
        {"pid": 1, "usedGpuMemory": 2**30},
        {"pid": 4_000_000, "usedGpuMemory": 1},
    ]
    backend = _Switching(
        [
            calls,
            {**calls, "nvmlDeviceGetComputeRunningProcesses(gpu0)": readings("computing")[1]["compute_procs"] + later},
        ]
    )
    with Watch([0], every_s=3600, backend=lambda: backend) as watch:
        backend.step()
        watch.take(Gateway(backend))
    seen = {p["pid"]: p for s in watch.samples for p in s["processes"]}
    assert seen[452]["before"] and not seen[452]["own"]
    assert seen[mine]["own"], "gpudoctor itself"
    assert not seen[1]["own"], "a process this machine sees, not below gpudoctor"
    assert seen[4_000_000]["own"], "not visible here and not there before: the workload's, never blamed"


class _Switching:
    """NVML answering from one recording, then (after step()) from the next."""

    def __init__(self, recordings: list[dict[str, Any]]) -> None:
        self.recordings, self.at = recordings, 0

    def step(self) -> None:
        self.at += 1

    def call(self, name: str, *args: Any) -> Any:
        return _replay_calls(self.recordings[self.at]).call(name, *args)


# --- another process on the GPU --------------------------------------------------------------------------------


def test_another_process_computing_is_the_cause_and_the_figures_it_took_are_not_judged(stranger: int) -> None:
    gemm = gemm_on_gpu0(263.0)
    assert gemm.status == Status.FAIL, "as judged alone: the symptom"
    facts = with_occupancy(H100, "computing", stranger)
    watch = watched("compute.gemm", "computing", pid=stranger)
    causes = diagnose(Evidence([processes_result(facts), gemm], facts, [watch]))
    assert [c.id for c in causes] == ["gpu-in-use"]
    cause = causes[0]
    assert cause.status == Status.WARN, "a busy GPU is the node's state, not its fault: never exit 1 for it"
    assert (
        cause.summary == f"GPU 0 is in use by another process: pid {stranger} (sleep, user {USER}): SM 100 %, 9.1 GiB"
    )
    assert cause.remediation.commands == [f"ps -o pid,ppid,user,stat,etime,args -p {stranger}", f"kill {stranger}"]
    assert cause.explains == ["compute.gemm", "driver.processes"]
    assert gemm.status == Status.SKIP and gemm.summary == f"not judged: measured while pid {stranger} (sleep) computed"
    assert gemm.remediation is None and "bf16 263" in gemm.detail
    assert not any(m.baseline for r in gemm.rows for m in r.metrics), "never saved as a baseline"


def test_data_checked_wrong_stays_wrong_whoever_else_computed() -> None:
    measured = [({"bf16": {"tflops": 263.0, "rel_error": 0.5}}, ONE_H100[0])]
    gemm = compute.judge(measured, 0.75, {})
    gemm.check_id = "compute.gemm"
    diagnose(Evidence([gemm], H100, [watched("compute.gemm", "computing")]))
    assert gemm.status == Status.FAIL and "WRONG RESULTS" in gemm.summary and not gemm.explained_by


def test_memory_held_by_another_process_explains_out_of_memory_and_no_batch_size_is_offered(stranger: int) -> None:
    ddp_train = ddp_out_of_memory()
    assert "batch_size" in " ".join(ddp_train.remediation.commands), "the fix the run gave alone"
    facts = with_occupancy(H100, "holding", stranger)
    watch = watched("ddp.train", "holding", pid=stranger)
    causes = diagnose(Evidence([processes_result(facts), ddp_train], facts, [watch]))
    assert [c.id for c in causes] == ["gpu-memory-held"]
    assert (
        causes[0].summary
        == f"memory on GPU 0 is held by another process: pid {stranger} (sleep, user {USER}): SM 0 %, 60.8 GiB"
    )
    assert causes[0].remediation.commands[-1] == f"kill {stranger}"
    assert ddp_train.status == Status.SKIP and ddp_train.remediation is None
    assert ddp_train.summary == f"not judged: pid {stranger} (sleep) held that GPU's memory"


def test_a_process_this_container_cannot_see_is_ended_from_the_host() -> None:
    """NVML answers with host PIDs; in a container the other job's PID may be nobody here: `kill` would hit
    the wrong process or none, so the fix says where to look."""
    facts = with_occupancy(H100, "computing", pid=4_000_000)
    causes = diagnose(Evidence([processes_result(facts)], facts))
    assert causes[0].remediation.commands == [
        "nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv  "
        "# on the host: PID 4000000 runs outside this container"
    ]


def test_memory_held_idle_leaves_the_figures_judged() -> None:
    """A process that only holds memory takes no SM time: what was measured beside it is the hardware's."""
    gemm = gemm_on_gpu0(263.0)
    diagnose(Evidence([gemm], with_occupancy(H100, "holding"), [watched("compute.gemm", "holding")]))
    assert gemm.status == Status.FAIL and not gemm.explained_by


def test_an_out_of_memory_on_a_free_gpu_keeps_its_own_fix() -> None:
    ddp_train = ddp_out_of_memory()
    causes = diagnose(Evidence([ddp_train], H100, [watched("ddp.train", "idle")]))
    assert causes == [] and ddp_train.status == Status.FAIL and "batch_size" in ddp_train.remediation.commands[0]


def test_another_process_at_the_quick_level_is_named_from_the_facts() -> None:
    facts = with_occupancy(H100, "computing")
    result = processes_result(facts)
    causes = diagnose(Evidence([result], facts))
    assert [c.id for c in causes] == ["gpu-in-use"] and result.explained_by == "gpu-in-use"


def test_gpudoctors_own_torch_gateway_on_a_gpu_is_nobodys_cause() -> None:
    facts = with_occupancy(H100, "computing")
    for proc in facts["nvml"]["gpus"][0]["processes"]:
        proc["own"] = True
    assert diagnose(Evidence([processes_result(facts)], facts)) == []
    assert processes_result(facts).status == Status.PASS


def test_a_pid_from_a_file_is_said_to_live_on_the_node_the_file_is_from() -> None:
    facts = with_occupancy(H100, "computing")
    causes = diagnose(Evidence([processes_result(facts)], facts, live=False))
    assert causes[0].remediation.commands[-1] == "kill 452  # on the node the file is from"
    assert "SM 100 %" in causes[0].summary


# --- which GPUs CUDA gives a process -----------------------------------------------------------------------------

TWO = [{"index": 0, "uuid": "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"}, {"index": 1, "uuid": "GPU-0000abcd-1111"}]


@pytest.mark.parametrize(
    "value,shown,invalid,repeated",
    [
        ("", (), "", False),
        ("0,1", (0, 1), None, False),
        ("1,0", (1, 0), None, False),
        ("2", (), "2", False),
        ("0,2,-1,1", (0,), "2", False),  # the Programming Guide's example, on two GPUs: stops at the first invalid
        ("-1", (), "-1", False),
        ("1gpu2,0", (1, 0), None, False),  # read like strtoul: its leading digits
        ("GPU-8932f937", (0,), None, False),  # a unique prefix of a UUID
        ("GPU-", (), "GPU-", False),  # a prefix of both: ambiguous
        ("GPU-ffff", (), "GPU-ffff", False),
        ("GPU-8932f937,1", (0,), "1", False),  # a UUID list ends at the first entry that is not one
        ("0,0", (), "0", True),  # a repeated device: no device at all
        ("all", (), "all", False),
    ],
)
def test_cuda_visible_devices_is_read_as_cuda_reads_it(
    value: str, shown: tuple, invalid: str | None, repeated: bool
) -> None:
    seen = visible(value, TWO)
    assert (seen.shown, seen.invalid, seen.repeated) == (shown, invalid, repeated)


def hidden(value: str, gpus: int = 1) -> tuple[dict[str, Any], list[Result]]:
    """A node whose torch could not start CUDA under CUDA_VISIBLE_DEVICES=value, judged by the checks that
    see it (as on the H100: torch.cuda-available, torch.arch, driver.gpu-count)."""
    facts = copy.deepcopy(H100)
    facts["nvml"]["gpus"] = facts["nvml"]["gpus"][:gpus]
    facts["system"]["env"] = {"CUDA_VISIBLE_DEVICES": value}
    facts["torch"].update(cuda_available=False, device_count=0, devices=[], arch_list=[],
                          cuda_init_error="No CUDA GPUs are available")  # fmt: skip
    env = facts["system"]["env"]
    results = [
        torch_build.judge_cuda_available(facts["torch"], facts["nvml"], env),
        torch_build.judge_arch(facts["torch"], usable_gpus(facts), "580.159.04"),
        driver.judge_gpu_count(facts["nvml"], facts["torch"], env, None),
    ]
    for result, check_id in zip(results, ("torch.cuda-available", "torch.arch", "driver.gpu-count"), strict=True):
        result.check_id = check_id
    return facts, results


def test_an_empty_cuda_visible_devices_is_the_cause_and_the_arch_list_is_never_judged_empty() -> None:
    facts, results = hidden("")
    assert results[1].status == Status.SKIP, "an empty arch list is CUDA not starting, not the build's list"
    causes = diagnose(Evidence(results, facts))
    assert [c.id for c in causes] == ["visible-devices-none"] and causes[0].status == Status.FAIL
    assert causes[0].summary == "CUDA_VISIBLE_DEVICES='' hides every GPU from CUDA (GPU 0 only present)"
    assert causes[0].remediation.commands == ["unset CUDA_VISIBLE_DEVICES"]
    assert causes[0].explains == ["torch.cuda-available"]
    assert results[0].remediation is None, "its own fix is the cause's"


def test_an_index_that_does_not_exist_is_named_with_the_gpus_there_are() -> None:
    facts, results = hidden("1")
    causes = diagnose(Evidence(results, facts))
    assert causes[0].summary == "CUDA_VISIBLE_DEVICES='1' hides every GPU: '1' names no GPU here (GPU 0 only)"
    assert (
        "'1' names no GPU here (GPU 0 only)"
        in torch_build.judge_cuda_available(facts["torch"], facts["nvml"], facts["system"]["env"]).remediation.why
    ), "the check alone says it too"


def test_a_uuid_that_names_no_gpu_hides_them_all_and_a_valid_one_passes() -> None:
    facts, results = hidden("GPU-deadbeef")
    assert diagnose(Evidence(results, facts))[0].id == "visible-devices-none"
    uuid = facts["nvml"]["gpus"][0]["uuid"]
    assert visible(uuid[:12], usable_gpus(facts)).shown == (0,)


def test_an_invalid_entry_after_valid_ones_cuts_the_list_short() -> None:
    facts = copy.deepcopy(H100)
    facts["system"]["env"] = {"CUDA_VISIBLE_DEVICES": "0,9,1"}
    causes = diagnose(Evidence([], facts))
    assert causes[0].id == "visible-devices-invalid" and causes[0].status == Status.WARN
    assert "'9' names no GPU here (GPUs 0-7), so CUDA stops there and uses GPU 0 only" in causes[0].summary


def test_a_mig_uuid_on_a_mig_node_is_not_claimed() -> None:
    facts = load_snapshot("h100-mig-8x")
    facts["system"]["env"] = {"CUDA_VISIBLE_DEVICES": "MIG-4f3c3ae3-8a2b-5d7e-9c1a-0123456789ab"}
    assert diagnose(Evidence([], facts)) == []


def test_a_container_started_without_gpus_is_named_not_its_missing_driver() -> None:
    facts = copy.deepcopy(H100)
    facts["nvml"] = {"status": "library-not-found", "error": "NVML Shared Library Not Found", "gpus": []}
    facts["system"].update(container="docker", env={"NVIDIA_VISIBLE_DEVICES": "void"})
    nvml = driver.judge_nvml(facts["nvml"], facts["system"], facts["torch"])
    nvml.check_id = "driver.nvml"
    causes = diagnose(Evidence([nvml], facts))
    assert [c.id for c in causes] == ["container-without-gpus"]
    assert causes[0].explains == ["driver.nvml"]
    assert causes[0].remediation.commands[0].startswith("docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=all IMAGE")
    facts["system"]["container"] = None
    assert [c.id for c in diagnose(Evidence([nvml], facts))] == ["no-driver"], "outside a container: no driver"


# --- what stops everything -----------------------------------------------------------------------------------------


def test_a_driver_library_mismatch_explains_cuda_not_starting() -> None:
    facts = copy.deepcopy(H100)
    facts["nvml"] = {"status": "version-mismatch", "error": "RM has detected an NVML/RM version mismatch.", "gpus": []}
    facts["system"]["nvidia_module_version"] = "570.86.15"
    failed_start = "system has unsupported display driver / cuda driver combination"
    torch = {**facts["torch"], "cuda_available": False, "cuda_init_error": failed_start}
    cuda = torch_build.judge_cuda_available(torch, {"gpus": usable_gpus(H100)}, {})
    nvml = driver.judge_nvml(facts["nvml"])
    for result, check_id in ((cuda, "torch.cuda-available"), (nvml, "driver.nvml")):
        result.check_id = check_id
    causes = diagnose(Evidence([nvml, cuda], facts))
    assert [c.id for c in causes] == ["driver-library-mismatch"]
    assert causes[0].remediation.commands[0] == "sudo reboot"
    assert causes[0].explains == ["driver.nvml", "torch.cuda-available"]


def test_a_gpu_fallen_off_the_bus_explains_the_count_and_the_workloads_that_failed() -> None:
    facts = node(calls=lose_gpu(3))
    count = driver.judge_gpu_count(facts["nvml"], facts["torch"], {}, None)
    count.check_id = "driver.gpu-count"
    memtest = Result(Status.ERROR, "workload raised RuntimeError (memtest: GPU 3 write)", check_id="memory.test")
    causes = diagnose(Evidence([count, memtest], facts))
    assert causes[0].id == "gpu-lost" and causes[0].summary == "GPU 3 fell off the bus (NVML: GPU is lost)"
    assert causes[0].explains == ["driver.gpu-count", "memory.test"]


def test_a_fabric_manager_not_running_explains_cuda_not_starting() -> None:
    not_started = {"state": 1, "status": 0, "cliqueId": 0, "clusterUuid": [0] * 16, "partitionId": 0}
    calls = {}
    for i in range(8):
        calls |= {f"nvmlDeviceGetGpuFabricInfoV(gpu{i},{v})": {"nvml_error": 3} for v in (2, 3)}
        calls[f"nvmlDeviceGetGpuFabricInfo(gpu{i})"] = not_started
    facts = node(calls=calls)
    fabric = driver.judge_fabric(usable_gpus(facts))
    fabric.check_id = "driver.fabric"
    cuda = Result(
        Status.FAIL, "NVML sees 8 GPUs but torch.cuda.is_available() is False", check_id="torch.cuda-available"
    )
    causes = diagnose(Evidence([fabric, cuda], facts))
    assert causes[0].id == "fabric-manager-down"
    assert causes[0].remediation.commands[0] == "sudo systemctl enable --now nvidia-fabricmanager"
    assert causes[0].explains == ["driver.fabric", "torch.cuda-available"]


# --- the same run diagnosed twice, and rank 0 ----------------------------------------------------------------------


def test_diagnosing_a_run_again_gives_the_same_causes_explaining_the_same_findings() -> None:
    gemm = gemm_on_gpu0(263.0)
    evidence = Evidence([gemm], with_occupancy(H100, "computing"), [watched("compute.gemm", "computing")])
    first, again = diagnose(evidence), diagnose(evidence)
    assert [c.to_dict() for c in first] == [c.to_dict() for c in again]


def test_rank_0_names_each_nodes_causes_and_never_calls_a_busy_node_slow() -> None:
    from gpudoctor.model import Row
    from gpudoctor.report import document as doc

    busy = {"id": "gpu-in-use", "status": "warn", "summary": "GPU 0 is in use by another process: pid 452",
            "remediation": {"why": "w", "commands": ["kill 452"], "instead": None}, "explains": [], "where": ["GPU 0"],
            "evidence": [], "source": "s"}  # fmt: skip
    nodes = [
        {"name": "n1", "rank": 0, "status": "pass", "exit_code": 0, "checks": [], "causes": []},
        {"name": "n2", "rank": 1, "status": "warn", "exit_code": 0, "checks": [], "causes": [busy]},
    ]
    slow = Row(Status.FAIL, "busbw 20 GB/s, 0.10x the median", node="n2", basis="figure",
               metrics=[Metric("busbw", 20.0, "GB/s", expected=160.0, comparison=">=")])  # fmt: skip
    fine = Row(Status.PASS, "busbw 200 GB/s", node="n1", basis="figure")
    cross = Result(Status.FAIL, "n2 slow", rows=[fine, slow], check_id="cluster.allreduce",
                   remediation=Remediation("drain", ["scontrol ..."]))  # fmt: skip
    causes = diagnose(Evidence([cross], H100, nodes=nodes))
    assert [c.id for c in causes] == ["n2:gpu-in-use"] and causes[0].summary.startswith("n2: GPU 0 is in use")
    assert slow.status == Status.SKIP and cross.status == Status.PASS
    meta = {"host": "n1", "started_at": "2026-11-26T00:00:00+00:00", "duration_s": 1.0, "level": "standard",
            "source": "live"}  # fmt: skip
    built = doc.build_cluster([cross], nodes, meta, False, False, "torchrun", causes=causes)
    cluster = built["cluster"]
    assert cluster["busy"] == ["n2"] and cluster["failed_nodes"] == [] and cluster["stragglers"] == []
    assert {n["name"]: n["verdict"]["status"] for n in cluster["nodes"]} == {"n1": "pass", "n2": "warn"}
    assert built["exit_code"] == 0 and built["causes"][0]["id"] == "n2:gpu-in-use"


# --- the report leads with the cause ------------------------------------------------------------------------------


def busy_standard_run(monkeypatch: pytest.MonkeyPatch, stranger: int) -> Any:
    """A standard run on one H100 while another process computes on it, through the real runner and report:
    compute.gemm's workload returns what it measured there (bf16 263, TF32 133 TFLOP/s), NVML answers as it did."""
    from gpudoctor.config import Config
    from gpudoctor.context import Options
    from gpudoctor.engine.planning import Plan
    from gpudoctor.engine.report import Started, report
    from gpudoctor.engine.runner import run_checks
    from gpudoctor.registry import discover

    facts = with_occupancy(H100, "computing", stranger)
    facts["nvml"]["gpus"] = facts["nvml"]["gpus"][:1]
    facts["torch"].update(device_count=1, devices=facts["torch"]["devices"][:1])
    gemm = {"cuda_index": 0, "bf16": {"tflops": 263.0, "rel_error": 1e-3}, "tf32": {"tflops": 133.0, "rel_error": 1e-4}}
    monkeypatch.setattr("gpudoctor.context.run_isolated", lambda *a, **k: _passed({"gpus": [gemm]}))
    specs = [s for s in discover(entry_points=False).specs if s.id in ("driver.processes", "compute.gemm")]
    options = Options(level="standard", device="cuda")
    watch = Observer(backend=lambda: replay("computing", pid=stranger), every_s=0.01)
    run = run_checks(specs, facts, options, Config().settings, observer=watch)
    plan = Plan(options, specs, Config(), facts, "live", False, [])
    return report(plan, run.results, Started(), False, observations=run.observations)


def test_the_report_leads_with_the_cause_and_its_command(monkeypatch: pytest.MonkeyPatch, stranger: int) -> None:
    from gpudoctor.report import console as console_mod

    built = busy_standard_run(monkeypatch, stranger)
    assert built.exit_code == 0 and built.document["status"] == "warn"
    assert built.document["causes"][0]["id"] == "gpu-in-use"
    gemm = next(c for c in built.document["checks"] if c["check_id"] == "compute.gemm")
    assert gemm["status"] == "skip" and gemm["explained_by"] == "gpu-in-use"
    text = _rendered(console_mod.render, built.document, built.results)
    block = text[text.index(console_mod.FIRST_TITLE) :].splitlines()
    assert block[1].split()[:2] == ["WARN", "gpu-in-use"], "the first thing read is the cause"
    assert [line.strip() for line in block[1:8] if line.strip().startswith("$")][-1] == f"$ kill {stranger}"
    assert "lower" not in text and "power cap" not in text, "no generic fix of the symptoms"


def test_every_format_leads_with_the_cause(monkeypatch: pytest.MonkeyPatch, stranger: int) -> None:
    from gpudoctor.report import html, junit, nagios, npd, prometheus

    document = busy_standard_run(monkeypatch, stranger).document
    assert nagios.line(document).startswith("GPUDOCTOR WARNING - cause:gpu-in-use: GPU 0 is in use by another")
    assert npd.line(document).startswith("gpudoctor: 0 checks passed; warning cause:gpu-in-use")
    assert '<testcase classname="gpudoctor.cause" name="cause:gpu-in-use"' in junit.render(document)
    assert 'gpudoctor_cause{cause="gpu-in-use",status="warn"} 1.0' in prometheus.render(document)
    page = html.render(document)
    assert page.index("gpu-in-use") < page.index("compute.gemm") and f"$ kill {stranger}" in page


def test_a_saved_report_keeps_its_causes_and_one_from_before_them_reads_as_none(
    monkeypatch: pytest.MonkeyPatch, stranger: int, tmp_path
) -> None:
    import json

    from gpudoctor.report import document as doc

    document = busy_standard_run(monkeypatch, stranger).document
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(document))
    again, _ = doc.load(saved)
    assert again["causes"] == document["causes"] and again["exit_code"] == 0
    del document["causes"]
    document["schema_version"] = 4
    saved.write_text(json.dumps(document))
    assert doc.load(saved)[0]["causes"] == []


def _passed(data: Any) -> Any:
    from gpudoctor.model import Status as S
    from gpudoctor.workloads.isolate import Outcome

    return Outcome(S.PASS, data=data)


def _rendered(render: Any, document: dict[str, Any], results: list[Result]) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    render(Console(file=out, width=120, no_color=True), document, results)
    return out.getvalue()


# --- out of memory: explained, never dumped ----------------------------------------------------------------------

PROGRAM = FIXTURES / "pastes" / "program"


@pytest.mark.parametrize(
    "sample,gpu,requested_gib,total_gib,free_gib",
    [
        (
            "oom-newest-wording-22.78-gib-requested-31.47-gib-gpu-this-process-expandable-segments",
            0,
            22.78,
            31.47,
            12.73,
        ),
        ("oom-reserved-in-total-wording-other-processes-hold-the-40-gib-a100", 0, 0.674, 39.59, 0.4635),
        ("oom-reserved-in-total-wording-130674.91-gib-requested-on-79.15-gib-a100", 0, 130674.91, 79.15, None),
    ],
)
def test_torch_out_of_memory_reports_are_read_into_figures(
    sample: str, gpu: int, requested_gib: float, total_gib: float, free_gib: float | None
) -> None:
    found = oom.parse((PROGRAM / f"{sample}.txt").read_text())
    assert found is not None and found.gpu == gpu
    assert found.requested == pytest.approx(requested_gib * 2**30, rel=1e-3)
    assert found.total == pytest.approx(total_gib * 2**30, rel=1e-3)
    if free_gib is not None:
        assert found.free == pytest.approx(free_gib * 2**30, rel=1e-2)
    assert found.larger_than_gpu is (requested_gib > total_gib)


def test_the_other_processes_torch_names_are_read() -> None:
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
        "79.18 GiB of which 9.56 GiB is free. Process 591 has 60.75 GiB memory in use. Process 7 has 2.00 GiB "
        "memory in use. Including non-PyTorch memory, this process has 8.80 GiB memory in use."
    )
    found = oom.parse(text)
    assert found.processes == {591: int(60.75 * 2**30), 7: 2 * 2**30} and found.this_process == int(8.8 * 2**30)


def test_a_workload_out_of_memory_is_one_short_line_with_the_raw_text_in_its_detail() -> None:
    """What a shared H100 printed: torch's OutOfMemoryError text twice in the summary, cut mid-word. Now the
    summary says where and how much, and the message is kept whole for -v and the JSON."""
    message = PROGRAM / "oom-newest-wording-22.78-gib-requested-31.47-gib-gpu-this-process-expandable-segments.txt"
    raw = f"raised OutOfMemoryError: {message.read_text().splitlines()[0]}"
    result = out_of_memory(Status.ERROR, raw, ONE_H100)
    assert result.summary == "ran out of GPU memory on cuda:0: asked for 22.8 GiB with 12.7 GiB free of 31.5 GiB"
    assert result.basis == "oom" and result.rows[0].basis == "oom" and result.rows[0].index == 0
    assert result.detail == raw and "Tried to allocate" not in result.summary
    assert out_of_memory(Status.ERROR, "raised RuntimeError: NCCL error", ONE_H100) is None


def test_reading_an_out_of_memory_report_is_linear() -> None:
    """Built from its own structure: every piece repeated, never completed; K times as long is about K times the
    work (tests/helpers/growth.py, up to 1,000,000 characters)."""

    def hostile(size: int) -> str:
        return "CUDA out of memory. " + "(GPU 0; 1.00 GiB total capacity; " * (size // 34) + "Process 1 has " * 100

    grew = growth(oom.parse, hostile(1_000_000 // K), hostile(1_000_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the report"


# --- the GPU fault script (bench/gpu_faults.py): what it reads of each report ---------------------------------------


def _bench(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, FIXTURES.parent.parent / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fault_script_names_what_the_report_names_first(monkeypatch: pytest.MonkeyPatch, stranger: int) -> None:
    faults = _bench("gpu_faults")
    document = busy_standard_run(monkeypatch, stranger).document
    first, said, command = faults.lead(document)
    assert said.startswith("GPU 0 is in use by another process")
    assert (first, command) == ("cause gpu-in-use", f"ps -o pid,ppid,user,stat,etime,args -p {stranger}")
    healthy = {"status": "pass", "counts": {"pass": 3}, "checks": [], "causes": []}
    assert faults.lead(healthy)[0] == "nothing wrong"
    row = faults.table([("another computing", {**document, "bench": {"exit": 0, "wall_s": 61.2}})]).splitlines()[-1]
    assert row.startswith("| another computing | 0 | warn | cause gpu-in-use |") and row.endswith("| 61.2 |")


def test_the_copy_bench_says_it_needs_a_gpu_where_there_is_none() -> None:
    import subprocess
    import sys

    script = FIXTURES.parent.parent / "bench" / "host_copies.py"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip() == "needs a CUDA GPU"
