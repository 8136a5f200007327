#!/usr/bin/env bash
# cli_parallel.sh — data-parallel runs (comm/): several `tandem run` ranks on one store.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_parallel.sh
#
# A. The tcp transport (every build): two ranks started as a Kubernetes Indexed Job starts
#    them (JOB_COMPLETION_INDEX, TANDEM_WORLD_SIZE, TANDEM_COORDINATOR on loopback):
#   - against 1 rank on the same global batch: every α record (α_t, α_{t+1}, ℓ_u, ℓ_w) and
#     the final per-domain test losses agree within tolerance (α 1e-6 absolute, losses
#     1e-4 relative); they are not bit-identical (other float sums);
#   - two 2-rank runs give identical final hashes (the rank-order all-reduce), also when
#     rank 1 starts 2 s after rank 0;
#   - a SIGTERM that reaches one rank only: both ranks stop at the same safe point, exit
#     75, rank 0 has committed; the resumed run ends with the uninterrupted 2-rank hash;
#   - 2 ranks stopped by a signal, resumed with 1 rank: the run finishes, α within 1e-6
#     of the 1-rank run, the α chain verifies (not bit-exact: docs/distributed.md);
#   - a rank that never comes: rank 0 gives up after TANDEM_COMM_TIMEOUT_S naming it; a
#     rank SIGKILLed mid-run: the other exits at once (non-zero) naming it.
# B. MPI (builds with Open MPI: the rel build where it is installed):
#   - `mpirun -np 2` ends with the same bits as the tcp transport;
#   - chaos: one rank (chosen at random) SIGKILLed at 20 random moments, and rank 0
#     killed inside commits; mpirun ends the others; restarted each time, the run ends
#     with the uninterrupted 2-rank run's hashes, and the store verifies.
#   A build without MPI refuses an mpirun-style launch with exit 2 naming the missing MPI.
# Prints PASS/FAIL lines and "cli_parallel: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_parallel
. tests/lib_cli.sh
py=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-mpi-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }

"$bin" gen-corpus --out "$tmp/corpus" --names web,code,math --train-tokens 30k,15k,6k \
  --val-tokens 3k --test-tokens 3k --seed 5 >/dev/null 2>&1 || { fail setup "gen-corpus"; finish; }
# alpha_cut: any: α moves (under the default hold this budget would keep it at its start),
# so that the ranks' α records are compared on something that can differ
cat >"$tmp/run.yaml" <<EOF
run: {episodes: 24, seed: 3, threads: 1}
data: {dataset: $tmp/corpus/dataset.yaml}
model: {layers: 2, channels: 32, heads: 2, ctx: 32}
train: {batch: 6, seq: 32}
tandem: {K: 2, E: 3, lr_alpha: 0.5, alpha_cut: any}
optim: {lr: 3e-3}
checkpoint: {every_episodes: 2}
EOF

