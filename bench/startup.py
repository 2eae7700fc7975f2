"""How fast gpudoctor answers, against torch's own import and torch's collect_env, measured in one run.

Alternates the commands round by round (so drift hits all of them alike) and prints each median and the
ratios the project aims for: quick level <= 1.15x `import torch` and below collect_env; --help < 0.15 s; the
checks that read no torch facts (`--only health driver`) never import it.

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
COMMANDS = {
    "gpudoctor --help": [GPUDOCTOR, "--help"],
    "gpudoctor check --level quick": [GPUDOCTOR, "check", "--level", "quick"],
    "gpudoctor check --only health driver": [GPUDOCTOR, "check", "--only", "health", "driver"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
}


def seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    for command in COMMANDS.values():
        seconds(command)  # warm the page cache
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, command in COMMANDS.items():
            times[name].append(seconds(command))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:38s} median {value:6.3f} s  (min {min(times[name]):.3f}, max {max(times[name]):.3f})")
    torch_import = median["python -c 'import torch'"]
    quick = median["gpudoctor check --level quick"]
    print(f"\nquick / import torch      = {quick / torch_import:.2f}  (goal <= 1.15)")
    print(f"quick / collect_env       = {quick / median['python -m torch.utils.collect_env']:.2f}  (goal < 1)")
    print(f"--help                    = {median['gpudoctor --help']:.3f} s  (goal < 0.15 s)")
    probe = median["gpudoctor check --only health driver"]
    print(f"health+driver / import torch = {probe / torch_import:.2f}  (no torch imported)")


if __name__ == "__main__":
    main()
