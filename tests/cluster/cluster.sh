#!/usr/bin/env bash
# An emulated cluster on one Linux machine: nodes are network namespaces,
# switches are bridges, links are veth pairs rate-limited by tbf. See README.md.
#
#   cluster.sh check                        can this machine build one? (77 = skip)
#   cluster.sh up --nodes N --switches S [--node-gbit R] [--uplink-gbit U] [--mtu M] [--name NAME]
#   cluster.sh run [up options | --cluster NAME] [--ranks-per-node K] [--timeout SEC] -- program args...
#   cluster.sh exec [--name NAME] NODE -- command...     NODE: 0, n0, leaf0, spine
#   cluster.sh status [-v] | down [--name NAME] | down --all [--force]
set -Eeuo pipefail
shopt -s nullglob
# Name the command that failed (not for SIGPIPE: a reader such as head left).
# shellcheck disable=SC2154
trap 'rc=$?; ((rc == 141)) || echo "cluster.sh: failed (exit $rc) at line $LINENO: ${BASH_COMMAND%%$'"'"'\n'"'"'*}" >&2' ERR

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=build.sh
. "$HERE/build.sh"

usage() {
  sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
  cat <<'EOF'

Options:
  --nodes N            nodes (network namespaces)                       [required for up/run]
  --switches S         leaf switches; node i sits under leaf i*S/N       [1]
  --node-gbit R        node link rate in Gbit/s, both directions; one value
                       or one per node ("1,1,10,10"); 0 = not shaped     [1]
  --uplink-gbit U      leaf-to-spine rate in Gbit/s, both directions; one
                       value or one per leaf; 0 = not shaped
                                       [the sum of the leaf's node links: not oversubscribed]
  --mtu M              MTU of every link                                 [1500]
  --name NAME          cluster name ([A-Za-z0-9_]); namespaces are hoccl-NAME-*
                                       [c<pid> for up, r<pid> for run]
  --owner PID          up: the cluster belongs to PID; once PID is gone,
                       'down --all' and the next up/run remove it
run only:
  --cluster NAME       run in a cluster that is already up (it stays up)
  --ranks-per-node K   ranks per node; global rank = node*K + local rank  [1]
  --timeout SEC        kill every rank after SEC seconds; exit 124         [600]
  --grace SEC          after a rank fails, the others get SEC seconds to
                       finish (and report the failure), then are killed  [10]
  --port P             MASTER_PORT on node 0 (the namespace is new: free) [29500]
  --logdir DIR         rank logs (rankR.out, rankR.err)  [a new /tmp/hoccl-cluster-NAME.*]
  --topo-file FILE     HOCCL_TOPO_FILE for the ranks; 'none' to leave it unset
                                                 [the cluster's own, written by up]
  --print-all          print every rank's output, not only rank 0's
Ranks get RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR
(node 0's address), MASTER_PORT, HOCCL_HOSTID (the node's name), HOCCL_SOCKET_IFNAME,
HOCCL_TOPO_FILE, HOCCL_CLUSTER and HOCCL_CLUSTER_NODE.
EOF
}

opt_nodes="" opt_switches=1 opt_node_gbit=1 opt_uplink_gbit="" opt_mtu=1500 opt_name=""
opt_owner="" opt_cluster="" opt_rpn=1 opt_timeout=600 opt_grace=10 opt_port=29500
opt_logdir="" opt_topo_file="" opt_print_all=0 opt_all=0 opt_force=0 opt_verbose=0
positional=()
command_args=()

parse_options() {
  while (($#)); do
    case $1 in
      --) shift; command_args=("$@"); return ;;
      --nodes) opt_nodes=${2?}; shift ;;
      --switches) opt_switches=${2?}; shift ;;
      --node-gbit) opt_node_gbit=${2?}; shift ;;
      --uplink-gbit) opt_uplink_gbit=${2?}; shift ;;
      --mtu) opt_mtu=${2?}; shift ;;
      --name) opt_name=${2?}; shift ;;
      --owner) opt_owner=${2?}; shift ;;
      --cluster) opt_cluster=${2?}; shift ;;
      --ranks-per-node) opt_rpn=${2?}; shift ;;
      --timeout) opt_timeout=${2?}; shift ;;
      --grace) opt_grace=${2?}; shift ;;
      --port) opt_port=${2?}; shift ;;
      --logdir) opt_logdir=${2?}; shift ;;
      --topo-file) opt_topo_file=${2?}; shift ;;
      --print-all) opt_print_all=1 ;;
      --all) opt_all=1 ;;
      --force) opt_force=1 ;;
      -v | --verbose) opt_verbose=1 ;;
      -h | --help) usage; exit 0 ;;
      -*) die "unknown option $1 (see --help)" ;;
      *) positional+=("$1") ;;
    esac
    shift
  done
}

# --- up / down ------------------------------------------------------------------

