#!/usr/bin/python3
"""trajectory.py — what a DMO run did, episode by episode: α per domain against each
domain's validation loss and the epochs of it u has seen (issue: look at why before
changing anything).

  trajectory.py STORE [--svg OUT.svg] [--split val|test] [--every N]

Reads the run's metrics rows (α and epochs per episode, `tandem metrics`) and evaluates
every kept state on the split (`tandem eval --state`, cached beside the store as
STORE.eval-SEQ-SPLIT.json), so the run must keep its states (checkpoint.keep: 0 and
checkpoint.every_episodes small). Prints one line per kept state and, with --svg, draws
three panels sharing the episode axis: α, the validation loss, the epochs seen.
"""
import argparse, json, os, subprocess, sys

TANDEM = os.environ.get("TANDEM", os.path.join(os.path.dirname(__file__), "..", "..", "tandem"))
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def out_of(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"trajectory.py: {' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def evaluate(store, seq, split):
    path = f"{store.rstrip('/')}.eval-{seq}-{split}.json"
    if not os.path.exists(path):
        text = out_of([TANDEM, "eval", store, "--state", str(seq), "--split", split, "--json"])
        with open(path, "w") as f:
            f.write(text)
    return json.load(open(path))


def panel(x0, y0, w, h, title, xs, series, names, ylabel):
    """An SVG group: a line per series over xs, axes with a few ticks, the title."""
    ys = [v for s in series for v in s if v is not None]
    lo, hi = min(ys), max(ys)
    if hi - lo < 1e-12:
        hi = lo + 1
    xmin, xmax = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    px = lambda x: x0 + 50 + (x - xmin) / (xmax - xmin) * (w - 70)
    py = lambda y: y0 + h - 30 - (y - lo) / (hi - lo) * (h - 60)
    out = [f'<g class="panel"><text x="{x0 + w / 2}" y="{y0 + 16}" text-anchor="middle" font-size="13">{title}</text>',
           f'<line x1="{px(xmin)}" y1="{py(lo)}" x2="{px(xmax)}" y2="{py(lo)}" stroke="#000"/>',
           f'<line x1="{px(xmin)}" y1="{py(lo)}" x2="{px(xmin)}" y2="{py(hi)}" stroke="#000"/>',
           f'<text x="{x0 + 12}" y="{y0 + h / 2}" font-size="11" transform="rotate(-90 {x0 + 12} {y0 + h / 2})" '
           f'text-anchor="middle">{ylabel}</text>']
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<text x="{px(xmin) - 4}" y="{py(v) + 4}" font-size="10" text-anchor="end">{v:.3g}</text>')
        e = xmin + (xmax - xmin) * k / 4
        out.append(f'<text x="{px(e)}" y="{py(lo) + 14}" font-size="10" text-anchor="middle">{e:.0f}</text>')
    for i, (s, n) in enumerate(zip(series, names)):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, s) if y is not None)
        c = COLOURS[i % len(COLOURS)]
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"><title>{n}</title></polyline>')
        out.append(f'<text x="{x0 + w - 15}" y="{y0 + 30 + 13 * i}" font-size="11" fill="{c}" text-anchor="end">{n}</text>')
    out.append("</g>")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--svg")
    ap.add_argument("--split", default="val")
    ap.add_argument("--every", type=int, default=1, help="evaluate every N-th kept state")
    ap.add_argument("--title", help="the run's name in the first panel's title (default: the store's last path part)")
    a = ap.parse_args()
    rows = [json.loads(l) for l in out_of([TANDEM, "metrics", a.store, "--format", "jsonl"]).splitlines() if l.strip()]
    by_seq = {r["seq"]: r for r in rows}
    seqs = sorted(int(f[:-3]) for f in os.listdir(os.path.join(a.store, "states")) if f.endswith(".mp"))
    seqs = [s for i, s in enumerate(seqs) if i % a.every == 0 or s == seqs[-1]]
    doms = list(rows[0]["alpha"]) if rows else []
    pts = []
    for s in seqs:
        r = by_seq.get(s)
        if r is None:
            continue
        ev = evaluate(a.store, s, a.split)
        pts.append((r["episode"] + 1, r["alpha"], {d: ev["domains"][d]["loss"] for d in doms}, r.get("epochs")))
    print(f"{'episode':>7s} | alpha " + " ".join(f"{d[:7]:>7s}" for d in doms) + f" | {a.split} loss " +
          " ".join(f"{d[:7]:>7s}" for d in doms) + " | epochs " + " ".join(f"{d[:7]:>7s}" for d in doms))
    for ep, al, vl, eps in pts:
        print(f"{ep:7d} | alpha " + " ".join(f"{al[d]:7.3f}" for d in doms) + f" | {a.split} loss " +
              " ".join(f"{vl[d]:7.3f}" for d in doms) + " | epochs " +
              " ".join(f"{eps[d]:7.2f}" if eps else "      -" for d in doms))
    if a.svg and pts:
        xs = [p[0] for p in pts]
        w, h = 760, 260
        body = panel(0, 0, w, h, f"α over the episodes ({a.title or os.path.basename(a.store.rstrip('/'))})", xs, [[p[1][d] for p in pts] for d in doms], doms, "α")
        body += panel(0, h, w, h, f"{a.split} loss per domain at the kept states", xs,
                      [[p[2][d] for p in pts] for d in doms], doms, "nats")
        if all(p[3] for p in pts):
            body += panel(0, 2 * h, w, h, "epochs of each domain's train tokens seen by u", xs,
                          [[p[3][d] for p in pts] for d in doms], doms, "epochs")
        with open(a.svg, "w") as f:
            f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{3 * h}" font-family="sans-serif">\n'
                    + "\n".join(body) + "\n</svg>\n")
        print(f"wrote {a.svg}", file=sys.stderr)


if __name__ == "__main__":
    main()
