#!/bin/bash
# Slurm HealthCheckProgram: the light probe on every node, every few minutes. slurm.conf:
#   HealthCheckProgram=/etc/slurm/gpudoctor-healthcheck.sh
#   HealthCheckInterval=300
#
# slurmd runs it as root with no PATH, on every node (drained ones too), and ignores its exit code: it drains
# a failing node itself, with a reason tagged "gpudoctor:", and resumes a node only when gpudoctor drained it
# and it now passes. A node drained, draining or down for any other reason is an administrator's and is
# never touched, failing or passing. Extra gpudoctor options (a config file, say): GPUDOCTOR_EXTRA.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Where the README's node-wide install puts it (a venv in /opt/gpudoctor, installed from a checkout or a wheel).
gpudoctor=${GPUDOCTOR:-/opt/gpudoctor/bin/gpudoctor}
[ -x "$gpudoctor" ] || gpudoctor=$(command -v gpudoctor) || {
  logger -t gpudoctor "health check: gpudoctor is not installed (/opt/gpudoctor/bin/gpudoctor)"
  exit 0
}
node=${SLURMD_NODENAME:-$(hostname -s)}

gpus=""
for item in $(scontrol show node "$node" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Gres=//p' | tr ',' ' '); do
  item=${item%%(*}
  [ "${item%%:*}" = gpu ] && gpus=${item##*:}
done

# The light probe: NVML, system and kernel-log facts only (no torch).
line=$("$gpudoctor" check --only health driver system.shm ${gpus:+--expect-gpus "$gpus"} --format npd \
  ${GPUDOCTOR_EXTRA:-} 2>/dev/null)
rc=$?
state=$(sinfo -h -N -n "$node" -o '%T|%E' 2>/dev/null | head -n 1)
reason=${state#*|}
held=false
case ${state%%|*} in *drain* | *down* | *fail*) held=true ;; esac
case $reason in gpudoctor:*) ours=true ;; *) ours=false ;; esac
if $held && ! $ours; then
  exit 0 # an administrator's: left as it is
elif [ "$rc" -eq 1 ]; then
  scontrol update NodeName="$node" State=DRAIN Reason="gpudoctor: ${line:0:100}"
elif [ "$rc" -eq 0 ] && $held && $ours; then
  scontrol update NodeName="$node" State=RESUME
elif [ "$rc" -gt 1 ]; then
  logger -t gpudoctor "health check on $node: gpudoctor exited $rc: node not checked"
fi
exit 0
