#!/usr/bin/env bash
# cli_caps.sh — data.max_epochs (a cap on the epochs a run's u sees of a domain) and
# data.mixture = unimax, through the tandem binary.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_caps.sh
#
#   - a fixed run (sample mixing) whose Uniform mixture would give the small domain 4x its
#     cap: every metrics row, the final state and `tandem compare`-style epochs stay within
#     the cap, and the capped domain still gets close to it (the cap binds, it is not
#     starved);
#   - a TANDEM run (weight mixing, α moving): every α record's α_{t+1} within the caps' box,
#     every row's epochs within the cap;
#   - both killed with SIGKILL at several free steps and resumed: the same final hash as the
#     uninterrupted run, and the caps held in every row of every life;
#   - unimax: the mixture of the run's state is UniMax's (computed here by hand);
#   - the cap is pinned: changing it on a run is refused (exit 2) unless --allow-change;
#   - the hold (tandem.alpha_cut = repeated): where no domain is repeated past
#     data.unimax_epochs α stays at its start in every α record (and moves with any);
#     where one is, only it falls below its start, and never below its N-epoch weight;
#     the key is pinned for a DMO and no change for a fixed run;
#   - tandem.alpha_cut = overfit (the default): α at its start in every record while no
#     domain is marked overfitted, and no twins run (no probe losses in records or rows,
#     "-" in `tandem alpha`, "alpha held its start"); a marked one (the test hook) alone
#     falls below its start, and every episode after the mark's probes;
#   - tandem.start_epochs: a DMO's UniMax start at 16 epochs by default, at data.unimax_epochs
#     with 0 (runs pinned before the key), the fixed UniMax baseline at data.unimax_epochs;
#     pinned for a DMO, no change for a fixed run; tandem.skip_pinned pinned alike;
#   - bad values (an unknown domain, caps that cannot hold the budget, a malformed list):
#     exit 2 naming the key, nothing written; caps that hold the final runs' tokens but
#     not their whole sequences: tandem compare refuses them before the DMO; a fixed
#     mixture's weight-0 domain counts for no room (refused when the others fall short) and
#     stays at 0 when the start is moved into the caps; a
#     cap below tandem.alpha_floor is refused up front, naming the domain.
# Prints PASS/FAIL lines and "cli_caps: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_caps
. tests/lib_cli.sh
py=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-caps-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }

"$bin" gen-corpus --out "$tmp/corpus" --names big,mid,small --train-tokens 30k,10k,2k \
  --val-tokens 2k --test-tokens 2k --seed 3 >/dev/null 2>&1 || { fail setup "gen-corpus"; finish; }
# budget 24 episodes x 3 free steps x 6 x 32 = 13824 tokens: Uniform would give small 4608
# tokens (2.3 epochs); the cap allows 0.6 epochs = 1200 tokens
cat >"$tmp/c.yaml" <<EOF
run: {episodes: 24, seed: 5, threads: 1}
data: {dataset: $tmp/corpus/dataset.yaml, max_epochs: "small=0.6"}
model: {layers: 1, channels: 32, heads: 2, ctx: 32}
train: {batch: 6, seq: 32}
tandem: {K: 2, E: 3, alpha_cut: any}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 4}
EOF
# (alpha_cut: any lets α move wherever the probe says; under a hold this budget would keep
# α at its start — nothing repeated past 4 epochs, nothing overfitted — and the caps' box
# would go untested)

# caps_held STORE: every metrics row's small epochs ≤ 0.6, and the last one ≥ 0.5
caps_held() {
  "$bin" metrics "$1" --format jsonl 2>/dev/null | $py -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
assert len(rows) == 24, len(rows)
worst = max(r["epochs"]["small"] for r in rows)
assert worst <= 0.6 + 1e-9, worst
assert rows[-1]["epochs"]["small"] >= 0.5, rows[-1]["epochs"]
assert all(abs(r["seen"]["small"] - 2000 * r["epochs"]["small"]) < 1e-6 for r in rows)
print("ok %.4f" % worst)'
}

for mode in fixed tandem; do
  "$bin" run "$tmp/c.yaml" --store "$tmp/$mode" --set run.mode=$mode --quiet 2>"$tmp/$mode.err"; st=$?
  got=$(caps_held "$tmp/$mode" 2>&1)
  if [ $st = 0 ] && [[ $got == ok* ]]; then
    pass "$mode run: the small domain's epochs stay within its cap in every row (${got#ok }, cap 0.6)"
  else fail "$mode run: caps held" "exit $st: $(tail -2 "$tmp/$mode.err")" "$got"; fi
