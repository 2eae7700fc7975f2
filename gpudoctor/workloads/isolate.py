"""Run a function in a child process in its own session, with a timeout and a whole-tree kill.

A hang, crash or OOM in a workload becomes an `Outcome`, never a dead tool, and every process the
workload started (grandchildren, and those that started sessions of their own) is gone afterwards, also
when gpudoctor itself is killed (SIGKILL included, when no handler runs): the child holds the read end of a
pipe whose write end only gpudoctor holds, and when the kernel closes it the child kills everything below
it, itself last. The child is a subreaper, so a grandchild whose parent died is still found below it.
Workload code reports what it is doing through `progress()`, so a timeout can say where it hung.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gpudoctor.files import write_json_atomic
from gpudoctor.model import Status
from gpudoctor.workloads.guard import prctl

WORKDIR_ENV = "GPUDOCTOR_WORKDIR"
LIFELINE_ENV = "GPUDOCTOR_LIFELINE"  # the child's end of the pipe that closes when gpudoctor dies
PARENT_ENV = "GPUDOCTOR_PARENT_PID"
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36  # linux/prctl.h
KILL_GRACE_S = 2.0
REFRESH_S = 0.5  # how often the tree is walked for new descendants; cheap enough for a 2-core box


@dataclass
class Outcome:
    """How an isolated run ended: PASS (it returned `data`), ERROR (it raised, exited non-zero or was killed
    by a signal: `message` says which), TIMEOUT."""

    status: Status
    data: Any = None
    message: str = ""
    exit_code: int | None = None
    elapsed_s: float = 0.0
    stderr_tail: str = ""
    progress: dict[str, str] = field(default_factory=dict)


# `python -m` puts the current directory first on sys.path, so a gpudoctor source tree (or any `gpudoctor/` folder)
# there would shadow the installed package in every child. The children start with it taken off instead (`-c` puts
# it there as ''), unless Python's safe-path mode (PYTHONSAFEPATH, -P) left it off: then sys.path[0] is PYTHONPATH's.
_RUN_MODULE = (
    "import runpy, sys; sys.path[:1] = [] if sys.path[:1] == [''] else sys.path[:1]; sys.argv[:] = sys.argv[1:]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def python_module(module: str, *args: str) -> list[str]:
    """The command that runs `python -m module args` in this interpreter, whatever the current directory holds."""
    return [sys.executable, "-c", _RUN_MODULE, module, *args]


def run_isolated(target: str, payload: dict[str, Any], timeout_s: float, env: dict[str, str] | None = None) -> Outcome:
    """Call `module:function(payload)` (see `load_target`) in a new process session; kill the whole tree on
    timeout. The payload and the function's return value travel as JSON."""
    _sweep_once()
    workdir = Path(tempfile.mkdtemp(prefix=f"gpudoctor-{os.getpid()}-"))
    try:
        return _run(target, payload, timeout_s, env, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@functools.cache
def _sweep_once() -> None:
    """sweep_orphans, the first time this process isolates anything."""
    sweep_orphans()


def sweep_orphans(root: Path | None = None) -> list[Path]:
    """Remove the work folders of gpudoctor processes that are gone (SIGKILL runs no cleanup): each is named
    `gpudoctor-<pid>-...` and owned by this user; a folder of a live process, or of another user, stays."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob("gpudoctor-*-*"):
        pid = folder.name.split("-")[1]
        with contextlib.suppress(OSError):
            dead = pid.isascii() and pid.isdigit() and len(pid) <= 9 and not psutil.pid_exists(int(pid))
            if dead and folder.lstat().st_uid == os.geteuid():
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


def _run(target: str, payload: dict[str, Any], timeout_s: float, env: dict[str, str] | None, workdir: Path) -> Outcome:
    (workdir / "progress").mkdir()
    spec_path = workdir / "spec.json"
    spec_path.write_text(json.dumps({"target": target, "payload": payload}))
    lifeline, held = os.pipe()
    child_env = {**os.environ, **(env or {}), WORKDIR_ENV: str(workdir), LIFELINE_ENV: str(lifeline)}
    started = time.monotonic()
    with open(workdir / "stderr", "wb") as stderr:
        try:
            proc = subprocess.Popen(
                python_module("gpudoctor.workloads.isolate", str(spec_path)),
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                env=child_env,
                start_new_session=True,
                pass_fds=(lifeline,),
            )
        finally:
            os.close(lifeline)
        tree = ProcessTree(proc.pid)
        try:
            timed_out = tree.wait(proc, timeout_s)
        finally:
            tree.kill()
            os.close(held)
    elapsed = time.monotonic() - started
    return _outcome(proc.returncode, timed_out, elapsed, workdir, timeout_s)


def _outcome(returncode: int, timed_out: bool, elapsed: float, workdir: Path, timeout_s: float) -> Outcome:
    """What the child's exit, its result file and the clock say happened."""
    seen = {"elapsed_s": elapsed, "stderr_tail": _tail(workdir / "stderr"), "progress": read_progress(workdir)}
    if timed_out:
        return Outcome(Status.TIMEOUT, message=f"did not finish within its {timeout_s:g} s limit", **seen)
    result_path = workdir / "result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    if returncode == 0 and result is not None and "data" in result:
        return Outcome(Status.PASS, data=result["data"], exit_code=0, **seen)
    return Outcome(Status.ERROR, message=_failure(returncode, result), exit_code=returncode, **seen)


def _failure(returncode: int, result: dict[str, Any] | None) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return f"killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    return result["error"] if result and "error" in result else f"exited with code {returncode}"


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_bytes()[-limit:].decode(errors="replace")
    except OSError:
        return ""


class ProcessTree:
    """Every process descended from one root, remembered as they appear so none escapes the kill."""

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.pgid = os.getpgid(root_pid)
        self.seen: dict[int, psutil.Process] = {}

    def refresh(self) -> None:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.root_pid)
            for proc in [root, *root.children(recursive=True)]:
                self.seen.setdefault(proc.pid, proc)

    def wait(self, proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
        """Wait for the root to exit; True when the timeout ran out first."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.refresh()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return proc.poll() is None
            try:
                proc.wait(timeout=min(REFRESH_S, remaining))
                return False
            except subprocess.TimeoutExpired:
                continue

    def kill(self) -> None:
        """SIGTERM the group and every remembered descendant, then SIGKILL what is left."""
        self.refresh()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
            alive = [p for p in self.seen.values() if _signal(p, sig)]
            _, still = psutil.wait_procs(alive, timeout=KILL_GRACE_S if sig == signal.SIGTERM else 5)
            if not still:
                break


def _signal(proc: psutil.Process, sig: int) -> bool:
    try:
        proc.send_signal(sig)  # psutil checks the PID was not reused
        return True
    except psutil.Error:
        return False


def progress(name: str, phase: str) -> None:
    """Record what `name` (a rank, a stage) is doing now, so a timeout can name where it hung."""
    workdir = os.environ.get(WORKDIR_ENV)
    if workdir:
        path = Path(workdir, "progress", name)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(phase)
        tmp.replace(path)


def read_progress(workdir: Path) -> dict[str, str]:
    folder = workdir / "progress"
    return {p.name: p.read_text() for p in sorted(folder.glob("*")) if p.suffix != ".tmp"} if folder.is_dir() else {}


def load_target(target: str) -> Any:
    """`package.module:function`, or `/path/to/file.py:function` for site-local check modules."""
    module_name, _, func_name = target.rpartition(":")
    if module_name.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(module_name).stem, module_name)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    return getattr(module, func_name)


def record_call(call: Callable[[], Any], result_path: Path) -> int:
    """The one way a child process reports: run `call`, write what it returned (`data`) or what it raised
    (`error`) to `result_path` atomically; the exit code says which."""
    try:
        data = call()
    except Exception as exc:
        traceback.print_exc()
        first_line = (str(exc).strip().splitlines() or [""])[0]
        write_json_atomic(result_path, {"error": f"raised {type(exc).__name__}: {first_line[:300]}"})
        return 1
    write_json_atomic(result_path, {"data": data})
    return 0


def die_with_parent() -> None:
    """A process started by a gpudoctor child (a rank): killed by the kernel when its parent dies, and gone
    at once if the parent died before this ran."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.environ.get(PARENT_ENV, str(os.getppid())) != str(os.getppid()):
        os._exit(1)


def hold_lifeline() -> None:
    """In the isolated child: become the subreaper of everything below, and kill all of it (then itself)
    once gpudoctor's end of the lifeline closes."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    fd = int(os.environ.pop(LIFELINE_ENV, "-1"))
    if fd < 0:
        return

    def watch() -> None:
        while os.read(fd, 1):
            pass
        for proc in psutil.Process().children(recursive=True):
            _signal(proc, signal.SIGKILL)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="gpudoctor-lifeline", daemon=True).start()


def _child_main(spec_path: str) -> int:
    hold_lifeline()
    os.environ[PARENT_ENV] = str(os.getpid())
    spec = json.loads(Path(spec_path).read_text())
    return record_call(lambda: load_target(spec["target"])(spec["payload"]), Path(spec_path).with_name("result.json"))


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