run1() { "$bin" run "$tmp/run.yaml" --store "$1" --quiet; }
hash_of() { "$bin" hash "$1" 2>&1; }
# ports below the kernel's ephemeral range, where no outgoing connection of this or any
# other test can hold one (a port in use is still possible: tcp2 then tries the next)
read -r eph_lo _ < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_lo=32768
[ "${eph_lo:-0}" -gt 12000 ] 2>/dev/null || eph_lo=32768
port=$((10000 + RANDOM % (eph_lo - 12000)))
port=${CLI_PARALLEL_PORT:-$port} # a range of its own beside other suites
# tcp2 STORE [VAR=value ...]: rank 0 and rank 1 as an Indexed Job's pods would be, the
# assignments for rank 1 only (TCP_DELAY_1=S starts rank 1 S seconds late; TCP_ONLY_0=1
# starts rank 0 alone; TCP_CFG_1=FILE gives rank 1 another config). Exit status: rank 0's; rank 1's in $st_1. Logs: $tmp/rank{0,1}.log
tcp2() {
  local store=$1; shift
  port=$((port + 1))
  local env0=(JOB_COMPLETION_INDEX=0 TANDEM_WORLD_SIZE=2 TANDEM_COORDINATOR=127.0.0.1:$port)
  local env1=(JOB_COMPLETION_INDEX=1 TANDEM_WORLD_SIZE=2 TANDEM_COORDINATOR=localhost:$port)
  local delay=0 only0=0 kv cfg1=$tmp/run.yaml
  for kv in "$@"; do
    case $kv in TCP_DELAY_1=*) delay=${kv#*=} ;; TCP_ONLY_0=*) only0=1 ;; TCP_CFG_1=*) cfg1=${kv#*=} ;;
                *) env1+=("$kv") ;; esac
  done
  local try st0
  for try in 1 2 3; do
    env "${env0[@]}" "$bin" run "$tmp/run.yaml" --store "$store" --quiet >"$tmp/rank0.log" 2>&1 &
    local p0=$! p1=
    if [ $only0 = 0 ]; then
      (sleep "$delay"; exec env "${env1[@]}" "$bin" run "$cfg1" --store "$store" --quiet) >"$tmp/rank1.log" 2>&1 &
      p1=$!
    fi
    wait $p0; st0=$?
    st_1=-1
    if [ $st0 -ne 0 ] && grep -q "cannot listen on port" "$tmp/rank0.log"; then
      # the port is taken by another process: rank 1 would wait for its timeout
      [ -n "$p1" ] && { kill $p1 2>/dev/null; wait $p1 2>/dev/null; }
      port=$((port + 1))
      env0=(JOB_COMPLETION_INDEX=0 TANDEM_WORLD_SIZE=2 TANDEM_COORDINATOR=127.0.0.1:$port)
      env1=("${env1[@]/#TANDEM_COORDINATOR=*/TANDEM_COORDINATOR=localhost:$port}")
      continue
    fi
    if [ -n "$p1" ]; then wait $p1; st_1=$?; fi
    break
  done
  return $st0
}

# --- A. tcp: 1 rank vs 2 ranks
run1 "$tmp/one"; st1=$?
tcp2 "$tmp/two"; st2=$?
if [ $st1 -ne 0 ] || [ $st2 -ne 0 ] || [ $st_1 -ne 0 ]; then
  fail "1-rank and 2-rank (tcp) runs" "exit $st1 / $st2 / $st_1" "$(tail -5 "$tmp/rank0.log")" "$(tail -5 "$tmp/rank1.log")"; finish
fi
"$bin" alpha "$tmp/one" --format csv >"$tmp/one.csv" && "$bin" alpha "$tmp/two" --format csv >"$tmp/two.csv"
"$bin" eval "$tmp/one" >"$tmp/one.eval" 2>&1 && "$bin" eval "$tmp/two" >"$tmp/two.eval" 2>&1
cmp_out=$("$py" - "$tmp" <<'PYEOF'
import csv, sys
d = sys.argv[1]
a = list(csv.DictReader(open(d + "/one.csv"))); b = list(csv.DictReader(open(d + "/two.csv")))
assert len(a) == len(b) == 72, (len(a), len(b))
worst_a = max(abs(float(x[k]) - float(y[k])) for x, y in zip(a, b) for k in ("alpha", "alpha_next"))
worst_l = max(abs(float(x[k]) - float(y[k])) / abs(float(x[k])) for x, y in zip(a, b) for k in ("loss_u", "loss_w"))
def losses(p):
    out = {}
    for line in open(p):
        f = line.split()
        if len(f) == 4 and f[0] in ("web", "code", "math"): out[f[0]] = float(f[2])
    return out
la, lb = losses(d + "/one.eval"), losses(d + "/two.eval")
assert len(la) == 3 and la.keys() == lb.keys(), (la, lb)
worst_e = max(abs(la[k] - lb[k]) / la[k] for k in la)
print(f"{worst_a:.2e} {worst_l:.2e} {worst_e:.2e}")
sys.exit(0 if worst_a <= 1e-6 and worst_l <= 1e-4 and worst_e <= 1e-4 else 1)
PYEOF
); st=$?
read -r wa wl we <<<"$cmp_out"
if [ $st -eq 0 ]; then
  pass "2 ranks (tcp) vs 1 rank, same global batch: alpha within $wa (<= 1e-6), probe losses within $wl, test losses within $we (<= 1e-4 relative)"
