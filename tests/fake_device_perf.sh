#!/bin/bash
# The perf tools on device buffers across emulated hosts, on the stand-alone
# fake libcuda (LD_LIBRARY_PATH=<build>/tests/fakecuda): each rank is a
# process launched as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR/PORT)
# with its node's HOCCL_HOSTID, over TCP on loopback, so connections
# between nodes go through the network proxy and those inside a node
# through VMM memory shared by fd. Checks that every row says #wrong 0 and
# that the proxy carried the traffic.
#   tests/fake_device_perf.sh BUILD_DIR
# Shapes: 2 nodes x 2 ranks (all-reduce, reduce-scatter, all-gather, the
# tuner's choice), and 4 nodes x 2 ranks under two leaf switches with
# HO-Ring forced (all-reduce, and on the copy data path).
set -u
build=${1:?usage: tests/fake_device_perf.sh BUILD_DIR}
fake="$build/tests/fakecuda"
[ -e "$fake/libcuda.so.1" ] || { echo "no $fake/libcuda.so.1 (build target hoccl_fake_libcuda)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# run NAME NODES RANKS_PER_NODE PROGRAM ARGS...: one process per rank.
run() {
  local name=$1 nodes=$2 per=$3 prog=$4
  shift 4
  local n=$((nodes * per)) port=$((20000 + RANDOM % 20000)) pids=() r rc=0
  for ((r = 0; r < n; r++)); do
    HOCCL_HOSTID=node-$((r / per)) RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      HOCCL_NET=socket HOCCL_DEBUG=INFO HOCCL_DEBUG_SUBSYS=NET LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      timeout 300 "$build/perf/$prog" --buffers device -n 3 -w 1 "$@" > "$work/$name.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=$?; done
  local out="$work/$name.0" rows wrong proxied
  rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$out")
  # The #wrong columns: out-of-place and in-place (nccl-tests' layout).
  wrong=$(awk '/^ +[0-9]+ +[0-9]+ / { if ($9 != 0 || $NF != 0) bad++ } END { print bad + 0 }' "$out")
  proxied=$(cat "$work/$name".* | grep -c 'through the network proxy\|device buffers: rank [0-9]* [-<>]* rank [0-9]* link')
  if [ "$rc" -ne 0 ] || [ "$rows" -eq 0 ] || [ "$wrong" -ne 0 ] || [ "$proxied" -eq 0 ]; then
    echo "FAIL $name: exit $rc, $rows rows, $wrong with #wrong > 0, $proxied proxy connections"
    grep -v ' INFO ' "$out" | tail -20
    failures=$((failures + 1))
  else
    echo "ok   $name: $rows rows, #wrong 0, $proxied proxy connections"
  fi
}

run allreduce-2x2 2 2 all_reduce_perf -b 8 -e 4M -f 8
run reducescatter-2x2 2 2 reduce_scatter_perf -b 64 -e 4M -f 8
run allgather-2x2 2 2 all_gather_perf -b 64 -e 4M -f 8
topo="$work/topo.json"
echo '{"version":1,"switches":[{"name":"leaf0","nodes":["node-0","node-1"],"link_gbps":1,"uplink_gbps":0.5},
{"name":"leaf1","nodes":["node-2","node-3"],"link_gbps":1,"uplink_gbps":0.5}]}' > "$topo"
HOCCL_TOPO_FILE=$topo run allreduce-4x2-horing 4 2 all_reduce_perf -b 8 -e 2M -f 16 --algo horing
HOCCL_TOPO_FILE=$topo HOCCL_NET_DEVICE_PATH=copy run allreduce-4x2-horing-copy 4 2 all_reduce_perf -b 8 -e 2M -f 16 \
  --algo horing
[ "$failures" -eq 0 ] || exit 1
