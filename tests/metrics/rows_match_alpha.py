#!/usr/bin/python3
"""rows_match_alpha.py METRICS.jsonl ALPHA.json [DAMAGED] — prints "ok" when a run's
metrics rows (`tandem metrics STORE --format jsonl`) agree with its α records (`tandem
alpha STORE --format json`): exactly one row per episode 0..n-1, n the number of α
records (any n for a run without them), and each row's loss_u, loss_w and alpha equal to
its episode's record (loss_u, loss_w, alpha_next). Else what differs: a row that a stale
or replaced writer left behind, a hole, or a duplicate. DAMAGED lists episodes (comma
separated) whose row the caller damaged or deleted on purpose: those may be missing (a
row is written once, with its episode, and nothing recomputes a finished one)."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
text = open(sys.argv[2]).read().strip()
recs = json.loads(text) if text else []
damaged = {int(x) for x in sys.argv[3].split(",") if x} if len(sys.argv) > 3 else set()
eps = [r["episode"] for r in rows]
n = len(recs) if recs else len(rows) + len(damaged)
if [t for t in eps if t not in damaged] != [t for t in range(n) if t not in damaged] or len(set(eps)) != len(eps):
    print("rows for episodes %s, want 0..%d once each (%d alpha records)" % (eps, n - 1, len(recs)))
    sys.exit()
for row in rows:
    if not recs:
        break
    rec = recs[row["episode"]]
    for rk, ak in (("loss_u", "loss_u"), ("loss_w", "loss_w"), ("alpha", "alpha_next")):
        if row.get(rk) != rec.get(ak):
            print("episode %d: the row's %s %r, the alpha record's %s %r" % (row["episode"], rk, row.get(rk), ak,
                                                                            rec.get(ak)))
            sys.exit()
print("ok")
