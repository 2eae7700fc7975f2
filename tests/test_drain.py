"""`gpudoctor drain REPORT`: drains what rank 0 named (tagged "gpudoctor:"), never a node an administrator
holds, resumes only what gpudoctor drained, and says so in one line when it may not or cannot; against
stand-ins for sinfo and scontrol on the PATH that record their calls. Under a real Slurm: tests/test_slurm.py."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.common import gpudoctor
from helpers.drainreport import cluster_report, slurm_stand_ins

from gpudoctor.checks import cluster as checks
from gpudoctor.model import Result, Status
from gpudoctor.report import document as doc

STATES = (
    "n0|idle|none\\nn1|idle|none\\nn2|allocated|none\\n"
    "n3|drained|gpudoctor: health.xid\\nn4|drained|admin: fan replaced\\n"
)


def test_drains_the_named_resumes_its_own_and_keeps_an_administrators(tmp_path: Path) -> None:
    report = cluster_report(tmp_path)
    env, calls = slurm_stand_ins(tmp_path, STATES)
    proc = gpudoctor("drain", str(report), env=env)
    assert proc.returncode == 0, proc.stderr
    assert calls.read_text().splitlines() == [
        "update NodeName=n1 State=DRAIN Reason=gpudoctor: lost: never joined within 20 s",
        "update NodeName=n2 State=DRAIN Reason=gpudoctor: cluster.links",
        "update NodeName=n3 State=RESUME",
    ], "n4 is an administrator's: not resumed"
    assert "resume n3 (gpudoctor drained it; it passes now)" in proc.stdout


def test_an_administrators_drain_of_a_failed_node_is_kept(tmp_path: Path) -> None:
    report = cluster_report(tmp_path)
    env, calls = slurm_stand_ins(tmp_path, STATES.replace("n2|allocated|none", "n2|drained|admin: PSU swap"))
    proc = gpudoctor("drain", str(report), env=env)
    assert "update NodeName=n2" not in calls.read_text()
    assert "leave n2 as it is: an administrator holds it (admin: PSU swap)" in proc.stdout


def test_dry_run_prints_the_commands_and_runs_none(tmp_path: Path) -> None:
    report = cluster_report(tmp_path)
    env, calls = slurm_stand_ins(tmp_path, STATES)
    proc = gpudoctor("drain", str(report), "--dry-run", env=env)
    assert proc.returncode == 0 and not calls.exists()
    assert "scontrol update NodeName=n2 State=DRAIN 'Reason=gpudoctor: cluster.links'" in proc.stdout


def test_without_the_right_it_says_it_could_not_and_fails(tmp_path: Path) -> None:
    report = cluster_report(tmp_path)
    env, _ = slurm_stand_ins(tmp_path, STATES, scontrol_fails="slurm_update error: Invalid user id")
    proc = gpudoctor("drain", str(report), env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "could not drain n2 (gpudoctor: cluster.links): slurm_update error: Invalid user id" in proc.stdout


@pytest.mark.parametrize("dry_run", [False, True])
def test_sinfo_failing_is_one_line_even_dry(tmp_path: Path, dry_run: bool) -> None:
    report = cluster_report(tmp_path)
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "sinfo").write_text("#!/bin/sh\necho 'sinfo: error: Unable to contact slurm controller' >&2\nexit 1\n")
    (folder / "sinfo").chmod(0o755)
    proc = gpudoctor("drain", str(report), *(["--dry-run"] if dry_run else []), env={"PATH": f"{folder}:/usr/bin:/bin"})
    assert "Traceback" not in proc.stderr
    assert "Unable to contact slurm controller" in proc.stderr
    if dry_run:
        assert proc.returncode == 0 and "State=DRAIN" in proc.stdout
    else:
        assert proc.returncode == 2 and proc.stderr.strip().endswith("nothing drained")


@pytest.mark.parametrize("text", ["{not json", '{"checks": []}', '{"cluster": {"failed_nodes": "n1"}}'])
def test_a_file_that_is_not_a_cluster_report_is_a_usage_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    proc = gpudoctor("drain", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        proc.stderr.count("\n") == 1
        and "drain reads rank 0's cluster report, or a one-node run's report" in proc.stderr
    )
    assert gpudoctor("drain", str(tmp_path / "missing.json")).returncode == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("cluster"),
        lambda d: d["cluster"].pop("nodes"),
        lambda d: d["cluster"]["nodes"][0].pop("name"),
        lambda d: d["cluster"]["nodes"].append("n9"),
        lambda d: d["cluster"]["failed_nodes"].append(7),
        lambda d: d["cluster"].update(findings=["cluster.links"]),
        lambda d: d.update(schema_version=99),
    ],
    ids=["node-report", "no-nodes", "nameless-node", "node-not-object", "failed-not-name", "finding", "newer"],
)
def test_a_damaged_cluster_report_is_one_line_and_drains_nothing(tmp_path: Path, damage: Any) -> None:
    """A report of the right kind with a part missing or mangled (a node's report, an edited file, a newer
    schema) is named in one line, exit 2, and nothing is drained; never a traceback."""
    path = cluster_report(tmp_path)
    document = json.loads(path.read_text())
    damage(document)
    path.write_text(json.dumps(document))
    env, calls = slurm_stand_ins(tmp_path, "n2|idle|none\\n")
    proc = gpudoctor("drain", str(path), env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr, proc.stderr
    assert not calls.exists()


def named_report(tmp_path: Path, names: list[str]) -> Path:
    """Every node in `names` lost (so rank 0 names it for draining)."""
    nodes = [
        {"name": n, "rank": i, "lost": "never joined within 20 s", "exit_code": None, "status": "error"}
        for i, n in enumerate(names)
    ]
    meta = {"host": "n0", "started_at": "2026-11-23T10:00:00+00:00", "duration_s": 1.0, "level": "quick"}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc.build_cluster([], nodes, {**meta, "source": "live"}, False, False, "slurm")))
    return path


def recording_sinfo(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """sinfo answering for every exact name it is asked about (each idle) and recording its arguments;
    scontrol recording its calls. Both run through exec, so an argument over Linux's limit fails as it would."""
    folder, calls, asked = tmp_path / "bin", tmp_path / "calls", tmp_path / "asked"
    folder.mkdir()
    (folder / "sinfo").write_text(
        f"#!{sys.executable}\nimport sys\nnames = sys.argv[sys.argv.index('-n') + 1]\n"
        f"open({str(asked)!r}, 'a').write(names + '\\n')\n"
        "print('\\n'.join(f'{n}|idle|none' for n in names.split(',') if n != 'ghost'))\n"
    )
    (folder / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    for tool in ("sinfo", "scontrol"):
        (folder / tool).chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}, calls, asked


