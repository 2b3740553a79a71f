#!/usr/bin/env bash
# Builds hoccl with sanitizers and runs the multi-rank suites under them.
#   tools/sanitize.sh asan   # AddressSanitizer + UndefinedBehaviorSanitizer
#   tools/sanitize.sh tsan   # ThreadSanitizer
# Any sanitizer report fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-asan}
# The builds are CMakePresets.json's asan and tsan presets (build-asan,
# build-tsan), with the options their test presets set.
case $kind in
  asan) export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ;;
  tsan) export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ;;
  *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac
build=$root/build-$kind
# Runs a command and prints how long it took, so a slow CI step names the
# part that grew: timed NAME COMMAND...
timed() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "== $kind: $name took $((SECONDS - t0)) s"
}
# The multi-process workers' large all-reduces (tests/test_worker.cc): 2M
# elements instead of 10M of every type and 24M floats. Still many slices
# and several laps of each connection's slots; at full size they took three
# quarters of test_multiprocess's time under TSan (about 160 of 212 s).
export HOCCL_TEST_LARGE_COUNT=2000003
tests="test_errors test_faults test_bootstrap test_collectives test_multiprocess test_dataops test_p2p test_oneshot_shm
       test_cuda_interp test_cuda_device test_probe_init test_reduce_special"
# The presets build without the CUDA kernels (no nvcc run): the sanitizers
# check host code, and test_cuda_device's fake driver brings its own image.
(cd "$root" && cmake --preset "$kind" >/dev/null)
# Only what runs below (the library, these suites and their helpers), not the
# whole tree: the other suites, tools and plugins are not run here, and
# building them with sanitizers took a large part of CI's time.
# shellcheck disable=SC2086
timed build cmake --build "$build" -j "$(nproc)" --target $tests test_coll_matrix test_cuda_device_net
for t in $tests; do
  echo "== $kind: $t"
  timed "$t" "$build/tests/$t" --gtest_brief=1
done
# Every algorithm on 4 ranks of one node and on 2 nodes of 2 (all pairs of
# collective, type, op, placement and count): the sweep that the test of
# every rank count was before it became part of test_coll_matrix.
echo "== $kind: test_coll_matrix (4 ranks; 2x2 over TCP)"
timed test_coll_matrix "$build/tests/test_coll_matrix" --gtest_brief=1 --gtest_filter='*_n4_c*:*_n2_2_tcp_c*'
# The network proxy for device buffers across hosts, on its three data paths
# (host, copy, and gdr over the dma-buf test transport), threads and processes.
echo "== $kind: test_cuda_device_net (two hosts on every data path)"
timed test_cuda_device_net "$build/tests/test_cuda_device_net" --gtest_brief=1 \
  --gtest_filter='*TwoHosts*:*Gdr*:*DestroyLeaves*'
echo "sanitize: $kind clean"
