"""Cluster mode for real: hosts are network namespaces made here (tests/netns.py), one gpudoctor per host started
by torchrun (c10d or static rendezvous) or with the environment srun gives, gloo between them. A healthy
cluster; a host whose link is rate-limited with tc; a host killed mid-run; a host that hangs; a host with
another NCCL setting; a host that never joins. Skipped, with the reason, where namespaces cannot be made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
from netns import Hosts, HostsUnavailable

from gpudoctor.report import document as doc

# Two cores run every host here, so link figures move by a quarter between runs: the tests judge at 0.6 and
# 0.3 of the median instead of 0.8 and 0.5 (a host limited by tc is 20 times slower).
TOLERANT = "[checks.cluster.links]\nstraggler_fraction = 0.6\nfail_fraction = 0.3\n"


@dataclass
class Node:
    name: str
    returncode: int
    log: str
    report: dict


@pytest.fixture
def hosts(request) -> Hosts:
    try:
        made = Hosts(request.param if hasattr(request, "param") else 3)
    except HostsUnavailable as exc:
        pytest.skip(str(exc))
    yield made
    made.remove()


def torchrun(hosts: Hosts, i: int, args: list[str], static: bool = False) -> list[str]:
    """torchrun on host i: c10d rendezvous (ranks in join order), or static (rank = --node-rank)."""
    if static:
        rendezvous = ["--node-rank", str(i), "--master-addr", hosts.address(0), "--master-port", "29401"]
    else:
        rendezvous = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{hosts.address(0)}:29400"]
        rendezvous += ["--rdzv-id", "gpudoctor-test", "--local-addr", hosts.address(i)]
    nodes = ["--nnodes", str(len(hosts.names)), "--nproc-per-node", "1"]
    return [sys.executable, "-m", "torch.distributed.run", *nodes, *rendezvous, "-m", "gpudoctor", *args]


def srun_env(hosts: Hosts, i: int, tasks: int) -> dict[str, str]:
    """What srun --ntasks-per-node=1 gives task i."""
    return {
        "SLURM_PROCID": str(i),
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_STEP_NUM_NODES": str(tasks),
        "SLURM_STEP_NODELIST": f"node-[0-{tasks - 1}]",
        "SLURM_JOB_ID": "4242",
        "SLURM_STEP_ID": "0",
        "SLURMD_NODENAME": hosts.names[i],
    }


def run(
    hosts: Hosts,
    tmp_path: Path,
    args: list[str],
    launcher: str = "torchrun",
    env: dict[int, dict[str, str]] | None = None,
    start: list[int] | None = None,
    while_running: object = None,
    limit_s: float = 420,
) -> tuple[dict[str, Node], dict]:
    """Start gpudoctor on the hosts, wait for all, and return each node and rank 0's cluster report."""
    config = tmp_path / "cluster.toml"
    config.write_text(TOLERANT + "[checks.cluster.nodes]\njoin_timeout = 20.0\n")
    out = tmp_path / "out"
    out.mkdir()
    argv = ["check", *args, "--config", str(config), "--json", "-o", str(out / "{node}.json")]
    procs = {}
    for i in start if start is not None else range(len(hosts.names)):
        node_env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "NO_COLOR": "1", **(env or {}).get(i, {})}
        if launcher.startswith("torchrun"):
            command = torchrun(hosts, i, argv, static=launcher == "torchrun-static")
        else:
            node_env.update(srun_env(hosts, i, len(hosts.names)))
            command = [str(Path(sys.executable).with_name("gpudoctor")), *argv]
        procs[i] = hosts.start(i, command, node_env, tmp_path / f"{hosts.names[i]}.log")
    if callable(while_running):
        while_running()
    deadline = time.monotonic() + limit_s
    for proc in procs.values():
        proc.wait(timeout=max(1, deadline - time.monotonic()))
    nodes = {}
    for i, proc in procs.items():
        name = hosts.names[i]
        path = out / f"{name}.json"
        report = json.loads(path.read_text()) if path.exists() else {}
        nodes[name] = Node(name, proc.returncode, (tmp_path / f"{name}.log").read_text(), report)
    leader = next(n.report for n in nodes.values() if "cluster" in n.report)
    jsonschema.validate(leader, doc.schema())
    return nodes, leader


def no_process_left(hosts: Hosts, indexes: list[int]) -> list[int]:
    left = []
    for i in indexes:
        out = subprocess.run(["ip", "netns", "pids", hosts.namespace(i)], capture_output=True, text=True).stdout
        left += [int(p) for p in out.split()]
    return left


def by_label(report: dict) -> dict[str, dict]:
    return {c["check_id"] + (":" + c["aspect"] if c["aspect"] else ""): c for c in report["checks"]}


