#!/bin/bash
# Slurm Prolog: no job starts on a node that cannot train. slurm.conf:
#   Prolog=/etc/slurm/gpudoctor-prolog.sh
#
# Slurm runs a prolog as root with no PATH and none of the job's GPU variables (SLURM_GPUS_ON_NODE is never
# set here, whatever the job asked for): this script sets its own PATH and takes the GPU count from the
# node's own configuration (Gres=gpu:N in slurm.conf), never from the job. It runs on every node of a job,
# one node or many.
#
# Exit 0: the job starts. A failed check: the node is drained with a reason tagged "gpudoctor:" (so
# slurm-healthcheck.sh resumes it once it passes), and the prolog fails, so Slurm requeues a batch job (held
# unless SchedulerParameters=nohold_on_prolog_fail) and fails an srun job. gpudoctor missing or failing itself
# (exit 2 or 3) never drains a node: the job starts unchecked, and monitoring is told, by a syslog line (tag
# gpudoctor) and by gpudoctor_up{hook="prolog"} 0 in node_exporter's textfile folder (where that folder exists;
# 1 again once gpudoctor runs). A node an administrator already drained is left with the administrator's reason.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
hook=prolog
shared=$(dirname "$0")/gpudoctor-slurm-hooks.sh # what both Slurm hooks share: install it beside this script
. "$shared" || {
  logger -t gpudoctor "prolog: $shared is missing: node not checked"
  exit 0
}
# Where the README's node-wide install puts it (a venv in /opt/gpudoctor, installed from a checkout or a wheel).
gpudoctor=${GPUDOCTOR:-/opt/gpudoctor/bin/gpudoctor}
[ -x "$gpudoctor" ] || gpudoctor=$(command -v gpudoctor) ||
  not_checked "prolog: gpudoctor is not installed (/opt/gpudoctor/bin/gpudoctor)"
reports=${GPUDOCTOR_REPORTS:-/var/log/gpudoctor}
mkdir -p "$reports"

line=$("$gpudoctor" check --only health driver system.shm ${gpus:+--expect-gpus "$gpus"} --format npd \
  -o "$reports/$node-${SLURM_JOB_ID:-manual}.json" 2>>"$reports/$node-prolog.log")
rc=$?
[ "$rc" -gt 1 ] && not_checked "prolog on $node: gpudoctor exited $rc (see $reports/$node-prolog.log)"
up 1
if [ "$rc" -eq 1 ]; then
  reason=$(sinfo -h -N -n "$node" -o '%E' 2>/dev/null | head -n 1)
  case $reason in
    "" | none | gpudoctor:*) scontrol update NodeName="$node" State=DRAIN Reason="gpudoctor: ${line:0:100}" ;;
  esac
  exit 1
fi
exit 0
