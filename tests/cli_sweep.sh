#!/usr/bin/env bash
# cli_sweep.sh — a sweep's root read back: `tandem status ROOT` and `tandem results ROOT`.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_sweep.sh
#
#   - a 2 x 2 study (--sweep run.seed --sweep tandem.lr_alpha) with two points run: the
#     first point writes ROOT/SWEEP; status lists all four points (2 finished, 2 pending),
#     each finished point's alpha* equal to `tandem mixture` of its own store; a finished
#     point whose HEAD is lost is still finished (at its newest state);
#   - results: each finished point's per-domain perplexities and Average equal `tandem
#     eval` of its store (JSON, to the last digit); CSV has one row per point and domain
#     plus an Average row; --svg is well-formed with three panels and the right bars;
#   - a point stopped by SIGTERM (exit 75) is "stopped", one at work "running";
#   - another study under the same root is refused (exit 2) and SWEEP is unchanged;
#   - a bad value in any point (or an unknown key) is refused before point 0 computes,
#     naming --sweep and the point;
#   - a damaged SWEEP: status and results exit 3 naming it; a store that is not a sweep's
#     root: results exits 3 and says to use eval.
# Prints PASS/FAIL lines and "cli_sweep: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_sweep
. tests/lib_cli.sh
py=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-sweep-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }

"$bin" gen-corpus --out "$tmp/corpus" --names big,mid,small --train-tokens 20k,8k,2k \
  --val-tokens 2k --test-tokens 2k --seed 3 >/dev/null 2>&1 || { fail setup "gen-corpus"; finish; }
cat >"$tmp/c.yaml" <<EOF
run: {episodes: 6, seed: 5, threads: 1}
data: {dataset: $tmp/corpus/dataset.yaml}
model: {layers: 1, channels: 32, heads: 2, ctx: 32}
train: {batch: 6, seq: 32}
tandem: {K: 2, E: 3}
optim: {lr: 3e-3}
EOF
root=$tmp/study
study=(--sweep run.seed=1,2 --sweep tandem.lr_alpha=2e-3,4e-3)
label0='run.seed=1,tandem.lr_alpha=2e-3'
label3='run.seed=2,tandem.lr_alpha=4e-3'

ok=1
for p in 0 3; do
  "$bin" run "$tmp/c.yaml" --store "$root" "${study[@]}" --point $p --quiet 2>"$tmp/run$p.err" || { ok=0; cat "$tmp/run$p.err"; }
done
[ $ok = 1 ] && [ -f "$root/SWEEP" ] && pass "two points of a 2 x 2 study run; the root holds SWEEP" \
  || fail "two points of a 2 x 2 study run; the root holds SWEEP"

# status ROOT: four points, their states, α* as each store's own mixture says
"$bin" status "$root" --json >"$tmp/status.json" 2>"$tmp/status.err"; st=$?
for p in 0 3; do
  l=$label0; [ $p = 3 ] && l=$label3
  "$bin" mixture "$root/$l" --format json >"$tmp/mix$p.json" 2>/dev/null
done
if [ $st = 0 ] && $py - "$tmp/status.json" "$tmp/mix0.json" "$tmp/mix3.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["sweep"]
pts = s["points"]
assert [p["state"] for p in pts] == ["finished", "pending", "pending", "finished"], [p["state"] for p in pts]
assert s["counts"] == {"pending": 2, "running": 0, "stopped": 0, "finished": 2, "damaged": 0}, s["counts"]
assert pts[1]["label"] == "run.seed=1,tandem.lr_alpha=4e-3" and pts[1]["mixture"] is None
for i, f in ((0, sys.argv[2]), (3, sys.argv[3])):
    want = json.load(open(f))["mixture"]
    assert pts[i]["episode"] == 6 and pts[i]["episodes"] == 6
    assert pts[i]["mixture"] == want, (pts[i]["mixture"], want)
