"""gpu_torch.py — PyTorch's training throughput for the model bench/bench_gpu.c times.

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (default mode)")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script only")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu_torch: no CUDA device visible to PyTorch", file=sys.stderr)
        sys.exit(3)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
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
    n_no_wpe = n - model.wpe.weight.numel()
    flops_tok = 6 * n_no_wpe + 12 * a.layers * a.channels * a.seq
    tps = a.batch * a.seq * a.iters / dt
    tflops = tps * flops_tok / 1e12
    mfu = tflops / a.peak_tflops if a.peak_tflops > 0 else float("nan")
    print("gpu_torch torch=%s precision=%s layers=%d channels=%d heads=%d seq=%d vocab=%d "
          "batch=%d iters=%d params=%d ms_per_step=%.3f tokens_per_s=%.1f tflops=%.1f "
          "peak_tflops=%.1f mfu=%.4f peak_mem_gib=%.2f attention=%s mode=%s"
          % (torch.__version__, a.precision, a.layers, a.channels, a.heads, a.seq, a.vocab,
             a.batch, a.iters, n, 1e3 * dt / a.iters, tps, tflops, a.peak_tflops, mfu,
             torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
             "sdpa" if HAVE_SDPA else "manual", "compile" if a.compile else "eager"))


if __name__ == "__main__":
    main()
