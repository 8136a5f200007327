#!/usr/bin/env bash
# cli_compare.sh — `tandem compare CONFIG`: the DMO, then Uniform, Natural, α* and UniMax
# final runs on one budget, evaluated per domain.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_compare.sh
#
#   - the result (--json) holds the four final runs with finite per-domain test losses;
#     their mixtures are 1/M, the train-token shares, the DMO's α* (its mixture.mp, which
#     is also what `tandem mixture` prints) and UniMax's (data.unimax_epochs = 0.5 here, so
#     that the small domain is capped); Average = exp(mean loss); the epochs each run saw
#     of each domain add up to its budget in whole sequences; every final run
#     trained the same number of free steps with the final seed (run.seed + 1000), and each
#     store is an ordinary run (`tandem eval` of it gives the same losses);
#   - the same result as an uninterrupted compare after SIGTERMs at several moments (exit
#     75 each time, then resumed) and after a SIGKILL;
#   - --svg writes a well-formed SVG with the α panel, the bars and (--curves) the curve panel;
#   - a second compare of a finished store reports at once and changes nothing;
#   - in parts (--only dmo, then --only final per array point, as the job array of
#     `tandem manifest slurm CONFIG --compare finals` runs them): the same result;
#   - --final-seed equal to run.seed, a missing CONFIG and an unknown option: exit 2.
# Prints PASS/FAIL lines and "cli_compare: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_compare
. tests/lib_cli.sh
py=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-compare-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }

"$bin" gen-corpus --out "$tmp/corpus" --names big,mid,small --train-tokens 30k,10k,3k \
  --val-tokens 2k --test-tokens 4k --seed 4 >/dev/null 2>&1 || { fail setup "gen-corpus"; finish; }
cat >"$tmp/c.yaml" <<EOF
run: {episodes: 12, seed: 7, threads: 1}
data: {dataset: $tmp/corpus/dataset.yaml, unimax_epochs: 0.5}
model: {layers: 1, channels: 32, heads: 2, ctx: 32}
train: {batch: 5, seq: 32}
tandem: {K: 2, E: 3, alpha_cut: repeated}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 3}
EOF
# (alpha_cut: repeated, so that α* moves and the report is checked on a mixture of its own:
# under the default, overfit, nothing overfits this tiny model and α* would be the start)

# the uninterrupted reference
if "$bin" compare "$tmp/c.yaml" --store "$tmp/ref" --json --quiet --svg "$tmp/ref.svg" --curves \
     >"$tmp/ref.json" 2>"$tmp/ref.err"; then
  pass "compare ran to the end"
else
  fail "compare ran to the end" "$(cat "$tmp/ref.err")"; finish
fi

