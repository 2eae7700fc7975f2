"""Users' own benchmark outputs judged through `gpudoctor check --from` (checks/benchmarks.py): real nccl-tests,
nvbandwidth and dcgmi diag outputs (tests/fixtures/benchmarks, sources in SOURCES.md), each with the verdict a
cluster admin would give: normal (and against what), abnormal (and why), or unjudgeable (and what is missing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import BENCH, PASTES, gpudoctor, judge

from gpudoctor import paste
from gpudoctor.checks import benchmarks, nvbandwidth
from gpudoctor.judging import bench, references
from gpudoctor.model import Remediation, Status
from gpudoctor.paste import nccl_tests
from gpudoctor.paste.inputs import load

IBSTAT = PASTES / "ibstat"


def judged(path: Path, check: str = "bench.nccl-tests") -> dict:
    """The report's result for `check` when the file is judged."""
    run = gpudoctor("check", "--from", str(path), "--only", "bench", "--format", "json")
    assert run.returncode in (0, 1), run.stderr
    return next(c for c in json.loads(run.stdout)["checks"] if c["check_id"] == check)


# (fixture, status, words the verdict must hold)
NCCL_TESTS = [
    ("h100-sxm-8gpu-allreduce-nvls.txt", "pass", "on 8x H100 SXM: normal for NVLS"),
    ("a100-sxm4-40gb-8gpu-allreduce.txt", "pass", "on 8x A100 SXM4 40GB: normal for Ring"),
    ("a100-sxm4-40gb-8gpu-reducescatter.txt", "pass", "reduce_scatter"),
    ("rtx4090-2gpu-pcie-allreduce.txt", "fail", "2.24 GB/s at 2 GiB on 2x GeForce RTX 4090: 18 % of an estimate"),
    ("gh200-2gpu-2node-1perhost-allreduce-2.18.2.txt", "skip", "unjudgeable, largest message 128 MiB"),
    ("h200-16gpu-2node-socket-ring-allreduce.txt", "warn", "over TCP sockets: NCCL_IB_DISABLE=1 turned"),
    ("l40s-2gpu-2node-1perhost-socket-ring-allreduce.txt", "warn", "2 nodes of L40S over TCP sockets"),
    ("gh200-8gpu-2node-4perhost-allreduce-cxi-then-tcp-two-runs.txt", "warn", "it took another path"),
    ("h200-2gpu-2node-1nic-allreduce.txt", "skip", "unjudgeable: the network each node uses"),
    ("h100-sxm-16gpu-2node-aws-p5-allreduce-excerpt.txt", "skip", "the device list was cut"),
]


@pytest.mark.parametrize("name,status,words", NCCL_TESTS, ids=[n for n, _, _ in NCCL_TESTS])
def test_nccl_tests_outputs_get_the_verdict_an_admin_would_give(name: str, status: str, words: str) -> None:
    result = judged(BENCH / "nccl-tests" / name)
    assert result["status"] == status and words in result["summary"], result["summary"]
    if status in ("pass", "fail"):
        figure = result["rows"][0]["metrics"][0]
        assert isinstance(figure["expected"], float) and figure["comparison"] == ">="
        assert isinstance(figure["reference"], float) and figure["reference_source"]


def nccl_run(busbw: float, size: int = 8 * 2**30, **extra: object) -> dict:
    """One nccl-tests run as the reader records it (fields from checks' point of view)."""
    side = {"time_us": 1.0, "algbw": busbw / 1.75, "busbw": busbw, "wrong": 0}
    row = {
        "bytes": size,
        "count": size // 4,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "out_of_place": side,
        "in_place": side,
    }
    devices = [
        {"rank": r, "host": "node1", "device": r, "bus_id": None, "name": "NVIDIA H100 80GB HBM3"} for r in range(8)
    ]
    return {
        "line": 1,
        "format": "text",
        "collective": "all_reduce",
        "ranks": 8,
        "hosts": ["node1"],
        "devices": devices,
        "rows": [row],
        "avg_busbw": None,
        "out_of_bounds": 0,
        "version": None,
        "nccl_version": None,
        "env": {},
        "max_bytes": size,
        **extra,
    }


