#!/usr/bin/env bash
# cpu.sh — the CPU backend against PyTorch: same model, batch shape and thread count.
#
#   bash bench/cpu.sh [bench flags...]     (make bench-cpu builds and runs it)
#
# Runs build/rel/bench/bench_cpu and bench/torch_bench.py (Debian's /usr/bin/python3)
# at 1 thread and at $(nproc) threads and prints a table of training tokens/s (forward,
# backward, clip, AdamW) and the ratio ours/PyTorch. Flags (--layers, --channels, --heads,
# --seq, --vocab, --batch, --iters, --warmup) go to both programs unchanged; --threads is
# set here. Each run gets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS equal
# to its thread count, so neither side's BLAS spawns more workers than the other.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BENCH_CPU_BIN:-build/rel/bench/bench_cpu}
py=/usr/bin/python3
if [ ! -x "$bin" ]; then
  echo "cpu.sh: $bin not built; run 'make bench-cpu'" >&2; exit 2
fi
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "cpu.sh: $py cannot import torch; run 'scripts/deps.sh test'" >&2; exit 2
fi
for a in "$@"; do
  case "$a" in --threads*) echo "cpu.sh: --threads is set by the script" >&2; exit 2 ;; esac
done

# field NAME LINE: the value of NAME=value in a bench output line.
field() { sed -nE "s/.*[[:space:]]$1=([^[:space:]]+).*/\1/p" <<<"$2"; }

cpu=$(lscpu 2>/dev/null | sed -nE 's/^Model name:[[:space:]]+//p' | head -n 1)
[ -n "$cpu" ] || cpu=$(sed -nE 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
ncpu=$(nproc)
echo "CPU:     ${cpu:-unknown} ($ncpu logical CPUs available)"
echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__)')"
echo "Ours:    $bin (model/cpu.c, OpenBLAS $(pkg-config --modversion openblas 2>/dev/null || echo '?'))"
echo

# Both sides compute with the same OpenBLAS kernels: on a CPU this OpenBLAS does not know,
# tandem picks them itself (model/blas_core.c), and PyTorch gets the same choice here.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$(build/rel/tandem version --json 2>/dev/null | sed -n 's/.*"blas_core": "\([A-Za-z0-9]*\)".*/\1/p')
  [ -n "$core" ] && export OPENBLAS_CORETYPE="$core"
fi
echo "OpenBLAS kernels: ${OPENBLAS_CORETYPE:-detected by OpenBLAS} (both sides)"

threads_list=(1)
[ "$ncpu" -gt 1 ] && threads_list+=("$ncpu")

rows=()
for th in "${threads_list[@]}"; do
  export OMP_NUM_THREADS=$th OPENBLAS_NUM_THREADS=$th MKL_NUM_THREADS=$th
  ours=$("$bin" --threads "$th" "$@")
  echo "$ours"
  theirs=$("$py" bench/torch_bench.py --threads "$th" "$@")
  echo "$theirs"
  cfg="L=$(field layers "$ours") C=$(field channels "$ours") H=$(field heads "$ours")"
  cfg+=" T=$(field seq "$ours") V=$(field vocab "$ours") B=$(field batch "$ours")"
  a=$(field tokens_per_s "$ours")
  b=$(field tokens_per_s "$theirs")
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  rows+=("$(printf '%-36s %7s %14s %16s %12s' "$cfg" "$th" "$a" "$b" "$ratio")")
done

echo
printf '%-36s %7s %14s %16s %12s\n' config threads "ours tok/s" "PyTorch tok/s" "ours/torch"
for r in "${rows[@]}"; do echo "$r"; done
