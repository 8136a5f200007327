#!/usr/bin/python3
"""ablate.py — DMO ablations: TANDEM variants against Uniform and Natural, several seeds.

For each seed s: two fixed-mixture final runs (Uniform, Natural, seed 1000+s) and, for each
variant, a TANDEM DMO run (seed s, the variant's --set values) whose α* (tandem mixture)
trains a final run (seed 1000+s) on the same token budget. Every final run is evaluated on
the test split (tandem eval): per-domain loss and Average = exp(mean loss). Runs are
stores under WORK, so an interrupted ablation resumes (a finished run reports at once).
Jobs run LANES at a time with run.threads = THREADS each.

  ablate.py --work DIR --base base.yaml --seeds 1,2,3 --variant NAME "k=v k=v" ... \\
            [--lanes 2] [--threads 1] [--alpha-window 0.1,0]
"""
import argparse, itertools, json, math, os, statistics, subprocess, sys, threading, queue

TANDEM = os.environ.get("TANDEM", os.path.join(os.path.dirname(__file__), "..", "..", "tandem"))


def run(cmd, log):
    with open(log, "a") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode} (see {log})")


def tandem_run(work, name, base, sets, threads):
    store = os.path.join(work, name)
    args = [TANDEM, "run", base, "--store", store, "--quiet", "--set", f"run.threads={threads}"]
    for s in sets:
        args += ["--set", s]
    run(args, os.path.join(work, name + ".log"))
    return store


def evaluate(work, store, name):
    out = os.path.join(work, name + ".eval.json")
    if not os.path.exists(out):
        r = subprocess.run([TANDEM, "eval", store, "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"eval {store}: {r.stderr}")
        open(out, "w").write(r.stdout)
    return json.load(open(out))


def mixture(work, store, window):
    out = os.path.join(work, os.path.basename(store) + f".mix{window}.yaml")
    if not os.path.exists(out):
        # window 0: the last α alone (one record)
        r = subprocess.run([TANDEM, "mixture", store, "--out", out, "--last-fraction",
                            str(window if window > 0 else 1e-9)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"mixture {store}: {r.stderr}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--variant", nargs=2, action="append", default=[], metavar=("NAME", "SETS"))
    ap.add_argument("--fixed", nargs=2, action="append", default=[], metavar=("NAME", "SETS"),
                    help="another fixed-mixture baseline beside Uniform and Natural (e.g. unimax "
                         "\"data.mixture=unimax\"), trained with the final runs' seeds")
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--alpha-window", default="0.1")
    ap.add_argument("--final-sets", default="", help="extra --set values of the final runs")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    seeds = [int(s) for s in a.seeds.split(",")]
    windows = [float(w) for w in a.alpha_window.split(",")]
    fsets = a.final_sets.split()
    # finals before DMOs: a variant's final runs start as soon as its DMO ends, so an
    # interrupted ablation leaves whole variants rather than many half-finished ones
    jobs = queue.PriorityQueue()
    order = itertools.count()

    def put(prio, fn, args):
        jobs.put((prio, next(order), fn, args))
    results = {}
    lock = threading.Lock()

    def final(seed, mixname, msets):
        sets = [f"run.seed={1000 + seed}", "run.mode=fixed"] + msets + fsets
        name = f"final-{mixname}-s{seed}"
        st = tandem_run(a.work, name, a.base, sets, a.threads)
        ev = evaluate(a.work, st, name)
        with lock:
            results[(mixname, seed)] = ev
        print(f"  {name}: Average {ev['average_ppl']:.4f}", flush=True)

    def dmo(seed, vname, vsets):
        name = f"dmo-{vname}-s{seed}"
        st = tandem_run(a.work, name, a.base, [f"run.seed={seed}", "run.mode=tandem"] + vsets.split(),
                        a.threads)
        for w in windows:
            mix = mixture(a.work, st, w)
            tag = vname if len(windows) == 1 else f"{vname}@w{w}"
            put(0, final, (seed, tag, ["data.mixture=file", f"data.mixture_file={mix}"]))

    for seed in seeds:
        put(0, final, (seed, "uniform", ["data.mixture=uniform"]))
        put(0, final, (seed, "natural", ["data.mixture=natural"]))
        for fname, fs in a.fixed:
            put(0, final, (seed, fname, fs.split()))
    for vname, vsets in a.variant:  # variant by variant, in the order given
        for seed in seeds:
            put(1, dmo, (seed, vname, vsets))
    errors = []

    def worker():
        while True:
            try:
                _, _, fn, args = jobs.get(timeout=1)
            except queue.Empty:
                if all(not t.busy for t in threads_):
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

    threads_ = []
    for _ in range(a.lanes):
        t = threading.Thread(target=worker)
        t.busy = False
        threads_.append(t)
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    report(results, seeds, [f for f, _ in a.fixed] + [v for v, _ in a.variant], windows, len(a.fixed))
    if errors:
        sys.exit(1)


def report(results, seeds, variants, windows, nfixed=0):
    names = ["uniform", "natural"] + variants[:nfixed]
    for v in variants[nfixed:]:
        names += [v] if len(windows) == 1 else [f"{v}@w{w}" for w in windows]
    doms = None
    for k, ev in results.items():
        doms = list(ev["domains"])
        break
    if not doms:
        return
    print(f"\n{'mixture':22s} " + " ".join(f"{d:>8s}" for d in doms) + "   Average (mean ± sd)   vs U     vs N")
    avg = {}
    for n in names:
        evs = [results.get((n, s)) for s in seeds]
        if any(e is None for e in evs):
            continue
        per = [statistics.mean(math.exp(e["domains"][d]["loss"]) for e in evs) for d in doms]
        av = [e["average_ppl"] for e in evs]
        avg[n] = av
        sd = statistics.stdev(av) if len(av) > 1 else 0
        rel = ""
        if "uniform" in avg and "natural" in avg:
            ru = statistics.mean(x / y for x, y in zip(av, avg["uniform"]))
            rn = statistics.mean(x / y for x, y in zip(av, avg["natural"]))
            rel = f"  {ru:6.3f}  {rn:6.3f}"
        print(f"{n:22s} " + " ".join(f"{p:8.3f}" for p in per) + f"   {statistics.mean(av):8.4f} ± {sd:.4f}" + rel)


if __name__ == "__main__":
    main()