def test_only_exact_node_names_reach_scontrol(tmp_path: Path) -> None:
    """scontrol expands ALL, ranges and lists to many nodes (scontrol(1)); a name that would be several nodes,
    or holds what no node name has, is refused in one line and never reaches sinfo or scontrol."""
    evil = ["ALL", "all", "gpu[002-512]", "n1,n2", "n*", "n 5", "n\t6", "\x1b[2K\x1b[1Aok", ""]
    report = named_report(tmp_path, ["n0", *evil, "ghost"])
    env, calls, asked = recording_sinfo(tmp_path)
    proc = gpudoctor("drain", str(report), env=env)
    assert calls.read_text().splitlines() == [
        "update NodeName=n0 State=DRAIN Reason=gpudoctor: lost: never joined within 20 s"
    ]
    assert asked.read_text().splitlines() == ["n0,ghost"]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "refuse 'gpu[002-512]': not one node's name" in proc.stdout
    assert "refuse 'ALL': Slurm reads ALL as every node" in proc.stdout
    assert "\x1b" not in proc.stdout and "'\\x1b[2K\\x1b[1Aok'" in proc.stdout
    assert "leave ghost as it is: sinfo does not know a node of that name" in proc.stdout


def test_ten_thousand_nodes_are_asked_about_in_pieces_and_all_drained(tmp_path: Path) -> None:
    """One `sinfo -n` argument for every name passed Linux's 128 KiB limit for one argument at ~10,000 nodes:
    nothing was drained. Nodes with one reason are drained in few scontrol calls, each under the limit."""
    names = [f"gpu-node-rack{i // 100:03d}-{i:06d}" for i in range(10_000)]
    report = named_report(tmp_path, names)
    env, calls, asked = recording_sinfo(tmp_path)
    proc = gpudoctor("drain", str(report), env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-500:]
    pieces = asked.read_text().splitlines()
    assert len(pieces) > 1 and all(len(p) < 128 * 1024 for p in pieces)
    drained = [c.split()[1].removeprefix("NodeName=").split(",") for c in calls.read_text().splitlines()]
    assert sorted(n for call in drained for n in call) == names, "every node, in calls of one reason each"
    assert all(len(",".join(call)) < 128 * 1024 for call in drained)


# --- a one-node job: no cluster part, the node the report names -------------------------------------------
FAILING = Result(Status.FAIL, "GPU 3 fell off the bus", check_id="health.gpus", title="GPUs answer")


def node_report(tmp_path: Path, passed: bool = False, interrupted: bool = False, **meta: Any) -> Path:
    """A one-node run's report (what `srun -N1 gpudoctor check --json` prints): health.gpus failing, or
    nothing wrong; `meta` replaces the run's account (node, source)."""
    results = [Result(Status.PASS, "8 GPUs", check_id="health.gpus", title="GPUs answer") if passed else FAILING]
    stamp = {"host": "gpu-7.cluster.example", "node": "gpu-7", "started_at": "2026-11-28T10:00:00+00:00"}
    stamp |= {"duration_s": 1.0, "level": "standard", "source": "live", **meta}
    document = doc.build(results, {k: v for k, v in stamp.items() if v is not None}, 0 if passed else 1, interrupted)
    jsonschema.validate(document, doc.schema())
    path = tmp_path / "gpu-7.json"
    path.write_text(json.dumps(document))
    return path


