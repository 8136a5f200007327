#!/usr/bin/env bash
# cli_interop.sh — round trips between tandem's outputs and inputs, through the binary:
#   - a GPT-2 run on a dataset prepped with a BPE tokenizer.json (end of text 258) is
#     exported, a second run starts from that folder (model.init: hf:, no weight moved)
#     and is exported again: the weights are the same bytes and config.json names the
#     same bos/eos ids (the second said null: a run from a folder left the dataset's out);
#   - `tandem tokenize` takes a shell glob of more than 8 files (it refused the 9th as
#     "unexpected argument"), and the counts equal one file at a time;
#   - the export of a run on a synthetic corpus of 64 ids says the dataset records no
#     tokenizer (it claimed "made with a tokenizer other than bytes").
#   - `tandem tokenize` of text that is not UTF-8 is refused, naming the file and byte (it
#     was encoded silently, where prep leaves such a file out).
# Prints PASS/FAIL lines and "cli_interop: N passed, M failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
SUITE=cli_interop
. tests/lib_cli.sh
py=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-interop-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { fail setup "no tandem binary at $bin"; finish; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# a BPE tokenizer.json of the 256 bytes, two merges and <|endoftext|> at 258; 40 texts
$py - "$tmp" <<'PY' || { fail setup "tokenizer and texts"; finish; }
import json, os, sys
d = sys.argv[1]
def bcp(b):  # GPT-2's bytes-to-characters map
    ok = lambda c: 33 <= c <= 126 or 0xA1 <= c <= 0xAC or 0xAE <= c <= 0xFF
    return chr(b) if ok(b) else chr(256 + sum(1 for c in range(b) if not ok(c)))
vocab = {bcp(b): b for b in range(256)}
vocab["th"], vocab["he"] = 256, 257
json.dump({"version": "1.0", "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "added_tokens": [{"id": 258, "content": "<|endoftext|>", "special": True}],
           "model": {"type": "BPE", "dropout": None, "vocab": vocab, "merges": [["t", "h"], ["h", "e"]]}},
          open(os.path.join(d, "tok.json"), "w"))
os.makedirs(os.path.join(d, "txt"))
for i in range(40):
    open(os.path.join(d, "txt", "%02d.txt" % i), "w").write(("the other thing %d " % i) * 30)
PY
cat >"$tmp/run.yaml" <<EOF
run: {episodes: 1, seed: 1, threads: 1, mode: fixed}
data: {dataset: $tmp/data/dataset.yaml}
model: {layers: 1, channels: 32, heads: 2, ctx: 32}
train: {batch: 2, seq: 32}
optim: {lr: 3e-3}
EOF
"$bin" prep --domain x="$tmp/txt" --out "$tmp/data" --tokenizer "$tmp/tok.json" --threads 1 >/dev/null 2>&1 &&
  "$bin" run "$tmp/run.yaml" --store "$tmp/s1" --quiet 2>/dev/null &&
  "$bin" export "$tmp/s1" --out "$tmp/e1" >/dev/null 2>&1 &&
  "$bin" run "$tmp/run.yaml" --store "$tmp/s2" --set "model.init=hf:$tmp/e1" --set optim.lr=1e-30 \
    --set optim.weight_decay=0 --quiet 2>/dev/null &&
  "$bin" export "$tmp/s2" --out "$tmp/e2" >/dev/null 2>&1; st=$?
got=$($py - "$tmp" <<'PY' 2>&1
import json, sys
d = sys.argv[1]
c1, c2 = (json.load(open("%s/%s/config.json" % (d, e))) for e in ("e1", "e2"))
assert c1["eos_token_id"] == 258 and c1["bos_token_id"] == 258, c1
assert (c2["bos_token_id"], c2["eos_token_id"]) == (258, 258), c2
w1, w2 = (open("%s/%s/model.safetensors" % (d, e), "rb").read() for e in ("e1", "e2"))
assert w1 == w2, "the weights differ"
print("ok")
PY
)
if [ $st = 0 ] && [ "$got" = ok ]; then
  pass "export, a run from the folder, export again: the same weights, bos/eos 258 both times"
else fail "export round trip of a BPE dataset's run" "exit $st" "$got"; fi

# tokenize FILE... of a glob of 12 files: each file's count as alone
for i in $(seq 0 11); do printf 'the other %d\n' "$i" >"$tmp/f$(printf %02d "$i").txt"; done
"$bin" tokenize "$tmp"/f*.txt --tokenizer "$tmp/tok.json" --count >"$tmp/all.txt" 2>"$tmp/all.err"; st=$?
ok=1
for f in "$tmp"/f*.txt; do
  one=$("$bin" tokenize "$f" --tokenizer "$tmp/tok.json" --count 2>/dev/null | head -n 1 | cut -f1)
  grep -q "^$one	$f\$" "$tmp/all.txt" || ok=0
done
if [ $st = 0 ] && [ $ok = 1 ] && [ "$(grep -c '\.txt$' "$tmp/all.txt")" = 12 ]; then
  pass "tokenize of 12 files at once: each one's count as alone"
else fail "tokenize of 12 files at once" "exit $st: $(cat "$tmp/all.err")" "$(cat "$tmp/all.txt")"; fi

# tokenize of a file that is not UTF-8 (Latin-1, or cut inside a character): exit 2 naming the
# file and the byte, nothing printed for it (the ids were printed: prep leaves such a file out)
printf 'the caf\xe9 other\n' >"$tmp/latin1.txt"
printf 'the other \xe2\x82' >"$tmp/cut.txt"
ok=1
for f in latin1 cut; do
  "$bin" tokenize "$tmp/f00.txt" "$tmp/$f.txt" --tokenizer "$tmp/tok.json" >"$tmp/u8.out" 2>"$tmp/u8.err"; st=$?
  want=7; [ $f = cut ] && want=10
  { [ $st = 2 ] && grep -q "$f.txt: .*at byte $want: tokenize reads UTF-8" "$tmp/u8.err" &&
    [ "$(wc -l <"$tmp/u8.out")" = 1 ]; } || { ok=0; echo "$f: exit $st: $(cat "$tmp/u8.err")"; }
done >"$tmp/u8.log"
if [ $ok = 1 ]; then pass "tokenize of text that is not UTF-8: exit 2 naming the file and the byte"
else fail "tokenize of text that is not UTF-8" "$(cat "$tmp/u8.log")"; fi

# a synthetic corpus of 64 ids records no tokenizer: the export says so, claims none
"$bin" gen-corpus --out "$tmp/gc" --domains 2 --train-tokens 5000 --val-tokens 200 --test-tokens 200 --vocab 64 \
  >/dev/null 2>&1 &&
  "$bin" run "$tmp/run.yaml" --store "$tmp/gs" --set "data.dataset=$tmp/gc/dataset.yaml" --quiet 2>/dev/null &&
  "$bin" export "$tmp/gs" --out "$tmp/ge" >/dev/null 2>"$tmp/ge.err"; st=$?
if [ $st = 0 ] && grep -q "records no tokenizer" "$tmp/ge.err" && ! grep -q "other than bytes" "$tmp/ge.err"; then
  pass "export of a synthetic corpus' run: no tokenizer claimed"
else fail "export of a synthetic corpus' run" "exit $st" "$(cat "$tmp/ge.err")"; fi
finish
