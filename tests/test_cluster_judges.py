"""Cluster mode's pure parts: the launcher's environment, host lists, the judging of the nodes' own figures
(the median, fractions and the noise allowance), skew, rank 0's verdicts, and the cluster report. The pair
judge (links, slow node against slow link, the re-test) is tests/test_pairs.py."""

from __future__ import annotations

import re

import jsonschema
import pytest
from helpers.common import gpudoctor

from gpudoctor.checks import cluster as checks
from gpudoctor.cluster.context import own_part
from gpudoctor.cluster.env import ClusterEnvError, detect, expand_hostlist
from gpudoctor.cluster.node import judged_figures, software, verdict_result, verdicts
from gpudoctor.judging.compare import Fractions
from gpudoctor.model import Metric, Result, Row, Status
from gpudoctor.report import document as doc
from gpudoctor.workloads.launch import LaunchResult, RankReport, caused_elsewhere

TORCHRUN = {
    "RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "1",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29400",
    "TORCHELASTIC_RUN_ID": "job7",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
}
SRUN = {
    "SLURM_PROCID": "2",
    "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_NUM_NODES": "3",
    "SLURM_STEP_NODELIST": "gpu[007-008],login1",
    "SLURM_JOB_ID": "123456",
    "SLURM_STEP_ID": "0",
    "SLURMD_NODENAME": "login1",
}


def test_torchrun_environment() -> None:
    env = detect(TORCHRUN)
    assert (env.rank, env.world_size, env.master_addr, env.master_port) == (1, 4, "10.0.0.1", 29400)
    assert (env.launcher, env.agent_store, env.leader) == ("torchrun", True, False)


def test_srun_environment_names_the_nodes_from_the_step_list() -> None:
    env = detect(SRUN)
    assert (env.rank, env.world_size, env.node, env.launcher) == (2, 3, "login1", "slurm")
    assert env.expected == ("gpu007", "gpu008", "login1") and env.master_addr == "gpu007"
    assert env.master_port == 29500 + 456


def test_not_a_cluster() -> None:
    assert detect({}) is None
    assert detect({**TORCHRUN, "RANK": "0", "WORLD_SIZE": "1"}) is None
    batch_script = {k: v for k, v in SRUN.items() if not k.startswith("SLURM_STEP")}
    assert detect(batch_script) is None, "a batch script's own SLURM_PROCID=0 is not rank 0 of a step"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"RANK": "x"}, "RANK='x' is not a whole number"),
        ({"RANK": "4"}, "RANK=4 is outside WORLD_SIZE=4"),
        ({"LOCAL_WORLD_SIZE": "8"}, "--nproc-per-node 1"),
        ({"MASTER_PORT": "-1"}, "MASTER_PORT='-1'"),
        ({"MASTER_PORT": "99999"}, "MASTER_PORT='99999' is not a whole number from 1 to 65535"),
        ({"LOCAL_WORLD_SIZE": "abc"}, "LOCAL_WORLD_SIZE='abc' is not a whole number"),
        ({"WORLD_SIZE": "9" * 5000}, "WORLD_SIZE='9999"),
        ({"TORCHELASTIC_RUN_ID": "x" * 5000}, "is not a run id torchrun makes"),
        ({"SLURMD_NODENAME": "../../etc"}, "node name '../../etc' is not a host name"),
        ({"SLURMD_NODENAME": "n1\x1b[2K"}, "is not a host name"),
    ],
)
def test_bogus_torchrun_environment(change: dict[str, str], words: str) -> None:
    """Each a one-line error, never a traceback (ValueError, MemoryError) or a name that leaves its folder."""
    with pytest.raises(ClusterEnvError, match=re.escape(words)):
        detect({**TORCHRUN, **change})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"SLURM_STEP_NUM_NODES": "abc"}, "SLURM_STEP_NUM_NODES='abc' is not a whole number"),
        ({"SLURM_STEP_NODELIST": "n[1-99999999]"}, "names 99,999,999 nodes; gpudoctor takes at most 100,000"),
        ({"SLURM_STEP_NODELIST": "r[1-1000]n[1-1000]"}, "names 1,000,000 nodes"),
        ({"SLURM_JOB_ID": "9" * 5000}, "SLURM_JOB_ID="),
        ({"SLURM_STEP_NODELIST": "n[1-x]"}, "is not N or N-M"),
    ],
)
def test_bogus_srun_environment(change: dict[str, str], words: str) -> None:
    with pytest.raises(ClusterEnvError, match=re.escape(words)):
        detect({**SRUN, **change})


