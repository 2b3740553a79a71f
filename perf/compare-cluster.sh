#!/usr/bin/env bash
# hoccl, Open MPI (coll/han and coll/tuned) and Gloo side by side on the
# emulated cluster of tests/cluster, on the two shapes of docs/algorithms.md:
#   (a) 2 nodes x 4 ranks, one switch, 1 Gbit/s node links
#   (b) 4 nodes x 2 ranks, 2 leaves, 1 Gbit/s node links, 0.5 Gbit/s uplinks
#   (c) 2 nodes x 2 ranks, one switch, 1 Gbit/s node links (small messages)
# Needs root and iproute2 (network namespaces), Gloo and Open MPI built.
#
#   perf/compare-cluster.sh [--shapes a,b] [--rounds R] [--colls "all_reduce reduce_scatter all_gather"]
#                           [--small MIN:MAX:F | none] [--large MIN:MAX:F | none]
#                           [-n ITERS] [-w WARMUP] [--small-iters N] [--small-warmup N]
#                           [--no-select] [--timeout SEC] [--build DIR] [--out DIR]
#
# Every contender runs on the same namespaces and links, one process per
# rank: hoccl through `cluster.sh run` (with the cluster's topology file);
# Gloo the same way (rendezvous: a FileStore in OUT, TCP on each node's
# eth0, also inside a node); Open MPI through mpirun started in node 0's
# namespace, its daemons started in the other nodes' namespaces by
# perf/peers/netns-rsh-agent.sh, each node with its own hostname (vader
# inside a node, TCP between nodes). Open MPI runs twice: coll/tuned's
# default rules and coll/han (coll_han_priority 100). A selection round runs
# each of Gloo's algorithms once and keeps those that were the best at one
# size or more (at most 2). Timed rounds rotate the order as perf/compare.sh does.
#
# Prints per shape and collective a latency table (default 8 B-4 KiB) and a
# busbw table (default 64 KiB-16 MiB), then both shapes side by side, and
# writes OUT/compare-cluster.png (default OUT: out/compare-cluster).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmp_name=compare-cluster
# shellcheck source=compare-lib.sh
. "$root/perf/compare-lib.sh"

shapes=a,b rounds=2 select=1 job_timeout=900
small_sweep=8:4K:8 small_iters=20 small_warmup=5
large_sweep=64K:16M:4 iters=5 warmup=2
colls="all_reduce reduce_scatter all_gather"
out=$root/out/compare-cluster build=""
while [ $# -gt 0 ]; do
  case $1 in
    --shapes) shapes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --small) small_sweep=$2; shift 2 ;;
    --large) large_sweep=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --small-iters) small_iters=$2; shift 2 ;;
    --small-warmup) small_warmup=$2; shift 2 ;;
    --no-select) select=0; shift ;;
    --only) only=$2; shift 2 ;;
    --timeout) job_timeout=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
for s in "$small_sweep" "$large_sweep"; do [ "$s" = none ] || sweep_args "$s" >/dev/null; done
cluster=$root/tests/cluster/cluster.sh
agent=$root/perf/peers/netns-rsh-agent.sh
"$cluster" check || die "the emulated cluster cannot run here (root and iproute2 needed; see tests/cluster/README.md)"
for c in mpirun unshare; do command -v $c >/dev/null || die "$c not found (Debian: openmpi-bin, util-linux)"; done

build_benchmarks "$build"
gloo=$build/perf/peers/gloo_perf
mpi=$build/perf/peers/mpi_perf
[ -x "$gloo" ] || die "gloo_perf not built in $build (Debian: libgloo-dev)"
[ -x "$mpi" ] || die "mpi_perf not built in $build (Debian: libopenmpi-dev openmpi-bin)"
pick_python

declare -A transport=(
  [hoccl]="shared memory in a node, TCP between nodes"
  [gloo]="TCP everywhere (no shared-memory transport)"
  [mpi-tuned]="ob1: vader in a node, TCP between nodes"
  [mpi-han]="ob1: vader in a node, TCP between nodes"
)

peers_for() { # coll
  local a words="hoccl:auto mpi-han:han mpi-tuned:rules"
  for a in $(gloo_algos "$1"); do words+=" gloo:$a"; done
  echo "$words"
}

