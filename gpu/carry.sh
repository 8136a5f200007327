#!/usr/bin/env bash
# carry.sh — packs the GPU binaries built here for a GPU machine that cannot build them
# (no network to install libyaml, msgpack, libcurl, OpenBLAS development packages), and
# unpacks them there. docs/gpu.md, "Verifying on a GPU", says when to use it.
#
#   bash gpu/carry.sh            here: build/gpucarry/bundle.tar.xz with build/rel/tandem,
#                                its CUDA backend build/rel/tandem-cuda.so,
#                                build/rel/gpu-tests/test_gpu and test_gpu_hf,
#                                build/rel/bench/bench_gpu,
#                                build/rel/bench/bench_ckpt (its 1B row needs ~30 GB of host)
#                                (debug info stripped), the SIZE=gpu repetition-heavy
#                                corpus of bench-dmo (build/gpucarry/dmo: its shards, ~3 MB
#                                packed; lease_check.sh's dmo part) and the shared libraries they need
#                                except glibc's, the C++ runtime, CUDA's and NCCL's (the GPU
#                                machine has its own: CUDA 13 under /usr/local/cuda, NCCL in
#                                /usr/lib/x86_64-linux-gnu)
#   bash gpu/carry.sh --unpack   there, in the repository root: the binaries back to their
#                                build/rel paths and the libraries to build/gpucarry/lib;
#                                then: export LD_LIBRARY_PATH=$PWD/build/gpucarry/lib
#
# cuDNN is not carried (its libraries are ~500 MB; none of the binaries links it): the
# CUDA backend dlopens libcudnn.so.9 at run time, and gpu/lease_check.sh finds the GPU
# machine's own (python3's nvidia-cudnn package, torch/lib or /usr/local/cuda/lib64).
#
# The bundle lives under build/ (ignored by git), so the device tool carries it with
# carry: ["build/gpucarry"].
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/gpucarry
bins=(build/rel/tandem build/rel/tandem-cuda.so build/rel/gpu-tests/test_gpu build/rel/gpu-tests/test_gpu_hf
      build/rel/bench/bench_gpu build/rel/bench/bench_ckpt)

if [ "${1:-}" = "--unpack" ]; then
  [ -f "$out/bundle.tar.xz" ] || { echo "carry.sh: no $out/bundle.tar.xz" >&2; exit 2; }
  tar -xJf "$out/bundle.tar.xz"
  echo "carry.sh: unpacked ${bins[*]} and $out/lib"
  missing=$(LD_LIBRARY_PATH=$PWD/$out/lib ldd "${bins[@]}" 2>/dev/null | grep 'not found' | sort -u || true)
  if [ -n "$missing" ]; then
    echo "carry.sh: still missing on this machine:" >&2
    echo "$missing" >&2
    exit 1
  fi
  echo "carry.sh: all libraries resolve; now: export LD_LIBRARY_PATH=$PWD/$out/lib"
  exit 0
fi

for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "carry.sh: $b is not built: make tandem build/rel/gpu-tests/test_gpu build/rel/gpu-tests/test_gpu_hf build/rel/bench/bench_gpu build/rel/bench/bench_ckpt (with nvcc: the CUDA backend is tandem-cuda.so)" >&2; exit 2; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/rel/gpu-tests" "$stage/build/rel/bench" "$stage/$out/lib"
for b in "${bins[@]}"; do strip --strip-debug -o "$stage/$b" "$b"; done
# every library the binaries load, minus glibc, the C++/GCC runtime and CUDA
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libresolv|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libnccl|tandem-cuda)'
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$stage/$out/lib/$name"
done
# bench-dmo's SIZE=gpu heavy corpus (the GPU machine has no Debian archive to build it from);
# the raw text stays here, the shards and dataset.yaml go
dmo=$stage/$out/dmo
if SIZE=gpu REGIMES=heavy WORK=build/dmo-corpus CORPUS_ONLY=1 bash bench/dmo.sh >/dev/null; then
  mkdir -p "$dmo"
  cp -r build/dmo-corpus/corpus-gpu-heavy build/dmo-corpus/corpus-gpu-heavy.spec "$dmo/"
  rm -rf "$dmo/corpus-gpu-heavy/raw"
else
  echo "carry.sh: the bench-dmo corpus could not be built (apt?): lease_check.sh's dmo part will skip" >&2
fi
mkdir -p "$out"
tar -C "$stage" -cJf "$out/bundle.tar.xz" build
echo "carry.sh: $out/bundle.tar.xz ($(du -h "$out/bundle.tar.xz" | cut -f1)): ${bins[*]}, $(ls "$stage/$out/lib" | wc -l) libraries"