cmd_up() {
  require_capable
  local name=${opt_name:-c$$}
  # Half-built clusters never survive: tear down on any failure before the end.
  trap 'set +e; trap - ERR; if [[ -n $building ]]; then cluster_down "$building" >/dev/null 2>&1; fi' EXIT
  trap 'say "interrupted (SIGINT): stopping and tearing down"; exit 130' INT
  trap 'say "terminated (SIGTERM): stopping and tearing down"; exit 143' TERM
  local t0=$EPOCHREALTIME
  cluster_up "$name" "$opt_owner"
  trap - EXIT INT TERM
  say "cluster $name is up in $(elapsed_since "$t0") s: $(cluster_shape) (see: $0 status)"
  echo "$name"
}

cmd_down() {
  if ((opt_all)); then
    local n
    for n in $(cluster_names); do
      if ((!opt_force)) && owner_alive "$n"; then
        say "keeping $n: its owner (pid $(owner_pid "$n")) is running; --force removes it too"
        continue
      fi
      cluster_down "$n"
      say "removed $n"
    done
    remove_root_leftovers
    return
  fi
  local name
  resolve_name
  if [[ -z $(cluster_netns "$name") && ! -e $(state_dir "$name") ]]; then
    say "no cluster $name: nothing to remove"
    return
  fi
  cluster_down "$name"
  say "removed $name"
}

# --- exec -----------------------------------------------------------------------

