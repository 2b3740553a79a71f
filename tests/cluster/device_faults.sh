#!/usr/bin/env bash
# Faults on the emulated cluster with device buffers (the stand-alone fake
# libcuda, so connections between nodes go through the network proxy):
# 4 nodes under 2 leaves, 2 ranks per node, all_reduce_perf --buffers device
# all-reducing 1 MiB in a long loop.
#  1. Rank 5 (node 2) is killed (SIGKILL): every other rank's process ends
#     with an error naming rank 5, within 20 s (HOCCL_TIMEOUT=60).
#  2. Node 2's link is cut (ip link set eth0 down): every rank ends with an
#     error within HOCCL_TIMEOUT (5 s) and a margin; none hangs.
#   tests/cluster/device_faults.sh ALL_REDUCE_PERF FAKE_LIBCUDA_DIR     (needs root)
# Exit 77 (skipped) where the test bed cannot run, as cluster.sh check.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
perf=${1:?usage: device_faults.sh ALL_REDUCE_PERF FAKE_LIBCUDA_DIR}
fakedir=${2:?usage: device_faults.sh ALL_REDUCE_PERF FAKE_LIBCUDA_DIR}
rc=0
"$here/cluster.sh" check || exit $?
name=d$$
logs=$(mktemp -d /tmp/hoccl-device-faults.XXXXXX)
trap '"$here/cluster.sh" down --name $name >/dev/null 2>&1 || true' EXIT
"$here/cluster.sh" up --nodes 4 --switches 2 --node-gbit 1 --name $name --owner $$ >/dev/null
fail() { echo "cluster device faults: FAILED: $*" >&2; rc=1; }
export LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# start DIR TIMEOUT_S: the loop in the background; waits until every rank
# has set up (rank 0 lists every rank's pid) and a second more. Sets $run.
start() {
  HOCCL_TIMEOUT=$2 "$here/cluster.sh" run --cluster $name --ranks-per-node 2 --timeout 120 --grace 60 --logdir "$1" -- \
    "$perf" --buffers device -b 1M -e 1M -n 1000000 -w 1 -c 0 >/dev/null 2>"$1/run.err" &
  run=$!
  for _ in $(seq 300); do
    [ "$(grep -c '^#  Rank ' "$1/rank0.out" 2>/dev/null)" = 8 ] && break
    sleep 0.1
  done
  sleep 2
}
# finish DIR EVENT_TIME BOUND CULPRIT: waits for the run; every rank's
# process must have ended within BOUND s of the event, with an error (naming
# CULPRIT, if given) in its output.
finish() {
  wait "$run" || true
  local ended secs r msg
  ended=$(date +%s.%N)
  secs=$(awk -v a="$ended" -v b="$2" 'BEGIN { printf "%.1f", a - b }')
  echo "all ranks ended $secs s after the event"
  awk -v s="$secs" -v b="$3" 'BEGIN { exit !(s < b) }' || fail "ranks took $secs s (bound $3 s)"
  for r in 0 1 2 3 4 5 6 7; do
    [ -n "$4" ] && [ "$r" = "$4" ] && continue
    msg=$(grep -hiE 'error|failed|timed out|lost|abort' "$1/rank$r.out" "$1/rank$r.err" 2>/dev/null | grep -v ' INFO ' |
      head -1 || true)
    echo "rank $r: ${msg:-no error reported}"
    [ -n "$msg" ] || { fail "rank $r reported no error"; continue; }
    [ -z "$4" ] || grep -Eq "rank $4([^0-9]|$)" <<<"$(cat "$1/rank$r.out" "$1/rank$r.err")" ||
      fail "rank $r does not name rank $4"
  done
}

echo "== rank 5 is killed"
d=$logs/kill
mkdir -p "$d"
start "$d" 60
pid=$(awk '/^#  Rank  *5 / { for (i = 1; i < NF; ++i) if ($i == "Pid") print $(i + 1) }' "$d/rank0.out")
[ -n "$pid" ] || fail "rank 5's pid is not in rank 0's output"
event=$(date +%s.%N)
[ -z "$pid" ] || kill -9 "$pid"
finish "$d" "$event" 20 5

echo "== node 2's link is cut"
d=$logs/cut
mkdir -p "$d"
start "$d" 5
event=$(date +%s.%N)
"$here/cluster.sh" exec --name $name 2 -- ip link set eth0 down
finish "$d" "$event" 25 ""
[ $rc -eq 0 ] && echo "cluster device faults: passed (logs in $logs)" || echo "cluster device faults: logs in $logs" >&2
exit $rc
