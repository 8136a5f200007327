#!/usr/bin/env bash
# cli_limits.sh — tandem under the process limits of a batch node (ulimit -v, ulimit -s),
# through the binary.
#
#   TANDEM_BIN=build/rel/tandem bash tests/cli_limits.sh
#
#   - an address-space limit (ulimit -v) too low for the buffers OpenBLAS maps when it
#     loads: `tandem version` exits 2 at once, naming the limit and what it needs (before:
#     it hung before main(), OpenBLAS retrying its mmap forever); one buffer
#     (OMP_NUM_THREADS=1) under a limit that holds it starts;
#   - a run whose OpenBLAS buffers (2 per thread), thread stacks and malloc arenas exceed the
#     limit: refused by the memory plan (exit 2 naming ulimit -v, run.threads and the need),
#     nothing written (before: it spun forever in OpenBLAS, deaf to SIGTERM); stacks of
#     ~3.8 GiB (ulimit -s 4000000) under ulimit -v 3000000: refused naming ulimit -s (before:
#     libgomp's "Thread creation failed", exit 1); a run that fits: exit 0, its plan saying
#     the address space it counted;
#   - a SHA-256 context that cannot be allocated (TANDEM_TEST_FAIL_AT=sha256:35, an upload
#     thread of the first commit; as under a reached limit): exit 3 naming the cause, no
#     SIGABRT (before: abort(), exit 134 and a core file); the resume ends on the hash of
#     an uninterrupted run;
#   - a 128 KiB stack (ulimit -s 128): a new run, its resume with an allowed change, hash,
#     alpha, gc, eval, export, status and verify end normally (before: SIGSEGV in
#     run_config_open, eval_store, export_store, status and verify, whose ~94 KB config or run_state was a local);
# Not under ASan (its shadow memory needs terabytes of address space).
# Prints PASS/FAIL lines and "cli_limits: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_limits
. tests/lib_cli.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-limits-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }
asan=0
case $bin in */asan/*) asan=1 ;; esac

# OpenBLAS's load: ~65 MiB of libraries, then a 128 MiB buffer per CPU; 146 MiB holds the
# libraries and no buffer on any machine
if [ $asan = 1 ]; then echo "SKIP ulimit -v below OpenBLAS's load: not under ASan; not counted"
else
  ( ulimit -v 150000; timeout -k 5 20 "$bin" version >"$tmp/v.out" 2>"$tmp/v.err"; echo $? >"$tmp/v.rc" )
  rc=$(cat "$tmp/v.rc")
  if [ "$rc" = 2 ] && grep -q "^tandem: the address-space limit (ulimit -v) is 146 MiB; OpenBLAS needs about [0-9]* MiB to load" "$tmp/v.err" &&
     grep -q "ulimit -v unlimited" "$tmp/v.err" && [ ! -s "$tmp/v.out" ]; then
    pass "ulimit -v below OpenBLAS's load: exit 2 at once, the limit and the need said (was a hang before main)"
  else fail "ulimit -v below OpenBLAS's load" "exit $rc (124: hung)" "$(cat "$tmp/v.err")"; fi
  ( ulimit -v 400000; OMP_NUM_THREADS=1 timeout -k 5 20 "$bin" version >"$tmp/v1.out" 2>&1; echo $? >"$tmp/v1.rc" )
  rc=$(cat "$tmp/v1.rc")
  if [ "$rc" = 0 ] && grep -q "^tandem " "$tmp/v1.out"; then
    pass "one OpenBLAS buffer (OMP_NUM_THREADS=1) under a limit that holds it: tandem version runs"
  else fail "OMP_NUM_THREADS=1 under ulimit -v 400000" "exit $rc" "$(cat "$tmp/v1.out")"; fi
fi

"$bin" gen-corpus --out "$tmp/corpus" --names a,b --train-tokens 5k,3k --val-tokens 1k \
  --test-tokens 1k >/dev/null 2>&1 || { fail setup "gen-corpus"; finish; }
cat >"$tmp/c.yaml" <<EOF
run: {episodes: 2, seed: 7, threads: 2}
data: {dataset: $tmp/corpus/dataset.yaml}
model: {layers: 1, channels: 32, heads: 2, ctx: 32}
train: {batch: 4, seq: 32}
tandem: {K: 2, E: 3}
EOF
# a 128 KiB stack: the configs a store's RUN is read into live on the heap
if [ $asan = 1 ]; then echo "SKIP ulimit -s 128: not under ASan (its frames are larger); not counted"
else
  bad=""
  for c in "run $tmp/c.yaml --store $tmp/small --set run.threads=1" \
           "run $tmp/c.yaml --store $tmp/small --set run.threads=1 --set run.episodes=3 --allow-change run.episodes" \
           "hash $tmp/small" "alpha $tmp/small" "gc $tmp/small --keep 2" "eval $tmp/small" \
           "export $tmp/small --out $tmp/small-export" "status $tmp/small" "verify $tmp/small"; do
    ( ulimit -c 0; ulimit -s 128; timeout -k 5 120 "$bin" $c >/dev/null 2>"$tmp/s.err"; echo $? >"$tmp/s.rc" ) 2>/dev/null
    rc=$(cat "$tmp/s.rc"); [ "$rc" = 0 ] || bad="$bad [tandem ${c%% *} ...: exit $rc]"
  done
  if [ -z "$bad" ] && "$bin" metrics "$tmp/small" --format csv 2>/dev/null | grep -q "^2,"; then
    pass "ulimit -s 128: run, a resume with an allowed change, hash, alpha, gc, eval, export, status and verify end normally (was SIGSEGV)"
  else fail "ulimit -s 128" "$bad" "$(tail -2 "$tmp/s.err")"; fi
fi
# OMP_NUM_THREADS=1: OpenBLAS loads with one buffer on any machine (~200 MiB), the run's two
# threads then want 3 more
if [ $asan = 1 ]; then echo "SKIP ulimit -v in the address-space plan: not under ASan; not counted"
else
  ( ulimit -v 400000; OMP_NUM_THREADS=1 timeout -s KILL 60 "$bin" run "$tmp/c.yaml" --store "$tmp/as" \
      >/dev/null 2>"$tmp/as.err"; echo $? >"$tmp/as.rc" )
  rc=$(cat "$tmp/as.rc")
  if [ "$rc" = 2 ] && grep -q "the address-space limit (ulimit -v) is 390.6 MiB and this run would map about" "$tmp/as.err" &&
     grep -q "more OpenBLAS buffers of 128 MiB (two per thread: run.threads = 2)" "$tmp/as.err" &&
     grep -q "or lower run.threads" "$tmp/as.err" && [ ! -e "$tmp/as/RUN" ]; then
    pass "OpenBLAS's buffers past ulimit -v: refused by the plan (exit 2, the need and run.threads said), nothing written"
  else fail "OpenBLAS's buffers past ulimit -v" "exit $rc (137: spun until killed)" "$(tail -3 "$tmp/as.err")"; fi
  if [ "$(ulimit -H -s)" = unlimited ] || [ "$(ulimit -H -s)" -ge 4000000 ]; then
    ( ulimit -s 4000000; ulimit -v 3000000; OMP_NUM_THREADS=1 timeout -s KILL 60 "$bin" run "$tmp/c.yaml" \
        --store "$tmp/st" >/dev/null 2>"$tmp/st.err"; echo $? >"$tmp/st.rc" )
    rc=$(cat "$tmp/st.rc")
    if [ "$rc" = 2 ] && grep -q "thread stacks of 3.81 GiB (ulimit -s)" "$tmp/st.err" &&
       grep -q "lower the stack size (ulimit -s 8192" "$tmp/st.err" && ! grep -q "^libgomp" "$tmp/st.err" &&
       [ ! -e "$tmp/st/RUN" ]; then
      pass "thread stacks past ulimit -v (ulimit -s 4000000): refused naming ulimit -s (exit 2), not libgomp's abort"
    else fail "thread stacks past ulimit -v" "exit $rc" "$(tail -3 "$tmp/st.err")"; fi
  else echo "SKIP ulimit -s 4000000: the hard limit is lower here; not counted"; fi
  ( ulimit -v 2500000; OMP_NUM_THREADS=1 timeout -s KILL 120 "$bin" run "$tmp/c.yaml" --store "$tmp/ok" \
      --set run.threads=1 >/dev/null 2>"$tmp/ok.err"; echo $? >"$tmp/ok.rc" )
  rc=$(cat "$tmp/ok.rc")
  if [ "$rc" = 0 ] && grep -q "address space ~.* of the 2.38 GiB limit (ulimit -v" "$tmp/ok.err"; then
    pass "a run within ulimit -v: exit 0, its plan saying the address space it counted"
  else fail "a run within ulimit -v" "exit $rc" "$(tail -3 "$tmp/ok.err")"; fi
  # a shard larger than the address space left (a sparse 2.8 GiB one): the mmap's ENOMEM
  # said as the limits it is (it was "cannot mmap shard: Cannot allocate memory", also for
  # 66,000 small shards past vm.max_map_count: hunt), exit 2, nothing written
  cp -r "$tmp/corpus" "$tmp/bigcorpus"
  /usr/bin/python3 - "$tmp/bigcorpus/a/train_000.bin" <<'PYEOF2'
import struct, sys
p = sys.argv[1]
h = bytearray(open(p, 'rb').read(1024))
width = 2 if struct.unpack('<i', h[4:8])[0] == 1 else 4
n = 3_000_000_000 // width
h[8:12] = struct.pack('<i', n)
with open(p, 'wb') as f:
    f.write(h)
    f.truncate(1024 + n * width)
PYEOF2
  sed "s|$tmp/corpus/|$tmp/bigcorpus/|" "$tmp/c.yaml" >"$tmp/big.yaml"
  ( ulimit -v 2500000; OMP_NUM_THREADS=1 timeout -s KILL 60 "$bin" run "$tmp/big.yaml" --store "$tmp/big" \
      --set run.threads=1 >/dev/null 2>"$tmp/big.err"; echo $? >"$tmp/big.rc" )
  rc=$(cat "$tmp/big.rc")
  if [ "$rc" = 2 ] && grep -q "train_000.bin: cannot map the shard's 2861 MiB: out of address space (the address-space limit, ulimit -v, is 2441 MiB) or of mappings" "$tmp/big.err" &&
     grep -q "vm.max_map_count" "$tmp/big.err" && [ ! -e "$tmp/big/RUN" ]; then
    pass "a shard past the address space: exit 2 naming the shard, ulimit -v and vm.max_map_count, nothing written"
  else fail "a shard past the address space" "exit $rc" "$(tail -3 "$tmp/big.err")"; fi
  rm -rf "$tmp/bigcorpus"
fi

( ulimit -c 0; TANDEM_TEST_FAIL_AT=sha256:35 "$bin" run "$tmp/c.yaml" --store "$tmp/oom" >/dev/null 2>"$tmp/oom.err"
  echo $? >"$tmp/oom.rc" )
rc=$(cat "$tmp/oom.rc")
"$bin" run "$tmp/c.yaml" --store "$tmp/oom" >/dev/null 2>"$tmp/oom2.err"; rc2=$?
"$bin" run "$tmp/c.yaml" --store "$tmp/ref" >/dev/null 2>&1
h1=$("$bin" hash "$tmp/oom" 2>&1 | head -1); h2=$("$bin" hash "$tmp/ref" 2>&1 | head -1)
if [ "$rc" = 3 ] && grep -q "^tandem: out of memory computing a SHA-256 digest (OpenSSL's EVP_MD_CTX_new failed)" "$tmp/oom.err" &&
   [ $rc2 = 0 ] && [ "$h1" = "$h2" ] && [ -n "$h1" ]; then
  pass "a digest out of memory in an upload thread: exit 3 naming it (not SIGABRT), the resume ends on the uninterrupted hash"
else fail "a digest out of memory" "exit $rc (134: abort), resume $rc2; $h1 / $h2" "$(tail -2 "$tmp/oom.err")"; fi
finish
