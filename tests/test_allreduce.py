"""All-reduce for real on gloo: sweep, verification, busbw arithmetic, hung/crashing/late ranks; judging
against NVLink, NVSwitch, PCIe and no-P2P topologies on fixture measurements."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers.common import gpudoctor, load_snapshot, usable_gpus

from gpudoctor.checks.ranks.allreduce import rank_factor
from gpudoctor.judging import allreduce, expect, references, routes
from gpudoctor.workloads.launch import Fault, RankReport, judge_ranks, launch

SMALL = {"sizes": [4096, 65536, 1 << 20], "warmup": 2, "iters": 5, "out_of_place": True}


@pytest.mark.slow  # nccl-tests' arithmetic is tested on figures (combine), the whole check in the `not slow` run
def test_gloo_sweep_is_verified_with_nccl_tests_arithmetic(no_leftovers) -> None:
    outcome = launch("gpudoctor.checks.ranks.allreduce:worker", 3, "gloo", SMALL, 120)
    assert outcome.status == "pass", outcome.message
    rows = allreduce.combine(outcome.data, 3)
    assert [r["bytes"] for r in rows] == SMALL["sizes"]
    for row in rows:
        assert row["wrong"] == 0
        for mode in ("in_place", "out_of_place"):
            figures = row[mode]
            assert figures["time_us"] > 0
            assert figures["algbw_gbps"] == pytest.approx(row["bytes"] / (figures["time_us"] / 1e6) / 1e9)
            assert figures["busbw_gbps"] == pytest.approx(figures["algbw_gbps"] * 4 / 3)


def test_combine_takes_the_slowest_rank() -> None:
    per_rank = [
        {"rows": [{"bytes": 8_000_000, "wrong": 0, "in_place": {"median_s": t}, "out_of_place": None}]}
        for t in (0.001, 0.004)
    ]
    row = allreduce.combine(per_rank, 2)[0]
    assert row["in_place"]["algbw_gbps"] == pytest.approx(2.0)
    assert row["in_place"]["busbw_gbps"] == pytest.approx(2.0)
    assert allreduce.bus_factor(8) == pytest.approx(1.75)


def test_a_wrong_value_in_one_timed_iteration_is_caught(no_leftovers) -> None:
    """Every iteration's result is verified, not only a separate first call: one wrong value in the second
    timed in-place call of each size on rank 1 is counted."""
    outcome = launch(
        "gpudoctor.checks.ranks.allreduce:worker", 2, "gloo", SMALL, 120, Fault(1, "corrupt", "all_reduce")
    )
    rows = allreduce.combine(outcome.data, 2)
    assert [r["wrong"] for r in rows] == [1, 1, 1]
    result = allreduce.judge(rows, 2, "cpu", None, 0.75, {})
    assert result.status.value == "fail" and "3 wrong values" in result.summary


def test_in_place_buffer_stays_finite_over_many_iterations(no_leftovers) -> None:
    """The in-place buffer is refilled before every call: summed 100 times over 3 ranks it would reach inf
    (3**100 is past float32's 3.4e38); refilled, every one of the 110 results equals the known sum."""
    params = {"sizes": [4096], "warmup": 10, "iters": 100, "out_of_place": False}
    outcome = launch("gpudoctor.checks.ranks.allreduce:worker", 3, "gloo", params, 120)
    assert outcome.status == "pass", outcome.message
    assert all(rank["rows"][0]["wrong"] == 0 for rank in outcome.data)


def test_the_pattern_sum_is_exact_at_cluster_scale() -> None:
    world = 65536
    largest = 61 * sum(rank_factor(r) for r in range(world))
    assert largest < 2**24  # float32 holds every integer up to 2**24 exactly


@pytest.mark.parametrize(
    "fault,words",
    [
        ("rank=1,kind=hang,at=all_reduce 64 KiB in-place", ["rank 1", "all_reduce 64 KiB in-place"]),
        pytest.param(
            "rank=1,kind=hang,at=startup",
            ["rank 1", "startup"],
            marks=pytest.mark.slow,  # a rank hung in a collective is named in the `not slow` run
        ),
    ],
)
def test_hung_or_absent_rank_times_out_naming_it(fault: str, words: list[str], no_leftovers) -> None:
    """Ended by the run's own 30 s limit, as a timeout naming the rank (the helper's 300 s is only a guard against
    a hang), and no rank left behind (no_leftovers)."""
    proc = gpudoctor("check", "--only", "allreduce", "--timeout", "30", "--json", env={"GPUDOCTOR_INJECT_FAULT": fault})
    result = json.loads(proc.stdout)["checks"][0]
    assert result["status"] == "timeout", result
    for word in words:
        assert word in result["summary"]
    assert proc.returncode == 1


def test_crashing_rank_is_an_error_naming_it(no_leftovers) -> None:
    proc = gpudoctor(
        "check",
        "--only",
        "allreduce",
        "--json",
        env={"GPUDOCTOR_INJECT_FAULT": "rank=1,kind=crash,at=all_reduce 256 KiB"},
    )
    result = json.loads(proc.stdout)["checks"][0]
    assert result["status"] == "error"
    assert "rank 1 crashed (SIGSEGV) during 'all_reduce 256 KiB in-place'" in result["summary"]


def test_a_rank_aborted_by_an_nccl_style_watchdog_names_the_one_that_never_arrived(no_leftovers) -> None:
    """NCCL's watchdog aborts the waiting rank (SIGABRT, nothing recorded) while the hung one keeps running:
    the result is a timeout naming the hung rank, not "rank 0 crashed"."""
    worker = f"{Path(__file__).parent / 'workers' / 'nccl_watchdog.py'}:worker"
    fault = Fault(1, "hang", "all_reduce")
    outcome = launch(worker, 2, "gloo", {}, 30, fault)
    assert outcome.status == "timeout", outcome.message
    assert outcome.message == (
        "rank 1 (in 'all_reduce 1 MiB in-place') never arrived; rank 0 gave up waiting in 'all_reduce 1 MiB in-place'"
    )


def test_ranks_behind_are_named_when_every_rank_was_aborted() -> None:
    """As ProcessGroupNCCL leaves them: each waiting rank aborted, its log naming the watchdog timeout; the
    rank that stopped in an earlier phase is the cause."""
    watchdog = "timed out in a collective (NCCL's watchdog aborted it)"
    ranks = [
        RankReport(0, -6, None, watchdog, "all_reduce 4 MiB in-place", seq=9),
        RankReport(1, -6, None, watchdog, "all_reduce 1 MiB in-place", seq=7),
        RankReport(2, -6, None, watchdog, "all_reduce 4 MiB in-place", seq=9),
    ]
    result = judge_ranks(ranks, 1.0)
    assert (result.status, result.message) == (
        "timeout",
        "rank 1 (in 'all_reduce 1 MiB in-place') never arrived; "
        "ranks 0, 2 gave up waiting in 'all_reduce 4 MiB in-place'",
    )
    same = [RankReport(r, -6, None, watchdog, "all_reduce 4 MiB in-place", seq=9) for r in range(2)]
    assert (
        judge_ranks(same, 1.0).message
        == "all ranks timed out in 'all_reduce 4 MiB in-place': the collective never completed"
    )


def test_an_aborted_rank_with_no_one_behind_is_a_crash() -> None:
    ranks = [
        RankReport(0, -6, None, "crashed (SIGABRT)", "train step 3", seq=5),
        RankReport(1, 0, {}, "", "shutdown", seq=9),
    ]
    assert judge_ranks(ranks, 1.0).message == "rank 0 crashed (SIGABRT) during 'train step 3'"


def test_the_nccl_watchdog_message_in_a_rank_log_reads_as_a_timeout(tmp_path) -> None:
    from gpudoctor.workloads.launch import _rank_error

    (tmp_path / "rank0.log").write_text(
        "[rank0]:[E1122 10:00:00.000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=12000) ran "
        "for 12001 milliseconds before timing out.\n"
    )
    assert _rank_error(-6, "", tmp_path, 0) == "timed out in a collective (NCCL's watchdog aborted it)"


def test_a_crash_says_what_the_library_threw_before_it_aborted(tmp_path: Path) -> None:
    """A C++ exception no one caught (gloo's transport thread) ends the rank in SIGABRT; the crash says what it
    was, so a timeout or a lost peer reads as one and a real fault reads as itself."""
    from gpudoctor.workloads.launch import _rank_error

    (tmp_path / "rank0.log").write_text(
        "[W1124 06:31:16.078441191 socket.cpp:207] [c10d] The hostname of the client socket cannot be retrieved.\n"
        "terminate called after throwing an instance of 'gloo::IoException'\n"
        "  what():  [gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.3]:6310\n"
    )
    error = _rank_error(-6, "", tmp_path, 0)
    thrown = "gloo::IoException: [gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.3]:6310"
    assert error == f"crashed (SIGABRT): {thrown}"
    ranks = [
        RankReport(0, -6, None, error, "links", exit_round=1),
        RankReport(1, -11, None, "crashed (SIGSEGV)", "links"),
    ]
    assert judge_ranks(ranks, 1.0).message == "rank 1 crashed (SIGSEGV) during 'links'", "a lost peer is a consequence"
    (tmp_path / "rank1.log").write_text("x" * 5000 + "\n")
    assert _rank_error(-6, "", tmp_path, 1) == "crashed (SIGABRT)", "nothing thrown: the signal alone"


PEER_RESET = "raised RuntimeError: [pair.cc:545] Read error [127.0.0.1]:7062: Connection reset by peer."


@pytest.mark.parametrize("peer_round", [1, 2])
def test_the_rank_that_crashed_is_named_not_the_one_that_lost_it(peer_round: int) -> None:
    """Seen on gloo: rank 0 raises "connection reset by peer" and then aborts at exit; rank 1 is the cause,
    whichever poll round each was first seen gone in."""
    ranks = [
        RankReport(0, -6, None, f"{PEER_RESET} (then crashed (SIGABRT) at exit)", "all_reduce", exit_round=peer_round),
        RankReport(1, -11, None, "crashed (SIGSEGV)", "all_reduce", exit_round=2),
    ]
    result = judge_ranks(ranks, 1.0)
    assert (result.status, result.message) == ("error", "rank 1 crashed (SIGSEGV) during 'all_reduce'")


@pytest.mark.slow  # the all-reduce check runs on the CPU in the `not slow` run (tests/test_monitoring.py)
def test_check_runs_on_cpu_and_says_why_it_is_not_judged(tmp_path) -> None:
    proc = gpudoctor("check", "--only", "allreduce", "--json", "--device", "cpu")
    result = json.loads(proc.stdout)["checks"][0]
    assert result["status"] == "pass"
    assert "2 ranks (gloo)" in result["summary"] and "judged only against a saved baseline" in result["summary"]
    names = [m["name"] for m in result["metrics"]]
    assert "busbw" in names and "nccl_version" in names


def test_baseline_save_and_judge_on_cpu(tmp_path) -> None:
    """A saved known-good figure judges later runs: an impossible baseline fails, the saved one passes."""
    path = tmp_path / "baseline.json"
    config = tmp_path / "only.toml"
    config.write_text(
        'only = ["allreduce"]\n[checks.allreduce.bandwidth]\nwarmup = 2\niters = 5\n'  # its figure alone
    )
    proc = gpudoctor("baseline", "save", str(path), "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    saved = json.loads(path.read_text())
    assert saved["figures"]["allreduce.bandwidth:busbw"] > 0
    impossible = copy.deepcopy(saved)
    impossible["figures"]["allreduce.bandwidth:busbw"] *= 1000
    fake = tmp_path / "impossible.json"
    fake.write_text(json.dumps(impossible))
    args = ("check", "--only", "allreduce", "--json", "--baseline", str(fake), "--config", str(config))
    result = json.loads(gpudoctor(*args).stdout)
    assert result["checks"][0]["status"] == "fail"
    assert "of the saved baseline" in result["checks"][0]["summary"]
    sources = {m.get("reference_source") for m in result["checks"][0]["metrics"] if m["name"] == "busbw"}
    assert f"baseline {fake}" in sources


def measured(busbw: float) -> list[dict]:
    return [{"bytes": 1 << 30, "wrong": 0, "in_place": {"time_us": 1.0, "algbw_gbps": busbw, "busbw_gbps": busbw}}]


def topology_case(name: str, p2p_ok: bool | None = None) -> tuple[list[dict], dict]:
    snap = load_snapshot(name)
    topology = copy.deepcopy(snap["nvml"]["topology"])
    if p2p_ok is not None:
        topology["p2p_read"] = [
            [None if a == b else (0 if p2p_ok else 2) for b in range(len(row))]
            for a, row in enumerate(topology["p2p_read"])
        ]
    return usable_gpus(snap), topology


@pytest.mark.parametrize(
    "fixture,p2p,env,expected,source",
    [
        ("h100-sxm-8x", None, {}, 370.0, "H100 SXM, 8 GPUs, Ring, maintainer statement: https://github.com/NVIDIA"),
        (
            "l40s-pcie-4x",
            True,
            {"NCCL_P2P_LEVEL": "SYS"},
            22.05,
            "PCIe Gen4 x16 (31.5 GB/s), P2P on (path SYS, NCCL_P2P_LEVEL=SYS SYS)",
        ),
        ("l40s-pcie-4x", True, {}, 12.6, "PCIe Gen4 x16 (31.5 GB/s), path SYS beyond NCCL's default level PXB: SHM"),
        ("l40s-pcie-4x", False, {}, 12.6, "PCIe Gen4 x16 (31.5 GB/s), P2P unsupported by NVML: SHM"),
    ],
)
def test_expectation_follows_the_topology(fixture: str, p2p, env: dict, expected: float, source: str) -> None:
    gpus, topology = topology_case(fixture, p2p)
    exp = routes.allreduce_expectation(gpus, topology, env)
    assert exp.value == pytest.approx(expected)
    assert exp.source.startswith(source)


def test_nvlink_bridge_pair_uses_its_links() -> None:
    gpus, topology = topology_case("h100-sxm-8x")
    pair = copy.deepcopy(gpus[:2])
    for gpu in pair:
        gpu["nvlinks"] = gpu["nvlinks"][:4]
    exp = routes.allreduce_expectation(pair, topology)
    ring = references.theory_ratio("allreduce_busbw", routes.nvlink_theory, algo="ring", nodes=1)[0]
    assert exp.value == pytest.approx(100 * ring) and exp.source.startswith("NVLink 100 GB/s per GPU")


@pytest.mark.parametrize("busbw,status", [(470.0, "pass"), (370.0, "pass"), (280.0, "warn"), (200.0, "fail")])
def test_nvswitch_node_judged_against_the_published_ring_figure(busbw: float, status: str) -> None:
    """8x H100 SXM: Ring's 370 GB/s (NCCL's maintainer) is healthy, NVLS's ~470 more so; 0.85 of 370 passes,
    down to 0.75 of it warns, below fails."""
    gpus, topology = topology_case("h100-sxm-8x")
    result = allreduce.judge(measured(busbw), 8, "cuda", routes.allreduce_expectation(gpus, topology), 0.75, {})
    assert result.status.value == status
    if status == "fail":
        assert result.summary == "8 ranks (NCCL), busbw 200 GB/s: 54 % of a healthy 8x H100 SXM (370) at 1024 MiB"
        busbw = result.metrics[0]
        assert busbw.expected == 314.5 and "nccl-tests/issues/212" in busbw.reference_source
        assert "nvidia-smi topo -m" in result.remediation.commands


def test_one_rank_and_unknown_topology_are_not_judged() -> None:
    one = allreduce.judge(measured(5.8e5), 1, "cuda", None, 0.75, {"nccl_version": "2.28.9"})
    assert one.status.value == "pass"
    assert one.summary == "1 rank (NCCL): every size verified; bandwidth not measured (no peer to exchange with)"
    # On a one-GPU H100 the in-place all-reduce "ran" at 5.8e5 GB/s: a no-op timed is no figure, so none is kept.
    assert [m.name for m in one.metrics] == ["nccl_version"]
    assert allreduce.judge([{**measured(1.0)[0], "wrong": 3}], 1, "cuda", None, 0.75, {}).status.value == "fail"


def test_nccl_settings_are_one_series_labelled_by_variable() -> None:
    """The H100 image this was first run on sets NCCL_VERSION: it became a metric named in capitals."""
    nccl = {"nccl_version": "2.28.9", "NCCL_VERSION": "2.28.3-1", "NCCL_DEBUG": "WARN"}
    metrics = allreduce.judge(measured(100.0), 2, "cuda", None, 0.75, nccl).metrics
    settings = [(m.name, m.labels, m.value) for m in metrics if m.name.startswith("nccl")]
    assert settings == [
        ("nccl_version", {}, "2.28.9"),
        ("nccl_env", {"variable": "NCCL_VERSION"}, "2.28.3-1"),
        ("nccl_env", {"variable": "NCCL_DEBUG"}, "WARN"),
    ]
    unknown = allreduce.judge(measured(1.0), 2, "cuda", None, 0.75, {})
    assert unknown.status.value == "warn" and "no expectation" in unknown.summary


def test_configured_floor_overrides_the_table() -> None:
    exp = expect.pick(None, expect.from_setting(400, "min_busbw_gbps"))
    result = allreduce.judge(measured(390.0), 8, "cuda", exp, 0.75, {})
    assert result.status.value == "fail" and "of the configured minimum (400)" in result.summary
    assert result.metrics[0].reference_source == "config min_busbw_gbps"
    assert allreduce.judge(measured(400.0), 8, "cuda", exp, 0.75, {}).status.value == "pass"
