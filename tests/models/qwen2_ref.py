#!/usr/bin/python3
"""qwen2_ref.py DIR TOKENS B T OUT [GRADS] — the Qwen2 / Llama forward pass in PyTorch, written as
transformers' Qwen2ForCausalLM / LlamaForCausalLM compute it (RMSNorm in float32,
rotate_half RoPE, repeat_kv for grouped-query attention, a causal softmax, SwiGLU), on the
folder's config.json and safetensors weights read by this file's own reader. TOKENS holds
B rows of T+1 uint32 tokens (inputs 0..T-1, targets 1..T). Writes the logits [B*T, V] as
float32 to OUT and prints the mean cross-entropy; with GRADS, autograd's gradient of that
loss with respect to every weight, float32, concatenated in tandem's order (the embedding,
then per layer input_layernorm, q (weight, bias), k, v, o, post_attention_layernorm, gate,
up, down; the final norm; lm_head when untied). For tests/test_qwen2.c."""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = body[b:e]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4").copy()
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        else:
            raise SystemExit("dtype " + t["dtype"])
        out[name] = torch.from_numpy(a.reshape(t["shape"]))
    return out


def rmsnorm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def main():
    d, tok_path, B, T, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    cfg = json.load(open(d + "/config.json"))
    w = read_safetensors(d + "/model.safetensors")
    for t in w.values():
        t.requires_grad_(True)
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    D = cfg.get("head_dim", C // H)
    eps, theta = cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0)
    bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
    toks = torch.from_numpy(np.fromfile(tok_path, dtype="<u4").astype(np.int64).reshape(B, T + 1))
    inp, tgt = toks[:, :T], toks[:, 1:]
    x = w["model.embed_tokens.weight"][inp]  # [B, T, C]
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    pos = torch.arange(T).float()
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()  # [T, D]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = F.linear(h, w[p + "self_attn.q_proj.weight"], w[p + "self_attn.q_proj.bias"] if bias else None)
        k = F.linear(h, w[p + "self_attn.k_proj.weight"], w[p + "self_attn.k_proj.bias"] if bias else None)
        v = F.linear(h, w[p + "self_attn.v_proj.weight"], w[p + "self_attn.v_proj.bias"] if bias else None)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, KV, D).transpose(1, 2)
        v = v.view(B, T, KV, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = q @ k.transpose(2, 3) / (D ** 0.5) + mask
        a = torch.softmax(s, dim=-1) @ v  # [B, H, T, D]
        a = a.transpose(1, 2).reshape(B, T, H * D)
        x = x + F.linear(a, w[p + "self_attn.o_proj.weight"])
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + F.linear(F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"])) * F.linear(h, w[p + "mlp.up_proj.weight"]),
                         w[p + "mlp.down_proj.weight"])
    x = rmsnorm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    logits = F.linear(x, head).reshape(B * T, -1)
    loss = F.cross_entropy(logits, tgt.reshape(-1))
    logits.detach().numpy().astype("<f4").tofile(out)
    print("%.9f" % loss.item())
    if len(sys.argv) > 6:
        loss.backward()
        names = ["model.embed_tokens.weight"]
        for l in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % l
            names.append(p + "input_layernorm.weight")
            for proj in ("q", "k", "v"):
                names.append(p + "self_attn.%s_proj.weight" % proj)
                if bias:
                    names.append(p + "self_attn.%s_proj.bias" % proj)
            names += [p + "self_attn.o_proj.weight", p + "post_attention_layernorm.weight",
                      p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"]
        names.append("model.norm.weight")
        if not cfg.get("tie_word_embeddings", False):
            names.append("lm_head.weight")
        np.concatenate([w[n].grad.numpy().astype("<f4").ravel() for n in names]).tofile(sys.argv[6])


if __name__ == "__main__":
    main()
