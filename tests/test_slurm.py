"""The Slurm examples under a real Slurm (slurmctld, slurmd and munged from the distribution's packages) on
namespace hosts (tests/helpers/slurmhosts.py), in the environment Slurm gives them: a prolog and a health check with
no PATH and none of the job's GPU variables, a batch script run from slurmd's spool. Each node's GPUs are the
fake libnvidia-ml.so.1 serving a recorded node (healthy, or with a GPU fallen off the bus). Skipped, with
the reason, where Slurm or the namespaces cannot start here."""

from __future__ import annotations

import json
import os
import re
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
    from its Gres=gpu:8. node-1 and node-2 have a GPU fallen off the bus: a one-node job on node-1, and then a
    two-node job on node-0 and node-2, are refused, and only the failing node of each drained, tagged."""
    slurm = start(hosts, library, f"Prolog={EXAMPLES / 'slurm-prolog.sh'}", bad=("node-1", "node-2"))
    slurm_cleanup.append(slurm)
    since = time.time()
    refused = submit(slurm, "--nodes=1", "-w", "node-1", "--wrap", "true")
    ran = submit(slurm, "-w", "node-0", "--gpus-per-node=2", "--wrap", "true")
    assert wait_job(slurm, ran)["JobState"] == "COMPLETED", "a healthy node's job runs"
    state = wait_job(slurm, refused)
    assert state["JobState"] == "PENDING" and "held" in state["Reason"].lower(), "requeued, held (Slurm's rule)"
    states = slurm.wait_for(lambda s: "drain" in s["node-1"], "node-1 drained", 300)
    assert states["node-1"][1].startswith("gpudoctor: cause:gpu-lost: GPU 3 fell off the bus")
    assert "drain" not in states["node-0"][0] and "drain" not in states["node-2"][0]
    both = submit(slurm, "-N2", "-w", "node-0,node-2", "--wrap", "srun true")  # node-2's first step
    state = wait_job(slurm, both)
    assert state["JobState"] == "PENDING" and "held" in state["Reason"].lower()
    states = slurm.wait_for(lambda s: "drain" in s["node-2"], "node-2 drained", 300)
    assert states["node-2"][1].startswith("gpudoctor: cause:gpu-lost") and "drain" not in states["node-0"][0]
    for name, job in (("node-1", refused), ("node-0", both), ("node-2", both)):  # where the example keeps them
        report = Path("/var/log/gpudoctor") / f"{name}-{job}.json"
        assert report.stat().st_mtime >= since and json.loads(report.read_text())["node"] == name


def test_the_health_check_drains_resumes_its_own_and_keeps_an_administrators(
    hosts: Hosts, tmp_path: Path, library: Path, slurm_cleanup: list
) -> None:
    settings = f"HealthCheckProgram={EXAMPLES / 'slurm-healthcheck.sh'}\nHealthCheckInterval=3"
    slurm = start(hosts, library, settings, bad=("node-1",))
    slurm_cleanup.append(slurm)
    slurm.set_state("node-2", "DRAIN", "admin: fan replaced")
    states = slurm.wait_for(lambda s: "drain" in s["node-1"], "node-1 drained", 300)
    assert states["node-1"][1].startswith("gpudoctor: cause:gpu-lost: GPU 3 fell off the bus")
    fakenvml.write_data(GPU_LOST, slurm.folder / "nvml" / "node-2.calls")  # the administrator's node fails too
    fakenvml.write_data(HEALTHY, slurm.folder / "nvml" / "node-1.calls")  # node-1 repaired
    states = slurm.wait_for(lambda s: "drain" not in s["node-1"], "node-1 resumed", 300)
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


def test_the_preflight_on_one_node_and_on_two_writes_each_nodes_report_and_drains_the_failed_one(
    hosts: Hosts, tmp_path: Path, library: Path, slurm_cleanup: list
) -> None:
    """`sbatch --nodes=1`, the commonest job, is a world of one: no cluster run, and `{node}` was left as it
    was, and `gpudoctor drain` refused the node's report. On one node and then on two (in the same Slurm), each
    node writes <node>.json and the node whose GPU fell off the bus is drained, tagged; the healthy one is not.
    The job runs the node-wide gpudoctor (GPUDOCTOR), whose stand-in driver serves each node's GPUs."""
    slurm = start(hosts, library, bad=("node-1", "node-2"))
    slurm_cleanup.append(slurm)
    submit_dir = tmp_path / "submit"
    submit_dir.mkdir(mode=0o777)
    (submit_dir / "lean.toml").write_text(LEAN_CLUSTER)
    env = {"PATH": os.environ["PATH"], "GPUDOCTOR": "/opt/gpudoctor/bin/gpudoctor", "GLOO_SOCKET_IFNAME": "eth0"}
    preflight = [str(EXAMPLES / "slurm-preflight.sbatch"), "--only", "health", "driver", "--config", "lean.toml"]

    one = submit(slurm, "--nodes=1", "-w", "node-1", "--gpus-per-node=8", *preflight, env=env, cwd=submit_dir)
    reports, log = preflight_done(slurm, one, submit_dir)
    assert sorted(reports) == ["cluster.json", "node-1.json"], log
    assert reports["node-1.json"]["node"] == "node-1" and reports["node-1.json"]["exit_code"] == 1
    assert "cluster" not in reports["cluster.json"], "a world of one writes its node's own report"
    assert "drain node-1 (gpudoctor: cause:gpu-lost" in log
    assert slurm.states()["node-1"][1].startswith("gpudoctor: cause:gpu-lost")

    two = submit(slurm, "-N2", "-w", "node-0,node-2", "--gpus-per-node=8", *preflight, env=env, cwd=submit_dir)
    reports, log = preflight_done(slurm, two, submit_dir)
    assert sorted(reports) == ["cluster.json", "node-0.json", "node-2.json"], log
    assert reports["cluster.json"]["cluster"]["failed_nodes"] == ["node-2"]
    assert "drain node-2 (gpudoctor: cause:gpu-lost" in log
    states = slurm.states()
    assert states["node-2"][1].startswith("gpudoctor: cause:gpu-lost") and "drain" in states["node-2"][0]
    assert "drain" not in states["node-0"][0] and states["node-1"] == ("drained", states["node-1"][1])


