#!/usr/bin/env bash
# The perf programs' side-by-side mode (--algo a,b): one row per algorithm
# and size, each with its algorithm last, a ratio line per size, JSON rows
# that say so, checked results, timed blocks that really alternated (from
# the order and start times the benchmark recorded); and the errors for a
# bad list.
#   tests/perf_side_by_side.sh <all_reduce_perf> <reduce_scatter_perf>
set -uo pipefail
ar=$1 rs=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "perf_side_by_side: $*" >&2; exit 1; }

# 3 sizes x 3 communicators (auto twice: an A/A pair).
"$ar" --np 2 --algo ring,auto,auto -b 1K -e 16K -f 4 -n 6 -w 1 -J "$tmp/ar.json" > "$tmp/ar.txt" 2> "$tmp/ar.err" \
  || fail "all_reduce_perf side by side exited $?: $(cat "$tmp/ar.err")"
grep -q '^# Side by side: 3 communicators (ring,auto,auto), each size timed in 6 interleaved blocks' "$tmp/ar.txt" \
  || fail "no side-by-side preamble line"
rows=$(awk '/^ *[0-9]/' "$tmp/ar.txt")
[ "$(wc -l <<<"$rows")" -eq 9 ] || fail "expected 9 rows, got: $rows"
# Rows: 13 nccl-tests columns, #wrong 0 twice, then the algorithm, in order per size.
awk 'NF != 14 || $9 != 0 || $13 != 0 { bad = 1 } END { exit bad }' <<<"$rows" || fail "malformed or wrong rows: $rows"
[ "$(awk '{ printf "%s ", $14 }' <<<"$rows")" = "ring auto auto ring auto auto ring auto auto " ] \
  || fail "rows not in --algo order: $rows"
[ "$(grep -c '^# side by side, time relative to ring, median of 6 paired blocks (out of place, in place): auto [0-9.]* [0-9.]* auto [0-9.]* [0-9.]*$' "$tmp/ar.txt")" -eq 3 ] \
  || fail "expected one ratio line per size"
[ "$(grep -c '"side_by_side":"ring,auto,auto","blocks":6' "$tmp/ar.json")" -eq 9 ] || fail "JSON rows: $(cat "$tmp/ar.json")"
[ "$(grep -c '"algo":"ring"' "$tmp/ar.json")" -eq 3 ] || fail "JSON rows lack their algorithm"
# The first algorithm's paired ratio to itself is 1; every row has a median.
[ "$(grep '"algo":"ring"' "$tmp/ar.json" | grep -c '"ratio_to_first":1.0000.*"ratio_to_first":1.0000')" -eq 3 ] \
  || fail "ring's ratio to itself is not 1: $(cat "$tmp/ar.json")"
[ "$(grep -c '"median_us":[0-9]*\.[0-9]*,.*"median_us":[0-9]*\.[0-9]*,' "$tmp/ar.json")" -eq 9 ] || fail "JSON rows lack median_us"

# The blocks really alternated: per size and placement, the order in which
# the 3 x 6 timed blocks ran (block_order) and when each started
# (block_start_us), as the benchmark recorded them. Block k runs every
# algorithm once, forward on even k and backward on odd k; the start times
# increase in run order. One record per block: size placement algo k order start.
records() {
  local line size p i=0 last=""
  while IFS= read -r line; do
    size=$(grep -o '"size":[0-9]*' <<<"$line" | cut -d: -f2)
    [ "$size" = "$last" ] && i=$((i + 1)) || { i=0; last=$size; }
    mapfile -t orders < <(grep -o '"block_order":\[[0-9,]*\]' <<<"$line" | sed 's/.*\[\(.*\)\]/\1/')
    mapfile -t starts < <(grep -o '"block_start_us":\[[0-9.,]*\]' <<<"$line" | sed 's/.*\[\(.*\)\]/\1/')
    [ "${#orders[@]}" -eq 2 ] && [ "${#starts[@]}" -eq 2 ] || { echo "missing block_order/block_start_us"; return; }
    for p in 0 1; do
      paste -d' ' <(tr ',' '\n' <<<"${orders[p]}") <(tr ',' '\n' <<<"${starts[p]}") \
        | awk -v s="$size" -v p="$p" -v i="$i" '{ print s, p, i, NR - 1, $1, $2 }'
    done
  done < "$tmp/ar.json"
}
records > "$tmp/blocks.txt"
why=$(awk -v nb=3 -v nblocks=6 '
  NF != 6 { print "bad record: " $0; bad = 1; next }
  {
    key = $1 " " $2; want = $4 * nb + ($4 % 2 ? nb - 1 - $3 : $3)
    if ($5 != want) { print "size " $1 " placement " $2 ": algorithm " $3 " block " $4 " ran " $5 "th, expected " want "th"; bad = 1 }
    n[key]++; start[key, $5] = $6
  }
  END {
    for (key in n) {
      if (n[key] != nb * nblocks) { print key ": " n[key] " blocks, expected " nb * nblocks; bad = 1; continue }
      for (q = 1; q < nb * nblocks; q++)
        if (!((key, q) in start) || start[key, q] < start[key, q - 1]) { print key ": block run " q " did not start after run " q - 1; bad = 1 }
    }
    if (length(n) != 6) { print length(n) " size/placement groups, expected 6"; bad = 1 }
    exit bad
  }' "$tmp/blocks.txt") || fail "blocks did not alternate as recorded: $why"

# Reduce-scatter with --blocks and more blocks than iterations (clamped).
"$rs" --np 2 --algo horing,ring --blocks 50 -b 4K -e 4K -n 3 -w 0 > "$tmp/rs.txt" 2>&1 || fail "reduce_scatter_perf: $(cat "$tmp/rs.txt")"
grep -q 'timed in 3 interleaved blocks' "$tmp/rs.txt" || fail "--blocks not clamped to -n: $(cat "$tmp/rs.txt")"
[ "$(awk '/^ *[0-9]/ && $9 == 0 && $13 == 0' "$tmp/rs.txt" | wc -l)" -eq 2 ] || fail "reduce-scatter rows: $(cat "$tmp/rs.txt")"

# One algorithm: the plain nccl-tests table, no extra column.
"$ar" --np 2 --algo ring -b 1K -e 1K -n 2 -w 0 > "$tmp/one.txt" 2>&1 || fail "single --algo: $(cat "$tmp/one.txt")"
awk '/^ *[0-9]/ && NF != 13 { bad = 1 } END { exit bad }' "$tmp/one.txt" || fail "single algorithm rows changed shape"
grep -q 'Side by side' "$tmp/one.txt" && fail "single algorithm printed the side-by-side line"

# Bad lists: a clear error, a nonzero exit, no hang.
timeout 60 "$ar" --np 2 --algo ring,bogus -b 1K -e 1K > "$tmp/bad.txt" 2>&1 && fail "an unknown algorithm ran"
grep -q 'config->algorithm="bogus" names no algorithm' "$tmp/bad.txt" || fail "unknown algorithm error: $(cat "$tmp/bad.txt")"
timeout 60 "$ar" --algo ring,,auto -b 1K -e 1K > "$tmp/empty.txt" 2>&1 && fail "an empty name was accepted"
grep -q 'invalid --algo' "$tmp/empty.txt" || fail "empty name error: $(cat "$tmp/empty.txt")"
echo "perf_side_by_side: ok"