done

# a TANDEM run's α records: α_{t+1} of small never above the box 1200 / 13824
got=$("$bin" alpha "$tmp/tandem" --format json 2>/dev/null | $py -c '
import json, sys
recs = json.load(sys.stdin)
hi = 1200 / 13824
worst = max(r["alpha_next"]["small"] for r in recs)
assert len(recs) == 24 and worst <= hi + 1e-12, (len(recs), worst, hi)
assert all("epochs" in r and r["epochs"]["small"] <= 0.6 + 1e-9 for r in recs)
print("ok %.5f" % worst)' 2>&1)
if [[ $got == ok* ]]; then pass "tandem run: every alpha record within the caps' box (max ${got#ok }, box 0.08681)"
else fail "tandem run: alpha within the box" "$got"; fi

# killed at free steps, resumed: the uninterrupted run's hash, caps held throughout
for mode in fixed tandem; do
  ref=$("$bin" hash "$tmp/$mode" 2>/dev/null | head -1)
  lives=0; kills=0
  for n in 7 19 31 50; do
    (TANDEM_TEST_KILL_AT=free-step:$n "$bin" run "$tmp/c.yaml" --store "$tmp/$mode-k" --set run.mode=$mode \
      --quiet >/dev/null 2>&1) 2>/dev/null; st=$?
    lives=$((lives + 1)); [ $st = 137 ] && kills=$((kills + 1))
  done
  "$bin" run "$tmp/c.yaml" --store "$tmp/$mode-k" --set run.mode=$mode --quiet >/dev/null 2>"$tmp/$mode-k.err"; st=$?
  got=$(caps_held "$tmp/$mode-k" 2>&1)
  again=$("$bin" hash "$tmp/$mode-k" 2>/dev/null | head -1)
  if [ $st = 0 ] && [ $kills -ge 3 ] && [ -n "$ref" ] && [ "$ref" = "$again" ] && [[ $got == ok* ]]; then
    pass "$mode run killed $kills times (SIGKILL) and resumed: the same hash, the cap held"
  else fail "$mode run: SIGKILL and resume" "exit $st, kills $kills" "$ref" "$again" "$got"; fi
done

# unimax: 0.5 epochs for a budget of 13824 tokens: small 1000 tokens, mid and big share
# the rest (6412 each; mid's bound 5000 binds: mid 5000, big 7824)
"$bin" run "$tmp/c.yaml" --store "$tmp/umx" --set run.mode=fixed --set data.mixture=unimax \
  --set data.unimax_epochs=0.5 --set data.max_epochs= --quiet 2>"$tmp/umx.err"; st=$?
got=$("$bin" metrics "$tmp/umx" --format jsonl 2>/dev/null | head -1 | $py -c '
import json, sys
a = json.loads(sys.stdin.readline())["alpha"]
want = {"big": 7824 / 13824, "mid": 5000 / 13824, "small": 1000 / 13824}
assert all(abs(a[d] - want[d]) < 1e-12 for d in want), a
print("ok")' 2>&1)
if [ $st = 0 ] && [ "$got" = ok ]; then pass "data.mixture = unimax trains on UniMax's mixture (0.566, 0.362, 0.072)"
else fail "unimax mixture" "exit $st $(tail -2 "$tmp/umx.err")" "$got"; fi

# the hold on repetition. Nothing repeated past 4 epochs (Uniform gives small 2.3): every α
# record keeps UniMax's start (= Uniform here) under `repeated`, and `any` moves it
for cut in repeated any; do
  "$bin" run "$tmp/c.yaml" --store "$tmp/hold-$cut" --set data.max_epochs= --set tandem.alpha_cut=$cut \
    --quiet 2>"$tmp/hold-$cut.err"; st=$?
  moved=$("$bin" alpha "$tmp/hold-$cut" --format json 2>/dev/null | $py -c '
import json, sys
recs = json.load(sys.stdin)
assert len(recs) == 24, len(recs)
print("%.3g" % max(abs(r["alpha_next"][d] - 1 / 3) for r in recs for d in r["alpha_next"]))' 2>&1)
  printf -v "moved_$cut" '%s' "$moved"; printf -v "st_$cut" '%s' "$st"
done
if [ "$st_repeated" = 0 ] && [ "$st_any" = 0 ] &&
   $py -c "import sys; sys.exit(not ($moved_repeated < 1e-12 and $moved_any > 1e-4))" 2>/dev/null; then
  pass "the hold: nothing repeated past 4 epochs, α stays at its start in all 24 records (moved $moved_repeated; $moved_any with alpha_cut any)"
else fail "the hold keeps α at its start" "exit $st_repeated/$st_any" "$moved_repeated" "$moved_any"; fi

# small repeated 4.6 times from a uniform start (1k tokens, 13824 planned): small may fall
# to its 4-epoch weight 4000/13824, big and mid never below 1/3
"$bin" gen-corpus --out "$tmp/corpus2" --names big,mid,small --train-tokens 30k,10k,1k \
  --val-tokens 2k --test-tokens 2k --seed 4 >/dev/null 2>&1
"$bin" run "$tmp/c.yaml" --store "$tmp/hold-rep" --set data.max_epochs= --set tandem.alpha_cut=repeated \
  --set data.dataset="$tmp/corpus2/dataset.yaml" --set data.mixture=uniform --set tandem.alpha_budget=8 \
  --quiet 2>"$tmp/hold-rep.err"; st=$?
got=$("$bin" alpha "$tmp/hold-rep" --format json 2>/dev/null | $py -c '
import json, sys
recs = json.load(sys.stdin)
lo = {"big": 1 / 3, "mid": 1 / 3, "small": 4000 / 13824}
assert len(recs) == 24, len(recs)
least = {d: min(r["alpha_next"][d] for r in recs) for d in lo}
assert all(least[d] >= lo[d] - 1e-12 for d in lo), least
moved = max(abs(r["alpha_next"][d] - 1 / 3) for r in recs for d in lo)
assert moved > 1e-4, moved
print("ok small %.4f big %.4f mid %.4f" % (least["small"], least["big"], least["mid"]))' 2>&1)
if [ $st = 0 ] && [[ $got == ok* ]]; then
  pass "the hold with a repeated domain: α moves, no record below its bound (least ${got#ok }; bounds 0.2894 / 0.3333)"
else fail "the hold's bounds" "exit $st: $(tail -2 "$tmp/hold-rep.err")" "$got"; fi

# tandem.alpha_cut = overfit (the default): on corpus2, where `repeated` moved α above, no
# domain is marked overfitted and every α record keeps the (uniform) start exactly, the run
# saying so; with small's validation score made to rise from episode 6 (the test hook: a
# real overfit needs a bigger model) small is marked and cut below its start, big and mid
# never below theirs
sed 's/, alpha_cut: any//' "$tmp/c.yaml" >"$tmp/c-default.yaml"
for rise in none 2:6; do
  if [ $rise = none ]; then env_rise=(); else env_rise=(TANDEM_TEST_VAL_RISE=$rise); fi
  env ${env_rise[@]+"${env_rise[@]}"} "$bin" run "$tmp/c-default.yaml" --store "$tmp/ovc-$rise" --set data.max_epochs= \
    --set data.dataset="$tmp/corpus2/dataset.yaml" --set data.mixture=uniform --set tandem.alpha_budget=8 \
    >"$tmp/ovc-$rise.out" 2>&1 || echo "exit $?" >>"$tmp/ovc-$rise.out"
done
got=$("$bin" alpha "$tmp/ovc-none" --format json 2>/dev/null | $py -c '
import json, sys
recs = json.load(sys.stdin)
assert len(recs) == 24, len(recs)
moved = max(abs(r["alpha_next"][d] - 1 / 3) for r in recs for d in r["alpha_next"])
assert moved < 1e-12, moved
# pinned: no twins ran in any episode, so no record carries the probe losses
assert not any("loss_u" in r or "loss_w" in r for r in recs), "probe losses in a pinned run"
print("ok")' 2>&1)
# the mark's episode N: episodes up to N pinned (no probe losses), every one after probes
mark=$(grep -o "episode [0-9]*: small's validation loss (smoothed) has risen" "$tmp/ovc-2:6.out" | head -1 | awk '{print $2+0}')
got2=$("$bin" alpha "$tmp/ovc-2:6" --format json 2>/dev/null | $py -c '
import json, sys
recs = json.load(sys.stdin)
assert len(recs) == 24, len(recs)
least = {d: min(r["alpha_next"][d] for r in recs) for d in ("big", "mid", "small")}
assert least["small"] < 1 / 3 - 1e-3, least
assert least["big"] >= 1 / 3 - 1e-12 and least["mid"] >= 1 / 3 - 1e-12, least
mark = int(sys.argv[1])
probed = [r["episode"] for r in recs if "loss_u" in r]
assert probed == list(range(mark + 1, 24)), (mark, probed)
print("ok small %.4f, marked at episode %d, probed from %d" % (least["small"], mark, probed[0]))' "${mark:--1}" 2>&1)
rows=$("$bin" metrics "$tmp/ovc-none" --format jsonl 2>/dev/null | $py -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
assert len(rows) == 24 and not any("loss_u" in r for r in rows) and all("val" in r for r in rows), rows[0]
print("ok")' 2>&1)
table=$("$bin" alpha "$tmp/ovc-none" 2>/dev/null | sed -n 2p)
if [ "$got" = ok ] && grep -q "holds every weight at or above its start until" "$tmp/ovc-none.out" &&
   ! grep -q "exit" "$tmp/ovc-none.out" && [[ $got2 == ok* ]] && [ "$rows" = ok ] &&
   [[ $table =~ ^\ +0\ +big\ +0\.333333\ +0\.333333\ +-\ +-\ +-\  ]] &&
   grep -q "^alpha held its start" "$tmp/ovc-none.out" && grep -q "^alpha moved" "$tmp/ovc-2:6.out" &&
   grep -q "small's validation loss (smoothed) has risen" "$tmp/ovc-2:6.out"; then
  pass "tandem.alpha_cut = overfit (default): nothing marked, α at its start in all 24 records, no twins run (no probe losses in records or rows, '-' in the table); small marked, it alone falls below its start, and every episode after the mark probes (${got2#ok })"
else fail "alpha_cut overfit" "$got" "$got2" "rows: $rows" "table: $table" "$(tail -3 "$tmp/ovc-none.out")" "$(tail -3 "$tmp/ovc-2:6.out")"; fi

# tandem.start_epochs: where a DMO starts. Uniform gives small 4.6 epochs of corpus2 over
# the 13824 planned tokens: the default (16) starts a DMO at Uniform, 0 (what a run pinned
# before the key computes: data.unimax_epochs) at UniMax's 4-epoch weight 4000/13824, and
# at 2000/13824 with data.unimax_epochs = 2, 2 at 2000/13824; a fixed run on unimax (the
# baseline) takes data.unimax_epochs (4) whatever it says
start_of() { # STORE KIND: small's weight in the first α record (dmo) or metrics row (fixed)
  if [ "$2" = dmo ]; then "$bin" alpha "$1" --format json 2>/dev/null | $py -c '
import json, sys
print("%.6f" % json.load(sys.stdin)[0]["alpha"]["small"])' 2>&1
  else "$bin" metrics "$1" --format jsonl 2>/dev/null | head -1 | $py -c '
import json, sys
print("%.6f" % json.loads(sys.stdin.readline())["alpha"]["small"])' 2>&1; fi
}
starts=""
for se in default 0 0u2 2; do
  case $se in
    default) set_se=() ;;
    0u2) set_se=(--set tandem.start_epochs=0 --set data.unimax_epochs=2) ;;
    *) set_se=(--set tandem.start_epochs=$se) ;;
  esac
  "$bin" run "$tmp/c.yaml" --store "$tmp/start-$se" --set data.max_epochs= --set tandem.alpha_cut=repeated \
    --set data.dataset="$tmp/corpus2/dataset.yaml" "${set_se[@]}" --quiet 2>"$tmp/start-$se.err" || starts+=" exit$?"
  starts+=" $(start_of "$tmp/start-$se" dmo)"
done
"$bin" run "$tmp/c.yaml" --store "$tmp/start-fixed" --set run.mode=fixed --set data.max_epochs= \
  --set data.dataset="$tmp/corpus2/dataset.yaml" --set tandem.start_epochs=2 --quiet 2>"$tmp/start-fixed.err" ||
  starts+=" exit$?"
starts+=" $(start_of "$tmp/start-fixed" fixed)"
want=" $($py -c 'print("%.6f %.6f %.6f %.6f %.6f" % (1 / 3, 4000 / 13824, 2000 / 13824, 2000 / 13824, 4000 / 13824))')"
if [ "$starts" = "$want" ]; then
  pass "tandem.start_epochs: a DMO starts at UniMax of 16 epochs (Uniform here), 0 (= data.unimax_epochs, 4 or 2) and 2 as asked; the fixed UniMax run at 4 (small:$starts)"
else fail "tandem.start_epochs sets the DMO's start, not the baseline's" "got:$starts" "want:$want" \
  "$(tail -2 "$tmp"/start-*.err)"; fi

# tandem.alpha_cut is pinned for a DMO, and no change to a fixed run (which takes no α
# step): a final run pinned before the key existed (any) resumes under today's default
"$bin" run "$tmp/c.yaml" --store "$tmp/tandem" --set tandem.alpha_cut=repeated --quiet >/dev/null 2>"$tmp/cut1.err"; st1=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/fixed" --set run.mode=fixed --set tandem.alpha_cut=repeated --quiet >/dev/null 2>"$tmp/cut2.err"; st2=$?
if [ $st1 = 2 ] && grep -q "tandem.alpha_cut: any -> repeated" "$tmp/cut1.err" && [ $st2 = 0 ] && ! grep -q alpha_cut "$tmp/cut2.err"; then
  pass "tandem.alpha_cut: a changed value refused on a DMO (exit 2 naming it), no change on a fixed run (exit 0)"
else fail "alpha_cut pinned where it matters" "DMO exit $st1: $(cat "$tmp/cut1.err")" "fixed exit $st2: $(cat "$tmp/cut2.err")"; fi
"$bin" run "$tmp/c.yaml" --store "$tmp/tandem" --set tandem.start_epochs=3 --quiet >/dev/null 2>"$tmp/se1.err"; st1=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/fixed" --set run.mode=fixed --set tandem.start_epochs=3 --quiet >/dev/null 2>"$tmp/se2.err"; st2=$?
if [ $st1 = 2 ] && grep -q "tandem.start_epochs: 16 -> 3" "$tmp/se1.err" && [ $st2 = 0 ] && ! grep -q start_epochs "$tmp/se2.err"; then
  pass "tandem.start_epochs: a changed value refused on a DMO (exit 2 naming it), no change on a fixed run (exit 0)"
else fail "start_epochs pinned where it matters" "DMO exit $st1: $(cat "$tmp/se1.err")" "fixed exit $st2: $(cat "$tmp/se2.err")"; fi
"$bin" run "$tmp/c.yaml" --store "$tmp/tandem" --set tandem.skip_pinned=false --quiet >/dev/null 2>"$tmp/sp1.err"; st1=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/fixed" --set run.mode=fixed --set tandem.skip_pinned=false --quiet >/dev/null 2>"$tmp/sp2.err"; st2=$?
if [ $st1 = 2 ] && grep -q "tandem.skip_pinned: true -> false" "$tmp/sp1.err" && [ $st2 = 0 ] && ! grep -q skip_pinned "$tmp/sp2.err"; then
  pass "tandem.skip_pinned: a changed value refused on a DMO (exit 2 naming it), no change on a fixed run (exit 0)"
else fail "skip_pinned pinned where it matters" "DMO exit $st1: $(cat "$tmp/sp1.err")" "fixed exit $st2: $(cat "$tmp/sp2.err")"; fi

# pinned: another cap on the finished run is a config change
"$bin" run "$tmp/c.yaml" --store "$tmp/fixed" --set run.mode=fixed --set data.max_epochs=small=0.9 \
  --quiet >/dev/null 2>"$tmp/pin.err"; st=$?
if [ $st = 2 ] && grep -q "data.max_epochs" "$tmp/pin.err"; then pass "a changed cap on a pinned run: exit 2 naming data.max_epochs"
else fail "changed cap refused" "exit $st: $(cat "$tmp/pin.err")"; fi

# two long caps lists differing at their end: the refusal shows where (it cut both at 60
# bytes, the same text twice)
A="big=0.9000000000000000000001,mid=0.90000000000000000000001,small=0.6000000000001"
"$bin" run "$tmp/c.yaml" --store "$tmp/long" --set run.mode=fixed --set run.episodes=2 --set "data.max_epochs=$A" \
  --quiet >/dev/null 2>&1; st1=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/long" --set run.mode=fixed --set run.episodes=2 --set "data.max_epochs=${A%1}2" \
  --quiet >/dev/null 2>"$tmp/long.err"; st2=$?
if [ $st1 = 0 ] && [ $st2 = 2 ] && grep -q "small=0.6000000000001 -> .*small=0.6000000000002" "$tmp/long.err"; then
  pass "a changed long cap list: the refusal shows both ends"
else fail "a changed long cap list" "exits $st1 $st2" "$(cat "$tmp/long.err")"; fi

# bad values: exit 2 naming the key, no store made
bad() { # NAME VALUE WANT
  "$bin" run "$tmp/c.yaml" --store "$tmp/bad" --set "data.max_epochs=$2" --quiet >/dev/null 2>"$tmp/bad.err"; st=$?
  if [ $st = 2 ] && grep -q "data.max_epochs" "$tmp/bad.err" && grep -q -- "$3" "$tmp/bad.err" && [ ! -e "$tmp/bad/HEAD" ]; then
    pass "$1: exit 2 ($(head -c 150 "$tmp/bad.err" | tr '\n' ' ')...)"
  else fail "$1" "exit $st: $(cat "$tmp/bad.err")"; fi
}
bad "a domain the dataset lacks" "tiny=2" "tiny"
bad "caps that cannot hold the budget" "*=0.1" "raise the caps"
bad "a malformed list" "small=,big=2" "NAME=EPOCHS"
bad "a domain named twice" "small=1,small=2" "twice"
bad "a cap of zero" "small=0" "above 0"
# 8064 + 5700 + 60 = 13824 tokens in decimal, 13823.999999999998 in doubles: said so (it
# read "the caps let u see 1.382e+04 tokens in all, but the run trains on 1.382e+04")
bad "caps short of the budget by rounding alone" "big=0.2688,mid=0.57,small=0.03" \
  "see 13823.999999999998 tokens in all, but the run trains on 13824 .*short only by the rounding"

# ';' between caps: a --sweep splits its values at commas, so one point's caps on two
# domains are written with ';' (two points here, each capping small and mid)
for p in 0 1; do
  "$bin" run "$tmp/c.yaml" --store "$tmp/sweep" --set run.episodes=4 --quiet \
    --sweep 'data.max_epochs=small=0.3;mid=0.2,small=0.4;mid=0.1' --point $p >/dev/null 2>"$tmp/sweep$p.err" || break
done
got=$(for l in 'small=0.3;mid=0.2' 'small=0.4;mid=0.1'; do
  "$bin" metrics "$tmp/sweep/data.max_epochs=$l" --format jsonl 2>/dev/null | tail -n 1; echo; done | $py -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
assert len(rows) == 2, rows
for r, (s, m) in zip(rows, ((0.3, 0.2), (0.4, 0.1))):
    assert r["epochs"]["small"] <= s + 1e-9 and r["epochs"]["mid"] <= m + 1e-9, r["epochs"]
print("ok")' 2>&1)
if [ "$got" = ok ] && [ "$(ls "$tmp/sweep" | grep -vc SWEEP)" = 2 ]; then
  pass "caps separated by ';' in a --sweep: two points, each within both of its caps"
else fail "caps separated by ';' in a --sweep" "$got" "$(cat "$tmp"/sweep*.err)"; fi

# a cap below tandem.alpha_floor leaves the α step no mixture: refused before anything runs,
# naming the domain (it said "domain 2", from the projection, at the first α step)
"$bin" run "$tmp/c.yaml" --store "$tmp/floor" --set tandem.alpha_floor=0.3 --quiet >/dev/null 2>"$tmp/floor.err"; st=$?
if [ $st = 2 ] && grep -q "domain 'small' may hold at most 0.0868.* of the mixture (its cap, data.max_epochs), below tandem.alpha_floor = 0.3" "$tmp/floor.err" &&
   [ ! -e "$tmp/floor/HEAD" ]; then
  pass "a cap below tandem.alpha_floor: exit 2 naming the domain, before the run"
else fail "a cap below tandem.alpha_floor" "exit $st: $(cat "$tmp/floor.err")"; fi

# a fixed run whose mixture file gives small weight 0: only big (0.6) and mid (0.4) hold
# its 432 rows of 32, and their caps, within which the file's mixture lies (8300 and 5535
# tokens: α ≤ 0.6004 and 0.4004), hold 259 + 172 = 431 whole rows, while small (uncapped)
# would take the rest. Refused before training (exit 2, naming the caps and the mixture);
# before, the sample-mixing redraw trained on small once big and mid were full.
printf 'mixture:\n  big: 0.6\n  mid: 0.4\n  small: 0\n' >"$tmp/zero.yaml"
"$bin" run "$tmp/c.yaml" --store "$tmp/zero" --set run.mode=fixed --set data.mixture=file \
  --set "data.mixture_file=$tmp/zero.yaml" --set "data.max_epochs=big=0.27666666666666667,mid=0.5535" --quiet \
  >/dev/null 2>"$tmp/zero.err"; st=$?
if [ $st = 2 ] && grep -q "data.mixture = file) gives weight 0 to small" "$tmp/zero.err" &&
   grep -q "the caps hold 431 whole sequences of train.seq = 32" "$tmp/zero.err" && [ ! -e "$tmp/zero/HEAD" ]; then
  pass "a fixed mixture's weight-0 domain holds none of the run's rows: refused before training (exit 2)"
else fail "caps with a weight-0 domain in a fixed mixture" "exit $st: $(cat "$tmp/zero.err")" \
  "$("$bin" metrics "$tmp/zero" --format csv 2>/dev/null | tail -n 1)"; fi

# a fixed run whose mixture file gives big weight 0 and small more than its cap: the start
# moved into the caps takes small's excess to mid alone (before, the projection spread it
# over big too, and the run trained on a domain its mixture leaves out)
printf 'mixture:\n  big: 0\n  mid: 0.5\n  small: 0.5\n' >"$tmp/zero2.yaml"
"$bin" run "$tmp/c.yaml" --store "$tmp/zero2" --set run.mode=fixed --set data.mixture=file \
  --set "data.mixture_file=$tmp/zero2.yaml" --quiet >/dev/null 2>"$tmp/zero2.err"; st=$?
got=$("$bin" metrics "$tmp/zero2" --format jsonl 2>/dev/null | $py -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
assert len(rows) == 24, len(rows)
assert all(r["seen"]["big"] == 0 for r in rows), [r["seen"]["big"] for r in rows]
assert rows[-1]["epochs"]["small"] <= 0.6 + 1e-9 and rows[-1]["seen"]["mid"] > 0, rows[-1]
print("ok")' 2>&1)
if [ $st = 0 ] && [ "$got" = ok ]; then
  pass "a fixed mixture's weight-0 domain stays at 0 when the start moves into the caps (big never trained on)"
else fail "a fixed mixture's weight-0 domain when the start moves into the caps" "exit $st: $(cat "$tmp/zero2.err")" "$got"; fi

# caps whose tokens hold the budget (13885 >= 13824) but not in whole sequences of 32
# (143 + 143 + 145 = 431 of the 432 rows the final runs draw under sample mixing): the DMO
# (weight mixing) takes them, and tandem compare refuses them before the DMO runs (it
# refused the first final run after the whole DMO had trained), saying the rows
caps="big=0.15356666666666667,mid=0.4607,small=2.3355"
"$bin" run "$tmp/c.yaml" --store "$tmp/rows-dmo" --set "data.max_epochs=$caps" --quiet >/dev/null 2>"$tmp/rows1.err"; st1=$?
"$bin" compare "$tmp/c.yaml" --store "$tmp/rows-cmp" --set "data.max_epochs=$caps" --quiet >/dev/null 2>"$tmp/rows2.err"; st2=$?
if [ $st1 = 0 ] && [ $st2 = 2 ] && grep -q "the caps hold 431 whole sequences of train.seq = 32" "$tmp/rows2.err" &&
   grep -q "trains on 432 (each final run" "$tmp/rows2.err" && [ ! -e "$tmp/rows-cmp/dmo" ]; then
  pass "caps that hold the tokens but not whole sequences: the DMO runs, compare refuses before it (exit 2, rows said)"
else fail "caps in whole sequences for compare's final runs" "run exit $st1, compare exit $st2" "$(cat "$tmp/rows1.err" "$tmp/rows2.err")"; fi
finish
