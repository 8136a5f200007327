#!/usr/bin/env bash
# dmo_synth.sh — `make bench-dmo-synth`: the protocol of bench/dmo.sh on a generated corpus,
# in minutes (a smoke test of the pipeline; the claim is bench/dmo.sh's, on real text).
#
# A generated corpus where two domains are large and two are small (the small ones are
# repeated many times under uniform mixing, and barely seen under natural mixing). TANDEM
# learns α* on it; then three final models train with Uniform, Natural and α* under the
# same token budget, and each is evaluated on every domain's test split: perplexity per
# domain and Average = exp(mean of the per-domain losses), as the paper reports.
#
# Environment: EPISODES (final and DMO runs, default 100), THREADS (default 0 = all),
# LR_ALPHA (unset: the default α step; set: Algorithm 1's step with that η_α), FLOOR,
# KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/build/rel/tandem
work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-bench-dmo-XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
episodes=${EPISODES:-100}
threads=${THREADS:-0}
# the default α step (eg) unless LR_ALPHA asks for Algorithm 1's projected step
if [ -n "${LR_ALPHA:-}" ]; then step="alpha_step: pgd, lr_alpha: $LR_ALPHA"; else step="alpha_step: eg"; fi
floor=${FLOOR:-0}
# By default every domain has the same entropy (SUCCESSORS=8 per context), so that size,
# not difficulty, is what differs; SUCCESSORS=2,4,8,16 gives each its own.
names=${NAMES:-small1,big1,small2,big2}
sizes=${SIZES:-30k,1500k,8k,800k}
successors=${SUCCESSORS:-8}   # the same entropy for every domain: only the sizes differ

"$bin" gen-corpus --out "$work/corpus" --names "$names" \
  --train-tokens "$sizes" --successors "$successors" --val-tokens 8k --test-tokens 30k \
  --seed 3 >"$work/corpus.log"

common() { # the model, batch and optimiser shared by every run
  cat <<YAML
data: {dataset: $work/corpus/dataset.yaml}
model: {layers: 2, channels: 64, heads: 2, ctx: 64}
train: {batch: 16, seq: 64}
optim: {lr: 3e-3, lr_min: 3e-4, warmup: 20, schedule: cosine}
checkpoint: {every_episodes: 0}
YAML
}
{ echo "run: {episodes: $episodes, seed: 1, threads: $threads, mode: tandem}"
  echo "tandem: {K: 5, E: 5, gamma: 1.0, lr_probe: 5e-2, $step, alpha_floor: $floor}"
  common; } >"$work/dmo.yaml"
t0=$(date +%s.%N)
"$bin" run "$work/dmo.yaml" --store "$work/dmo" --quiet
t1=$(date +%s.%N)
"$bin" mixture "$work/dmo" --out "$work/mixture.yaml" >/dev/null
echo "TANDEM DMO: $episodes episodes in $(printf '%.0f' "$(echo "$t1 - $t0" | bc -l)") s; alpha* ($work/mixture.yaml):"
sed -n 's/^  /  /p' "$work/mixture.yaml"

for mix in uniform natural tandem; do
  { echo "run: {episodes: $episodes, seed: 2, threads: $threads, mode: fixed}"
    echo "tandem: {E: 5}"
    if [ "$mix" = tandem ]; then
      echo "data: {dataset: $work/corpus/dataset.yaml, mixture: file, mixture_file: $work/mixture.yaml}"
      common | grep -v '^data:'
    else
      echo "data: {dataset: $work/corpus/dataset.yaml, mixture: $mix}"
      common | grep -v '^data:'
    fi; } >"$work/final-$mix.yaml"
  "$bin" run "$work/final-$mix.yaml" --store "$work/final-$mix" --quiet
  "$bin" eval "$work/final-$mix" --json >"$work/eval-$mix.json"
done

/usr/bin/python3 - "$work" <<'PY'
import json, math, re, sys
work = sys.argv[1]
ev = {m: json.load(open(f"{work}/eval-{m}.json")) for m in ("uniform", "natural", "tandem")}
doms = list(ev["uniform"]["domains"])
tokens = {}
for line in open(f"{work}/corpus.log"):
    m = re.match(r"(\w+): train (\d+)", line)
    if m: tokens[m.group(1)] = int(m.group(2))
total = sum(tokens.values())
mix = {}
for line in open(f"{work}/mixture.yaml"):
    m = re.match(r'\s+"?(\w+)"?: ([0-9.eE+-]+)', line)
    if m: mix[m.group(1)] = float(m.group(2))
print()
print("final models, same token budget; test perplexity per domain (lower is better)")
print(f"{'domain':10s} {'natural':>8s} {'alpha*':>8s} | {'Uniform':>9s} {'Natural':>9s} {'TANDEM':>9s}")
for d in doms:
    print(f"{d:10s} {tokens[d]/total:8.4f} {mix[d]:8.4f} | " +
          " ".join(f"{math.exp(ev[m]['domains'][d]['loss']):9.3f}" for m in ("uniform", "natural", "tandem")))
print(f"{'Average':10s} {'':8s} {'':8s} | " + " ".join(f"{ev[m]['average_ppl']:9.3f}" for m in ("uniform", "natural", "tandem")))
best = min(("uniform", "natural", "tandem"), key=lambda m: ev[m]["average_ppl"])
small = [d for d in doms if d.startswith("small")]
above = all(mix[d] > tokens[d] / total for d in small)
print(f"\nlowest Average: {best}; small domains weighted above their natural share: {'yes' if above else 'no'}")
if best != "tandem":
    print("TANDEM did not win this run (reported as is; see docs/benchmarks.md for what was tried)")
PY
