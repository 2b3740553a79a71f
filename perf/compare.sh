#!/usr/bin/env bash
# Side-by-side comparison on this machine: hoccl, Gloo and Open MPI with the
# same rank count, sizes and iterations, measured by the same driver.
#
#   perf/compare.sh [--np N] [--rounds R] [--colls "all_reduce reduce_scatter all_gather"]
#                   [--small MIN:MAX:F | none] [--large MIN:MAX:F | none] [-b MIN -e MAX -f F]
#                   [-n ITERS] [-w WARMUP] [--small-iters N] [--small-warmup N]
#                   [--no-select] [--require-peers] [--build DIR] [--out DIR]
#
# Contenders: hoccl (auto; shared memory), Gloo (each of its algorithms; TCP
# over loopback: Debian's Gloo has no shared-memory transport), Open MPI
# coll/tuned with its default decision rules, and coll/tuned forced to each
# of its algorithms (coll_tuned_*_algorithm; ob1 over vader: shared memory).
# A selection round runs every algorithm of Gloo and of forced Open MPI
# once; the algorithms that were the best of their peer at one size or more
# (at most 2 per peer: those that won the most sizes) go on to the timed
# rounds (--no-select: all of them; --only hoccl,gloo,...: those contenders).
# Each timed round runs the contenders in a rotated order (round r starts
# with the r-th).
#
# Prints per collective a latency table (us per call, small sizes: default
# 8 B-64 KiB) and a bus-bandwidth table (default 64 KiB-16 MiB): for each
# contender the median over rounds of its best algorithm and placement (in
# or out of place, named in the cell), the ratios of hoccl to each peer,
# and each round's order. Writes OUT/runs.jsonl (every job, its round and
# position), OUT/summary.json and OUT/compare.png. Default OUT: out/compare.
# --require-peers: fail if Gloo or Open MPI is not built (CI).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmp_name=compare
# shellcheck source=compare-lib.sh
. "$root/perf/compare-lib.sh"

np=4 rounds=2 select=1 require_peers=0
small_sweep=8:64K:2 small_iters=100 small_warmup=10
large_sweep=64K:16M:4 iters=10 warmup=3
colls="all_reduce reduce_scatter all_gather"
out=$root/out/compare build=""
lmin="" lmax="" lfactor=""
while [ $# -gt 0 ]; do
  case $1 in
    --np) np=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --small) small_sweep=$2; shift 2 ;;
    --large) large_sweep=$2; shift 2 ;;
    -b) lmin=$2; shift 2 ;;
    -e) lmax=$2; shift 2 ;;
    -f) lfactor=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --small-iters) small_iters=$2; shift 2 ;;
    --small-warmup) small_warmup=$2; shift 2 ;;
    --no-select) select=0; shift ;;
    --only) only=$2; shift 2 ;;
    --require-peers) require_peers=1; shift ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
if [ -n "$lmin$lmax$lfactor" ]; then
  IFS=: read -r dmin dmax dfactor <<<"$large_sweep"
  large_sweep=${lmin:-$dmin}:${lmax:-$dmax}:${lfactor:-$dfactor}
fi
[[ $np =~ ^[1-9][0-9]*$ && $np -ge 2 ]] || die "--np must be an integer >= 2"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
for s in "$small_sweep" "$large_sweep"; do [ "$s" = none ] || sweep_args "$s" >/dev/null; done

# Needed for any comparison: the build and the report.
# shellcheck source=../tools/require.sh
. "$root/tools/require.sh"
require_begin compare
require_cmd cmake cmake
require_cmd make make
require_cmd c++ g++
require_cmd python3 python3
require_library_deps
require_end

# The peers and the plotting library come from Debian: as root, install the
# missing ones with apt-get (and say so); otherwise say which contenders
# are left out and why.
need=""
for p in libgloo-dev libopenmpi-dev openmpi-bin python3-matplotlib; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "compare: running as root: installing the missing Debian packages$need with apt-get" >&2
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null; }; then
      echo "compare: apt-get could not install$need; going on without what is missing" >&2
    fi
  else
    echo "compare: not root, so nothing is installed; missing Debian packages:$need" >&2
  fi
  for p in $need; do
    dpkg -s "$p" >/dev/null 2>&1 || case $p in
      libgloo-dev) echo "compare: SKIPPING Gloo: $p is not installed" >&2 ;;
      libopenmpi-dev|openmpi-bin) echo "compare: SKIPPING Open MPI: $p is not installed" >&2 ;;
      python3-matplotlib) echo "compare: no plots: $p is not installed (the tables are printed)" >&2 ;;
    esac
  done
