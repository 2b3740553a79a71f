#!/usr/bin/env bash
# Checks the include layers (tools/layers.py: no library folder includes one
# above or beside it, and library files stay small), builds hoccl and runs every test: the GoogleTest
# suites through ctest, then a check that a program built only against the
# installed package
# (pkg-config and find_package) runs 4 ranks as 4 processes. Ends by naming
# every test that skipped and why (tools/ctest-skips.sh).
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
require_cmd python3 python3
require_header gtest/gtest.h libgtest-dev
require_library_deps
require_end
jobs=$(nproc)
# Fast (no build): an include that points up or sideways fails here, named;
# so does a library file over 600 lines or a median over 150.
python3 "$root/tools/layers.py" --sizes >/dev/null
echo "run-tests: layers: every include points down, library files small"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${HOCCL_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
junit=$(cd "$build" && pwd)/ctest-junit.xml
rm -f "$junit"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --output-junit "$junit" ${HOCCL_CTEST_ARGS:-}
"$root/tests/install/check-install.sh" "$build"
# Skipped tests (no root for the emulated cluster, no libnccl, no IB device
# outside the Soft-RoCE guest, ...) are not passes: name each and its reason.
skipped=$("$root/tools/ctest-skips.sh" "$junit")
if [[ -n $skipped ]]; then
  echo "run-tests: $skipped" | sed '2,$s/^/run-tests: /'
  echo "run-tests: every test that ran passed; $(head -1 <<<"$skipped") (listed above), so not everything was tested"
else
  echo "run-tests: all tests passed, none skipped"
fi
