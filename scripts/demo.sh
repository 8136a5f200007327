#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a TANDEM data-mixture optimisation on the CPU.
#
# 1. A small data-restricted corpus (runs/demo-corpus): four synthetic domains of very
#    different sizes, 69k train tokens for a budget of 307k, so the small ones would repeat
#    many times under uniform mixing (math 26x) and even the natural mixture repeats every
#    domain 4.5 times: the regime where the α step moves (from UniMax's start of 16
#    epochs, math at 16 and books at 14, within the hold's bounds at 4: docs/dmo.md). On a
#    corpus that the start repeats nowhere past 4 epochs the step would hold α there.
# 2. `tandem run configs/demo.yaml` into file://./runs/demo: about 1-2 minutes of
#    episodes (probe, alpha, free steps), a progress line per episode, then how α moved
#    and the final mixture α*. Interrupt it (Ctrl-C) and run `make demo` again: it
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
