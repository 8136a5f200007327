#!/usr/bin/env bash
# run.sh — runs every test binary of each build variant given (rel, asan) and every
# tests/cli_*.sh script, and prints one total line: "N passed, M failed".
# A binary or script that crashes or prints no summary counts as one failure.
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

# Seconds each binary or script took, printed at the end longest first, so the suite's
# time (kept near 20 min on 2 cores) can be watched in every CI log.
times=()
timing() { times+=("$((SECONDS - $2)) $1"); }

logdir=$(mktemp -d)
for v in "$@"; do
  for t in build/"$v"/tests/test_*; do
    [ -x "$t" ] || continue
    name="$v/$(basename "$t")"
    echo "== $name"
    t0=$SECONDS
    TANDEM_BIN="build/$v/tandem" "$t" >"$logdir/log" 2>&1; st=$?
    cat "$logdir/log"
    tally "$name" "$logdir/log" "$st"
    timing "$name" "$t0"
  done
  for s in tests/cli_*.sh; do
    [ -f "$s" ] || continue
    name="$v/$(basename "$s")"
    echo "== $name"
    t0=$SECONDS
    TANDEM_BIN="build/$v/tandem" bash "$s" >"$logdir/log" 2>&1; st=$?
    cat "$logdir/log"
    tally "$name" "$logdir/log" "$st"
    timing "$name" "$t0"
  done
done
# The CUDA backend's own sources on the host-side GPU simulator (gpu/sim/, ASan build):
# built by `make test` on every machine, nvcc or not; a subset (docs/gpu.md).
if [ -x build/sim/test_gpu ]; then
  echo "== sim/gpu_sim.sh (subset)"
  t0=$SECONDS
  GPU_SIM_SUBSET=1 bash tests/gpu_sim.sh >"$logdir/log" 2>&1; st=$?
  cat "$logdir/log"
  tally "sim/gpu_sim.sh" "$logdir/log" "$st"
  timing "sim/gpu_sim.sh" "$t0"
fi
rm -rf "$logdir"
echo "-- seconds per test (longest first; whole run ${SECONDS} s):"
printf '%s\n' "${times[@]+"${times[@]}"}" | sort -rn | head -n 15 | sed 's/^/   /'
for f in "${failures[@]+"${failures[@]}"}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