PY
then pass "status ROOT: 4 points (2 finished, 2 pending), alpha* as tandem mixture gives it"
else fail "status ROOT: 4 points (2 finished, 2 pending), alpha* as tandem mixture gives it" \
  "exit $st" "$(head -c 600 "$tmp/status.json")" "$(cat "$tmp/status.err")"; fi
"$bin" status "$root" >"$tmp/status.txt" 2>&1
grep -q "2 finished, 0 running, 0 stopped (run them again to resume), 2 pending" "$tmp/status.txt" \
  && grep -q "run.seed=2,tandem.lr_alpha=2e-3" "$tmp/status.txt" \
  && pass "status ROOT as a table: every point and the counts" \
  || fail "status ROOT as a table: every point and the counts" "$(cat "$tmp/status.txt")"

# a point whose HEAD is lost (or not yet written by its first commit): where a resume goes
# on from, its newest state (before: "stopped" at episode 0 for a finished point)
mv "$root/$label0/HEAD" "$tmp/HEAD0"
"$bin" status "$root" --json >"$tmp/nohead.json" 2>"$tmp/nohead.err"; st=$?
mv "$tmp/HEAD0" "$root/$label0/HEAD"
if [ $st = 0 ] && $py - "$tmp/nohead.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["sweep"]["points"][0]
assert p["state"] == "finished" and p["episode"] == 6, p
PY
then pass "status ROOT: a finished point whose HEAD is lost is finished at its newest state"
else fail "status ROOT: a finished point whose HEAD is lost is finished at its newest state" \
  "exit $st" "$(head -c 600 "$tmp/nohead.json")" "$(cat "$tmp/nohead.err")"; fi

# results: the same numbers as tandem eval of each point's store
"$bin" results "$root" --json --svg "$tmp/r.svg" >"$tmp/results.json" 2>"$tmp/results.err"; st=$?
"$bin" eval "$root/$label0" --json >"$tmp/eval0.json" 2>/dev/null
"$bin" eval "$root/$label3" --json >"$tmp/eval3.json" 2>/dev/null
if [ $st = 0 ] && $py - "$tmp/results.json" "$tmp/eval0.json" "$tmp/eval3.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
pts = r["points"]
assert r["split"] == "test" and len(pts) == 4
for i, f in ((0, sys.argv[2]), (3, sys.argv[3])):
    ev = json.load(open(f))
    assert pts[i]["average_ppl"] == ev["average_ppl"], (pts[i]["average_ppl"], ev["average_ppl"])
    for d, v in ev["domains"].items():
        assert pts[i]["domains"][d]["ppl"] == v["ppl"] and pts[i]["domains"][d]["tokens"] == v["tokens"], d
        assert 0 < pts[i]["domains"][d]["alpha"] < 1
for i in (1, 2):
    assert pts[i]["state"] == "pending" and pts[i]["domains"] is None and pts[i]["average_ppl"] is None
assert pts[0]["average_ppl"] != pts[3]["average_ppl"]
PY
then pass "results ROOT: each finished point's perplexities and Average equal tandem eval's, to the last digit"
else fail "results ROOT: each finished point's perplexities and Average equal tandem eval's" \
  "exit $st" "$(head -c 600 "$tmp/results.json")" "$(cat "$tmp/results.err")"; fi

"$bin" results "$root" --format csv --max-tokens 320 >"$tmp/r.csv" 2>"$tmp/csv.err"; st=$?
if [ $st = 0 ] && $py - "$tmp/r.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2 * 4 + 2, len(rows)
fin = [r for r in rows if r["state"] == "finished"]
assert {r["domain"] for r in fin} == {"big", "mid", "small", "Average"}
assert all(int(r["tokens"]) <= 320 for r in fin if r["domain"] != "Average")
assert all(r["label"].startswith("run.seed=") for r in rows)
PY
then pass "results --format csv: a row per finished point and domain (+ Average), --max-tokens held"
else fail "results --format csv" "exit $st" "$(head -5 "$tmp/r.csv")" "$(cat "$tmp/csv.err")"; fi

