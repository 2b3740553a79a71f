# shellcheck shell=bash disable=SC2154
# The emulated cluster's names, state, capability check, teardown and status;
# sourced by cluster.sh and selftest.sh. Building is in build.sh.
#
# Every object lives in a network namespace named hoccl-<cluster>-<role>
# (roles: n<i> for node i, leaf<j> for leaf switch j, spine). Nothing is
# created in the host's own namespace: veth pairs are created directly with
# each end in its namespace, and bridges inside the switch namespaces. So
# deleting the namespaces deletes everything, and the namespace list is the
# registry of what exists: teardown needs no bookkeeping that a crash could
# lose. A small state directory (STATE_ROOT/<cluster>) holds the settings and
# the topology file, and is written before the first namespace is made.

PREFIX=hoccl
STATE_ROOT=${HOCCL_CLUSTER_STATE:-/run/hoccl-cluster}
# shellcheck disable=SC2034 # set by cluster_up (build.sh), read by cluster.sh's traps
building="" # the cluster this process is building or owns; its traps tear it down
SUBNET=10.77 # node i is 10.77.x.y with x*256+y = i+1, in one flat /16

say() { echo "cluster: $*" >&2; }
die() {
  echo "cluster.sh: error: $*" >&2
  exit 2
}
elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }

node_ns() { echo "$PREFIX-$1-n$2"; }
leaf_ns() { echo "$PREFIX-$1-leaf$2"; }
spine_ns() { echo "$PREFIX-$1-spine"; }
state_dir() { echo "$STATE_ROOT/$1"; }
node_ip() {
  local h=$(($1 + 1))
  echo "$SUBNET.$((h >> 8)).$((h & 255))"
}

all_netns() { ip netns list 2>/dev/null | awk '{ print $1 }'; }
ns_exists() { [[ -e /run/netns/$1 ]]; }
cluster_netns() { all_netns | grep -E "^$PREFIX-$1-(n[0-9]+|leaf[0-9]+|spine)\$" || true; }

