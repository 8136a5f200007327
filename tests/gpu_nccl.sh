#!/usr/bin/env bash
# gpu_nccl.sh — the NCCL gradient path (comm/comm_nccl.cu) on a GPU machine: `make test-gpu`
# runs it after test_gpu. With one GPU, TANDEM_NCCL_ONE_RANK=1 sends a one-rank run's
# gradients through NCCL (reduce-scatter by hand, the rank-order sum kernel, the
# gather); the run must end with the same `tandem hash` as the run without NCCL, bit for
# bit. With 2+ GPUs and mpirun, a 2-rank run is also compared with the 1-rank run within
# the tolerance of tests/cli_parallel.sh (alpha 1e-6 absolute).
# Without a GPU, or a build without NCCL: SKIPPED (never counted as passed); exit 0, or 3
# with GPU_TESTS_REQUIRED=1.
set -u
cd "$(dirname "$0")/.."
bin=${TANDEM_BIN:-build/rel/tandem}
passed=0; failed=0
skip() {
  echo "GPU NCCL TESTS SKIPPED: $1 (not a pass)"
  [ "${GPU_TESTS_REQUIRED:-0}" = 1 ] && exit 3
  exit 0
}
[ -x "$bin" ] || { echo "gpu_nccl.sh: no $bin" >&2; exit 2; }
ldd "$bin" 2>/dev/null | grep -q 'libnccl' || skip "this build has no NCCL"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${ngpu:-0}" -ge 1 ] || skip "no GPU (nvidia-smi -L lists none)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" gen-corpus --out "$tmp/c" --names web,code,math --train-tokens 60k,30k,12k \
  --val-tokens 6k --test-tokens 3k --seed 5 >/dev/null || { echo "gen-corpus failed"; exit 1; }
cat >"$tmp/run.yaml" <<YAML
run: {episodes: 10, seed: 3, device: cuda, precision: bf16}
data: {dataset: $tmp/c/dataset.yaml}
model: {layers: 2, channels: 64, heads: 2, ctx: 64}
train: {batch: 6, seq: 64}
tandem: {K: 2, E: 3, lr_alpha: 0.5, alpha_cut: any}
checkpoint: {every_episodes: 2}
YAML
"$bin" run "$tmp/run.yaml" --store "$tmp/plain" --quiet && a=$("$bin" hash "$tmp/plain")
TANDEM_NCCL_ONE_RANK=1 "$bin" run "$tmp/run.yaml" --store "$tmp/nccl" --quiet && b=$("$bin" hash "$tmp/nccl")
if [ -n "${a:-}" ] && [ "${a:-}" = "${b:-}" ]; then
  passed=$((passed + 1)); echo "PASS one rank through NCCL: the same final hashes as without it"
else
  failed=$((failed + 1)); echo "FAIL one rank through NCCL vs without:"; echo "$a"; echo "${b:-}"
fi
if [ "$ngpu" -ge 2 ] && command -v mpirun >/dev/null; then
  mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" run "$tmp/run.yaml" --store "$tmp/two" --quiet
  "$bin" alpha "$tmp/plain" --format csv >"$tmp/a.csv"; "$bin" alpha "$tmp/two" --format csv >"$tmp/b.csv"
  if /usr/bin/python3 - "$tmp" <<'PY'
import csv, sys
d = sys.argv[1]
a = list(csv.DictReader(open(d + "/a.csv"))); b = list(csv.DictReader(open(d + "/b.csv")))
w = max(abs(float(x[k]) - float(y[k])) for x, y in zip(a, b) for k in ("alpha", "alpha_next"))
print(f"  2 GPUs vs 1: alpha within {w:.2e}")
sys.exit(0 if len(a) == len(b) == 30 and w <= 1e-6 else 1)
PY
  then passed=$((passed + 1)); echo "PASS 2 GPU ranks (NCCL) vs 1 rank: alpha within 1e-6"
  else failed=$((failed + 1)); echo "FAIL 2 GPU ranks vs 1 rank"; fi
else
  echo "SKIP 2 GPU ranks: needs 2 GPUs and mpirun ($ngpu GPU)"
fi
echo "gpu_nccl: $passed passed, $failed failed"
[ $failed -eq 0 ]
