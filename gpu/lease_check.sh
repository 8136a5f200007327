#!/usr/bin/env bash
# lease_check.sh — the GPU checks of one short device lease, as one command (docs/gpu.md,
# "Verifying on a GPU"). Run on the GPU machine, in the repository root; it unpacks
# build/gpucarry/bundle.tar.xz (gpu/carry.sh) itself when the binaries are not there.
#
#   test     test_gpu (GPU_TESTS_REQUIRED=1; TANDEM_REQUIRE_CUDNN=1 when cuDNN was found, so
#            its cudnn case fails instead of skipping); with ckpt: beside it, on the host's
#            CPUs and disk, bench_ckpt's 1B-size commit row (stall vs memcpy, write vs dd;
#            ~30 GB of host)
#   attn     model.attention (docs/gpu.md, "Attention: cuDNN or built-in"): bench_gpu rows of
#            GPT-2 124M in bf16 at T 1024 (B 16) and T 512 (B 32) with --attention builtin and
#            --attention cudnn, the start-up self-check's line, and a 2-episode run with
#            model.attention auto done twice, the two `tandem hash` outputs compared
#   qwen2    the Llama / Qwen2 family (docs/gpu.md, "The Llama / Qwen2 family on the GPU"):
#            test_gpu_hf (kernels and the grouped-query flash attention against the CPU's),
#            test_gpu's test_hf_family (fp32 and bf16 against the CPU backend; its attention
#            line says whether cuDNN's grouped-query self-check passed), and bench_gpu rows
#            of Qwen2-0.5B's shape in bf16 at 32 x 512 with --attention builtin and cudnn
#            beside PyTorch's bf16 model of the shape (bench/gpu_torch.py --arch qwen2)
#   gelu     the MLP's GELU in cuBLASLt's epilogues (docs/gpu.md, "Fewer kernels"): test_gpu's
#            test_gelu_epilogue with TANDEM_REQUIRE_GELU_EPILOGUE=1 (fused against the kernels,
#            fp32 and bf16, same bits twice), and bench_gpu rows of GPT-2 124M in bf16 at T 1024
#            (B 16) and T 512 (B 32) with --gelu-epilogue off and auto
#   1b       the data-restricted-1b preset on the GPU in bf16 (909.7M parameters at
#            vocabulary 50257, batch 128 x 512 in passes of 32): 2 episodes committing after
#            each, the GPU's memory sampled by nvidia-smi every 200 ms (peak against the
#            estimate the run prints); then the finished run extended by one episode
#            (restores the 1B state onto the GPU)
#   bench    bench/gpu.sh (tandem against PyTorch on the same GPU)
#   stop     a new 1B run stopped by SIGTERM in its second episode with a 30 s grace (GKE
#            spot): how long until the first episode, and until it exits 75
#   graphs   whether CUDA graphs could pay (docs/gpu.md, "CUDA graphs"): bench_gpu rows of
#            three GPT-2 sizes in bf16 (2 x 128 at 8 x 64, 6 x 384 at 16 x 256, 124M at 16 x
#            1024), each noting the step time and the host's share of it spent queueing the
#            step's work (host_share near 1: launch-bound, graphs would pay; well under 1: the
#            host runs ahead and graphs could save only the gap after each step's wait)
#   profile  where bench_gpu's step spends its GPU time (GPT-2 124M, bf16, T 1024, B 16),
#            per kernel: nsys where the machine has it, else ncu (gpu__time_duration)
#   dmo      issue 25 at SIZE=gpu: bench-dmo's repetition-heavy regime (6 x 384, ctx 256,
#            bf16, 300 episodes of 80 x 256; the corpus carried by gpu/carry.sh), DMO seed
#            LEASE_DMO_SEEDS (1) x final seed LEASE_DMO_FINALS (1), the defaults and
#            LEASE_DMO_VARIANT (default "repeated tandem.alpha_cut=repeated": does a
#            GPU-size model overfit the small domains of the 16-epoch start, so that the
#            default (alpha_cut overfit) cuts them on its own evidence, and how does that
#            compare with the cut on repetition, the default before? "start4
#            tandem.start_epochs=4" runs the start at 4 epochs instead) side by side
#            on the same Uniform / Natural / UniMax finals,
#            LEASE_DMO_LANES (6) runs at a time on the one GPU; each run's line as it ends,
#            so a part cut short by the budget still tells the α* and finals it reached
#
# LEASE_PARTS picks them, in the order above (default "test ckpt attn qwen2 gelu 1b bench";
# for the kernel checks alone, ~8 minutes: LEASE_PARTS="test attn qwen2 gelu graphs profile").
# cuDNN (libcudnn.so.9) is looked for before any part: $TANDEM_CUDNN_DIR, python3's
# nvidia-cudnn package, torch/lib, /usr/local/cuda/lib64; the folder found is exported as
# TANDEM_CUDNN_DIR and put on LD_LIBRARY_PATH (gpu/cudnn_att.cu dlopens it from there).
# LEASE_BUDGET_S (default 450): a part that would not fit in what is left is skipped, and
# the summary says so. Logs go to $OUT (the device tool's folder), or LEASE_OUT, or build/lease.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${LEASE_BUDGET_S:-450}
out=${LEASE_OUT:-${OUT:-build/lease}}
mkdir -p "$out"
T=build/rel/tandem
summary=()
note() { summary+=("$*"); echo "lease_check: $*"; }
left() { echo $((budget - SECONDS)); }
parts=" ${LEASE_PARTS:-test ckpt attn qwen2 gelu 1b bench} "
want() { [[ "$parts" == *" $1 "* ]]; }
# prefixes each line with the seconds since $1 (SECONDS)
stamp() { while IFS= read -r l; do printf '%7.1f %s\n' "$(awk -v s="$SECONDS" -v t="$1" 'BEGIN{print s-t}')" "$l"; done; }

