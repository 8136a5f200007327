#!/usr/bin/env bash
# dmo.sh — `make bench-dmo`: TANDEM's α* against Uniform, Natural and UniMax on real text,
# in three data regimes, with the defaults, over several seeds.
#
# Each regime is a corpus of real text from Debian packages (bench/realtext/build.sh), five
# domains of very unequal sizes, and one token budget for every run; what changes is how
# often the budget repeats each domain:
#
#   abundant  every domain under 1 epoch even with Uniform (nothing repeats; the paper's
#             Proposition: Uniform is a fixed point, TANDEM must not lose to it)
#   paper     the budget ~1.3 epochs of the corpus, the small domains 4-9x under Uniform
#             (the paper's data-restricted SlimPajama setting)
#   heavy     the budget ~6 epochs of the corpus, the small domains 33-50x under Uniform
#             (repetition-heavy: Uniform overfits them, its test loss rises; Natural wins)
#
# Per regime bench/dmo/study.py runs, for each DMO seed, the TANDEM run (defaults: nothing
# of the α step is set) and one α* final run per final seed, and for each final seed the
# Uniform, Natural and UniMax final runs; every final run is evaluated per domain on the
# test split. The table: per-domain test perplexity, Average = exp(mean loss) mean ± sd,
# the ratios of seed means, the epochs each mixture gave each domain, and α*. The summary
# checks the bar: TANDEM ≤ 1.005 × the better of Uniform and Natural in every regime, and
# ≤ 0.98 × both in the paper's.
#
#   SIZE       cpu (default): a 3-layer 128-wide GPT, context 64, 250 episodes of 25 x 64
#              tokens (2.0M tokens per run), 2 lanes of 1 thread — about 25 min a regime
#              on 2 cores; gpu: 6 x 384, context 256, bf16 on a GPU (run.device=cuda);
#              smoke: a few minutes, the pipeline end to end, no claim
#   REGIMES    default "abundant paper heavy"
#   DMO_SEEDS, FINAL_SEEDS   default 1,2,3 and 1,2,3
#   LANES, THREADS           parallel runs and threads each (default 2 and 1 on the CPU)
#   WORK       keep the stores there (an interrupted bench resumes); default a temporary
#              directory, removed
#   SET="k=v k=v"  extra --set for the TANDEM runs (an ablation: SET="tandem.alpha_step=pgd")
#   EXTRA_VARIANT="NAME k=v k=v"  a second TANDEM variant beside the defaults, on the same
#              baselines (gpu/lease_check.sh's dmo part: "repeated tandem.alpha_cut=repeated")
#   PROGRESS=1 print each run's line as it ends (α* of a DMO, Average of a final run)
#   CORPUS_ONLY=1  build the regimes' corpora in WORK and stop (gpu/carry.sh carries the
#              SIZE=gpu heavy one to a GPU machine, which has no Debian archive)
#   CORPUS="TRAIN VAL TEST"  another corpus for the regimes named (a held-out check: other
#              sources, other sizes; e.g. REGIMES=heavy CORPUS="go=200k,perl=100k,py=12k,
#              man=10k,prose=8k 8k 40k"); the bar of the regime's name applies
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TANDEM:-$PWD/tandem} # TANDEM=path: another build (a frozen copy while you rebuild)
[ -x "$bin" ] || { echo "bench-dmo: build tandem first (make tandem)" >&2; exit 2; }
export TANDEM=$bin
size=${SIZE:-cpu}
regimes=${REGIMES:-abundant paper heavy}
py=/usr/bin/python3 # Debian's, not a pyenv/venv one earlier on PATH
[ -x $py ] || py=python3 # a GPU machine's own (gpu/lease_check.sh)
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-bench-dmo-XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

# the model and budget of each size (every run of every regime)
case $size in
  cpu)
    model="{layers: 3, channels: 128, heads: 4, ctx: 64}"; train_="{batch: 25, seq: 64}"
    episodes=250; lr=3e-3; device=cpu; lanes=${LANES:-2}; threads=${THREADS:-1}; scale=1 ;;
  smoke)
    model="{layers: 2, channels: 64, heads: 2, ctx: 32}"; train_="{batch: 10, seq: 32}"
    episodes=40; lr=3e-3; device=cpu; lanes=${LANES:-2}; threads=${THREADS:-1}; scale=0 ;;
  gpu)
    model="{layers: 6, channels: 384, heads: 6, ctx: 256}"; train_="{batch: 80, seq: 256}"
    episodes=300; lr=1e-3; device=cuda; lanes=${LANES:-1}; threads=${THREADS:-0}; scale=3 ;;
  *) echo "bench-dmo: SIZE=$size: use cpu, gpu or smoke" >&2; exit 2 ;;
esac

# corpus per regime and size: train bytes per domain (five sources, the small ones
# different in each regime), val and test per domain. The budget is episodes x 5 x batch
# x seq tokens: 2.0M (cpu), 12.8k (smoke), 30.7M (gpu).
corpus_of() { # REGIME -> "train val test"
  case $size:$1 in
    cpu:abundant)   echo "prose=2400k,code=1200k,man=800k,kern=500k,fortune=420k 8k 40k" ;;
    cpu:paper)      echo "prose=900k,code=400k,man=100k,kern=60k,fortune=45k 8k 40k" ;;
    cpu:heavy)      echo "code=200k,man=100k,prose=12k,kern=10k,fortune=8k 8k 40k" ;;
    smoke:abundant) echo "prose=60k,code=40k,man=30k,kern=25k,fortune=20k 4k 8k" ;;
    smoke:paper)    echo "prose=30k,code=20k,man=5k,kern=3k,fortune=2k 4k 8k" ;;
    smoke:heavy)    echo "code=4k,prose=3k,kern=1200,fortune=800,go=1000 2k 8k" ;;
    gpu:abundant)   echo "go=14000k,kern=8000k,py=7000k,code=7000k,man=6500k 40k 60k" ;;
    gpu:paper)      echo "go=12000k,kern=8000k,man=1800k,py=1000k,perl=650k 40k 60k" ;;
    gpu:heavy)      echo "go=3000k,kern=1500k,man=200k,perl=150k,fortune=120k 40k 60k" ;;
  esac
}