def test_a_one_node_report_drains_the_node_it_names(tmp_path: Path) -> None:
    """`sbatch --nodes=1`: world size 1 is no cluster run, and its report has no cluster part; a failed node is
    drained all the same, by the name the report carries (Slurm's, not the host's long name)."""
    env, calls = slurm_stand_ins(tmp_path, "gpu-7|allocated|none\\n")
    proc = gpudoctor("drain", str(node_report(tmp_path)), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls.read_text().splitlines() == ["update NodeName=gpu-7 State=DRAIN Reason=gpudoctor: health.gpus"]
    assert "drain gpu-7 (gpudoctor: health.gpus)" in proc.stdout


@pytest.mark.parametrize(("reason", "resumed"), [("gpudoctor: health.gpus", True), ("admin: fan replaced", False)])
def test_a_passing_one_node_report_resumes_only_gpudoctors_drain(tmp_path: Path, reason: str, resumed: bool) -> None:
    env, calls = slurm_stand_ins(tmp_path, f"gpu-7|drained|{reason}\\n")
    proc = gpudoctor("drain", str(node_report(tmp_path, passed=True)), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (calls.read_text().splitlines() if calls.exists() else []) == (
        ["update NodeName=gpu-7 State=RESUME"] if resumed else []
    )


@pytest.mark.parametrize(
    ("meta", "said"),
    [
        ({"node": None}, "names no node"),
        ({"source": "snapshot:gpu-7.json"}, "not a live run"),
        ({"interrupted": True}, "interrupted run"),
    ],
    ids=["no-node", "snapshot", "interrupted"],
)
def test_a_one_node_report_without_a_live_node_drains_nothing(tmp_path: Path, meta: dict, said: str) -> None:
    """A report judged from a file (`check --from`) is no verdict about the node it was read on, one that names
    no node (an older gpudoctor's, or a host name Slurm could not have) has nothing to drain, and an interrupted
    run (a job cancelled) judged too little to drain or resume."""
    env, calls = slurm_stand_ins(tmp_path, "gpu-7|idle|none\\n")
    proc = gpudoctor("drain", str(node_report(tmp_path, **meta)), env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and said in proc.stderr, proc.stderr
    assert not calls.exists()


@pytest.mark.parametrize("variable", ["SLURMD_NODENAME", "SLURM_NODENAME"])
def test_node_in_a_report_path_is_the_nodes_name_in_a_one_node_run(tmp_path: Path, variable: str) -> None:
    """`-o "$dir/{node}.json"` outside cluster mode (a world of one) wrote a file named `{node}.json`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    proc = gpudoctor(
        "check", "--only", "system.shm", "--json", "-o", f"{tmp_path}/{{node}}.json", env={**clean, variable: "gpu-7"}
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["gpu-7.json"]
    assert json.loads((tmp_path / "gpu-7.json").read_text())["node"] == "gpu-7"


def test_node_outside_slurm_is_the_hosts_short_name_and_a_bad_name_is_one_line(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    proc = gpudoctor("check", "--only", "system.shm", "-o", f"{tmp_path}/{{node}}.json", env=clean)
    assert proc.returncode in (0, 1), proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == [f"{socket.gethostname().split('.')[0]}.json"]
    bad = gpudoctor(
        "check", "--only", "system.shm", "-o", f"{tmp_path}/{{node}}.x", env={**clean, "SLURMD_NODENAME": "a,b"}
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "'a,b'" in bad.stderr, bad.stderr
    assert not (tmp_path / "{node}.x").exists()


def test_a_drain_command_names_only_nodes(tmp_path: Path) -> None:
    """Two agents on one host name: rank 1's join was refused, so it is "rank 1" in the roster. The fix printed
    `scontrol update NodeName=vm,rank 1 State=DRAIN ...`: no node is called "rank 1", and the space splits it."""
    nodes = [
        {"name": "vm", "status": "fail", "exit_code": 1, "failing": ["health.ecc"], "warning": []},
        {"name": "rank 1", "lost": "joined as 'vm', which rank 0 already is", "exit_code": None, "status": "error"},
        {"name": "ALL", "lost": "never joined within 20 s", "exit_code": None, "status": "error"},
    ]
    remedy = checks.judge_nodes(nodes).remediation
    assert remedy.commands == ['scontrol update NodeName=vm State=DRAIN Reason="gpudoctor: node checks"']
    assert "'rank 1'" in remedy.why and "'ALL'" in remedy.why
    lost = checks.judge_nodes(nodes[1:]).remediation
    assert lost.commands == [] and "'rank 1'" in lost.why
