#!/usr/bin/env bash
# Checks the emulated cluster itself: 4 nodes under 2 leaf switches, 1 Gbit/s
# node links, 1 Gbit/s uplinks. Every node reaches every other; one TCP flow
# gets the link rate inside a leaf and across the spine; two flows that cross
# the same uplink share it; `run` starts ranks with the right environment,
# propagates failures and timeouts, and leaves nothing behind; a half-built
# cluster is torn down. Exit 0 = passed, 1 = failed, 77 = skipped (not root,
# no namespaces; in CI (tests/ci-rule.sh) that is a failure instead).
#
#   tests/cluster/selftest.sh [--perf PROGRAM]
#     --perf: also run PROGRAM (e.g. build/perf/all_reduce_perf) with 2 ranks
#             per node on the cluster and require it to succeed
set -Eeuo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
CLUSTER=$HERE/cluster.sh
TOOL=$HERE/nettool.py

perf=""
while (($#)); do
  case $1 in
    --perf) perf=${2?}; shift ;;
    -h | --help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "selftest.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

why=$(capability_problem)
[[ -z $why ]] || skip_or_fail "$why" "the cluster selftest"
command -v python3 >/dev/null || skip_or_fail "python3 is not installed (the traffic tool, nettool.py, needs it)" "the cluster selftest"

NAME=st$$
NODES=4 SWITCHES=2 RATE=1 UPLINK=1
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/hoccl-selftest.XXXXXX")
t_begin=$EPOCHREALTIME

pass() { echo "  ok    $*"; }
fail() {
  echo "  FAIL  $*"
  failures=$((failures + 1))
}
# pass or fail on an awk condition over named numbers: check LABEL COND a=1 b=2
check() {
  local label=$1 cond=$2 kv args=()
  shift 2
  for kv in "$@"; do args+=(-v "$kv"); done
  if awk "${args[@]}" "BEGIN { exit !($cond) }" </dev/null; then pass "$label"; else fail "$label"; fi
}

# Whatever happens, the clusters go away and nothing with our name is left.
leftovers() {
  {
    all_netns | grep -E "^$PREFIX-${NAME}[a-z]?-" || true
    [[ -e $STATE_ROOT/$NAME ]] && echo "state dir $STATE_ROOT/$NAME"
    ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | grep "^$PREFIX" || true
  } | tr '\n' ' '
}
finish() {
  local rc=$?
  set +e
  trap - ERR
  "$CLUSTER" down --name "$NAME" >/dev/null 2>&1
  "$CLUSTER" down --name "${NAME}h" >/dev/null 2>&1
  "$CLUSTER" down --name "${NAME}r" >/dev/null 2>&1
  rm -rf "$scratch"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'echo "selftest.sh: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

on() { "$CLUSTER" exec --name "$NAME" "$@"; }

# --- bring up ---------------------------------------------------------------------
echo "== up: $NODES nodes under $SWITCHES leaf switches, node links $RATE Gbit/s, uplinks $UPLINK Gbit/s"
t0=$EPOCHREALTIME
if ! "$CLUSTER" up --nodes $NODES --switches $SWITCHES --node-gbit $RATE --uplink-gbit $UPLINK \
  --name "$NAME" --owner $$ >/dev/null 2>"$scratch/up.err"; then
  cat "$scratch/up.err"
  fail "up"
  exit 1
fi
t_up=$(elapsed_since "$t0")
pass "up in $t_up s"
"$CLUSTER" status --name "$NAME" | sed 's/^/        /'

# --- reachability -----------------------------------------------------------------
echo "== ping matrix (ICMP echo, 1 s timeout; row = from, column = to)"
printf '        from\\to'
for ((j = 0; j < NODES; j++)); do printf ' %4s' "n$j"; done
echo
unreachable=0
for ((i = 0; i < NODES; i++)); do
  targets=()
  for ((j = 0; j < NODES; j++)); do ((i == j)) || targets+=("$(node_ip $j)"); done
  out=$(on "$i" -- python3 "$TOOL" ping -W 1 "${targets[@]}" || true)
  printf '        n%-6s' "$i"
  for ((j = 0; j < NODES; j++)); do
    if ((i == j)); then
      printf ' %4s' -
    elif grep -q "^$(node_ip $j) ok" <<<"$out"; then
      printf ' %4s' ok
    else
      printf ' %4s' FAIL
      unreachable=$((unreachable + 1))
    fi
  done
  echo
done
if ((unreachable == 0)); then pass "all $((NODES * (NODES - 1))) pairs reach each other"; else fail "$unreachable pairs unreachable"; fi

# --- throughput -------------------------------------------------------------------
# Mbit/s of one flow per "from:to" argument, all at once; prints one rate per flow.
flows() {
  local spec from to port=5201 pids=() k=0
  for spec in "$@"; do
    to=${spec#*:}
    on "$to" -- python3 "$TOOL" server --port $port >/dev/null &
    pids+=($!)
  done
  for spec in "$@"; do
    from=${spec%:*} to=${spec#*:}
    on "$from" -- python3 "$TOOL" client "$(node_ip "$to")" --port $port --seconds 2 >"$scratch/flow$k" &
    pids+=($!)
    k=$((k + 1))
  done
  wait "${pids[@]}" || true
  for ((k = 0; k < $#; k++)); do awk '{ print $2 + 0 }' "$scratch/flow$k"; done
}

# A machine busy with other work can starve one measurement; a rate out of
# range is measured once more before it counts as a failure.
measure() { # measure LABEL LO HI from:to  ->  one flow, LO..HI Mbit/s
  local label=$1 lo=$2 hi=$3 r attempt
  for attempt in 1 2; do
    r=$(flows "$4")
    if awk -v r="$r" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(r >= lo && r <= hi) }'; then
      pass "$label: $r Mbit/s (expected $lo..$hi)"
      return
    fi
    ((attempt == 2)) || echo "        $label: $r Mbit/s, out of $lo..$hi; measuring again"
  done
  fail "$label: $r Mbit/s (expected $lo..$hi)"
}

lo=$(awk -v g=$RATE 'BEGIN { print g * 700 }') hi=$(awk -v g=$RATE 'BEGIN { print g * 1100 }')
echo "== one TCP flow, 2 s, receiver-side rate (TCP over 1500-byte frames carries at most 95.6% of the link)"
measure "same leaf     n0 -> n1 (leaf0)             " "$lo" "$hi" 0:1
measure "across spine  n0 -> n2 (leaf0-spine-leaf1) " "$lo" "$hi" 0:2

echo "== two concurrent flows across the spine: n0 -> n2 and n1 -> n3 share leaf0's $UPLINK Gbit/s uplink"
up_mbit=$(awk -v g=$UPLINK 'BEGIN { print g * 1000 }')
for attempt in 1 2; do
  mapfile -t r < <(flows 0:2 1:3)
  sum=$(awk -v a="${r[0]}" -v b="${r[1]}" 'BEGIN { print a + b }')
  ok=$(awk -v a="${r[0]}" -v b="${r[1]}" -v u="$up_mbit" \
    'BEGIN { s = a + b; print (a >= 0.3 * u && a <= 0.7 * u && b >= 0.3 * u && b <= 0.7 * u && s >= 0.7 * u && s <= 1.1 * u) }')
  ((ok || attempt == 2)) && break
  echo "        ${r[0]} + ${r[1]} Mbit/s is not an even share of $up_mbit; measuring again"
done
msg="n0->n2 ${r[0]} Mbit/s, n1->n3 ${r[1]} Mbit/s, sum $sum (expected each 30..70% of $up_mbit, sum 70..110%)"
if ((ok)); then pass "$msg"; else fail "$msg"; fi
stats=$(link_stats "$PREFIX-$NAME-leaf0" uplink)
over=$(sed -n 's/.*overlimits \([0-9]*\).*/\1/p' <<<"$stats")
check "tc -s: leaf0's uplink tbf held packets back ($stats)" "o > 0" o="${over:-0}"

echo "== control: two concurrent flows inside the leaves (n0 -> n1, n2 -> n3) share no link"
mapfile -t r < <(flows 0:1 2:3)
echo "        n0->n1 ${r[0]} Mbit/s, n2->n3 ${r[1]} Mbit/s (information only: both near the link rate unless the CPUs are busy)"

# --- run --------------------------------------------------------------------------
echo "== run: ranks, environment, exit codes, timeouts"
logs=$scratch/run1
# shellcheck disable=SC2016
if "$CLUSTER" run --cluster "$NAME" --ranks-per-node 2 --logdir "$logs" -- sh -c \
  'echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK node=$NODE_RANK host=$HOCCL_HOSTID master=$MASTER_ADDR:$MASTER_PORT if=$HOCCL_SOCKET_IFNAME topo=$HOCCL_TOPO_FILE"
   python3 "$0" ping -W 1 "$MASTER_ADDR" >/dev/null' "$TOOL" >/dev/null 2>&1; then
  bad=0
  for ((r = 0; r < NODES * 2; r++)); do
    n=$((r / 2))
    want="rank=$r world=$((NODES * 2)) local=$((r % 2)) node=$n host=$PREFIX-$NAME-n$n master=$(node_ip 0):29500 if=eth0 topo=$logs/topo.json"
    [[ $(cat "$logs/rank$r.out") == "$want" ]] || {
      bad=1
      echo "        rank $r printed '$(cat "$logs/rank$r.out")', expected '$want'"
    }
  done
  if ((bad)); then fail "8 ranks: wrong environment"; else pass "8 ranks (2 per node) got RANK..HOCCL_TOPO_FILE right and reached MASTER_ADDR"; fi
else
  fail "8 ranks printing their environment: run failed (logs in $logs)"
fi
if python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); assert t["version"] == 1 and len(t["switches"]) == 3' \
  "$logs/topo.json" 2>/dev/null; then
  pass "topology file parses as JSON: $(tr -d '\n' <"$logs/topo.json")"
else
  fail "topology file $logs/topo.json is not the expected JSON"
fi

t0=$SECONDS
rc=0
"$CLUSTER" run --cluster "$NAME" --ranks-per-node 2 --grace 1 --logdir "$scratch/run2" -- sh -c '[ "$RANK" = 5 ] && exit 7; sleep 60' >/dev/null 2>&1 || rc=$?
check "a rank exiting 7 makes run exit 7 ($rc) and stops the others ($((SECONDS - t0)) s)" "rc == 7 && t < 15" rc=$rc t=$((SECONDS - t0))

t0=$SECONDS
rc=0
"$CLUSTER" run --cluster "$NAME" --timeout 2 --logdir "$scratch/run3" -- sh -c 'trap "" TERM; sleep 60' >/dev/null 2>&1 || rc=$?
procs=0
for ((i = 0; i < NODES; i++)); do procs=$((procs + $(ip netns pids "$PREFIX-$NAME-n$i" | wc -l))); done
check "--timeout 2 on ranks that ignore SIGTERM: exit $rc (want 124), $procs processes left in the nodes" \
  "rc == 124 && p == 0" rc=$rc p=$procs

if [[ -n $perf ]]; then
  echo "== hoccl: $perf, 2 ranks per node, over the emulated network"
  rc=0
  "$CLUSTER" run --cluster "$NAME" --ranks-per-node 2 --timeout 120 --logdir "$scratch/perf" -- \
    "$perf" -b 8 -e 1M -f 8 -n 5 >"$scratch/perf.out" 2>&1 || rc=$?
  if ((rc == 0)); then
    pass "$(basename "$perf") on $((NODES * 2)) ranks: $(grep -m1 'Avg bus bandwidth' "$scratch/perf.out" | tr -s ' ')"
  else
    fail "$(basename "$perf") on $((NODES * 2)) ranks exited $rc:"
    sed 's/^/        /' "$scratch/perf.out" | tail -30
  fi
fi

# A cluster that run brings up itself is gone when run returns.
rc=0
out=$("$CLUSTER" run --nodes 2 --switches 2 --name "${NAME}r" --logdir "$scratch/run4" -- true 2>&1) || rc=$?
left=$(all_netns | grep -c "^$PREFIX-${NAME}r-" || true)
check "run with its own cluster: exit $rc, $left namespaces left" "rc == 0 && left == 0" rc=$rc left="$left"

# A cluster whose setup fails half-way is torn down: here tc fails.
mkdir -p "$scratch/bin"
printf '#!/bin/sh\nfor a; do [ "$a" = -b ] && { echo "selftest: tc made to fail" >&2; exit 1; }; done\nexec %s "$@"\n' \
  "$(command -v tc)" >"$scratch/bin/tc"
chmod +x "$scratch/bin/tc"
rc=0
PATH=$scratch/bin:$PATH "$CLUSTER" up --nodes 3 --switches 2 --name "${NAME}h" >/dev/null 2>&1 || rc=$?
left=$(all_netns | grep -c "^$PREFIX-${NAME}h-" || true)
check "up failing half-way (tc fails): exit $rc, $left namespaces left" "rc != 0 && left == 0" rc=$rc left="$left"

# --- tear down --------------------------------------------------------------------
echo "== down"
t0=$EPOCHREALTIME
"$CLUSTER" down --name "$NAME" >/dev/null 2>&1
t_down=$(elapsed_since "$t0")
left=$(leftovers)
if [[ -z $left ]]; then pass "down in $t_down s; no namespace, bridge, veth or state left"; else fail "left behind: $left"; fi

echo "== selftest: setup $t_up s, teardown $t_down s, total $(elapsed_since "$t_begin") s, $failures failures"
((failures == 0))
