#!/usr/bin/env bash
# PaRO's strategies measured on the emulated cluster, side by side in one run
# per shape, against hoccl-paro's predictions (docs/paro.md):
#   results/scripts/paro-measure.sh [build-dir] [out-dir]        (root; minutes per shape)
# Shapes (SHAPES, default "a b"), those of docs/algorithms.md:
#   a: 2 nodes x 4 ranks under one leaf, 1 Gbit/s node links;
#   b: 4 nodes x 2 ranks under 2 leaves, 1 Gbit/s node links and 0.5 Gbit/s
#      uplinks (4:1 oversubscribed).
# Environment: PARAMS (5M), LAYERS (8), ACCUM (4), BATCH (8), WARMUP (1),
# ROUNDS (9) and STEPS (1): each round runs STEPS timed steps and replays
# of every strategy, the order rotated, and each strategy reports its
# medians, so one slow spell of the host does not decide a strategy's
# numbers; STRATEGIES (all); ONE_AT_A_TIME (unset; set: hold one model at a
# time, for models too large to hold every strategy's at once).
# Writes OUT/paro-SHAPE.md (the table), OUT/paro-SHAPE.json (every number)
# and OUT/paro.png (results/scripts/paro-plot.py). The emulated nodes share this
# machine's cores and memory, so the benchmark measures an all-gather on
# every node at once between the strategies' runs and the advisor fits its
# intra-node copy rates to the median (--calibrate-intra, hoccl-paro
# --intra-allgather); the link rates are the cluster's own.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$root/out/paro}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# shellcheck source=results/scripts/emulated-tune.sh
. "$root/results/scripts/emulated-tune.sh"
cluster="$root/tests/cluster/cluster.sh"
if ! "$cluster" check >/dev/null; then
  echo "paro-measure: the emulated cluster cannot run here (needs root, network namespaces, tbf)" >&2
  exit 77
fi
py=${HOCCL_TORCH_PYTHON:-/usr/bin/python3}
[ -f "$build/bindings/torch/python/hoccl_torch/paro.py" ] || {
  echo "paro-measure: $build has no PyTorch backend (configure with HOCCL_BUILD_TORCH=ON)" >&2
  exit 1
}
declare -A up=([a]="--nodes 2 --switches 1 --node-gbit 1" [b]="--nodes 4 --switches 2 --node-gbit 1 --uplink-gbit 0.5")
declare -A adv=([a]="--leaves 1 --node-gbit 1" [b]="--leaves 2 --node-gbit 1 --uplink-gbit 0.5")
declare -A ranks=([a]=4 [b]=2) upgbit=([a]=0 [b]=0.5)
# 8 ranks on this machine's cores: the model's latencies scale (src/tune/model.h).
over=$(awk -v c="$(nproc)" 'BEGIN { x = 8 / c; print (x < 1 ? 1 : x) }')
name=paro$$
trap '"$cluster" down --name $name >/dev/null 2>&1 || true' EXIT
for shape in ${SHAPES:-a b}; do
  tunefile="$out/emulated-$shape.tune"
  emulated_tune_file 1 "${upgbit[$shape]}" "$tunefile"
  export HOCCL_TUNE_FILE="$tunefile" HOCCL_PARO="$build/hoccl-paro"
  export PYTHONPATH="$build/bindings/torch/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1
  "$cluster" up ${up[$shape]} --name $name --owner $$ >/dev/null
  echo "== shape $shape" >&2
  "$cluster" run --cluster $name --ranks-per-node ${ranks[$shape]} --timeout 3000 -- \
    "$py" "$root/bindings/torch/examples/paro_bench.py" --params "${PARAMS:-5M}" --layers "${LAYERS:-8}" \
    --accum "${ACCUM:-4}" --batch "${BATCH:-8}" --steps "${STEPS:-1}" --warmup "${WARMUP:-1}" \
    --rounds "${ROUNDS:-9}" \
    ${STRATEGIES:+--strategies "$STRATEGIES"} ${ONE_AT_A_TIME:+--one-at-a-time} --calibrate-intra \
    --advisor-args "${adv[$shape]} --oversubscription $over --tune-file $tunefile" \
    --json "$out/paro-$shape.json" | tee "$out/paro-$shape.md"
  "$cluster" down --name $name >/dev/null
done
# The plot of every shape measured now (docs/paro.md).
plots=()
for shape in ${SHAPES:-a b}; do plots+=("$out/paro-$shape.json"); done
"$py" "$root/results/scripts/paro-plot.py" "${plots[@]}" -o "$out/paro.png"