def test_srun_with_several_tasks_per_node_is_refused() -> None:
    with pytest.raises(ClusterEnvError, match="one task per node"):
        detect({**SRUN, "SLURM_STEP_NUM_NODES": "1"})


def test_bogus_environment_is_a_one_line_usage_error() -> None:
    proc = gpudoctor("check", "--only", "cluster.nodes", env={"RANK": "1", "WORLD_SIZE": "two", "MASTER_ADDR": "x"})
    assert proc.returncode == 2
    assert proc.stderr.strip() == "gpudoctor: error: WORLD_SIZE='two' is not a whole number from 1 to 100000"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("node1", ["node1"]),
        ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
        ("gpu[8-10,12],cpu1", ["gpu8", "gpu9", "gpu10", "gpu12", "cpu1"]),
        ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ],
)
def test_slurm_host_lists(text: str, names: list[str], monkeypatch) -> None:
    monkeypatch.setenv("PATH", "")  # no scontrol: the expansion done here
    assert expand_hostlist(text) == names


FRACTIONS = Fractions(0.8, 0.5)


def test_stragglers_against_each_figures_median() -> None:
    figures = {
        "ddp.train:images_per_s_per_gpu": {"a": 100.0, "b": 98.0, "c": 60.0, "d": 101.0},
        "compute.gemm:bf16": {"a": 700.0, "b": 300.0, "c": 690.0, "d": 705.0},
    }
    result = checks.judge_stragglers(figures, FRACTIONS)
    rows = {r.node: r for r in result.rows if r.status != Status.PASS}
    assert set(rows) == {"b", "c"}
    assert rows["b"].status == Status.FAIL and rows["b"].summary.startswith("compute.gemm:bf16 300, 0.43x the median")
    assert rows["c"].status == Status.WARN and "images_per_s_per_gpu 60, 0.61x the median 99" in rows["c"].summary
    figure = rows["b"].metrics[0]
    assert figure.expected == 695.0 and "median of 4 per-node figures" in figure.expected_source
    assert "noise allowance" in figure.expected_source and "across 8 per-node figures" in figure.expected_source


def test_no_stragglers() -> None:
    assert checks.judge_stragglers({"x": {"a": 1.0, "b": 1.1, "c": 0.95}}, FRACTIONS).status == Status.PASS


def test_noisy_healthy_figures_name_nobody_at_8_nodes() -> None:
    """The old rule (any node below 0.8x the median of a figure) named some healthy node in 74 % of runs at 8
    nodes with eight figures each of 15 % noise. With the allowance for the 64 figures judged at once and the
    spread measured across them: at most 1 % (the bound is set for 0.2 %; the spread is itself estimated)."""
    import random

    rng = random.Random(7)
    named = 0
    for _ in range(200):
        figures = {f"f{k}": {f"n{i}": rng.lognormvariate(0, 0.15) for i in range(8)} for k in range(8)}
        named += checks.judge_stragglers(figures, FRACTIONS).status != Status.PASS
    assert named <= 2


def test_a_slow_node_among_noisy_ones_is_still_named() -> None:
    import random

    rng = random.Random(3)
    figures = {"f": {f"n{i}": rng.lognormvariate(0, 0.05) for i in range(8)}}
    figures["f"]["n5"] = 0.3
    result = checks.judge_stragglers(figures, FRACTIONS)
    assert [(r.node, r.status) for r in result.rows if r.status != Status.PASS] == [("n5", Status.FAIL)]
    assert "across 8 per-node figures" in result.summary


def test_only_figures_a_node_judged_itself_are_compared_across_nodes() -> None:
    """gloo figures on the CPU measure the host and are not judged on the node: they are not compared."""
    checks_ = [
        {
            "check_id": "allreduce.bandwidth",
            "metrics": [
                {"name": "busbw", "value": 3.2, "expected": None, "baseline": True, "labels": {}},
            ],
        },
        {
            "check_id": "compute.gemm",
            "metrics": [
                {"name": "tflops", "value": 700.0, "expected": 989.0, "baseline": True, "labels": {}},
                {"name": "note", "value": "x", "expected": 1.0, "baseline": True, "labels": {}},
            ],
        },
    ]
    assert judged_figures(checks_) == {"compute.gemm:tflops": 700.0}


