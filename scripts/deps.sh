#!/usr/bin/env bash
# deps.sh — installs what tandem needs on Debian bookworm, skipping what is present.
#   scripts/deps.sh build   compiler and libraries (make, make demo)
#   scripts/deps.sh test    build + what the tests use (Debian's python3-torch, numpy; clang:
#                           every fuzz target built and run briefly, tests/run.sh)
#   scripts/deps.sh fuzz    build + clang and its libFuzzer runtime (make fuzz)
# Runs apt-get only when a package is missing; needs root for that (or sudo).
set -euo pipefail

build_pkgs=(gcc make pkg-config libc6-dev libopenblas-openmp-dev libyaml-dev libmsgpack-dev
            libssl-dev libcurl4-openssl-dev zlib1g-dev libzstd-dev libjansson-dev libsnappy-dev)
test_pkgs=(g++ openmpi-bin libopenmpi-dev python3 python3-numpy python3-torch python3-yaml curl awscli python3-botocore chromium slurm-wlm munge python3-jsonschema strace
           clang libclang-rt-14-dev)
# nodejs and npm (for the S3 test server) are installed by tests/s3/setup.sh, which also
# accepts a node/npm already on PATH (NodeSource builds conflict with Debian's npm).
fuzz_pkgs=(clang libclang-rt-14-dev python3)

want=("${build_pkgs[@]}")
case "${1:-build}" in
  build) ;;
  test) want+=("${test_pkgs[@]}") ;;
  fuzz) want+=("${fuzz_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|fuzz" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=(sudo); else
    echo "deps: missing packages ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
    exit 2
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >/dev/null
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
