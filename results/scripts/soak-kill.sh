#!/usr/bin/env bash
# Kills one rank with SIGKILL in the middle of a long all-reduce loop, again
# and again, and checks that every survivor returns an error naming it.
#   results/scripts/soak-kill.sh [-n REPS] [-r RANKS] [-b BUILD_DIR] [-t HANG_SECONDS]
#     -n repetitions (default 100), -r ranks as processes (default 4),
#     -b a build with tests (default build), -t how long survivors may take
#     before the repetition counts as a hang (default 30; HOCCL_TIMEOUT is 300)
# Per repetition: start RANKS workers (tests/test_worker.cc, scenario loop),
# wait until all are looping, sleep 0.2-1.0 s, kill -9 a random rank, and
# wait for the others. A survivor's report is correct if its call returned
# hocclRemoteError (6) with a message naming the killed rank. Detection time:
# from the kill to the last survivor's error. Prints the distribution and
# exits non-zero on any hang or wrong report.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
reps=100 ranks=4 build=$root/build hang=30
while getopts n:r:b:t: o; do
  case $o in
    n) reps=$OPTARG ;; r) ranks=$OPTARG ;; b) build=$OPTARG ;; t) hang=$OPTARG ;;
    *) sed -n '2,13p' "$0" >&2; exit 2 ;;
  esac
done
worker=$build/tests/hoccl_test_worker
[ -x "$worker" ] || { echo "soak-kill: $worker not found (build the tests first)" >&2; exit 2; }
work=$(mktemp -d /tmp/hoccl-soak.XXXXXX)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
now() { date +%s.%N; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }
hangs=0 wrong=0 good=0
times=()
for ((i = 1; i <= reps; i++)); do
  dir=$work/$i
  mkdir -p "$dir"
  pids=()
  for ((r = 0; r < ranks; r++)); do
    "$worker" loop $r $ranks "$dir/id" 2>"$dir/rank$r.err" >/dev/null &
    pids+=($!)
    disown $!  # no "Killed" notices; bash still reaps it
  done
  for _ in $(seq 200); do  # up to 10 s for every rank to be in the loop
    [ "$(cat "$dir"/rank*.err 2>/dev/null | grep -c '^LOOPING')" -eq "$ranks" ] && break
    sleep 0.05
  done
  sleep "0.$((RANDOM % 9 + 2))"
  victim=$((RANDOM % ranks))
  killedAt=$(now)
  kill -9 "${pids[$victim]}"
  deadline=$(awk -v a="$killedAt" -v b="$hang" 'BEGIN { printf "%.6f", a + b }')
  hung=0
  for ((r = 0; r < ranks; r++)); do
    [ $r -eq $victim ] && continue
    while kill -0 "${pids[$r]}" 2>/dev/null; do
      if gt "$(now)" "$deadline"; then hung=1; kill -9 "${pids[$r]}"; fi
      sleep 0.02
    done
  done
  if [ $hung -eq 1 ]; then
    hangs=$((hangs + 1))
    echo "rep $i: HANG (rank $victim killed; survivors still running after ${hang} s)"
    continue
  fi
  ok=1 last=$killedAt
  for ((r = 0; r < ranks; r++)); do
    [ $r -eq $victim ] && continue
    line=$(grep -m1 '^DETECTED ' "$dir/rank$r.err" || true)
    read -r _ at code msg <<<"${line:-DETECTED 0 -1 no report}"
    if [ "$code" != 6 ] || ! grep -Eq "rank $victim([^0-9]|$)" <<<"$msg"; then
      ok=0
      echo "rep $i: rank $r's report does not name killed rank $victim: code $code: $msg"
      tail -3 "$dir/rank$r.err" | sed 's/^/    /'
    fi
    if gt "$at" "$last"; then last=$at; fi
  done
  if [ $ok -eq 1 ]; then
    good=$((good + 1))
    times+=("$(awk -v a="$last" -v b="$killedAt" 'BEGIN { printf "%.1f", (a - b) * 1000 }')")
  else
    wrong=$((wrong + 1))
  fi
  rm -rf "$dir"
done
echo "soak-kill: $reps repetitions, $ranks ranks: $good correct reports, $wrong wrong, $hangs hangs"
if [ ${#times[@]} -gt 0 ]; then
  printf '%s\n' "${times[@]}" | sort -n | awk '{ v[NR] = $1 } END {
    n = NR
    printf "detection time (kill -> last survivor error), ms: min %.0f  median %.0f  p90 %.0f  max %.0f\n",
      v[1], v[int((n + 1) / 2)], v[int(n * 0.9 + 0.999)], v[n] }'
fi
[ $wrong -eq 0 ] && [ $hangs -eq 0 ]
