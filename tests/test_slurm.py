"""The Slurm examples under a real Slurm (slurmctld, slurmd and munged from the distribution's packages) on
namespace hosts (tests/helpers/slurmhosts.py), in the environment Slurm gives them: a prolog and a health check with
no PATH and none of the job's GPU variables, a batch script run from slurmd's spool. Each node's GPUs are the
fake libnvidia-ml.so.1 serving a recorded node (healthy, or with a GPU fallen off the bus). Skipped, with
the reason, where Slurm or the namespaces cannot start here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fakenvml
import pytest
from fixtures.nodes import lose_gpu, node
from helpers.common import LEAN_CLUSTER, ROOT, load_snapshot
from helpers.netns import Hosts, HostsUnavailable
from helpers.slurmhosts import Slurm, slurm_or_skip

pytestmark = [pytest.mark.hosts, pytest.mark.slurm]  # one set of namespace hosts at a time (conftest)

EXAMPLES = ROOT / "examples"
HEALTHY = load_snapshot("h100-sxm-8x")["nvml_calls"]
GPU_LOST = node(calls=lose_gpu(3))["nvml_calls"]


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    try:
        return fakenvml.build(tmp_path_factory.mktemp("fakenvml"))
    except fakenvml.FakeLibraryError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def hosts() -> Hosts:
    try:
        made = Hosts(3)
    except HostsUnavailable as exc:
        pytest.skip(str(exc))
    yield made
    made.remove()


def start(hosts: Hosts, library: Path, settings: str = "", bad: tuple[str, ...] = ()) -> Slurm:
    """Slurm's configuration, state and logs in a folder any user can read (a job's user, and the plain
    user who tries to drain, read slurm.conf and reach munge's socket)."""
    folder = Path(tempfile.mkdtemp(prefix="gpudoctor-slurm-"))
    folder.chmod(0o755)
    (folder / "nvml").mkdir()
    for name in hosts.names:
        fakenvml.write_data(GPU_LOST if name in bad else HEALTHY, folder / "nvml" / f"{name}.calls")
    return slurm_or_skip(hosts, folder, library, settings)


@pytest.fixture
def slurm_cleanup():
    made: list[Slurm] = []
    yield made
    for slurm in made:
        slurm.stop()
        shutil.rmtree(slurm.folder, ignore_errors=True)


def job_state(slurm: Slurm, job: str) -> dict[str, str]:
    out = slurm.run("scontrol", "show", "job", job).stdout
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


def wait_job(slurm: Slurm, job: str, limit_s: float = 300) -> dict[str, str]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        state = job_state(slurm, job)
        if state.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") or (
            state.get("JobState") == "PENDING" and "held" in state.get("Reason", "").lower()
        ):
            return state
        time.sleep(1)
    raise AssertionError(f"job {job} still {job_state(slurm, job)}")


def submit(slurm: Slurm, *argv: str, **kwargs) -> str:
    kwargs.setdefault("cwd", slurm.folder)
    proc = slurm.run("sbatch", "--parsable", *argv, **kwargs)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


def test_the_prolog_drains_only_a_bad_node_with_a_tagged_reason(
    hosts: Hosts, tmp_path: Path, library: Path, slurm_cleanup: list
) -> None:
    """Slurm runs the example as its Prolog with no PATH and no job GPU variables: the node's GPU count comes
    from its Gres=gpu:8. node-1 has a GPU fallen off the bus: its job is refused and node-1 drained, tagged."""
    slurm = start(hosts, library, f"Prolog={EXAMPLES / 'slurm-prolog.sh'}", bad=("node-1",))
    slurm_cleanup.append(slurm)
    refused = submit(slurm, "-w", "node-1", "--wrap", "true")
    ran = submit(slurm, "-w", "node-0", "--gpus-per-node=2", "--wrap", "true")
    assert wait_job(slurm, ran)["JobState"] == "COMPLETED", "a healthy node's job runs"
    state = wait_job(slurm, refused)
    assert state["JobState"] == "PENDING" and "held" in state["Reason"].lower(), "requeued, held (Slurm's rule)"
    states = slurm.wait_for(lambda s: "drain" in s["node-1"], "node-1 drained", 30)
    assert states["node-1"][1].startswith("gpudoctor: cause:gpu-lost: GPU 3 fell off the bus")
    assert "drain" not in states["node-0"][0] and "drain" not in states["node-2"][0]


def test_the_health_check_drains_resumes_its_own_and_keeps_an_administrators(
    hosts: Hosts, tmp_path: Path, library: Path, slurm_cleanup: list
) -> None:
    settings = f"HealthCheckProgram={EXAMPLES / 'slurm-healthcheck.sh'}\nHealthCheckInterval=3"
    slurm = start(hosts, library, settings, bad=("node-1",))
    slurm_cleanup.append(slurm)
    slurm.set_state("node-2", "DRAIN", "admin: fan replaced")
    states = slurm.wait_for(lambda s: "drain" in s["node-1"], "node-1 drained", 60)
    assert states["node-1"][1].startswith("gpudoctor: cause:gpu-lost: GPU 3 fell off the bus")
    fakenvml.write_data(GPU_LOST, slurm.folder / "nvml" / "node-2.calls")  # the administrator's node fails too
    fakenvml.write_data(HEALTHY, slurm.folder / "nvml" / "node-1.calls")  # node-1 repaired
    states = slurm.wait_for(lambda s: "drain" not in s["node-1"], "node-1 resumed", 60)
    time.sleep(8)  # two more health checks
    states = slurm.states()
    assert states["node-2"][1] == "admin: fan replaced" and "drain" in states["node-2"][0], "never touched"
    fakenvml.write_data(HEALTHY, slurm.folder / "nvml" / "node-2.calls")
    time.sleep(8)
    assert slurm.states()["node-2"] == states["node-2"], "passing, and still the administrator's to resume"
    assert "drain" not in slurm.states()["node-0"][0]


