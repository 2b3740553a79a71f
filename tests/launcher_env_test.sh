#!/usr/bin/env bash
# Rank, size and rendezvous from a launcher's environment, as the
# benchmarks and hoccl-topo probe read them (perf/common/launcher_env.cc):
# a bad rank or size, or several processes with no rendezvous, is an error
# that names the variable and exits 2 before any hoccl call; a job of one
# process needs no rendezvous; MASTER_ADDR:MASTER_PORT becomes the
# rendezvous of a real 2-process job.
#   tests/launcher_env_test.sh <all_reduce_perf> <hoccl-topo>
set -uo pipefail
ar=$1 topo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "launcher_env: $*" >&2; exit 1; }
clean=(env -u RANK -u WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE
       -u MASTER_ADDR -u MASTER_PORT -u HOCCL_COMM_ID)

expect_error() {  # expect_error "<message part>" VAR=value ...
  local want=$1; shift
  for prog in "$ar -b 8 -e 8 -n 1 -w 0" "$topo probe --out $tmp/probe --quiet"; do
    "${clean[@]}" "$@" $prog > "$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "$* ${prog%% *}: exit $rc, expected 2: $(cat "$tmp/out")"
    grep -qF -- "$want" "$tmp/out" || fail "$* ${prog%% *}: no \"$want\" in: $(cat "$tmp/out")"
  done
}
expect_error 'RANK="abc" is not a rank of a job of 2 processes (WORLD_SIZE)' RANK=abc WORLD_SIZE=2
expect_error 'RANK="2" is not a rank of a job of 2 processes' RANK=2 WORLD_SIZE=2
expect_error 'SLURM_PROCID="-1" is not a rank' SLURM_PROCID=-1 SLURM_NTASKS=4
expect_error 'WORLD_SIZE="0" is not a process count' RANK=0 WORLD_SIZE=0
expect_error 'rank 1 of 2 (RANK, WORLD_SIZE) has no rendezvous' RANK=1 WORLD_SIZE=2

# One process: no rendezvous needed.
"${clean[@]}" RANK=0 WORLD_SIZE=1 "$ar" -b 8 -e 1K -n 2 -w 1 > "$tmp/one" 2>&1 || fail "1 process: $(cat "$tmp/one")"
grep -q '#wrong\|Out of bounds values : 0 OK' "$tmp/one" || fail "1 process printed no result: $(cat "$tmp/one")"

# Two processes meeting at MASTER_ADDR:MASTER_PORT.
port=$(( 20000 + RANDOM % 20000 ))
for r in 0 1; do
  "${clean[@]}" RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$ar" -b 8 -e 4K -n 2 -w 1 \
    > "$tmp/two.$r" 2>&1 &
done
wait %1; rc0=$?
wait %2; rc1=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || fail "2 processes exited $rc0/$rc1: $(cat "$tmp/two.0" "$tmp/two.1")"
grep -q 'Out of bounds values : 0 OK' "$tmp/two.0" || fail "2 processes: rank 0 printed: $(cat "$tmp/two.0")"
echo "launcher_env: ok"
