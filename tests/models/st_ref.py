#!/usr/bin/python3
"""st_ref.py — an independent safetensors writer and reader for tests/test_safetensors.c
(numpy and the standard library only; the format as Hugging Face documents it).

  st_ref.py write DIR   DIR/one.safetensors (F32, BF16, F16 and I64 tensors, metadata),
                        DIR/sharded/ (two shards and model.safetensors.index.json), and
                        for every float tensor DIR/expect/<name>.f32: its values as float32
  st_ref.py hf DIR TYPE TIED [SCALE]
                        a small Hugging Face folder of model_type TYPE (qwen2 or llama),
                        tie_word_embeddings TIED (0/1; 2: true, with lm_head.weight stored
                        as well, a copy of the embedding): config.json and model.safetensors
                        with random BF16 weights (N(0, SCALE^2), default 0.02; norm
                        weights near 1) named as transformers names them;
                        prints the parameter count
  st_ref.py read FILE INPUTS
                        checks a file tandem wrote: the 8-byte length, 8-byte alignment,
                        offsets that tile the data, and each tensor's bytes against the
                        float32 inputs INPUTS/<name>.f32 stored as its dtype (BF16: round
                        to nearest even); prints "ok" or what is wrong
"""
import json
import os
import struct
import sys

import numpy as np


def bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, round to nearest even (NaN kept quiet)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_file(path, tensors, meta=None):
    """tensors: list of (name, dtype name, numpy array of that dtype's bytes)."""
    header, blobs, at = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, dt, arr in tensors:
        b = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def cmd_write(d):
    rng = np.random.default_rng(7)
    os.makedirs(d + "/expect", exist_ok=True)
    os.makedirs(d + "/sharded", exist_ok=True)
    f32 = rng.standard_normal((3, 4)).astype(np.float32)
    src = (rng.standard_normal(7) * 100).astype(np.float32)
    src[0] = 1.00390625  # a tie: rounds to even
    src[1] = np.float32(3.0e38)
    bf = bf16_bits(src).reshape(7)
    f16 = np.array([[0.5, -2.0, 6.1e-5], [5.96e-8, 65504.0, -0.0]], dtype=np.float16)
    i64 = np.array([1, -2], dtype=np.int64)
    write_file(d + "/one.safetensors",
               [("model.embed_tokens.weight", "F32", f32), ("layers.0.q_proj.bias", "BF16", bf),
                ("norm.weight", "F16", f16), ("position_ids", "I64", i64)],
               {"format": "pt", "note": "made by st_ref.py"})
    f32.tofile(d + "/expect/model.embed_tokens.weight.f32")
    bf16_values(bf).tofile(d + "/expect/layers.0.q_proj.bias.f32")
    f16.astype(np.float32).tofile(d + "/expect/norm.weight.f32")
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    c = rng.standard_normal((4,)).astype(np.float32)
    write_file(d + "/sharded/model-00001-of-00002.safetensors", [("a.weight", "F32", a), ("b.bias", "F32", b)])
    write_file(d + "/sharded/model-00002-of-00002.safetensors", [("c.weight", "BF16", bf16_bits(c))])
    with open(d + "/sharded/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {"total_size": a.nbytes + b.nbytes + 8},
                   "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                                  "b.bias": "model-00001-of-00002.safetensors",
                                  "c.weight": "model-00002-of-00002.safetensors"}}, f)
    a.tofile(d + "/expect/a.weight.f32")
    b.tofile(d + "/expect/b.bias.f32")
    bf16_values(bf16_bits(c)).tofile(d + "/expect/c.weight.f32")
    print("ok")


