"""torch_ref.py — PyTorch answers for tests/test_torch.c.

Usage:
    /usr/bin/python3 tests/torch_ref.py IN OUT     answer one exchange file
    /usr/bin/python3 tests/torch_ref.py --selftest checks the reference itself

IN (little-endian, written by the C test):
    8 bytes magic b"TDMREF1\\0"; int32 V, ctx, L, H, C, B, T, M, steps;
    float32 lr, beta1, beta2, eps, weight_decay, clip; float64 coef[M]; int32 domain[B];
    int32 tokens[B*(T+1)]; float32 params[n_params] (model/model.h order).
OUT:
    float64 loss[M]            forward at the initial params
    float32 grads[n_params]    gradient of sum_m coef[m]*loss[m] at the initial params
    steps x float64 loss[M]    before each step of: forward, backward, clip_grad_norm_(clip),
                               AdamW step (same batch every step)
    float64 loss[M]            after the last step
    float32 params[n_params]   after the last step

Everything is computed in float32 on the CPU, single-threaded, with
torch.use_deterministic_algorithms(True). The model is tests/torch_gpt.py.
"""

import os
import struct
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt  # noqa: E402

MAGIC = b"TDMREF1\0"


def read_input(path):
    """Parses an exchange file into a dict; raises ValueError on a malformed one."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != MAGIC:
        raise ValueError("%s: bad magic %r" % (path, buf[:8]))
    off = 8
    V, ctx, L, H, C, B, T, M, steps = struct.unpack_from("<9i", buf, off)
    off += 36
    lr, beta1, beta2, eps, wd, clip = struct.unpack_from("<6f", buf, off)
    off += 24

    def take(dtype, n):
        nonlocal off
        a = np.frombuffer(buf, dtype=dtype, count=n, offset=off)
        off += a.nbytes
        return a

    coef = take("<f8", M)
    domain = take("<i4", B)
    tokens = take("<i4", B * (T + 1)).reshape(B, T + 1)
    model = torch_gpt.GPT(V, ctx, L, H, C)
    n = model.n_params()
    params = take("<f4", n)
    if off != len(buf):
        raise ValueError("%s: %d bytes, expected %d for %d parameters" % (path, len(buf), off, n))
    return dict(V=V, ctx=ctx, L=L, H=H, C=C, B=B, T=T, M=M, steps=steps, lr=lr, beta1=beta1,
                beta2=beta2, eps=eps, wd=wd, clip=clip, coef=coef, domain=domain,
                tokens=tokens, params=params, model=model)


def answer(inp):
    """Computes OUT's content (a bytes object) for a parsed input."""
    model = inp["model"].float()
    model.load_flat(torch.from_numpy(inp["params"].copy()))
    tokens = torch.from_numpy(inp["tokens"].astype(np.int64))
    domain = torch.from_numpy(inp["domain"].astype(np.int64))
    coef, M = inp["coef"], inp["M"]
    chunks = []

    def losses_bytes(losses):
        return np.array([float(x) for x in losses], dtype="<f8").tobytes()

    # Forward and gradient at the initial parameters.
    model.zero_grad(set_to_none=True)
    losses = torch_gpt.domain_losses(model, tokens, domain, M)
    torch_gpt.weighted_loss(losses, coef).backward()
    chunks.append(losses_bytes(losses))
    chunks.append(model.grads_flat().numpy().astype("<f4").tobytes())

    # AdamW steps with clipping, the training loop of the free phase on one batch.
    opt = torch_gpt.make_adamw(model, inp["lr"], inp["beta1"], inp["beta2"], inp["eps"],
                               inp["wd"])
    params = [p for _, p in model.named_flat()]
    for _ in range(inp["steps"]):
        opt.zero_grad(set_to_none=True)
        losses = torch_gpt.domain_losses(model, tokens, domain, M)
        torch_gpt.weighted_loss(losses, coef).backward()
        chunks.append(losses_bytes(losses))
        torch.nn.utils.clip_grad_norm_(params, inp["clip"])
        opt.step()
    with torch.no_grad():
        losses = torch_gpt.domain_losses(model, tokens, domain, M)
    chunks.append(losses_bytes(losses))
    chunks.append(model.params_flat().numpy().astype("<f4").tobytes())
    return b"".join(chunks)


