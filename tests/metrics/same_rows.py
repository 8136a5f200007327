#!/usr/bin/python3
"""same_rows.py A.jsonl B.jsonl EPISODES [KEY,KEY...] — prints "ok" when both hold exactly
one row per episode 0..EPISODES-1 and their deterministic fields (default: every loss,
alpha, the learning rates, the gradient norm, the free steps; or the keys given) are
equal; else what differs."""
import json
import sys

KEYS = ("seq", "lr", "lr_alpha", "grad_norm", "free_steps", "loss", "loss_u", "loss_w", "alpha")
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
n = int(sys.argv[3])
if len(sys.argv) > 4:
    KEYS = tuple(sys.argv[4].split(","))
for name, rows in (("first", a), ("second", b)):
    eps = [r["episode"] for r in rows]
    if eps != list(range(n)):
        print("%s: episodes %s, want 0..%d once each" % (name, eps, n - 1))
        sys.exit()
for x, y in zip(a, b):
    for k in KEYS:
        if x.get(k) != y.get(k):
            print("episode %d: %s %r != %r" % (x["episode"], k, x.get(k), y.get(k)))
            sys.exit()
print("ok")