if [ -f build/gpucarry/bundle.tar.xz ] && [ ! -x "$T" ]; then
  bash gpu/carry.sh --unpack || exit 2
fi
[ -d build/gpucarry/lib ] && export LD_LIBRARY_PATH=$PWD/build/gpucarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader \
  | tee "$out/device.txt" || { echo "lease_check: no GPU (nvidia-smi fails)" >&2; exit 3; }
note "device: $(head -n 1 "$out/device.txt"); host $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"

# --- cuDNN: where libcudnn.so.9 is (none of tandem's binaries link it) ----------------------
find_cudnn() {
  local d
  for d in "${TANDEM_CUDNN_DIR:-}" \
      "$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)" \
      "$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__) + "/lib")' 2>/dev/null)" \
      /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
    [ -n "$d" ] && [ -e "$d/libcudnn.so.9" ] && { echo "$d"; return 0; }
  done
  python3 -c '
import glob, site, sys
for p in site.getsitepackages() + [site.getusersitepackages()]:
    for f in sorted(glob.glob(p + "/nvidia/**/libcudnn.so.9", recursive=True)):
        print(f.rsplit("/", 1)[0]); sys.exit(0)
' 2>/dev/null
}
cudnn_dir=$(find_cudnn | head -n 1)
if [ -n "$cudnn_dir" ]; then
  export TANDEM_CUDNN_DIR=$cudnn_dir TANDEM_REQUIRE_CUDNN=1
  export LD_LIBRARY_PATH=$cudnn_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64 # nvrtc
  note "cuDNN: $cudnn_dir ($(ls "$cudnn_dir" | grep -c '^libcudnn') libcudnn files; torch.backends.cudnn.version() $(python3 -c 'import torch; print(torch.backends.cudnn.version())' 2>/dev/null || echo '?'))"
else
  note "cuDNN: NOT FOUND (no libcudnn.so.9 in TANDEM_CUDNN_DIR, nvidia-cudnn, torch/lib, /usr/local/cuda/lib64): model.attention auto runs the built-in kernels"
fi

# the 1B preset's corpus and config in $1 (vocabulary 50257, 4 domains)
make_1b() {
  rm -rf "$1" && mkdir -p "$1"
  "$T" gen-corpus --out "$1/c" --domains 4 --vocab 50257 --train-tokens 2M --val-tokens 100k \
    --test-tokens 100k >"$out/corpus_1b.log" 2>&1 || note "1B corpus failed"
  cat >"$1/r.yaml" <<'EOF'
preset: data-restricted-1b
run: {episodes: 2, device: cuda, precision: bf16}
data: {dataset: c/dataset.yaml}
checkpoint: {every_episodes: 1}
EOF
}
w=build/lease-1b

