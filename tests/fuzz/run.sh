#!/usr/bin/env bash
# run.sh — `make fuzz`: builds a libFuzzer target per record decoder with clang
# (-fsanitize=fuzzer,address,undefined), seeds each with a valid record, runs each for
# FUZZ_SECONDS (default 60) and prints the executions and coverage each reached. The
# target "parquet" is prep's Parquet reader (tests/fuzz/fuzz_parquet.c), seeded with the
# files of tests/parquet_seeds.h.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-60}
out=build/fuzz
mkdir -p "$out"
cflags="-std=c11 -g -O1 -D_GNU_SOURCE -I. $(pkg-config --cflags msgpack libcrypto)"
libs="$(pkg-config --libs msgpack libcrypto) -lm"
srcs="ledger/records.c ledger/rectab.c ledger/codec.c storage/sha256.c util/hex.c util/err.c"
gcc $cflags tests/fuzz/make_seeds.c $srcs $libs -o "$out/make_seeds"
"$out/make_seeds" "$out/seeds"
types="head run state alpha lease change mixture sweep"
for t in $types; do
  clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -DFUZZ_RECORD_$t=1 tests/fuzz/fuzz_records.c $srcs $libs -o "$out/fuzz_$t"
done
clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  tests/fuzz/fuzz_parquet.c data/parquet.c data/thrift.c util/err.c \
  $(pkg-config --libs zlib libzstd) -lsnappy -o "$out/fuzz_parquet"
types="$types parquet"
printf '%-8s %12s %8s %8s %s\n' record execs cov features result
fail=0
for t in $types; do
  mkdir -p "$out/corpus/$t"
  log="$out/fuzz_$t.log"
  if "$out/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/crash_$t-" \
      "$out/corpus/$t" "$out/seeds/$t" >"$log" 2>&1; then res=ok; else res=FAILED; fail=1; fi
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  printf '%-8s %12s %8s %8s %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$res"
done
[ "$fail" -eq 0 ] || { echo "a fuzz target failed: see $out/fuzz_*.log and $out/crash_*"; exit 1; }
