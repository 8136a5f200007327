#!/usr/bin/env bash
# s3.sh — `make bench-s3`: starts the loopback S3 server (tests/s3), runs bench_s3 against
# it, stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'bash tests/s3/stop.sh "$dir/s3" --clean >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash tests/s3/start.sh "$dir/s3" >"$dir/start.log" 2>&1 || { cat "$dir/start.log"; exit 1; }
set -a
. "$dir/s3/env"
set +a
export AWS_ENDPOINT_URL="$TANDEM_S3_ENDPOINT"
build/rel/bench/bench_s3 "$@"
# A paper-size state streamed (checkpoint.snapshot = stream) through the verifying proxy:
# BENCH_S3_STREAM = 160m (default), 1b, all, or none.
stream=${BENCH_S3_STREAM:-160m}
if [ "$stream" != none ]; then
  make --no-print-directory build/rel/bench/bench_ckpt >/dev/null
  build/rel/bench/bench_ckpt --stream-only "$stream" --stream-store "s3://$TANDEM_S3_BUCKET/stream-bench"
fi