def test_ring_figure_is_normal_and_says_what_nvls_would_give() -> None:
    """The issue's own example: busbw 370 GB/s at 8 GiB on 8x H100 SXM is normal for Ring; NVLS gives more."""
    row, _ = benchmarks.judge_run(nccl_run(370.0), [], {})
    assert row.status == Status.PASS and "normal for Ring" in row.summary and "NVLS would give ~" in row.summary
    forced, _ = benchmarks.judge_run(nccl_run(370.0, env={"NCCL_ALGO": "Ring"}), [], {})
    assert "normal for NCCL_ALGO=ring" in forced.summary and "NVLS" not in forced.summary
    slow, fix = benchmarks.judge_run(nccl_run(120.0), [], {})
    assert slow.status == Status.FAIL and "nvidia-smi nvlink -s" in fix.commands


def test_runs_that_cannot_show_the_hardware_are_unjudgeable_never_blamed() -> None:
    small, fix = benchmarks.judge_run(nccl_run(420.0, size=256 * 2**20), [], {})
    assert small.status == Status.SKIP and "unjudgeable, largest message 256 MiB" in small.summary
    assert "-b 1G -e 8G" in fix.commands[0]
    alone, fix = benchmarks.judge_run(nccl_run(0.0), [], {})
    assert alone.status == Status.SKIP and "every bus bandwidth is 0" in alone.summary and "MPI=1" in fix.commands[0]
    wrong = nccl_run(470.0)
    wrong["rows"][0]["in_place"] = {**wrong["rows"][0]["in_place"], "wrong": 3}
    assert benchmarks.judge_run(wrong, [], {})[0].status == Status.FAIL


def test_a_multi_node_nvl72_run_is_judged_against_the_rack_not_infiniband() -> None:
    run = nccl_run(500.0, ranks=72, hosts=[f"n{i}" for i in range(18)])
    run["devices"] = [{**run["devices"][0], "rank": r, "host": f"n{r // 4}", "name": "NVIDIA GB200"} for r in range(72)]
    row, _ = benchmarks.judge_run(run, [], {})
    assert row.status == Status.FAIL and "one NVLink domain" in row.summary and "834.6" in row.summary
    healthy, _ = benchmarks.judge_run({**run, "rows": nccl_run(840.0)["rows"]}, [], {})
    assert healthy.status == Status.PASS


def test_collective_is_read_from_the_rows_when_the_output_does_not_name_it() -> None:
    run = nccl_run(370.0, collective=None)
    assert benchmarks.collective_of(run) == "all_reduce"
    run["rows"][0]["count"] = run["rows"][0]["count"] // 8
    assert benchmarks.collective_of(run) == "reduce_scatter"
    run["rows"][0]["redop"] = "none"
    assert benchmarks.collective_of(run) is None


def test_nvbandwidth_host_copies_against_the_models_native_link() -> None:
    """An RTX 4090 (PCIe Gen4) H2D at ~25 GB/s is healthy; GB300's host copies run over NVLink-C2C (~359 GB/s)."""
    rtx = judged(BENCH / "nvbandwidth" / "rtx4090-8gpu-h2d-d2h-v0.2-trimmed.txt", "bench.nvbandwidth")
    assert rtx["status"] == "pass" and len(rtx["rows"]) == 16
    unnamed = judged(BENCH / "nvbandwidth" / "gb300-dgx-station-h2d-d2h-c2c-trimmed.txt", "bench.nvbandwidth")
    assert unnamed["status"] == "skip" and "unjudgeable: the GPU (not named in the output)" in unnamed["summary"]
    section = load(BENCH / "nvbandwidth" / "gb300-dgx-station-h2d-d2h-c2c-trimmed.txt")["benchmarks"]["nvbandwidth"]
    rows = [row for row, _ in nvbandwidth.judge_case(section["testcases"][0], [{"index": 0, "name": "NVIDIA GB300"}])]
    figure = rows[0].metrics[0]
    assert rows[0].status == Status.PASS and figure.reference > 200 and "c2c" in figure.reference_source, figure
    third = nvbandwidth.judge_figure(
        0, "host_to_device_memcpy_ce", "h2d", None, 359.05 / 3, [{"index": 0, "name": "GB300"}]
    )
    assert third[0].status == Status.FAIL


def test_a_gpu_on_a_link_trained_down_is_named() -> None:
    section = load(BENCH / "nvbandwidth" / "rtx4090-8gpu-h2d-d2h-v0.2-trimmed.txt")["benchmarks"]["nvbandwidth"]
    case = section["testcases"][0]
    case["matrix"][0][3] = 6.1  # what a Gen4 x16 card reads at Gen4 x4
    rows = [row for row, _ in nvbandwidth.judge_case(case, section["devices"])]
    bad = [r for r in rows if r.status != Status.PASS]
    assert [r.index for r in bad] == [3] and bad[0].status == Status.FAIL


