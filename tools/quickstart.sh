#!/usr/bin/env bash
# Builds hoccl (Release) and runs a first all-reduce on this machine:
# 4 ranks as 4 processes, 64 MiB of floats, checked and timed.
#   tools/quickstart.sh [nranks] [MiB] [iterations]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=require.sh
. "$root/tools/require.sh"
require_begin quickstart
require_cmd cmake cmake
require_cmd make make
require_cmd c++ g++
require_library_deps
require_end
build=$root/build-release
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHOCCL_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target hoccl_example_allreduce hoccl-info >/dev/null
"$build/examples/hoccl_example_allreduce" "${1:-4}" "${2:-64}" "${3:-10}"
