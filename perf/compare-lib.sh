# shellcheck shell=bash
# What perf/compare.sh (one machine) and perf/compare-cluster.sh (emulated
# nodes) share: the contenders' algorithm lists, the sweeps, the rotating
# rounds and the run manifest that perf/compare_report.py reads.
#
# The caller sets: out (results directory), build (build directory), colls,
# rounds, select (1: a selection round picks each peer's candidate
# algorithms), small_sweep/large_sweep ("MIN:MAX:FACTOR" or "none"),
# small_iters/small_warmup, iters/warmup, only (empty, or the contenders to
# run: "hoccl,gloo,..."), select_max, and defines
#   launch VARIANT COLL SWEEP_ARGS_NAME JSON LOG   (SWEEP_ARGS_NAME: an array's name)
# which runs one benchmark job and returns its exit status.

say() { echo "${cmp_name:-compare}: $*" >&2; }
die() { say "$*"; exit 1; }

# "8:64K:2" -> -b 8 -e 64K -f 2, after checking it.
sweep_args() {
  local spec=$1 min max factor
  IFS=: read -r min max factor <<<"$spec"
  [[ -n $min && -n $max && $factor =~ ^[0-9]+$ && $factor -ge 2 ]] ||
    die "a sweep is MIN:MAX:FACTOR with an integer FACTOR >= 2 (got \"$spec\")"
  numfmt --from=iec "$min" >/dev/null 2>&1 && numfmt --from=iec "$max" >/dev/null 2>&1 ||
    die "sizes in \"$spec\" must be bytes with an optional K/M/G suffix"
  echo "-b $min -e $max -f $factor"
}

# Gloo's algorithms for a collective, from gloo_perf's own usage text (the
# first is Gloo's default).
gloo_algos() {
  local coll=$1
  "$gloo" 2>&1 | awk -v c="$coll" '$1 == c { $1 = ""; gsub(/,/, " "); print }' | xargs
}

# The Open MPI parameter that forces mpi_perf's call for a collective
# (mpi_perf calls MPI_Reduce_scatter_block for reduce_scatter).
mpi_param() {
  case $1 in
    all_reduce) echo coll_tuned_allreduce_algorithm ;;
    reduce_scatter) echo coll_tuned_reduce_scatter_block_algorithm ;;
    all_gather) echo coll_tuned_allgather_algorithm ;;
    broadcast) echo coll_tuned_bcast_algorithm ;;
    reduce) echo coll_tuned_reduce_algorithm ;;
    *) return 1 ;;
  esac
}

# "NUMBER:NAME" for each algorithm that coll/tuned can be forced to for a
# collective on NP ranks, read from ompi_info (0 "ignore" is the decision
# rules; "two_proc" runs only on 2 ranks).
mpi_forced_algos() {
  local coll=$1 np=$2 param
  param=$(mpi_param "$coll") || return 0
  ompi_info --param coll tuned --level 9 2>/dev/null |
    awk -v p="\"$param\"" '$0 ~ p { found = 1; next } found && /Valid values/ { print; exit }' |
    grep -o '[0-9]*:"[^"]*"' | tr -d '"' |
    awk -F: -v np="$np" '$1 != 0 && !($2 == "two_proc" && np != 2) { print $1 ":" $2 }'
}

# Records one job in the manifest before it runs, so that the report shows
# the order even of a job that failed.
record() { # coll round position group variant transport sweep file pilot
  printf '{"collective":"%s","round":%d,"position":%d,"group":"%s","variant":"%s","transport":"%s","sweep":"%s","file":"%s","pilot":%s}\n' \
    "$@" >>"$out/runs.jsonl"
}

