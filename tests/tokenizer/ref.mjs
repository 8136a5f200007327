// ref.mjs — the reference side of tests/test_tokenizer.c and bench/tokenizer.sh: the
// JavaScript ports of tiktoken (js-tiktoken) and of Hugging Face tokenizers
// (@huggingface/tokenizers), installed by tests/tokenizer/setup.sh.
//
//   node ref.mjs export DIR          tokenizer files built from js-tiktoken's ranks:
//        gpt2.tiktoken cl100k.tiktoken o200k.tiktoken   ("base64 rank" lines)
//        gpt2.json   HF byte-level BPE, pre_tokenizer ByteLevel (GPT-2's regex)
//        qwen2.json  HF, Split(Qwen2's regex) + ByteLevel, cl100k's vocabulary
//        llama3.json HF, Split(Llama-3's regex) + ByteLevel, cl100k's, ignore_merges
//        qwen2-nfc.json  qwen2.json with Qwen2's normalizer NFC
//   node ref.mjs encode SPEC IN OUT  IN: documents as "LENGTH\n" + that many bytes,
//        repeated; OUT: one line of ids per document. SPEC: tiktoken:gpt2|cl100k|o200k
//        or hf:FILE.json
//   node ref.mjs bench SPEC FILE     prints "MBps X tokens N" for FILE as one text
//
// HF merges are derived from the ranks the way tiktoken-to-HF converters do: a token's
// merge is the pair its bytes reduce to under the lower-ranked tokens (tokens that do
// not reduce to two parts get no merge: then only ignore_merges reaches them).
import fs from "node:fs";
import path from "node:path";
import { Tiktoken } from "js-tiktoken/lite";
import gpt2 from "js-tiktoken/ranks/gpt2";
import cl100k from "js-tiktoken/ranks/cl100k_base";
import o200k from "js-tiktoken/ranks/o200k_base";
import { Tokenizer } from "@huggingface/tokenizers";

const RANKS = { gpt2, cl100k, o200k };
const REGEX = {
  llama3: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

// [base64, rank] of a js-tiktoken ranks object (its own compressed "! offset tok..." lines)
function ranksOf(r) {
  const out = [];
  for (const line of r.bpe_ranks.split("\n")) {
    if (!line) continue;
    const [, off, ...toks] = line.split(" ");
    toks.forEach((t, i) => out.push([t, Number(off) + i]));
  }
  return out;
}

function byteLevel() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const map = new Array(256);
  bs.forEach((b) => (map[b] = String.fromCodePoint(b)));
  let n = 0;
  for (let b = 0; b < 256; b++) if (map[b] === undefined) map[b] = String.fromCodePoint(256 + n++);
  return map;
}

const derived = new Map(); // ranks object -> {vocab, merges}: derived once per vocabulary

function hfJson(r, pre, ignoreMerges) {
  if (!derived.has(r)) derived.set(r, derive(r));
  const { vocab, merges } = derived.get(r);
  const eot = r.special_tokens["<|endoftext|>"];
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: eot, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: pre,
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges, vocab, merges,
    },
  };
}

function derive(r) {
  const bl = byteLevel();
  const ranks = ranksOf(r);
  const rank = new Map(); // "b,b,b" -> rank
  const toks = [];
  for (const [b64, rk] of ranks) {
    const bytes = Array.from(Buffer.from(b64, "base64"));
    rank.set(bytes.join(","), rk);
    toks.push([bytes, rk]);
  }
  const str = (bytes) => bytes.map((b) => bl[b]).join("");
  const vocab = {};
  const merges = [];
  for (const [bytes, rk] of toks) {
    vocab[str(bytes)] = rk;
    if (bytes.length < 2) continue;
    let parts = bytes.map((b) => [b]);
    for (;;) {
      let best = -1, bestRank = rk;
      for (let i = 0; i + 1 < parts.length; i++) {
        const q = rank.get(parts[i].concat(parts[i + 1]).join(","));
        if (q !== undefined && q < bestRank) { bestRank = q; best = i; }
      }
      if (best < 0) break;
      parts.splice(best, 2, parts[best].concat(parts[best + 1]));
    }
    if (parts.length === 2) merges.push([rk, [str(parts[0]), str(parts[1])]]);
  }
  merges.sort((a, b) => a[0] - b[0]);
  return { vocab, merges: merges.map((m) => m[1]) };
}

function split(re) {
  return {
    type: "Sequence",
    pretokenizers: [
      { type: "Split", pattern: { Regex: re }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    ],
  };
}

function doExport(dir) {
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, r] of Object.entries(RANKS))
    fs.writeFileSync(path.join(dir, name + ".tiktoken"), ranksOf(r).map(([t, k]) => `${t} ${k}\n`).join(""));
  const gpt2pre = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  fs.writeFileSync(path.join(dir, "gpt2.json"), JSON.stringify(hfJson(gpt2, gpt2pre, false)));
  fs.writeFileSync(path.join(dir, "qwen2.json"), JSON.stringify(hfJson(cl100k, split(REGEX.qwen2), false)));
  fs.writeFileSync(path.join(dir, "llama3.json"), JSON.stringify(hfJson(cl100k, split(REGEX.llama3), true)));
  const nfc = hfJson(cl100k, split(REGEX.qwen2), false);
  nfc.normalizer = { type: "NFC" }; // as Qwen2's own tokenizer.json has it
  fs.writeFileSync(path.join(dir, "qwen2-nfc.json"), JSON.stringify(nfc));
}

// encode(text) -> ids for a SPEC
function encoder(spec) {
  if (spec.startsWith("tiktoken:")) {
    const enc = new Tiktoken(RANKS[spec.slice(9)]);
    return (text) => enc.encode(text, [], []); // ordinary text: no special token matched
  }
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(spec.slice(3), "utf8")), {});
  return (text) => tok.encode(text, { add_special_tokens: false }).ids;
}

function doEncode(spec, inFile, outFile) {
  const enc = encoder(spec);
  const buf = fs.readFileSync(inFile);
  const dec = new TextDecoder("utf-8", { fatal: true });
  const lines = [];
  for (let p = 0; p < buf.length;) {
    const nl = buf.indexOf(10, p);
    const len = Number(buf.subarray(p, nl).toString());
    lines.push(enc(dec.decode(buf.subarray(nl + 1, nl + 1 + len))).join(" "));
    p = nl + 1 + len;
  }
  fs.writeFileSync(outFile, lines.join("\n") + "\n");
}

function doBench(spec, file) {
  const enc = encoder(spec);
  const text = fs.readFileSync(file, "utf8");
  enc(text.slice(0, 100000)); // warm the JIT
  const t0 = process.hrtime.bigint();
  const n = enc(text).length;
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`MBps ${(Buffer.byteLength(text) / 1e6 / s).toFixed(2)} tokens ${n}`);
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "export") doExport(args[0]);
else if (cmd === "encode") doEncode(args[0], args[1], args[2]);
else if (cmd === "bench") doBench(args[0], args[1]);
else { console.error("usage: node ref.mjs export DIR | encode SPEC IN OUT | bench SPEC FILE"); process.exit(2); }
