#!/usr/bin/env bash
# results/scripts/paro-recost.py rebuilds the advisor's inputs from a recorded run:
# a run whose "measured" times are the advisor's own predictions / 1.1
# re-costs to +10% for every strategy, a run without its advisor options
# is refused, naming the option to give, and a run recorded under results/
# re-costs with the tune file beside it.
#   tests/paro_recost.sh HOCCL_PARO
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
paro=$1
command -v python3 >/dev/null || { echo "paro_recost: SKIPPED: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--leaves 2 --node-gbit 1 --uplink-gbit 0.5 --oversubscription 4 --node-mem-gbps 4.4 --optimizer-ns 9)
"$paro" --json --nodes 4 --ranks-per-node 2 --params 4923520 --accum 4 --dtype fp32 --units 8 "${args[@]}" \
  > "$tmp/advice.json" || [ $? = 3 ]
python3 - "$tmp" "${args[@]}" <<'PY'
import json, sys
tmp, args = sys.argv[1], sys.argv[2:]
advice = json.load(open(f"{tmp}/advice.json"))
rows = [{"strategy": s["name"], "comm_ms": s["comm_ms"] / 1.1} for s in advice["strategies"]]
run = {"shape": [4, 2], "params": 4923520, "accum": 4, "units": 8, "advisor_args": args, "rows": rows,
       "measured_fastest": "ZeRO-1"}
json.dump(run, open(f"{tmp}/run.json", "w"))
del run["advisor_args"]
json.dump(run, open(f"{tmp}/old.json", "w"))
PY
out=$(python3 "$root/results/scripts/paro-recost.py" --hoccl-paro "$paro" "$tmp/run.json")
echo "$out"
grep -q "10 of 10 within 20%" <<<"$out" || { echo "paro_recost: not every strategy re-costed"; exit 1; }
[ "$(grep -o '+10%' <<<"$out" | wc -l)" = 10 ] || { echo "paro_recost: the predictions were not reproduced"; exit 1; }
if python3 "$root/results/scripts/paro-recost.py" --hoccl-paro "$paro" "$tmp/old.json" 2>"$tmp/err"; then
  echo "paro_recost: a run without its advisor options was re-costed"; exit 1
fi
grep -q "give --advisor-args" "$tmp/err" || { cat "$tmp/err"; echo "paro_recost: the refusal does not say what to give"; exit 1; }
out=$(python3 "$root/results/scripts/paro-recost.py" --hoccl-paro "$paro" --advisor-args "${args[*]}" "$tmp/old.json")
grep -q "10 of 10 within 20%" <<<"$out" || { echo "$out"; echo "paro_recost: --advisor-args was not used"; exit 1; }
# A recorded run moved out of its output directory finds its tune file beside it.
out=$(python3 "$root/results/scripts/paro-recost.py" --hoccl-paro "$paro" "$root/results/20261129-paro/paro-b.json")
grep -q "of 10 within 20%" <<<"$out" || { echo "$out"; echo "paro_recost: the recorded run was not re-costed"; exit 1; }
echo "paro_recost: ok"