def test_the_preflight_batch_job_drains_a_slow_node_and_fails(
    hosts: Hosts, tmp_path: Path, library: Path, slurm_cleanup: list
) -> None:
    """sbatch runs a copy of the example from slurmd's spool; the submitter's gpudoctor is on its PATH."""
    hosts.limit(2, "100mbit")
    slurm = start(hosts, library)
    slurm_cleanup.append(slurm)
    submit_dir = tmp_path / "submit"
    submit_dir.mkdir(mode=0o777)
    (submit_dir / "lean.toml").write_text(LEAN_CLUSTER)
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = {"PATH": path, "GLOO_SOCKET_IFNAME": "eth0"}
    argv = ["-N3", "--gpus-per-node=8", str(EXAMPLES / "slurm-preflight.sbatch")]
    job = submit(
        slurm, *argv, "--only", "cluster.nodes", "cluster.links", "--config", "lean.toml", env=env, cwd=submit_dir
    )
    state = wait_job(slurm, job)
    log = (submit_dir / f"slurm-{job}.out").read_text()
    assert state["JobState"] == "FAILED" and state["ExitCode"] == "1:0", log
    assert "Traceback" not in log
    report = json.loads((submit_dir / f"gpudoctor-{job}" / "cluster.json").read_text())
    assert report["cluster"]["failed_nodes"] == ["node-2"]
    assert report["cluster"]["credential"] == "secret"  # the batch script handed every task the run's secret
    assert "drain node-2 (gpudoctor: cluster.links)" in log
    states = slurm.states()
    assert "drain" in states["node-2"][0] and states["node-2"][1] == "gpudoctor: cluster.links"
    assert "drain" not in states["node-0"][0] and "drain" not in states["node-1"][0]
    shared = Path(tempfile.mkdtemp())  # where a plain user can read the report
    shared.chmod(0o755)
    cluster_json = shutil.copy(submit_dir / f"gpudoctor-{job}" / "cluster.json", shared / "cluster.json")
    os.chmod(cluster_json, 0o644)
    denied = slurm.run("gpudoctor", "drain", str(cluster_json), user="nobody", env=env)
    shutil.rmtree(shared)
    assert denied.returncode == 1 and "could not drain node-2" in denied.stdout, denied.stdout + denied.stderr
    assert "Traceback" not in denied.stderr


def test_a_node_whose_gpudoctor_is_killed_is_named_and_leaves_no_process(
    hosts: Hosts, tmp_path: Path, library: Path, slurm_cleanup: list
) -> None:
    slurm = start(hosts, library)
    slurm_cleanup.append(slurm)
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "GLOO_SOCKET_IFNAME": "eth0"}
    argv = ["srun", "-N3", "--ntasks-per-node=1", "--kill-on-bad-exit=0", "gpudoctor", "check"]
    argv += ["--only", "cluster.allreduce", "--timeout", "60", "--json", "-o", f"{out}/{{node}}.json"]
    command = ["ip", "netns", "exec", hosts.namespace(0), *argv]
    srun = subprocess.Popen(command, env={**os.environ, **slurm.env, **env}, stdout=subprocess.PIPE, text=True)
    killed = kill_gpudoctor_once_its_workload_runs(hosts, 2)
    stdout, _ = srun.communicate(timeout=400)
    report = json.loads(stdout)
    assert report["cluster"]["failed_nodes"] == ["node-2"]
    lost = {n["name"]: n["lost"] for n in report["cluster"]["nodes"]}
    assert "stopped answering" in lost["node-2"]
    assert gpudoctor_processes(hosts, 2) == [], f"children of the killed gpudoctor {killed} outlived it"


def kill_gpudoctor_once_its_workload_runs(hosts: Hosts, i: int) -> int:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = gpudoctor_processes(hosts, i)
        if any(b"gpudoctor.workloads.launch" in cmd for _, cmd in found):
            main = next(pid for pid, cmd in found if b"gpudoctor\x00check" in cmd)
            os.kill(main, 9)
            time.sleep(5)
            return main
        time.sleep(0.2)
    raise AssertionError("node-2 never started its workload")


def gpudoctor_processes(hosts: Hosts, i: int) -> list[tuple[int, bytes]]:
    found = []
    for pid in hosts.pids_of(i):
        path = Path(f"/proc/{pid}/cmdline")
        try:
            cmd = path.read_bytes()
        except OSError:
            continue
        if b"gpudoctor" in cmd and b"slurmstepd" not in cmd:
            found.append((pid, cmd))
    return found
