#!/usr/bin/env bash
# tokenizer.sh — `make bench-tokenizer`: encoding MB/s of data/tokenizer.h (1 thread and
# THREADS threads) beside js-tiktoken and @huggingface/tokenizers (tests/tokenizer/ref.mjs)
# on the same text, as ratios. The references run on one thread (JavaScript).
#
#   bash bench/tokenizer.sh [MB] [THREADS]     (default 2 MB of text, all cores)
#
# The text: real files of this machine (/usr/share/common-licenses, Python's stdlib
# sources, /usr/share/doc copyrights) concatenated up to MB megabytes.
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-2}
THREADS=${2:-$(nproc)}
REF=$(bash tests/tokenizer/setup.sh)
make --no-print-directory build/rel/bench/bench_tokenizer >/dev/null
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{ cat /usr/share/common-licenses/* 2>/dev/null
  find /usr/lib/python3*/ -name '*.py' -size -200k 2>/dev/null | sort | xargs cat 2>/dev/null
  find /usr/share/doc -name copyright 2>/dev/null | sort | xargs cat 2>/dev/null
} | head -c $((MB * 1000000)) | iconv -c -f utf-8 -t utf-8 >"$dir/text.txt" || true
bytes=$(stat -c %s "$dir/text.txt")
echo "text: $bytes bytes of real files; $THREADS threads; $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
printf '%-10s %-24s %10s %10s %10s %8s %8s\n' tokenizer reference "ref MB/s" "ours 1t" "ours ${THREADS}t" "x 1t" "x ${THREADS}t"
row() { # NAME FILE PATTERN REFSPEC
  local ours ref o1 on rm
  ours=$(build/rel/bench/bench_tokenizer "$REF/files/$2" "$3" "$dir/text.txt" "$THREADS")
  o1=$(awk '$1=="threads" && $2==1 {print $4}' <<<"$ours")
  on=$(awk -v t="$THREADS" '$1=="threads" && $2==t {print $4}' <<<"$ours")
  ref=$(node "$REF/ref.mjs" bench "$4" "$dir/text.txt")
  rm=$(awk '{print $2}' <<<"$ref")
  local rt ot
  rt=$(awk '{print $4}' <<<"$ref"); ot=$(awk '$1=="threads" && $2==1 {print $6}' <<<"$ours")
  [ "$rt" = "$ot" ] || echo "warning: $1: $ot tokens here, $rt in the reference" >&2
  printf '%-10s %-24s %10s %10s %10s %8.1f %8.1f\n' "$1" "${4%%:*}" "$rm" "$o1" "$on" \
    "$(awk -v a="$o1" -v b="$rm" 'BEGIN{print a/b}')" "$(awk -v a="$on" -v b="$rm" 'BEGIN{print a/b}')"
}
row gpt2 gpt2.tiktoken gpt2 tiktoken:gpt2
row cl100k cl100k.tiktoken cl100k tiktoken:cl100k
row o200k o200k.tiktoken o200k tiktoken:o200k
row gpt2 gpt2.json - "hf:$REF/files/gpt2.json"
row qwen2 qwen2.json - "hf:$REF/files/qwen2.json"
