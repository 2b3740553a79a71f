#!/usr/bin/env bash
# The regression guard: the numbers hoccl is known for, old build against
# new, side by side. Builds OLD_REF (the last landed main) and the working
# tree, then runs all_reduce_perf of both in alternating order, round after
# round, on a fixed set of points, and prints per point the median time of
# each build, new/old, and each build's spread over the rounds (the noise a
# ratio must beat). A point whose new median is slower than the old by more
# than that noise (and by more than 2%) is flagged SLOWER.
#
#   perf/guard.sh OLD_REF [--rounds R] [--points P1,P2,...] [--out DIR]
#   perf/guard.sh --old-build DIR --new-build DIR [...]   (builds made already)
#   perf/guard.sh --smoke                                  (CI: checks that it works)
#
# Points (name: where, size):
#   local-8B         one node, 4 ranks as processes, 8 B all-reduce
#   local-64M        one node, 4 ranks, 64 MiB
#   2x2-slurm-64M    emulated 2 nodes x 2 ranks, one 1 Gbit/s switch, a Slurm topology.conf (no rates)
#   2x2-nofile-64M   the same with no topology file (discovery only)
#   2x2-8B           8 B across the 2 x 2 cluster, no file
#   4to1-slurm-64M   4 nodes x 2 ranks under 2 leaves, 1 Gbit/s nodes, 0.5 Gbit/s uplinks (4:1), Slurm file
#   4to1-nofile-64M  the same with no file
# The cluster points need root and network namespaces (tests/cluster); a
# machine without them runs the local points, saying so.
#
# Run it before a change to library or tuning code lands, and quote its
# table (docs: CONTRIBUTING.md). Exit status: 0, or 1 with --strict when a
# point is flagged.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "guard: $*" >&2; }
die() { say "$*"; exit 2; }

all_points=local-8B,local-64M,2x2-slurm-64M,2x2-nofile-64M,2x2-8B,4to1-slurm-64M,4to1-nofile-64M
rounds=3 points=$all_points out="" old_ref="" old_build="" new_build="" strict=0 smoke=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --points) points=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --old-build) old_build=$2; shift 2 ;;
    --new-build) new_build=$2; shift 2 ;;
    --strict) strict=1; shift ;;
    --smoke) smoke=1; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (--help lists them)" ;;
    *) [[ -z $old_ref ]] || die "one OLD_REF only (got $old_ref and $1)"; old_ref=$1; shift ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer (got $rounds)"
if ((smoke)); then
  # CI: one build against itself, one round of the cheap points, small.
  [[ -n $old_build ]] || old_build=$root/build
  new_build=${new_build:-$old_build}
  rounds=1 points=local-8B,local-64M,2x2-8B
fi
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/guard.XXXXXX")}
mkdir -p "$out"

# Release builds of the benchmark only, reused across runs (ccache if present).
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DHOCCL_BUILD_TESTS=OFF -DHOCCL_CUDA=OFF -DHOCCL_BUILD_TORCH=OFF
            -DHOCCL_BUILD_NCCL_PLUGINS=OFF -DHOCCL_MPI=OFF -DHOCCL_GLOO=OFF -DHOCCL_BENCHMARK=OFF)
command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
build_tree() { # SRC BUILD
  say "building $1 in $2"
  cmake -S "$1" -B "$2" "${cmake_args[@]}" >"$2.configure.log" 2>&1 || die "configure failed: $2.configure.log"
  cmake --build "$2" -j "$(nproc)" --target all_reduce_perf >"$2.build.log" 2>&1 || die "build failed: $2.build.log"
}
guard_dir=$root/build-guard
if [[ -z $old_build ]]; then
  if [[ -z $old_ref ]]; then
    git -C "$root" rev-parse -q --verify origin/main >/dev/null || die "name OLD_REF, the last landed main (a commit or branch)"
    old_ref=origin/main
  fi
  hash=$(git -C "$root" rev-parse --verify "$old_ref^{commit}") || die "OLD_REF $old_ref is not a commit here"
  mkdir -p "$guard_dir"
  src=$guard_dir/src-${hash:0:12}
  [[ -d $src ]] || git -C "$root" worktree add -q --detach "$src" "$hash" || die "cannot check out $old_ref"
  old_build=$guard_dir/old-${hash:0:12}
  build_tree "$src" "$old_build"
fi
if [[ -z $new_build ]]; then
  new_build=$guard_dir/new
  mkdir -p "$guard_dir"
  build_tree "$root" "$new_build"
fi
for b in "$old_build" "$new_build"; do
  [[ -x $b/perf/all_reduce_perf ]] || die "$b/perf/all_reduce_perf is missing: build that directory first"
done

cluster=$root/tests/cluster/cluster.sh
cname="" cshape=""
cleanup() { [[ -z $cname ]] || "$cluster" down --name "$cname" >/dev/null 2>&1 || true; }
trap cleanup EXIT
can_cluster=1
"$cluster" check >/dev/null 2>&1 || can_cluster=0

# A Slurm topology.conf for the cluster: leaves in contiguous blocks of
# nodes, as cluster.sh places them, and a spine; no LinkSpeed.
slurm_file() { # NAME NODES LEAVES FILE
  local name=$1 n=$2 s=$3 f=$4 l i first last leaves=""
  : >"$f"
  for ((l = 0; l < s; l++)); do
    first=-1 last=-1
    for ((i = 0; i < n; i++)); do
      if ((i * s / n == l)); then ((first < 0)) && first=$i; last=$i; fi
    done
    echo "SwitchName=leaf$l Nodes=hoccl-$name-n[$first-$last]" >>"$f"
    leaves+="${leaves:+,}leaf$l"
  done
  ((s > 1)) && echo "SwitchName=spine Switches=$leaves" >>"$f"
  return 0
}

