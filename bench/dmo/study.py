#!/usr/bin/python3
"""study.py — TANDEM's α* against fixed-mixture baselines on one corpus, several seeds.

The protocol of `tandem compare`, spread over seeds and run in parallel lanes: for every
DMO seed s a TANDEM run (run.seed = s, each variant's --set values) whose α* (`tandem
mixture`) trains one final run per final seed f (run.seed = 1000 + f); the baselines —
Uniform, Natural, UniMax and any --fixed mixture — train one final run per final seed.
Every final run is evaluated on the test split (`tandem eval`): per-domain loss and
Average = exp(mean loss), and its epochs per domain come from its last metrics row.
Runs are stores under WORK, so an interrupted study resumes (a finished run reports at
once); LANES jobs at a time with run.threads = THREADS each.

  study.py --work DIR --base base.yaml [--dmo-seeds 1,2,3] [--final-seeds 1,2,3] \\
           [--variant NAME "k=v k=v"]... [--fixed NAME "k=v ..."]... [--lanes 2] \\
           [--threads 1] [--alpha-window 0.1[,0,...]] [--curves] [--json OUT]

Without --variant the study has one, "tandem", with the config's own settings. --curves
keeps every state of the Uniform runs and evaluates them: whether Uniform's test loss
rose before the end on a domain (overfitting; bench/dmo.sh's heavy regime must show it).
The table gives each mixture's seed means; the ratios are of seed means (TANDEM's mean
Average over all its DMO × final seeds against the baseline's over its final seeds).
"""
import argparse, itertools, json, math, os, queue, statistics, subprocess, sys, threading

TANDEM = os.environ.get("TANDEM", os.path.join(os.path.dirname(__file__), "..", "..", "tandem"))
BASELINES = [("uniform", "data.mixture=uniform"), ("natural", "data.mixture=natural"),
             ("unimax", "data.mixture=unimax")]


def run(cmd, log):
    with open(log, "a") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode} (see {log})")


