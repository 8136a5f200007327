"""gpu_torch.py — PyTorch's training throughput for the model bench/bench_gpu.c times.

--arch qwen2: the Llama / Qwen2 family instead (RMSNorm, RoPE, grouped-query attention
with q/k/v biases, SwiGLU, tied head), by default in Qwen2-0.5B's shape, as bench_gpu
--arch qwen2 builds it; FLOPs 6 N + 12 L C T with every parameter counted.

Same GPT-2 (model/model.h: learned positions, pre-LayerNorm blocks, GELU(tanh) MLP, tied
head), same batch, same step (forward, backward, clip_grad_norm_(1.0), AdamW) on one
fixed batch, in PyTorch eager on the GPU: float32 master weights, bf16 autocast, and
F.scaled_dot_product_attention(is_causal=True) (flash attention where PyTorch has it).
Prints one machine-readable line, like bench_gpu:

    gpu_torch torch=2.x precision=bf16 layers=12 channels=768 heads=12 seq=1024 vocab=50257
        batch=16 iters=20 params=... ms_per_step=... tokens_per_s=... tflops=...
        peak_tflops=... mfu=...

FLOPs per token as bench_gpu.c: 6 N + 12 L C T with N the parameters without wpe.
--precision fp32 runs without autocast (TF32 off, like tandem's fp32).
--compile wraps the model in torch.compile (its default mode, Inductor): the row a user
choosing between tandem and PyTorch compares against; compilation happens in the warm-up
steps (at least 3), not in the timed ones, and the line says mode=compile.
Run with the GPU machine's python3 (bench/gpu.sh does).
"""

import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.H, C // self.H).transpose(1, 2)
        k = k.view(B, T, self.H, C // self.H).transpose(1, 2)
        v = v.view(B, T, self.H, C // self.H).transpose(1, 2)
        if HAVE_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0 (only for smoke tests off the GPU machine)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, V, ctx, L, H, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(ctx, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif "ln" in name and name.endswith("weight"):
                nn.init.ones_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))[None]
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * y.to(x.dtype)


def rope(x, cos, sin):
    """Rotary embedding as Hugging Face's Llama / Qwen2 (rotate_half over head_dim)."""
    h = x.size(-1) // 2
    rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    return x * cos + rot * sin


class QwenBlock(nn.Module):
    def __init__(self, C, H, Hkv, I, eps):
        super().__init__()
        self.H, self.Hkv, self.D = H, Hkv, C // H
        self.input_layernorm = RMSNorm(C, eps)
        self.q_proj = nn.Linear(C, H * self.D)
        self.k_proj = nn.Linear(C, Hkv * self.D)
        self.v_proj = nn.Linear(C, Hkv * self.D)
        self.o_proj = nn.Linear(H * self.D, C, bias=False)
        self.post_attention_layernorm = RMSNorm(C, eps)
        self.gate_proj = nn.Linear(C, I, bias=False)
        self.up_proj = nn.Linear(C, I, bias=False)
        self.down_proj = nn.Linear(I, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, self.H, self.D).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.Hkv, self.D).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.Hkv, self.D).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.H // self.Hkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if HAVE_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.D)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.o_proj(y.transpose(1, 2).contiguous().view(B, T, self.H * self.D))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Qwen2(nn.Module):
    """The Llama / Qwen2 family as tandem's gpu/cuda_hf.cu runs it (model/hf_config.h):
    RMSNorm, RoPE (theta 1e6), grouped-query attention with q/k/v biases, SwiGLU, a tied
    head."""

    def __init__(self, V, T, L, H, Hkv, C, I, eps=1e-6, theta=1e6):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList([QwenBlock(C, H, Hkv, I, eps) for _ in range(L)])
        self.norm = RMSNorm(C, eps)
        D = C // H
        inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos().float()[None, None], persistent=False)
        self.register_buffer("sin", ang.sin().float()[None, None], persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("norm.weight"):
                nn.init.ones_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        x = self.embed_tokens(idx)
        for b in self.layers:
            x = b(x, self.cos, self.sin)
        logits = F.linear(self.norm(x), self.embed_tokens.weight)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=["gpt2", "qwen2"], default="gpt2")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--channels", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--intermediate", type=int, default=None)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=None)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (default mode)")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script only")
    a = ap.parse_args()
    # defaults as bench_gpu's: GPT-2 124M, or Qwen2-0.5B's shape
    q = a.arch == "qwen2"
    a.layers = a.layers or (24 if q else 12)
    a.channels = a.channels or (896 if q else 768)
    a.heads = a.heads or (14 if q else 12)
    a.vocab = a.vocab or (151936 if q else 50257)
    a.kv_heads = a.kv_heads or (2 if q else a.heads)
    a.intermediate = a.intermediate or 4864
    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu_torch: no CUDA device visible to PyTorch", file=sys.stderr)
        sys.exit(3)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    if q:
        model = Qwen2(a.vocab, a.seq, a.layers, a.heads, a.kv_heads, a.channels, a.intermediate).to(dev)
    else:
        model = GPT(a.vocab, a.seq, a.layers, a.heads, a.channels).to(dev)
    model.train()
    run = model
    if a.compile:
        if not hasattr(torch, "compile"):
            print("gpu_torch: this PyTorch (%s) has no torch.compile" % torch.__version__, file=sys.stderr)
            sys.exit(3)
        run = torch.compile(model)
        a.warmup = max(a.warmup, 3)  # the first steps compile forward and backward
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": other, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    params = list(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        if a.precision == "bf16":
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                loss = run(x, y)
        else:
            loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        step()
    sync()
    dt = time.perf_counter() - t0
    n = sum(p.numel() for p in params)
    n_no_wpe = n - (model.wpe.weight.numel() if not q else 0)
    flops_tok = 6 * n_no_wpe + 12 * a.layers * a.channels * a.seq
    tps = a.batch * a.seq * a.iters / dt
    tflops = tps * flops_tok / 1e12
    mfu = tflops / a.peak_tflops if a.peak_tflops > 0 else float("nan")
    print("gpu_torch arch=%s torch=%s precision=%s layers=%d channels=%d heads=%d seq=%d vocab=%d "
          "batch=%d iters=%d params=%d ms_per_step=%.3f tokens_per_s=%.1f tflops=%.1f "
          "peak_tflops=%.1f mfu=%.4f peak_mem_gib=%.2f attention=%s mode=%s"
          % (a.arch, torch.__version__, a.precision, a.layers, a.channels, a.heads, a.seq, a.vocab,
             a.batch, a.iters, n, 1e3 * dt / a.iters, tps, tflops, a.peak_tflops, mfu,
             torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
             "sdpa" if HAVE_SDPA else "manual", "compile" if a.compile else "eager"))


if __name__ == "__main__":
    main()
