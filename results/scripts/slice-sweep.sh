#!/usr/bin/env bash
# All-reduce time against the slice (HOCCL_SLICE_BYTES) and the slots
# (HOCCL_SLOTS): on an emulated cluster of 2 nodes x 2 ranks and on one node
# of 4 ranks, the settings in alternating order, round after round.
#
#   results/scripts/slice-sweep.sh OUT_DIR [--rounds R] [--node-gbit G] [--build DIR]
#
# Writes OUT_DIR/sweep.log: one line per run, "<where> <setting> <bytes>
# <out-of-place us> ..." (all_reduce_perf's sizes 256 KiB to 64 MiB).
# Needs root and network namespaces for the cluster part (tests/cluster).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: slice-sweep.sh OUT_DIR [--rounds R] [--node-gbit G] [--build DIR]}
shift
rounds=3 gbit=10 build=$root/build
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --node-gbit) gbit=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "slice-sweep.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
log=$out/sweep.log
: >"$log"
cluster=$root/tests/cluster/cluster.sh
name=$("$cluster" up --nodes 2 --node-gbit "$gbit" --name "slices$$" --owner $$)
trap '"$cluster" down --name "$name" >/dev/null 2>&1 || true' EXIT
bench=("$build/perf/all_reduce_perf" -b 256K -e 64M -f 4 -w 5 -n 30 -c 1)
# Each line: the sizes and out-of-place times of one run; a run with wrong
# results stops the sweep.
oop_times() { awk '/^ +[0-9]+ /{if ($9 != 0 || $13 != 0) {print "WRONG"; exit 1} printf " %s %s", $1, $6} END {print ""}'; }
cluster_settings=("HOCCL_SLICE_BYTES=128K" "HOCCL_SLICE_BYTES=128K HOCCL_SLOTS=32"
                  "HOCCL_SLICE_BYTES=256K HOCCL_SLOTS=16" "HOCCL_SLICE_BYTES=512K" "HOCCL_SLICE_BYTES=1M")
local_settings=("HOCCL_SLICE_BYTES=128K" "HOCCL_SLICE_BYTES=512K")
for ((r = 1; r <= rounds; r++)); do
  for s in "${cluster_settings[@]}"; do
    line=$("$cluster" run --cluster "$name" --ranks-per-node 2 --timeout 300 -- env $s "${bench[@]}" 2>&1 | oop_times)
    echo "2x2-${gbit}g ${s// /,}$line" | tee -a "$log"
  done
  for s in "${local_settings[@]}"; do
    line=$(env $s "${bench[@]}" --np 4 2>&1 | oop_times)
    echo "local4 ${s// /,}$line" | tee -a "$log"
  done
done
