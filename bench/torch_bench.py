"""torch_bench.py — PyTorch's training throughput for the model bench/bench_cpu.c times.

Same model (tests/torch_gpt.py: the GPT-2 of model/model.h), same batch shape, same
thread count, same step: forward, backward, clip_grad_norm_(1.0), AdamW, on one fixed
batch in float32 on the CPU. Prints one machine-readable line, like bench_cpu:

    torch_bench torch=1.13.0 layers=4 channels=256 heads=4 seq=128 vocab=256 batch=16
        threads=1 iters=10 params=... ms_per_step=... tokens_per_s=...

Run with /usr/bin/python3 (Debian's python3-torch); bench/cpu.sh does.
"""

import argparse
import os
import sys
import time

import torch

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import torch_gpt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()

    # Intra-op and inter-op pools both at the requested size, so neither side of the
    # comparison gets more cores than the other.
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(a.threads)
    torch.manual_seed(1)

    model = torch_gpt.GPT(a.vocab, a.seq, a.layers, a.heads, a.channels)
    torch_gpt.gpt2_init(model, seed=1)
    model.train()
    opt = torch_gpt.make_adamw(model, 1e-4, 0.9, 0.95, 1e-8, 0.01)
    params = [p for _, p in model.named_flat()]
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    domain = torch.zeros(a.batch, dtype=torch.int64)

    def step():
        opt.zero_grad(set_to_none=True)
        (loss,) = torch_gpt.domain_losses(model, tokens, domain, 1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        step()
    dt = time.perf_counter() - t0
    print("torch_bench torch=%s layers=%d channels=%d heads=%d seq=%d vocab=%d batch=%d "
          "threads=%d iters=%d params=%d ms_per_step=%.3f tokens_per_s=%.1f"
          % (torch.__version__, a.layers, a.channels, a.heads, a.seq, a.vocab, a.batch,
             a.threads, a.iters, model.n_params(), 1e3 * dt / a.iters,
             a.batch * a.seq * a.iters / dt))


if __name__ == "__main__":
    main()
