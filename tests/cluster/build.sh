# shellcheck shell=bash disable=SC2154
# Building an emulated cluster (cluster.sh up, run); sourced by cluster.sh after
# lib.sh. Reads cluster.sh's parsed options (opt_*).

# tbf on each direction of each link (see README.md, "Rates: tbf"): the bucket
# holds max(TBF_BURST_MS at the link rate, TBF_MIN_BURST bytes, 4 frames), so
# a full 64 KiB GSO packet passes unsplit and a late timer (hrtimer, or 1/HZ
# on a busy CPU) loses no tokens; the queue holds TBF_QUEUE_MS at the link
# rate on top of the bucket.
TBF_BURST_MS=${HOCCL_CLUSTER_TBF_BURST_MS:-2}
TBF_MIN_BURST=${HOCCL_CLUSTER_TBF_MIN_BURST:-131072}
TBF_QUEUE_MS=${HOCCL_CLUSTER_TBF_QUEUE_MS:-5}
MAX_NODES=1000

# Sets array $1 to COUNT rates (Gbit/s, 0 = not shaped) from "R" or "R1,R2,...".
expand_rates() {
  local -n _out=$1
  local spec=$2 count=$3 what=$4 i
  local -a list
  IFS=, read -ra list <<<"$spec"
  for i in "${!list[@]}"; do
    [[ ${list[i]} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "$what: '${list[i]}' is not a rate in Gbit/s"
    list[i]=$(awk -v r="${list[i]}" 'BEGIN { printf "%.6g", r }') # a JSON number: 1, 0.5, not 01 or 1.50
  done
  _out=()
  if ((${#list[@]} == 1)); then
    for ((i = 0; i < count; i++)); do _out+=("${list[0]}"); done
  elif ((${#list[@]} == count)); then
    _out=("${list[@]}")
  else
    die "$what: give one rate or $count (one per item), not ${#list[@]}"
  fi
}

# tbf arguments for a link of $1 Gbit/s with MTU $2: "rate R burst B limit L".
tbf_args() {
  awk -v g="$1" -v mtu="$2" -v bms="$TBF_BURST_MS" -v minb="$TBF_MIN_BURST" -v qms="$TBF_QUEUE_MS" 'BEGIN {
    bytes = g * 1e9 / 8
    burst = bytes * bms / 1000
    if (burst < minb) burst = minb
    if (burst < 4 * mtu) burst = 4 * mtu
    printf "rate %dkbit burst %d limit %d\n", g * 1e6, burst, burst + bytes * qms / 1000
  }'
}

# Batches: one ip (or tc) process per namespace instead of one per command,
# which keeps a 4-node cluster's setup well under a second on a loaded machine.
declare -A ip_batch=() port_batch=() tc_batch=()
ip_in() { ip_batch[$1]+="${*:2}"$'\n'; }
port_in() { port_batch[$1]+="${*:2}"$'\n'; }
tc_in() { tc_batch[$1]+="${*:2}"$'\n'; }

# tbf on the egress of $2 in namespace $1 (0 Gbit/s: not shaped).
shape() {
  local ns=$1 dev=$2 gbit=$3
  [[ $gbit =~ ^0*(\.0*)?$ ]] && return 0
  tc_in "$ns" qdisc replace dev "$dev" root tbf "$(tbf_args "$gbit" "$C_MTU")"
}

bridge_in() {
  ip_in "$1" link add br0 mtu "$C_MTU" type bridge stp_state 0 forward_delay 0
  ip_in "$1" link set br0 up
}

# A veth end that comes up while its peer is already up has its carrier at
# once, but its operational state follows only when the kernel's linkwatch
# runs (batched, up to a second later); a bridge port made from it meanwhile
# forwards, then drops to "disabled" when linkwatch catches up, then forwards
# again: frames sent in that window are lost. So links come up first, this
# waits until every link in the namespaces is operationally up, and only then
# do they join their bridges, which then forward at once and for good.
# Waits up to 5 s until `pending NS` is false for every namespace given;
# else dies naming the first one still pending and what `show NS` says of
# it. `why` is the message, with %s for that namespace.
wait_all_ready() {
  local pending=$1 show=$2 why=$3 ns t waiting
  shift 3
  for ((t = 0; t < 100; t++)); do
    waiting=""
    for ns in "$@"; do
      if "$pending" "$ns"; then
        waiting=$ns
        break
      fi
    done
    [[ -n $waiting ]] || return 0
    sleep 0.05
  done
  # shellcheck disable=SC2059  # why is the format, given by the callers below
  die "$(printf "$why" "$waiting"): $("$show" "$waiting" 2>&1 | tr '\n' ' ')"
}

links_not_up() { ip -n "$1" -o link show | awk '$2 != "lo:" && $2 != "br0:"' | grep -qv "state UP"; }
show_links() { ip -n "$1" -o link show; }
wait_links_up() { wait_all_ready links_not_up show_links "links in %s did not come up in 5 s" "$@"; }

ports_not_forwarding() { bridge -n "$1" link show | grep -qv "state forwarding"; }
show_ports() { bridge -n "$1" link show; }
wait_ports_forwarding() {
  wait_all_ready ports_not_forwarding show_ports "bridge ports in %s do not forward after 5 s" "$@"
}

write_state() {
  local f=$1/cluster.env
  {
    echo "C_NAME=$C_NAME"
    echo "C_NODES=$C_NODES"
    echo "C_SWITCHES=$C_SWITCHES"
    echo "C_MTU=$C_MTU"
    echo "C_NODE_GBIT=(${C_NODE_GBIT[*]})"
    echo "C_UPLINK_GBIT=(${C_UPLINK_GBIT[*]})"
    echo "C_LEAF_OF=(${C_LEAF_OF[*]})"
    echo "C_OWNER_PID=$C_OWNER_PID"
    echo "C_OWNER_START=$C_OWNER_START"
    echo "C_CREATED='$(date '+%F %T')'"
  } >"$f.tmp"
  mv "$f.tmp" "$f"
}

# Topology file for HOCCL_TOPO_FILE (docs/topology-file.md): one entry per
# leaf with its nodes (named as their HOCCL_HOSTID), the speed of its node
# links and of its uplink, then the spine. A link that is not shaped has no
# speed key ("unknown"). If a leaf's nodes have different rates, link_gbps is
# the slowest and a comment lists each.
write_topology() {
  local f=$1 j i first=1
  {
    printf '{"version":1,\n "comment":"emulated cluster %s (tests/cluster): %s, tbf rates",\n "switches":[\n' \
      "$C_NAME" "$(cluster_shape)"
    for ((j = 0; j < C_SWITCHES; j++)); do
      local names=() each=() min="" distinct=0 keys=""
      for ((i = 0; i < C_NODES; i++)); do
        ((C_LEAF_OF[i] == j)) || continue
        names+=("\"$(node_ns "$C_NAME" "$i")\"")
        each+=("n$i ${C_NODE_GBIT[i]}")
        [[ -z $min || ${C_NODE_GBIT[i]} == "$min" ]] || distinct=1
        if [[ -z $min ]] || awk -v a="${C_NODE_GBIT[i]}" -v b="$min" 'BEGIN { exit !(b == 0 || (a > 0 && a < b)) }'; then
          min=${C_NODE_GBIT[i]}
        fi
      done
      [[ $min == 0 ]] || keys+=",\"link_gbps\":$min"
      [[ ${C_UPLINK_GBIT[j]} == 0 ]] || keys+=",\"uplink_gbps\":${C_UPLINK_GBIT[j]}"
      if ((distinct)); then
        keys+=",\"comment\":\"node link Gbit/s (0: not shaped): $(IFS=,; echo "${each[*]}" | sed 's/,/, /g')\""
      fi
      ((first)) || printf ',\n'
      first=0
      printf '  {"name":"leaf%d","parent":"spine","nodes":[%s]%s}' "$j" "$(IFS=,; echo "${names[*]}")" "$keys"
    done
    printf ',\n  {"name":"spine"}\n ]}\n'
  } >"$f"
}

# Builds cluster $1 from the opt_* settings; $2 = owner pid (or empty).
cluster_up() {
  local name=$1 owner=${2:-}
  valid_name "$name" || die "bad cluster name '$name' (letters, digits, _)"
  [[ $opt_nodes =~ ^[1-9][0-9]*$ ]] && ((opt_nodes <= MAX_NODES)) || die "--nodes must be 1..$MAX_NODES"
  [[ $opt_switches =~ ^[1-9][0-9]*$ ]] && ((opt_switches <= opt_nodes)) ||
    die "--switches must be 1..nodes ($opt_nodes)"
  [[ $opt_mtu =~ ^[0-9]+$ ]] && ((opt_mtu >= 576 && opt_mtu <= 65535)) || die "--mtu must be 576..65535"
  [[ -z $owner || $owner =~ ^[0-9]+$ ]] || die "--owner must be a pid"

  C_NAME=$name C_NODES=$opt_nodes C_SWITCHES=$opt_switches C_MTU=$opt_mtu
  expand_rates C_NODE_GBIT "$opt_node_gbit" "$C_NODES" --node-gbit
  local i j
  C_LEAF_OF=()
  for ((i = 0; i < C_NODES; i++)); do C_LEAF_OF[i]=$((i * C_SWITCHES / C_NODES)); done
  if [[ -n $opt_uplink_gbit ]]; then
    expand_rates C_UPLINK_GBIT "$opt_uplink_gbit" "$C_SWITCHES" --uplink-gbit
  else # not oversubscribed: the sum of the leaf's node links (0 if any is unshaped)
    C_UPLINK_GBIT=()
    for ((j = 0; j < C_SWITCHES; j++)); do
      C_UPLINK_GBIT[j]=$(for ((i = 0; i < C_NODES; i++)); do
        if ((C_LEAF_OF[i] == j)); then echo "${C_NODE_GBIT[i]}"; fi
      done | awk '$1 == 0 { z = 1 } { s += $1 } END { print z ? 0 : s }')
    done
  fi
  C_OWNER_PID=$owner C_OWNER_START=""
  [[ -n $owner ]] && C_OWNER_START=$(proc_start_time "$owner")

  remove_stale_clusters
  if [[ -n $(cluster_netns "$name") || -e $(state_dir "$name") ]]; then
    die "cluster $name already exists ($0 down --name $name removes it)"
  fi

  local dir spine leaf ns
  dir=$(state_dir "$name")
  # shellcheck disable=SC2034 # read by the callers' traps
  building=$name # from here on, a failure tears the cluster down (the callers' traps)
  mkdir -p "$dir"
  write_state "$dir" # registered before anything exists: down finds it from here on

  local -a nss=() switches=() veths=()
  ip_batch=() port_batch=() tc_batch=()
  spine=$(spine_ns "$name")
  bridge_in "$spine"
  for ((j = 0; j < C_SWITCHES; j++)); do
    leaf=$(leaf_ns "$name" "$j")
    switches+=("$leaf")
    bridge_in "$leaf"
    veths+=("link add name uplink netns $leaf mtu $C_MTU type veth peer name leaf$j netns $spine mtu $C_MTU")
    ip_in "$leaf" link set uplink up
    ip_in "$spine" link set "leaf$j" up
    port_in "$leaf" link set uplink master br0
    port_in "$spine" link set "leaf$j" master br0
    shape "$leaf" uplink "${C_UPLINK_GBIT[j]}"
    shape "$spine" "leaf$j" "${C_UPLINK_GBIT[j]}"
  done
  for ((i = 0; i < C_NODES; i++)); do
    ns=$(node_ns "$name" "$i")
    leaf=$(leaf_ns "$name" "${C_LEAF_OF[i]}")
    nss+=("$ns")
    veths+=("link add name eth0 netns $ns mtu $C_MTU type veth peer name n$i netns $leaf mtu $C_MTU")
    ip_in "$leaf" link set "n$i" up
    port_in "$leaf" link set "n$i" master br0
    ip_in "$ns" addr add "$(node_ip "$i")/16" dev eth0
    ip_in "$ns" link set eth0 up
    shape "$ns" eth0 "${C_NODE_GBIT[i]}"
    shape "$leaf" "n$i" "${C_NODE_GBIT[i]}"
  done

  switches+=("$spine")
  nss+=("${switches[@]}")
  printf 'netns add %s\n' "${nss[@]}" | ip -b -
  # No IPv6 (no router solicitations, no MLD): the links carry only what the
  # test sends, and ARP. Set before the interfaces exist, so they inherit it.
  for ns in "${nss[@]}"; do
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  done
  # Each veth end is created directly in its namespace: nothing in the host's.
  printf '%s\n' "${veths[@]}" | ip -b -
  for ns in "${nss[@]}"; do
    ip -n "$ns" -b - <<<"link set lo up"$'\n'"${ip_batch[$ns]:-}"
    [[ -z ${tc_batch[$ns]:-} ]] || tc -n "$ns" -b - <<<"${tc_batch[$ns]}"
  done
  wait_links_up "${nss[@]}"
  for ns in "${switches[@]}"; do ip -n "$ns" -b - <<<"${port_batch[$ns]}"; done
  wait_ports_forwarding "${switches[@]}"
  write_topology "$dir/topo.json"
}
