#!/usr/bin/env bash
# DDP step time of several configurations in alternating order, round after
# round, on an emulated cluster that is already up (tests/cluster), under
# Debian 12's torch 1.13 (/usr/bin/python3) with the backend of build/.
#
#   results/scripts/ddp-alternate.sh CLUSTER ROUNDS STEPS "label|env|args" ...
#
# Each configuration: a label, environment settings for the ranks (space
# separated; "X=1" for none) and ddp_train.py's arguments, e.g.
#   "floor|X=1|--no-comm"  "hoccl|X=1|--backend hoccl"  "gloo|X=1|--backend gloo"
#   "old|LD_LIBRARY_PATH=DIR|--backend hoccl"   (another libhoccl.so.0 in DIR)
# Prints each run (step ms : CPU ms per step over all ranks) and, at the
# end, each configuration's medians. The cluster: 2 ranks per node.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${1:?usage: ddp-alternate.sh CLUSTER ROUNDS STEPS "label|env|args" ...}
rounds=${2:?rounds} steps=${3:?steps}
shift 3
cd "$root"
declare -A res
for ((r = 1; r <= rounds; r++)); do
  for spec in "$@"; do
    IFS='|' read -r label envs args <<<"$spec"
    # shellcheck disable=SC2086  # envs and args are word lists
    v=$(tests/cluster/cluster.sh run --cluster "$cluster" --ranks-per-node 2 -- env $envs \
          PYTHONPATH=build/bindings/torch/python /usr/bin/python3 bindings/torch/examples/ddp_train.py \
          --json --steps "$steps" $args 2>&1 | grep '^{' |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.2f:%.1f" % (d["step_ms"], d["cpu_ms"]))')
    res[$label]="${res[$label]:-} $v"
    echo "round $r $label $v"
  done
done
for spec in "$@"; do
  IFS='|' read -r label _ _ <<<"$spec"
  echo "$label:${res[$label]}" | python3 -c '
import sys, statistics
label, runs = sys.stdin.read().split(":", 1)
xs = [tuple(map(float, p.split(":"))) for p in runs.split()]
print(f"{label:20s} step median {statistics.median(x[0] for x in xs):6.2f}  cpu median "
      f"{statistics.median(x[1] for x in xs):6.1f}   all {[x[0] for x in xs]}")'
done