def cmd_read(path, inputs):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    if (8 + n) % 8:
        return "the data does not start 8-byte aligned"
    header = json.loads(data[8:8 + n].decode())
    body = data[8 + n:]
    spans = []
    for name, t in header.items():
        if name == "__metadata__":
            if not all(isinstance(v, str) for v in t.values()):
                return "metadata values are not strings"
            continue
        b, e = t["data_offsets"]
        spans.append((b, e, name))
        want = np.fromfile(os.path.join(inputs, name + ".f32"), dtype=np.float32)
        if int(np.prod(t["shape"])) != want.size:
            return "%s: shape %s for %d values" % (name, t["shape"], want.size)
        raw = body[b:e]
        if t["dtype"] == "F32":
            ok = raw == want.astype("<f4").tobytes()
        elif t["dtype"] == "BF16":
            ok = raw == bf16_bits(want).astype("<u2").tobytes()
        else:
            return "%s: dtype %s" % (name, t["dtype"])
        if not ok:
            return "%s: the bytes differ from the inputs stored as %s" % (name, t["dtype"])
    at = 0
    for b, e, name in sorted(spans):
        if b != at:
            return "%s starts at %d, expected %d" % (name, b, at)
        at = e
    if at != len(body):
        return "the tensors end at %d of %d bytes" % (at, len(body))
    return "ok"


def cmd_hf(d, typ, mode, scale=0.02):
    tied = mode >= 1
    V, C, L, H, KV, I = 300, 32, 2, 4, 2, 48
    D = C // H
    cfg = {"architectures": ["Qwen2ForCausalLM" if typ == "qwen2" else "LlamaForCausalLM"], "model_type": typ,
           "vocab_size": V, "hidden_size": C, "num_hidden_layers": L, "num_attention_heads": H,
           "num_key_value_heads": KV, "intermediate_size": I, "max_position_embeddings": 128,
           "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": tied,
           "torch_dtype": "bfloat16", "rope_scaling": None, "use_sliding_window": False}
    rng = np.random.default_rng(5)
    shapes = [("model.embed_tokens.weight", (V, C))]
    for l in range(L):
        p = "model.layers.%d." % l
        shapes += [(p + "input_layernorm.weight", (C,)),
                   (p + "self_attn.q_proj.weight", (H * D, C)), (p + "self_attn.k_proj.weight", (KV * D, C)),
                   (p + "self_attn.v_proj.weight", (KV * D, C)), (p + "self_attn.o_proj.weight", (C, H * D)),
                   (p + "post_attention_layernorm.weight", (C,)), (p + "mlp.gate_proj.weight", (I, C)),
                   (p + "mlp.up_proj.weight", (I, C)), (p + "mlp.down_proj.weight", (C, I))]
        if typ == "qwen2":
            shapes += [(p + "self_attn.q_proj.bias", (H * D,)), (p + "self_attn.k_proj.bias", (KV * D,)),
                       (p + "self_attn.v_proj.bias", (KV * D,))]
    shapes.append(("model.norm.weight", (C,)))
    if not tied:
        shapes.append(("lm_head.weight", (V, C)))
    os.makedirs(d, exist_ok=True)
    with open(d + "/config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    def value(n, sh):  # norm weights near 1, the rest N(0, scale^2)
        if n.endswith("norm.weight") or n.endswith("layernorm.weight"):
            return (1 + 0.1 * rng.standard_normal(sh)).astype(np.float32)
        return (rng.standard_normal(sh) * scale).astype(np.float32)
    ts = [(n, "BF16", bf16_bits(value(n, sh))) for n, sh in shapes]
    if mode == 2:  # the tied head saved as well: the embedding's bytes (not a parameter of its own)
        ts.append(("lm_head.weight", "BF16", ts[0][2].copy()))
    write_file(d + "/model.safetensors", ts, {"format": "pt"})
    print(sum(int(np.prod(sh)) for _, sh in shapes))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        cmd_write(sys.argv[2])
    elif sys.argv[1] == "hf":
        cmd_hf(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]) if len(sys.argv) > 5 else 0.02)
    else:
        print(cmd_read(sys.argv[2], sys.argv[3]))
