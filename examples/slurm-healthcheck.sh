#!/bin/bash
# Slurm HealthCheckProgram: the light probe on every node, every few minutes. slurm.conf:
#   HealthCheckProgram=/etc/slurm/gpudoctor-healthcheck.sh
#   HealthCheckInterval=300
#
# slurmd runs it as root with no PATH, on every node (drained ones too), and ignores its exit code: it drains
# a failing node itself, with a reason tagged "gpudoctor:", and resumes a node only when gpudoctor drained it
# and it now passes. A node drained, draining or down for any other reason is an administrator's and is
# never touched, failing or passing. Extra gpudoctor options (a config file, say): GPUDOCTOR_EXTRA.
#
# gpudoctor missing or failing itself (exit 2 or 3) touches no node, and monitoring is told: a syslog line (tag
# gpudoctor) and gpudoctor_up{hook="healthcheck"} 0 in node_exporter's textfile folder (where that folder
# exists; 1 again once gpudoctor runs).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
hook=healthcheck
shared=$(dirname "$0")/gpudoctor-slurm-hooks.sh # what both Slurm hooks share: install it beside this script
. "$shared" || {
  logger -t gpudoctor "health check: $shared is missing: node not checked"
  exit 0
}
# Where the README's node-wide install puts it (a venv in /opt/gpudoctor, installed from a checkout or a wheel).
gpudoctor=${GPUDOCTOR:-/opt/gpudoctor/bin/gpudoctor}
[ -x "$gpudoctor" ] || gpudoctor=$(command -v gpudoctor) ||
  not_checked "health check: gpudoctor is not installed (/opt/gpudoctor/bin/gpudoctor)"

# The light probe: NVML, system and kernel-log facts only (no torch).
line=$("$gpudoctor" check --only health driver system.shm ${gpus:+--expect-gpus "$gpus"} --format npd \
  ${GPUDOCTOR_EXTRA:-} 2>/dev/null)
rc=$?
[ "$rc" -gt 1 ] && not_checked "health check on $node: gpudoctor exited $rc"
up 1
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
fi
exit 0
