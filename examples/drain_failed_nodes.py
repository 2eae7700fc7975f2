"""Drain the nodes a gpudoctor cluster report names, and resume those gpudoctor drained before that now pass.

    python3 examples/drain_failed_nodes.py cluster.json [--dry-run]

The report is rank 0's JSON (`gpudoctor check --json` or `-o`): its `cluster.failed_nodes` are drained with a
reason tagged "gpudoctor:", so a later clean run resumes exactly the nodes gpudoctor drained and never one an
administrator drained for another reason.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from typing import Any

TAG = "gpudoctor:"


def drain_reasons() -> dict[str, str]:
    """Each drained or down node's reason, from Slurm."""
    out = subprocess.run(["sinfo", "-R", "-h", "-N", "-o", "%N|%E"], capture_output=True, text=True, check=True)
    return dict(line.split("|", 1) for line in out.stdout.splitlines() if "|" in line)


def why(node: dict[str, Any], report: dict[str, Any]) -> str:
    """A short reason: lost, its own failing checks, or the cross-node result that names it."""
    if node.get("lost"):
        return f"lost: {node['lost']}"[:120]
    failing = [c["check_id"] for c in node["checks"] if c["status"] in ("fail", "error", "timeout")]
    named = [c["check_id"] for c in report["checks"] if any(r.get("node") == node["name"] for r in c["rows"])]
    return ", ".join(dict.fromkeys(failing + named))[:120] or "see the cluster report"


def commands(report: dict[str, Any], reasons: dict[str, str]) -> list[list[str]]:
    failed = set(report["cluster"]["failed_nodes"])
    planned = []
    for node in report["cluster"]["nodes"]:
        name = node["name"]
        if name in failed:
            reason = f"{TAG} {why(node, report)}"
            planned.append(["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"])
        elif reasons.get(name, "").startswith(TAG):
            planned.append(["scontrol", "update", f"NodeName={name}", "State=RESUME"])
    return planned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--dry-run", action="store_true", help="print the scontrol commands, run nothing")
    args = parser.parse_args()
    try:
        with open(args.report) as f:
            report = json.load(f)
        report["cluster"]["failed_nodes"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"drain_failed_nodes: {args.report} is not a gpudoctor cluster report: {exc}", file=sys.stderr)
        return 2
    for command in commands(report, drain_reasons()):
        print(shlex.join(command))
        if not args.dry_run:
            subprocess.run(command, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
