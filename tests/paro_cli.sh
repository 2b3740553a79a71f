#!/usr/bin/env bash
# hoccl-paro's --intra-allgather and --engine: a measured intra-node all-gather fits the
# intra-node copy rates (the fitted model predicts the measured time, and a
# slower measurement fits lower rates); malformed values and one-rank nodes
# are refused, naming the option.
#   tests/paro_cli.sh HOCCL_PARO
set -euo pipefail
paro=$1
command -v python3 >/dev/null || { echo "paro_cli: SKIPPED: no python3"; exit 77; }
base=(--params 4923520 --accum 4 --dtype fp32 --units 8 --nodes 4 --ranks-per-node 2 --leaves 2 --node-gbit 1
      --uplink-gbit 0.5 --oversubscription 4)
fail() { echo "paro_cli: $*"; exit 1; }
for bad in 2461760 2461760: :7 x:7 2461760:0 2461760:-1 2461760:7ms 0:7; do
  if err=$("$paro" "${base[@]}" --intra-allgather "$bad" 2>&1 >/dev/null); then
    fail "--intra-allgather $bad accepted"
  fi
  grep -q -- "--intra-allgather $bad: expected BYTES:MS" <<<"$err" || fail "--intra-allgather $bad: $err"
done
if err=$("$paro" "${base[@]}" --engine sim 2>&1 >/dev/null); then fail "--engine sim accepted"; fi
grep -q -- "--engine sim: expected schedule, model or auto" <<<"$err" || fail "--engine sim: $err"
if err=$("$paro" "${base[@]}" --ranks-per-node 1 --intra-allgather 2461760:7 2>&1 >/dev/null); then
  fail "a fit on one-rank nodes was accepted"
fi
grep -q "more than one rank" <<<"$err" || fail "one-rank nodes: $err"
fit() {
  "$paro" --json "${base[@]}" --engine "${engine:-auto}" --intra-allgather "2461760:$1" | python3 -c '
import json, sys
f = json.load(sys.stdin)["intra_fit"]
want = float(sys.argv[1])
assert abs(f["predicted_ms"] / want - 1) < 0.01, f
assert not f["warning"], f
print(f["node_mem_gbps"])' "$1"
}
for engine in auto model; do
  slow=$(fit 9) && fast=$(fit 5) || fail "--engine $engine: the fit did not predict the measured time"
  awk -v s="$slow" -v f="$fast" 'BEGIN { exit !(s < f) }' ||
    fail "--engine $engine: 9 ms fitted $slow Gbit/s, 5 ms $fast"
done
"$paro" "${base[@]}" --intra-allgather 2461760:0.001 | grep -q "WARNING: the measured all-gather" ||
  fail "a time below the model's reach was not warned about"
echo "paro_cli: ok (node memory fitted: $slow Gbit/s at 9 ms, $fast at 5 ms)"
