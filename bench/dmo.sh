#!/usr/bin/env bash
# dmo.sh — `make bench-dmo`: TANDEM's α* against Uniform and Natural on real text, the
# paper's protocol (tandem compare) over several seeds.
#
# The corpus is real text from Debian packages (bench/realtext/build.sh: KJV prose, newlib
# C, man pages, Python, Perl POD, kernel docs), six domains whose train sizes span more
# than 20×. Per seed s, `tandem compare` runs the TANDEM DMO (run.seed = s), then three
# final models with the same token budget on Uniform, Natural and α* (seed s + 1000), and
# evaluates them per domain on the test split. The table is mean ± sd over the seeds of
# each domain's test perplexity and of Average = exp(mean per-domain loss), and TANDEM's
# Average relative to each baseline (mean of the per-seed ratios).
#
# SIZE (default cpu):
#   cpu        data-restricted, on the CPU: small domains repeat many times under Uniform
#              (their test loss stops improving or rises: the curve panel of the SVG)
#   abundant   data-abundant: every domain larger than its share of the budget, nothing
#              repeated under any of the three mixtures (TANDEM must not lose to Uniform)
#   gpu        data-restricted on a GPU (run.device=cuda, bf16): a 6-layer 384-wide model
#   smoke      a few minutes: the protocol end to end, no claim
# SEEDS (default 1,2,3), THREADS (default 0 = all cores), WORK (default: a temporary
# directory, removed; set it to keep the stores and resume an interrupted benchmark),
# SET="k=v k=v" (extra --set for every run, e.g. SET="tandem.alpha_step=pgd").
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TANDEM:-$PWD/tandem} # TANDEM=path: another build (a frozen copy while you rebuild)
[ -x "$bin" ] || { echo "bench-dmo: build tandem first (make tandem)" >&2; exit 2; }
size=${SIZE:-cpu}
seeds=${SEEDS:-1,2,3}
threads=${THREADS:-0}
py=/usr/bin/python3
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-bench-dmo-XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

# corpus: NAME=train bytes; val and test per domain
case $size in
  cpu)      train=prose=1500k,code=800k,man=200k,py=60k,perl=25k,kern=12k; val=8k; test=40k ;;
  smoke)    train=prose=300k,code=100k,man=40k,py=20k,perl=10k,kern=5k; val=4k; test=10k ;;
  abundant) train=prose=4000k,code=2000k,man=1500k,py=1000k,perl=1000k,kern=1000k; val=8k; test=40k ;;
  gpu)      train=prose=4000k,code=2400k,man=1200k,py=400k,perl=200k,kern=120k; val=20k; test=60k ;;
  *) echo "bench-dmo: SIZE=$size: use cpu, abundant, gpu or smoke" >&2; exit 2 ;;
esac
corpus=$work/corpus-$size
if [ ! -f "$corpus/dataset.yaml" ]; then
  bash bench/realtext/build.sh --out "$corpus" --train "$train" --val "$val" --test "$test" \
    >"$work/corpus-$size.log"
fi
sed -n '/^domain /,/^(docs/p' "$work/corpus-$size.log"

# the model and budget of each size (the DMO's and every final run's)
case $size in
  cpu | abundant)
    model="{layers: 3, channels: 128, heads: 4, ctx: 64}"; train_="{batch: 24, seq: 64}"
    episodes=250; lr=3e-3; device=cpu ;;
  smoke)
    model="{layers: 2, channels: 64, heads: 2, ctx: 32}"; train_="{batch: 12, seq: 32}"
    episodes=60; lr=3e-3; device=cpu ;;
  gpu)
    model="{layers: 6, channels: 384, heads: 6, ctx: 256}"; train_="{batch: 80, seq: 256}"
    episodes=300; lr=1e-3; device=cuda ;;
esac
cat >"$work/$size.yaml" <<YAML
run: {episodes: $episodes, seed: 1, device: $device, threads: $threads}
data: {dataset: $corpus/dataset.yaml}
model: $model
train: $train_
optim: {lr: $lr, lr_min: $(awk "BEGIN {print $lr / 10}"), warmup: 50}
checkpoint: {every_episodes: $((episodes / 10)), keep: 0}
YAML
extra=()
[ $device = cuda ] && extra+=(--precision bf16)
for kv in ${SET:-}; do extra+=(--set "$kv"); done

t0=$(date +%s)
IFS=, read -ra seed_list <<<"$seeds"
for s in "${seed_list[@]}"; do
  ts=$(date +%s)
  "$bin" compare "$work/$size.yaml" --store "$work/$size-s$s" --set "run.seed=$s" \
    ${extra[@]+"${extra[@]}"} --json --quiet --curves --svg "$work/$size-s$s.svg" \
    >"$work/$size-s$s.json"
  echo "seed $s: $(( $(date +%s) - ts )) s ($work/$size-s$s.svg)"
done
echo "bench-dmo SIZE=$size: ${#seed_list[@]} seed(s) in $(( $(date +%s) - t0 )) s"

$py - "$work" "$size" "$seeds" <<'PY'
import json, math, statistics as st, sys
work, size, seeds = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
res = [json.load(open(f"{work}/{size}-s{s}.json")) for s in seeds]
runs = ("uniform", "natural", "tandem")
doms = list(res[0]["runs"]["uniform"]["test_loss"])
def ms(xs):
    return f"{st.mean(xs):8.3f} ± {st.stdev(xs):.3f}" if len(xs) > 1 else f"{xs[0]:8.3f}        "
print(f"\nreal text, SIZE={size}, seeds {','.join(map(str, seeds))}: test perplexity (mean ± sd)")
print(f"  {'domain':8s} {'natural':>8s} {'alpha*':>16s} | {'Uniform':>16s} {'Natural':>16s} {'TANDEM':>16s}")
for d in doms:
    nat = res[0]["runs"]["natural"]["mixture"][d]
    a = [r["runs"]["tandem"]["mixture"][d] for r in res]
    print(f"  {d:8s} {nat:8.4f} {ms(a)} | " +
          " ".join(ms([math.exp(r["runs"][k]["test_loss"][d]) for r in res]) for k in runs))
print(f"  {'Average':8s} {'':8s} {'':16s} | " + " ".join(ms([r["runs"][k]["average_ppl"] for r in res]) for k in runs))
vu = [r["tandem_vs_uniform"] for r in res]
vn = [r["tandem_vs_natural"] for r in res]
pct = lambda xs: f"{100 * (st.mean(xs) - 1):+.2f} %" + (f" ± {100 * st.stdev(xs):.2f}" if len(xs) > 1 else "")
print(f"\nTANDEM's Average vs Uniform: {pct(vu)}, vs Natural: {pct(vn)} (negative: TANDEM better)")
rose = {}
for r in res:
    c = r["runs"]["uniform"]["curve"]
    for d in doms:
        ys = [p["test_loss"][d] for p in c]
        if len(ys) >= 3 and min(ys) < ys[-1]:
            rose[d] = rose.get(d, 0) + 1
print("Uniform's test loss rose before the end on: " +
      (", ".join(f"{d} ({n}/{len(res)} seeds)" for d, n in rose.items()) if rose else "no domain"))
PY