def facts(**env: str) -> dict:
    return {
        "nvml": {"driver_version": "590.48.01", "cuda_driver_version": 13010},
        "torch": {"version": "2.14.1+cu130", "cuda": "13.0", "nccl": {"version": "2.30.7"}},
        "system": {"env": env},
    }


def test_skew_names_the_setting_and_the_nodes_and_ignores_interface_names() -> None:
    software_by_node = {
        "a": software(facts(NCCL_SOCKET_IFNAME="ens1", NCCL_IB_HCA="mlx5")),
        "b": software(facts(NCCL_SOCKET_IFNAME="ens9", NCCL_IB_HCA="mlx5")),
        "c": software(facts(NCCL_SOCKET_IFNAME="eth0", NCCL_IB_HCA="mlx5", NCCL_ALGO="Ring")),
    }
    result = checks.judge_skew(software_by_node)
    assert result.status == Status.WARN
    assert result.summary == "NCCL_ALGO: Ring on c; unset on a, b"


def test_version_skew() -> None:
    old = facts()
    old["nvml"]["driver_version"] = "580.95.05"
    result = checks.judge_skew({"a": software(facts()), "b": software(old), "c": software(facts())})
    assert result.summary == "driver: 580.95.05 on b; 590.48.01 on a, c"
    assert checks.judge_skew({"a": software(facts()), "b": software(facts())}).status == Status.PASS


def test_node_verdicts() -> None:
    nodes = [
        {"name": "a", "status": "pass", "exit_code": 0, "failing": [], "warning": []},
        {"name": "b", "status": "fail", "exit_code": 1, "failing": ["health.ecc"], "warning": []},
        {"name": "c", "lost": "never joined within 60 s", "exit_code": None, "status": "error"},
        {"name": "d", "status": "warn", "exit_code": 0, "failing": [], "warning": ["system.shm"]},
    ]
    result = checks.judge_nodes(nodes)
    assert result.status == Status.FAIL
    assert result.summary == "b: failed health.ecc; c: lost: never joined within 60 s; d: warnings in system.shm"
    assert result.remediation.commands == ['scontrol update NodeName=b,c State=DRAIN Reason="gpudoctor: node checks"']


def test_cluster_report_lists_what_to_drain_and_validates() -> None:
    figure = [Metric("node_link_bandwidth", 0.01, "GB/s", expected=1.0, expected_source="upper quartile")]
    results = [
        Result(Status.PASS, "all fine", check_id="cluster.nodes", title="t"),
        Result(
            Status.FAIL,
            "n2 slow",
            rows=[
                Row(Status.FAIL, "slow, confirmed", node="n2", metrics=figure, confirmed=True),
                Row(Status.WARN, "slow once, fine again", node="n4", metrics=figure, confirmed=False),
                Row(Status.FAIL, "not re-tested: no partner", node="n5", metrics=figure, confirmed=False),
                Row(Status.PASS, "fine", node="n0", metrics=figure),
            ],
            check_id="cluster.links",
            title="t",
        ),
        Result(
            Status.WARN,
            "slow link",
            aspect="links",
            rows=[Row(Status.FAIL, "slow link", node="n0", peer="n1", confirmed=True)],
            check_id="cluster.links",
            title="t",
        ),
    ]
    nodes = [
        {"name": "n0", "rank": 0, "status": "pass", "exit_code": 0, "checks": []},
        {"name": "n1", "rank": 1, "status": "fail", "exit_code": 1, "checks": []},
        {"name": "n2", "rank": 2, "status": "pass", "exit_code": 0, "checks": []},
        {"name": "n3", "rank": 3, "lost": "stopped answering", "exit_code": None, "status": "error", "checks": []},
        {"name": "n4", "rank": 4, "status": "pass", "exit_code": 0, "checks": []},
        {"name": "n5", "rank": 5, "status": "pass", "exit_code": 0, "checks": []},
    ]
    meta = {"host": "n0", "started_at": "2026-11-22T10:00:00+00:00", "duration_s": 1.0, "level": "standard"}
    document = doc.build_cluster(results, nodes, {**meta, "source": "live"}, False, False, "torchrun")
    cluster = document["cluster"]
    assert document["exit_code"] == 1
    assert cluster["failed_nodes"] == ["n1", "n2", "n3"], "a refuted suspicion (n5) and a slow link drain nobody"
    assert cluster["stragglers"] == ["n2"]
    assert cluster["unconfirmed"] == ["n4", "n5"]
    assert cluster["links"] == ["n0 -> n1"]
    assert [(f["node"], f["peer"], f["status"]) for f in cluster["findings"]] == [
        ("n2", None, "fail"),
        ("n5", None, "fail"),
        ("n0", "n1", "fail"),
        ("n3", None, "fail"),
        ("n4", None, "warn"),
    ], "worst first: failures by how far below their reference, those with no figure after them"
    by_name = verdicts(document)
    assert by_name["n2"]["status"] == "fail" and by_name["n4"]["status"] == "warn"
    assert by_name["n0"]["status"] == "pass" and by_name["n1"]["status"] == "fail"
    assert by_name["n2"]["findings"] == ["cluster.links: slow, confirmed"]
    jsonschema.validate(document, doc.schema())