if $py - "$tmp/r.svg" <<'PY' >/dev/null 2>&1
import sys, xml.etree.ElementTree as ET
t = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
panels = [g for g in t.iter(ns + "g") if g.get("class") == "panel"]
bars = [r for r in t.iter(ns + "rect") if r.get("class") == "bar"]
assert len(panels) == 3, len(panels)
assert len(bars) == 2 * (1 + 3 + 3), len(bars)  # 2 finished points: Average, 3 ppl, 3 alpha*
PY
then pass "results --svg: three panels, 14 bars, well-formed"
else fail "results --svg: three panels, 14 bars, well-formed" "$(head -c 300 "$tmp/r.svg")"; fi

# a point at work is running; stopped by SIGTERM it is stopped (exit 75)
TANDEM_TEST_STEP_DELAY_MS=150 "$bin" run "$tmp/c.yaml" --store "$root" "${study[@]}" --point 1 --quiet \
  2>"$tmp/run1.err" &
pid=$!
seen=0
for _ in $(seq 1 200); do
  if "$bin" status "$root" --json 2>/dev/null | $py -c '
import json, sys
s = json.load(sys.stdin)["sweep"]["points"][1]["state"]
sys.exit(0 if s == "running" else 1)'; then seen=1; break; fi
  sleep 0.1
done
kill -TERM $pid 2>/dev/null
wait $pid; st=$?
state=$("$bin" status "$root" --json 2>/dev/null | $py -c 'import json,sys; print(json.load(sys.stdin)["sweep"]["points"][1]["state"])')
[ $seen = 1 ] && [ $st = 75 ] && [ "$state" = stopped ] \
  && pass "a point at work is running; after SIGTERM (exit 75) it is stopped" \
  || fail "a point at work is running; after SIGTERM (exit 75) it is stopped" "seen running $seen, exit $st, then $state" "$(tail -3 "$tmp/run1.err")"

# another study under the same root: refused, SWEEP unchanged
before=$(sha256sum <"$root/SWEEP")
"$bin" run "$tmp/c.yaml" --store "$root" --sweep run.seed=1,7 --point 1 --quiet 2>"$tmp/other.err"; st=$?
after=$(sha256sum <"$root/SWEEP")
[ $st = 2 ] && [ "$before" = "$after" ] && grep -q "holds another study" "$tmp/other.err" \
  && [ ! -e "$root/run.seed=7" ] \
  && pass "another study under the same root: exit 2, SWEEP unchanged, nothing started" \
  || fail "another study under the same root: exit 2, SWEEP unchanged, nothing started" "exit $st" "$(cat "$tmp/other.err")"

# a bad value in any point is said by the first task, before its own point computes, and
# names --sweep (the option given), not --set
"$bin" run "$tmp/c.yaml" --store "$tmp/badstudy" --sweep tandem.K=2,x --point 0 --quiet 2>"$tmp/badval.err"; st=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/badstudy" --sweep tandem.KK=2,3 --point 0 --quiet 2>"$tmp/badkey.err"; st2=$?
[ $st = 2 ] && [ $st2 = 2 ] && [ ! -e "$tmp/badstudy" ] \
  && grep -q "point 1 (tandem.K=x): --sweep tandem.K=x: expected an integer" "$tmp/badval.err" \
  && grep -q -- "--sweep tandem.KK=...: unknown key 'tandem.KK' (did you mean 'tandem.K'?)" "$tmp/badkey.err" \
  && ! grep -q -- "--set" "$tmp/badval.err" \
  && pass "a bad sweep value or key (any point): exit 2 before anything runs, naming --sweep and the point" \
  || fail "a bad sweep value or key (any point): exit 2 before anything runs, naming --sweep and the point" \
    "exit $st / $st2" "$(cat "$tmp/badval.err" "$tmp/badkey.err")"

