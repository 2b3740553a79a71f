#!/bin/sh
# Runs inside the Soft-RoCE guest (started by run.sh, as root, in the
# repository): the IB transport's tests of build BUILD, the NCCL net plugin
# (v12) over IB through the plugin harness, then all_reduce_perf over IB
# between two emulated nodes (one process per node, two ranks each, node 0 on
# rxe0 and node 1 on rxe1). Every IB test must run: a skip here means the
# transport did not find the devices, which is a failure, and so is a run in
# which no test ran at all.
# Then the same on device buffers (part "device"): the stand-alone fake
# libcuda (BUILD/tests/fakecuda) stands in for the GPU, so the connections
# between the nodes go through the network proxy over IB verbs, its slots in
# host memory registered with rxe.
#   tests/softroce/guest-tests.sh BUILD [gtest] [plugin] [perf] [device]   (default: all)
set -u
build=$1
shift
parts=${*:-gtest plugin perf device}
logs=/run/hoccl-xchg
export HOCCL_SOCKET_IFNAME=lo   # bootstrap and side channels on loopback
failed=0
ran=0   # tests and checks that really ran (gtest cases, plugin runs, perf)
now() { read -r t _ < /proc/uptime; echo "$t"; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

run_gtest() {  # name filter
  t=$(now)
  echo "=== $1 ($2)"
  "$build/tests/$1" --gtest_filter="$2" > "$logs/$1.log" 2>&1
  rc=$?
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|Failure|error|IBV_WC|Skipped' "$logs/$1.log" | grep -v '^\[  FAILED  \] .*listed below' | head -60
  if [ $rc != 0 ]; then echo "FAILED: $1 exit $rc"; failed=1; fi
  if grep -q '^\[  SKIPPED \]' "$logs/$1.log"; then echo "FAILED: $1 skipped IB tests inside the guest"; failed=1; fi
  # gtest exits 0 when a filter matches nothing: count what ran.
  n=$(sed -n 's/^\[==========\] \([0-9][0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$logs/$1.log" | tail -n 1)
  if [ "${n:-0}" -eq 0 ]; then echo "FAILED: $1 ran no test ($2)"; failed=1; fi
  ran=$((ran + ${n:-0}))
  echo "=== $1: exit $rc in $(took "$t") s"
}

case " $parts " in *" gtest "*)
  run_gtest test_net_ib '*'
  run_gtest test_net_conformance '*/IB' ;;
esac

# The NCCL net plugin, ncclNetPlugin_v12, loaded and driven as NCCL does
# (two processes, every size, grouped receives, registration, reload) with
# HOCCL_NET=ib: the verbs transport must come up, so a skip is a failure.
case " $parts " in *" plugin "*)
  t=$(now)
  echo "=== NCCL net plugin v12 over IB (hoccl-nccl-plugin-harness)"
  env LD_LIBRARY_PATH="$build/plugin" HOCCL_NET=ib \
    "$build/tests/plugin/hoccl-nccl-plugin-harness" net --version 12 --max-bytes 4194304 --skip-if-unavailable \
    > "$logs/plugin_net_ib_v12.log" 2>&1
  rc=$?
  grep -E 'FAIL|SKIPPED|error|ok$|loaded' "$logs/plugin_net_ib_v12.log" | head -40
  case $rc in
    0) ran=$((ran + 1)) ;;
    77) echo "FAILED: the net plugin found no IB device inside the guest (skipped)"; failed=1 ;;
    *) echo "FAILED: hoccl-nccl-plugin-harness net --version 12 exit $rc"; tail -n 20 "$logs/plugin_net_ib_v12.log"; failed=1 ;;
  esac
  echo "=== NCCL net plugin: exit $rc in $(took "$t") s" ;;
esac

finish() {
  if [ $ran -eq 0 ]; then echo "FAILED: no test ran"; failed=1; fi
  [ $failed = 0 ] && echo "guest-tests: all passed ($ran tests and checks ran)" || echo "guest-tests: FAILED"
  exit $failed
}