# Every cluster that has a namespace or a state directory.
cluster_names() {
  {
    all_netns | sed -nE "s/^$PREFIX-([A-Za-z0-9_]+)-(n[0-9]+|leaf[0-9]+|spine)\$/\1/p"
    local d
    for d in "$STATE_ROOT"/*/; do basename "$d"; done
  } | sort -u
}

cluster_shape() {
  local n="$C_NODES nodes" s="$C_SWITCHES leaf switches"
  ((C_NODES == 1)) && n="1 node"
  ((C_SWITCHES == 1)) && s="1 leaf switch"
  echo "$n under $s"
}

valid_name() { [[ $1 =~ ^[A-Za-z0-9_]{1,40}$ ]]; }

# Sets $name to the cluster that --name, $HOCCL_CLUSTER, or being the only
# one designates.
resolve_name() {
  local n=${opt_name:-${HOCCL_CLUSTER:-}}
  if [[ -z $n ]]; then
    local all
    all=$(cluster_names)
    [[ -n $all ]] || die "no emulated cluster is up"
    [[ $(wc -l <<<"$all") -eq 1 ]] || die "several clusters are up ($(tr '\n' ' ' <<<"$all")); pick one with --name"
    n=$all
  fi
  valid_name "$n" || die "bad cluster name '$n' (letters, digits, _)"
  name=$n
}

load_state() {
  local f
  f=$(state_dir "$1")/cluster.env
  [[ -r $f ]] || die "no cluster $1 ($f is missing)"
  # shellcheck source=/dev/null
  . "$f"
}

# --- owners: a cluster made by run (or up --owner) dies with its owner ----------

proc_start_time() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  # shellcheck disable=SC2086
  set -- $s
  echo "${20}"
}

owner_pid() { (load_state "$1" 2>/dev/null && echo "${C_OWNER_PID:-}") || true; }

owner_alive() {
  local pid start
  pid=$(owner_pid "$1")
  [[ -n $pid ]] || return 1
  start=$( (load_state "$1" && echo "${C_OWNER_START:-}") 2>/dev/null) || true
  [[ $(proc_start_time "$pid" 2>/dev/null) == "$start" ]]
}

# Removes clusters whose owner has exited (a run killed with SIGKILL, say).
remove_stale_clusters() {
  local n
  for n in $(cluster_names); do
    [[ -n $(owner_pid "$n") ]] || continue
    owner_alive "$n" && continue
    say "removing stale cluster $n (its owner, pid $(owner_pid "$n"), has exited)"
    cluster_down "$n"
  done
}

# --- capability check -----------------------------------------------------------

# Prints why this machine cannot build a cluster; prints nothing if it can.
capability_problem() {
  if ((EUID != 0)); then
    echo "not root (uid $EUID): network namespaces, veth pairs, bridges and tbf need CAP_SYS_ADMIN and CAP_NET_ADMIN"
    return
  fi
  local tool
  for tool in ip tc bridge setsid awk; do
    command -v "$tool" >/dev/null || {
      echo "'$tool' is not installed (Debian packages: iproute2 for ip, tc and bridge; util-linux for setsid)"
      return
    }
  done
  local probe=$PREFIX-probe$$ out
  if ! out=$(ip netns add "$probe" 2>&1); then
    echo "cannot create a network namespace: $out"
    return
  fi
  if ! out=$(ip -n "$probe" link add br0 type bridge 2>&1); then
    echo "cannot create a bridge: $out"
  elif ! out=$(ip -n "$probe" link add v0 type veth peer name v1 2>&1); then
    echo "cannot create a veth pair: $out"
  elif ! out=$(tc -n "$probe" qdisc add dev v0 root tbf rate 1gbit burst 128k limit 1m 2>&1); then
    echo "cannot add a tbf qdisc (sch_tbf): $out"
  fi
  ip netns del "$probe" 2>/dev/null || true
}

# Loud skip (exit 77, ctest's skip code), or failure when running in CI
# (tests/ci-rule.sh: CI set and not 0/false/no/off): CI runs as root and
# must run the cluster tests.
# shellcheck source=../ci-rule.sh
. "$(dirname "${BASH_SOURCE[0]}")/../ci-rule.sh"
skip_or_fail() {
  local reason=$1 what=${2:-the emulated cluster}
  local bar="************************************************************************"
  if hoccl_in_ci; then
    printf '%s\nFAILED: %s needs root and network namespaces, and CI=%s requires them\n  reason: %s\n%s\n' \
      "$bar" "$what" "$CI" "$reason" "$bar" >&2
    exit 1
  fi
  printf '%s\nSKIPPED: %s needs root and network namespaces\n  reason: %s\n  (run as root to test it; in CI this is a failure: tests/ci-rule.sh)\n%s\n' \
    "$bar" "$what" "$reason" "$bar" >&2
  exit 77
}

require_capable() {
  local why
  why=$(capability_problem)
  [[ -z $why ]] || skip_or_fail "$why"
}

cmd_check() {
  require_capable
  say "ok: root, network namespaces, bridges, veth and tbf all work"
}

# --- tearing down -----------------------------------------------------------------

# Signals the process groups led by the given pids (ranks are started with
# setsid), waits up to 2 s, then SIGKILLs what is left. $1 = first signal.
kill_groups() {
  local sig=$1 p t
  shift
  (($#)) || return 0
  for p in "$@"; do kill -"$sig" -- "-$p" "$p" 2>/dev/null || true; done
  for ((t = 0; t < 20; t++)); do
    local alive=0
    for p in "$@"; do kill -0 -- "-$p" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for p in "$@"; do kill -KILL -- "-$p" "$p" 2>/dev/null || true; done
}

# Kills every process inside the given namespaces: TERM, 2 s, KILL.
kill_netns_procs() {
  local ns pids=() t
  for ns in "$@"; do mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "$ns" 2>/dev/null); done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for ((t = 0; t < 20; t++)); do
    local alive=()
    for ns in "$@"; do mapfile -t -O "${#alive[@]}" alive < <(ip netns pids "$ns" 2>/dev/null); done
    ((${#alive[@]})) || return 0
    sleep 0.1
  done
  kill -KILL "${alive[@]}" 2>/dev/null || true
}

# Removes cluster $1 entirely; safe to call any number of times, on a half-built
# cluster, or on one that does not exist.
cluster_down() {
  local name=$1 ns
  valid_name "$name" || return 0
  local -a nss
  mapfile -t nss < <(cluster_netns "$name")
  kill_netns_procs "${nss[@]}"
  for ns in "${nss[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$(state_dir "$name")"
}

# Leftovers outside any cluster: the capability check's namespace from a check
# that was killed, and links named hoccl* in the host namespace (we never make
# any there, but an experiment by hand might have).
remove_root_leftovers() {
  local l ns
  for ns in $(all_netns | grep -E "^$PREFIX-probe[0-9]+\$" || true); do
    [[ -e /proc/${ns#"$PREFIX"-probe} ]] && continue
    ip netns del "$ns" 2>/dev/null && say "removed namespace $ns"
  done
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep "^$PREFIX" || true); do
    if ip link del "$l" 2>/dev/null; then say "removed host link $l"; fi
  done
  return 0
}

# --- status -----------------------------------------------------------------------

# "sent B bytes, P pkts, dropped D, overlimits O" of the tbf on $2 in namespace
# $1; overlimits counts the times the tbf held packets back: it is limiting.
link_stats() {
  tc -n "$1" -s qdisc show dev "$2" 2>/dev/null |
    awk '/^qdisc tbf/ { t = 1 } t && /Sent/ { gsub(/[,)]/, ""); printf "sent %s bytes, %s pkts, dropped %s, overlimits %s", $2, $4, $7, $9; exit }
         END { if (!t) printf "not shaped" }'
}

rate_text() { if [[ $1 == 0 ]]; then echo "not shaped"; else echo "$1 Gbit/s"; fi; }

print_status() {
  local name=$1 verbose=$2 i j owner="none (stays up until down)"
  if ! (load_state "$name" 2>/dev/null); then
    echo "cluster $name: no state; namespaces: $(cluster_netns "$name" | tr '\n' ' ') ('down --all' removes them)"
    return
  fi
  (
    load_state "$name"
    if [[ -n $C_OWNER_PID ]]; then
      owner="pid $C_OWNER_PID ($(owner_alive "$name" && echo running || echo "gone: stale"))"
    fi
    echo "cluster $name: $(cluster_shape), MTU $C_MTU, created $C_CREATED, owner $owner"
    for ((j = 0; j < C_SWITCHES; j++)); do
      local ns
      ns=$(leaf_ns "$name" "$j")
      echo "  leaf$j  $ns  uplink $(rate_text "${C_UPLINK_GBIT[j]}")$(ns_exists "$ns" || echo '  MISSING')"
      if ((verbose)); then
        echo "      up:   $(link_stats "$ns" uplink)"
        echo "      down: $(link_stats "$(spine_ns "$name")" "leaf$j")"
      fi
      for ((i = 0; i < C_NODES; i++)); do
        ((C_LEAF_OF[i] == j)) || continue
        ns=$(node_ns "$name" "$i")
        local procs
        procs=$(ip netns pids "$ns" 2>/dev/null | wc -l)
        echo "    n$i  $ns  $(node_ip "$i")  link $(rate_text "${C_NODE_GBIT[i]}")  processes $procs$(ns_exists "$ns" || echo '  MISSING')"
        if ((verbose)); then
          echo "      out: $(link_stats "$ns" eth0)"
          echo "      in:  $(link_stats "$(leaf_ns "$name" "$j")" "n$i")"
        fi
      done
    done
    echo "  topology file: $(state_dir "$name")/topo.json"
  )
}
