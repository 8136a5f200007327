#!/usr/bin/env bash
# gpu_run.sh — runs the GPU tests (build/rel/gpu-tests/test_gpu) and says plainly whether
# they ran: `make test-gpu` calls it after building.
#
# Exit status: 0 when every case passed, or when everything was SKIPPED (no CUDA in the
# build, or no GPU) — then a SKIPPED banner says so, and nothing counts as passed;
# 1 when a case failed or the binary crashed. Set GPU_TESTS_REQUIRED=1 to make a skip
# exit 3 instead (for a GPU machine, where a skip means something is wrong).
set -u
cd "$(dirname "$0")/.."
bin=${TEST_GPU_BIN:-build/rel/gpu-tests/test_gpu}
export TANDEM_BIN=${TANDEM_BIN:-build/rel/tandem}
export TANDEM_ROOT="$PWD"
if [ ! -x "$bin" ]; then
  echo "gpu_run.sh: $bin is not built; run 'make test-gpu'" >&2
  exit 2
fi
log=$(mktemp)
"$bin" 2>&1 | tee "$log"
st=${PIPESTATUS[0]}
line=$(grep -E '^test_gpu: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
rm -f "$log"
if [ -z "$line" ]; then
  echo "test_gpu: FAILED (no summary; exit $st)"
  exit 1
fi
read -r p f s < <(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/' <<<"$line")
echo
if [ "$f" -gt 0 ] || [ "$st" -ne 0 ]; then
  echo "GPU TESTS FAILED: $p passed, $f failed, $s skipped (exit $st)"
  exit 1
fi
if [ "$p" -eq 0 ]; then
  echo "################################################################"
  echo "# GPU TESTS SKIPPED: nothing was tested ($s cases skipped)."
  echo "# This is not a pass. Run 'make test-gpu' on a machine with an"
  echo "# NVIDIA GPU (sm_90 build; see docs/gpu.md)."
  echo "################################################################"
  [ "${GPU_TESTS_REQUIRED:-0}" = 1 ] && exit 3
  exit 0
fi
if [ "$s" -gt 0 ]; then
  echo "GPU tests: $p passed, 0 failed, $s SKIPPED (see the SKIP lines above; skipped cases did not run)"
  [ "${GPU_TESTS_REQUIRED:-0}" = 1 ] && exit 3
  exit 0
fi
echo "GPU tests: all $p passed"
