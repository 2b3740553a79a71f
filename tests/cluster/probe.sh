#!/usr/bin/env bash
# hoccl-topo probe on the emulated cluster: with no topology file, does it
# find the leaf groups the cluster was built with, and the node-link and
# uplink rates within 10%?
#   tests/cluster/probe.sh HOCCL_TOPO [--shapes ci|all] [--out DIR] [--probe-args "ARGS"]
#   tests/cluster/probe.sh --at-init "PROGRAM ARGS" [--shapes ci|all] [--out DIR]
# (ARGS go to hoccl-topo probe, e.g. "--sample 6"). With --at-init the probe
# runs inside the library instead: PROGRAM (a hoccl job, e.g. a benchmark)
# runs with HOCCL_TOPO_PROBE=1 and HOCCL_TOPO_PROBE_DIR, and the files it
# leaves there are checked the same way.
# Shapes: ci is 8 nodes under 2 leaves, 0.2 Gbit/s node links and one
# 0.2 Gbit/s uplink per leaf (4:1), 2 processes per node; all adds one
# switch (4 nodes, 0.5 Gbit/s) and 3 leaves with 3, 2 and 2 nodes (0.2
# Gbit/s links, 0.1 Gbit/s uplinks). Rates are low so that every flow the
# probe starts at once fits this machine's cores. A shape that fails is
# measured once more before it counts (other work on the machine can
# starve a flow). Exit 77 (skipped) where the test bed cannot run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
topo=${1:?usage: probe.sh path/to/hoccl-topo|--at-init "PROGRAM ARGS" [--shapes ci|all] [--out DIR] [--probe-args "ARGS"]}
shift
shapes=ci out=
probeargs=() atinit=()
if [ "$topo" = --at-init ]; then
  read -r -a atinit <<<"${1:?--at-init needs a program}"
  shift
fi
while [ $# -gt 0 ]; do
  case $1 in
    --shapes) shapes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --probe-args) read -r -a probeargs <<<"$2"; shift 2 ;;
    *) echo "probe.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
"$here/cluster.sh" check >/dev/null || exit $?
out=${out:-$(mktemp -d /tmp/hoccl-probe.XXXXXX)}
mkdir -p "$out"
declare -a list=("8 2 0.2 0.2 2")
[ "$shapes" = all ] && list+=("4 1 0.5 0 1" "7 3 0.2 0.1 1")
rc=0
name=p$$
trap '"$here/cluster.sh" down --name $name >/dev/null 2>&1 || true' EXIT
for shape in "${list[@]}"; do
  read -r nodes leaves node up rpn <<<"$shape"
  tag=${nodes}n${leaves}l
  ok=0
  for try in 1 2; do
    d=$out/$tag.$try
    mkdir -p "$d"
    upopt=()
    [ "$up" != 0 ] && upopt=(--uplink-gbit "$up")
    "$here/cluster.sh" up --nodes "$nodes" --switches "$leaves" --node-gbit "$node" "${upopt[@]}" \
      --name "$name" --owner $$ >/dev/null
    cp "/run/hoccl-cluster/$name/topo.json" "$d/built.json"
    if [ ${#atinit[@]} -gt 0 ]; then
      run=(env HOCCL_TOPO_PROBE=1 HOCCL_TOPO_PROBE_DIR="$d" HOCCL_DEBUG=INFO HOCCL_DEBUG_SUBSYS=INIT
           "$here/cluster.sh" run --cluster "$name" --ranks-per-node "$rpn" --timeout 300 --topo-file none
           --logdir "$d/logs" -- "${atinit[@]}")
    else
      run=("$here/cluster.sh" run --cluster "$name" --ranks-per-node "$rpn" --timeout 300 --topo-file none
           --logdir "$d/logs" -- "$topo" probe --out "$d" --quiet "${probeargs[@]}")
    fi
    if ! "${run[@]}" >"$d/probe.txt" 2>"$d/run.err"; then
      "$here/cluster.sh" down --name "$name" >/dev/null
      echo "probe $tag (try $try): the probe failed:"; tail -20 "$d/run.err"
      continue
    fi
    "$here/cluster.sh" down --name "$name" >/dev/null
    # The cluster's own file (what it was built with) against the probe's.
    if python3 - "$d/built.json" "$d/topology.json" "$node" "$up" <<'EOF'; then
import json, sys
truth, found = (json.load(open(p)) for p in sys.argv[1:3])
node, up = float(sys.argv[3]), float(sys.argv[4])
def leaves(doc):
    return sorted(sorted(s["nodes"]) for s in doc["switches"] if s.get("nodes"))
want, got = leaves(truth), leaves(found)
bad = []
if want != got:
    bad.append(f"groups {got}, built {want}")
for s in found["switches"]:
    if not s.get("nodes"):
        continue
    rate = s.get("link_gbps", 0)
    if abs(rate - node) > 0.1 * node:
        bad.append(f"{s['name']}: node links {rate} Gbit/s, built {node}")
    # A leaf's uplink only limits when its nodes can send more than it.
    limits = len(want) > 1 and 0 < up < node * len(s["nodes"])
    if limits and abs(s.get("uplink_gbps", 0) - up) > 0.1 * up:
        bad.append(f"{s['name']}: uplink {s.get('uplink_gbps')} Gbit/s, built {up}")
    if not limits and "uplink_gbps" in s:
        bad.append(f"{s['name']}: uplink {s['uplink_gbps']} Gbit/s reported, but none limits")
print("\n".join(bad) if bad else f"groups {got}: as built; rates within 10%")
sys.exit(1 if bad else 0)
EOF
      ok=1
      break
    fi
    echo "probe $tag (try $try): the probe's answer differs from the cluster:"; cat "$d/probe.txt"
  done
  if [ $ok = 1 ]; then
    if [ ${#atinit[@]} -gt 0 ]; then
      echo "probe $tag at init: PASSED ($(grep -m1 -o 'measured [0-9]* nodes in [0-9.]* s' "$d/logs/rank0.err"))"
    else
      echo "probe $tag: PASSED ($(grep -m1 '^measured in' "$d/probe.txt"))"
    fi
  else
    echo "probe $tag: FAILED"
    rc=1
  fi
done
exit $rc
