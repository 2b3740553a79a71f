#!/usr/bin/env bash
# The tests that need a GPU, on a machine with an NVIDIA GPU, its driver and
# the CUDA Toolkit: configures a HOCCL_CUDA=ON build (RelWithDebInfo; kernels
# for this GPU's architecture when nvidia-smi names it, else the default
# HOCCL_CUDA_ARCHS), builds what the CUDA tests need, prints the GPUs and
# `hoccl-info --build`, then runs `ctest -L gpu` (tests/test_cuda_gpu*.cc)
# and the host CUDA tests (`ctest -R '[Cc]uda'`, the gpu ones excepted),
# then `all_reduce_perf --buffers device`, 4 ranks as threads and 2 as
# processes (every row #wrong 0), and the two parts across "hosts" on the
# one GPU (each prints one summary line; a GPU machine has no network):
#   (a) the network proxy: two processes with different HOCCL_HOSTID, under
#       MPS where nvidia-cuda-mps-control exists, over loopback TCP:
#       all_reduce_perf --buffers device, #wrong 0, its largest busbw and
#       8 B time beside the same run with one HOCCL_HOSTID (VMM);
#   (b) the installed NCCL with hoccl's net and tuner plugins, two
#       processes made two hosts by NCCL_HOSTID, ncclAllReduce on device
#       buffers (tests/plugin/nccl_allreduce.cc) checked, and NCCL's log
#       lines that show the plugins carried it.
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
  test_cuda_driver test_cuda_plan test_cuda_ipc_wire test_cuda_interp test_cuda_device test_cuda_vmm all_reduce_perf \
  test_cuda_device_net hoccl_nccl_net hoccl_nccl_tuner hoccl-nccl-allreduce
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

# (a) Across "hosts" through the network proxy. Under MPS the two
# processes' kernels run side by side instead of time-sliced.
work=$(mktemp -d)
trap 'rm -f "$perf_log"; rm -rf "$work"; [[ -n ${mps:-} ]] && echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
mps=""
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && mps=1
fi
# two_ranks TAG HOSTID0 HOSTID1: all_reduce_perf, two processes launched as
# torchrun would; rank 0's table in $work/TAG.0.
two_ranks() {
  local tag=$1 port=$((20000 + RANDOM % 20000)) r pids=() rc=0
  for r in 0 1; do
    local host=$2
    ((r == 1)) && host=$3
    HOCCL_HOSTID=$host RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HOCCL_NET=socket \
      HOCCL_TIMEOUT=${HOCCL_TIMEOUT:-60} HOCCL_DEBUG=INFO HOCCL_DEBUG_SUBSYS=NET \
      timeout 240 "$build/perf/all_reduce_perf" --buffers device -b 8 -e 64M -f 8 -n 10 -w 2 > "$work/$tag.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  return $rc
}
# The row of SIZE (or the last row: "last") in rank 0's table: "time_us
# busbw size" (out of place).
row_of() {
  awk -v s="$2" '/^ +[0-9]+ +[0-9]+ / { if ($1 == s) { print $6, $8, $1; found = 1 } last = $6 " " $8 " " $1 }
                 END { if (!found && s == "last") print last }' "$work/$1.0"
}
part_a="FAILED"
if two_ranks proxy hostA hostB && grep -q '^# Out of bounds values : 0 OK' "$work/proxy.0" &&
   grep -q 'host-pinned slots' "$work/proxy.0" && two_ranks local hostA hostA &&
   grep -q '^# Out of bounds values : 0 OK' "$work/local.0"; then
  read -r p8 _ <<<"$(row_of proxy 8)"
  read -r _ pbw size <<<"$(row_of proxy last)"
  read -r l8 _ <<<"$(row_of local 8)"
  read -r _ lbw _ <<<"$(row_of local last)"
  part_a="ok: proxy over loopback TCP${mps:+ (MPS)}: #wrong 0, busbw at $size B $pbw GB/s, 8 B $p8 us; one host (VMM): $lbw GB/s, $l8 us"
else
  failed=1
  tail -5 "$work"/proxy.* "$work"/local.* 2>/dev/null | grep -v ' INFO ' || true
fi
echo "run-gpu-tests: part (a) device buffers across hosts: $part_a"

# (b) NCCL with hoccl's plugins between two "hosts" on this GPU.
part_b="FAILED"
nccl=${HOCCL_NCCL_LIBRARY:-}
for c in "$nccl" /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2; do
  [[ -n $c && -e $c ]] && { nccl=$c; break; }
done
if [[ -z $nccl || ! -e $nccl ]]; then
  part_b="not run: no libnccl.so.2 (set HOCCL_NCCL_LIBRARY)"
else
  pids=()
  rm -f "$work/nccl.id"
  for r in 0 1; do
    NCCL_HOSTID=host$r NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING \
      NCCL_NET_PLUGIN="$build/plugin/libnccl-net-hoccl.so" NCCL_TUNER_PLUGIN="$build/plugin/libnccl-tuner-hoccl.so" \
      HOCCL_NET=socket timeout 180 "$build/tests/plugin/hoccl-nccl-allreduce" "$nccl" $r 2 "$work/nccl.id" \
      > "$work/nccl.$r" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  log=$(cat "$work"/nccl.*)
  loaded=$(grep -c 'Loaded net plugin\|NET/Plugin.*hoccl\|Using network hoccl' <<<"$log" || true)
  via=$(grep -c 'via NET/hoccl' <<<"$log" || true)
  tuner=$(grep -ci 'tuner.*hoccl\|hoccl.*tuner' <<<"$log" || true)
  oks=$(grep -c '^rank [01]: ok' <<<"$log" || true)
  if ((rc == 0 && oks == 2 && loaded > 0 && via > 0)); then
    part_b="ok: ncclAllReduce correct on both ranks; net plugin loaded ($loaded lines), $via channels via NET/hoccl, $tuner tuner lines"
  else
    failed=1
    part_b="FAILED: exit $rc, $oks ranks correct, net plugin lines $loaded, via NET/hoccl $via, tuner lines $tuner"
    grep -E 'rank [01]:|WARN|Error|error' <<<"$log" | tail -15 || true
  fi
fi
echo "run-gpu-tests: part (b) NCCL with hoccl's plugins across hosts: $part_b"
((failed == 0)) || { echo "run-gpu-tests: FAILED (parts above)"; exit 1; }
