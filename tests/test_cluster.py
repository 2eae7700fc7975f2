"""Cluster mode for real: hosts are network namespaces made here (tests/helpers/netns.py), one gpudoctor per host
started by torchrun (c10d or static rendezvous) or with the environment srun gives, gloo between them. A
healthy cluster on a busy machine that names no node (one node through the Python API); one slow node of
three and two adjacent slow nodes of five, rate-limited both ways with tc, named and drained and told so; a
host killed mid-run; a host with another NCCL setting; a host that never joins; a host that hangs.
The judges run with their default fractions: these hosts share two cores, and the noise allowance they
measure is what keeps a healthy host from being named. Skipped, with the reason, where namespaces cannot
be made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
from helpers.common import LEAN_CLUSTER
from helpers.consumers import scrape
from helpers.netns import Hosts, HostsUnavailable

from gpudoctor.registry import discover
from gpudoctor.report import document as doc

# One set of namespace hosts at a time (they share two cores): the `hosts` lock in conftest.
pytestmark = pytest.mark.hosts

SLOW = "100mbit"  # about 80 times slower than gloo between these hosts


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


# One node of a cluster run through the Python API: it prints nothing but writes its report where told.
API_NODE = """
import json, sys
from gpudoctor import probe
report = probe.run(only=sys.argv[2:], config=sys.argv[1], cluster=True)
open(sys.argv[1].replace("cluster.toml", f"out/api-{report.document['host']}.json"), "w").write(
    json.dumps(report.document))
sys.exit(report.exit_code)
"""


def run(
    hosts: Hosts,
    tmp_path: Path,
    args: list[str],
    launcher: str = "srun",
    env: dict[int, dict[str, str]] | None = None,
    start: list[int] | None = None,
    while_running: object = None,
    api: tuple[int, ...] = (),
    limit_s: float = 420,
    tasks: int | None = None,
) -> tuple[dict[str, Node], dict]:
    """Start gpudoctor on the hosts (the ones in `api` through the Python API), wait for all, and return each
    node and rank 0's cluster report."""
    config = tmp_path / "cluster.toml"
    config.write_text(LEAN_CLUSTER)
    out = tmp_path / "out"
    out.mkdir()
    files = ["--json", "-o", str(out / "{node}.json"), "--prom-file", str(out / "{node}.prom")]
    argv = ["check", *args, "--config", str(config), *files]
    procs = {}
    for i in start if start is not None else range(len(hosts.names)):
        node_env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "NO_COLOR": "1", **(env or {}).get(i, {})}
        if launcher.startswith("torchrun"):
            command = torchrun(hosts, i, argv, static=launcher == "torchrun-static")
        else:
            node_env.update(srun_env(hosts, i, tasks or len(hosts.names)))
            command = [str(Path(sys.executable).with_name("gpudoctor")), *argv]
        if i in api:
            only = args[args.index("--only") + 1 :]
            command = [sys.executable, "-c", API_NODE, str(config), *only]
        procs[i] = hosts.start(i, command, node_env, tmp_path / f"{hosts.names[i]}.log")
    if callable(while_running):
        while_running()
    deadline = time.monotonic() + limit_s
    for proc in procs.values():
        proc.wait(timeout=max(1, deadline - time.monotonic()))
    nodes = {}
    for i, proc in procs.items():
        name = hosts.names[i]
        path = out / (f"api-{name}.json" if i in api else f"{name}.json")
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


def verdict(node: Node) -> dict:
    return next(c for c in node.report["checks"] if c["check_id"] == "cluster.verdict")


