#!/usr/bin/python3
"""loader_seeds.py DIR — small valid inputs for the loader fuzz targets (run.sh):
DIR/tokenizer/ (a tokenizer.json and a tiktoken ranks file), DIR/safetensors/ (tensors of
each dtype), DIR/shard/ (a uint16 and a uint32 shard), DIR/dataset/ (dataset.yaml files
naming the shards the dataset target makes), DIR/jsonl/ (JSON records for prep). Written from the formats' specs
with the standard library only, so `make fuzz` needs no model download."""
import base64, json, os, struct, sys

out = sys.argv[1]
for d in ("tokenizer", "safetensors", "shard", "dataset", "jsonl"):
    os.makedirs(os.path.join(out, d), exist_ok=True)

def write(rel, data):
    with open(os.path.join(out, rel), "wb") as f:
        f.write(data)

# byte-level BPE: the 256 byte symbols of GPT-2's map, two merges, one added token
def byte_symbols():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return [chr(c) for c in cs]
sym = byte_symbols()
vocab = {s: i for i, s in enumerate(sym)}
vocab["he"] = 256; vocab["ll"] = 257; vocab["hell"] = 258
tok = {"version": "1.0", "normalizer": None,
       "added_tokens": [{"id": 259, "content": "<|endoftext|>", "special": True}],
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
       "model": {"type": "BPE", "vocab": vocab, "merges": ["h e", "l l", "he ll"]}}
write("tokenizer/tokenizer.json", json.dumps(tok).encode())
ranks = b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))
ranks += base64.b64encode(b"he") + b" 256\n"
write("tokenizer/ranks.tiktoken", ranks)

# safetensors: an 8-byte header length, the JSON header, the data
def safetensors(tensors, meta=None):
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta: header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data
write("safetensors/model.safetensors", safetensors([
    ("a.weight", "F32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
    ("b.bias", "BF16", [4], struct.pack("<4H", 0x3f80, 0x4000, 0xbf80, 0)),
    ("c", "F16", [2], struct.pack("<2H", 0x3c00, 0xc000)),
    ("d", "F32", [], struct.pack("<f", 0.5))], {"format": "pt"}))

# shards: 256 int32 header words, then the tokens
def shard(magic, version, toks, fmt):
    head = struct.pack("<3i", magic, version, len(toks)) + b"\0" * (253 * 4)
    return head + struct.pack("<%d%s" % (len(toks), fmt), *toks)
write("shard/u16.bin", shard(20240520, 1, [1, 2, 255, 0, 7], "H"))
write("shard/u32.bin", shard(20240801, 7, [1, 70000, 255, 0], "I"))

# dataset.yaml naming the shards fuzz_loaders.c makes beside it (a/, b/, big/)
write("dataset/two.yaml", b"""vocab: 256
tokenizer: byte
eot: 255
domains:
  - name: a
    train: [a/train_*.bin]
    val: a/val_0.bin
  - name: b
    train: [b/train_0.bin]
    val: [b/val_0.bin]
""")
write("dataset/big.yaml", b"""vocab: 100000
tokenizer_sha256: 3b1f00000000000000000000000000000000000000000000000000000000abcd
domains:
  - {name: big, train: big/train_0.bin, val: [a/val_0.bin], test: [b/val_0.bin]}
""")

# JSON records for prep's reader: escapes, a surrogate pair, nested values to skip
write("jsonl/record.jsonl", b'{"text": "hello \\u00e9 \\ud83d\\ude00 w\\"orld\\n", "id": [1, 2.5e3, true, null, {"a": "b"}]}\r\n')
write("jsonl/array.json", b'[{"text": "x"}, {"meta": 1}, 5, {"text": 7}]')
