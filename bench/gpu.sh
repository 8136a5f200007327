#!/usr/bin/env bash
# gpu.sh — the CUDA backend against PyTorch on this machine's GPU (make bench-gpu).
#
#   bash bench/gpu.sh            GPT-2 124M (12 x 768, 12 heads, vocab 50257; the presets'
#                                "160M" shape) at T = 512 (batch 32) and T = 1024 (batch 16)
#
# For each: build/rel/bench/bench_gpu (tandem, bf16) and bench/gpu_torch.py (PyTorch eager
# and torch.compile in its default mode; bf16 autocast, scaled-dot-product attention) on
# the same model, batch and step (forward, backward, clip, AdamW), in this run; then a
# table of tokens/s, ours/eager, ours/compile and MFU against the targets (>= 1.3x eager,
# >= 1.0x compile, >= 40 % MFU in bf16), and the TANDEM episode cost
# against vanilla training (bench_gpu --episode 1) beside the paper's (E + 2K + 2/3)/E.
# Environment: GPU_BENCH_ITERS (default 20), GPU_BENCH_FP32=1 adds fp32 rows (ours and
# PyTorch without autocast, TF32 off), GPU_BENCH_COMPILE=0 leaves torch.compile out,
# GPU_BENCH_QWEN2=0 the Qwen2-0.5B-shaped rows (ours beside PyTorch, bf16 and fp32, 32 x 512),
# PYTHON (default python3: the GPU machine's, with torch), BENCH_GPU_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BENCH_GPU_BIN:-build/rel/bench/bench_gpu}
py=${PYTHON:-python3}
iters=${GPU_BENCH_ITERS:-20}
[ -x "$bin" ] || { echo "gpu.sh: $bin not built; run 'make bench-gpu'" >&2; exit 2; }
field() { sed -nE "s/.*[[:space:]]$1=([^[:space:]]+).*/\1/p" <<<"$2"; }

if ! nvidia-smi >/dev/null 2>&1; then
  echo "gpu.sh: SKIPPED: no NVIDIA GPU here (nvidia-smi fails); nothing was measured" >&2
  exit 3
fi
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu.sh: $py has no CUDA-enabled torch; set PYTHON" >&2; exit 2
fi
echo "GPU:     $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)"
echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
echo "Ours:    $bin (gpu/, cuBLASLt + fused flash-style attention)"
echo

model=(--layers 12 --channels 768 --heads 12 --vocab 50257)
precisions=(bf16)
[ "${GPU_BENCH_FP32:-0}" = 1 ] && precisions+=(fp32)
rows=()
for prec in "${precisions[@]}"; do
  for cfg in "512 32" "1024 16"; do
    read -r T B <<<"$cfg"
    ours=$("$bin" "${model[@]}" --seq "$T" --batch "$B" --iters "$iters" --precision "$prec")
    echo "$ours"
    peak=$(field peak_tflops "$ours")
    theirs=$("$py" bench/gpu_torch.py "${model[@]}" --seq "$T" --batch "$B" --iters "$iters" \
             --precision "$prec" --peak-tflops "$peak")
    echo "$theirs"
    # torch.compile (default mode): what a user choosing between us and PyTorch compares
    # against; GPU_BENCH_COMPILE=0 leaves it out (compilation takes a minute or two)
    compiled=
    if [ "${GPU_BENCH_COMPILE:-1}" = 1 ]; then
      compiled=$("$py" bench/gpu_torch.py "${model[@]}" --seq "$T" --batch "$B" --iters "$iters" \
                 --precision "$prec" --peak-tflops "$peak" --compile 2>"${TMPDIR:-/tmp}/gpu_compile.err") \
        || echo "gpu.sh: torch.compile failed: $(tail -n 1 "${TMPDIR:-/tmp}/gpu_compile.err")" >&2
      echo "$compiled"
    fi
    a=$(field tokens_per_s "$ours"); b=$(field tokens_per_s "$theirs"); c=$(field tokens_per_s "$compiled")
    ma=$(field mfu "$ours"); mb=$(field mfu "$theirs")
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    cratio=$(awk -v a="$a" -v c="$c" 'BEGIN { if (c > 0) printf "%.2f", a / c; else print "n/a" }')
    verdict=$(awk -v r="$ratio" -v cr="$cratio" -v m="$ma" -v p="$prec" 'BEGIN {
      s = (r >= 1.3 ? ">= 1.3x eager met" : ">= 1.3x eager MISSED");
      if (cr != "n/a") s = s (cr >= 1.0 ? ", >= 1.0x compile met" : ", >= 1.0x compile MISSED");
      if (p == "bf16") s = s (m >= 0.40 ? ", MFU met" : ", MFU MISSED");
      print s }')
    rows+=("$(printf '%-5s %5s %5s %12.0f %12.0f %12.0f %7s %7s %7.1f%% %7.1f%%   %s' "$prec" "$T" "$B" "$a" "$b" \
             "${c:-0}" "$ratio" "$cratio" "$(awk -v m="$ma" 'BEGIN{print 100*m}')" \
             "$(awk -v m="$mb" 'BEGIN{print 100*m}')" "$verdict")")
  done
