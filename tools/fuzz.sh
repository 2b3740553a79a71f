#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan + UBSan) and runs each
# on its seed corpus.
#   tools/fuzz.sh [LIMIT] [TARGET...]
#     LIMIT  seconds per target (default 20), or a number of executions
#            with an x: 1000000x
#     TARGET bootstrap_wire, topo_file, ... (default: every fuzz_* built)
#   HOCCL_FUZZ_BUILD  build directory (default build-fuzz)
# Inputs that find new coverage go to <build>/corpus/TARGET, crashes to
# <build>/findings/TARGET; the seeds in fuzz/corpus are only read. To keep
# an input as a seed, copy it there. Exits non-zero if any target crashed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HOCCL_FUZZ_BUILD:-$root/build-fuzz}
limit=${1:-20}
shift || true
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHOCCL_BUILD_FUZZERS=ON \
  -DHOCCL_BUILD_TESTS=OFF -DHOCCL_BUILD_PERF=OFF -DHOCCL_BUILD_NCCL_PLUGINS=OFF -DHOCCL_BUILD_TORCH=OFF \
  -DHOCCL_CUDA=OFF -DHOCCL_DEBUG_INFO=lines >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/fuzz/fuzz_*.cc; do t=$(basename "$f" .cc); targets+=("${t#fuzz_}"); done
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
case $limit in
  *x) budget=(-runs="${limit%x}") ;;
  *) budget=(-max_total_time="$limit") ;;
esac
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=0
printf '%-20s %12s %10s %8s  %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
  work=$build/corpus/$t findings=$build/findings/$t
  mkdir -p "$work" "$findings"
  log=$build/fuzz_$t.log
  rc=0
  "$build/fuzz/fuzz_$t" "${budget[@]}" -print_final_stats=1 -artifact_prefix="$findings/" \
    "$work" "$root/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log")
  size=$(find "$work" -type f | wc -l)
  if [ $rc -eq 0 ]; then result=ok; else result="FOUND A CRASH (rc $rc): see $log and $findings"; failed=1; fi
  printf '%-20s %12s %10s %8s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "$size" "$result"
done
exit $failed