# what the result must say, checked against the stores themselves
"$bin" mixture "$tmp/ref/dmo" --out "$tmp/mix.yaml" 2>/dev/null
for r in uniform natural tandem unimax; do "$bin" eval "$tmp/ref/$r" --json >"$tmp/eval-$r.json" 2>/dev/null; done
if out=$($py - "$tmp" <<'PY' 2>&1
import json, math, re, sys
tmp = sys.argv[1]
r = json.load(open(f"{tmp}/ref.json"))
runs = r["runs"]
assert set(runs) == {"uniform", "natural", "tandem", "unimax"}, runs.keys()
doms = ["big", "mid", "small"]
tok = {"big": 30000, "mid": 10000, "small": 3000}
mix = {}
for line in open(f"{tmp}/mix.yaml"):
    m = re.match(r'\s+"(\w+)": ([0-9.eE+-]+)', line)
    if m: mix[m.group(1)] = float(m.group(2))
for d in doms:
    assert abs(runs["uniform"]["mixture"][d] - 1 / 3) < 1e-12, ("uniform", d)
    assert abs(runs["natural"]["mixture"][d] - tok[d] / 43000) < 2e-3, ("natural", d, runs["natural"]["mixture"][d])
    assert abs(runs["tandem"]["mixture"][d] - mix[d]) < 1e-12, ("alpha*", d)
# UniMax, 0.5 epochs: small gets 1500 of the 5760 tokens, big and mid share the rest
want = {"big": 2130 / 5760, "mid": 2130 / 5760, "small": 1500 / 5760}
for d in doms:
    assert abs(runs["unimax"]["mixture"][d] - want[d]) < 1e-12, ("unimax", d, runs["unimax"]["mixture"][d])
# epochs: whole sequences of 32 tokens, adding up to the budget (sample mixing)
for k, v in runs.items():
    seen = [v["epochs"][d] * tok[d] for d in doms]
    assert all(abs(x - 32 * round(x / 32)) < 1e-6 for x in seen), (k, seen)
    assert abs(sum(seen) - 36 * 5 * 32) < 1e-6, (k, seen)
assert abs(sum(runs["tandem"]["mixture"].values()) - 1) < 1e-9
assert max(abs(runs["tandem"]["mixture"][d] - 1 / 3) for d in doms) > 1e-3, "alpha* never moved"
for k, v in runs.items():
    ev = json.load(open(f"{tmp}/eval-{k}.json"))
    for d in doms:
        assert math.isfinite(v["test_loss"][d]) and v["test_loss"][d] > 0, (k, d)
        assert v["test_loss"][d] == ev["domains"][d]["loss"], (k, d, "differs from tandem eval")
    mean = sum(v["test_loss"].values()) / 3
    assert abs(v["average_ppl"] - math.exp(mean)) < 1e-9 * v["average_ppl"], k
    assert len(v["curve"]) >= 3 and v["curve"][-1]["test_loss"] == v["test_loss"], (k, "curve")
assert r["final_seed"] == 1007 and r["dmo_seed"] == 7, r
assert r["budget"]["free_steps"] == 36 and r["budget"]["tokens"] == 36 * 5 * 32, r["budget"]
assert abs(r["tandem_vs_uniform"] - runs["tandem"]["average_ppl"] / runs["uniform"]["average_ppl"]) < 1e-12
assert len(r["alpha"]) == 12, len(r["alpha"])
print("ok")
PY
); then pass "the result matches the stores (mixtures, losses, Average, seed, budget)"
else fail "the result matches the stores (mixtures, losses, Average, seed, budget)" "$out"; fi

# every final run: the same steps, the final seed, a finished ordinary run
ok=1; why=
for r in uniform natural tandem unimax; do
  h=$("$bin" hash "$tmp/ref/$r" 2>&1)
  grep -q "step done" <<<"$h" || { ok=0; why="$r: $h"; }
  "$bin" verify "$tmp/ref/$r" >/dev/null 2>&1 || { ok=0; why="$r does not verify"; }
done
[ $ok = 1 ] && pass "each final run is a finished, verified run" || fail "each final run is a finished, verified run" "$why"

if $py - "$tmp/ref.svg" <<'PY' >/dev/null 2>&1
import sys, xml.etree.ElementTree as ET
t = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
panels = [g for g in t.iter(ns + "g") if g.get("class") == "panel"]
bars = [r for r in t.iter(ns + "rect") if r.get("class") == "bar"]
assert len(panels) == 3, len(panels)
assert len(bars) == 4 * 4, len(bars)  # 4 final runs x (3 domains + Average)
PY
then pass "--svg: three panels, 16 bars, well-formed"
else fail "--svg: three panels, 16 bars, well-formed" "$($py -c "import xml.etree.ElementTree as E; E.parse('$tmp/ref.svg')" 2>&1 | tail -2)"; fi

# preempted at several moments (inside the DMO, inside each final run, during evaluation):
# exit 75 each time, and the resumed compare ends with the same numbers
"$bin" compare "$tmp/c.yaml" --store "$tmp/ref" --json --quiet --svg "$tmp/again.svg" --curves \
  >"$tmp/again.json" 2>&1
