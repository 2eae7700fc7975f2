#!/bin/bash
# Slurm Prolog: no job starts on a node that cannot train. slurm.conf:
#   Prolog=/etc/slurm/gpudoctor-prolog.sh
#
# Slurm runs a prolog as root with no PATH and none of the job's GPU variables (SLURM_GPUS_ON_NODE is never
# set here, whatever the job asked for): this script sets its own PATH and takes the GPU count from the
# node's own configuration (Gres=gpu:N in slurm.conf), never from the job.
#
# Exit 0: the job starts. A failed check: the node is drained with a reason tagged "gpudoctor:" (so
# slurm-healthcheck.sh resumes it once it passes), and the prolog fails, so Slurm requeues a batch job (held
# unless SchedulerParameters=nohold_on_prolog_fail) and fails an srun job. gpudoctor missing or misused
# never drains a node: the job starts and the problem goes to syslog (tag gpudoctor). A node an
# administrator already drained is left with the administrator's reason.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Where the README's node-wide install puts it (a venv in /opt/gpudoctor, installed from a checkout or a wheel).
gpudoctor=${GPUDOCTOR:-/opt/gpudoctor/bin/gpudoctor}
[ -x "$gpudoctor" ] || gpudoctor=$(command -v gpudoctor) || {
  logger -t gpudoctor "prolog: gpudoctor is not installed (/opt/gpudoctor/bin/gpudoctor): node not checked"
  exit 0
}
node=${SLURMD_NODENAME:-$(hostname -s)}
reports=${GPUDOCTOR_REPORTS:-/var/log/gpudoctor}
mkdir -p "$reports"

# The node's configured GPUs: the count of Gres=gpu[:type]:N[(S:...)] in `scontrol show node`.
gpus=""
for item in $(scontrol show node "$node" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Gres=//p' | tr ',' ' '); do
  item=${item%%(*}
  [ "${item%%:*}" = gpu ] && gpus=${item##*:}
done

line=$("$gpudoctor" check --only health driver system.shm ${gpus:+--expect-gpus "$gpus"} --format npd \
  -o "$reports/$node-${SLURM_JOB_ID:-manual}.json" 2>>"$reports/$node-prolog.log")
rc=$?
if [ "$rc" -eq 1 ]; then
  reason=$(sinfo -h -N -n "$node" -o '%E' 2>/dev/null | head -n 1)
  case $reason in
    "" | none | gpudoctor:*) scontrol update NodeName="$node" State=DRAIN Reason="gpudoctor: ${line:0:100}" ;;
  esac
  exit 1
elif [ "$rc" -ne 0 ]; then
  logger -t gpudoctor "prolog on $node: gpudoctor exited $rc (see $reports/$node-prolog.log): node not checked"
fi
exit 0