def test_dcgm_diag_verdicts_are_dcgms_own_with_their_messages() -> None:
    failed = judged(BENCH / "dcgmi" / "8gpu-diag-r2-v3-gpu-memory-thermal-fail-excerpt.txt", "bench.dcgm-diag")
    assert failed["status"] == "fail" and "GPU 0" in failed["summary"] and failed["remediation"]
    passed = judged(BENCH / "dcgmi" / "a10g-1gpu-diag-r2-v4.4.2-all-pass.txt", "bench.dcgm-diag")
    assert passed["status"] == "pass"


def test_every_vendored_output_is_judged_without_a_broken_check() -> None:
    """In process, as `check --from FILE --only bench` judges it: each file's bench checks, none broken."""
    for path in sorted(BENCH.glob("*/*")):
        if path.suffix not in (".txt", ".json") or "schema" in path.name or path.parent.name == "topo":
            continue
        facts = load(path)
        assert facts.get("benchmarks"), path.name
        results = judge(facts, only=["bench"])
        assert results and not {r.status for r in results.values()} & {Status.ERROR, Status.TIMEOUT}, path.name


def test_runs_without_a_benchmark_output_do_not_list_the_benchmark_judges() -> None:
    """A file without one (here a snapshot), as a live run: the judges are not planned, so no skip rows."""
    snapshot = Path(__file__).parent / "fixtures" / "snapshots" / "h100-sxm-8x.json"
    run = gpudoctor("check", "--from", str(snapshot), "--format", "json")
    ids = [c["check_id"] for c in json.loads(run.stdout)["checks"]]
    assert ids and not [i for i in ids if i.startswith("bench.")]
    named = gpudoctor("check", "--from", str(snapshot), "--only", "bench.nccl-tests", "--format", "json")
    assert json.loads(named.stdout)["checks"][0]["status"] == "skip"
    assert references.per_nic() is not None


def judge_text(text: str, run: dict | None = None) -> tuple:
    """bench.nccl-tests' verdict on a file's text as `check --from` reads it, in process; `run` stands for the
    file's nccl-tests run where the text holds only the machine's other outputs."""
    facts = paste.read(text).facts
    runs = [run] if run else facts["benchmarks"]["nccl_tests"]
    return benchmarks.judge_run(runs[0], facts["nvml"].get("gpus") or [], benchmarks.shown_in(facts))


def test_a_run_that_stops_after_its_device_list_on_one_node_points_at_peer_to_peer() -> None:
    """No row and no failure line after the devices: the run stopped at NCCL's init or first collective (or the paste
    was cut there). On one node NCCL's troubleshooting names ACS and an IOMMU for such a hang: the fix confirms it
    with P2P off, then looks at ACS and the IOMMU. A run that printed its failure is the failure's, not a hang."""
    stopped = (PASTES / "nccl" / "info-2.4.8-nccl-tests-lo-socket-v100.txt").read_text(encoding="utf-8")
    row, fix = judge_text(stopped)
    said = " ".join([*fix.commands, *(fix.instead.commands if fix.instead else [])]) if fix else ""
    assert row.status == Status.WARN and "stopped" in row.summary, row.summary
    assert "NCCL_P2P_DISABLE=1" in said and "ACSCtl" in said and "iommu" in said, said
    failed = stopped.replace(
        "NCCL version 2.4.8+cuda10.1", "ds-ml-01-0: Test NCCL failure common.cu:777 'unhandled system error'"
    )
    assert judge_text(failed)[0].status == Status.SKIP


def ibstat(ports: list[tuple[str, str, int, str]]) -> str:
    """ibstat's text for (device, state, rate, link layer) ports, written from infiniband-diags' ibstat.c
    format (CA line, tab-indented keys) as the published outputs in tests/fixtures/pastes/ibstat show it."""
    blocks = [
        f"CA '{device}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: {state}\n"
        f"\t\tPhysical state: LinkUp\n\t\tRate: {rate}\n\t\tLink layer: {layer}\n"
        for device, state, rate, layer in ports
    ]
    return "".join(blocks)


