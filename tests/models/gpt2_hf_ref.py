#!/usr/bin/python3
"""gpt2_hf_ref.py — a Hugging Face GPT-2 folder (GPT2LMHeadModel's config.json and
model.safetensors) in PyTorch, for tests/test_hf_run.c.

  gpt2_hf_ref.py DIR TOKENS B T
        the forward pass written as transformers computes it: Conv1D linear layers (x @ W
        + b with W stored [in, out]), c_attn's output split into q, k, v and then into
        heads, a causal softmax, gelu_new, LayerNorm eps from the config, the head tied to
        wte; tensor names with the "transformer." prefix or without. TOKENS holds B rows of
        T+1 uint32 tokens (inputs 0..T-1, targets 1..T); prints the mean cross-entropy of
        the B*T targets. The weights are read by qwen2_ref.py's own safetensors reader.
  gpt2_hf_ref.py write DIR V C L H P DTYPE SEED
        a small GPT-2 folder as the Hub's original GPT-2 files are named (no prefix, the
        causal-mask buffers h.N.attn.bias [1, 1, P, P] beside the weights): vocab V, n_embd
        C, n_layer L, n_head H, n_positions P, weights of DTYPE (F32, BF16, F16), random
        N(0, 0.1^2) (LayerNorm weights near 1) from SEED; written with st_ref.py's writer.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2_ref import read_safetensors  # noqa: E402
from st_ref import bf16_bits, write_file  # noqa: E402


def main():
    d, tok_path, B, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    cfg = json.load(open(d + "/config.json"))
    assert cfg["model_type"] == "gpt2" and cfg["activation_function"] == "gelu_new"
    w = {k[len("transformer."):] if k.startswith("transformer.") else k: v
         for k, v in read_safetensors(d + "/model.safetensors").items()}
    C, H, L, eps = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["layer_norm_epsilon"]
    tok = torch.from_numpy(np.fromfile(tok_path, dtype="<u4").astype(np.int64).reshape(B, T + 1))
    inp, tgt = tok[:, :T], tok[:, 1:]
    x = w["wte.weight"][inp] + w["wpe.weight"][torch.arange(T)]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        p = "h.%d." % l
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
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], eps)
    logits = x @ w["wte.weight"].T
    loss = F.cross_entropy(logits.reshape(B * T, -1).double(), tgt.reshape(-1))
    print("%.9f" % loss.item())


def write(d, V, C, L, H, P, dtype, seed):
    rng = np.random.default_rng(seed)
    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": P,
           "n_ctx": P, "n_embd": C, "n_layer": L, "n_head": H, "n_inner": None,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "resid_pdrop": 0.1,
           "embd_pdrop": 0.1, "attn_pdrop": 0.1, "scale_attn_weights": True, "use_cache": True}
    json.dump(cfg, open(d + "/config.json", "w"), indent=2)
    shapes = [("wte.weight", (V, C)), ("wpe.weight", (P, C))]
    for l in range(L):
        p = "h.%d." % l
        shapes += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)), (p + "attn.bias", None),
                   (p + "attn.c_attn.weight", (C, 3 * C)), (p + "attn.c_attn.bias", (3 * C,)),
                   (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
                   (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
                   (p + "mlp.c_fc.weight", (C, 4 * C)), (p + "mlp.c_fc.bias", (4 * C,)),
                   (p + "mlp.c_proj.weight", (4 * C, C)), (p + "mlp.c_proj.bias", (C,))]
    shapes += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    tensors = []
    for name, shape in shapes:
        if shape is None:  # the causal mask transformers keeps as a buffer
            tensors.append((name, "F32", np.tril(np.ones((P, P), dtype=np.float32)).reshape(1, 1, P, P)))
            continue
        a = rng.normal(0.0, 0.1, size=shape).astype(np.float32)
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            a += 1.0
        if dtype == "BF16":
            tensors.append((name, "BF16", bf16_bits(a)))
        elif dtype == "F16":
            tensors.append((name, "F16", a.astype("<f2")))
        else:
            tensors.append((name, "F32", a.astype("<f4")))
    write_file(d + "/model.safetensors", tensors, {"format": "pt"})


if __name__ == "__main__":
    if sys.argv[1] == "write":
        a = sys.argv[2:]
        write(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]), int(a[5]), a[6], int(a[7]))
    else:
        main()
