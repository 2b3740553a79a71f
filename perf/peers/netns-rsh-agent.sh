#!/bin/sh
# Open MPI's rsh agent on the emulated cluster (tests/cluster): mpirun calls
# it as `agent [options] HOST command...` to start its daemon on HOST. HOST
# is nodeI; the command runs in node I's network namespace, in new UTS and
# mount namespaces where the hostname is HOST and /etc/hosts is the
# cluster's (so that Open MPI sees one host per node: shared memory inside
# a node, TCP between nodes).
#
#   mpirun --mca plm_rsh_agent perf/peers/netns-rsh-agent.sh --mca plm_rsh_no_tree_spawn 1 ...
#
# Environment: HOCCL_CLUSTER (the cluster's name; cluster.sh exec sets it)
# and COMPARE_HOSTS_FILE (a hosts file naming each nodeI's address).
set -eu
while [ $# -gt 0 ]; do
  case $1 in -*) shift ;; *) break ;; esac # ssh-style options: none apply
done
[ $# -ge 2 ] || { echo "netns-rsh-agent: usage: agent HOST command..." >&2; exit 2; }
host=$1
shift
: "${HOCCL_CLUSTER:?netns-rsh-agent: HOCCL_CLUSTER is not set}"
: "${COMPARE_HOSTS_FILE:?netns-rsh-agent: COMPARE_HOSTS_FILE is not set}"
case $host in
  node[0-9]*) i=${host#node} ;;
  *) echo "netns-rsh-agent: unknown host $host (nodeI expected)" >&2; exit 2 ;;
esac
ns=hoccl-$HOCCL_CLUSTER-n$i
# Like ssh, the words after HOST are one command line for a shell.
exec ip netns exec "$ns" unshare --uts --mount sh -c \
  'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec sh -c "$*"' \
  agent "$COMPARE_HOSTS_FILE" "$host" "$@"
