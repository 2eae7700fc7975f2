# Sourced by slurm-prolog.sh and slurm-healthcheck.sh from the folder they are in (install it beside them under
# this name): what both Slurm hooks do around gpudoctor. Each sets its own PATH first (Slurm gives none) and
# $hook, its name in the metric and its file.
textfiles=${GPUDOCTOR_TEXTFILE_DIR:-/var/lib/node_exporter/textfile}
up() { # up 0|1: whether gpudoctor could check this node, for node_exporter (a whole file, renamed into place)
  [ -d "$textfiles" ] || return 0
  printf '%s\n' "# HELP gpudoctor_up Whether gpudoctor ran in a Slurm hook (0: missing or failed, not checked)." \
    '# TYPE gpudoctor_up gauge' "gpudoctor_up{hook=\"$hook\"} $1" >"$textfiles/.gpudoctor-$hook.$$" &&
    mv -f "$textfiles/.gpudoctor-$hook.$$" "$textfiles/gpudoctor-$hook.prom"
}
# not_checked WHY: gpudoctor missing or failing itself touches no node; the job goes on, and monitoring is told.
not_checked() {
  logger -t gpudoctor "$1: node not checked"
  up 0
  exit 0
}
node=${SLURMD_NODENAME:-$(hostname -s)}

# The node's configured GPUs: the count of Gres=gpu[:type]:N[(S:...)] in `scontrol show node`, never the job's.
gpus=""
for item in $(scontrol show node "$node" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Gres=//p' | tr ',' ' '); do
  item=${item%%(*}
  [ "${item%%:*}" = gpu ] && gpus=${item##*:}
done
