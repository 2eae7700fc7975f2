"""What `gpudoctor check --level LEVEL --budget S` runs, skips and takes, for budgets from a few seconds to the
full level's own time, measured in one run: for each budget the wall time (start-up included), its ratio to the
budget, and each workload as run (at what share of its work), skipped (with the time it said it needs) or cut.

The first run with no budget measures the full level; every run learns the workloads' costs into a history of its
own (a temporary XDG_STATE_HOME), as a node does across runs.

    python bench/budget.py [--level standard] [--budgets 5 10 15 20 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

GPUDOCTOR = shutil.which("gpudoctor") or os.path.join(os.path.dirname(sys.executable), "gpudoctor")
WORKLOADS = ("live", "cluster")


def run(level: str, budget: float | None, state: str) -> tuple[float, list[dict]]:
    command = [GPUDOCTOR, "check", "--level", level, "--json"]
    command += ["--budget", f"{budget:g}"] if budget else []
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "XDG_STATE_HOME": state})
    wall = time.monotonic() - started
    checks = json.loads(proc.stdout)["checks"] if proc.stdout.strip() else []
    return wall, checks


def workloads(checks: list[dict], full: set[str]) -> list[str]:
    """Each workload once: `ran`, `ran at 40%`, `skipped (needs about 9 s)` or `cut short`."""
    said: dict[str, str] = {}
    for check in checks:
        if check["check_id"] not in full or check["check_id"] in said:
            continue
        summary, detail = check["summary"], check.get("detail") or ""
        if summary.startswith("cut short"):
            said[check["check_id"]] = "cut short"
        elif "not within" in summary:
            said[check["check_id"]] = "skipped (" + summary.split(": ", 1)[1].split(" (")[0] + ")"
        elif "% of its work to fit" in detail:
            said[check["check_id"]] = "ran at " + detail.rsplit("run at ", 1)[1].split(" ", 1)[0]
        else:
            said[check["check_id"]] = f"ran ({check['status']})"
    return [f"{check_id}: {what}" for check_id, what in said.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", default="standard")
    parser.add_argument("--budgets", nargs="+", type=float, default=[5, 10, 15, 20, 30])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        wall, checks = run(args.level, None, state)
        full = {c["check_id"] for c in checks if c["duration_s"] > 0.5}
        print(f"--level {args.level}, no budget: {wall:.1f} s; workloads: {', '.join(sorted(full)) or 'none'}")
        print(f"{'budget':>8} {'wall':>7} {'wall/budget':>12}  workloads")
        for budget in [*args.budgets, round(wall + 2)]:
            taken, checks = run(args.level, budget, state)
            said = "; ".join(workloads(checks, full))
            print(f"{budget:>7g}s {taken:>6.1f}s {taken / budget:>12.2f}  {said}")


if __name__ == "__main__":
    main()
