"""The real consumers of gpudoctor's monitoring output, as the tests start them: promtool, node_exporter's
textfile collector scraped over HTTP, xmllint, and the environment cron gives a job. Each skips with the
reason where its package is not installed (.ci/run installs them)."""

from __future__ import annotations

import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

# Debian's cron(8): "SHELL is set to /bin/sh, and LOGNAME and HOME are set from the /etc/passwd line of the
# crontab's owner. PATH is set to "/usr/bin:/bin""; NAME=value lines of the crontab add to or replace them.
CRON_PATH = "/usr/bin:/bin"


def promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        pytest.skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
    return found


def xmllint() -> str:
    found = shutil.which("xmllint")
    if not found:
        pytest.skip("xmllint not installed (Debian package libxml2-utils; .ci/run installs it)")
    return found


def scrape(textfile_dir: Path) -> str:
    """node_exporter's textfile collector over that folder, scraped once over HTTP on loopback."""
    exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exporter is None:
        pytest.skip("node_exporter is not installed (Debian: prometheus-node-exporter)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    flags = [f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults", "--collector.textfile"]
    proc = subprocess.Popen(
        [exporter, *flags, f"--collector.textfile.directory={textfile_dir}"], stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                time.sleep(0.1)
        raise AssertionError("node_exporter did not answer")
    finally:
        proc.kill()
        proc.wait()


def cron_environment(crontab: list[str], user: str) -> dict[str, str]:
    """What cron gives a job of this crontab owned by `user`: nothing of the caller's environment."""
    entry = pwd.getpwnam(user)
    env = {"SHELL": "/bin/sh", "LOGNAME": user, "HOME": entry.pw_dir, "PATH": CRON_PATH}
    for line in crontab:
        name, equals, value = line.strip().partition("=")
        if equals and name and " " not in name and not line.lstrip().startswith("#"):
            env[name.strip()] = value.strip().strip("'\"")
    return env


def opt_gpudoctor(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run argv as a site would, where the README installs gpudoctor (`/opt/gpudoctor/bin/gpudoctor`): in a
    private mount namespace, a folder of the test's is bound over /opt holding that path (this checkout's
    gpudoctor); the environment is exactly `env`."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    with tempfile.TemporaryDirectory() as folder:
        binary = Path(folder) / "gpudoctor" / "bin" / "gpudoctor"
        binary.parent.mkdir(parents=True)
        binary.write_text(f'#!/bin/sh\nexec {Path(sys.executable).with_name("gpudoctor")} "$@"\n')
        binary.chmod(0o755)
        Path(folder).chmod(0o755)
        mount = 'mount --bind "$0" /opt && exec "$@"'
        argv = ["/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", mount, folder, *argv]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
