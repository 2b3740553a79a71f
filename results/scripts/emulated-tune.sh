# Sourced by the emulated-cluster measurement scripts (algo-sweep.sh,
# paro-measure.sh): writes the tune file that tells hoccl's cost model what
# the emulated links' tbf shapers hold.
#   emulated_tune_file NODE_GBIT UPLINK_GBIT FILE     (UPLINK_GBIT 0: not shaped)
# tests/cluster/build.sh gives every link a bucket of max(rate x 2 ms,
# 128 KiB, 4 frames), which passes a burst at once, and a queue of the bucket
# plus 5 ms at the rate; the tune file's burst_kb and buffer_kb say so (the
# ranks read it too, through HOCCL_TUNE_FILE).
tbf_kb() {  # $1 Gbit/s, $2 burst or buffer
  awk -v g="$1" -v what="$2" -v bms="${HOCCL_CLUSTER_TBF_BURST_MS:-2}" -v minb="${HOCCL_CLUSTER_TBF_MIN_BURST:-131072}" \
    -v qms="${HOCCL_CLUSTER_TBF_QUEUE_MS:-5}" 'BEGIN {
    rate = g * 1e9 / 8; b = rate * bms / 1000; if (b < minb) b = minb; if (b < 6000) b = 6000
    if (what == "buffer") b += rate * qms / 1000
    printf "%.3f", b / 1000 }'
}
emulated_tune_file() {  # $1 node Gbit/s, $2 uplink Gbit/s (0: not shaped), $3 file
  {
    echo "# tbf buckets and queues of the emulated cluster (results/scripts/emulated-tune.sh)"
    echo "link net burst_kb=$(tbf_kb "$1" burst) buffer_kb=$(tbf_kb "$1" buffer)"
    # The nodes share this machine's cores: a reduce-scatter measured as
    # fast as an all-gather of the same size (results/20261127-paro-5), where DRAM
    # bandwidth would make it 1.5x slower.
    echo "set reduce_mem_ratio=1"
    if [ "$2" != 0 ]; then
      echo "link spine burst_kb=$(tbf_kb "$2" burst) buffer_kb=$(tbf_kb "$2" buffer)"
    fi
  } > "$3"
}