def test_a_node_learns_rank_0s_verdict_and_exits_by_it() -> None:
    drained = verdict_result({"status": "fail", "findings": ["cluster.links: 0.012 GB/s at best"]}, "n0")
    assert drained.status == Status.FAIL and drained.check_id == "cluster.verdict"
    assert drained.summary == "rank 0 on n0 names this node (drain it): cluster.links: 0.012 GB/s at best"
    assert verdict_result({"status": "warn", "findings": ["x"]}, "n0").summary.endswith("(not drained): x")
    assert verdict_result({"status": "pass", "findings": []}, "n0").status == Status.PASS
    gone = verdict_result(None, "n0")
    assert gone.status == Status.WARN and "no verdict from rank 0" in gone.summary


def test_a_node_that_only_lost_a_peer_warns_and_one_that_crashed_fails() -> None:
    peer = RankReport(3, 1, error="RuntimeError: Connection reset by peer", phase="all_reduce")
    lost_peer = LaunchResult(Status.ERROR, "rank 3 ...", [peer])
    assert own_part([lost_peer], "n0").status == Status.WARN
    crashed = LaunchResult(Status.ERROR, "rank 3 crashed (SIGSEGV)", [RankReport(3, -11, error="crashed (SIGSEGV)")])
    assert own_part([crashed], "n0").status == Status.ERROR
    assert own_part([None], "n0").status == Status.SKIP
    fine = LaunchResult(Status.PASS, "1 ranks finished", [RankReport(3, 0)])
    assert own_part([fine, crashed], "n0").status == Status.ERROR, "the worst of its attempts"


def test_outside_cluster_mode_cluster_checks_are_left_out_unless_named() -> None:
    import json

    from helpers.common import SNAPSHOTS

    snapshot = str(SNAPSHOTS / "h100-sxm-8x.json")
    default = json.loads(gpudoctor("check", "--from", snapshot, "--json").stdout)
    assert not [c for c in default["checks"] if c["check_id"].startswith("cluster.")]
    named = json.loads(gpudoctor("check", "--from", snapshot, "--only", "cluster.skew", "--json").stdout)
    assert named["checks"][0]["summary"].startswith("not in cluster mode: run one gpudoctor per node")


@pytest.mark.parametrize(
    ("error", "elsewhere"),
    [
        # Seen in CI: node-2 killed while the workload's ranks met; node-1's rank lost the connection.
        (
            "raised DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote "
            "server shutdown or crash?",
            True,
        ),
        ("raised RuntimeError: Connection reset by peer", True),
        ("crashed (SIGSEGV)", False),
        ("raised ValueError: bad batch", False),
    ],
)
def test_a_rank_that_only_lost_a_peer_elsewhere_is_not_this_nodes_fault(error: str, elsewhere: bool) -> None:
    result = LaunchResult(Status.ERROR, "", [RankReport(1, 1, error=error, phase="rendezvous"), RankReport(0, 0)])
    assert caused_elsewhere(result) is elsewhere