# --- test: test_gpu, and the 1B-size host commit row beside it --------------------------
if want test; then
  bc_dir=build/lease-bench-ckpt bc_pid=
  if want ckpt; then
    rm -rf "$bc_dir" && mkdir -p "$bc_dir"
    timeout 300 build/rel/bench/bench_ckpt --commit-only --layers 16 --channels 2048 --repeats 2 \
      --dir "$bc_dir" >"$out/bench_ckpt_1b.log" 2>&1 &
    bc_pid=$!
  fi
  t0=$SECONDS
  GPU_TESTS_REQUIRED=1 timeout 240 bash tests/gpu_run.sh >"$out/test_gpu.log" 2>&1
  st=$?
  note "test_gpu: exit $st in $((SECONDS - t0)) s: $(grep -E '^(GPU tests|GPU TESTS|test_gpu:)' "$out/test_gpu.log" | tail -n 1)"
  if [ -n "$bc_pid" ]; then
    wait "$bc_pid"
    note "bench_ckpt 1B (exit $?): $(grep -E '^state:|stall vs memcpy|vs dd' "$out/bench_ckpt_1b.log" | tr -s ' ' | paste -sd ';')"
    rm -rf "$bc_dir"
  fi
fi

# gpt2_row PART "T B" FLAG VALUE: one bench_gpu row of GPT-2 124M in bf16 with FLAG VALUE,
# appended to $out/PART.log and noted (step time, tokens/s, MFU, what attention and GELU ran)
gpt2_row() {
  local part=$1 T B st row
  read -r T B <<<"$2"
  timeout 120 build/rel/bench/bench_gpu --layers 12 --channels 768 --heads 12 --vocab 50257 \
    --seq "$T" --batch "$B" --precision bf16 "$3" "$4" --iters 10 --warmup 2 >>"$out/$part.log" 2>&1
  st=$?
  row=$(grep '^bench_gpu ' "$out/$part.log" | tail -n 1)
  if [ "$st" = 0 ]; then
    note "$part T $T B $B $3 $4: $(sed -nE 's/.*ms_per_step=([^ ]+) tokens_per_s=([^ ]+).* mfu=([^ ]+).* attention=([^ ]+) gelu=([^ ]+).* one_wait_speedup=([^ ]+) host_enqueue_ms=([^ ]+) host_share=([^ ]+).*/\1 ms\/step, \2 tok\/s, MFU \3, attention \4, gelu \5, one wait vs three \6x, host queues \7 ms (share \8)/p' <<<"$row")"
  else
    note "$part T $T B $B $3 $4: exit $st: $(tail -n 1 "$out/$part.log" | cut -c1-300)"
  fi
}

# --- attn: cuDNN's attention against the built-in kernels ----------------------------------
if ! want attn; then :
elif [ "$(left)" -lt 90 ]; then
  note "attn: SKIPPED ($(left) s left)"
else
  t0=$SECONDS
  : >"$out/attn.log"
  for shape in "1024 16" "512 32"; do
    for att in builtin cudnn; do gpt2_row attn "$shape" --attention "$att"; done
  done
  note "attn: $(grep -m1 -E '^tandem: attention: (cudnn|builtin \(cuDNN)' "$out/attn.log" | cut -c1-300)"
  # a short run twice with model.attention auto: the same hash (bit-exact on the GPU)
  aw=build/lease-attn
  rm -rf "$aw" && mkdir -p "$aw"
  "$T" gen-corpus --out "$aw/c" --domains 3 --vocab 512 --train-tokens 200k --val-tokens 20k \
    --test-tokens 20k >"$out/attn_corpus.log" 2>&1
  printf '%s\n' 'run: {episodes: 2, device: cuda, precision: bf16}' 'data: {dataset: c/dataset.yaml}' \
    'model: {layers: 2, channels: 128, heads: 2, ctx: 256, attention: auto}' \
    'train: {batch: 8, seq: 256}' 'checkpoint: {every_episodes: 1}' >"$aw/r.yaml"
  hashes=()
  for k in 1 2; do
    (cd "$aw" && timeout 90 ../rel/tandem run r.yaml --store "s$k" 2>&1) >"$out/attn_run$k.log"
    hashes+=("$("$T" hash "$aw/s$k" 2>&1 | tail -n 1)")
  done
  same=DIFFER
  [ -n "${hashes[0]}" ] && [ "${hashes[0]}" = "${hashes[1]}" ] && same=EQUAL
  note "attn: 2-episode run with auto twice: $(grep -m1 'attention:' "$out/attn_run1.log" | cut -c1-200); tandem hash $same (${hashes[0]})"
  rm -rf "$aw"
  note "attn: done in $((SECONDS - t0)) s"
