"""Several hosts on one machine, for real: a network namespace per host with its own host name (a UTS
namespace), joined by a bridge that lives in a namespace of its own. Addresses come from a private range
used only inside these namespaces; nothing is routed to or from the machine's own network. A host's link can
be rate-limited with `tc` (tbf). Everything is removed afterwards, processes included.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


class HostsUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no `ip`, no namespace support)."""


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise HostsUnavailable(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def _switch(name: str) -> None:
    """A switch: a namespace of its own holding a bridge `br0`, up."""
    _ip("netns", "add", name)
    _ip("-n", name, "link", "add", "br0", "type", "bridge")
    _ip("-n", name, "link", "set", "br0", "up")


class Hosts:
    """`count` hosts named node-0.., at 10.213.<net>.1.., each with one interface `eth0`."""

    def __init__(self, count: int) -> None:
        if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
            raise HostsUnavailable("making network namespaces needs root, `ip` and `unshare`")
        self.tag = f"gd{os.getpid() % 100000}"
        self.net = os.getpid() % 250
        self.names = [f"node-{i}" for i in range(count)]
        self.procs: list[subprocess.Popen[str]] = []
        self.switch = f"{self.tag}s"
        try:
            self._build(count)
        except HostsUnavailable:
            self.remove()
            raise

    def namespace(self, i: int) -> str:
        return f"{self.tag}n{i}"

    def address(self, i: int) -> str:
        return f"10.213.{self.net}.{i + 1}"

    def _build(self, count: int) -> None:
        _switch(self.switch)
        for i in range(count):
            _ip("netns", "add", self.namespace(i))
            self._cable(i, self.switch, ("a", "b"), "eth0", self.address(i))
            _ip("-n", self.namespace(i), "link", "set", "lo", "up")
        self._hosts_files(count)

    def _cable(self, i: int, switch: str, ends: tuple[str, str], device: str, address: str) -> None:
        """A veth pair from host i's `device` (at `address`/24) to a port of `switch`'s bridge; `ends` tell the
        pair's names apart from another switch's."""
        ns, near, far = self.namespace(i), f"{self.tag}{ends[0]}{i}", f"{self.tag}{ends[1]}{i}"
        _ip("link", "add", near, "type", "veth", "peer", "name", far)
        _ip("link", "set", near, "netns", switch)
        _ip("link", "set", far, "netns", ns)
        _ip("-n", switch, "link", "set", near, "master", "br0", "up")
        _ip("-n", ns, "link", "set", far, "name", device)
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", device)
        _ip("-n", ns, "link", "set", device, "up")

    def _hosts_files(self, count: int) -> None:
        """Host names resolve inside the namespaces as on a cluster: `ip netns exec` binds
        /etc/netns/NAME/hosts over /etc/hosts."""
        lines = "127.0.0.1 localhost\n" + "".join(f"{self.address(i)} {self.names[i]}\n" for i in range(count))
        for i in range(count):
            folder = Path("/etc/netns") / self.namespace(i)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text(lines)

    def limit(self, i: int, rate: str, both_ways: bool = True) -> None:
        """Rate-limit what host i sends (tbf on its eth0: this kernel has no netem) and, both ways, what it
        receives (tbf on its port of the switch)."""
        ends = [(self.namespace(i), "eth0")] + ([(self.switch, f"{self.tag}a{i}")] if both_ways else [])
        for namespace, device in ends:
            command = ["tc", "qdisc", "add", "dev", device, "root", "tbf", "rate", rate, "burst", "64kb"]
            proc = subprocess.run(
                ["ip", "netns", "exec", namespace, *command, "latency", "400ms"], capture_output=True, text=True
            )
            if proc.returncode:
                raise HostsUnavailable(f"tc tbf on {self.names[i]}: {proc.stderr.strip()}")

    def start(self, i: int, command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[str]:
        """Run `command` on host i under its own host name, in a process session of its own."""
        script = f'hostname {self.names[i]} && exec "$@"'
        argv = ["ip", "netns", "exec", self.namespace(i), "unshare", "--uts", "sh", "-c", script, "sh", *command]
        with open(log, "w") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, text=True, start_new_session=True
            )
        self.procs.append(proc)
        return proc

    def kill(self, i: int) -> None:
        """The host dies: every process in its namespace is killed at once."""
        for pid in self.pids_of(i):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def pids_of(self, i: int) -> list[int]:
        """Every process in host i's network namespace."""
        out = subprocess.run(["ip", "netns", "pids", self.namespace(i)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def remove(self) -> None:
        for i in range(len(self.names)):
            self.kill(i)
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        time.sleep(0.2)
        for ns in [*(self.namespace(i) for i in range(len(self.names))), self.switch]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)


class TwoNicHosts(Hosts):
    """Hosts with a second NIC each, `eth1` at 10.214.<net>.<i + 1> on a switch of its own (take it down with
    `set_link(i, "eth1", "down")`), and a bridge named as Docker names its own, `docker0` at 172.17.0.1/16 on every
    host with no port in it, as Docker's is where no container runs."""

    def __init__(self, count: int) -> None:
        self.switch2 = ""
        super().__init__(count)

    def second_address(self, i: int) -> str:
        return f"10.214.{self.net}.{i + 1}"

    def _build(self, count: int) -> None:
        super()._build(count)
        self.switch2 = f"{self.tag}t"
        _switch(self.switch2)
        for i in range(count):
            ns = self.namespace(i)
            self._cable(i, self.switch2, ("c", "d"), "eth1", self.second_address(i))
            _ip("-n", ns, "link", "add", "docker0", "type", "bridge")
            _ip("-n", ns, "addr", "add", "172.17.0.1/16", "dev", "docker0")
            _ip("-n", ns, "link", "set", "docker0", "up")

    def set_link(self, i: int, device: str, state: str) -> None:
        """Host i's `device` "up" or "down"."""
        _ip("-n", self.namespace(i), "link", "set", device, state)

    def remove(self) -> None:
        super().remove()
        if self.switch2:
            subprocess.run(["ip", "netns", "del", self.switch2], capture_output=True, check=False)
