#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a TANDEM data-mixture optimisation on the CPU.
#
# 1. A small data-restricted corpus (runs/demo-corpus): four synthetic domains of very
#    different sizes, 69k train tokens for a budget of 307k, so the small ones would repeat
#    many times under uniform mixing (math 26x) and even the natural mixture repeats every
#    domain 4.5 times. The DMO starts at UniMax of 16 epochs (math at 16, books at 14) and,
#    with the defaults (tandem.alpha_cut = overfit), moves α only when its u shows a
#    domain's validation loss rising: this 2-layer model overfits none of these synthetic
#    domains, so α* is the start (docs/dmo.md, "The hold"); --set tandem.alpha_cut=repeated
#    shows the probe's own cuts, the default before 2026-12-05's third session.
# 2. `tandem run configs/demo.yaml` into file://./runs/demo: some seconds of episodes
#    (probe, alpha, free steps; the probe runs no twins while α is held at its start), a
#    progress line per episode, then α at its start
#    and its end, and the final mixture α*. Interrupt it (Ctrl-C) and run `make demo` again: it
#    resumes where it was; once finished, it reports the finished run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=runs/demo-corpus
if [ ! -f "$corpus/dataset.yaml" ]; then
  ./tandem gen-corpus --out "$corpus" --names web,code,books,math \
    --train-tokens 40k,20k,6k,3k --val-tokens 10k --test-tokens 20k
fi
set +e
./tandem run configs/demo.yaml
rc=$?
set -e
if [ "$rc" -eq 75 ]; then
  echo "demo: stopped and committed; run 'make demo' again to resume"
  exit 0
fi
if [ "$rc" -eq 2 ] && [ -e runs/demo/RUN ]; then
  echo "demo: runs/demo holds a demo run made by an older tandem or with another config (the" \
    "keys above); to start afresh: rm -rf runs/demo runs/demo-corpus, then make demo" >&2
fi
exit "$rc"
