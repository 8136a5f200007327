#!/usr/bin/env bash
# gpu_sim.sh — tests/test_gpu.c against the GPU simulator (gpu/sim/), where there is no
# GPU: `make test-gpu-sim`. Runs the suite with the threads of each simulated block
# scheduled forward, in reverse and in a random order (a missing barrier changes results
# between orders, and the bit-exact checks see it), plus the no-device path.
# Quick mode: shorter SIGKILL runs (bf16 only), no 160M memory report, no runner-level
# run (those need a real GPU). Prints one line "N passed, M failed" like tests/run.sh.
# GPU_SIM_SUBSET=1 (what `make test` uses, ~2 min): the op-level cases and the state round
# trip, threads in random order only, plus the no-device path. In both modes a run whose
# cuBLASLt lacks the GELU epilogues (TANDEM_GPU_SIM_NO_GELU_EPILOGUE=1) checks the fallback,
# tests/test_gpu_hf.cu (build/sim/test_gpu_hf, beside $bin) runs in all three orders, and
# tests/test_gpu_sim_io.cpp checks the simulator's own page-locked memory rules.
set -u
cd "$(dirname "$0")/.."
bin=${TEST_GPU_SIM_BIN:-build/sim/test_gpu}
[ -x "$bin" ] || { echo "gpu_sim.sh: $bin is not built; run 'make test-gpu-sim'" >&2; exit 2; }
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TEST_GPU_QUICK=1 TANDEM_ROOT="$PWD"
# the simulator implements the GELU epilogues: its runs must take them
export TANDEM_REQUIRE_GELU_EPILOGUE=1
passed=0; failed=0; fails=()
# every case in forward order; the kernel-level cases again in reverse and random order
kernel_cases=test_forward_backward_fp32,test_forward_backward_bf16,test_bit_identical_runs,test_hf_family,test_gelu_epilogue
orders="forward reverse random"
subset=test_forward_backward_fp32,test_forward_backward_bf16,test_bit_identical_runs,test_hf_family,test_gelu_epilogue,test_workspace_estimate,test_buffer_and_optimiser_ops,test_one_wait_per_step,test_state_round_trip_cuda_cpu_cuda
[ "${GPU_SIM_SUBSET:-0}" = 1 ] && orders=random
for order in $orders; do
  echo "== simulator, thread order $order"
  log=$(mktemp)
  cases=; [ "$order" = forward ] || cases=$kernel_cases
  [ "${GPU_SIM_SUBSET:-0}" = 1 ] && cases=$subset
  TEST_GPU_CASES=$cases TANDEM_GPU_SIM_ORDER=$order "$bin" 2>&1 | tee "$log"; st=${PIPESTATUS[0]}
  line=$(grep -E '^test_gpu: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
  rm -f "$log"
  if [ -z "$line" ]; then failed=$((failed + 1)); fails+=("$order: no summary (exit $st)"); continue; fi
  p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.*, ([0-9]+) failed.*/\1/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f))
  [ "$f" -gt 0 ] && fails+=("$order: $f failed")
  [ "$f" -eq 0 ] && [ "$st" -ne 0 ] && { failed=$((failed + 1)); fails+=("$order: exit $st"); }
done
# a cuBLASLt without the GELU epilogues (1: none offered; 2: offered, refused when called):
# every problem falls back to the kernels, with the same results (test_gelu_epilogue checks
# that the workspace says "kernels")
for mode in 1 2; do
  echo "== simulator whose cuBLASLt has no GELU epilogue ($mode)"
  out=$(TANDEM_GPU_SIM_NO_GELU_EPILOGUE=$mode TANDEM_REQUIRE_GELU_EPILOGUE=0 TANDEM_GPU_SIM_ORDER=random \
        TEST_GPU_CASES=test_gelu_epilogue "$bin" 2>&1); st=$?
  echo "$out"
  if [ $st -eq 0 ] && grep -q '^test_gpu: 1 passed, 0 failed, ' <<<"$out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); fails+=("no GELU epilogue ($mode): the fallback failed (exit $st)")
  fi
done
echo "== simulator without a device"
out=$(TANDEM_GPU_SIM_NODEV=1 "$bin" 2>&1); st=$?
echo "$out"
if [ $st -eq 0 ] && grep -q '^SKIP: no CUDA device' <<<"$out" && grep -q ' 0 passed, 0 failed, ' <<<"$out"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); fails+=("no-device run did not skip cleanly (exit $st)")
fi
# tests/test_gpu_hf.cu (the Llama / Qwen2 kernels and the grouped-query flash attention, ~3 s): every thread order in
# both modes, and the digest of all its outputs must be the same bits in each
hf_bin=${TEST_GPU_HF_SIM_BIN:-$(dirname "$bin")/test_gpu_hf}
if [ ! -x "$hf_bin" ]; then
  failed=$((failed + 1)); fails+=("$hf_bin is not built")
else
  digests=
  for order in forward reverse random; do
    echo "== test_gpu_hf, thread order $order"
    out=$(TANDEM_GPU_SIM_ORDER=$order "$hf_bin" 2>&1); st=$?
    echo "$out"
    line=$(grep -E '^test_gpu_hf: [0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
    if [ -z "$line" ]; then failed=$((failed + 1)); fails+=("test_gpu_hf $order: no summary (exit $st)"); continue; fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.*, ([0-9]+) failed.*/\1/' <<<"$line")
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && fails+=("test_gpu_hf $order: $f failed")
    [ "$f" -eq 0 ] && [ "$st" -ne 0 ] && { failed=$((failed + 1)); fails+=("test_gpu_hf $order: exit $st"); }
    digests+="$(sed -n 's/^test_gpu_hf: digest //p' <<<"$out")"$'\n'
  done
  if [ "$(sort -u <<<"$digests" | grep -c .)" -eq 1 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); fails+=("test_gpu_hf: outputs differ between thread orders: $(tr '\n' ' ' <<<"$digests")")
  fi
  out=$(TANDEM_GPU_SIM_NODEV=1 "$hf_bin" 2>&1); st=$?
  if [ $st -eq 0 ] && grep -q '^SKIP: no CUDA device' <<<"$out" && grep -q ' 0 passed, 0 failed$' <<<"$out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); fails+=("test_gpu_hf: no-device run did not skip cleanly (exit $st)")
  fi
fi
# tests/test_gpu_sim_io.cpp: the simulator's rules for page-locked memory and the host's
# waits, which test_gpu's one-wait-per-step case leans on
io_bin=${TEST_GPU_SIM_IO_BIN:-$(dirname "$bin")/test_gpu_sim_io}
if [ ! -x "$io_bin" ]; then
  failed=$((failed + 1)); fails+=("$io_bin is not built")
else
  echo "== simulator: page-locked memory and waits"
  out=$("$io_bin" 2>&1); st=$?
  echo "$out"
  line=$(grep -E '^test_gpu_sim_io: [0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
  if [ -n "$line" ] && [ $st -eq 0 ] && grep -q ', 0 failed$' <<<"$line"; then passed=$((passed + 1))
  else failed=$((failed + 1)); fails+=("test_gpu_sim_io: exit $st: ${line:-no summary}"); fi
fi
for f in "${fails[@]+"${fails[@]}"}"; do echo "FAILED: $f"; done
echo "gpu_sim: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
