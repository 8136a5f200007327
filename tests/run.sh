#!/usr/bin/env bash
# run.sh — runs every test binary of each build variant given (rel, asan), every
# tests/cli_*.sh script under each, and the GPU simulator's subset, and prints one total
# line: "N passed, M failed". A binary or script that crashes or prints no summary counts
# as one failure.
#
# TEST_JOBS (default 2) lanes take the tests from one queue, longest first, so that a
# 2-core machine is busy while a test waits (most of the suite's time was waiting: leases,
# slow-store hooks, S3 stalls, Slurm and mpirun start-up; serially 1790 s, in two lanes
# 1060 s, every test passing, timed ones included). A test listed in `single` below never
# runs beside its own other variant. Each test's output is printed whole when it ends
# (the order of endings, not of the queue), after a line "-- started NAME" when it
# began; the tally and the seconds per test come after all have ended. TEST_JOBS=1 runs
# one test at a time (in the queue's order).
set -u
cd "$(dirname "$0")/.."
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TANDEM_ROOT="$PWD"
# the OpenBLAS kernels tandem picks on this CPU (model/blas_core.c), for the test binaries
# too: they compare their own sums with tandem's, bit for bit
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x build/rel/tandem ]; then
  core=$(build/rel/tandem version --json 2>/dev/null | sed -n 's/.*"blas_core": "\([A-Za-z0-9]*\)".*/\1/p')
  [ -n "$core" ] && export OPENBLAS_CORETYPE="$core"
fi
jobs=${TEST_JOBS:-2}
[[ "$jobs" =~ ^[1-9][0-9]?$ ]] || { echo "run.sh: TEST_JOBS must be 1-99, not '$jobs'" >&2; exit 2; }

command -v flock >/dev/null || { echo "run.sh: flock (util-linux) is missing" >&2; exit 2; }

# Tests whose rel and asan runs never run beside each other (any two others may):
# cli_slurm.sh's two Slurm clusters would number their jobs alike, and srun's PMIx
# directories under /tmp are named by job id; cli_parallel.sh's ranks meet on loopback
# ports drawn from one range, and its timed SIGKILL loop wants the cores its mpirun
# ranks were calibrated on.
single=" cli_slurm.sh cli_parallel.sh "
# The queue's order: longest first (seconds each took by itself on the 2-core CI machine:
# asan/test_chaos 272, sim 172, rel/test_chaos 120, ...), the two runs of a `single` test
# apart, then the rest in the order of the old serial run. Only the order: a test missing
# here runs too.
first=" asan/test_chaos sim/gpu_sim.sh rel/test_chaos asan/test_ledger asan/test_runner
        asan/cli_slurm.sh asan/cli_store.sh rel/cli_parallel.sh asan/test_s3 rel/test_ledger
        rel/cli_slurm.sh rel/test_s3 rel/cli_store.sh asan/cli_parallel.sh asan/test_audit
        rel/test_runner asan/test_hf_run "

# --- the queue: one line per test, "NAME<TAB>VARIANT<TAB>PATH"
queue=(); seen=" "
add() { case "$seen" in *" $1 "*) return ;; esac; queue+=("$1"$'\t'"$2"$'\t'"$3"); seen+="$1 "; }
for n in $first; do
  v=${n%%/*}; b=${n#*/}
  case "$v" in
    sim) [ -x build/sim/test_gpu ] && add "$n" sim tests/gpu_sim.sh ;;
    *) case " $* " in *" $v "*) ;; *) continue ;; esac
       case "$b" in
         cli_*) [ -f "tests/$b" ] && add "$n" "$v" "tests/$b" ;;
         *) [ -x "build/$v/tests/$b" ] && add "$n" "$v" "build/$v/tests/$b" ;;
       esac ;;
  esac
done
for v in "$@"; do
  for t in build/"$v"/tests/test_*; do
    [ -x "$t" ] && [ -f "$t" ] && add "$v/$(basename "$t")" "$v" "$t"
  done
  for s in tests/cli_*.sh; do [ -f "$s" ] && add "$v/$(basename "$s")" "$v" "$s"; done
done
# The CUDA backend's own sources on the host-side GPU simulator (gpu/sim/, ASan build):
# built by `make test` on every machine, nvcc or not; a subset (docs/gpu.md).
[ -x build/sim/test_gpu ] && add sim/gpu_sim.sh sim tests/gpu_sim.sh
# Every libFuzzer target of `make fuzz` built and run once over its seeds (clang from
# scripts/deps.sh test): a target that no longer links (a source it compiles gained a
# dependency) or fails on its own seeds is a failure here, not at the next campaign.
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }' |
   clang -x c -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  add fuzz/run.sh fuzz tests/fuzz/run.sh
else
  echo "SKIP the fuzz targets: no clang with libFuzzer here (scripts/deps.sh test installs it); not counted"
fi

