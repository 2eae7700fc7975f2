"""The real consumers of gpudoctor's monitoring output, as the tests start them: promtool, node_exporter's
textfile collector scraped over HTTP, xmllint, and Debian's cron daemon. Each skips with the
reason where its package is not installed (.ci/run installs them)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

# How long a consumer may take to start, or to run gpudoctor, before the test gives up: a guard against a hang, not
# a limit on the time (cron waits up to a minute for its next run; a busy CI machine takes many times a quiet
# one's to start a process).
PATIENCE_S = 300.0


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
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
            except OSError:
                time.sleep(0.1)
        raise AssertionError("node_exporter did not answer")
    finally:
        proc.kill()
        proc.wait()


def cron_runs(cron_file: str, wrote: Path, limit_s: float = PATIENCE_S) -> bool:
    """Debian's cron daemon, for real, with `cron_file` as /etc/cron.d/gpudoctor and nothing else to run: in
    its own mount and PID namespaces, over folders of the test's (/etc/cron.d, /etc/crontab, the user
    crontabs, /run for its pid file, and /opt, where /opt/gpudoctor/bin/gpudoctor is what the README installs:
    this checkout's gpudoctor). The job gets the environment cron gives (PATH=/usr/bin:/bin, PAM's
    pam_env). True once the job wrote `wrote`; everything in the namespace is killed either way."""
    cron = shutil.which("cron")
    if not cron or not shutil.which("unshare") or os.geteuid() != 0:
        pytest.skip("needs root, unshare and Debian's cron (.ci/run installs cron)")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        root.chmod(0o755)
        for sub in ("cron.d", "crontabs", "run", "opt/gpudoctor/bin"):
            (root / sub).mkdir(parents=True, mode=0o755)
        (root / "crontab").write_text("")
        (root / "cron.d" / "gpudoctor").write_text(cron_file)
        (root / "cron.d" / "gpudoctor").chmod(0o644)
        binary = root / "opt" / "gpudoctor" / "bin" / "gpudoctor"
        binary.write_text(f'#!/bin/sh\nexec {Path(sys.executable).with_name("gpudoctor")} "$@"\n')
        binary.chmod(0o755)
        binds = " && ".join(
            f"mount --bind {root / mine} {system}"
            for mine, system in (("cron.d", "/etc/cron.d"), ("crontab", "/etc/crontab"),
                                 ("crontabs", "/var/spool/cron/crontabs"), ("run", "/run"), ("opt", "/opt"))
        )  # fmt: skip
        setup = f"{binds} && exec {cron} -f"
        argv = ["unshare", "-m", "-p", "-f", "--kill-child", "--propagation", "private", "sh", "-c", setup]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + limit_s
            while time.monotonic() < deadline and not wrote.exists() and proc.poll() is None:
                time.sleep(0.5)
            return wrote.exists()
        finally:
            for init in psutil.Process(proc.pid).children():
                init.kill()  # the namespace's init: its end ends every process in it, and unshare reaps it
            proc.wait(timeout=30)


NAGIOS_CFG = """log_file={d}/nagios.log
cfg_file={d}/objects.cfg
object_cache_file={d}/objects.cache
precached_object_file={d}/objects.precache
status_file={d}/status.dat
state_retention_file={d}/retention.dat
retain_state_information=0
use_retained_program_state=0
use_retained_scheduling_info=0
command_file={d}/nagios.cmd
check_external_commands=0
check_result_path={d}/checkresults
lock_file={d}/nagios.lock
temp_file={d}/nagios.tmp
temp_path={d}
nagios_user=root
nagios_group=root
interval_length=1
max_service_check_spread=1
service_inter_check_delay_method=n
check_result_reaper_frequency=1
enable_notifications=0
execute_host_checks=0
process_performance_data=1
service_perfdata_file={d}/perfdata.tsv
service_perfdata_file_template=$SERVICESTATE$\\t$SERVICEOUTPUT$\\t$SERVICEPERFDATA$
service_perfdata_file_processing_interval=0
service_check_timeout={patience:.0f}
"""
NAGIOS_OBJECTS = """define command {{
  command_name gpudoctor
  command_line {command}
}}
define command {{
  command_name noop
  command_line /bin/true
}}
define timeperiod {{
  timeperiod_name always
  alias always
  {days}
}}
define contact {{
  contact_name nobody
  host_notifications_enabled 0
  service_notifications_enabled 0
  host_notification_period always
  service_notification_period always
  host_notification_options n
  service_notification_options n
  host_notification_commands noop
  service_notification_commands noop
}}
define host {{
  host_name node1
  address 127.0.0.1
  check_command noop
  max_check_attempts 1
  check_period always
  contacts nobody
  notification_period always
}}
define service {{
  host_name node1
  service_description gpudoctor
  check_command gpudoctor
  max_check_attempts 1
  check_interval 300
  retry_interval 300
  check_period always
  contacts nobody
  notification_period always
}}
"""


def nagios_check(command: str, folder: Path, limit_s: float = PATIENCE_S) -> tuple[str, str, str]:
    """Nagios Core 4 itself runs `command` as a service check (checks every second are scheduled from its
    start) and writes what it made of the plugin's answer to its performance-data file: the state, the
    output, and the perfdata, as Nagios split them."""
    nagios = shutil.which("nagios4") or shutil.which("nagios")
    if not nagios:
        pytest.skip("Nagios Core is not installed (Debian: nagios4)")
    (folder / "checkresults").mkdir()
    days = "\n  ".join(f"{day} 00:00-24:00" for day in ("sunday", "monday", "tuesday", "wednesday", "thursday",
                                                       "friday", "saturday"))  # fmt: skip
    (folder / "nagios.cfg").write_text(NAGIOS_CFG.format(d=folder, patience=PATIENCE_S))
    (folder / "objects.cfg").write_text(NAGIOS_OBJECTS.format(command=command, days=days))
    perfdata = folder / "perfdata.tsv"
    proc = subprocess.Popen([nagios, str(folder / "nagios.cfg")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and not (perfdata.exists() and perfdata.read_text().endswith("\n")):
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # Nagios and its worker processes
        proc.wait()
    assert perfdata.exists(), (folder / "nagios.log").read_text()[-2000:]
    state, output, figures = perfdata.read_text().splitlines()[0].split("\t")
    return state, output, figures