run_perf() {
# 2 nodes x 2 ranks: processes with different host ids (so their ranks talk
# over the network), each restricted to one rxe device, HOCCL_NET=ib so that
# falling back to TCP would be an error; two QPs per connection, so slices
# (128 KiB) are split across them.
t=$(now)
echo "=== all_reduce_perf, 2 nodes x 2 ranks over IB (rxe0 <-> rxe1)"
port=$((29000 + $$ % 1000))
pids=""
for node in 0 1; do
  env RANK=$node WORLD_SIZE=2 HOCCL_COMM_ID=127.0.0.1:$port HOCCL_HOSTID=softroce-node$node \
    HOCCL_NET=ib HOCCL_IB_HCA="=rxe$node" HOCCL_IB_QPS_PER_CONN=2 HOCCL_DEBUG=INFO HOCCL_DEBUG_SUBSYS=NET \
    "$build/perf/all_reduce_perf" -t 2 -b 8 -e 4M -f 4 -n 5 -w 2 -c 1 -T 300 \
    > "$logs/allreduce$node.out" 2> "$logs/allreduce$node.err" &
  pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
cat "$logs/allreduce0.out"
grep -h "network IB\|IB: using" "$logs"/allreduce*.err | sed 's/^[^]]*\] //' | sort | uniq -c
if [ $rc != 0 ]; then
  echo "FAILED: all_reduce_perf exited with an error"; for f in "$logs"/allreduce*.err; do tail -n 20 "$f"; done; failed=1
fi
# Every rank on each node chose IB, and the table's correctness check passed.
for node in 0 1; do
  n=$(grep -c "network IB" "$logs/allreduce$node.err")
  [ "$n" = 2 ] || { echo "FAILED: node $node: $n of 2 ranks report 'network IB'"; failed=1; }
done
grep -q "Out of bounds values : 0 OK" "$logs/allreduce0.out" || { echo "FAILED: #wrong is not 0"; failed=1; }
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ .* 0 *$' "$logs/allreduce0.out")
[ "$rows" -ge 5 ] || { echo "FAILED: only $rows size rows with #wrong 0"; failed=1; }
[ $rc = 0 ] && [ "$rows" -ge 5 ] && ran=$((ran + 1))
echo "=== all_reduce_perf: $(took "$t") s"
}
case " $parts " in *" perf "*) run_perf ;; esac

case " $parts " in *" device "*)
  t=$(now)
  echo "=== all_reduce_perf --buffers device, 2 nodes x 2 ranks over IB (network proxy, fake libcuda)"
  port=$((30000 + $$ % 1000))
  pids=""
  for node in 0 1; do
    env RANK=$node WORLD_SIZE=2 HOCCL_COMM_ID=127.0.0.1:$port HOCCL_HOSTID=softroce-node$node \
      HOCCL_NET=ib HOCCL_IB_HCA="=rxe$node" HOCCL_DEBUG=INFO HOCCL_DEBUG_SUBSYS=NET \
      LD_LIBRARY_PATH="$build/tests/fakecuda" \
      "$build/perf/all_reduce_perf" -t 2 --buffers device -b 8 -e 1M -f 8 -n 3 -w 1 -c 1 -T 300 \
      > "$logs/devallreduce$node.out" 2> "$logs/devallreduce$node.err" &
    pids="$pids $!"
  done
  rc=0
  for p in $pids; do wait "$p" || rc=1; done
  cat "$logs/devallreduce0.out"
  proxied=$(grep -h "device buffers: rank .* IB" "$logs"/devallreduce*.err | sed 's/^[^]]*\] //' | head -4)
  echo "$proxied"
  if [ $rc != 0 ]; then
    echo "FAILED: all_reduce_perf --buffers device exited with an error"
    for f in "$logs"/devallreduce*.err; do grep -v ' INFO ' "$f" | tail -n 20; done
    failed=1
  fi
  [ -n "$proxied" ] || { echo "FAILED: no device connection went through the network proxy over IB"; failed=1; }
  # rxe registers no dma-buf: the probe must say so, and the proxy take
  # host-pinned slots.
  grep -q "does not register dma-bufs" "$logs/devallreduce0.err" ||
    { echo "FAILED: the dma-buf probe did not report rxe's refusal"; failed=1; }
  grep -q "Out of bounds values : 0 OK" "$logs/devallreduce0.out" || { echo "FAILED: device #wrong is not 0"; failed=1; }
  [ $rc = 0 ] && [ -n "$proxied" ] && ran=$((ran + 1))
  # GPUDirect RDMA asked for on rxe: every rank's first call fails, naming
  # the path and rxe's refusal, instead of falling back in silence.
  pids=""
  for node in 0 1; do
    env RANK=$node WORLD_SIZE=2 HOCCL_COMM_ID=127.0.0.1:$((port + 1)) HOCCL_HOSTID=softroce-node$node \
      HOCCL_NET=ib HOCCL_IB_HCA="=rxe$node" HOCCL_NET_DEVICE_PATH=gdr LD_LIBRARY_PATH="$build/tests/fakecuda" \
      "$build/perf/all_reduce_perf" -t 2 --buffers device -b 8 -e 8 -n 1 -w 0 -c 1 -T 60 \
      > "$logs/devgdr$node.out" 2> "$logs/devgdr$node.err" &
    pids="$pids $!"
  done
  rc=0
  for p in $pids; do wait "$p" || rc=1; done
  refused=$(grep -h "HOCCL_NET_DEVICE_PATH=gdr" "$logs"/devgdr*.err "$logs"/devgdr*.out | grep -c "cannot register dma-bufs")
  echo "gdr on rxe: exit $rc, $refused lines name the refusal"
  if [ $rc = 0 ] || [ "$refused" -lt 2 ]; then
    echo "FAILED: HOCCL_NET_DEVICE_PATH=gdr on rxe did not fail naming rxe's refusal on both nodes"
    tail -n 5 "$logs"/devgdr*.err
    failed=1
  else
    ran=$((ran + 1))
  fi
  echo "=== all_reduce_perf --buffers device: $(took "$t") s" ;;
esac
finish
