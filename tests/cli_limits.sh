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
if [ $asan = 1 ]; then pass "ulimit -v below OpenBLAS's load: not under ASan (skipped)"
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
finish