@pytest.mark.parametrize(
    "busy",
    [
        False,
        # 145 s on CI's 2 cores; the eight nodes sharing them (the budget test) are the default run's noisy case
        pytest.param(True, marks=pytest.mark.slow),
    ],
    ids=["idle", "busy"],
)
def test_three_healthy_nodes_on_a_busy_machine_train_together_and_none_is_named(
    hosts: Hosts, tmp_path: Path, busy: bool
) -> None:
    """The issue's case: three healthy nodes on a busy machine named node1 a straggler from noisy figures.
    Busy, a process keeps the cores busy whenever the nodes leave them idle; one node runs through the Python API
    (probe.run(cluster=True): cluster mode is a library function); rank 0's Prometheus file goes to
    node_exporter."""
    # Niced: it takes what the nodes leave, as another user's job does, and never starves the run it disturbs.
    work = "import os\nos.nice(19)\nwhile True: pass" if busy else "import time\ntime.sleep(3600)"
    burner = subprocess.Popen([sys.executable, "-c", work])
    try:
        nodes, leader = run(hosts, tmp_path, ["--only", "cluster", "system.shm"], api=(1,), limit_s=600)
    finally:
        burner.kill()
        burner.wait()
    results = by_label(leader)
    cluster = leader["cluster"]
    assert sorted(n["name"] for n in cluster["nodes"]) == hosts.names
    assert cluster["failed_nodes"] == [] and cluster["stragglers"] == [] and cluster["links"] == []
    # A suspect the re-test cleared is unconfirmed: a warning in its node's verdict, never a failure or a drain.
    verdicts = {n["name"]: (n["verdict"]["status"], n["verdict"]["findings"]) for n in cluster["nodes"]}
    assert all(status in ("pass", "warn") for status, _ in verdicts.values()), verdicts
    assert cluster["unconfirmed"] == sorted(n for n, (status, _) in verdicts.items() if status == "warn"), verdicts
    assert results["cluster.nodes"]["status"] == "pass"
    assert results["cluster.skew"]["status"] == "pass"
    assert results["cluster.links"]["status"] in ("pass", "warn"), "warn only: unstable, or unconfirmed"
    links = results["cluster.links"]
    assert "noise allowance" in links["summary"] + (links["detail"] or ""), (
        "the allowance is told, in the detail when named"
    )
    assert results["cluster.allreduce"]["status"] == "pass" and "3 nodes" in results["cluster.allreduce"]["summary"]
    assert results["cluster.allreduce:per-node"]["status"] in ("pass", "warn")
    assert results["cluster.ddp:params-identical"]["summary"] == "parameters identical on all 3 ranks"
    assert results["cluster.ddp:gradient-matches"]["status"] == "pass"
    assert results["cluster.ddp:per-node"]["status"] in ("pass", "warn")
    assert all(n["checks"][0]["check_id"] == "system.shm" for n in cluster["nodes"])
    assert [n.returncode for n in nodes.values()] == [0, 0, 0]
    api_node = nodes["node-1"]
    assert "cluster" not in api_node.report  # told rank 0's verdict on it, whichever that was (pass, or unconfirmed)
    assert verdict(api_node)["status"] == verdicts["node-1"][0]
    assert "gpudoctor: node-1" not in api_node.log, "the library prints nothing"
    assert no_process_left(hosts, [0, 1, 2]) == []
    # Rank 0's Prometheus file: every series of a node's own checks carries the node, so none overwrites another.
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    shutil.copy(tmp_path / "out" / "node-0.prom", textfile / "gpudoctor.prom")
    scraped = scrape(textfile).splitlines()
    assert "node_textfile_scrape_error 0" in scraped
    for name in hosts.names:
        assert f'gpudoctor_check_status{{aspect="",check="system.shm",node="{name}",status="pass"}} 1' in scraped


@pytest.mark.slow  # the Slurm pre-flight test names and drains a slow node in the `not slow` run
def test_one_slow_node_of_three_is_named_drained_and_told(hosts: Hosts, tmp_path: Path) -> None:
    """The issue's case: node-2 limited both ways to 100 Mbit/s; the median of transfers was the slow rate and
    no node was named. Its own exit code and Prometheus file now carry rank 0's verdict."""
    hosts.limit(2, SLOW)
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.links", "cluster.allreduce"])
    cluster = leader["cluster"]
    assert cluster["failed_nodes"] == ["node-2"] and cluster["stragglers"] == ["node-2"]
    per_node = by_label(leader)["cluster.allreduce:per-node"]
    assert [r["node"] for r in per_node["rows"] if r["status"] == "fail"] == ["node-2"], (
        "the pair all-reduce too",
        per_node["summary"],
        [(r["node"], r["status"], r["summary"]) for r in per_node["rows"]],
    )
    assert cluster["unconfirmed"] == [] and cluster["links"] == []
    row = next(r for r in by_label(leader)["cluster.links"]["rows"] if r["node"] == "node-2")
    assert row["status"] == "fail" and row["confirmed"] is True and "re-tested against node-" in row["summary"], (
        row["summary"],
        row["metrics"][0]["expected_source"],
    )
    (figure,) = row["metrics"]
    assert "noise allowance" in figure["expected_source"] and figure["value"] < 0.5 * figure["expected"]
    assert cluster["findings"][0]["node"] == "node-2"
    assert leader["exit_code"] == 1
    others = {n.name: n for n in nodes.values() if "cluster" not in n.report}
    if "node-2" in others:
        assert others["node-2"].returncode == 1 and verdict(others["node-2"])["status"] == "fail"
        told = next(line for line in others["node-2"].log.splitlines() if "names this node (drain it): " in line)
        assert "cluster.links: " in told and "cluster.allreduce: " in told, told  # worst first: either may lead
        prom = (tmp_path / "out" / "node-2.prom").read_text()
        assert 'gpudoctor_check_status{aspect="",check="cluster.verdict",status="fail"} 1.0' in prom
    healthy = next(n for name, n in others.items() if name != "node-2")
    assert healthy.returncode == 0 and verdict(healthy)["status"] == "pass"


