"""How fast gpudoctor answers, against torch's own import and torch's collect_env, measured in one run.

Alternates the commands round by round (so drift hits all of them alike) and prints each median and the
ratios the project aims for: quick level <= 1.10x `import torch` and below collect_env; --help < 0.15 s; `list`
<= 1.3x --help (it reads the checks' declarations, never their judges); the monitoring probe (`--only health
driver system.shm`, no torch facts) <= 0.3x `import torch` in time and under 150 MB peak resident memory;
judging a real `nvidia-smi -q -x` capture (every check, no GPU stack loaded) under the probe's budget too.

    python bench/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

GPUDOCTOR = shutil.which("gpudoctor") or os.path.join(os.path.dirname(sys.executable), "gpudoctor")
CAPTURE = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "nvidia-smi-xml", "dual_a5000-v13.xml")
COMMANDS = {
    "gpudoctor --help": [GPUDOCTOR, "--help"],
    "gpudoctor list": [GPUDOCTOR, "list"],
    "gpudoctor check --level quick": [GPUDOCTOR, "check", "--level", "quick"],
    "gpudoctor check --only health driver system.shm": [
        GPUDOCTOR,
        "check",
        "--only",
        "health",
        "driver",
        "system.shm",
        "--format",
        "npd",
    ],
    "gpudoctor check --from <nvidia-smi -q -x capture>": [GPUDOCTOR, "check", "--from", CAPTURE],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
}


def seconds(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall time, and the peak resident memory (MB) of the process itself."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    # Warm the page cache, and the bytecode cache as an install has it (pip compiles every module): where
    # PYTHONDONTWRITEBYTECODE is set, a module changed since its .pyc would be compiled again in every round.
    compiling = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for command in COMMANDS.values():
        seconds(command, compiling)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    memory: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, command in COMMANDS.items():
            elapsed, rss = seconds(command)
            times[name].append(elapsed)
            memory[name].append(rss)
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        low, high = min(times[name]), max(times[name])
        print(f"{name:48s} median {value:6.3f} s  (min {low:.3f}, max {high:.3f})  peak {max(memory[name]):5.0f} MB")
    torch_import = median["python -c 'import torch'"]
    quick = median["gpudoctor check --level quick"]
    print(f"\nquick / import torch      = {quick / torch_import:.2f}  (goal <= 1.10)")
    print(f"quick / collect_env       = {quick / median['python -m torch.utils.collect_env']:.2f}  (goal < 1)")
    print(f"--help                    = {median['gpudoctor --help']:.3f} s  (goal < 0.15 s)")
    print(f"list / --help             = {median['gpudoctor list'] / median['gpudoctor --help']:.2f}  (goal <= 1.3)")
    probe = "gpudoctor check --only health driver system.shm"
    print(f"probe / import torch      = {median[probe] / torch_import:.2f}  (goal <= 0.3)")
    print(f"probe peak memory         = {max(memory[probe]):.0f} MB  (goal < 150 MB)")
    capture = "gpudoctor check --from <nvidia-smi -q -x capture>"
    print(f"capture / import torch    = {median[capture] / torch_import:.2f}  (goal <= 0.3)")
    print(f"capture peak memory       = {max(memory[capture]):.0f} MB  (goal < 150 MB)")


if __name__ == "__main__":
    main()