def test_three_healthy_nodes_train_together(hosts: Hosts, tmp_path: Path) -> None:
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster", "system.shm"])
    results = by_label(leader)
    assert sorted(n["name"] for n in leader["cluster"]["nodes"]) == hosts.names
    assert leader["cluster"]["failed_nodes"] == [] and leader["cluster"]["stragglers"] == []
    assert results["cluster.nodes"]["status"] == "pass"
    assert results["cluster.skew"]["status"] == "pass"
    assert results["cluster.links"]["status"] == "pass"
    assert results["cluster.allreduce"]["status"] == "pass" and "3 nodes" in results["cluster.allreduce"]["summary"]
    assert results["cluster.ddp:params-identical"]["summary"] == "parameters identical on all 3 ranks"
    assert results["cluster.ddp:gradient-matches"]["status"] == "pass"
    assert all(n["checks"][0]["check_id"] == "system.shm" for n in leader["cluster"]["nodes"])
    assert [n.returncode for n in nodes.values()] == [0, 0, 0]
    others = [n for n in nodes.values() if "cluster" not in n.report]
    assert len(others) == 2 and all(n.report["checks"] for n in others), "other nodes write their own {node} file"
    assert no_process_left(hosts, [0, 1, 2]) == []


def test_a_rate_limited_link_is_found_as_the_straggler_and_only_it(hosts: Hosts, tmp_path: Path) -> None:
    hosts.limit(2, "400mbit")
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.links"])
    assert leader["cluster"]["stragglers"] == ["node-2"]
    assert leader["cluster"]["failed_nodes"] == ["node-2"]
    stragglers = by_label(leader)["cluster.links:stragglers"]
    assert [r["node"] for r in stragglers["rows"]] == ["node-2"] and "x the median" in stragglers["summary"]
    assert leader["exit_code"] == 1
    if "cluster" not in nodes["node-2"].report:
        assert nodes["node-2"].returncode == 0, "its own part passed: the cluster report names it"


def test_a_node_killed_mid_run_is_named_and_the_others_finish(hosts: Hosts, tmp_path: Path) -> None:
    def kill_node_2_once_its_workload_runs() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            pids = subprocess.run(["ip", "netns", "pids", hosts.namespace(2)], capture_output=True, text=True)
            commands = [Path(f"/proc/{p}/cmdline") for p in pids.stdout.split()]
            if any(c.exists() and b"gpudoctor.launch" in c.read_bytes() for c in commands):
                hosts.kill(2)
                return
            time.sleep(0.2)
        raise AssertionError("node-2 never started its workload")

    nodes, leader = run(
        hosts,
        tmp_path,
        ["--only", "cluster.allreduce", "--timeout", "120"],
        while_running=kill_node_2_once_its_workload_runs,
    )
    assert leader["cluster"]["failed_nodes"] == ["node-2"]
    lost = {n["name"]: n["lost"] for n in leader["cluster"]["nodes"]}
    assert "stopped answering" in lost["node-2"] and "cluster.allreduce" in lost["node-2"]
    assert by_label(leader)["cluster.allreduce"]["status"] == "error"
    assert "node-2 stopped answering" in by_label(leader)["cluster.allreduce"]["summary"]
    assert leader["exit_code"] == 1
    survivor = next(n for n in nodes.values() if n.name != "node-2" and "cluster" not in n.report)
    assert survivor.returncode == 0, f"a node that only lost a peer is not drained: {survivor.report['checks']}"
    assert no_process_left(hosts, [0, 1]) == []


def test_a_node_with_another_nccl_setting_is_named_as_skew(hosts: Hosts, tmp_path: Path) -> None:
    env = {1: {"NCCL_ALGO": "Tree", "NCCL_SOCKET_IFNAME": "eth0"}, 0: {"NCCL_SOCKET_IFNAME": "=eth0"}}
    args = ["--only", "cluster.skew", "cluster.nodes"]
    nodes, leader = run(hosts, tmp_path, args, launcher="torchrun-static", env=env)
    skew = by_label(leader)["cluster.skew"]
    assert skew["status"] == "warn"
    assert skew["summary"] == "NCCL_ALGO: Tree on node-1; unset on node-0, node-2"
    assert leader["cluster"]["launcher"] == "torchrun" and leader["exit_code"] == 0
    assert "cluster" in nodes["node-0"].report, "static rendezvous: --node-rank 0 is rank 0"


def test_a_node_that_never_joins_is_named_from_the_node_list(hosts: Hosts, tmp_path: Path) -> None:
    started = time.monotonic()
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.nodes"], launcher="srun", start=[0, 1])
    lost = {n["name"]: n["lost"] for n in leader["cluster"]["nodes"]}
    assert lost == {"node-0": None, "node-1": None, "node-2": "never joined within 20 s"}
    assert leader["cluster"]["failed_nodes"] == ["node-2"] and leader["exit_code"] == 1
    assert nodes["node-1"].returncode == 0
    assert time.monotonic() - started < 90
    assert no_process_left(hosts, [0, 1]) == []


def test_a_node_that_hangs_is_named_when_its_time_runs_out(hosts: Hosts, tmp_path: Path) -> None:
    hang = {2: {"GPUDOCTOR_INJECT_FAULT": "rank=2,kind=hang,at=links"}}
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.links", "--timeout", "40"], launcher="srun", env=hang)
    links = by_label(leader)["cluster.links"]
    assert links["status"] == "timeout"
    assert links["summary"].startswith("rank 2 on node-2 (in 'links round 0') never arrived")
    assert leader["cluster"]["failed_nodes"] == ["node-2"]
    assert [nodes[n].returncode for n in ("node-1", "node-2")] == [0, 0], "only rank 0's report drains"
    assert no_process_left(hosts, [0, 1, 2]) == []