# a misspelt --allow-change key allowed nothing and was taken silently (exit 0): refused
# before anything runs, with the key it was likely meant to be
"$bin" run "$tmp/c.yaml" --store "$tmp/badallow" --allow-change tandem.KK --quiet 2>"$tmp/badallow.err"; st=$?
[ $st = 2 ] && [ ! -e "$tmp/badallow" ] \
  && grep -q -- "--allow-change tandem.KK: unknown key 'tandem.KK' (did you mean 'tandem.K'?)" "$tmp/badallow.err" \
  && pass "an unknown --allow-change key: exit 2 before anything runs, with a suggestion" \
  || fail "an unknown --allow-change key: exit 2 before anything runs" "exit $st" "$(cat "$tmp/badallow.err")"

# data.mixture_file beside another data.mixture is not read: said (before: silently)
"$bin" run "$tmp/c.yaml" --store "$tmp/mixnote" --set data.mixture=uniform --set data.mixture_file=/nonexistent \
  --set run.episodes=1 --quiet 2>"$tmp/mixnote.err"; st=$?
[ $st = 0 ] && grep -q "data.mixture_file is set, but data.mixture is not .file.: the file is not read" "$tmp/mixnote.err" \
  && pass "data.mixture_file with data.mixture = uniform: the run says the file is not read" \
  || fail "data.mixture_file with data.mixture = uniform: a note" "exit $st" "$(cat "$tmp/mixnote.err")"

# not a sweep's root; a damaged SWEEP
"$bin" results "$root/$label0" >/dev/null 2>"$tmp/notroot.err"; st=$?
[ $st = 3 ] && grep -q "not a sweep's root" "$tmp/notroot.err" && grep -q "tandem eval" "$tmp/notroot.err" \
  && pass "results on a single run's store: exit 3, says to use tandem eval" \
  || fail "results on a single run's store: exit 3" "exit $st" "$(cat "$tmp/notroot.err")"
cp "$root/SWEEP" "$tmp/SWEEP.good"
head -c 20 "$tmp/SWEEP.good" >"$root/SWEEP"
"$bin" status "$root" >/dev/null 2>"$tmp/bad1.err"; st1=$?
"$bin" results "$root" >/dev/null 2>"$tmp/bad2.err"; st2=$?
[ $st1 = 3 ] && [ $st2 = 3 ] && grep -q "SWEEP" "$tmp/bad1.err" && grep -q "SWEEP" "$tmp/bad2.err" \
  && pass "a damaged SWEEP: status and results exit 3 naming it" \
  || fail "a damaged SWEEP: status and results exit 3 naming it" "exit $st1 / $st2" "$(cat "$tmp/bad1.err" "$tmp/bad2.err")"
cp "$tmp/SWEEP.good" "$root/SWEEP"

# stores inside stores are refused before anything is written (before: all three ran, a
# run's objects beside a study's points, which the one's verify and gc never see):
# a plain run into the study's root, a study into a run's store, a comparison into either
snap() { find "$1" | sort | md5sum; }
before_root=$(snap "$root")
out1=$("$bin" run "$tmp/c.yaml" --store "$root" --quiet 2>&1); r1=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/plain" --quiet >/dev/null 2>&1
before_plain=$(snap "$tmp/plain")
out2=$("$bin" run "$tmp/c.yaml" --store "$tmp/plain" --sweep run.seed=1,2 --point 0 --quiet 2>&1); r2=$?
out3=$("$bin" compare "$tmp/c.yaml" --store "$tmp/plain" 2>&1); r3=$?
out4=$("$bin" compare "$tmp/c.yaml" --store "$root" 2>&1); r4=$?
if [ "$r1$r2$r3$r4" = 2222 ] && grep -q "is the root of a sweep" <<<"$out1" && grep -q "holds a run (RUN)" <<<"$out2" &&
   grep -q "holds a run (RUN)" <<<"$out3" && grep -q "holds a sweep (SWEEP)" <<<"$out4" &&
   [ "$(snap "$root")" = "$before_root" ] && [ "$(snap "$tmp/plain")" = "$before_plain" ]; then
  pass "a run into a study's root, a study into a run's store, a comparison into either: exit 2, nothing written"