launch() { # variant coll args-array-name json log
  local variant=$1 coll=$2 json=$4 log=$5
  local -n a=$3
  local run=("$cluster" run --cluster "$name" --ranks-per-node "$rpn" --timeout "$job_timeout" --logdir "$sdir/ranks")
  case ${variant%%:*} in
    hoccl) "${run[@]}" -- "$build/perf/${coll}_perf" "${a[@]}" -J "$json" >"$log" 2>&1 ;;
    gloo)
      local store rc=0
      store=$(mktemp -d "$sdir/store.XXXXXX")
      "${run[@]}" -- env GLOO_PERF_STORE="$store" GLOO_SOCKET_IFNAME=eth0 \
        "$gloo" "$coll" --extra "${variant#*:}" "${a[@]}" -J "$json" >"$log" 2>&1 || rc=$?
      rm -rf "$store"
      return $rc ;;
    mpi-*)
      local -a extra=()
      [[ $variant == mpi-han:* ]] && extra=(--mca coll_han_priority 100)
      # Open MPI 4.1.4's coll/han crashes on in-place all-reduces larger
      # than one segment: han is timed out of place only there.
      local -a mpi_opts=()
      [[ $variant == mpi-han:* && $coll == all_reduce ]] && mpi_opts=(--extra out_of_place)
      timeout -k 5 "$job_timeout" "$cluster" exec --name "$name" 0 -- \
        env COMPARE_HOSTS_FILE="$sdir/hosts" unshare --uts --mount sh -c \
        'mount --bind "$0" /etc/hosts && hostname node0 && exec "$@"' "$sdir/hosts" \
        mpirun "${mpirun_args[@]}" "${extra[@]}" "$mpi" "$coll" "${mpi_opts[@]}" "${a[@]}" -J "$json" >"$log" 2>&1 ;;
  esac
}

name=""
cleanup() {
  if [ -n "$name" ]; then "$cluster" down --name "$name" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$out"; mkdir -p "$out"
start=$SECONDS
dirs=()
IFS=, read -r -a shape_list <<<"$shapes"
for shape in "${shape_list[@]}"; do
  case $shape in
    a) up=(--nodes 2 --switches 1 --node-gbit 1) rpn=4
       title="shape (a): 2 nodes x 4 ranks, one switch, 1 Gbit/s node links"; short="(a) 2x4" ;;
    b) up=(--nodes 4 --switches 2 --node-gbit 1 --uplink-gbit 0.5) rpn=2
       title="shape (b): 4 nodes x 2 ranks, 2 leaves, 1 Gbit/s node links, 0.5 Gbit/s uplinks"; short="(b) 4x2" ;;
    c) up=(--nodes 2 --switches 1 --node-gbit 1) rpn=2
       title="shape (c): 2 nodes x 2 ranks, one switch, 1 Gbit/s node links"; short="(c) 2x2" ;;
    *) die "unknown shape $shape (a, b or c)" ;;
  esac
  nodes=${up[1]}
  world=$((nodes * rpn))
  sdir=$out/$shape
  mkdir -p "$sdir"
  name=$("$cluster" up "${up[@]}" --name "cmp$$$shape" --owner $$)
  # Open MPI's view of the cluster: nodeI at node I's address, K slots each.
  { echo "127.0.0.1 localhost"
    for ((i = 0; i < nodes; i++)); do
      addr=$("$cluster" exec --name "$name" "$i" -- ip -4 -o addr show dev eth0 | awk '{ sub(/\/.*/, "", $4); print $4 }')
      echo "$addr node$i"
    done; } >"$sdir/hosts"
  for ((i = 0; i < nodes; i++)); do echo "node$i slots=$rpn"; done >"$sdir/hostfile"
  mpirun_args=(--allow-run-as-root --oversubscribe --bind-to none --hostfile "$sdir/hostfile" -np "$world"
    --map-by slot --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1
    --mca oob_tcp_if_include eth0 --mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include eth0
    --mca mpi_yield_when_idle 1 ${MPI_EXTRA_MCA:-})
  say "$title: cluster $name"
  shape_start=$SECONDS
  out_saved=$out
  out=$sdir
  for coll in $colls; do run_collective "$coll"; done
  out=$out_saved
  "$cluster" down --name "$name" >/dev/null
  name=""
  cat >"$sdir/meta.json" <<EOF
{"title": "$title", "short": "$short", "ranks": $world,
 "command": "perf/compare-cluster.sh --shapes $shape --rounds $rounds --small $small_sweep --large $large_sweep -n $iters -w $warmup --small-iters $small_iters --small-warmup $small_warmup --colls \\"$colls\\"$( ((select)) || echo ' --no-select')",
 "runtime_s": $((SECONDS - shape_start))}
EOF
  dirs+=("$sdir")
done
rc=0
"$py" "$root/perf/compare_report.py" "${dirs[@]}" --plot "$out/compare-cluster.png" \
  --expect-groups "${only:-hoccl,mpi-han,mpi-tuned,gloo}" || rc=$?
say "results in $out; $((SECONDS - start)) s"
exit $rc