else
  fail "2 ranks vs 1 rank differ beyond tolerance" "$cmp_out"
fi
# --- A2. the default hold: α pinned at its start, no twins on either rank (the pinned probe
# scores u across both ranks' rows); the ranks agree on α, on the absence of probe
# losses and on u
cp "$tmp/run.yaml" "$tmp/run-any.yaml"
sed -i 's/, alpha_cut: any//' "$tmp/run.yaml"
run1 "$tmp/pin-one"; st1=$?
tcp2 "$tmp/pin-two"; st2=$?
cp "$tmp/run-any.yaml" "$tmp/run.yaml"
"$bin" alpha "$tmp/pin-one" --format csv >"$tmp/pin-one.csv" 2>/dev/null
"$bin" alpha "$tmp/pin-two" --format csv >"$tmp/pin-two.csv" 2>/dev/null
"$bin" eval "$tmp/pin-one" >"$tmp/pin-one.eval" 2>&1; "$bin" eval "$tmp/pin-two" >"$tmp/pin-two.eval" 2>&1
pin_out=$("$py" - "$tmp" <<'PYEOF'
import csv, sys
d = sys.argv[1]
a = list(csv.DictReader(open(d + "/pin-one.csv"))); b = list(csv.DictReader(open(d + "/pin-two.csv")))
assert len(a) == len(b) == 72, (len(a), len(b))
assert all(r["loss_u"] == "" and r["loss_w"] == "" for r in a + b), "probe losses in a pinned run"
assert all(x["alpha_next"] == y["alpha_next"] for x, y in zip(a, b)), "alpha differs"
def losses(p):
    return {f[0]: float(f[2]) for f in (l.split() for l in open(p)) if len(f) == 4 and f[0] in ("web", "code", "math")}
la, lb = losses(d + "/pin-one.eval"), losses(d + "/pin-two.eval")
assert len(la) == 3 and la.keys() == lb.keys(), (la, lb)
worst = max(abs(la[k] - lb[k]) / la[k] for k in la)
print(f"{worst:.2e}")
sys.exit(0 if worst <= 1e-4 else 1)
PYEOF
); st=$?
if [ $st1 -eq 0 ] && [ $st2 -eq 0 ] && [ $st -eq 0 ]; then
  pass "the default hold on 2 ranks (tcp) vs 1: α pinned alike, no probe losses on either, test losses within $pin_out (<= 1e-4 relative)"
else
  fail "pinned α on 2 ranks" "exit $st1 / $st2: $pin_out" "$(tail -3 "$tmp/rank0.log")" "$(tail -3 "$tmp/rank1.log")"
fi
ref=$(hash_of "$tmp/two")
tcp2 "$tmp/two-again" TCP_DELAY_1=2
if [ "$(hash_of "$tmp/two-again")" = "$ref" ]; then pass "two 2-rank runs (the second with rank 1 started 2 s late): identical final hashes"
else fail "two 2-rank runs ended with different hashes" "$(tail -3 "$tmp/rank0.log")" "$(tail -3 "$tmp/rank1.log")"; fi

# --- a signal to one rank stops both at the same safe point
tcp2 "$tmp/sig" TANDEM_TEST_SIGNAL_AT=free:20; st=$?
status=$("$bin" status "$tmp/sig" 2>&1)
if [ $st -eq 75 ] && [ $st_1 -eq 75 ] && grep -q 'at risk   0 steps' <<<"$status"; then
  tcp2 "$tmp/sig"; st=$?
  if [ $st -eq 0 ] && [ "$(hash_of "$tmp/sig")" = "$ref" ]; then
    pass "SIGTERM to rank 1 only: both ranks exit 75 with the state committed; resumed: the uninterrupted hashes"
  else
    fail "resume after a one-rank SIGTERM: exit $st" "$(tail -5 "$tmp/rank0.log")"
  fi