def manual_attention(x, w, b, H):
    """Causal attention written out by hand with model.h's c_attn layout (rows q, k, v;
    head h uses dims h*C/H..), without the output projection."""
    B, T, C = x.shape
    d = C // H
    qkv = x @ w.t() + b
    q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
    out = torch.empty_like(q)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    for h in range(H):
        sl = slice(h * d, (h + 1) * d)
        att = (q[..., sl] @ k[..., sl].transpose(1, 2)) / d ** 0.5
        att = att.masked_fill(causal, float("-inf")).softmax(-1)
        out[..., sl] = att @ v[..., sl]
    return out


def selftest():
    """Validates the reference itself, in float64: (1) nn.MultiheadAttention with our
    weights equals hand-written attention in model.h's layout; (2) autograd's gradient of
    sum coef*loss matches central finite differences on a few entries of every tensor;
    (3) the exchange-file path runs end to end. Exits non-zero on failure."""
    torch.manual_seed(0)
    V, ctx, L, H, C, B, T, M = 16, 8, 2, 2, 8, 4, 6, 3
    model = torch_gpt.GPT(V, ctx, L, H, C).double()
    torch_gpt.gpt2_init(model, seed=1)
    # Move LayerNorms and biases off their init so they matter, and enlarge the weights
    # so that attention is far from uniform and GELU far from linear.
    with torch.no_grad():
        for name, p in model.named_flat():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
            else:
                p.mul_(10.0)
    ok = True

    blk = model.h[0]
    x = torch.randn(B, T, C, dtype=torch.float64)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    ref = manual_attention(x, blk.attn.in_proj_weight, blk.attn.in_proj_bias, H)
    ref = ref @ blk.attn.out_proj.weight.t() + blk.attn.out_proj.bias
    got, _ = blk.attn(x, x, x, attn_mask=causal, need_weights=False)
    err = (got - ref).abs().max().item()
    print("attention layout: max |MHA - manual| = %.3e" % err)
    ok &= err < 1e-12

    tokens = torch.randint(0, V, (B, T + 1))
    domain = torch.tensor([0, 2, 0, 2])  # domain 1 absent: its loss is 0, no gradient
    coef = [0.5, 1.3, 0.2]

    def objective():
        return torch_gpt.weighted_loss(torch_gpt.domain_losses(model, tokens, domain, M), coef)

    model.zero_grad(set_to_none=True)
    objective().backward()
    # h balances truncation error (~h^2) against the rounding of the loss (~1e-16/h); the
    # error is measured against the tensor's gradient scale, since single entries can be
    # near zero and their relative error is then all rounding.
    h, worst = 1e-4, 0.0
    with torch.no_grad():
        for name, p in model.named_flat():
            flat, g = p.view(-1), p.grad.view(-1)
            scale = g.abs().max().item()
            for j in torch.randperm(flat.numel())[:3].tolist():
                keep = flat[j].item()
                flat[j] = keep + h
                up = objective().item()
                flat[j] = keep - h
                down = objective().item()
                flat[j] = keep
                fd = (up - down) / (2 * h)
                rel = abs(fd - g[j].item()) / max(abs(fd), scale)
                worst = max(worst, rel)
                if rel > 1e-6:
                    print("  %s[%d]: autograd %.9g, finite difference %.9g" % (name, j, g[j], fd))
                    ok = False
    print("finite differences (float64): worst relative error %.3e" % worst)

    # End to end through the file format, in float32.
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in"), os.path.join(d, "out")
        steps = 2
        n = model.n_params()
        with open(src, "wb") as f:
            f.write(MAGIC + struct.pack("<9i", V, ctx, L, H, C, B, T, M, steps))
            f.write(struct.pack("<6f", 1e-3, 0.9, 0.95, 1e-8, 0.01, 1.0))
            f.write(np.array(coef, "<f8").tobytes() + domain.numpy().astype("<i4").tobytes())
            f.write(tokens.numpy().astype("<i4").tobytes())
            f.write(model.params_flat().numpy().astype("<f4").tobytes())
        main([src, dst])
        size = os.path.getsize(dst)
        want = 8 * M * (steps + 2) + 4 * n * 2
        print("exchange file: %d bytes (expected %d)" % (size, want))
        ok &= size == want
        l0 = np.fromfile(dst, "<f8", count=M)
        print("losses at init: %s (domain 1 absent -> 0)" % l0)
        ok &= l0[1] == 0.0 and l0[0] > 0 and l0[2] > 0
    print("selftest: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main(argv):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if argv == ["--selftest"]:
        return selftest()
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = answer(read_input(argv[0]))
    tmp = argv[1] + ".part"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, argv[1])  # the C side never reads a half-written answer
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