t0=$(date +%s)
for r in $regimes; do
  spec=${CORPUS:-$(corpus_of "$r")}
  [ -n "$spec" ] || { echo "bench-dmo: REGIMES: unknown regime '$r' (abundant, paper, heavy)" >&2; exit 2; }
  read -r train val test <<<"$spec"
  corpus=$work/corpus-$size-$r
  # a WORK kept from another corpus must not be resumed as this one
  if [ -f "$corpus/dataset.yaml" ] && { [ -n "${CORPUS:-}" ] || [ -f "$corpus.spec" ]; } &&
     [ "$(cat "$corpus.spec" 2>/dev/null)" != "$spec" ]; then
    echo "bench-dmo: $corpus was built from another corpus; use another WORK" >&2; exit 2
  fi
  if [ ! -f "$corpus/dataset.yaml" ]; then
    bash bench/realtext/build.sh --out "$corpus" --train "$train" --val "$val" --test "$test" \
      >"$work/corpus-$size-$r.log"
    echo "$spec" >"$corpus.spec"
  fi
  [ -n "${CORPUS_ONLY:-}" ] && { echo "bench-dmo: $corpus built"; continue; }
  echo "== regime $r (SIZE=$size): corpus $corpus"
  sed -n '/^domain /,/^(docs/p' "$work/corpus-$size-$r.log"
  cat >"$work/$size-$r.yaml" <<YAML
run: {episodes: $episodes, seed: 1, device: $device, threads: $threads}
data: {dataset: $corpus/dataset.yaml}
model: $model
train: $train_
optim: {lr: $lr, lr_min: $(awk "BEGIN {print $lr / 10}"), warmup: 50}
checkpoint: {every_episodes: $((episodes / 5)), keep: 2}
YAML
  [ $device = cuda ] && sed -i 's/^run: {/run: {precision: bf16, /' "$work/$size-$r.yaml"
  variant=()
  [ -n "${SET:-}${EXTRA_VARIANT:-}" ] && variant=(--variant tandem "${SET:-}")
  if [ -n "${EXTRA_VARIANT:-}" ]; then
    read -r vname vsets <<<"$EXTRA_VARIANT"
    [ "$vname" != tandem ] || { echo "bench-dmo: EXTRA_VARIANT needs a name other than tandem" >&2; exit 2; }
    variant+=(--variant "$vname" "$vsets")
  fi
  quiet() { if [ -n "${PROGRESS:-}" ]; then cat; else grep -v '^  final-\|^  dmo-'; fi; }
  tr=$(date +%s)
  $py bench/dmo/study.py --work "$work/$size-$r" --base "$work/$size-$r.yaml" \
    --dmo-seeds "${DMO_SEEDS:-1,2,3}" --final-seeds "${FINAL_SEEDS:-1,2,3}" \
    --lanes "$lanes" --threads "$threads" --curves --json "$work/$size-$r.json" \
    --title "regime $r (SIZE=$size): test perplexity, DMO seeds ${DMO_SEEDS:-1,2,3} x final seeds ${FINAL_SEEDS:-1,2,3}" \
    ${variant[@]+"${variant[@]}"} | quiet
  echo "regime $r: $(( $(date +%s) - tr )) s"
done
[ -n "${CORPUS_ONLY:-}" ] && exit 0
echo
echo "bench-dmo SIZE=$size: $(( $(date +%s) - t0 )) s in all"
extra=${EXTRA_VARIANT:-}
$py - "$work" "$size" "${extra%% *}" $regimes <<'PY'
import json, sys
work, size, extra, regimes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
print(f"\nsummary (Average test perplexity, mean over seeds; TANDEM = the defaults):")
print(f"  {'regime':9s} {'Uniform':>9s} {'Natural':>9s} {'UniMax':>9s} {'TANDEM':>9s}  {'vs best U/N':>11s} {'vs UniMax':>9s}  bar")
ok = True
for r in regimes:
    res = json.load(open(f"{work}/{size}-{r}.json"))["mixtures"]
    t = res.get("tandem")
    if not t:
        print(f"  {r:9s} (no TANDEM result)"); ok = False; continue
    u, n, x = (res[k]["average"][0] for k in ("uniform", "natural", "unimax"))
    bar = 0.98 if r == "paper" else 1.005  # the paper's regime: 2 % ahead of both
    good = t["vs_best"] <= bar
    ok &= good
    print(f"  {r:9s} {u:9.4f} {n:9.4f} {x:9.4f} {t['average'][0]:9.4f}  {t['vs_best']:11.4f} {t['vs_unimax']:9.4f}  "
          f"{'holds' if good else 'MISSED'} (<= {bar})")
    if extra and extra in res:  # the second variant, beside (not judged by the bar)
        e = res[extra]
        print(f"  {'':9s} {extra + ':':>29s} {e['average'][0]:9.4f}  {e['vs_best']:11.4f} {e['vs_unimax']:9.4f}")
print("the bar " + ("holds in every regime" if ok else "is missed somewhere (see above)"))
PY