else
  fail "SIGTERM to rank 1 only: exits $st / $st_1 (want 75 / 75)" "$status" "$(tail -5 "$tmp/rank0.log")"
fi

# --- a different world size on resume: 2 ranks stop (exit 75), 1 rank finishes
tcp2 "$tmp/ws" TANDEM_TEST_SIGNAL_AT=free:20; st=$?
run1 "$tmp/ws" 2>"$tmp/ws.log"; st1=$?
"$bin" alpha "$tmp/ws" --format csv >"$tmp/ws.csv" 2>/dev/null
w=$("$py" - "$tmp" <<'PYEOF'
import csv, sys
d = sys.argv[1]
a = list(csv.DictReader(open(d + "/one.csv"))); b = list(csv.DictReader(open(d + "/ws.csv")))
w = max(abs(float(x[k]) - float(y[k])) for x, y in zip(a, b) for k in ("alpha", "alpha_next")) if len(a) == len(b) else 1
print(f"{w:.2e}")
sys.exit(0 if len(a) == len(b) == 72 and w <= 1e-6 else 1)
PYEOF
); cmp_st=$?
if [ $st -eq 75 ] && [ $st1 -eq 0 ] && [ $cmp_st -eq 0 ] && "$bin" alpha "$tmp/ws" --verify >/dev/null 2>&1; then
  pass "2 ranks stopped, resumed on 1 rank (global batch unchanged): finishes, alpha within $w of the 1-rank run, chain verifies"
else
  fail "world size 2 -> 1: exits $st / $st1, alpha diff $w" "$(tail -3 "$tmp/ws.log")"
fi

# --- a rank that never comes, a rank that dies
t0=$(date +%s)
TANDEM_COMM_TIMEOUT_S=2 tcp2 "$tmp/alone" TCP_ONLY_0=1; st=$?
el=$(($(date +%s) - t0))
if [ $st -ne 0 ] && [ $st -ne 75 ] && [ $el -lt 30 ] && grep -q 'rank(s) 1 of 2 did not connect' "$tmp/rank0.log" && [ ! -e "$tmp/alone/HEAD" ]; then
  pass "a rank that never comes: rank 0 gives up after TANDEM_COMM_TIMEOUT_S (exit $st, $el s), naming it, nothing committed"
else
  fail "a rank that never comes: exit $st after $el s" "$(tail -3 "$tmp/rank0.log")"
fi
tcp2 "$tmp/dies" TANDEM_TEST_KILL_AT=free-step:10; st=$?
if [ $st -ne 0 ] && [ $st -ne 75 ] && [ $st_1 -eq 137 ] && grep -q 'rank 1 closed the connection' "$tmp/rank0.log"; then
  pass "a rank SIGKILLed mid-run: rank 0 stops at once (exit $st) naming it"
else
  fail "a rank SIGKILLed mid-run: rank 0 exit $st, rank 1 exit $st_1" "$(tail -3 "$tmp/rank0.log")"
fi

# --- ranks that run different runs: refused before anything is computed (they finished
# with bits that neither config gives, exit 0)
"$bin" gen-corpus --out "$tmp/corpus2" --names web,code,math --train-tokens 30k,15k,6k \
  --val-tokens 3k --test-tokens 3k --seed 6 >/dev/null 2>&1 || fail setup "gen-corpus (seed 6)"
