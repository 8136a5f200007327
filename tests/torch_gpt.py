"""torch_gpt.py — the GPT-2 of model/model.h built from PyTorch's own modules.

This is the independent reference for the C backends: it is deliberately NOT a port of
model/cpu.c. Every piece is a stock torch module (nn.Embedding, nn.LayerNorm,
nn.MultiheadAttention, nn.Linear, nn.GELU) and gradients come from autograd, so an
agreement between the two is evidence that both compute GPT-2, not that they share a bug.

The parameter order and names follow the comment at the top of model/model.h, so a flat
float32 vector written by the C side can be loaded here (load_flat) and gradients can be
returned in the same order (grads_flat). nn.MultiheadAttention's in_proj_weight [3C, C]
stacks the q, k, v projections row-wise and splits heads along the output dimension, which
is exactly our c_attn layout; its out_proj is our attn.c_proj.

Run with /usr/bin/python3 (Debian's python3-torch); see tests/torch_ref.py.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A pre-LayerNorm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, C, H):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = nn.MultiheadAttention(C, H, bias=True, batch_first=True)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x, causal_mask):
        h = self.ln_1(x)
        # need_weights=False: we only want the attended values (no head-averaged weights).
        a, _ = self.attn(h, h, h, attn_mask=causal_mask, need_weights=False)
        x = x + a
        x = x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))
        return x


class GPT(nn.Module):
    """GPT-2 with learned position embeddings and an output head tied to wte."""

    def __init__(self, V, ctx, L, H, C):
        super().__init__()
        assert C % H == 0
        self.V, self.ctx, self.L, self.H, self.C = V, ctx, L, H, C
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(ctx, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx):
        """Logits [B, T, V] for input tokens idx [B, T] (int64)."""
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)[None, :, :]
        # Boolean mask: True marks a key position a query may NOT attend to (the future).
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=idx.device), diagonal=1)
        for block in self.h:
            x = block(x, causal)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight)

    def named_flat(self):
        """(name, parameter) in model.h's order; the names are model.h's tensor names."""
        out = [("wte", self.wte.weight), ("wpe", self.wpe.weight)]
        for l, b in enumerate(self.h):
            p = "h.%d." % l
            out += [
                (p + "ln_1.weight", b.ln_1.weight),
                (p + "ln_1.bias", b.ln_1.bias),
                (p + "attn.c_attn.weight", b.attn.in_proj_weight),
                (p + "attn.c_attn.bias", b.attn.in_proj_bias),
                (p + "attn.c_proj.weight", b.attn.out_proj.weight),
                (p + "attn.c_proj.bias", b.attn.out_proj.bias),
                (p + "ln_2.weight", b.ln_2.weight),
                (p + "ln_2.bias", b.ln_2.bias),
                (p + "mlp.c_fc.weight", b.c_fc.weight),
                (p + "mlp.c_fc.bias", b.c_fc.bias),
                (p + "mlp.c_proj.weight", b.c_proj.weight),
                (p + "mlp.c_proj.bias", b.c_proj.bias),
            ]
        out += [("ln_f.weight", self.ln_f.weight), ("ln_f.bias", self.ln_f.bias)]
        return out

    def n_params(self):
        return sum(p.numel() for _, p in self.named_flat())

    @torch.no_grad()
    def load_flat(self, flat):
        """Copies a flat vector (model.h order, any float dtype) into the parameters."""
        flat = torch.as_tensor(flat)
        assert flat.numel() == self.n_params(), (flat.numel(), self.n_params())
        off = 0
        for _, p in self.named_flat():
            n = p.numel()
            p.copy_(flat[off:off + n].view_as(p))
            off += n

    @torch.no_grad()
    def params_flat(self):
        return torch.cat([p.detach().reshape(-1) for _, p in self.named_flat()])

    @torch.no_grad()
    def grads_flat(self):
        """Gradients in model.h order; zeros for a parameter autograd did not reach."""
        return torch.cat([
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
            for _, p in self.named_flat()
        ])

    def param_groups(self, weight_decay):
        """AdamW groups as model.h's `decay` flag: decay on 2-D tensors only."""
        named = self.named_flat()
        return [
            {"params": [p for _, p in named if p.dim() == 2], "weight_decay": weight_decay},
            {"params": [p for _, p in named if p.dim() != 2], "weight_decay": 0.0},
        ]


def domain_losses(model, tokens, domain, M):
    """Per-domain mean token cross-entropy, as model.h's forward defines it.

    tokens: int64 [B, T+1] (inputs are [:, :T], targets [:, 1:]); domain: int64 [B].
    Returns a list of M scalar tensors; a domain with no sequence gets a constant 0
    (it contributes nothing to the gradient).
    """
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:]
    V = logits.shape[-1]
    out = []
    for m in range(M):
        sel = (domain == m).nonzero(as_tuple=True)[0]
        if sel.numel() == 0:
            out.append(torch.zeros((), dtype=logits.dtype))
        else:
            out.append(F.cross_entropy(logits[sel].reshape(-1, V), targets[sel].reshape(-1)))
    return out


def weighted_loss(losses, coef):
    """sum_m coef[m] * losses[m], the objective whose gradient backward returns."""
    total = losses[0] * float(coef[0])
    for m in range(1, len(losses)):
        total = total + losses[m] * float(coef[m])
    return total


def make_adamw(model, lr, beta1, beta2, eps, weight_decay):
    """torch.optim.AdamW on model.h's decay groups (single-tensor path: deterministic)."""
    return torch.optim.AdamW(model.param_groups(weight_decay), lr=lr, betas=(beta1, beta2),
                             eps=eps, foreach=False)


def gpt2_init(model, seed=0):
    """GPT-2 initialisation in torch (for benchmarks; the C side has its own RNG):
    weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)), biases 0, LayerNorm gain 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_flat():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * model.L) if name.endswith("c_proj.weight") else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif ".ln_" in name or name.startswith("ln_"):
                p.fill_(1.0 if name.endswith(".weight") else 0.0)
            else:
                p.zero_()
