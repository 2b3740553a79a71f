#!/usr/bin/env bash
# Installs a build into a scratch prefix and checks the package as a user
# gets it, with LD_LIBRARY_PATH unset:
#  1. every installed program starts and does its job, run with an empty
#     environment, first where it was installed, then after the whole prefix
#     was moved elsewhere (run paths are relative: $ORIGIN/../lib);
#     every installed ELF file resolves all its libraries, and none points
#     into the build tree;
#  2. the NCCL plugins load from the prefix by absolute path (when the build
#     has the plugin harness);
#  3. consumers built against the moved prefix alone: the example and the
#     multi-process test worker with pkg-config, a CMake project with
#     find_package(hoccl); 4 ranks as 4 processes through every collective,
#     type, op and placement.
#   tests/install/check-install.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: check-install.sh BUILD_DIR}" && pwd)
unset LD_LIBRARY_PATH
for tool in cc c++ pkg-config readelf; do
  command -v $tool >/dev/null || {
    echo "check-install: '$tool' is not installed (Debian: g++ pkg-config binutils)" >&2
    exit 2
  }
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/installed
cmake --install "$build" --prefix "$prefix" >/dev/null
fail() { echo "check-install: FAILED: $*" >&2; exit 1; }

# run_installed [VAR=value ...] PROGRAM ARGS...: runs it with no environment
# but PATH and the given variables (no LD_LIBRARY_PATH, no other HOCCL_*),
# output to $scratch/out; fails naming it.
run_installed() {
  local vars=()
  while [[ $1 == *=* ]]; do vars+=("$1"); shift; done
  local p=$1
  shift
  [[ -x $p ]] || fail "$p was not installed"
  if ! env -i PATH=/usr/bin:/bin "${vars[@]}" "$p" "$@" >"$scratch/out" 2>&1; then
    sed 's/^/    /' "$scratch/out" >&2
    fail "installed ${p#"$scratch"/} $* did not run (above)"
  fi
}
expect() {  # expect REGEX WHAT: the last run's output matches
  grep -Eq -- "$1" "$scratch/out" || { sed 's/^/    /' "$scratch/out" >&2; fail "$2"; }
}

check_programs() {
  local p=$1 where=$2 coll
  # Every ELF file in the prefix: its libraries resolve, and its run path,
  # if any, is relative to itself (no build-tree or absolute directory).
  local f rp
  while IFS= read -r f; do
    readelf -h "$f" >/dev/null 2>&1 || continue
    rp=$(readelf -d "$f" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p')
    [[ -z $rp || $rp == '$ORIGIN'* ]] || fail "${f#"$p"/} has run path '$rp', not relative to \$ORIGIN"
    if readelf -d "$f" | grep -q 'NEEDED.*libhoccl\.so' && [[ $f == "$p"/bin/* && -z $rp ]]; then
      fail "${f#"$p"/} needs libhoccl.so but has no run path"
    fi
    if env -i ldd "$f" 2>/dev/null | grep -q 'not found'; then
      env -i ldd "$f" | grep 'not found' >&2
      fail "${f#"$p"/}: libraries not found without LD_LIBRARY_PATH"
    fi
  done < <(find "$p/bin" "$p/lib" -type f)

  for coll in all_reduce reduce_scatter all_gather broadcast reduce; do
    run_installed "$p/bin/${coll}_perf" -b 1K -e 64K -f 8 -t 2 -c 1 -w 1 -n 2
    expect '^ +65536 ' "${coll}_perf printed no 64 KiB row"
    expect 'Out of bounds values : 0 OK' "${coll}_perf found wrong values"
  done
  run_installed "$p/bin/all_reduce_perf" -b 4K -e 4K -c 1 --np 2
  expect 'Out of bounds values : 0 OK' "all_reduce_perf --np 2 (forked processes) failed"
  run_installed "$p/bin/hoccl-info"
  expect '^hoccl [0-9]+\.[0-9]+\.[0-9]+' "hoccl-info printed no version"
  expect 'HOCCL_SOCKET_IFNAME' "hoccl-info printed no settings"
  run_installed "$p/bin/hoccl-sim" --nodes 4 --ranks-per-node 2 --leaves 2 --node-gbit 1 --uplink-gbit 0.5 --coll allreduce
  expect 'horing' "hoccl-sim printed no horing prediction"
  run_installed "$p/bin/hoccl-paro" --nodes 2 --ranks-per-node 4 --params 100M --accum 4
  expect '^recommended: ' "hoccl-paro recommended no strategy"
  run_installed "$p/bin/hoccl-topo"
  expect '^System: [0-9]+ node' "hoccl-topo printed no system"
  echo "check-install: installed programs run with no environment ($where)"
}

check_plugins() {
  local p=$1 harness=$build/tests/plugin/hoccl-nccl-plugin-harness
  local net tuner
  net=$(find "$p" -name libnccl-net-hoccl.so | head -1)
  tuner=$(find "$p" -name libnccl-tuner-hoccl.so | head -1)
  [[ -n $net && -n $tuner ]] || fail "the NCCL plugins were not installed"
  if [[ ! -x $harness ]]; then
    echo "check-install: plugins installed; not loaded ($harness not built)"
    return
  fi
  run_installed "$harness" tuner --version 6 --plugin "$tuner"
  run_installed "$harness" tuner --version 6 --plugin "$net"
  run_installed HOCCL_NET=socket "$harness" net --version 12 --plugin "$net" --max-bytes 1048576
  echo "check-install: the installed NCCL plugins load and run (tuner v6, net v12 over TCP)"
}

check_programs "$prefix" "in $prefix"
# Relocatable: move the whole prefix, everything must still start.
moved=$scratch/moved/elsewhere
mkdir -p "$(dirname "$moved")"
mv "$prefix" "$moved"
check_programs "$moved" "after moving the prefix to $moved"
check_plugins "$moved"

export PKG_CONFIG_PATH=$(find "$moved" -name hoccl.pc -printf '%h\n' | head -1)
libdir=$(pkg-config --variable=libdir hoccl)
[[ $(cd "$libdir" && pwd) == "$moved"/* ]] || fail "hoccl.pc's libdir $libdir is not inside the moved prefix"
rpath=-Wl,-rpath,$libdir

cc "$root/examples/allreduce_procs.c" -o "$scratch/allreduce_pc" $(pkg-config --cflags --libs hoccl) $rpath
"$scratch/allreduce_pc" 4 16 2

# The worker includes only <hoccl.h> (from the prefix) and the test helpers.
c++ -std=c++20 -O2 -I"$root" "$root/tests/test_worker.cc" "$root/src/check/values.cc" -o "$scratch/worker" \
    $(pkg-config --cflags --libs hoccl) $rpath -pthread
pids=()
for r in 0 1 2 3; do
  "$scratch/worker" full $r 4 "$scratch/id" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "check-install: 4 processes, installed library: every collective, type, op and placement correct"

cmake -S "$root/tests/install/consumer" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$moved" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/consumer"
echo "check-install: pkg-config and find_package consumers work"