fi

# --- qwen2: the Llama / Qwen2 family, fp32 and bf16 -------------------------------------------
if ! want qwen2; then :
elif [ "$(left)" -lt 90 ]; then
  note "qwen2: SKIPPED ($(left) s left)"
else
  t0=$SECONDS
  timeout 60 build/rel/gpu-tests/test_gpu_hf >"$out/qwen2_kernels.log" 2>&1
  note "qwen2: test_gpu_hf exit $?: $(grep -E '^test_gpu_hf: [0-9]+ passed' "$out/qwen2_kernels.log" | tail -n 1); $(grep -E 'flash_(backward|bf16)' "$out/qwen2_kernels.log" | tr -s ' ' | paste -sd ';')"
  TEST_GPU_CASES=test_hf_family timeout 120 build/rel/gpu-tests/test_gpu >"$out/qwen2_test.log" 2>&1
  note "qwen2: test_hf_family exit $?: $(grep -E '^test_gpu:' "$out/qwen2_test.log" | tail -n 1); $(grep -E 'bf16: loss' "$out/qwen2_test.log" | tr -s ' ' | paste -sd ';')"
  note "qwen2: $(grep -m1 -E '^tandem: attention: (cudnn|builtin \(cuDNN)' "$out/qwen2_test.log" | cut -c1-300)"
  : >"$out/qwen2.log"
  for att in builtin cudnn; do
    timeout 150 build/rel/bench/bench_gpu --arch qwen2 --seq 512 --batch 32 --precision bf16 --attention "$att" \
      --iters 5 --warmup 2 >>"$out/qwen2.log" 2>&1
    st=$?
    row=$(grep '^bench_gpu ' "$out/qwen2.log" | tail -n 1)
    note "qwen2 bf16 32x512 --attention $att: exit $st: $(sed -nE 's/.*ms_per_step=([^ ]+) tokens_per_s=([^ ]+).* mfu=([^ ]+) peak_mem_gib=([^ ]+).* attention=([^ ]+).*/\1 ms\/step, \2 tok\/s, MFU \3, \4 GiB, attention \5/p' <<<"$row")"
  done
  peak=$(sed -nE 's/.* peak_tflops=([^ ]+).*/\1/p' <<<"$row")
  timeout 150 python3 bench/gpu_torch.py --arch qwen2 --seq 512 --batch 32 --precision bf16 --iters 5 \
    --peak-tflops "${peak:-0}" >"$out/qwen2_torch.log" 2>&1
  note "qwen2 PyTorch bf16 32x512: exit $?: $(grep -E 'tokens_per_s' "$out/qwen2_torch.log" | tail -n 1 | sed -nE 's/.*ms_per_step=([^ ]+) tokens_per_s=([^ ]+).* mfu=([^ ]+).*/\1 ms\/step, \2 tok\/s, MFU \3/p')"
  note "qwen2: done in $((SECONDS - t0)) s"
fi

# --- gelu: the GELU epilogues against the kernels -------------------------------------------
if ! want gelu; then :
elif [ "$(left)" -lt 70 ]; then
  note "gelu: SKIPPED ($(left) s left)"
else
  t0=$SECONDS
  TANDEM_REQUIRE_GELU_EPILOGUE=1 TEST_GPU_CASES=test_gelu_epilogue timeout 120 build/rel/gpu-tests/test_gpu \
    >"$out/gelu_test.log" 2>&1
  note "gelu: test_gelu_epilogue exit $?: $(grep -E '^test_gpu:' "$out/gelu_test.log" | tail -n 1)"
  : >"$out/gelu.log"
  for shape in "1024 16" "512 32"; do
    for g in off auto; do gpt2_row gelu "$shape" --gelu-epilogue "$g"; done
  done
  note "gelu: done in $((SECONDS - t0)) s"
fi