sed 's/lr: 3e-3/lr: 3e-2/' "$tmp/run.yaml" >"$tmp/lr.yaml"
sed 's/threads: 1/threads: 2/' "$tmp/run.yaml" >"$tmp/threads.yaml"
sed "s#$tmp/corpus/#$tmp/corpus2/#" "$tmp/run.yaml" >"$tmp/data2.yaml"
for v in "lr optim.lr" "threads run.threads" "data2 the train tokens of domain web"; do
  f=${v%% *}; key=${v#* }
  TANDEM_COMM_TIMEOUT_S=60 tcp2 "$tmp/mix-$f" TCP_CFG_1="$tmp/$f.yaml"; st=$?
  if [ $st -eq 2 ] && [ $st_1 -eq 2 ] && [ ! -e "$tmp/mix-$f/HEAD" ] \
     && grep -q "rank 1's config or dataset differs from rank 0's (.*$key" "$tmp/rank1.log" \
     && grep -q "rank 1 of 2 has another config or dataset than rank 0" "$tmp/rank0.log" \
     && [ "$(grep -c . "$tmp/rank1.log")" = 1 ]; then
    pass "rank 1 started with another $key: both ranks exit 2 before any step, rank 1 names the key"
  else
    fail "rank 1 with another $key: exits $st / $st_1 (want 2 / 2)" "$(cat "$tmp/rank0.log")" "$(cat "$tmp/rank1.log")"
  fi
done

# --- two runs given the same coordinator port: rank 0 turns the other run's rank away (it
# exits 2 naming the port) and waits for its own (they swapped ranks: both exit 0 with
# bits no config gives)
JOB_COMPLETION_INDEX=1 TANDEM_WORLD_SIZE=2 TANDEM_COORDINATOR=127.0.0.1:$((port + 1)) TANDEM_COMM_TIMEOUT_S=60 \
  "$bin" run "$tmp/run.yaml" --store "$tmp/other-run" --quiet >"$tmp/stranger.log" 2>&1 &
stranger=$!
TANDEM_COMM_TIMEOUT_S=60 tcp2 "$tmp/shared-port" TCP_DELAY_1=6; st=$?
wait $stranger; st_s=$?
if [ $st -eq 0 ] && [ $st_1 -eq 0 ] && [ $st_s -eq 2 ] && [ "$(hash_of "$tmp/shared-port")" = "$ref" ] \
   && grep -q "is rank 0 of another run" "$tmp/stranger.log" && [ ! -e "$tmp/other-run/HEAD" ]; then
  pass "another run's rank 1 on the same port: turned away (exit 2, naming it); the run ends with its own rank 1, the uninterrupted hashes"
else
  fail "another run's rank on the same port: exits $st / $st_1, stranger $st_s (want 0 / 0 / 2)" "$(cat "$tmp/stranger.log")" "$(tail -3 "$tmp/rank0.log")"
fi

# --- a rank that leaves after its hello and comes back (a drained node: its pod exits, the
# Job starts the index again) while another rank is still to come: rank 0 said "that rank
# is already here" and exited 2 (FailJob for a Kubernetes Job). It takes the new one now.
port=$((port + 1))
r3() { JOB_COMPLETION_INDEX=$1 TANDEM_WORLD_SIZE=3 TANDEM_COORDINATOR=127.0.0.1:$port TANDEM_COMM_TIMEOUT_S=60 \
  exec "$bin" run "$tmp/run.yaml" --store "$tmp/replaced" --quiet; } # exec: $! is tandem's pid
r3 0 >"$tmp/r0.log" 2>&1 & p0=$!
sleep 1; r3 1 >"$tmp/r1a.log" 2>&1 & p1=$!
sleep 3; kill -KILL $p1; wait $p1 2>/dev/null
r3 1 >"$tmp/r1.log" 2>&1 & p1=$!
sleep 1; (r3 2) >"$tmp/r2.log" 2>&1; st2=$?
wait $p1; st1=$?; wait $p0; st0=$?
if [ $st0 -eq 0 ] && [ $st1 -eq 0 ] && [ $st2 -eq 0 ] && "$bin" verify "$tmp/replaced" >/dev/null 2>&1; then
  pass "a rank that left after its hello and came back: rank 0 takes the new one, the 3-rank run finishes"
else
  fail "a rank replaced during the rendezvous: exits $st0 / $st1 / $st2 (want 0 / 0 / 0)" "$(tail -3 "$tmp/r0.log")" "$(tail -3 "$tmp/r1.log")"
fi

# --- a stop signal while the ranks gather: exit 75 at once, not after TANDEM_COMM_TIMEOUT_S
for who in 0 1; do
  port=$((port + 1))
  JOB_COMPLETION_INDEX=$who TANDEM_WORLD_SIZE=2 TANDEM_COORDINATOR=127.0.0.1:$port TANDEM_COMM_TIMEOUT_S=60 \
    "$bin" run "$tmp/run.yaml" --store "$tmp/rdv$who" --quiet >"$tmp/rdv.log" 2>&1 &
  p=$!
  sleep 2; kill -TERM $p; t0=$(date +%s%N); wait $p; st=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ $st -eq 75 ] && [ $ms -lt 5000 ]; then
    pass "SIGTERM to rank $who while it waits for the other rank: exit 75 after $ms ms"
  else
    fail "SIGTERM to rank $who during the rendezvous: exit $st after $ms ms (want 75 within 5 s)" "$(cat "$tmp/rdv.log")"
  fi
