#!/bin/bash
# Two nodes through torchrun's c10d rendezvous: run the same command on both, with node A's address, in the
# environment you train with (its torchrun, and the torch and gpudoctor installed beside it).
# gpudoctor sees RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and runs in cluster mode; the node torchrun
# makes rank 0 prints the cluster report, the other prints one line.
#
#   node-a$ RDZV=node-a:29400 bash examples/torchrun-two-nodes.sh
#   node-b$ RDZV=node-a:29400 bash examples/torchrun-two-nodes.sh
#
# The nodes seal what they tell each other with a secret both hold (docs/SECURITY.md): a file on a shared
# home that only you can read, made once with
#   umask 077; head -c 32 /dev/urandom | base64 > ~/.gpudoctor-secret
set -euo pipefail
: "${RDZV:?set RDZV=<host of one node>:29400}"
export GPUDOCTOR_RUN_SECRET_FILE=${GPUDOCTOR_RUN_SECRET_FILE:-$HOME/.gpudoctor-secret}
[ -f "$GPUDOCTOR_RUN_SECRET_FILE" ] || {
  echo "no run secret at $GPUDOCTOR_RUN_SECRET_FILE: anyone reaching the store could write to it" >&2
  unset GPUDOCTOR_RUN_SECRET_FILE
}
# Name the interface the nodes reach each other on where the host name does not resolve to it.
export GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-}
[ -n "$GLOO_SOCKET_IFNAME" ] || unset GLOO_SOCKET_IFNAME
exec torchrun --nnodes 2 --nproc-per-node 1 \
  --rdzv-backend c10d --rdzv-endpoint "$RDZV" --rdzv-id "gpudoctor-$(date +%Y%m%d)" \
  -m gpudoctor check --level standard "$@"