# --- 1b: the 1B preset on the GPU ---------------------------------------------------------
if ! want 1b; then :
elif [ "$(left)" -lt 150 ]; then
  note "1B preset: SKIPPED ($(left) s left)"
else
  make_1b "$w"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$out/gpu_mem_1b.csv" 2>/dev/null &
  smi=$!
  t0=$SECONDS
  (cd "$w" && timeout $(( $(left) - 60 )) ../rel/tandem run r.yaml --store s 2>&1) | stamp "$t0" | tee "$out/run_1b.log"
  st=${PIPESTATUS[0]}
  note "1B run, 2 episodes: exit $st in $((SECONDS - t0)) s; $(grep -o 'memory: GPU ~[^(]*' "$out/run_1b.log" | head -n 1)"
  if [ "$st" = 0 ] && [ "$(left)" -gt 90 ]; then
    t0=$SECONDS
    (cd "$w" && timeout $(( $(left) - 30 )) ../rel/tandem run r.yaml --store s --set run.episodes=3 \
       --allow-change run.episodes 2>&1) | stamp "$t0" | tee "$out/run_1b_extend.log"
    note "1B run extended to 3 episodes (restore onto the GPU): exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
  fi
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  note "1B GPU memory peak (nvidia-smi, whole device): $(sort -n "$out/gpu_mem_1b.csv" | tail -n 1) MiB; idle before: $(cut -d, -f4 "$out/device.txt" | head -n 1)"
  "$T" status "$w/s" >"$out/status_1b.txt" 2>&1 && note "1B store: $(grep -iE 'size|state' "$out/status_1b.txt" | head -n 3 | tr -s ' ' | paste -sd ';')"
  rm -rf "$w"
fi

# --- bench: bench/gpu.sh --------------------------------------------------------------------
if ! want bench; then :
elif [ "$(left)" -lt 120 ]; then
  note "bench/gpu.sh: SKIPPED ($(left) s left)"
else
  t0=$SECONDS
  timeout $(( $(left) - 5 )) bash bench/gpu.sh >"$out/bench_gpu.log" 2>&1
  note "bench/gpu.sh: exit $? in $((SECONDS - t0)) s"
  sed -n '/^GPT-2 124M, step/,$p' "$out/bench_gpu.log"
fi

# --- stop: SIGTERM in a new 1B run's second episode, 30 s grace -----------------------------
if ! want stop; then :
elif [ "$(left)" -lt 100 ]; then
  note "stop: SKIPPED ($(left) s left)"
else
  make_1b "$w"
  t0=$SECONDS
  (cd "$w" && ../rel/tandem run r.yaml --store s --set checkpoint.grace_s=30 2>&1; echo "tandem exited $?") \
    | stamp "$t0" >"$out/stop_1b.log" &
  until grep -q 'episode 1/2' "$out/stop_1b.log" 2>/dev/null || [ "$(left)" -lt 60 ]; do sleep 0.5; done
  sleep 3
  t1=$SECONDS
  pkill -TERM -f 'rel/tandem run r.yaml'
  wait
  note "stop: first episode done at $(grep -m1 'episode 1/2' "$out/stop_1b.log" | awk '{print $1}') s; SIGTERM at $((t1 - t0)) s, ended $((SECONDS - t1)) s later"
  note "stop: $(grep -iE 'signal|exit|commit|given up|stopp' "$out/stop_1b.log" | tail -n 4 | tr -s ' ' | paste -sd ';')"
  note "stop: status: $("$T" status "$w/s" 2>&1 | grep -iE 'last full state|at risk' | tr -s ' ' | paste -sd ';')"
  rm -rf "$w"
fi

# --- graphs: does the host keep ahead of the GPU? ----------------------------------------------
if ! want graphs; then :
elif [ "$(left)" -lt 60 ]; then
  note "graphs: SKIPPED ($(left) s left)"
else
  : >"$out/graphs.log"
  for shape in "2 128 2 64 8" "6 384 6 256 16" "12 768 12 1024 16"; do
    read -r L C H T_ B_ <<<"$shape"
    timeout 90 build/rel/bench/bench_gpu --layers "$L" --channels "$C" --heads "$H" --vocab 50257 \
      --seq "$T_" --batch "$B_" --precision bf16 --iters 20 --warmup 3 >>"$out/graphs.log" 2>&1
    st=$?
    row=$(grep '^bench_gpu ' "$out/graphs.log" | tail -n 1)
    note "graphs ${L}x$C T $T_ B $B_ (exit $st): $(sed -nE 's/.*ms_per_step=([^ ]+) .* host_enqueue_ms=([^ ]+) host_share=([^ ]+).*/\1 ms\/step, host queues \2 ms of it (share \3)/p' <<<"$row")"
  done
