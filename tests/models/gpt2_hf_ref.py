#!/usr/bin/python3
"""gpt2_hf_ref.py DIR TOKENS B T — the forward pass of a Hugging Face GPT-2 folder
(GPT2LMHeadModel's config.json and model.safetensors) in PyTorch, written as transformers
computes it: Conv1D linear layers (x @ W + b with W stored [in, out]), c_attn's output
split into q, k, v and then into heads, a causal softmax, gelu_new, LayerNorm eps from
the config, the head tied to transformer.wte. TOKENS holds B rows of T+1 uint32 tokens
(inputs 0..T-1, targets 1..T); prints the mean cross-entropy of the B*T targets. The
weights are read by qwen2_ref.py's own safetensors reader. For tests/test_hf_run.c."""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2_ref import read_safetensors  # noqa: E402


def main():
    d, tok_path, B, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    cfg = json.load(open(d + "/config.json"))
    assert cfg["model_type"] == "gpt2" and cfg["activation_function"] == "gelu_new"
    w = read_safetensors(d + "/model.safetensors")
    C, H, L, eps = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["layer_norm_epsilon"]
    tok = torch.from_numpy(np.fromfile(tok_path, dtype="<u4").astype(np.int64).reshape(B, T + 1))
    inp, tgt = tok[:, :T], tok[:, 1:]
    x = w["transformer.wte.weight"][inp] + w["transformer.wpe.weight"][torch.arange(T)]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        p = "transformer.h.%d." % l
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: [in, out]
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(C // H) + mask, dim=-1) @ v
        a = a.transpose(1, 2).reshape(B, T, C)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        f = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    logits = x @ w["transformer.wte.weight"].T
    loss = F.cross_entropy(logits.reshape(B * T, -1).double(), tgt.reshape(-1))
    print("%.9f" % loss.item())


if __name__ == "__main__":
    main()