fi

build_benchmarks "$build"
gloo=$build/perf/peers/gloo_perf
mpi=$build/perf/peers/mpi_perf
have_gloo=0 have_mpi=0
if [ -x "$gloo" ]; then have_gloo=1; else say "Gloo benchmark not built (install libgloo-dev); skipping Gloo"; fi
if [ -x "$mpi" ] && command -v mpirun >/dev/null && command -v ompi_info >/dev/null; then
  have_mpi=1
else
  say "Open MPI benchmark not built (install libopenmpi-dev openmpi-bin); skipping Open MPI"
fi
if ((require_peers && !(have_gloo && have_mpi))); then die "--require-peers: a peer is missing"; fi
pick_python

declare -A transport=(
  [hoccl]="shared memory (one host)"
  [gloo]="TCP over loopback (no shared-memory transport)"
  [mpi-tuned]="ob1/vader: shared memory"
  [mpi-forced]="ob1/vader: shared memory"
)
mpirun_args=(--oversubscribe --bind-to none -np "$np" --mca pml ob1 --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpirun_args+=(--allow-run-as-root)
# More ranks than cores: Open MPI's busy polling would make each step wait
# for a scheduler tick.
((np > $(nproc))) && mpirun_args+=(--mca mpi_yield_when_idle 1)

peers_for() { # coll -> "group:algorithm" words
  local coll=$1 a words="hoccl:auto"
  if ((have_gloo)); then
    for a in $(gloo_algos "$coll"); do words+=" gloo:$a"; done
  fi
  if ((have_mpi)); then
    words+=" mpi-tuned:rules"
    for a in $(mpi_forced_algos "$coll" "$np"); do words+=" mpi-forced:${a#*:}"; done
  fi
  echo "$words"
}

launch() { # variant coll args-array-name json log
  local variant=$1 coll=$2 json=$4 log=$5
  local -n a=$3
  case ${variant%%:*} in
    hoccl) "$build/perf/${coll}_perf" --np "$np" "${a[@]}" -J "$json" >"$log" 2>&1 ;;
    gloo) "$gloo" "$coll" --np "$np" --extra "${variant#*:}" "${a[@]}" -J "$json" >"$log" 2>&1 ;;
    mpi-tuned) mpirun "${mpirun_args[@]}" "$mpi" "$coll" "${a[@]}" -J "$json" >"$log" 2>&1 ;;
    mpi-forced)
      local num
      num=$(mpi_forced_algos "$coll" "$np" | awk -F: -v a="${variant#*:}" '$2 == a { print $1 }')
      [ -n "$num" ] || { echo "no coll/tuned algorithm ${variant#*:} for $coll" >"$log"; return 1; }
      mpirun "${mpirun_args[@]}" --mca coll_tuned_use_dynamic_rules 1 --mca "$(mpi_param "$coll")" "$num" \
        "$mpi" "$coll" "${a[@]}" -J "$json" >"$log" 2>&1 ;;
  esac
}

rm -rf "$out"; mkdir -p "$out"
start=$SECONDS
command_line="perf/compare.sh --np $np --rounds $rounds --small $small_sweep --large $large_sweep -n $iters -w $warmup --small-iters $small_iters --small-warmup $small_warmup --colls \"$colls\"$( ((select)) || echo ' --no-select')"
large_min=$(numfmt --from=iec "${large_sweep%%:*}" 2>/dev/null || echo 1024)
large_max=$(IFS=: read -r _ m _ <<<"$large_sweep"; numfmt --from=iec "$m" 2>/dev/null || echo 1048576)
"$build/perf/memcpy_bw" "$large_min" "$large_max" 4 -J "$out/memcpy.json" >/dev/null
for coll in $colls; do run_collective "$coll"; done
cat >"$out/meta.json" <<EOF
{"title": "this machine: $np ranks, $(nproc) cores ($(uname -m))", "short": "local",
 "ranks": $np, "command": $(printf '%s' "$command_line" | "$py" -c 'import json,sys; print(json.dumps(sys.stdin.read()))'),
 "runtime_s": $((SECONDS - start))}
EOF
expect=hoccl
((have_gloo)) && expect+=,gloo
((have_mpi)) && expect+=,mpi-tuned,mpi-forced
rc=0
"$py" "$root/perf/compare_report.py" "$out" --expect-groups "${only:-$expect}" || rc=$?
say "results, summary.json and compare.png in $out; $((SECONDS - start)) s"
exit $rc
