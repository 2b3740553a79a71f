#!/usr/bin/env bash
# Two builds of hoccl side by side: did a change move performance? Runs the
# same all_reduce_perf of each build in alternating order, round after
# round, on one node (4 ranks as processes) and on the emulated cluster's
# two shapes (docs/algorithms.md), then prints the median bus bandwidth of
# each build, their ratio and each build's spread over the rounds (the
# noise a ratio must beat).
#
#   perf/compare-builds.sh OLD_BUILD NEW_BUILD [--rounds R] [--size 64M] [-n ITERS] [-w WARMUP]
#                          [--where local,a,b] [--out DIR]
#
# OLD_BUILD / NEW_BUILD: build directories with perf/all_reduce_perf (for
# example a `git worktree` of the old commit built with -DCMAKE_BUILD_TYPE=Release).
# The cluster shapes need root and network namespaces (tests/cluster); a
# machine without them runs the local comparison only, saying so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "compare-builds: $*" >&2; }
die() { say "$*"; exit 1; }

rounds=3 size=64M iters=5 warmup=2 where=local,a,b out=""
[[ $# -ge 2 ]] || die "usage: perf/compare-builds.sh OLD_BUILD NEW_BUILD [--rounds R] [--size S] [-n N] [-w W] [--where local,a,b] [--out DIR]"
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd)
shift 2
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --where) where=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer (got $rounds)"
for b in "$old" "$new"; do
  [[ -x $b/perf/all_reduce_perf ]] || die "$b/perf/all_reduce_perf is missing: build that directory first"
done
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/compare-builds.XXXXXX")}
mkdir -p "$out"
cluster=$root/tests/cluster/cluster.sh
bench=(-b "$size" -e "$size" -n "$iters" -w "$warmup" -c 1)

# busbw of the out-of-place result in a JSON-lines file.
busbw() { sed -n 's/.*"oop":{[^}]*"busbw":\([0-9.]*\).*/\1/p' "$1" | tail -1; }

# run PLACE LABEL BUILD: one measurement, appended to $out/PLACE.LABEL
run() {
  local place=$1 label=$2 build=$3 json
  json=$(mktemp "$out/run.XXXXXX.json")
  case $place in
    local) "$build/perf/all_reduce_perf" "${bench[@]}" --np 4 -J "$json" >"$json.log" 2>&1 ;;
    *) "$cluster" run --cluster "$cname" --ranks-per-node "$rpn" --timeout 600 -- \
         "$build/perf/all_reduce_perf" "${bench[@]}" -J "$json" >"$json.log" 2>&1 ;;
  esac || die "$label's run on $place failed: $(tail -3 "$json.log")"
  grep -q '"wrong":0' "$json" || die "$label's run on $place reported wrong results ($json)"
  busbw "$json" >>"$out/$place.$label"
}

report() { # PLACE TITLE
  /usr/bin/env python3 - "$out/$1.old" "$out/$1.new" "$2" <<'EOF'
import statistics, sys
old = [float(x) for x in open(sys.argv[1]) if x.strip()]
new = [float(x) for x in open(sys.argv[2]) if x.strip()]
mo, mn = statistics.median(old), statistics.median(new)
spread = lambda v: (max(v) - min(v)) / statistics.median(v) * 100
print(f"{sys.argv[3]:<44} old {mo:7.3f}  new {mn:7.3f} GB/s busbw   new/old {mn / mo:5.3f}"
      f"   spread old {spread(old):4.1f}%  new {spread(new):4.1f}%   ({len(old)} rounds)")
EOF
}

cname=""
cleanup() { [[ -z $cname ]] || "$cluster" down --name "$cname" >/dev/null 2>&1 || true; }
trap cleanup EXIT

IFS=, read -r -a places <<<"$where"
for place in "${places[@]}"; do
  case $place in
    local) title="one node, 4 ranks (processes)" ;;
    a) up=(--nodes 2 --switches 1 --node-gbit 1) rpn=4 title="cluster (a) 2 nodes x 4, one switch" ;;
    b) up=(--nodes 4 --switches 2 --node-gbit 1 --uplink-gbit 0.5) rpn=2 title="cluster (b) 4 nodes x 2, 2 leaves" ;;
    *) die "unknown place $place (local, a or b)" ;;
  esac
  if [[ $place != local ]]; then
    if ! "$cluster" check >/dev/null 2>&1; then
      say "skipping $title: this machine cannot build the emulated cluster ($cluster check)"
      continue
    fi
    cname=$("$cluster" up "${up[@]}" --name "cb$$$place" --owner $$)
  fi
  : >"$out/$place.old"
  : >"$out/$place.new"
  for ((r = 0; r < rounds; r++)); do
    # Alternate which build goes first, so drift favours neither.
    if ((r % 2 == 0)); then run "$place" old "$old"; run "$place" new "$new"
    else run "$place" new "$new"; run "$place" old "$old"; fi
  done
  report "$place" "$title ($size)"
  if [[ -n $cname ]]; then "$cluster" down --name "$cname" >/dev/null; cname=""; fi
done
say "raw numbers in $out"