done

# --- rank 1 killed (its grace ran out) while rank 0 makes the stop commit: rank 0's stop
# holds, exit 75 (it was 1: the last barrier's failure overrode the requeue)
tcp2 "$tmp/stopkill" TANDEM_TEST_SIGNAL_AT=free:20 TANDEM_TEST_KILL_AT=close:1; st=$?
if [ $st -eq 75 ] && [ $st_1 -eq 137 ] && "$bin" status "$tmp/stopkill" 2>&1 | grep -q 'at risk   0 steps' \
   && grep -q "this rank's stop stands" "$tmp/rank0.log"; then
  pass "rank 1 killed after the agreed stop, before the last barrier: rank 0 exits 75 with its commit, saying so"
else
  fail "rank 1 killed at the stop: rank 0 exit $st, rank 1 exit $st_1 (want 75 / 137)" "$(cat "$tmp/rank0.log")"
fi

# --- silent connections to the coordinator port (half-open probes) do not hold the real
# rank back: hellos are read side by side (they were read one at a time, 10 s each: three
# outlasted a 15 s TANDEM_COMM_TIMEOUT_S and rank 0 blamed rank 1)
( for i in $(seq 50); do exec 7<>/dev/tcp/127.0.0.1/$((port + 1)) && break; sleep 0.1; done 2>/dev/null
  exec 8<>/dev/tcp/127.0.0.1/$((port + 1)) 9<>/dev/tcp/127.0.0.1/$((port + 1)); sleep 40 ) &
silent=$!
TANDEM_COMM_TIMEOUT_S=15 tcp2 "$tmp/silent" TCP_DELAY_1=3; st=$?
kill $silent 2>/dev/null; wait $silent 2>/dev/null
if [ $st -eq 0 ] && [ $st_1 -eq 0 ] && [ "$(hash_of "$tmp/silent")" = "$ref" ]; then
  pass "3 silent connections to rank 0's port before rank 1: the run goes on (the uninterrupted hashes)"
else
  fail "3 silent connections before rank 1: exits $st / $st_1 (want 0 / 0)" "$(cat "$tmp/rank0.log")" "$(cat "$tmp/rank1.log")"
fi

# --- environments that name no sensible rank or coordinator: exit 2 naming the variable
envcase() { # envcase WHAT WANT-IN-MESSAGE VAR=value...
  local what=$1 want=$2; shift 2
  out=$(env "$@" TANDEM_COMM_TIMEOUT_S=3 timeout 60 "$bin" run "$tmp/run.yaml" --store "$tmp/env" --quiet 2>&1 </dev/null); st=$?
  if [ $st -eq 2 ] && grep -q "$want" <<<"$out" && [ ! -e "$tmp/env/RUN" ]; then pass "$what: exit 2 naming it"
  else fail "$what: exit $st (want 2)" "$out"; fi
}
envcase "TANDEM_COORDINATOR port 105537" "TANDEM_COORDINATOR = '127.0.0.1:105537': the port" \
  JOB_COMPLETION_INDEX=0 TANDEM_WORLD_SIZE=2 TANDEM_COORDINATOR=127.0.0.1:105537
