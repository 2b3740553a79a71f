#!/usr/bin/env bash
# Heartbeats on the emulated cluster: 4 nodes under 2 leaves, 2 ranks per
# node, each rank all-reducing 4 MiB in a loop (tests/test_worker.cc,
# scenario loop), with HOCCL_TIMEOUT=300, so that only the heartbeats can
# end the calls in time (HOCCL_HEARTBEAT_TIMEOUT=3).
#  1. Node 2's link is cut (ip link set eth0 down), TRIALS times, each on a
#     cluster of its own: every rank, on every node, returns
#     hocclRemoteError naming a rank across the cut, its host and "no
#     heartbeat", within HOCCL_HEARTBEAT_TIMEOUT + 1 s of the cut.
#  2. Rank 5 (node 2) is frozen (SIGSTOP), TRIALS times: every other rank
#     returns hocclRemoteError naming rank 5, its pid and host and "no
#     heartbeat" within the same bound; then rank 5 is let go (SIGCONT)
#     and ends too.
#   tests/cluster/heartbeat.sh WORKER [TRIALS]   (hoccl_test_worker; needs root)
# Prints one line per rank and trial ("cut 1 rank 3: code 6 after 3.12 s:
# ..."), and the slowest per kind. Exit 77 (skipped) where the test bed
# cannot run, as cluster.sh check.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
worker=${1:?usage: heartbeat.sh path/to/hoccl_test_worker [trials]}
trials=${2:-3}
hb=3
rc=0
"$here/cluster.sh" check || exit $?
logs=$(mktemp -d /tmp/hoccl-heartbeat.XXXXXX)
names=()
trap 'for n in "${names[@]}"; do "$here/cluster.sh" down --name $n >/dev/null 2>&1 || true; done' EXIT
fail() { echo "cluster heartbeat: FAILED: $*" >&2; rc=1; }

# Starts the loop on cluster $1 with logs in $2, in the background ($run),
# and waits until every rank loops.
start() {
  HOCCL_TIMEOUT=300 HOCCL_HEARTBEAT_TIMEOUT=$hb "$here/cluster.sh" run --cluster "$1" --ranks-per-node 2 \
    --timeout 120 --grace 60 --logdir "$2" -- "$worker" loop env env "$2/id" >/dev/null 2>"$2/run.err" &
  run=$!
  for _ in $(seq 600); do
    [ "$(cat "$2"/rank*.err 2>/dev/null | grep -c '^LOOPING')" -eq 8 ] && break
    sleep 0.1
  done
  sleep 1
}

# Checks rank $3's report in $2 (trial $1): hocclRemoteError, "no heartbeat",
# the silent peer's host matching $4 (an extended regex), within the bound.
check() {
  local line at code msg secs host
  line=$(grep -m1 '^DETECTED ' "$2/rank$3.err" || true)
  if [ -z "$line" ]; then
    fail "$1 rank $3 reported nothing: $(tail -2 "$2/rank$3.err" | tr '\n' ' ')"
    return
  fi
  read -r _ at code msg <<<"$line"
  secs=$(awk -v a="$at" -v b="$(cat "$2/event")" 'BEGIN { printf "%.2f", a - b }')
  echo "$1 rank $3: code $code after $secs s: $msg"
  echo "$secs" >>"$logs/${1%% *}.times"
  [ "$code" = 6 ] || fail "$1 rank $3 returned $code, not hocclRemoteError (6)"
  host=$(sed -n 's/.*peer rank [0-9]* (pid [0-9]* on \([^)]*\)) is silent: no heartbeat for .*/\1/p' <<<"$msg")
  [[ -n "$host" && "$host" =~ $4 ]] || fail "$1 rank $3 does not name a silent peer on ${4}: $msg"
  awk -v s="$secs" -v b=$((hb + 1)) 'BEGIN { exit !(s <= b) }' || fail "$1 rank $3 took $secs s (bound $((hb + 1)) s)"
}

for t in $(seq "$trials"); do
  echo "== cut link, trial $t"
  name=hb$$c$t
  names+=("$name")
  "$here/cluster.sh" up --nodes 4 --switches 2 --node-gbit 1 --name "$name" --owner $$ >/dev/null
  d=$logs/cut$t
  mkdir -p "$d"
  start "$name" "$d"
  date +%s.%N >"$d/event"
  "$here/cluster.sh" exec --name "$name" 2 -- ip link set eth0 down
  wait $run || true
  for r in 0 1 2 3 6 7; do check "cut $t" "$d" $r "-n2\$"; done
  for r in 4 5; do check "cut $t" "$d" $r "-n[013]\$"; done
  "$here/cluster.sh" down --name "$name" >/dev/null
done

name=hb$$s
names+=("$name")
"$here/cluster.sh" up --nodes 4 --switches 2 --node-gbit 1 --name "$name" --owner $$ >/dev/null
for t in $(seq "$trials"); do
  echo "== rank 5 frozen, trial $t"
  d=$logs/stop$t
  mkdir -p "$d"
  start "$name" "$d"
  pid=$(sed -n 's/^LOOPING rank 5 pid \([0-9]*\).*/\1/p' "$d/rank5.err")
  date +%s.%N >"$d/event"
  kill -STOP "$pid"
  for _ in $(seq $(((hb + 10) * 10))); do
    [ "$(cat "$d"/rank[0-4].err "$d"/rank[67].err | grep -c '^DETECTED')" -eq 7 ] && break
    sleep 0.1
  done
  kill -CONT "$pid"
  wait $run || true
  for r in 0 1 2 3 4 6 7; do
    check "stop $t" "$d" $r "-n2\$"
    grep -q "peer rank 5 (pid $pid on" "$d/rank$r.err" || fail "stop $t rank $r does not name rank 5 (pid $pid)"
  done
  grep -q '^DETECTED ' "$d/rank5.err" || fail "stop $t: rank 5 did not end with an error once let go"
done

for kind in cut stop; do
  [ -s "$logs/$kind.times" ] && echo "$kind: slowest rank after $(sort -n "$logs/$kind.times" | tail -1) s (bound $((hb + 1)) s)"
done
[ $rc -eq 0 ] && echo "cluster heartbeat: passed (logs in $logs)" || echo "cluster heartbeat: logs in $logs" >&2
exit $rc