cmp -s "$tmp/ref.json" "$tmp/again.json" && pass "a finished compare reports the same result again" \
  || fail "a finished compare reports the same result again" "$(diff "$tmp/ref.json" "$tmp/again.json" | head -5)"
# the audit commands on the compare's own store name the runs inside it (exit 3, as for
# any path that holds no run), instead of "check the store URL"
out=$("$bin" status "$tmp/ref" 2>&1); st=$?
if [ $st = 3 ] && grep -q "store of a tandem compare" <<<"$out" && grep -q "dmo, uniform, natural, tandem, unimax" <<<"$out"; then
  pass "status of a compare's store: exit 3 naming the runs in it"
else fail "status of a compare's store" "exit $st" "$out"; fi
out=$("$bin" results "$tmp/ref" 2>&1); st=$?
if [ $st = 3 ] && grep -q "store of a tandem compare" <<<"$out" && grep -q "dmo, uniform, natural, tandem, unimax" <<<"$out" &&
   grep -q "tandem compare CONFIG --store $tmp/ref" <<<"$out" && ! grep -q "for one run use tandem eval" <<<"$out"; then
  pass "results of a compare's store: exit 3 naming its runs and the command whose table it is"
else fail "results of a compare's store" "exit $st" "$out"; fi

# a stop during an evaluation ends it between two batches (exit 75 at once), not after the
# model's whole test split (minutes on a large one: past a scheduler's grace, a hunt):
# frozen at its 2nd batch, TERM; a 4th batch would be killed (137). (The finished compare's
# report: it evaluates again and changes nothing.)
TANDEM_TEST_STOP_AT=eval-batch:2 TANDEM_TEST_KILL_AT=eval-batch:4 "$bin" compare "$tmp/c.yaml" \
  --store "$tmp/ref" --json --quiet >"$tmp/es.json" 2>"$tmp/es.err" &
