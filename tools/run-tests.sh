#!/usr/bin/env bash
# Builds hoccl and runs every test: the GoogleTest suites through ctest, then
# a check that a program built only against the installed package
# (pkg-config and find_package) runs 4 ranks as 4 processes.
#   tools/run-tests.sh [build-dir]       (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
# shellcheck source=require.sh
. "$root/tools/require.sh"
require_begin run-tests
require_cmd cmake cmake
require_cmd make make
require_cmd cc gcc
require_cmd c++ g++
require_cmd pkg-config pkg-config
require_header gtest/gtest.h libgtest-dev
require_end
jobs=$(nproc)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${HOCCL_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" ${HOCCL_CTEST_ARGS:-}
"$root/tests/install/check-install.sh" "$build"
echo "run-tests: all tests passed"