envcase "TANDEM_COORDINATOR port 0" "TANDEM_COORDINATOR = '127.0.0.1:0': the port" \
  JOB_COMPLETION_INDEX=0 TANDEM_WORLD_SIZE=2 TANDEM_COORDINATOR=127.0.0.1:0
envcase "JOB_COMPLETION_INDEX 1 of TANDEM_WORLD_SIZE 1" "JOB_COMPLETION_INDEX = 1 but TANDEM_WORLD_SIZE = 1" \
  JOB_COMPLETION_INDEX=1 TANDEM_WORLD_SIZE=1
envcase "TANDEM_WORLD_SIZE 0" "TANDEM_WORLD_SIZE = 0" JOB_COMPLETION_INDEX=5 TANDEM_WORLD_SIZE=0

# --- B. MPI
has_mpi=1
ldd "$bin" 2>/dev/null | grep -q 'libmpi\.so' || has_mpi=0
if [ $has_mpi = 0 ]; then
  out=$(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1 \
        timeout 20 "$bin" run "$tmp/run.yaml" --store "$tmp/nompi" --quiet 2>&1 </dev/null); st=$?
  if [ $st -eq 2 ] && grep -q 'built without MPI' <<<"$out" && [ ! -e "$tmp/nompi/RUN" ]; then
    pass "a build without MPI refuses an mpirun launch (exit 2, nothing written)"
  else
    fail "a build without MPI: exit $st" "$out"
  fi
  echo "(this build has no MPI: the mpirun cases run with the rel build)"
  finish
fi
command -v mpirun >/dev/null || { fail setup "the build has MPI but mpirun is missing (scripts/deps.sh test)"; finish; }
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
[ "$(id -u)" = 0 ] || mpi=(mpirun --oversubscribe -np 2)
run2() { "${mpi[@]}" "$bin" run "$tmp/run.yaml" --store "$1" --quiet >"$tmp/mpirun.log" 2>&1; }
if run2 "$tmp/mpi" && [ "$(hash_of "$tmp/mpi")" = "$ref" ]; then
  pass "mpirun -np 2: the same final hashes as the tcp transport (the same additions in the same order)"
else
  fail "mpirun -np 2 vs tcp" "$(hash_of "$tmp/mpi")" "$ref" "$(tail -5 "$tmp/mpirun.log")"
fi

# --- ranks with different configs under mpirun (rank 1 another tandem.K: it crashed inside
# an all-reduce of another size, or hung): both refuse, exit 2, before any step
sed 's/K: 2,/K: 3,/' "$tmp/run.yaml" >"$tmp/k3.yaml"
timeout 120 "${mpi[@]:0:${#mpi[@]}-2}" -np 1 "$bin" run "$tmp/run.yaml" --store "$tmp/mpimix" --quiet : \
  -np 1 "$bin" run "$tmp/k3.yaml" --store "$tmp/mpimix" --quiet >"$tmp/mpimix.log" 2>&1; st=$?
if [ $st -eq 2 ] && grep -q "rank 1's config or dataset differs from rank 0's (tandem.K)" "$tmp/mpimix.log" \
   && [ ! -e "$tmp/mpimix/HEAD" ]; then
  pass "mpirun, rank 1 with another tandem.K: exit 2 naming rank 1 and the key, nothing committed"
else
  fail "mpirun with different configs: exit $st (want 2)" "$(tail -8 "$tmp/mpimix.log")"
fi

# --- a divergence under mpirun (optim.lr 1e30): every rank diverges at once; rank 1 aborted
# at once and MPI_Abort ended rank 0 inside its write of diverged.mp (no record, the lease
# held; the write slowed 1.5 s here, as on S3). Rank 1 now waits until rank 0 has recorded
# it: exit 5, status says diverged
TANDEM_TEST_DIVERGED_DELAY_MS=1500 timeout 120 "${mpi[@]}" -x TANDEM_TEST_DIVERGED_DELAY_MS "$bin" run "$tmp/run.yaml" --store "$tmp/mpidiv" --set optim.lr=1e30 --quiet \
  >"$tmp/mpidiv.log" 2>&1; st=$?
