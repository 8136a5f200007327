#!/usr/bin/env bash
# tests/parquet/setup.sh — installs the independent Parquet writers test_parquet uses,
# skipping what is present: node and npm (Debian's, as tests/s3/setup.sh installs them),
# then parquetjs-lite, parquet-wasm and apache-arrow (pinned) into build/parquet-writers/.
#
#   bash tests/parquet/setup.sh
#
# Idempotent; after the first run it needs no network. Exits non-zero (saying why) when
# node cannot be had: the test then says SKIPPED, never PASS.
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX=build/parquet-writers
PKGS=(parquetjs-lite@0.8.7 parquet-wasm@0.6.1 apache-arrow@17.0.0)

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  bash tests/s3/setup.sh >&2 # installs nodejs and npm (and what the S3 tests need)
fi
command -v node >/dev/null 2>&1 || { echo "parquet setup: no node" >&2; exit 1; }
# one setup at a time (the rel and asan test_parquet may run side by side)
mkdir -p "$PREFIX"
exec 8>"$PREFIX/.lock"
flock 8
stamp="$PREFIX/.installed"
if [ "$(cat "$stamp" 2>/dev/null)" != "${PKGS[*]}" ]; then
  echo "parquet setup: npm install ${PKGS[*]} into $PREFIX" >&2
  mkdir -p "$PREFIX"
  # a package.json of our own keeps npm from walking up to a parent project
  [ -f "$PREFIX/package.json" ] || printf '{"name":"tandem-parquet-writers","private":true}\n' >"$PREFIX/package.json"
  npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error "${PKGS[@]}" >&2
  echo "${PKGS[*]}" >"$stamp"
fi