def preflight_done(slurm: Slurm, job: str, submit_dir: Path) -> tuple[dict[str, dict], str]:
    """The reports a failed pre-flight job left (file name -> document) and its log."""
    state = wait_job(slurm, job)
    log = (submit_dir / f"slurm-{job}.out").read_text()
    assert state["JobState"] == "FAILED" and state["ExitCode"] == "1:0", log
    assert "Traceback" not in log
    return {p.name: json.loads(p.read_text()) for p in (submit_dir / f"gpudoctor-{job}").iterdir()}, log


HOOKS = ("prolog", "healthcheck")


@pytest.mark.parametrize("hook", HOOKS)
def test_a_hook_whose_gpudoctor_fails_or_is_missing_lets_the_job_start_and_tells_monitoring(
    tmp_path: Path, hook: str
) -> None:
    """gpudoctor exiting 3 (an internal error: the uninstallable wheel did that on every node) or not
    installed: the hook exits 0, as it may, but leaves a syslog line (tag gpudoctor) and gpudoctor_up 0 in the
    textfile folder; once gpudoctor runs again, gpudoctor_up is 1. Run as Slurm runs it, with no PATH: its own
    PATH finds the stand-ins bound over /usr/local/sbin (logger records its arguments)."""
    folder = hook_stand_ins(tmp_path)
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    fake = tmp_path / "gpudoctor"
    env = {"GPUDOCTOR": str(fake), "GPUDOCTOR_TEXTFILE_DIR": str(textfiles), "GPUDOCTOR_REPORTS": str(tmp_path)}
    env |= {"SLURMD_NODENAME": "node-9", "SLURM_JOB_ID": "7"}
    calls = tmp_path / "logger.calls"
    logged = []  # the syslog lines so far, after each run
    for exit_code, up in ((3, 0), (None, 0), (0, 1)):
        if exit_code is None:
            fake.unlink()
        else:
            fake.write_text(f"#!/bin/sh\necho 'GPUDOCTOR: ok'\nexit {exit_code}\n")
            fake.chmod(0o755)
        proc = run_hook(EXAMPLES / f"slurm-{hook}.sh", folder, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        samples = prom_samples(textfiles / f"gpudoctor-{hook}.prom")
        assert samples == {("gpudoctor_up", (("hook", hook),)): up}, exit_code
        logged.append(calls.read_text().splitlines() if calls.exists() else [])
    assert len(logged[0]) == 1 and logged[0][0].startswith("-t gpudoctor ") and "gpudoctor exited 3" in logged[0][0]
    assert len(logged[1]) == 2 and "gpudoctor is not installed" in logged[1][1]
    assert all("node not checked" in line for line in logged[1])
    assert logged[2] == logged[1], "a working gpudoctor is not logged"
    shared = (EXAMPLES / "gpudoctor-slurm-hooks.sh").read_text()  # what both hooks source
    texts = [(EXAMPLES / f"slurm-{h}.sh").read_text() + shared for h in HOOKS]
    helps = {re.search(r"# HELP gpudoctor_up [^\"']*", text)[0] for text in texts}
    assert len(helps) == 1, "node_exporter refuses a family whose files give it two HELP texts"


def hook_stand_ins(tmp_path: Path) -> Path:
    """logger recording its arguments, sinfo and scontrol knowing no node (no Slurm runs here)."""
    folder = tmp_path / "sbin"
    folder.mkdir()
    (folder / "logger").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/logger.calls\n')
    (folder / "sinfo").write_text("#!/bin/sh\nexit 0\n")
    (folder / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return folder


def run_hook(script: Path, stand_ins: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`script` in a mount namespace of its own, with `stand_ins` over /usr/local/sbin (first on the PATH the
    hooks set) and an empty folder over /usr/local/bin (where no other gpudoctor may be found)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a mount namespace needs root and unshare")
    empty = stand_ins.parent / "empty"
    empty.mkdir(exist_ok=True)
    bind = f"mount --bind {stand_ins} /usr/local/sbin && mount --bind {empty} /usr/local/bin && exec /bin/bash {script}"
    argv = [shutil.which("unshare"), "--mount", "/bin/sh", "-c", bind]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def prom_samples(path: Path) -> dict[tuple[str, tuple], float]:
    """A textfile's samples as node_exporter's collector reads them (name and labels -> value)."""
    from prometheus_client.parser import text_string_to_metric_families

    families = text_string_to_metric_families(path.read_text())
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


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
