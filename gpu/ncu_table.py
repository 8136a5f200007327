#!/usr/bin/env python3
"""ncu_table.py — per-kernel GPU time from an `ncu --csv --metrics gpu__time_duration.sum`
log (gpu/lease_check.sh, part "profile").

    python3 gpu/ncu_table.py LOG.csv [--all]

Sums each kernel's duration over the second half of the profiled launches (the last of two
steps: the first one meets cuBLASLt's heuristics and the caches cold; --all takes every
launch) and prints the 25 largest with their share. ncu serialises and replays each launch,
so the total is the kernels' time alone, without launch gaps: compare shares, not the sum
with a timed step."""
import collections
import csv
import re
import sys

UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: ncu_table.py LOG.csv [--all]")
    with open(argv[1], newline="") as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    if not rows:
        sys.exit(f"ncu_table.py: no CSV rows in {argv[1]} (did ncu profile anything?)")
    ix = {h: i for i, h in enumerate(rows[0])}
    rows = [r for r in rows[1:] if r[ix["Metric Name"]] == "gpu__time_duration.sum"]
    ids = sorted({int(r[ix["ID"]]) for r in rows})
    first = 0 if "--all" in argv or not ids else ids[len(ids) // 2]
    total, calls = collections.defaultdict(float), collections.Counter()
    for r in rows:
        if int(r[ix["ID"]]) < first:
            continue
        name = re.sub(r"\(.*", "", r[ix["Kernel Name"]]).strip()[:72]
        value = float(r[ix["Metric Value"]].replace(",", ""))
        total[name] += value * UNITS.get(r[ix["Metric Unit"]], 1.0)
        calls[name] += 1
    whole = sum(total.values()) or 1.0
    print(f"{'kernel':72s} {'calls':>6s} {'us':>10s} {'share':>6s}")
    for name, us in sorted(total.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{name:72s} {calls[name]:6d} {us:10.1f} {100 * us / whole:5.1f}%")
    print(f"{'all kernels of the launches counted':72s} {sum(calls.values()):6d} {whole:10.1f}")


if __name__ == "__main__":
    main(sys.argv)