cmd_exec() {
  ((${#positional[@]} == 1)) || die "exec: give one node (0, n0, leaf0 or spine), then -- command"
  ((${#command_args[@]})) || die "exec: no command after --"
  local name target=${positional[0]} ns
  resolve_name
  load_state "$name"
  case $target in
    spine) ns=$(spine_ns "$name") ;;
    leaf[0-9]*) ns="$PREFIX-$name-$target" ;;
    n[0-9]* | [0-9]*)
      local i=${target#n}
      [[ $i =~ ^[0-9]+$ ]] && ((i < C_NODES)) || die "exec: no node $target in $name (it has $C_NODES)"
      ns=$(node_ns "$name" "$i")
      ns_exists "$ns" || die "exec: no namespace $ns"
      exec ip netns exec "$ns" env HOCCL_HOSTID="$ns" HOCCL_SOCKET_IFNAME=eth0 \
        HOCCL_TOPO_FILE="$(state_dir "$name")/topo.json" HOCCL_CLUSTER="$name" HOCCL_CLUSTER_NODE="$i" \
        "${command_args[@]}"
      ;;
    *) die "exec: $target is not a node (0, n0), leaf (leaf0) or spine" ;;
  esac
  ns_exists "$ns" || die "exec: no namespace $ns"
  exec ip netns exec "$ns" "${command_args[@]}"
}

# --- status ---------------------------------------------------------------------

cmd_status() {
  local names n
  names=${opt_name:-$(cluster_names)}
  if [[ -z $names ]]; then
    echo "no emulated clusters (no $PREFIX-* namespaces)"
    return
  fi
  for n in $names; do print_status "$n" "$opt_verbose"; done
}

# --- run ------------------------------------------------------------------------

rank_pids=()
run_name=""

run_cleanup() {
  set +e
  trap - ERR
  kill_groups TERM "${rank_pids[@]}"
  if [[ -n $building ]]; then cluster_down "$building"; fi
  return 0
}

cmd_run() {
  ((${#command_args[@]})) || die "run: no program (run [options] -- program args...)"
  [[ $opt_rpn =~ ^[1-9][0-9]*$ ]] || die "--ranks-per-node must be a positive integer"
  [[ $opt_timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds"
  [[ $opt_grace =~ ^[0-9]+$ ]] || die "--grace must be a number of seconds"
  require_capable
  # shellcheck disable=SC2154
  trap 'rc=$?; run_cleanup; exit $rc' EXIT
  trap 'say "interrupted (SIGINT): stopping and tearing down"; exit 130' INT
  trap 'say "terminated (SIGTERM): stopping and tearing down"; exit 143' TERM
  local t0=$EPOCHREALTIME
  if [[ -n $opt_cluster ]]; then
    run_name=$opt_cluster
    load_state "$run_name"
  else
    run_name=${opt_name:-r$$}
    cluster_up "$run_name" $$
    say "cluster $run_name up in $(elapsed_since "$t0") s: $(cluster_shape)"
  fi

  local logdir=$opt_logdir
  if [[ -z $logdir ]]; then
    logdir=$(mktemp -d "${TMPDIR:-/tmp}/hoccl-cluster-$run_name.XXXXXX")
  else
    mkdir -p "$logdir"
    rm -f "$logdir"/rank*.out "$logdir"/rank*.err "$logdir/topo.json" # an earlier run's
  fi
  local topo=$opt_topo_file
  if [[ -z $topo ]]; then
    topo=$logdir/topo.json
    cp "$(state_dir "$run_name")/topo.json" "$topo"
  fi
  [[ $topo == none ]] && topo=""

  local k=$opt_rpn world=$((C_NODES * opt_rpn)) master i l r ns
  master=$(node_ip 0)
  local -a node_of_rank=()
  for ((i = 0; i < C_NODES; i++)); do
    ns=$(node_ns "$run_name" "$i")
    for ((l = 0; l < k; l++)); do
      r=$((i * k + l))
      # shellcheck disable=SC2034 # read by report_ranks through a nameref
      node_of_rank[r]=$i
      # setsid: each rank leads its own process group, so it can be killed as a whole.
      setsid ip netns exec "$ns" env RANK=$r WORLD_SIZE=$world LOCAL_RANK=$l LOCAL_WORLD_SIZE=$k \
        NODE_RANK=$i GROUP_RANK=$i MASTER_ADDR="$master" MASTER_PORT="$opt_port" \
        HOCCL_HOSTID="$ns" HOCCL_SOCKET_IFNAME=eth0 ${topo:+HOCCL_TOPO_FILE="$topo"} \
        HOCCL_CLUSTER="$run_name" HOCCL_CLUSTER_NODE=$i \
        "${command_args[@]}" </dev/null >"$logdir/rank$r.out" 2>"$logdir/rank$r.err" &
      rank_pids[r]=$!
    done
  done
  say "started $world ranks ($k per node) of: ${command_args[*]}"
  say "MASTER_ADDR=$master MASTER_PORT=$opt_port; logs in $logdir"

  local -a codes=()
  local t_start=$SECONDS deadline=$((SECONDS + opt_timeout)) fail_deadline="" timed_out=0 running
  while :; do
    running=0
    for r in "${!rank_pids[@]}"; do
      [[ -n ${codes[r]:-} ]] && continue
      if kill -0 "${rank_pids[r]}" 2>/dev/null; then
        running=$((running + 1))
      else
        local c=0
        { wait "${rank_pids[r]}"; } 2>/dev/null || c=$?
        codes[r]=$c
        if ((c != 0)) && [[ -z $fail_deadline ]]; then
          fail_deadline=$((SECONDS + opt_grace))
          say "rank $r exited with $c; the others get ${opt_grace} s to finish"
        fi
      fi
    done
    ((running)) || break
    if ((SECONDS >= deadline)); then
      timed_out=1
      say "TIMEOUT: $running ranks still running after $opt_timeout s; killing them"
      break
    fi
    if [[ -n $fail_deadline ]] && ((SECONDS >= fail_deadline)); then
      say "killing the $running ranks still running ${opt_grace} s after a rank failed"
      break
    fi
    sleep 0.1
  done
  local -a killed=()
  for r in "${!rank_pids[@]}"; do [[ -z ${codes[r]:-} ]] && killed+=("$r"); done
  if ((${#killed[@]})); then
    local pids=()
    for r in "${killed[@]}"; do pids+=("${rank_pids[r]}"); done
    kill_groups TERM "${pids[@]}"
    for r in "${killed[@]}"; do
      local c=0
      { wait "${rank_pids[r]}"; } 2>/dev/null || c=$? # no "Killed" notices
      codes[r]=$c
    done
  fi
  rank_pids=()

  report_ranks "$logdir" "$world" codes node_of_rank killed
  # The worst exit among ranks that ended by themselves; ranks killed here
  # only show that another one failed first (or that time ran out: 124).
  local worst=0
  for r in "${!codes[@]}"; do
    [[ " ${killed[*]} " == *" $r "* ]] && continue
    if ((codes[r] > worst)); then worst=${codes[r]}; fi
  done
  if ((timed_out && worst == 0)); then worst=124; fi
  say "$world ranks on $(cluster_shape) finished in $((SECONDS - t_start)) s; exit $worst; logs in $logdir"
  exit "$worst"
}

# Rank 0's stdout goes to stdout, unchanged, so that the output of
# `cluster.sh run ... -- all_reduce_perf` can be parsed as the program's own.
# Everything else goes to stderr: rank 0's stderr, every rank's output with
# --print-all, and the last lines of each failed rank's.
report_ranks() {
  local logdir=$1 world=$2
  local -n _codes=$3 _node_of=$4 _killed=$5
  local r f
  for ((r = 0; r < world; r++)); do
    local full=0 note=""
    if ((r == 0 || opt_print_all)); then
      full=1
    elif ((_codes[r] == 0)); then
      continue
    fi
    [[ " ${_killed[*]} " != *" $r "* ]] || note=" (killed)"
    echo "===== rank $r on $(node_ns "$run_name" "${_node_of[r]}") ($(node_ip "${_node_of[r]}")): exit ${_codes[r]}$note =====" >&2
    for f in out err; do
      [[ -s $logdir/rank$r.$f ]] || continue
      if [[ $f == out && $r == 0 ]]; then
        cat "$logdir/rank$r.$f"
        continue
      fi
      echo "----- rank $r std$f -----" >&2
      if ((full)); then cat "$logdir/rank$r.$f"; else tail -n 30 "$logdir/rank$r.$f"; fi >&2
    done
  done
}

main() {
  (($#)) || { usage; exit 2; }
  local cmd=$1
  shift
  parse_options "$@"
  case $cmd in
    check) cmd_check ;;
    up) cmd_up ;;
    down) cmd_down ;;
    exec) cmd_exec ;;
    status) cmd_status ;;
    run) cmd_run ;;
    help | -h | --help) usage ;;
    *) die "unknown command $cmd (check, up, down, exec, status, run)" ;;
  esac
}

main "$@"