pid=$!
for _ in $(seq 600); do [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" = T ] && break; sleep 0.05; done
kill -TERM $pid 2>/dev/null; kill -CONT $pid 2>/dev/null
wait $pid; st=$?
if [ $st = 75 ] && grep -q "stopped by a signal" "$tmp/es.json"; then
  pass "SIGTERM during an evaluation: stopped before the next batch, exit 75"
else fail "SIGTERM during an evaluation" "exit $st" "$(cat "$tmp/es.json" "$tmp/es.err" | tail -3)"; fi

strip() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('store'); [v.pop('store') for v in d['runs'].values()]; [v.pop('curve') for v in d['runs'].values()]; print(json.dumps(d, sort_keys=True))" "$1"; }
stops=0; lives=0; bad=
for delay in 0 0.4 0.8 1.2 1.6 2.0 2.4; do
  TANDEM_TEST_STEP_DELAY_MS=20 "$bin" compare "$tmp/c.yaml" --store "$tmp/pre" --json --quiet \
    >"$tmp/pre.json" 2>"$tmp/pre.err" &
  pid=$!
  wait_catches $pid
  sleep "$delay"
  kill -TERM $pid 2>/dev/null
  wait $pid; st=$?
  lives=$((lives + 1))
  if [ $st = 75 ]; then stops=$((stops + 1))
  elif [ $st != 0 ]; then bad="exit $st after ${delay}s: $(tail -3 "$tmp/pre.err")"; fi
done
# and one SIGKILL
TANDEM_TEST_STEP_DELAY_MS=20 "$bin" compare "$tmp/c.yaml" --store "$tmp/pre" --json --quiet >/dev/null 2>&1 &
pid=$!; sleep 0.5; kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
"$bin" compare "$tmp/c.yaml" --store "$tmp/pre" --json --quiet >"$tmp/pre.json" 2>"$tmp/pre.err"; st=$?
if [ -z "$bad" ] && [ $st = 0 ] && [ $stops -ge 4 ] && [ "$(strip "$tmp/ref.json")" = "$(strip "$tmp/pre.json")" ]; then
  pass "SIGTERM at $lives moments ($stops stopped with 75) and a SIGKILL, resumed: the same result"
else
  fail "SIGTERM at $lives moments ($stops stopped with 75) and a SIGKILL, resumed: the same result" \
    "${bad:-final exit $st}" "$(tail -3 "$tmp/pre.err")"
fi

# the comparison in parts, as cluster jobs run it (tandem manifest --compare dmo|finals):
# the DMO alone, then each final run as an array task finding its point in
# SLURM_ARRAY_TASK_ID, TANDEM_POINT or --point; the TANDEM final before the DMO has
# finished is refused (exit 2, nothing run); a plain compare then reports the same result
"$bin" compare "$tmp/c.yaml" --store "$tmp/parts" --only final --point 2 --quiet 2>"$tmp/p0.err"; st0=$?
"$bin" compare "$tmp/c.yaml" --store "$tmp/parts" --only dmo --quiet 2>"$tmp/p1.err"; st1=$?
SLURM_ARRAY_TASK_ID=0 "$bin" compare "$tmp/c.yaml" --store "$tmp/parts" --only final --quiet 2>>"$tmp/p1.err"; st2=$?
TANDEM_POINT=1 "$bin" compare "$tmp/c.yaml" --store "$tmp/parts" --only final --quiet 2>>"$tmp/p1.err"; st3=$?
"$bin" compare "$tmp/c.yaml" --store "$tmp/parts" --only final --point 2 --quiet 2>>"$tmp/p1.err"; st4=$?
"$bin" compare "$tmp/c.yaml" --store "$tmp/parts" --only final --point 3 --quiet 2>>"$tmp/p1.err"; st6=$?
[ -f "$tmp/parts/unimax/HEAD" ] || st6="no-unimax-run"
ls "$tmp/parts" >"$tmp/parts.ls" 2>&1
"$bin" compare "$tmp/c.yaml" --store "$tmp/parts" --json --quiet >"$tmp/parts.json" 2>>"$tmp/p1.err"; st5=$?
if [ $st0 = 2 ] && grep -q "needs the DMO run's alpha\*" "$tmp/p0.err" && [ "$st1$st2$st3$st4$st5$st6" = 000000 ] \
   && [ "$(strip "$tmp/ref.json")" = "$(strip "$tmp/parts.json")" ]; then
  pass "in parts (--only dmo, then --only final per array point): the same result"
else
  fail "in parts (--only dmo, then --only final per array point): the same result" \
    "exits $st0 $st1 $st2 $st3 $st4 $st5 $st6" "$(cat "$tmp/p0.err")" "$(tail -3 "$tmp/p1.err")"
fi
# one store, two spellings: the Slurm jobs of --compare pass a local store as file:///ABS,
# and the report is then asked for with the path given to tandem manifest (before: exit 2,
# "data.mixture_file: file:///.../dmo -> /.../dmo"); both ways round, and a run pinned
# with one spelling resumed with the other
"$bin" compare "$tmp/c.yaml" --store "file://$tmp/parts" --json --quiet >"$tmp/parts-url.json" 2>"$tmp/pu.err"; st1=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/mf" --set run.mode=fixed --set data.mixture=file --set run.episodes=2 \
  --set "data.mixture_file=file://$tmp/parts/dmo" --quiet >/dev/null 2>"$tmp/mf.err"; st2=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/mf" --set run.mode=fixed --set data.mixture=file --set run.episodes=2 \
  --set "data.mixture_file=$tmp/parts/dmo/" --quiet >/dev/null 2>>"$tmp/mf.err"; st3=$?
if [ "$st1$st2$st3" = 000 ] && [ "$(strip "$tmp/ref.json")" = "$(strip "$tmp/parts-url.json")" ]; then
  pass "one store, two spellings (PATH and file://PATH): the comparison reports; a pinned file:// mixture store resumes as a path"
else
  fail "one store, two spellings (exits $st1 $st2 $st3)" "$(cat "$tmp/pu.err")" "$(cat "$tmp/mf.err")"
fi
"$bin" manifest slurm "$tmp/c.yaml" --store "$tmp/parts" --compare finals --final-seed 1007 \
  >"$tmp/finals.sbatch" 2>/dev/null; st=$?
if [ $st = 0 ] && grep -qx -- '#SBATCH --array=0-3' "$tmp/finals.sbatch" \
   && grep -q -- '"$TANDEM" compare "$CONFIG" --store "$STORE" --only final --final-seed 1007' "$tmp/finals.sbatch" \
   && grep -qx -- '#SBATCH --job-name=tandem-c-[0-9a-f]\{6\}-finals' "$tmp/finals.sbatch" && grep -qx '#   2  tandem' "$tmp/finals.sbatch" \
   && grep -qx '#   3  unimax' "$tmp/finals.sbatch"; then
  pass "manifest --compare finals: one job array of the four final runs"
else fail "manifest --compare finals" "exit $st" "$(grep -n 'array\|compare' "$tmp/finals.sbatch" | head -5)"; fi

"$bin" compare "$tmp/c.yaml" --store "$tmp/x" --final-seed 7 >/dev/null 2>"$tmp/e1"; st1=$?
"$bin" compare >/dev/null 2>"$tmp/e2"; st2=$?
"$bin" compare "$tmp/c.yaml" --bogus >/dev/null 2>"$tmp/e3"; st3=$?
if [ $st1 = 2 ] && grep -q "seeded independently" "$tmp/e1" && [ $st2 = 2 ] && grep -q CONFIG "$tmp/e2" \
   && [ $st3 = 2 ] && grep -q -- "--bogus" "$tmp/e3" && [ ! -e "$tmp/x/dmo/HEAD" ]; then
  pass "bad usage: exit 2 naming the problem, nothing run"
else
  fail "bad usage: exit 2 naming the problem, nothing run" "$st1 $(cat "$tmp/e1")" "$st2 $(cat "$tmp/e2")" "$st3 $(cat "$tmp/e3")"
fi
# progress: without a terminal the runs' stages (each run's start and end) and no episode lines (a log gets what
# happened, not every episode); on a terminal (script gives one) the episode as one status
# line replaced in place ("\r"), and the same results
"$bin" compare "$tmp/c.yaml" --store "$tmp/plain" --set run.episodes=4 >"$tmp/plain.out" 2>"$tmp/plain.err"; st=$?
script -qec "'$bin' compare '$tmp/c.yaml' --store '$tmp/tty' --set run.episodes=4" /dev/null >"$tmp/tty.out" 2>&1
st2=$?
if [ $st = 0 ] && [ $st2 = 0 ] && ! grep -q '^episode ' "$tmp/plain.err" && grep -q 'new run' "$tmp/plain.err" \
   && [ "$(grep -c '^tandem compare: [1-5]/5 finished in ' "$tmp/plain.err")" = 5 ] \
   && grep -q $'\repisode 3/4' "$tmp/tty.out" && ! grep -q '^episode ' "$tmp/tty.out" \
   && grep -q 'Average' "$tmp/plain.out" && grep -q 'Average' "$tmp/tty.out"; then
  pass "progress: no episode lines in a log, one status line on a terminal"
else
  fail "progress: no episode lines in a log, one status line on a terminal" "exits $st $st2" \
    "$(grep -c '^episode ' "$tmp/plain.err") episode lines without a terminal" "$(tail -c 300 "$tmp/tty.out" | cat -v)"
fi

# a dataset without a test split: refused before any run trains (every run is scored on
# it; the refusal came after all five runs had trained), no store made
"$bin" gen-corpus --out "$tmp/notest" --names a,b --train-tokens 5k --val-tokens 1k --test-tokens 0 \
  --seed 5 >/dev/null 2>&1
sed "s|$tmp/corpus/dataset.yaml|$tmp/notest/dataset.yaml|" "$tmp/c.yaml" >"$tmp/notest.yaml"
out=$("$bin" compare "$tmp/notest.yaml" --store "$tmp/notest-store" 2>&1); st=$?
if [ $st = 2 ] && grep -q "no window of 33" <<<"$out" && grep -q "before the runs start" <<<"$out" && \
   [ ! -e "$tmp/notest-store" ]; then
  pass "no test split: refused before the runs (exit 2), no store"
else fail "no test split: refused before the runs" "exit $st" "$out"; fi

# tandem mixture's YAML as other tools read it: domains named on, null and 0x10 stay
# strings (unquoted, YAML 1.1 read True, None and 16), YAML's own characters in the store's
# path stay in the comment (a line break there, which could end it, is refused as a store
# URL); tandem itself reads the file back as the same mixture
"$bin" gen-corpus --out "$tmp/odd" --names on,null,0x10 --train-tokens 5k,3k,2k --val-tokens 1k \
  --test-tokens 1k --seed 5 >/dev/null 2>&1
sed "s|$tmp/corpus/dataset.yaml|$tmp/odd/dataset.yaml|; s|episodes: 12|episodes: 3|" "$tmp/c.yaml" >"$tmp/odd.yaml"
"$bin" run "$tmp/odd.yaml" --store "$tmp/odd
injected: {evil: true}" --quiet >/dev/null 2>&1; st0=$?
oddstore="$tmp/odd: {evil: true} #"
"$bin" run "$tmp/odd.yaml" --store "$oddstore" --quiet >/dev/null 2>&1; st=$?
[ $st0 = 2 ] || st="$st (a store path holding a line break: exit $st0, want 2)"
"$bin" mixture "$oddstore" --out "$tmp/odd-mix.yaml" 2>/dev/null; st2=$?
got=$($py -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print(sorted(d), sorted(d["mixture"]), round(sum(d["mixture"].values()), 9))' \
      "$tmp/odd-mix.yaml" 2>&1)
"$bin" run "$tmp/odd.yaml" --store "$tmp/odd-fixed" --set run.mode=fixed --set data.mixture=file \
  --set "data.mixture_file=$tmp/odd-mix.yaml" --quiet >/dev/null 2>&1; st3=$?
if [ $st = 0 ] && [ $st2 = 0 ] && [ $st3 = 0 ] && [ "$got" = "['mixture'] ['0x10', 'null', 'on'] 1.0" ]; then
  pass "tandem mixture's YAML: odd domain names stay strings, the store path stays in its comment"
else fail "tandem mixture's YAML read by PyYAML" "exits $st $st2 $st3" "$got" "$(cat "$tmp/odd-mix.yaml")"; fi

# the JSON document of `tandem mixture --format json` as data.mixture_file: it was refused
# ("expected one map 'mixture:' ... as tandem mixture writes"); read as the YAML is, the
# same α; a key beside 'mixture:' that no tandem writes is still refused, named
"$bin" mixture "$oddstore" --format json --out "$tmp/odd-mix.json" 2>/dev/null
"$bin" run "$tmp/odd.yaml" --store "$tmp/odd-fixed-json" --set run.mode=fixed --set data.mixture=file \
  --set "data.mixture_file=$tmp/odd-mix.json" --quiet >/dev/null 2>&1; st=$?
printf 'mixture: {on: 0.5, "null": 0.25, "0x10": 0.25}\nmixtures: 1\n' >"$tmp/odd-stray.yaml"
out=$("$bin" run "$tmp/odd.yaml" --store "$tmp/odd-stray" --set run.mode=fixed --set data.mixture=file \
  --set "data.mixture_file=$tmp/odd-stray.yaml" 2>&1); st2=$?
if [ $st = 0 ] && [ "$("$bin" hash "$tmp/odd-fixed-json" 2>&1)" = "$("$bin" hash "$tmp/odd-fixed" 2>&1)" ] && [ $st2 = 2 ] &&
   grep -q "unexpected key 'mixtures' beside 'mixture:'" <<<"$out"; then
  pass "tandem mixture --format json reads back as data.mixture_file (the YAML's run, bit for bit); a stray key is refused"
else fail "a JSON mixture as data.mixture_file" "exits $st $st2" "$out"; fi

# A diverged run's mixture as data.mixture_file: the JSON `tandem mixture` writes of it
# names the divergence and is refused (it was taken silently as a final mixture, while that
# run's store itself was refused); the store's refusal says its prefix once (it said it twice)
"$bin" run "$tmp/odd.yaml" --store "$tmp/odd-div" --set optim.lr=1e4 --quiet >/dev/null 2>&1; st=$?
"$bin" mixture "$tmp/odd-div" --format json --out "$tmp/odd-div.json" 2>/dev/null; st1=$?
out=$("$bin" run "$tmp/odd.yaml" --store "$tmp/odd-div-fixed" --set run.mode=fixed --set data.mixture=file \
  --set "data.mixture_file=$tmp/odd-div.json" 2>&1); st2=$?
out2=$("$bin" run "$tmp/odd.yaml" --store "$tmp/odd-div-fixed2" --set run.mode=fixed --set data.mixture=file \
  --set "data.mixture_file=$tmp/odd-div" 2>&1); st3=$?
if [ $st = 5 ] && [ $st1 = 0 ] && [ $st2 = 2 ] && grep -q "odd-div.json:1: 'diverged' is set" <<<"$out" &&
   [ ! -e "$tmp/odd-div-fixed/HEAD" ] && [ $st3 = 2 ] && grep -q "no finished TANDEM run" <<<"$out2" &&
   [ "$(grep -o 'data.mixture_file = ' <<<"$out2" | wc -l)" = 1 ]; then
  pass "a diverged run's mixture JSON as data.mixture_file: refused, named; a store without one: said once"
else fail "a diverged run's mixture as data.mixture_file" "exits $st $st1 $st2 $st3" "$out" "$out2"; fi

# metrics CSV columns: domains x, u_x, w_x would give loss_u_x and loss_w_x twice (a CSV
# reader kept one of each pair); then every per-domain column is <metric>:<domain>
"$bin" gen-corpus --out "$tmp/ux" --names x,u_x,w_x --train-tokens 5k,3k,2k --val-tokens 1k \
  --test-tokens 1k --seed 5 >/dev/null 2>&1
sed "s|$tmp/corpus/dataset.yaml|$tmp/ux/dataset.yaml|; s|episodes: 12|episodes: 2|" "$tmp/c.yaml" >"$tmp/ux.yaml"
"$bin" run "$tmp/ux.yaml" --store "$tmp/ux-store" --quiet >/dev/null 2>&1; st=$?
"$bin" metrics "$tmp/ux-store" --format csv >"$tmp/ux.csv" 2>"$tmp/ux.err"; st2=$?
"$bin" metrics "$tmp/ref/dmo" --format csv >"$tmp/plain.csv" 2>/dev/null
got=$($py -c 'import csv, sys
h = next(csv.reader(open(sys.argv[1]))); p = next(csv.reader(open(sys.argv[2])))
print(len(h) == len(set(h)), "loss_u:u_x" in h, "loss:u_x" in h, "loss_u_big" in p, "loss_u:big" in p)' "$tmp/ux.csv" "$tmp/plain.csv" 2>&1)
if [ $st = 0 ] && [ $st2 = 0 ] && [ "$got" = "True True True True False" ] && grep -q "<metric>:<domain>" "$tmp/ux.err"; then
  pass "metrics CSV: colliding <metric>_<domain> columns become <metric>:<domain>, said; plain names unchanged"
else fail "metrics CSV with domains x, u_x, w_x" "exits $st $st2" "$got" "$(head -c 600 "$tmp/ux.csv")"; fi

# A comparison begun from its folder with a relative --store reports from anywhere (its
# final runs pinned the DMO's path as typed: exit 2 elsewhere); a run or a study into a
# comparison's store is refused (its RUN beside the runs made the comparison refuse to
# report); --json says an error on stdout too
sed "s|episodes: 12|episodes: 2|" "$tmp/c.yaml" >"$tmp/short.yaml"
(cd "$tmp" && "$bin" compare short.yaml --store rel-cmp --quiet >/dev/null 2>&1); st=$?
(cd / && "$bin" compare "$tmp/short.yaml" --store "$tmp/rel-cmp" --json >"$tmp/rel-cmp.json" 2>"$tmp/rel-cmp.err"); st2=$?
out1=$("$bin" run "$tmp/short.yaml" --store "$tmp/rel-cmp" --quiet 2>&1); r1=$?
out2=$("$bin" run "$tmp/short.yaml" --store "$tmp/rel-cmp" --sweep run.seed=1,2 --point 0 --quiet 2>&1); r2=$?
js=$("$bin" compare "$tmp/nosuch.yaml" --store "$tmp/zz" --json 2>/dev/null); r3=$?
got=$($py -c 'import json, sys; d = json.loads(sys.argv[1]); print(d["error"]["code"])' "$js" 2>&1)
if [ $st = 0 ] && [ $st2 = 0 ] && $py -c 'import json,sys; json.load(open(sys.argv[1]))["runs"]' "$tmp/rel-cmp.json" 2>/dev/null &&
   [ "$r1$r2$r3" = 222 ] && grep -q "is the store of a tandem compare" <<<"$out1" &&
   grep -q "is the store of a tandem compare" <<<"$out2" && [ "$got" = 2 ] && [ ! -e "$tmp/rel-cmp/RUN" ]; then
  pass "a comparison reports from another folder; a run or study into its store refused; --json errors on stdout"
else fail "comparison from elsewhere, runs into it, --json errors" "exits $st $st2 $r1 $r2 $r3 ($got)" \
  "$(tail -n 3 "$tmp/rel-cmp.err")" "$out1" "$out2"; fi
# A comparison begun deep in the file system (2,400 bytes of folders) with a relative --store
# pins the DMO's whole absolute path (the folder was cut to 2,080 bytes: the final run on
# alpha* named a folder that is not there); a path that would not fit a config value at all
# is refused before the DMO runs
deep="$tmp"; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do deep="$deep/$(printf 'd%.0s' $(seq 200))"; done
mkdir -p "$deep" 2>/dev/null
(cd "$deep" && "$bin" compare "$tmp/short.yaml" --store deep-cmp --json --quiet >"$tmp/deep.json" 2>"$tmp/deep.err"); st=$?
rel=$(printf 'r%.0s' $(seq 200)); rel="$rel/$rel/$rel/$rel/$rel/$rel/$rel/$rel/$rel/cmp"
out=$(cd "$deep" && "$bin" compare "$tmp/short.yaml" --store "$rel" --quiet 2>&1); st2=$?
if [ $st = 0 ] && $py -c 'import json,sys; json.load(open(sys.argv[1]))["runs"]' "$tmp/deep.json" 2>/dev/null &&
   [ $st2 = 2 ] && grep -q "too long once made absolute" <<<"$out" && [ ! -e "$deep/${rel%%/*}" ]; then
  pass "a comparison from a deep folder pins the DMO's whole path; one too long refused before anything ran"
else fail "a comparison from a deep folder" "exits $st $st2" "$(tail -n 3 "$tmp/deep.err" | head -c 600)" \
  "$(head -c 600 <<<"$out")"; fi
finish