# point NAME -> shape (local, 2x2, 4to1), topology (slurm, none), size, iterations, warm-up
describe_point() {
  case $1 in
    local-8B) echo "local none 8 2000 200" ;;
    local-64M) echo "local none 64M 5 2" ;;
    2x2-slurm-64M) echo "2x2 slurm 64M 3 1" ;;
    2x2-nofile-64M) echo "2x2 none 64M 3 1" ;;
    2x2-8B) echo "2x2 none 8 500 50" ;;
    4to1-slurm-64M) echo "4to1 slurm 64M 3 1" ;;
    4to1-nofile-64M) echo "4to1 none 64M 3 1" ;;
    *) return 1 ;;
  esac
}
if ((smoke)); then
  describe_point() {
    case $1 in
      local-8B) echo "local none 8 50 5" ;;
      local-64M) echo "local none 1M 3 1" ;;
      2x2-8B) echo "2x2 none 8 50 5" ;;
      *) return 1 ;;
    esac
  }
fi

cluster_up() { # SHAPE
  [[ $cshape == "$1" ]] && return 0
  cleanup
  cname="" cshape=""
  local -a up
  case $1 in
    2x2) up=(--nodes 2 --switches 1 --node-gbit 1); rpn=2; nodes=2 leaves=1 ;;
    4to1) up=(--nodes 4 --switches 2 --node-gbit 1 --uplink-gbit 0.5); rpn=2; nodes=4 leaves=2 ;;
  esac
  cname=$("$cluster" up "${up[@]}" --name "g$$$1" --owner $$)
  cshape=$1
  slurm_file "$cname" "$nodes" "$leaves" "$out/$1.topology.conf"
  # A throwaway run: the first run on a new cluster measured 450-520 us at
  # 8 B where the next ones took 20-40 (every build alike), which would
  # land on whichever build goes first.
  "$cluster" run --cluster "$cname" --ranks-per-node "$rpn" --topo-file none --timeout 120 -- \
    "$new_build/perf/all_reduce_perf" -b 8 -e 1M -f 8 -n 20 -w 5 -c 0 >/dev/null 2>&1 || true
}

# measure POINT LABEL BUILD: one run; appends the out-of-place time (us).
measure() {
  local point=$1 label=$2 build=$3 json shape topo size n w
  read -r shape topo size n w < <(describe_point "$point")
  json=$(mktemp "$out/$point.$label.XXXXXX.json")
  local bench=("$build/perf/all_reduce_perf" -b "$size" -e "$size" -n "$n" -w "$w" -c 1 -J "$json")
  if [[ $shape == local ]]; then
    "${bench[@]}" --np 4 >"$json.log" 2>&1
  else
    local tf=none
    [[ $topo == slurm ]] && tf=$out/$shape.topology.conf
    "$cluster" run --cluster "$cname" --ranks-per-node "$rpn" --topo-file "$tf" --timeout 600 -- \
      "${bench[@]}" >"$json.log" 2>&1
  fi || die "$label's run of $point failed: $(tail -3 "$json.log")"
  grep -q '"wrong":0' "$json" || die "$label's run of $point reported wrong results ($json)"
  sed -n 's/.*"oop":{"time_us":\([0-9.]*\).*/\1/p' "$json" | tail -1 >>"$out/$point.$label"
}

IFS=, read -r -a plist <<<"$points"
ran=()
for p in "${plist[@]}"; do
  describe_point "$p" >/dev/null || die "unknown point $p (points: $all_points)"
  read -r shape _ < <(describe_point "$p")
  if [[ $shape != local ]]; then
    if ((!can_cluster)); then say "skipping $p: this machine cannot build the emulated cluster ($cluster check)"; continue; fi
    cluster_up "$shape"
  fi
  : >"$out/$p.old"
  : >"$out/$p.new"
  for ((r = 0; r < rounds; r++)); do
    # Alternate which build goes first, so drift favours neither.
    if ((r % 2 == 0)); then measure "$p" old "$old_build"; measure "$p" new "$new_build"
    else measure "$p" new "$new_build"; measure "$p" old "$old_build"; fi
  done
  ran+=("$p")
  say "$p done"
done
cleanup
cname=""
((${#ran[@]})) || die "no point ran"

python3 - "$out" "$strict" "${ran[@]}" <<'EOF'
import statistics, sys
out, strict, points = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
def unit(us):
    return f"{us / 1000:9.1f} ms" if us >= 10000 else f"{us:9.1f} us"
print(f"{'point':<18} {'old median':>12} {'new median':>12} {'new/old':>8} {'spread old':>10} {'new':>6}  rounds")
flagged = []
for p in points:
    old = [float(x) for x in open(f"{out}/{p}.old") if x.strip()]
    new = [float(x) for x in open(f"{out}/{p}.new") if x.strip()]
    mo, mn = statistics.median(old), statistics.median(new)
    spread = lambda v: (max(v) - min(v)) / statistics.median(v)
    # Two or three rounds understate the noise: never count less than 2%.
    noise = max(spread(old), spread(new), 0.02)
    ratio = mn / mo
    flag = "  SLOWER" if ratio - 1 > noise else ""
    if flag:
        flagged.append(p)
    print(f"{p:<18} {unit(mo):>12} {unit(mn):>12} {ratio:8.3f} {spread(old) * 100:9.1f}% {spread(new) * 100:5.1f}%  {len(old)}{flag}")
print("new/old is time: below 1 is faster. SLOWER: the new median is behind by more than the larger spread (at least 2%).")
sys.exit(1 if strict and flagged else 0)
EOF
rc=$?
say "raw numbers in $out"
exit $rc
