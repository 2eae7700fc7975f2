#!/usr/bin/env bash
# Slurm HealthCheckProgram (slurm.conf: HealthCheckProgram=/usr/local/sbin/gpudoctor-healthcheck,
# HealthCheckInterval=300). Slurm does not act on its exit code: the program drains the node itself, with a
# reason tagged "gpudoctor:", and resumes only a node that gpudoctor drained once it passes again.
set -u
node=${SLURMD_NODENAME:-$(hostname -s)}
# The light probe: NVML, system and kernel-log facts only (no torch).
line=$(gpudoctor check --only health driver system.shm --format npd ${GPUDOCTOR_EXTRA:-} 2>/dev/null)
rc=$?
reason=$(sinfo -h -N -n "$node" -o '%E' 2>/dev/null | head -1)
if [ "$rc" -eq 1 ]; then
  scontrol update NodeName="$node" State=DRAIN Reason="gpudoctor: ${line:0:60}"
elif [ "$rc" -eq 0 ] && [ "${reason#gpudoctor:}" != "$reason" ]; then
  scontrol update NodeName="$node" State=RESUME
fi
exit 0
