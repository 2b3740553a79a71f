#!/usr/bin/env bash
# Two builds side by side on the emulated cluster with fake GPUs: the four
# cluster_device runs of tests/cluster (all-reduce auto and HO-Ring,
# reduce-scatter, all-gather; 4 nodes x 2 ranks, 1 Gbit/s links), in turn,
# ROUNDS times, with heartbeats at HOCCL_HEARTBEAT_TIMEOUT (5 s). For each
# run: build, collective, exit status, seconds, context switches per second
# (vmstat's mean over the run), and the longest stall a heartbeat thread
# logged ("did not run for N s", HOCCL_DEBUG=WARN); then a summary per build.
#
#   results/scripts/fake-gpu-load.sh OLD_BUILD NEW_BUILD [ROUNDS] > table.txt
#
# Needs root (network namespaces) and builds with CUDA (the fake libcuda).
set -u
old=$1 new=$2 rounds=${3:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$here/tests/cluster/cluster.sh
hb=${HOCCL_HEARTBEAT_TIMEOUT:-5}
logs=$(mktemp -d /tmp/hoccl-fake-gpu-load.XXXXXX)

run_one() {  # build label coll algo path max
  local build=$1 label=$2 coll=$3 algo=$4 path=$5 max=$6 dir rc t0 t1 cs stall
  dir=$logs/$label-$coll-$algo-$path-$RANDOM
  mkdir -p "$dir"
  vmstat 1 >"$dir/vmstat" &
  local vm=$!
  t0=$(date +%s.%N)
  LD_LIBRARY_PATH=$build/tests/fakecuda HOCCL_NET_DEVICE_PATH=$path HOCCL_DEBUG=WARN HOCCL_HEARTBEAT_TIMEOUT=$hb \
    "$cluster" run --nodes 4 --switches 2 --node-gbit 1 --uplink-gbit 1 --ranks-per-node 2 --timeout 300 \
    --logdir "$dir" -- "$build/perf/${coll}_perf" --buffers device --algo "$algo" -b 8 -e "$max" -f 8 -n 2 -w 1 -c 1 \
    >"$dir/cluster.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  kill "$vm" 2>/dev/null
  wait "$vm" 2>/dev/null
  cs=$(awk 'NR > 2 { s += $12; n++ } END { printf "%.0f", n ? s / n : 0 }' "$dir/vmstat")
  stall=$(grep -ho 'did not run for [0-9.]*' "$dir"/rank*.err 2>/dev/null | awk '{ if ($5 > m) m = $5 } END { printf "%.1f", m + 0 }')
  silent=$(grep -l 'is silent' "$dir"/rank*.out "$dir"/rank*.err 2>/dev/null | wc -l)
  printf '%-4s %-15s %-6s %-5s %3d %7.1f %9s %6s %6s\n' "$label" "$coll" "$algo" "$path" "$rc" \
    "$(echo "$t1 - $t0" | bc)" "$cs" "$stall" "$silent"
}

printf '# %s; heartbeat timeout %s s; old %s, new %s; logs %s\n' "$(date -u +%FT%TZ)" "$hb" "$old" "$new" "$logs"
printf '%-4s %-15s %-6s %-5s %3s %7s %9s %6s %6s\n' build collective algo path rc seconds "cs/s" stall "silent"
for ((r = 0; r < rounds; r++)); do
  for spec in "all_reduce auto host 1M" "all_reduce horing host 1M" "reduce_scatter auto copy 1M" \
    "all_gather auto host 1M"; do
    read -r coll algo path max <<<"$spec"
    run_one "$old" old "$coll" "$algo" "$path" "$max"
    run_one "$new" new "$coll" "$algo" "$path" "$max"
  done
done | tee "$logs/rows"
awk '{ n[$1]++; if ($5 != 0) f[$1]++; t[$1] += $6; c[$1] += $7; if ($8 > s[$1]) s[$1] = $8 }
  END { for (b in n) printf "# %s: %d runs, %d failed, %.1f s in all, mean %.0f switches/s, longest heartbeat-thread stall %.1f s\n",
        b, n[b], f[b], t[b], c[b] / n[b], s[b] }' "$logs/rows"