done
echo
echo "GPT-2 124M, step = forward + backward + clip + AdamW; MFU against the peak printed above"
printf '%-5s %5s %5s %12s %12s %12s %7s %7s %8s %8s   %s\n' prec T B "ours tok/s" "eager tok/s" \
  "compile tok/s" ours/eag ours/cmp "MFU ours" "MFU eag" "targets (>= 1.3x eager, >= 1.0x compile, >= 40 % bf16)"
for r in "${rows[@]}"; do echo "$r"; done
echo "(each bench_gpu line's one_wait_speedup: the same steps timed in the same run with the"
echo " waits steps made before, after the forward and for the norm, over ours with one wait;"
echo " host_share: the host's time queueing a step over the step's, near 1 where launches bound it)"

# The Llama / Qwen2 family in Qwen2-0.5B's shape at the paper's SFT batch (32 x 512), each
# precision against PyTorch's model of the same shape in the same precision (TF32 off in
# fp32): bf16 is the row that counts (gpu/cuda_hf.cu's fast path: packed q | k | v, the
# flash-style grouped-query attention or cuDNN's), fp32 is our CPU-exact reference path.
# GPU_BENCH_QWEN2=0 leaves it out.
if [ "${GPU_BENCH_QWEN2:-1}" = 1 ]; then
  qm=(--arch qwen2 --seq 512 --batch 32 --iters "${GPU_BENCH_QWEN2_ITERS:-5}")
  echo
  echo "Qwen2-0.5B shape (24 x 896, 14/2 heads, SwiGLU 4864, vocab 151936), B 32 x T 512"
  printf '%-5s %12s %12s %8s %9s %9s\n' prec "ours tok/s" "torch tok/s" ours/pt "MFU ours" "MFU torch"
  for prec in bf16 fp32; do
    ours=$("$bin" "${qm[@]}" --precision "$prec")
    echo "$ours"
    theirs=$("$py" bench/gpu_torch.py "${qm[@]}" --precision "$prec" --peak-tflops "$(field peak_tflops "$ours")")
    echo "$theirs"
    a=$(field tokens_per_s "$ours"); b=$(field tokens_per_s "$theirs")
    printf '%-5s %12.0f %12.0f %8s %9s %9s\n' "$prec" "$a" "$b" \
      "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" \
      "$(field mfu "$ours")" "$(field mfu "$theirs")"
  done
fi

echo
ep=$("$bin" "${model[@]}" --seq 512 --batch 16 --iters 2 --warmup 1 --precision bf16 --episode 1 \
     | grep '^bench_gpu_episode')
echo "$ep"
printf '%-34s %10s %10s %8s %s\n' "episode cost (bf16, T=512, B=16)" tandem vanilla ratio paper
printf '%-34s %8.3f s %8.3f s %8s %s\n' "same number of u-steps" "$(field tandem_s "$ep")" \
  "$(field vanilla_s "$ep")" "$(field ratio "$ep")" "$(field paper "$ep")"
