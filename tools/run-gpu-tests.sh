#!/usr/bin/env bash
# The tests that need a GPU, on a machine with an NVIDIA GPU, its driver and
# the CUDA Toolkit: configures a HOCCL_CUDA=ON build (RelWithDebInfo; kernels
# for this GPU's architecture when nvidia-smi names it, else the default
# HOCCL_CUDA_ARCHS), builds what the CUDA tests need, prints the GPUs and
# `hoccl-info --build`, then runs `ctest -L gpu` (tests/test_cuda_gpu*.cc)
# and the host CUDA tests (`ctest -R '[Cc]uda'`, the gpu ones excepted),
# then `all_reduce_perf --buffers device`, 4 ranks as threads and 2 as
# processes (every row #wrong 0).
#   tools/run-gpu-tests.sh [build-dir]        (default: build-gpu)
# Exit status: 0 every test passed and the gpu tests ran; 1 a test failed
# (or only some gpu tests ran); 2 a package is missing; 3 no usable GPU:
# every gpu test skipped, which is not a pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
# shellcheck source=require.sh
. "$root/tools/require.sh"
require_begin run-gpu-tests
require_cmd cmake cmake
gen=()  # make, else ninja (GPU images often carry ninja only)
if ! command -v make >/dev/null && command -v ninja >/dev/null && [[ ! -f $build/CMakeCache.txt ]]; then
  gen=(-G Ninja)
fi
((${#gen[@]})) || require_cmd make make
require_cmd c++ g++
require_header gtest/gtest.h libgtest-dev
require_library_deps
require_end
jobs=$(nproc)
archs=${HOCCL_CUDA_ARCHS:-}
if [[ -z $archs ]] && command -v nvidia-smi >/dev/null; then
  archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .') || true
  [[ $archs =~ ^[0-9]+$ ]] || archs=""
fi
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHOCCL_CUDA=ON \
  ${archs:+-DHOCCL_CUDA_ARCHS=$archs}
cmake --build "$build" -j "$jobs" --target hoccl hoccl-info test_cuda_gpu test_cuda_gpu_rank test_cuda_image \
  test_cuda_driver test_cuda_plan test_cuda_ipc_wire test_cuda_interp test_cuda_device test_cuda_vmm all_reduce_perf
if command -v nvidia-smi >/dev/null; then nvidia-smi -L || true; else echo "run-gpu-tests: no nvidia-smi here"; fi
"$build/hoccl-info" --build
junit=$(cd "$build" && pwd)/ctest-gpu-junit.xml
rm -f "$junit"
failed=0
ctest --test-dir "$build" -L gpu --output-on-failure --output-junit "$junit" || failed=1
ctest --test-dir "$build" -R '[Cc]uda' -LE gpu --output-on-failure -j "$jobs" || failed=1
total=$(ctest --test-dir "$build" -L gpu -N | sed -n 's/^Total Tests: //p')
skips=$("$root/tools/ctest-skips.sh" "$junit")
skipped=$(head -1 <<<"$skips" | sed -n 's/^\([0-9]*\) tests* skipped$/\1/p')
skipped=${skipped:-0}
[[ -z $skips ]] || echo "run-gpu-tests: $skips" | sed '2,$s/^/run-gpu-tests: /'
if ((${total:-0} == 0)); then
  echo "run-gpu-tests: FAILED: no test carries the label gpu"
  exit 1
elif ((failed)); then
  echo "run-gpu-tests: FAILED (see above); $skipped of $total gpu tests skipped"
  exit 1
elif ((skipped == total)); then
  echo "run-gpu-tests: no usable GPU: $skipped gpu tests skipped (this is not a pass)"
  exit 3
elif ((skipped)); then
  echo "run-gpu-tests: FAILED: $skipped of $total gpu tests skipped (listed above)"
  exit 1
fi
# The benchmark on device buffers, nccl-tests style: 4 ranks as threads on
# GPU 0, every size checked (#wrong must be 0 in every row).
perf_log=$(mktemp)
trap 'rm -f "$perf_log"' EXIT
HOCCL_TIMEOUT=${HOCCL_TIMEOUT:-60} "$build/perf/all_reduce_perf" -t 4 --buffers device -b 8 -e 64M -f 8 -n 5 -w 2 \
  | tee "$perf_log" || failed=1
if ! grep -q '^# Out of bounds values : 0 OK' "$perf_log"; then
  echo "run-gpu-tests: FAILED: all_reduce_perf on device buffers found wrong values or did not finish"
  exit 1
fi
# Two processes on the GPU: connections through CUDA VMM. Without MPS the
# GPU time-slices them (milliseconds per call), so the sizes stay small.
HOCCL_TIMEOUT=${HOCCL_TIMEOUT:-60} "$build/perf/all_reduce_perf" --np 2 --buffers device -b 8 -e 16M -f 8 -n 5 -w 2 \
  | tee "$perf_log" || failed=1
if ! grep -q '^# Out of bounds values : 0 OK' "$perf_log"; then
  echo "run-gpu-tests: FAILED: all_reduce_perf --np 2 on device buffers found wrong values or did not finish"
  exit 1
fi
((failed == 0)) || { echo "run-gpu-tests: FAILED: all_reduce_perf on device buffers"; exit 1; }
echo "run-gpu-tests: all $total gpu tests passed on the GPU, the host CUDA tests, and all_reduce_perf on device buffers"
