#!/usr/bin/env bash
# Slurm Prolog (or a job's first step): refuse to start a job on a node that cannot train.
# Exit 0: go. Exit 1: the node is drained with a reason tagged "gpudoctor:" (so a later clean health check
# resumes it) and Slurm requeues the job elsewhere. Exit 2: gpudoctor itself was misused.
set -u
reports=${GPUDOCTOR_REPORTS:-/var/log/gpudoctor}
node=${SLURMD_NODENAME:-$(hostname -s)}
report=$reports/$node-${SLURM_JOB_ID:-manual}.json
mkdir -p "$reports"
gpudoctor check --level quick --expect-gpus "${SLURM_GPUS_ON_NODE:-8}" --format npd -o "$report" > "$report.line"
rc=$?
if [ "$rc" -eq 1 ]; then
  scontrol update NodeName="$node" State=DRAIN Reason="gpudoctor: $(cut -c1-60 "$report.line")"
fi
exit "$rc"
