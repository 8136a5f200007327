#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a generated 4-domain corpus, then CPU training of a
# small GPT on it, printing per-domain losses as they fall.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=runs/demo-corpus
if [ ! -f "$corpus/dataset.yaml" ]; then
  ./tandem gen-corpus --out "$corpus" --domains 4 --names web,code,books,math \
    --train-tokens 400k,200k,100k,50k --val-tokens 20k --test-tokens 20k
fi
./tandem train --data "$corpus/dataset.yaml" --steps 400 --eval-every 100
