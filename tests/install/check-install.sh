#!/usr/bin/env bash
# Installs a build into a scratch prefix and builds consumers against it
# alone: the example and the multi-process test worker with pkg-config, a
# CMake project with find_package(hoccl). Then runs 4 ranks as 4 processes
# through every collective, type, op and placement.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH=$(find "$prefix" -name hoccl.pc -printf '%h\n' | head -1)
rpath=-Wl,-rpath,$(pkg-config --variable=libdir hoccl)

cc "$root/examples/allreduce_procs.c" -o "$prefix/allreduce_pc" $(pkg-config --cflags --libs hoccl) $rpath
"$prefix/allreduce_pc" 4 16 2

# The worker includes only <hoccl.h> (from the prefix) and the test helpers.
c++ -std=c++20 -O2 -I"$root" "$root/tests/test_worker.cc" "$root/perf/common/values.cc" -o "$prefix/worker" \
    $(pkg-config --cflags --libs hoccl) $rpath -pthread
pids=()
for r in 0 1 2 3; do
  "$prefix/worker" full $r 4 "$prefix/id" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "check-install: 4 processes, installed library: every collective, type, op and placement correct"

cmake -S "$root/tests/install/consumer" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
"$prefix/consumer/consumer"
echo "check-install: pkg-config and find_package consumers work"