else fail "stores inside stores" "exits $r1 $r2 $r3 $r4" "$out1" "$out2" "$out3" "$out4"; fi

# A point's place holding what is not that point: another run's store (seed 5 where the
# label says 2) is a damaged row naming why, something that is no store too, and the
# other points still report (before: the foreign run was shown as the point, exit 0; a
# file there stopped results with no row at all); an output may not take a point's name
small=$tmp/small; sstudy=(--sweep run.seed=1,2,3)
"$bin" run "$tmp/c.yaml" --store "$small" "${sstudy[@]}" --point 0 --set run.episodes=1 --quiet >/dev/null 2>&1
"$bin" run "$tmp/c.yaml" --store "$small/run.seed=2" --set run.episodes=1 --quiet >/dev/null 2>&1
printf 'x' >"$small/run.seed=3"
out=$("$bin" results "$small" 2>&1); rs=$?
svg=$("$bin" results "$small" --svg "$small/run.seed=9" 2>&1); rsvg=$?
# ... and both commands exit 3 once the table is out (exit 0 before: a script read the
# study as healthy), --json carrying the error beside every point
sout=$("$bin" status "$small" 2>&1); ss=$?
js=$("$bin" status "$small" --json 2>/dev/null); sj=$?
jr=$("$bin" results "$small" --json 2>/dev/null); rj=$?
got=$($py -c 'import json, sys
s = json.loads(sys.argv[1]); r = json.loads(sys.argv[2])
print(s["error"]["code"], s["sweep"]["counts"]["damaged"], r["error"]["code"], len(r["points"]))' "$js" "$jr" 2>&1)
if grep -q "run.seed=2 .*holds a run whose run.seed is 5, not this point's 2" <<<"$out" &&
   grep -q "run.seed=3 .*Not a directory" <<<"$out" && grep -q "finished  run.seed=1" <<<"$out" &&
   [ $rsvg = 2 ] && [ ! -e "$small/run.seed=9" ] && [ "$rs$ss$sj$rj" = 3333 ] && [ "$got" = "3 2 3 3" ] &&
   grep -q "2 of 3 points damaged" <<<"$out" && grep -q "2 of 3 points damaged" <<<"$sout" &&
   grep -q "finished  1/1" <<<"$sout"; then
  pass "a point's place holding another run or no store: damaged rows, the others reported, exit 3; --svg on a point name refused"
else fail "points that are not the point" "results exit $rs, --svg exit $rsvg, status $ss, json $sj $rj ($got)" "$out" "$svg" "$sout"; fi

# A run and a study begun into one new root at the same moment: at most one goes on (both
# checked for the other before either wrote; before, 7 tries in 20 left RUN and SWEEP
# side by side, verify clean)
both=0
for i in 1 2 3 4 5 6 7 8; do
  rm -rf "$tmp/race"
  "$bin" run "$tmp/c.yaml" --store "$tmp/race" --sweep run.seed=1,2 --point 0 --set run.episodes=1 --quiet \
    >/dev/null 2>&1 &
  "$bin" run "$tmp/c.yaml" --store "$tmp/race" --set run.episodes=1 --quiet >/dev/null 2>&1
  wait
  [ -e "$tmp/race/RUN" ] && [ -e "$tmp/race/SWEEP" ] && both=$((both + 1))
done
if [ $both = 0 ]; then pass "a run and a study raced into one root 8 times: never both there"
else fail "a run and a study into one root at once" "$both of 8 tries left RUN and SWEEP side by side"; fi
finish
