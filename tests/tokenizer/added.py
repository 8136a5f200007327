#!/usr/bin/python3
"""added.py SRC DST [prefix] [cuts] [overlap] — SRC (a tokenizer.json) with added tokens that are
not special, as Qwen2.5's <tool_call> and <|fim_prefix|> are, for tests/test_tokenizer.c:
a token that is a prefix of another (longest match), lstrip and rstrip, "normalized" ones
(one with a non-ASCII letter) and one holding a line end before a letter (no safe cuts).
With `prefix`, ByteLevel's add_prefix_space is turned on (each part after a match gets its
space); with `cuts`, the line-end and rstrip tokens (either turns safe cuts off) are left
out and one beginning with a letter put in (a safe cut can fall right before a match: the
parallel and streamed encodings meet it); with `overlap`, a normalized token that overlaps
raw ones ("ab<tool": Hugging Face matches the raw ones first) and a raw one with a
precomposed letter (matched in the text as written, not in its NFC)."""
import json
import sys

src, dst = sys.argv[1], sys.argv[2]
d = json.load(open(src))
top = max(max(d["model"]["vocab"].values()), max((a["id"] for a in d["added_tokens"]), default=0)) + 1
toks = [("<tool_call>", 0, 0, False), ("</tool_call>", 0, 0, False), ("<tool", 0, 0, False),
        ("<|fim_prefix|>", 0, 0, True), ("<think>", 1, 0, False), ("</think>", 0, 1, False),
        ("\u03a9mega", 0, 0, True), ("<|a\nb|>", 0, 0, False)]
if "cuts" in sys.argv[3:]:
    toks = [t for t in toks if "\n" not in t[0] and not t[2]] + [("Word", 0, 0, False)]
if "overlap" in sys.argv[3:]:
    toks += [("ab<tool", 0, 0, True), ("\u00e9t\u00e9", 0, 0, False)]
for i, (c, l, r, norm) in enumerate(toks):
    d["added_tokens"].append({"id": top + i, "content": c, "single_word": False, "lstrip": bool(l),
                              "rstrip": bool(r), "normalized": norm, "special": False})
if "prefix" in sys.argv[3:]:
    pt = d["pre_tokenizer"]
    for p in ([pt] if pt["type"] == "ByteLevel" else pt["pretokenizers"]):
        if p["type"] == "ByteLevel":
            p["add_prefix_space"] = True
json.dump(d, open(dst, "w"))
