#!/usr/bin/env bash
# Measures ring, hierarchical, HO-Ring and auto on the emulated cluster in
# the two shapes of docs/algorithms.md, runs hoccl-sim on the same shapes,
# and writes the crossover table, measured-vs-predicted errors and a plot.
#   results/scripts/algo-sweep.sh [build-dir] [out-dir]      (root; about an hour on 2 cores)
# CI runs a smoke version (one shape, all-reduce, 64 KiB-1 MiB: seconds).
# Environment: SHAPES ("a b"), COLLS ("all_reduce reduce_scatter all_gather"),
# ALGOS ("ring hierarchical horing auto"), MINB (64K), MAXB (256M),
# BUDGET (64M): bytes per size, so a size runs BUDGET/size iterations,
# at least ITERS (3) and at most MAX_ITERS (1000) (a few stray milliseconds
# of scheduling on 2 cores would swamp 3 iterations of a 64 KiB call), after
# warm-up iterations: a tenth as many, at least 1, and at least WARM (16M)
# bytes' worth up to the timed count (the first ~0.1 s after the ranks start
# ran up to 1.8x slower at 64 KiB: 20 warm-up calls were not enough, 200 were),
# ROUNDS (2): the report takes the best round of each algorithm's time; sizes
# below 4 MiB run SMALL_ROUNDS (5) rounds, as one 64 KiB-256 KiB
# configuration still varies by 20-30% from run to run on 2 cores (host
# scheduling of 8 ranks) and those rounds take seconds.
# The algorithms run side by side (perf --algo ring,hierarchical,...): one
# communicator each in the same job, the timed iterations split into
# interleaved blocks of at least BLOCK_CALLS (8) calls, at most BLOCKS (100)
# blocks (each block starts after a barrier, whose idle link time refills
# the tbf buckets: one call per block measured 1 MiB up to 20% faster than a
# loop does); auto's gap to the best forced algorithm is the median, over
# all rounds' blocks, of auto's time over that algorithm's in the same block
# (JSON lines in sidebyside.jsonl).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$root/out/algorithms}
mkdir -p "$out"
out=$(cd "$out" && pwd)
shapes=${SHAPES:-a b}
colls=${COLLS:-all_reduce reduce_scatter all_gather}
algos=${ALGOS:-ring hierarchical horing auto}
minb=${MINB:-64K} maxb=${MAXB:-256M} iters=${ITERS:-3} rounds=${ROUNDS:-2}
small_rounds=${SMALL_ROUNDS:-5}
[ "$small_rounds" -lt "$rounds" ] && small_rounds=$rounds
budget=${BUDGET:-64M} max_iters=${MAX_ITERS:-1000} warm=${WARM:-16M}
max_blocks=${BLOCKS:-100} block_calls=${BLOCK_CALLS:-8}
bytes() { numfmt --from=iec "$1"; }
# "-b LO -e HI -n N" runs that cover MINB..MAXB (sizes x4 from MINB), sizes
# with the same iteration count sharing a run.
ranges=()
# A run of sizes LO..HI at N iterations, after the warm-up ones.
add_range() {
  local lo_bytes w wb
  lo_bytes=$(bytes "$1")
  w=$(($3 / 10 > 1 ? $3 / 10 : 1)) wb=$(( $(bytes "$warm") / lo_bytes ))
  [ "$wb" -gt "$3" ] && wb=$3
  [ "$wb" -gt "$w" ] && w=$wb
  local nb=$(($3 / block_calls))
  [ "$nb" -gt "$max_blocks" ] && nb=$max_blocks
  [ "$nb" -lt 1 ] && nb=1
  ranges+=("-b $1 -e $2 -n $3 -w $w --blocks $nb")
  if [ "$lo_bytes" -lt $((4 << 20)) ]; then range_rounds+=("$small_rounds"); else range_rounds+=("$rounds"); fi
}
range_rounds=()
lo="" n_lo=""
size=$(bytes "$minb")
while [ "$size" -le "$(bytes "$maxb")" ]; do
  n=$(( $(bytes "$budget") / size ))
  [ "$n" -lt "$iters" ] && n=$iters
  [ "$n" -gt "$max_iters" ] && n=$max_iters
  if [ "$n" != "$n_lo" ]; then
    [ -n "$lo" ] && add_range "$lo" "$hi" "$n_lo"
    lo=$size n_lo=$n
  fi
  hi=$size
  size=$((size * 4))
