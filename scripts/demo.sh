#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a TANDEM data-mixture optimisation on the CPU.
#
# 1. A small data-restricted corpus (runs/demo-corpus): four synthetic domains of very
#    different sizes, so the small ones repeat many times under uniform mixing.
# 2. `tandem run configs/demo.yaml` into file://./runs/demo: about 1-2 minutes of
#    episodes (probe, alpha, free steps), a progress line per episode, then how α moved
#    and the final mixture α*. Interrupt it (Ctrl-C) and run `make demo` again: it
#    resumes where it was; once finished, it reports the finished run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=runs/demo-corpus
if [ ! -f "$corpus/dataset.yaml" ]; then
  ./tandem gen-corpus --out "$corpus" --names web,code,books,math \
    --train-tokens 400k,200k,50k,20k --val-tokens 10k --test-tokens 20k
fi
set +e
./tandem run configs/demo.yaml
rc=$?
set -e
if [ "$rc" -eq 75 ]; then
  echo "demo: stopped and committed; run 'make demo' again to resume"
  exit 0
fi
exit "$rc"