def out_of(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def tandem_run(work, name, base, sets, threads):
    store = os.path.join(work, name)
    args = [TANDEM, "run", base, "--store", store, "--quiet", "--set", f"run.threads={threads}"]
    for s in sets:
        args += ["--set", s]
    run(args, os.path.join(work, name + ".log"))
    return store


def cached_json(path, cmd):
    if not os.path.exists(path):
        text = out_of(cmd)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    with open(path) as f:
        return json.load(f) if path.endswith(".json") else f.read()


def evaluate(work, store, name, state=None):
    tag = f".s{state}" if state is not None else ""
    cmd = [TANDEM, "eval", store, "--json"] + (["--state", str(state)] if state is not None else [])
    return cached_json(os.path.join(work, f"{name}{tag}.eval.json"), cmd)


def rows_of(store):
    return [json.loads(l) for l in out_of([TANDEM, "metrics", store, "--format", "jsonl"]).splitlines()
            if l.strip()]


def epochs(store):
    """Epochs per domain at the end of a run (its last metrics row), or None."""
    rows = rows_of(store)
    return rows[-1].get("epochs") if rows else None


def cost(store):
    """(seconds of its episodes, episodes whose probe ran twins, episodes) of a run, from its
    metrics rows (episode_s: an episode's steps and commits, not its row); a pinned
    episode's row has no loss_u (steps.h, step_pinned)."""
    rows = rows_of(store)
    return (sum(r.get("episode_s", 0) for r in rows), sum("loss_u" in r for r in rows), len(rows))


def mixture_file(work, store, window):
    out = os.path.join(work, os.path.basename(store) + f".mix{window}.yaml")
    if not os.path.exists(out):
        out_of([TANDEM, "mixture", store, "--out", out, "--last-fraction", str(window if window > 0 else 1e-9)])
    return out


def read_mixture(path):
    mix, on = {}, False
    for line in open(path):
        if line.startswith("mixture:"):
            on = True
        elif on and line.startswith("  ") and ":" in line:
            k, v = line.strip().rsplit(":", 1)  # the name is quoted (domain names have no '"')
            mix[k.strip().strip('"')] = float(v)
    return mix


def curve(work, store, name):
    """Test loss per domain at every kept state of a run, in order."""
    seqs = sorted(int(f[:-3]) for f in os.listdir(os.path.join(store, "states")) if f.endswith(".mp"))
    return [(s, {d: v["loss"] for d, v in evaluate(work, store, name, s)["domains"].items()}) for s in seqs]


def study(a):
    os.makedirs(a.work, exist_ok=True)
    dmo_seeds = [int(s) for s in a.dmo_seeds.split(",")]
    final_seeds = [int(s) for s in a.final_seeds.split(",")]
    variants = a.variant or [("tandem", "")]
    windows = [float(w) for w in a.alpha_window.split(",")]
    fixed = BASELINES + [(n, s) for n, s in a.fixed]
    jobs, order, lock = queue.PriorityQueue(), itertools.count(), threading.Lock()
    finals, alphas, curves, errors, costs = {}, {}, {}, [], {}

    def put(prio, fn, args):
        jobs.put((prio, next(order), fn, args))

    def final(mixname, fseed, msets, dseed=None):
        name = f"final-{mixname}-f{fseed}" + (f"-s{dseed}" if dseed is not None else "")
        extra = ["checkpoint.keep=0", "checkpoint.every_episodes=25"] if a.curves and mixname == "uniform" else []
        st = tandem_run(a.work, name, a.base, [f"run.seed={1000 + fseed}", "run.mode=fixed"] + msets + extra,
                        a.threads)
        ev = evaluate(a.work, st, name)
        ep = epochs(st)
        cv = curve(a.work, st, name) if extra else None
        c = cost(st)
        with lock:
            finals[(mixname, dseed, fseed)] = (ev, ep)
            costs[("final", mixname, dseed, fseed)] = c
            if cv:
                curves[fseed] = cv
        print(f"  {name}: Average {ev['average_ppl']:.4f}", flush=True)

    def dmo(vname, vsets, dseed):
        name = f"dmo-{vname}-s{dseed}"
        st = tandem_run(a.work, name, a.base, [f"run.seed={dseed}", "run.mode=tandem"] + vsets.split(), a.threads)
        c = cost(st)
        with lock:
            costs[("dmo", vname, dseed)] = c
        for w in windows:  # α* taken from the trajectory in each way asked: one variant each
            tag = vname if len(windows) == 1 else f"{vname}@w{w:g}"
            mix = mixture_file(a.work, st, w)
            with lock:
                alphas[(tag, dseed)] = read_mixture(mix)
            print(f"  {name}: alpha* ({tag}) " + " ".join(f"{k} {v:.3f}" for k, v in alphas[(tag, dseed)].items()),
                  flush=True)
            for f in final_seeds:
                put(0, final, (tag, f, ["data.mixture=file", f"data.mixture_file={mix}"], dseed))

    # DMOs first (each frees its finals as it ends), baselines fill the lanes meanwhile
    for vname, vsets in variants:
        for s in dmo_seeds:
            put(1, dmo, (vname, vsets, s))
    for mixname, msets in fixed:
        for f in final_seeds:
            put(2, final, (mixname, f, msets.split()))

    def worker():
        while True:
            try:
                _, _, fn, args = jobs.get(timeout=1)
            except queue.Empty:
                if all(not t.busy for t in lanes):
                    return
                continue
            threading.current_thread().busy = True
            try:
                fn(*args)
            except Exception as ex:  # reported at the end; the other jobs go on
                errors.append(str(ex))
                print("  ERROR", ex, flush=True)
            finally:
                threading.current_thread().busy = False

    lanes = []
    for _ in range(a.lanes):
        t = threading.Thread(target=worker)
        t.busy = False
        lanes.append(t)
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    tags = [v if len(windows) == 1 else f"{v}@w{w:g}" for v, _ in variants for w in windows]
    res = summarise(finals, alphas, curves, [n for n, _ in fixed], tags)
    res["cost"] = summarise_cost(costs, [v for v, _ in variants])
    return res, errors


def ms(xs):
    return (statistics.mean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0)


def summarise(finals, alphas, curves, fixed, variants):
    doms = None
    for ev, _ in finals.values():
        doms = list(ev["domains"])
        break
    res = {"domains": doms, "mixtures": {}}
    if not doms:
        return res
    for name in fixed + variants:
        runs = [(k, v) for k, v in finals.items() if k[0] == name]
        if not runs:
            continue
        avg = [ev["average_ppl"] for _, (ev, _) in runs]
        row = {"runs": len(runs), "average": ms(avg),
               "ppl": {d: statistics.mean(math.exp(ev["domains"][d]["loss"]) for _, (ev, _) in runs) for d in doms}}
        eps = [ep for _, (_, ep) in runs if ep]
        if eps:
            row["epochs"] = {d: statistics.mean(ep[d] for ep in eps) for d in doms}
        if name in variants:
            al = [alphas[k] for k in alphas if k[0] == name]
            row["alpha"] = {d: ms([x[d] for x in al]) for d in doms}
            # sd over DMO seeds of each DMO's mean Average over its final seeds
            per_dmo = {}
            for (n, ds, fs), (ev, _) in runs:
                per_dmo.setdefault(ds, []).append(ev["average_ppl"])
            row["average_dmo_sd"] = ms([statistics.mean(v) for v in per_dmo.values()])[1]
        res["mixtures"][name] = row
    for name, row in res["mixtures"].items():
        for b in ("uniform", "natural", "unimax"):
            if b in res["mixtures"]:
                row[f"vs_{b}"] = row["average"][0] / res["mixtures"][b]["average"][0]
        if "uniform" in res["mixtures"] and "natural" in res["mixtures"]:
            best = min(res["mixtures"]["uniform"]["average"][0], res["mixtures"]["natural"]["average"][0])
            row["vs_best"] = row["average"][0] / best
    rose = {}
    for fseed, cv in curves.items():
        for d in doms:
            ys = [c[1][d] for c in cv]
            if len(ys) >= 3 and min(ys) < ys[-1]:
                rose.setdefault(d, []).append(round(ys[-1] - min(ys), 4))
    res["uniform_rose"] = rose
    return res


def summarise_cost(costs, variants):
    """Each variant's DMO time against a Natural final run's (the same budget of u-steps,
    the same lanes, so the same contention; not Uniform's, which --curves makes commit
    more often): mean seconds and their ratio, and how many episodes probed."""
    nat = [c[0] for k, c in costs.items() if k[0] == "final" and k[1] == "natural" and c[0] > 0]
    out = {}
    for v in variants:
        d = [c for k, c in sorted((k, c) for k, c in costs.items() if k[0] == "dmo" and k[1] == v)]  # by seed
        if not d or not nat:
            continue
        secs = statistics.mean(c[0] for c in d)
        out[v] = {"dmo_s": secs, "final_s": statistics.mean(nat), "ratio": secs / statistics.mean(nat),
                  "per_seed_s": [c[0] for c in d], "probed": [c[1] for c in d], "episodes": d[0][2]}
    return out


def report(res, title=""):
    doms = res["domains"]
    if not doms:
        print("no finished runs")
        return
    if title:
        print(f"\n{title}")
    print(f"  {'mixture':14s} " + " ".join(f"{d[:8]:>8s}" for d in doms) +
          "   Average (mean ± sd)    vs Uni   vs Nat   vs UMx  vs best")
    for name, row in res["mixtures"].items():
        m, sd = row["average"]
        rel = " ".join(f"{row.get(k, float('nan')):8.4f}" for k in ("vs_uniform", "vs_natural", "vs_unimax", "vs_best"))
        print(f"  {name:14s} " + " ".join(f"{row['ppl'][d]:8.3f}" for d in doms) +
              f"   {m:8.4f} ± {sd:.4f} (n={row['runs']})  {rel}")
    print(f"  epochs of each domain in the final runs (mean):")
    for name, row in res["mixtures"].items():
        if "epochs" in row:
            print(f"  {name:14s} " + " ".join(f"{row['epochs'][d]:8.2f}" for d in doms))
    for name, row in res["mixtures"].items():
        if "alpha" in row:
            print(f"  {name} alpha* (mean ± sd over DMO seeds): " +
                  ", ".join(f"{d} {row['alpha'][d][0]:.3f}±{row['alpha'][d][1]:.3f}" for d in doms) +
                  f"; sd of the DMO seeds' mean Average {row['average_dmo_sd']:.4f}")
    for name, c in res.get("cost", {}).items():
        print(f"  {name} DMO cost: {c['dmo_s']:.0f} s = {c['ratio']:.2f} x a Natural final run "
              f"({c['final_s']:.0f} s, the same lanes); per DMO seed: "
              + ", ".join(f"{s:.0f} s ({p} of {c['episodes']} episodes probed)"
                          for s, p in zip(c["per_seed_s"], c["probed"])))
    if res.get("uniform_rose") is not None:
        r = res["uniform_rose"]
        print("  Uniform's test loss rose before the end on: " +
              (", ".join(f"{d} (+{max(v):.3f} nats, {len(v)} seed(s))" for d, v in r.items()) if r else "no domain"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--dmo-seeds", default="1,2,3")
    ap.add_argument("--final-seeds", default="1,2,3")
    ap.add_argument("--variant", nargs=2, action="append", default=[], metavar=("NAME", "SETS"))
    ap.add_argument("--fixed", nargs=2, action="append", default=[], metavar=("NAME", "SETS"))
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--alpha-window", default="0.1",
                    help="the fraction of the last episodes whose mean α is α* (tandem mixture "
                         "--last-fraction; 0: the last α alone); several, comma-separated, make "
                         "one variant each (NAME@wFRACTION)")
    ap.add_argument("--curves", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    res, errors = study(a)
    report(res, a.title)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    if errors:
        print(f"{len(errors)} job(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
