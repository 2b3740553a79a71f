#!/usr/bin/env bash
# Side-by-side comparison on this machine: hoccl, Gloo and Open MPI with the
# same rank count, sizes and iterations, measured by the same driver. The
# contenders alternate (round-robin, several rounds) so drift on a shared
# machine hits all alike; the report takes each size's median over rounds.
#
#   perf/compare.sh [--np N] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
#                   [--rounds R] [--colls "all_reduce reduce_scatter all_gather"] [--out DIR]
#
# Prints a table per collective (busbw of each, ratios hoccl/Gloo and
# hoccl/MPI, single-core memcpy bandwidth) and writes DIR/<collective>.png.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
np=4; minb=1K; maxb=64M; factor=4; iters=10; warmup=3; rounds=3
colls="all_reduce reduce_scatter all_gather"; out=$root/out/compare
while [ $# -gt 0 ]; do
  case $1 in
    --np) np=$2; shift 2 ;;
    -b) minb=$2; shift 2 ;;
    -e) maxb=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

# Needed for any comparison: the build and the report.
# shellcheck source=../tools/require.sh
. "$root/tools/require.sh"
require_begin compare
require_cmd cmake cmake
require_cmd make make
require_cmd c++ g++
require_cmd python3 python3
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

build=$root/build-release
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHOCCL_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
gloo=$build/perf/peers/gloo_perf
mpi=$build/perf/peers/mpi_perf
[ -x "$gloo" ] || echo "compare: Gloo benchmark not built (install libgloo-dev); skipping Gloo" >&2
[ -x "$mpi" ] || echo "compare: MPI benchmark not built (install libopenmpi-dev openmpi-bin); skipping MPI" >&2

rm -rf "$out"; mkdir -p "$out"
common=(-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1)
mpirun_args=(--oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun_args+=(--allow-run-as-root)

toBytes() { numfmt --from=iec "$1"; }
"$build/perf/memcpy_bw" "$(toBytes "$minb")" "$(toBytes "$maxb")" "$factor" -J "$out/memcpy.json" >/dev/null

for coll in $colls; do
  for r in $(seq 1 "$rounds"); do
    echo "compare: $coll round $r/$rounds" >&2
    "$build/perf/${coll}_perf" --np "$np" "${common[@]}" -J "$out/hoccl.$coll.$r.json" >"$out/hoccl.$coll.$r.txt"
    if [ -x "$gloo" ]; then
      algos=default
      [ "$coll" = all_reduce ] && algos="ring_chunked halving_doubling"
      for a in $algos; do
        extra=(); [ "$a" != default ] && extra=(--extra "$a")
        "$gloo" "$coll" --np "$np" "${common[@]}" "${extra[@]}" -J "$out/gloo-$a.$coll.$r.json" >"$out/gloo-$a.$coll.$r.txt"
      done
    fi
    if [ -x "$mpi" ]; then
      mpirun "${mpirun_args[@]}" -np "$np" "$mpi" "$coll" "${common[@]}" -J "$out/mpi.$coll.$r.json" >"$out/mpi.$coll.$r.txt"
    fi
  done
done
# Debian's python3 has python3-matplotlib; a python3 earlier on PATH may not.
py=python3
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null && py=/usr/bin/python3
"$py" "$root/perf/compare_report.py" "$out" --np "$np"
echo "compare: results and plots in $out"