out=$("$bin" status "$tmp/mpidiv" 2>&1)
if [ $st -eq 5 ] && [ -e "$tmp/mpidiv/diverged.mp" ] && grep -q "^diverged *YES" <<<"$out" && ! grep -qi "stale" <<<"$out"; then
  pass "mpirun, a run that diverges: exit 5, diverged.mp written, status says so, the lease given back"
else
  fail "mpirun, a divergence: exit $st (want 5)" "$(tail -5 "$tmp/mpidiv.log")" "$out"
fi

# --- chaos: SIGKILL of one rank at random moments, restart of all
t0=$(date +%s%N); TANDEM_TEST_STEP_DELAY_MS=40 run2 "$tmp/slow"; t1=$(date +%s%N)
run2 "$tmp/slow"; t2=$(date +%s%N)   # finished already: the launch cost alone
start_ms=$(( (t2 - t1) / 1000000 )); ref_ms=$(( (t1 - t0) / 1000000 - start_ms ))
kills=0; inside=0; attempts=0; done_=0
store=$tmp/chaos
for hook in manifest:2 head:3; do   # rank 0 killed inside a commit (it alone commits)
  TANDEM_TEST_KILL_AT=$hook "${mpi[@]}" "$bin" run "$tmp/run.yaml" --store "$store" --quiet >"$tmp/mpirun.log" 2>&1
  [ -e "$store/HEAD" ] || [ -e "$store/RUN" ] && inside=$((inside + 1))
done
while [ $kills -lt 20 ] && [ $attempts -lt 60 ]; do
  attempts=$((attempts + 1))
  TANDEM_TEST_STEP_DELAY_MS=40 "${mpi[@]}" "$bin" run "$tmp/run.yaml" --store "$store" --quiet >"$tmp/mpirun.log" 2>&1 &
  mp=$!
  # from half the launch cost on, within 0.75 commit intervals (a commit every 2 of 24
  # episodes): an attempt makes a little progress at most, so 20 kills land before the end
  # (with 1.5 intervals a loaded 2-core machine once finished the run after 16 kills)
  sleep "$(awk -v r=$RANDOM -v ms=$ref_ms -v s=$start_ms 'BEGIN{printf "%.3f", (0.5 * s + ms * 1.5 / 24 * r / 32768) / 1000}')"
  kids=($(pgrep -P $mp))
  if [ ${#kids[@]} -ge 2 ]; then
    victim=${kids[$((RANDOM % ${#kids[@]}))]}
    kill -9 "$victim" 2>/dev/null && kills=$((kills + 1))
  fi
  wait $mp; st=$?; [ -n "${CHAOS_DEBUG:-}" ] && echo "attempt $attempts kids ${#kids[@]} exit $st $("$bin" status "$store" 2>/dev/null | grep position)"
  if [ $st -eq 0 ] && "$bin" status "$store" 2>/dev/null | grep -q 'step done'; then done_=1; break; fi
done
if [ $done_ = 0 ]; then
  TANDEM_TEST_STEP_DELAY_MS=0 "${mpi[@]}" "$bin" run "$tmp/run.yaml" --store "$store" --quiet >"$tmp/mpirun.log" 2>&1
fi
got=$(hash_of "$store")
if [ $kills -ge 20 ] && [ "$got" = "$ref" ] && [ "$(hash_of "$tmp/slow")" = "$ref" ]; then
  pass "chaos: $kills SIGKILLs of a random rank (+$inside of rank 0 inside commits), restarted each time: identical final hashes"
else
  fail "chaos: $kills kills; final hash matches: $([ "$got" = "$ref" ] && echo yes || echo no)" "$got" "$(tail -5 "$tmp/mpirun.log")"
fi
"$bin" verify "$store" >/dev/null 2>&1 && "$bin" alpha "$store" --verify >/dev/null 2>&1 \
  && pass "chaos store verifies: every blob, manifest and the alpha chain" \
  || fail "chaos store does not verify" "$("$bin" verify "$store" 2>&1 | tail -3)"
finish