# Runs VARIANT ("group:algorithm") on every sweep; the log is kept, and a
# failure names the job and shows the log's end.
run_variant() { # coll round position variant pilot
  local coll=$1 round=$2 pos=$3 variant=$4 pilot=$5 sweep
  local group=${variant%%:*} algo=${variant#*:}
  for sweep in small large; do
    local spec_name=${sweep}_sweep
    [[ ${!spec_name} == none ]] && continue
    local tag="$coll.$sweep.${group}-${algo}.$([[ $pilot == true ]] && echo select || echo "r$round")"
    record "$coll" "$round" "$pos" "$group" "$algo" "${transport[$group]}" "$sweep" "$tag.json" "$pilot"
    local -a args
    read -r -a args <<<"$(sweep_args "${!spec_name}")"
    if [[ $sweep == small ]]; then
      args+=(-n "$small_iters" -w "$small_warmup" -c 1)
    else
      args+=(-n "$iters" -w "$warmup" -c 1)
    fi
    local t0=$SECONDS
    if ! launch "$variant" "$coll" args "$out/$tag.json" "$out/$tag.log"; then
      say "FAILED: $variant $coll ($sweep sizes); the end of $out/$tag.log:"
      tail -n 25 "$out/$tag.log" >&2
      exit 1
    fi
    say "  $variant $sweep sizes: $((SECONDS - t0)) s"
  done
}

# The contenders of one collective: hoccl, Gloo's algorithms and Open MPI's
# variants, as "group:algorithm" words. The caller's peers_for prints them.
#
# Round 0 (with select=1) runs every algorithm of the peers that have
# several, once; the report then keeps, for each peer, the algorithms that
# were the best at one size or more (at most 2: those that won the most
# sizes), and only those run in the timed rounds.
# Every round runs the contenders in a rotated order: round r starts with
# the r-th, so that each contender runs first, second, ... as often.
run_collective() { # coll
  local coll=$1 v
  local -a all chosen
  read -r -a all <<<"$(peers_for "$coll")"
  if [ -n "${only:-}" ]; then # --only g1,g2: those contenders (groups) only
    local -a kept=()
    for v in "${all[@]}"; do [[ ",$only," == *",${v%%:*},"* ]] && kept+=("$v"); done
    all=("${kept[@]}")
  fi
  ((${#all[@]})) || die "$coll: no contender to run"
  chosen=("${all[@]}")
  if ((select)); then
    local -a multi=()
    local -A count=()
    for v in "${all[@]}"; do count[${v%%:*}]=$((${count[${v%%:*}]:-0} + 1)); done
    for v in "${all[@]}"; do ((count[${v%%:*}] > 1)) && multi+=("$v"); done
    if ((${#multi[@]})); then
      say "$coll: selection round: ${multi[*]}"
      local pos=0
      for v in "${multi[@]}"; do run_variant "$coll" 0 "$pos" "$v" true; pos=$((pos + 1)); done
      local keep
      keep=$("$py" "$root/perf/compare_report.py" --select "$coll" "$out") || die "selection failed"
      chosen=()
      for v in "${all[@]}"; do
        if ((count[${v%%:*}] == 1)) || [[ " $keep " == *" $v "* ]]; then chosen+=("$v"); fi
      done
      say "$coll: kept for the timed rounds: ${chosen[*]}"
    fi
  fi
  local n=${#chosen[@]} r i
  for ((r = 1; r <= rounds; r++)); do
    local -a order=()
    for ((i = 0; i < n; i++)); do order+=("${chosen[(i + r - 1) % n]}"); done
    say "$coll round $r/$rounds: ${order[*]}"
    for ((i = 0; i < n; i++)); do run_variant "$coll" "$r" "$i" "${order[i]}" false; done
  done
}

# Configures (Release, no tests) and builds what the comparison runs: the
# benchmark of each collective, memcpy_bw and the peers' benchmarks where
# CMake found the peers. An existing build (--build DIR, CI's) is only
# brought up to date, not reconfigured.
build_benchmarks() { # build-dir-or-empty -> sets build
  if [ -z "$1" ] || [ ! -f "$1/CMakeCache.txt" ]; then
    build=${1:-$root/build-release}
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHOCCL_BUILD_TESTS=OFF >/dev/null ||
      die "configuring $build failed"
  else
    build=$1
  fi
  local -a targets=(memcpy_bw) t
  for t in $colls; do targets+=("${t}_perf"); done
  for t in gloo_perf mpi_perf; do [ -d "$build/perf/peers/CMakeFiles/$t.dir" ] && targets+=("$t"); done
  say "building ${targets[*]} in $build"
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$build/compare-build.log" 2>&1 ||
    { tail -n 30 "$build/compare-build.log" >&2; die "building in $build failed (log: $build/compare-build.log)"; }
}

# Debian's python3 has python3-matplotlib; a python3 earlier on PATH may not.
pick_python() {
  py=python3
  if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then py=/usr/bin/python3; fi
  command -v "$py" >/dev/null || die "python3 is needed for the report (Debian: python3)"
}
