#!/usr/bin/env bash
# tests/tokenizer/setup.sh — the reference tokenizers for tests/test_tokenizer.c and
# bench/tokenizer.sh, skipping what is present:
#
#   bash tests/tokenizer/setup.sh     -> build/tokref/ (prints its path on stdout)
#
# * js-tiktoken@1.0.21 and @huggingface/tokenizers@0.2.0 (pinned) into build/tokref/ via
#   `npm install --prefix build/tokref` (node and npm must be on PATH: tests/s3/setup.sh
#   installs them from Debian);
# * tests/tokenizer/ref.mjs copied beside them (ESM resolves packages from the script's
#   own directory) and its `export` run once: build/tokref/files/ gets the tiktoken ranks
#   and the tokenizer.json files the test compares on.
# Exit 77 when node/npm are missing or the registry is unreachable (the test then says
# SKIP); any other failure is an error.
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX=build/tokref
PKGS=(js-tiktoken@1.0.21 @huggingface/tokenizers@0.2.0)

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || {
  echo "tokenizer setup: node/npm missing (bash tests/s3/setup.sh installs them)" >&2; exit 77; }

mkdir -p "$PREFIX"
# one setup at a time (the rel and asan tests, a bench, another checkout's run)
exec 9>"$PREFIX/.lock"
flock 9

have() { grep -Eq "\"version\": \"$2\"" "$PREFIX/node_modules/$1/package.json" 2>/dev/null; }
if ! have js-tiktoken 1.0.21 || ! have @huggingface/tokenizers 0.2.0; then
  echo "tokenizer setup: npm install ${PKGS[*]} into $PREFIX" >&2
  mkdir -p "$PREFIX"
  [ -f "$PREFIX/package.json" ] || printf '{"name":"tandem-tokref","private":true}\n' >"$PREFIX/package.json"
  if ! npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error "${PKGS[@]}" >&2; then
    echo "tokenizer setup: npm install failed (registry unreachable?)" >&2; exit 77
  fi
fi
cmp -s tests/tokenizer/ref.mjs "$PREFIX/ref.mjs" || { cp tests/tokenizer/ref.mjs "$PREFIX/ref.mjs"; rm -f "$PREFIX/files/.done"; }
if [ ! -f "$PREFIX/files/.done" ]; then
  echo "tokenizer setup: exporting the reference tokenizer files (about 20 s, once)" >&2
  rm -rf "$PREFIX/files.tmp"
  node "$PREFIX/ref.mjs" export "$PREFIX/files.tmp"
  rm -rf "$PREFIX/files"
  mv "$PREFIX/files.tmp" "$PREFIX/files"
  touch "$PREFIX/files/.done"
fi
echo "$PREFIX"
