#!/usr/bin/env bash
# Builds hoccl and runs every test: the GoogleTest suites through ctest, then
# a check that a program built only against the installed package
# (pkg-config and find_package) runs 4 ranks as 4 processes.
#   tools/run-tests.sh [build-dir]       (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
jobs=$(nproc)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${HOCCL_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" ${HOCCL_CTEST_ARGS:-}
"$root/tests/install/check-install.sh" "$build"
echo "run-tests: all tests passed"
