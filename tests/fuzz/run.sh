#!/usr/bin/env bash
# run.sh — `make fuzz`: builds a libFuzzer target per record decoder with clang
# (-fsanitize=fuzzer,address,undefined), seeds each with a valid record, runs each for
# FUZZ_SECONDS (default 60) and prints the executions and coverage each reached. The
# target "parquet" is prep's Parquet reader (tests/fuzz/fuzz_parquet.c), seeded with the
# files of tests/parquet_seeds.h; "config" is the config loader (tests/fuzz/fuzz_config.c);
# "tokenizer", "safetensors", "shard", "dataset" and "jsonl" (prep's JSON records) are the
# readers of tests/fuzz/fuzz_loaders.c; "s3answer" the S3 client's reads of an endpoint's
# answer (tests/fuzz/fuzz_s3answer.c).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-60}
# FUZZ_SMOKE=1 (tests/run.sh): every target built and run once over its seeds and corpus
# (-runs=0: no mutation, so a crash found today does not fail a later test run at random)
limit=(-max_total_time="$secs")
[ "${FUZZ_SMOKE:-0}" = 1 ] && limit=(-runs=0)
out=${FUZZ_OUT:-build/fuzz} # tests/run.sh: build/fuzz-smoke, 2 s a target (every target builds, its seeds pass)
mkdir -p "$out"
cflags="-std=c11 -g -O1 -D_GNU_SOURCE -I. $(pkg-config --cflags msgpack libcrypto)"
libs="$(pkg-config --libs msgpack libcrypto) -lm"
srcs="ledger/records.c ledger/rectab.c ledger/codec.c ledger/keys.c storage/sha256.c util/testhook.c util/hex.c util/err.c"
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
# the config loader (YAML → config → canonical and printed forms), seeded with the shipped
# configs and presets; the presets are embedded by make (build/gen/presets.c)
clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  tests/fuzz/fuzz_config.c $(ls config/*.c | grep -v run_config.c) build/gen/presets.c \
  data/dataset.c data/shard.c util/ydoc.c util/err.c util/fileio.c util/args.c util/buf.c util/secretname.c util/outfile.c \
  util/term.c \
  -lyaml -lm -o "$out/fuzz_config"
mkdir -p "$out/seeds/config"
for f in configs/*.yaml configs/presets/*.yaml; do cp "$f" "$out/seeds/config/${f//\//_}"; done
# the readers of files a user hands us (tests/fuzz/fuzz_loaders.c), seeded with small valid
# files written from their formats' specs (tests/fuzz/loader_seeds.py)
/usr/bin/python3 tests/fuzz/loader_seeds.py "$out/seeds"
json="util/json_tree.c util/json_read.c util/json.c"
declare -A load_srcs=(
  [tokenizer]="data/tok_load.c data/tokenizer.c data/bpe.c data/pretok.c data/nfc.c data/unicode_tables.c
               data/utf8.c data/bytelevel.c storage/sha256.c util/testhook.c util/hex.c $json"
  [safetensors]="model/safetensors.c $json"
  [shard]="data/shard.c"
  [dataset]="data/dataset.c data/shard.c util/ydoc.c"
  [jsonl]="data/jsonl.c data/utf8.c util/ydoc.c")
for t in tokenizer safetensors shard dataset jsonl; do
  # shellcheck disable=SC2086
  clang $cflags -fopenmp -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -DFUZZ_LOAD_$t tests/fuzz/fuzz_loaders.c ${load_srcs[$t]} util/err.c util/fileio.c util/buf.c util/outfile.c \
    $(pkg-config --libs libcrypto jansson) -lyaml -lm -o "$out/fuzz_$t"
done
# what the S3 client reads out of an endpoint's answer (XML values, redaction of server
# text), seeded with answers S3 gives (tests/fuzz/fuzz_s3answer.c)
clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  tests/fuzz/fuzz_s3answer.c storage/s3_xml.c storage/s3_config.c util/secretname.c -o "$out/fuzz_s3answer"
mkdir -p "$out/seeds/s3answer"
tok='\067IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD' # first byte: the secret's length (55)
printf "$tok"'<Error><Code>AccessDenied</Code><Message>IQoJb3JpZ2luX2VjEJr// &amp; more</Message></Error>' \
  >"$out/seeds/s3answer/error"
printf '\024AKIDSECRET0123456789<?xml version="1.0"?><ListBucketResult><Contents><Key>run/HEAD</Key></Contents><IsTruncated>true</IsTruncated><NextContinuationToken>t&#x41;&#66;</NextContinuationToken></ListBucketResult>' \
  >"$out/seeds/s3answer/listing"
types="$types parquet config tokenizer safetensors shard dataset jsonl s3answer"
printf '%-8s %12s %8s %8s %s\n' record execs cov features result
fail=0; ok=0
for t in $types; do
  mkdir -p "$out/corpus/$t"
  log="$out/fuzz_$t.log"
  if "$out/fuzz_$t" "${limit[@]}" -print_final_stats=1 -artifact_prefix="$out/crash_$t-" \
      "$out/corpus/$t" "$out/seeds/$t" >"$log" 2>&1; then res=ok; ok=$((ok + 1)); else res=FAILED; fail=$((fail + 1)); fi
  # a log without these lines (a crash at start-up) must not end the script (set -e)
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}' || true)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | awk '{print $2}' || true)
  printf '%-8s %12s %8s %8s %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$res"
done
[ "$fail" -eq 0 ] || { echo "a fuzz target failed: see $out/fuzz_*.log and $out/crash_*"; for t in $types; do
  grep -q -E 'ERROR|SUMMARY|deadly' "$out/fuzz_$t.log" 2>/dev/null && { echo "-- $t"; tail -n 30 "$out/fuzz_$t.log"; }; done; }
echo "fuzz: $ok passed, $fail failed"
[ "$fail" -eq 0 ]