fi

# --- profile: the GPU time of a bench_gpu step, per kernel -----------------------------------
if ! want profile; then :
elif [ "$(left)" -lt 60 ]; then
  note "profile: SKIPPED ($(left) s left)"
else
  pb=(build/rel/bench/bench_gpu --layers 12 --channels 768 --heads 12 --vocab 50257 --seq 1024
      --batch 16 --precision bf16 --attention "${LEASE_PROFILE_ATTENTION:-auto}")
  if command -v nsys >/dev/null; then
    timeout $(( $(left) - 10 )) nsys profile -t cuda -o build/lease-prof --force-overwrite true \
      "${pb[@]}" --iters 5 --warmup 2 >"$out/profile_run.log" 2>&1
    nsys stats --report cuda_gpu_kern_sum --format csv build/lease-prof.nsys-rep \
      >"$out/profile_kernels.csv" 2>>"$out/profile_run.log"
    note "profile: nsys (exit $?): 7 steps, per kernel, in profile_kernels.csv"
    head -n 20 "$out/profile_kernels.csv" | cut -c1-200
  else
    timeout $(( $(left) - 10 )) ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      "${pb[@]}" --iters 2 --warmup 0 >"$out/profile_ncu.csv" 2>"$out/profile_run.log"
    note "profile: ncu (exit $?): the second of two steps, per kernel, in profile_kernels.txt"
    python3 gpu/ncu_table.py "$out/profile_ncu.csv" | tee "$out/profile_kernels.txt"
  fi
fi

# --- dmo: bench-dmo's heavy regime at the GPU size (issue 25) ---------------------------------
if ! want dmo; then :
elif [ ! -f build/gpucarry/dmo/corpus-gpu-heavy/dataset.yaml ]; then
  note "dmo: SKIPPED (no build/gpucarry/dmo: gpu/carry.sh builds and packs the corpus)"
elif [ "$(left)" -lt 240 ]; then
  note "dmo: SKIPPED ($(left) s left)"
else
  t0=$SECONDS
  dw=build/lease-dmo
  rm -rf "$dw" && mkdir -p "$dw"
  cp -r build/gpucarry/dmo/corpus-gpu-heavy build/gpucarry/dmo/corpus-gpu-heavy.spec "$dw/"
  SIZE=${LEASE_DMO_SIZE:-gpu} REGIMES=heavy WORK=$PWD/$dw TANDEM=$PWD/$T THREADS=${LEASE_DMO_THREADS:-2} PROGRESS=1 \
    DMO_SEEDS=${LEASE_DMO_SEEDS:-1} FINAL_SEEDS=${LEASE_DMO_FINALS:-1} LANES=${LEASE_DMO_LANES:-6} \
    EXTRA_VARIANT="${LEASE_DMO_VARIANT:-repeated tandem.alpha_cut=repeated}" timeout -k 5 $(( $(left) - 15 )) bash bench/dmo.sh \
    2>&1 | stamp "$t0" >"$out/dmo.log"
  note "dmo: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s: $(grep -cE 'dmo-.*alpha\*' "$out/dmo.log") alpha*, $(grep -cE 'final-.*Average' "$out/dmo.log") final runs"
  grep -E 'dmo-.*alpha\*|final-.*Average| (uniform|natural|unimax|tandem|any|cap|start4|repeated|heavy)[ :]|loss rose|the bar' \
    "$out/dmo.log" | cut -c1-200
  cp "$dw"/*-heavy.json "$out/dmo.json" 2>/dev/null
  for st in "$dw"/*-heavy/dmo-*-s*/; do  # the α history of each DMO, for the plots
    [ -d "$st" ] && "$T" alpha "$st" --format csv >"$out/$(basename "$st").alpha.csv" 2>/dev/null
  done
  rm -rf "$dw"
fi

echo
echo "=== lease_check summary ($SECONDS s) ==="
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