EIGHT_NDR = [(f"mlx5_{i}", "Active", 400, "InfiniBand") for i in range(8)]


def test_a_multi_node_run_is_judged_against_the_nics_ibstat_shows() -> None:
    output = (BENCH / "nccl-tests" / "h100-sxm-16gpu-2node-allreduce.txt").read_text()
    node = (IBSTAT / "ibstat-8x-cx7-ndr-400-ib-plus-4-cx6dx-eth-2-down-hgx-8gpu.txt").read_text()
    row, _ = judge_text(output + node)
    assert row.status == Status.PASS and "normal for the NICs NCCL uses" in row.summary, row.summary
    figure = row.metrics[0]
    assert figure.reference == pytest.approx(8 * references.per_nic().value)
    assert figure.reference_source.count("Ethernet beside InfiniBand") == 2, figure.reference_source
    assert figure.reference_source.count("not active") == 2, figure.reference_source
    slow, fix = judge_text(ibstat(EIGHT_NDR), nccl_run(97.0, ranks=16, hosts=["node1", "node2"]))
    assert slow.status == Status.FAIL and fix is not None, slow.summary


def test_a_figure_above_what_the_nics_carry_is_unjudgeable_not_a_pass() -> None:
    output = (BENCH / "nccl-tests" / "h100-sxm-16gpu-2node-allreduce.txt").read_text()
    row, _ = judge_text(output + ibstat(EIGHT_NDR[:2]))
    assert row.status == Status.SKIP and "in-network reduction" in row.summary, row.summary


def test_nccls_own_nic_list_picks_the_ports_and_one_nic_per_gpu_counts() -> None:
    log = "node1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n"
    run = nccl_run(90.0, ranks=16, hosts=["node1", "node2"])
    row, _ = judge_text(log + ibstat(EIGHT_NDR), run)
    assert row.metrics[0].reference == pytest.approx(2 * references.per_nic().value), row.summary
    two_per_node = nccl_run(90.0, ranks=4, hosts=["node1", "node2"])
    row, _ = judge_text(ibstat(EIGHT_NDR), two_per_node)
    assert row.metrics[0].reference == pytest.approx(2 * references.per_nic().value), row.summary
    assert "beyond one NIC per GPU" in row.metrics[0].reference_source


def a6000_pair(busbw: float) -> dict:
    run = nccl_run(busbw, ranks=2)
    run["devices"] = [{**d, "name": "NVIDIA RTX A6000"} for d in run["devices"][:2]]
    return run


def test_a_pasted_topology_judges_an_nvlink_bridged_pair_by_its_bridge() -> None:
    bridged = (BENCH / "topo" / "2gpu-nvlink-bridge-nv2.txt").read_text()
    row, _ = judge_text(bridged, a6000_pair(21.0))
    assert row.status == Status.PASS and "NVLink x2 per GPU" in row.summary, row.summary
    slow, _ = judge_text(bridged, a6000_pair(7.0))
    assert slow.status == Status.FAIL, slow.summary
    pairs = (BENCH / "topo" / "a100-8gpu-nvlink-bridge-pairs-nv12.txt").read_text()
    eight = nccl_run(7.0)
    eight["devices"] = [{**d, "name": "NVIDIA A100 80GB PCIe"} for d in eight["devices"]]
    over_pcie, _ = judge_text(pairs, eight)
    assert "PCIe Gen4 x16" in over_pcie.metrics[0].reference_source and over_pcie.metrics[0].reference < 21.0
    unseen, fix = judge_text("", a6000_pair(21.0))
    assert unseen.status == Status.SKIP and "topo -m" in fix.commands[0], unseen.summary


def test_the_command_line_settings_of_a_run_are_read() -> None:
    """Open MPI's `-x`, a variable before the program, srun's `--export` (commas inside a value kept)."""
    first = (BENCH / "nccl-tests" / "l40s-2gpu-2node-1perhost-socket-ring-allreduce.txt").read_text()
    [run] = paste.read(first).facts["benchmarks"]["nccl_tests"]
    assert run["env"]["NCCL_IB_DISABLE"] == "1" and run["env"]["NCCL_IB_HCA"] == "mlx5_1,mlx5_3"
    line = "srun --export=ALL,NCCL_DEBUG=INFO,NCCL_IB_HCA=mlx5_0,mlx5_1 NCCL_ALGO=Ring ./all_reduce_perf -g 1"
    assert nccl_tests.settings(line) == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_ALGO": "Ring"}
    assert nccl_tests.settings("mpirun -x NCCL_IB_DISABLE ./all_reduce_perf") == {}  # the value is the shell's