def thousand_node_report() -> tuple[dict, list[Result]]:
    """1,000 nodes: two slow (one to drain), one unconfirmed, one lost, a slow link; every node a row."""
    rows = []
    for i in range(1000):
        value = {17: 0.01, 512: 0.7, 900: 0.6}.get(i, 1.0)
        status = Status.FAIL if i == 17 else Status.WARN if i in (512, 900) else Status.PASS
        figure = Metric("node_link_bandwidth", value, "GB/s", expected=1.0, expected_source="upper quartile; allowance")
        rows.append(
            Row(status, f"{value} GB/s", node=f"gpu{i:04d}", metrics=[figure], confirmed=False if i == 900 else None)
        )
    links = Row(Status.WARN, "0.3 GB/s re-tested: confirmed", node="gpu0003", peer="gpu0004", confirmed=True)
    results = [
        Result(Status.FAIL, "gpu0017 slow", rows=rows, check_id="cluster.links", title="Links between nodes"),
        Result(Status.WARN, "slow link", aspect="links", rows=[links], check_id="cluster.links", title="Links"),
    ]
    nodes = [{"name": f"gpu{i:04d}", "rank": i, "status": "pass", "exit_code": 0, "checks": []} for i in range(1000)]
    nodes[42] = {
        "name": "gpu0042",
        "rank": 42,
        "lost": "never joined within 120 s",
        "exit_code": None,
        "status": "error",
    }
    meta = {"host": "gpu0000", "started_at": "2026-11-23T10:00:00+00:00", "duration_s": 61.0, "level": "standard"}
    return doc.build_cluster(results, nodes, {**meta, "source": "live"}, False, False, "slurm"), results


def test_the_console_report_of_1000_nodes_fits_a_screen_and_names_the_worst_first() -> None:
    from rich.console import Console

    from gpudoctor.report.console import render_cluster

    document, results = thousand_node_report()
    console = Console(record=True, width=120, file=__import__("io").StringIO())
    render_cluster(console, document, results)
    text = console.export_text()
    assert len(text.splitlines()) < 80
    assert "1000 nodes (slurm): 2 to drain, 2 named, not drained, 996 fine; 1 lost" in text
    named = text[text.index("named, worst first") :]
    assert named.index("gpu0017") < named.index("gpu0042") < named.index("gpu0900") < named.index("gpu0512")
    assert "node_link_bandwidth 0.01 GB/s against 1\n" in text, "the allowance is for -v"
    assert "drain (failed nodes): gpu0017,gpu0042" in text
    assert "unconfirmed (re-tested fine: not drained): gpu0900" in text and "slow links: gpu0003 -> gpu0004" in text
    assert "gpu0700" not in text, "a passing node is not listed without -v"
    verbose = Console(record=True, width=120, file=__import__("io").StringIO())
    render_cluster(verbose, document, results, verbose=True)
    every = verbose.export_text()
    assert all(f"gpu{i:04d}" in every for i in range(1000))


def test_each_node_is_judged_by_its_own_compute_in_the_cross_node_ddp_run() -> None:
    """Lockstep training runs at the slowest rank's pace on every node; the steps without synchronisation
    show which node is slow (its slowest GPU, the better of two passes)."""
    from gpudoctor.cluster.session import Member, WorkloadOutcome

    members = [Member(i, f"n{i}", span=range(2 * i, 2 * i + 2)) for i in range(4)]
    seconds = {0: 0.10, 1: 0.102, 2: 0.099, 3: 0.25}  # node 3 computes at 0.4x
    ranks = [
        RankReport(r, 0, data={"local_step_s": [[seconds[r // 2]] * 4, [seconds[r // 2] * 1.01] * 4]}) for r in range(8)
    ]
    outcome = WorkloadOutcome(members, ranks, [], LaunchResult(Status.PASS, "8 ranks finished", ranks))
    result = checks.judge_compute(outcome, 128, FRACTIONS)
    assert result.aspect == "per-node" and result.status == Status.FAIL
    assert [(r.node, r.status) for r in result.rows if r.status != Status.PASS] == [("n3", Status.FAIL)]
    assert "the better of two passes" in result.summary and "noise allowance" in result.summary
