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
textfiles=${GPUDOCTOR_TEXTFILE_DIR:-/var/lib/node_exporter/textfile}
up() { # up 0|1: whether gpudoctor could check this node, for node_exporter (a whole file, renamed into place)
  [ -d "$textfiles" ] || return 0
  printf '%s\n' "# HELP gpudoctor_up Whether gpudoctor ran in a Slurm hook (0: missing or failed, not checked)." \
    '# TYPE gpudoctor_up gauge' "gpudoctor_up{hook=\"healthcheck\"} $1" >"$textfiles/.gpudoctor-healthcheck.$$" &&
    mv -f "$textfiles/.gpudoctor-healthcheck.$$" "$textfiles/gpudoctor-healthcheck.prom"
}
# Where the README's node-wide install puts it (a venv in /opt/gpudoctor, installed from a checkout or a wheel).
gpudoctor=${GPUDOCTOR:-/opt/gpudoctor/bin/gpudoctor}
[ -x "$gpudoctor" ] || gpudoctor=$(command -v gpudoctor) || {
  logger -t gpudoctor "health check: gpudoctor is not installed (/opt/gpudoctor/bin/gpudoctor): node not checked"
  up 0
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
if [ "$rc" -gt 1 ]; then
  logger -t gpudoctor "health check on $node: gpudoctor exited $rc: node not checked"
  up 0
  exit 0
fi
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