def two_nodes(busbw: float, per_node: tuple[int, int] = (8, 8), **extra: object) -> dict:
    run = nccl_run(busbw, ranks=sum(per_node), hosts=["node1", "node2"], **extra)
    hosts = ["node1"] * per_node[0] + ["node2"] * per_node[1]
    run["devices"] = [{**run["devices"][0], "rank": r, "host": h} for r, h in enumerate(hosts)]
    return run


def test_a_run_between_nodes_over_sockets_is_abnormal_and_says_why() -> None:
    """InfiniBand turned off on the command line, or NCCL's log saying it fell back to sockets: a warning that
    names the cause where the figure alone is unjudgeable, and the commands that confirm or cure it."""
    off, fix = benchmarks.judge_run(two_nodes(40.0, env={"NCCL_IB_DISABLE": "1"}), [], {})
    assert off.status == Status.WARN and "NCCL_IB_DISABLE=1 turned InfiniBand and RoCE off" in off.summary
    assert fix.commands[0].startswith("mpirun -np 16 -H node1:8,node2:8 -x NCCL_IB_DISABLE=0 -x NCCL_DEBUG=INFO ")
    log = "node1:1:1 [0] NCCL INFO Using network Socket\n"
    fell, fix = judge_text(log, two_nodes(40.0))
    assert fell.status == Status.WARN and "NCCL found no RDMA NIC it could use" in fell.summary, fell.summary
    assert fix.commands[:2] == ["ibv_devinfo", "ls /dev/infiniband"]
    on, _ = benchmarks.judge_run(two_nodes(40.0, env={"NCCL_IB_DISABLE": "0"}), [], {})
    assert on.status == Status.SKIP and "TCP" not in on.summary
    planted, fix = benchmarks.judge_run(two_nodes(40.0, env={"NCCL_IB_DISABLE": "$(reboot)"}), [], {})
    assert planted.status == Status.SKIP and "reboot" not in planted.summary + " ".join(fix.commands)


def test_uneven_ranks_and_shared_nics_join_the_fix_without_a_verdict_of_their_own() -> None:
    log = "node1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n"
    row, fix = judge_text(log, two_nodes(40.0, per_node=(8, 6)))
    assert row.status == Status.SKIP, row.summary
    assert "ranks per node differ (6 and 8)" in fix.why and "2 NICs in NCCL's log for 8 GPUs a node" in fix.why
    assert "nvidia-smi topo -m" in fix.commands


def test_of_two_runs_of_one_test_the_far_slower_one_took_another_path() -> None:
    fast, slow = two_nodes(120.0, size=2**27), two_nodes(5.0, size=2**27, line=40)
    verdicts = benchmarks.compared([fast, slow], [benchmarks.judge_run(r, [], {}) for r in (fast, slow)])
    assert [row.status for row, _ in verdicts] == [Status.SKIP, Status.WARN]
    assert "where the same test gave 120 (line 1): it took another path" in verdicts[1][0].summary
    other_algo = two_nodes(5.0, size=2**27, env={"NCCL_ALGO": "Tree"})
    verdicts = benchmarks.compared([fast, other_algo], [benchmarks.judge_run(r, [], {}) for r in (fast, other_algo)])
    assert [row.status for row, _ in verdicts] == [Status.SKIP, Status.SKIP]


def test_a_summary_of_several_runs_names_an_errored_or_timed_out_one_first_and_takes_its_fix() -> None:
    """judging/bench.combine orders by model.SEVERITY: a run that broke or timed out is worse than a warning or a
    pass, so it is named first and its fix is the one given."""
    warned = Remediation("look at the warning", ["nvidia-smi"])
    broke = Remediation("rerun it", ["nvidia-smi -q"])
    result = bench.combine(
        [
            bench.judged(Status.PASS, "fine"),
            bench.judged(Status.WARN, "slow", fix=warned),
            bench.judged(Status.TIMEOUT, "hung"),
            bench.judged(Status.ERROR, "broke", fix=broke),
        ],
        "run",
    )
    assert result.summary == "4 runs: hung; broke; slow; and 1 more"
    assert result.remediation.why == "rerun it" and result.status == Status.TIMEOUT