@pytest.mark.slow  # the one-slow-node case and the Slurm pre-flight name a slow node in the `not slow` run
@pytest.mark.parametrize("hosts", [5], indirect=True)
def test_two_adjacent_slow_nodes_of_five_are_both_named(hosts: Hosts, tmp_path: Path) -> None:
    """The issue's case: node-2 and node-3, ring neighbours, both slow; 6 of 10 ring transfers touched them."""
    hosts.limit(2, SLOW)
    hosts.limit(3, SLOW)
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.links"])
    cluster = leader["cluster"]
    assert cluster["failed_nodes"] == ["node-2", "node-3"]
    # A healthy node may be slow once in the first look with five hosts on two cores (the clean-clone runs saw
    # node-0 so, at load 2-9): it is then unconfirmed, a warning that is never drained, and its exit stays 0.
    assert cluster["links"] == []
    assert {n.name: n.returncode for n in nodes.values()} == {
        "node-0": 1,
        "node-1": 0,
        "node-2": 1,
        "node-3": 1,
        "node-4": 0,
    }, "rank 0 exits 1 for the cluster; each other node by rank 0's verdict about it"


@pytest.mark.slow  # the Slurm test kills a node's gpudoctor in the `not slow` run
def test_a_node_killed_mid_run_is_named_and_the_others_finish(hosts: Hosts, tmp_path: Path) -> None:
    def kill_node_2_once_its_workload_runs() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            pids = subprocess.run(["ip", "netns", "pids", hosts.namespace(2)], capture_output=True, text=True)
            commands = [Path(f"/proc/{p}/cmdline") for p in pids.stdout.split()]
            if any(c.exists() and b"gpudoctor.workloads.launch" in c.read_bytes() for c in commands):
                hosts.kill(2)
                return
            time.sleep(0.2)
        raise AssertionError("node-2 never started its workload")

    nodes, leader = run(
        hosts,
        tmp_path,
        ["--only", "cluster.allreduce", "--timeout", "60"],
        launcher="torchrun",
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


def test_a_node_whose_bits_differ_from_its_peers_is_named_with_the_operation_and_element(
    hosts: Hosts, tmp_path: Path
) -> None:
    """cluster.sdc: node-2's rank flips one bit of one GEMM's output (the test hook, every repeat: wrong the same way
    every time); rank 0 names node-2 with the rank, the operation and the element, and drains it; the two nodes
    that agree are not named."""
    fault = {2: {"GPUDOCTOR_INJECT_FAULT": "rank=2,kind=corrupt,at=sdc gemm-bf16"}}
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.sdc"], env=fault)
    result = by_label(leader)["cluster.sdc"]
    rows = {row["node"]: row for row in result["rows"]}
    assert result["status"] == "fail" and leader["cluster"]["failed_nodes"] == ["node-2"], result
    assert rows["node-2"]["summary"].startswith("rank 2: gemm-bf16 (repeat 0): not the bits of the majority")
    assert "first at element [" in rows["node-2"]["summary"] and "128 ULPs" in rows["node-2"]["summary"]
    assert [rows[n]["status"] for n in ("node-0", "node-1")] == ["pass", "pass"]
    assert result["remediation"]["commands"][0].startswith("scontrol update NodeName=node-2 State=DRAIN")
    assert "--case gemm-bf16" in result["remediation"]["commands"][1]
    assert [nodes[n].returncode for n in hosts.names] == [1, 0, 1], "node-2 learns it is named"


@pytest.mark.slow  # a node lost to rank 0 is named in the `not slow` run (the Slurm killed-node test)
def test_a_node_that_never_joins_is_named_from_the_node_list(hosts: Hosts, tmp_path: Path) -> None:
    """Rank 0 gives up on it at its own join deadline (20 s, which the node's entry names), not waiting without
    end: run()'s 420 s is only a guard against a hang."""
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.nodes"], start=[0, 1])
    lost = {n["name"]: n["lost"] for n in leader["cluster"]["nodes"]}
    assert lost == {"node-0": None, "node-1": None, "node-2": "never joined within 20 s"}
    assert leader["cluster"]["failed_nodes"] == ["node-2"] and leader["exit_code"] == 1
    assert nodes["node-1"].returncode == 0
    assert no_process_left(hosts, [0, 1]) == []


@pytest.mark.slow  # the all-reduce hang tests name a hung rank in the `not slow` run
def test_a_node_that_hangs_is_named_with_the_time_it_took(hosts: Hosts, tmp_path: Path) -> None:
    hang = {2: {"GPUDOCTOR_INJECT_FAULT": "rank=2,kind=hang,at=links"}}
    nodes, leader = run(hosts, tmp_path, ["--only", "cluster.links", "--timeout", "40"], env=hang)
    links = by_label(leader)["cluster.links"]
    assert links["status"] == "timeout"
    assert links["summary"].startswith("rank 2 on node-2 (in 'links probe round 0') never arrived")
    assert "the workload gave up after" in links["summary"]
    assert leader["cluster"]["failed_nodes"] == ["node-2"]
    assert nodes["node-1"].returncode == 0, "a node that only waited for the hung one is not drained"
    assert nodes["node-2"].returncode == 1, "the hung node learns it is named"
    assert no_process_left(hosts, [0, 1, 2]) == []


# A stranger on another host, without the run's credential: everything it can try against rank 0's store.
STRANGER = """
import json, sys, time
from datetime import timedelta
from torch.distributed import TCPStore
store = TCPStore(sys.argv[1], int(sys.argv[2]), None, False, timedelta(seconds=30))
public = "gpudoctor/slurm.4242.0/"
failing = {"name": "node-1", "rank": 1, "status": "fail", "exit_code": 1, "checks": [], "failing": ["health.ecc"]}
forged = {
    "join/1": {"name": "node-1"}, "join/2": [], "report/1": failing, "beat/1": 1, "verdict/0": {"status": "fail"},
    "verdict/1": {"status": "bogus"}, "plan/cluster.links/0": {"done": True}, "end": True,
}
seen, readable, prefixes = [], [], set()
deadline = time.monotonic() + float(sys.argv[3])
rounds = 0
try:
    while time.monotonic() < deadline:
        for key in store.list_keys():  # TCPStore names every key it holds, the run's own among them
            if key.startswith("gpudoctor/slurm.4242.0.") and "/" in key[len(public):]:
                prefixes.add(key[: key.index("/", len(public)) + 1])
                value = store.get(key).decode(errors="replace")
                if "/arrived/" not in key and ("node-" in value or "status" in value):
                    readable.append(key)
        for key, value in forged.items():
            store.set(public + key, json.dumps(value))
        for topic in ("join", "report", "ready/cluster.links/0", "outcome/cluster.links/0"):
            store.append(public + "arrived/" + topic, "1,junk,7,")
        for key in ("report/0", "join/0", "beat/0", "at/0"):
            if store.check([public + key]):
                seen.append(key)
        rounds += 1
        time.sleep(0.05)
except Exception:  # the run ended and its store with it
    pass
print(json.dumps({"rounds": rounds, "seen": sorted(set(seen)), "readable": readable, "prefixes": len(prefixes)}))
"""


def stranger_run(hosts: Hosts, tmp_path: Path) -> tuple[dict[str, Node], dict, dict]:
    """Two nodes under srun with the run's secret, and a stranger on a third host."""
    secret = {"GPUDOCTOR_RUN_SECRET": "a secret only the launcher handed out"}
    log = tmp_path / "stranger.log"

    argv = [sys.executable, "-c", STRANGER, hosts.address(0), "29742", "25"]
    hosts.start(2, argv, {**os.environ}, log)  # first, so that it is at the store from the moment it opens
    args = ["--only", "cluster.nodes", "cluster.links"]
    nodes, leader = run(hosts, tmp_path, args, env={0: secret, 1: secret}, start=[0, 1], tasks=2)
    time.sleep(1)
    for proc in hosts.procs:
        proc.wait(timeout=60)
    return nodes, leader, json.loads(log.read_text().strip().splitlines()[-1])


def test_a_stranger_without_the_credential_is_believed_by_nobody(hosts: Hosts, tmp_path: Path) -> None:
    """A stranger posts a failing report and a join for node-1, verdicts, a forged plan and the end of the run,
    junk in every arrival list, all the run long, and reads every key TCPStore lists. Nothing of it is
    believed, nothing is read, and the run finishes as if it were not there."""
    nodes, leader, said = stranger_run(hosts, tmp_path)
    assert leader["cluster"]["credential"] == "secret"
    assert leader["cluster"]["failed_nodes"] == [] and leader["exit_code"] == 0
    assert [n["name"] for n in leader["cluster"]["nodes"]] == ["node-0", "node-1"]
    assert verdict(nodes["node-1"])["status"] == "pass" and nodes["node-1"].returncode == 0
    assert by_label(leader)["cluster.links"]["status"] in ("pass", "warn")  # measured; a noisy figure may warn
    assert leader["cluster"]["stragglers"] == []
    assert said["rounds"] >= 5 and said["seen"] == [], "the stranger tried all run long under the public prefix"
    assert said["prefixes"] == 1 and said["readable"] == [], "it found the run's keys and read none of them"


@pytest.mark.parametrize("hosts", [2], indirect=True)
def test_the_torchrun_example_seals_with_the_secret_file_it_reads(hosts: Hosts, tmp_path: Path) -> None:
    """examples/torchrun-two-nodes.sh as its header says to run it, on both hosts, with the secret file a
    shared home holds: the nodes' messages are sealed with it."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gpudoctor-secret").write_text("a secret on a shared home, made once\n")
    (home / ".gpudoctor-secret").chmod(0o600)
    config = tmp_path / "cluster.toml"
    config.write_text(LEAN_CLUSTER)
    out = tmp_path / "out"
    out.mkdir()
    example = Path(__file__).parents[1] / "examples" / "torchrun-two-nodes.sh"
    args = ["--only", "cluster.nodes", "--config", str(config), "--json", "-o", str(out / "{node}.json")]
    env = {**os.environ, "HOME": str(home), "RDZV": f"{hosts.address(0)}:29400", "GLOO_SOCKET_IFNAME": "eth0",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # fmt: skip
    procs = [hosts.start(i, ["bash", str(example), *args], env, tmp_path / f"{i}.log") for i in range(2)]
    for proc in procs:
        proc.wait(timeout=300)
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    leader = next(r for r in reports if "cluster" in r)
    assert [p.returncode for p in procs] == [0, 0], [(tmp_path / f"{i}.log").read_text()[-800:] for i in range(2)]
    assert leader["cluster"]["credential"] == "secret" and leader["cluster"]["failed_nodes"] == []


@pytest.mark.parametrize("hosts", [8], indirect=True)
def test_eight_nodes_plan_within_their_budget_and_none_cut_short_is_named_slow(hosts: Hosts, tmp_path: Path) -> None:
    """`--level standard --budget 15` on 8 hosts sharing two cores: what each node's engine decided, whatever the
    machine's load: every workload that ran finished inside the budget (planned within the time left, and run to
    its end), every one left out says the budget; rank 0 writes the cluster's report; what the budget left out
    is named, never a node. The runs' time against the budget is bench/budget.py's (docs/BENCHMARKS.md)."""
    budget = 15.0
    args = ["--level", "standard", "--budget", f"{budget:g}", "--skip", "driver", "health"]  # no driver here
    nodes, leader = run(hosts, tmp_path, args)
    live = {spec.id for spec in discover(entry_points=False).specs if "live" in spec.needs}
    for name, node in nodes.items():
        workloads = [c for c in node.report["checks"] if c["check_id"] in live]
        assert all(c["status"] in ("pass", "skip", "warn") for c in workloads), (name, workloads)
        ran = [c for c in workloads if c["status"] != "skip"]
        assert all(0 < c["duration_s"] < budget for c in ran), (name, ran)
    cluster = leader["cluster"]
    assert cluster["failed_nodes"] == [] and cluster["stragglers"] == [], cluster
    assert {n.returncode for n in nodes.values()} == {0}, {n.name: n.log[-300:] for n in nodes.values()}
    cross = [c for c in leader["checks"] if c["check_id"].startswith("cluster.") and c["check_id"] != "cluster.nodes"]
    assert all(c["status"] in ("pass", "skip", "warn") for c in cross), cross
    assert all("budget" in c["summary"] for c in cross if c["status"] == "skip"), cross
