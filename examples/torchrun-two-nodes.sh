#!/bin/bash
# Two nodes through torchrun's c10d rendezvous: run the same command on both, with node A's address.
# gpudoctor sees RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and runs in cluster mode; the node torchrun
# makes rank 0 prints the cluster report, the other prints one line.
#
#   node-a$ RDZV=node-a:29400 bash examples/torchrun-two-nodes.sh
#   node-b$ RDZV=node-a:29400 bash examples/torchrun-two-nodes.sh
set -euo pipefail
: "${RDZV:?set RDZV=<host of one node>:29400}"
# Name the interface the nodes reach each other on where the host name does not resolve to it.
export GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-}
[ -n "$GLOO_SOCKET_IFNAME" ] || unset GLOO_SOCKET_IFNAME
exec torchrun --nnodes 2 --nproc-per-node 1 \
  --rdzv-backend c10d --rdzv-endpoint "$RDZV" --rdzv-id "gpudoctor-$(date +%Y%m%d)" \
  -m gpudoctor check --level standard "$@"