logdir=$(mktemp -d)
exec 4>&1 # run.sh's own output, for the lines written while a test's output goes to its log
pids=()
trap 'rm -rf "$logdir"' EXIT
# stopped (CI's time limit, ^C): say which tests were running, with what they printed,
# and stop the lanes and their tests
stopped() {
  trap - INT TERM
  echo "run.sh: stopped; tests still running:"
  for f in "$logdir"/*.t0; do
    [ -e "$f" ] || continue
    i=$(basename "$f" .t0)
    [ -e "$logdir/$i.rc" ] && continue
    IFS=$'\t' read -r name _ _ <<<"${queue[$i]}"
    echo "== $name (unfinished)"; cat "$logdir/$i.log"
  done
  # the lanes and everything under them (the tests are their grandchildren and more;
  # background jobs of a script ignore ^C, so each is sent TERM)
  local all=() next=("${pids[@]}") p c
  while [ ${#next[@]} -gt 0 ]; do
    p=${next[0]}; next=("${next[@]:1}"); all+=("$p")
    for c in $(grep -ls "^PPid:[[:space:]]*$p\$" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3); do next+=("$c"); done
  done
  [ ${#all[@]} -gt 0 ] && kill -TERM "${all[@]}" 2>/dev/null
  exit 130
}
trap stopped INT TERM
echo 0 >"$logdir/next"
: >"$logdir/print.lock"

# run_one I: runs queue entry I, its output to $logdir/I.log, "status seconds" to I.rc.
# A `single` test first takes its name's lock (fd 5), held while it runs.
run_one() {
  local name variant path base t0 st one=/dev/null
  IFS=$'\t' read -r name variant path <<<"${queue[$1]}"
  base=$(basename "$path")
  case "$single" in *" $base "*) one="$logdir/$base.lock" ;; esac
  (
    [ "$one" = /dev/null ] || flock -x 5
    echo "$SECONDS" >"$logdir/$1.t0" # the time it ran, not the time it waited
    { flock -x 7; echo "-- started $name" >&4; } 7>"$logdir/print.lock"
    # the test gets no lock descriptor (a daemon it leaves behind must not hold a lock)
    # and not run.sh's own output (one left behind would hold CI's log open)
    case "$variant" in
      sim) GPU_SIM_SUBSET=1 bash "$path" 4>&- 5>&- ;;
      fuzz) FUZZ_SMOKE=1 FUZZ_OUT=build/fuzz-smoke bash "$path" 4>&- 5>&- ;;
      *) case "$base" in
           cli_*) TANDEM_BIN="build/$variant/tandem" bash "$path" 4>&- 5>&- ;;
           *) TANDEM_BIN="build/$variant/tandem" "$path" 4>&- 5>&- ;;
         esac ;;
    esac
  ) 5>>"$one" >"$logdir/$1.log" 2>&1 </dev/null
  st=$?
  t0=$(cat "$logdir/$1.t0" 2>/dev/null || echo "$SECONDS")
  echo "$st $((SECONDS - t0))" >"$logdir/$1.rc"
  {
    flock -x 7
    echo "== $name"
    cat "$logdir/$1.log"
  } 7>"$logdir/print.lock"
}

# lane: takes the next queue entry until none is left
lane() {
  local i
  while :; do
    i=$({ flock -x 6; i=$(cat "$logdir/next"); echo $((i + 1)) >"$logdir/next"; echo "$i"; } 6>"$logdir/next.lock")
    [ "$i" -lt "${#queue[@]}" ] || break
    run_one "$i"
  done
}

for ((l = 0; l < jobs; l++)); do lane & pids+=($!); done
wait "${pids[@]}"

passed=0; failed=0; failures=()
tally() { # tally NAME LOGFILE STATUS
  local line p f
  line=$(grep -E '^[A-Za-z0-9_./-]+: [0-9]+ passed, [0-9]+ failed$' "$2" | tail -n 1)
  if [ -z "$line" ]; then
    failed=$((failed + 1)); failures+=("$1 (no summary, exit $3)"); return
  fi
  p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/' <<<"$line")
  f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$f" -gt 0 ]; then failures+=("$1 ($f failed)")
  elif [ "$3" -ne 0 ]; then failed=$((failed + 1)); failures+=("$1 (exit $3)"); fi
}
# Seconds each test took (with TEST_JOBS > 1, beside another test), longest first, so
# that the suite's time (kept near 20 min on 2 cores) can be watched in every CI log.
times=()
for i in "${!queue[@]}"; do
  IFS=$'\t' read -r name _ _ <<<"${queue[$i]}"
  if [ ! -f "$logdir/$i.rc" ]; then
    failed=$((failed + 1)); failures+=("$name (never ran)"); continue
  fi
  read -r st secs <"$logdir/$i.rc"
  tally "$name" "$logdir/$i.log" "$st"
  times+=("$secs $name")
done
echo "-- seconds per test (longest first; whole run ${SECONDS} s, $jobs lanes):"
[ ${#times[@]} -gt 0 ] && printf '%s\n' "${times[@]}" | sort -rn | head -n 20 | sed 's/^/   /'
for f in "${failures[@]+"${failures[@]}"}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
