#!/usr/bin/env bash
# Faults on the emulated cluster: 4 nodes under 2 leaves, 2 ranks per node,
# each rank all-reducing 4 MiB in a loop (tests/test_worker.cc, scenario
# loop).
#  1. A rank is killed (SIGKILL, rank 5 on node 2): every other rank, on
#     every node, returns hocclRemoteError naming rank 5, long before the
#     timeout.
#  2. Node 2's link is cut (ip link set eth0 down): every rank returns an
#     error within HOCCL_TIMEOUT (5 s) and a margin, none hangs.
#   tests/cluster/faults.sh WORKER        (hoccl_test_worker; needs root)
# Exit 77 (skipped) where the test bed cannot run, as cluster.sh check.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
worker=${1:?usage: faults.sh path/to/hoccl_test_worker}
rc=0
"$here/cluster.sh" check || exit $?
name=f$$
logs=$(mktemp -d /tmp/hoccl-faults.XXXXXX)
trap '"$here/cluster.sh" down --name $name >/dev/null 2>&1 || true' EXIT
"$here/cluster.sh" up --nodes 4 --switches 2 --node-gbit 1 --name $name --owner $$ >/dev/null
fail() { echo "cluster faults: FAILED: $*" >&2; rc=1; }
# Seconds from the first "KILLING"/"CUT" stamp to rank r's DETECTED line.
detected() {  # dir rank -> "code seconds-after-event message" or nothing
  local line at code msg
  line=$(grep -m1 '^DETECTED ' "$1/rank$2.err" || true)
  [ -n "$line" ] || return 0
  read -r _ at code msg <<<"$line"
  awk -v a="$at" -v b="$(cat "$1/event")" -v c="$code" -v m="$msg" 'BEGIN { printf "%s %.2f %s\n", c, a - b, m }'
}

echo "== a rank is killed"
d=$logs/kill
mkdir -p "$d"
HOCCL_TIMEOUT=60 HOCCL_TEST_SELF_KILL=5:1.5 "$here/cluster.sh" run --cluster $name --ranks-per-node 2 --timeout 90 \
  --grace 30 --logdir "$d" -- "$worker" loop env env "$d/id" >/dev/null 2>"$d/run.err" || true
grep -h '^KILLING' "$d/rank5.err" | awk '{ print $5 }' >"$d/event"
[ -s "$d/event" ] || fail "rank 5 did not kill itself: $(tail -3 "$d/rank5.err")"
for r in 0 1 2 3 4 6 7; do
  [ -s "$d/event" ] || break
  read -r code secs msg <<<"$(detected "$d" $r)"
  echo "rank $r: code ${code:-none} after ${secs:-?} s: ${msg:-no error}"
  [ "${code:-}" = 6 ] && grep -Eq "rank 5([^0-9]|$)" <<<"$msg" || fail "rank $r does not report rank 5's death"
  awk -v s="${secs:-999}" 'BEGIN { exit !(s < 20) }' || fail "rank $r took ${secs:-forever} s (timeout 60 s)"
done

echo "== node 2's link is cut"
d=$logs/cut
mkdir -p "$d"
HOCCL_TIMEOUT=5 "$here/cluster.sh" run --cluster $name --ranks-per-node 2 --timeout 90 --grace 30 --logdir "$d" -- \
  "$worker" loop env env "$d/id" >/dev/null 2>"$d/run.err" &
run=$!
for _ in $(seq 300); do
  [ "$(cat "$d"/rank*.err 2>/dev/null | grep -c '^LOOPING')" -eq 8 ] && break
  sleep 0.1
done
sleep 1
date +%s.%N >"$d/event"
"$here/cluster.sh" exec --name $name 2 -- ip link set eth0 down
wait $run || true
for r in 0 1 2 3 4 5 6 7; do
  read -r code secs msg <<<"$(detected "$d" $r)"
  echo "rank $r: code ${code:-none} after ${secs:-?} s: ${msg:-no error}"
  case ${code:-} in 6|8) ;; *) fail "rank $r returned no timeout or remote error" ;; esac
  awk -v s="${secs:-999}" 'BEGIN { exit !(s < 5 + 15) }' || fail "rank $r took ${secs:-forever} s (timeout 5 s)"
done
[ $rc -eq 0 ] && echo "cluster faults: passed (logs in $logs)" || echo "cluster faults: logs in $logs" >&2
exit $rc
