"""A real Slurm on namespace hosts (tests/helpers/netns.py): munged, slurmctld and one slurmd per host, from the
distribution's packages, with this test's own configuration, state and logs in a folder of its own.

Each slurmd runs in its host's network namespace under its host name, with the host file of the namespaces
bound over /etc/hosts, the test's configuration over /etc/slurm (where a node keeps it: hooks find it there,
with no SLURM_CONF), and a folder of the test's over /opt, where /opt/gpudoctor/bin/gpudoctor is
what a site installs: a wrapper that puts the fake libnvidia-ml.so.1 (the node's stand-in GPU driver,
serving `nvml/<node>.calls`) on the library path and runs this checkout's gpudoctor. Everything slurmd
starts (prologs, health checks, job steps) sees the same. Each node has Gres=gpu:8 (character devices made
here stand for /dev/nvidia*).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from helpers.netns import Hosts, HostsUnavailable

DAEMONS = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "srun", "nsenter")
UP = ("idle", "drain", "alloc", "mix")  # registered and answering (a health check may have drained it already)


class SlurmUnavailable(RuntimeError):
    """Slurm's or munge's programs are missing, or the daemons do not come up here."""


def _conf(hosts: Hosts, folder: Path, settings: str) -> str:
    nodes = "\n".join(
        f"NodeName={name} NodeAddr={hosts.address(i)} CPUs=2 RealMemory=1000 Gres=gpu:8 State=UNKNOWN"
        for i, name in enumerate(hosts.names)
    )
    return f"""ClusterName=gdtest
SlurmctldHost={hosts.names[0]}({hosts.address(0)})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge.socket
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool/%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
GresTypes=gpu
SlurmctldTimeout=30
SlurmdTimeout=30
{settings}
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class Slurm:
    """A running Slurm over `hosts`; `settings` are extra slurm.conf lines (Prolog=..., HealthCheckProgram=...)."""

    def __init__(self, hosts: Hosts, folder: Path, library: Path, settings: str = "") -> None:
        missing = [tool for tool in DAEMONS if not shutil.which(tool)]
        if missing:
            raise SlurmUnavailable(f"not installed: {', '.join(missing)} (Debian: slurmctld slurmd slurm-client munge)")
        self.hosts, self.folder = hosts, folder
        self.procs: list[subprocess.Popen[str]] = []
        for sub in ("state", "spool", "dev", "nvml", "etc", "opt/gpudoctor/bin"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        self._install(library)
        (folder / "etc" / "slurm.conf").write_text(_conf(hosts, folder, settings))
        (folder / "etc" / "gres.conf").write_text(f"Name=gpu File={folder}/dev/nvidia[0-7]\n")
        self.env = {"SLURM_CONF": str(folder / "etc" / "slurm.conf"), "PATH": os.environ["PATH"]}
        try:
            self._start()
        except (SlurmUnavailable, AssertionError):
            self.stop()
            raise

    def _install(self, library: Path) -> None:
        """What a site installs on every node, and the stand-ins for its GPUs: /opt/gpudoctor/bin/gpudoctor."""
        for k in range(8):
            with contextlib.suppress(FileExistsError):
                os.mknod(self.folder / "dev" / f"nvidia{k}", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        wrapper = self.folder / "opt" / "gpudoctor" / "bin" / "gpudoctor"
        real = Path(sys.executable).with_name("gpudoctor")
        wrapper.write_text(
            "#!/bin/sh\n"
            "# The test's stand-in for the node's GPU driver, then this checkout's gpudoctor.\n"
            f"export LD_LIBRARY_PATH={library}\n"
            f'export FAKE_NVML_DATA="{self.folder}/nvml/$(hostname).calls"\n'
            f'exec {real} "$@"\n'
        )
        wrapper.chmod(0o755)

    def _start(self) -> None:
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        folder = self.folder
        munged = subprocess.run(
            [
                "munged",
                "--force",
                f"--socket={folder}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={folder}/munged.pid",
                f"--log-file={folder}/munged.log",
                f"--seed-file={folder}/munged.seed",
            ],
            capture_output=True,
            text=True,
        )
        if munged.returncode:
            raise SlurmUnavailable(f"munged did not start: {munged.stderr.strip()}")
        env = {**os.environ, **self.env}
        self.procs.append(self.hosts.start(0, ["slurmctld", "-D", "-i"], env, folder / "slurmctld.out"))
        for i, name in enumerate(self.hosts.names):
            self.procs.append(self._slurmd(i, name, env))
        self.wait_for(lambda states: all(s.startswith(UP) for s in states.values()), "every node up", 300)

    def _slurmd(self, i: int, name: str, env: dict[str, str]) -> subprocess.Popen[str]:
        """slurmd in host i's network namespace only (the host's /sys, which has the cgroup filesystem slurmd
        wants), under its host name, with the namespaces' host file and the site's /opt bound in."""
        ns = self.hosts.namespace(i)
        script = (
            f"hostname {name} && mount --bind /etc/netns/{ns}/hosts /etc/hosts && mkdir -p /etc/slurm && "
            f"mount --bind {self.folder}/etc /etc/slurm && mount --bind {self.folder}/opt /opt && "
            f"exec slurmd -D -N {name}"
        )
        argv = ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "--mount", "sh", "-c", script]
        with open(self.folder / f"slurmd-{name}.out", "w") as out:
            return subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True
            )

    def run(
        self,
        *argv: str,
        user: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm client command on host 0 (as `user`, where given), with the test's slurm.conf."""
        as_user = []
        if user:
            gid = pwd.getpwnam(user).pw_gid
            as_user = ["setpriv", f"--reuid={user}", f"--regid={gid}", "--clear-groups"]
        command = ["ip", "netns", "exec", self.hosts.namespace(0), *as_user, *argv]
        environ = {**os.environ, **self.env, **(env or {})}
        return subprocess.run(command, env=environ, cwd=cwd, capture_output=True, text=True, timeout=timeout)

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's state and reason, as sinfo gives them."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N|%T|%E").stdout
        found = {}
        for line in out.splitlines():
            name, state, reason = line.split("|", 2)
            found[name] = (state, reason)
        return found

    def wait_for(self, done, what: str, limit_s: float) -> dict[str, tuple[str, str]]:
        deadline = time.monotonic() + limit_s
        states: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            states = self.states()
            if states and done({n: s for n, (s, _) in states.items()}):
                return states
            time.sleep(0.5)
        logs = "".join(p.read_text()[-600:] for p in sorted(self.folder.glob("slurm*.log")))
        raise AssertionError(f"Slurm never reached {what}: {states}\n{logs}")

    def set_state(self, node: str, state: str, reason: str = "") -> None:
        argv = ["scontrol", "update", f"NodeName={node}", f"State={state}"] + ([f"Reason={reason}"] if reason else [])
        proc = self.run(*argv)
        assert proc.returncode == 0, proc.stderr

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        pid = self.folder / "munged.pid"
        if pid.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid.read_text()), signal.SIGKILL)


def slurm_or_skip(hosts: Hosts, folder: Path, library: Path, settings: str = "") -> Slurm:
    import pytest

    try:
        return Slurm(hosts, folder, library, settings)
    except (SlurmUnavailable, HostsUnavailable) as exc:
        pytest.skip(str(exc))
