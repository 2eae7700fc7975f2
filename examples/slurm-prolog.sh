#!/usr/bin/env bash
# Example Slurm prolog / job pre-flight: refuse to start a job on a node that cannot train.
# Exit 0: go; exit 1: drain reason in the log; exit 2: gpudoctor itself was misused.
set -u
report=/var/log/gpudoctor/$(hostname)-${SLURM_JOB_ID:-manual}.json
mkdir -p "$(dirname "$report")"
gpudoctor check --level quick --expect-gpus "${SLURM_GPUS_ON_NODE:-8}" -o "$report" >/dev/null
rc=$?
if [ "$rc" -ne 0 ]; then
  scontrol update nodename="$(hostname)" state=drain reason="gpudoctor: see $report"
fi
exit "$rc"