done
[ -n "$lo" ] && add_range "$lo" "$hi" "$n_lo"
cluster="$root/tests/cluster/cluster.sh"
if ! "$cluster" check >/dev/null; then
  echo "algo-sweep: the emulated cluster cannot run here (needs root, network namespaces, tbf)" >&2
  exit 77
fi
csv="$out/measured.csv"
echo "shape,coll,algo,size,us,busbw,wrong,round" > "$csv"
jsonl="$out/sidebyside.jsonl"
: > "$jsonl"
algo_list=$(tr -s ' ' ',' <<<"$algos" | sed 's/^,//; s/,$//')
# shape: cluster options, hoccl-sim options
declare -A up sim
up[a]="--nodes 2 --switches 1 --node-gbit 1"
sim[a]="--nodes 2 --ranks-per-node 4 --leaves 1 --node-gbit 1"
up[b]="--nodes 4 --switches 2 --node-gbit 1 --uplink-gbit 0.5"
sim[b]="--nodes 4 --ranks-per-node 2 --leaves 2 --node-gbit 1 --uplink-gbit 0.5"
declare -A ranks=([a]=4 [b]=2)
declare -A gbit=([a]=1 [b]=1) upgbit=([a]=0 [b]=0.5)
# The emulated links' tbf buckets and queues, told to the model and the
# ranks through a tune file (HOCCL_TUNE_FILE): results/scripts/emulated-tune.sh.
# shellcheck source=results/scripts/emulated-tune.sh
. "$root/results/scripts/emulated-tune.sh"
name=sweep$$
trap '"$cluster" down --name $name >/dev/null 2>&1 || true' EXIT
for shape in $shapes; do
  tunefile="$out/emulated-$shape.tune"
  emulated_tune_file "${gbit[$shape]}" "${upgbit[$shape]}" "$tunefile"
  export HOCCL_TUNE_FILE="$tunefile"
  "$cluster" up ${up[$shape]} --name $name --owner $$ >/dev/null
  for coll in $colls; do
   for round in $(seq 1 "$small_rounds"); do
    echo "== shape $shape: $coll --algo $algo_list (round $round)" >&2
    table=""
    for i in "${!ranges[@]}"; do
      [ "$round" -gt "${range_rounds[$i]}" ] && continue
      range=${ranges[$i]}
      table+=$("$cluster" run --cluster $name --ranks-per-node ${ranks[$shape]} --timeout 900 -- \
        "$build/perf/${coll}_perf" $range -f 4 --algo "$algo_list" -J "$out/run.json" 2>/dev/null)$'\n'
      # The JSON rows are written inside the node namespace by rank 0 (the
      # host's file system): tag them with the shape and round.
      [ -f "$out/run.json" ] && sed "s/^{/{\"shape\":\"$shape\",\"round\":$round,/" "$out/run.json" >> "$jsonl"
      rm -f "$out/run.json"
    done
    # nccl-tests rows: size count type redop root time algbw busbw #wrong
    # (out of place first) ... algo (side by side: the last column)
    awk -v s="$shape" -v c="$coll" -v a="$algo_list" -v r="$round" \
      '/^ *[0-9]/ { printf "%s,%s,%s,%s,%s,%s,%s,%s\n", s, c, (NF >= 14 ? $14 : a), $1, $6, $8, $9, r }' \
      <<<"$table" | tee -a "$csv" >&2
   done
  done
  "$cluster" down --name $name >/dev/null
  # 8 ranks on this machine's cores: the latencies scale (src/tune/model.h).
  over=$(awk -v c="$(nproc)" 'BEGIN { x = 8 / c; print (x < 1 ? 1 : x) }')
  "$build/hoccl-sim" ${sim[$shape]} --oversubscription "$over" --tune-file "$tunefile" \
    -b "$minb" -e "$maxb" -f 4 --csv --engine both \
    | sed "s/^/$shape,/" > "$out/predicted-$shape.csv"
done
/usr/bin/python3 "$root/results/scripts/algo_report.py" "$out" | tee "$out/report.md"
# A sweep whose runs printed no rows or a wrong result fails.
if [ "$(wc -l < "$csv")" -le 1 ]; then
  echo "algo-sweep: no measurements in $csv" >&2
  exit 1
fi
if ! awk -F, 'NR > 1 && $7 != 0 { print "algo-sweep: wrong results: " $0 > "/dev/stderr"; bad = 1 } END { exit bad }' "$csv"; then
  exit 1
fi
