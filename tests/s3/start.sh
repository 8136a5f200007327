#!/usr/bin/env bash
# tests/s3/start.sh — starts s3rver and the verifying/fault-injecting proxy on loopback.
#
#   tests/s3/start.sh DIR [--bucket NAME] [--dump-headers] [--faults FILE]
#                         [--min-part-size BYTES] [--if-match-missing 404|412]
#   . DIR/env            # exports the endpoint, credentials, bucket (see README.md)
#   tests/s3/stop.sh DIR [--clean]
#
# DIR is created if missing; it holds data/ (s3rver's store), env, the logs
# (s3rver.log, proxy.log, requests.log, headers.log with --dump-headers) and pids.
# Both servers bind port 0 on 127.0.0.1 and report the port they got, so parallel runs
# never race for a port. Runs tests/s3/setup.sh first (a no-op once installed).
# On any failure everything started so far is stopped and the exit status is non-zero.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

[ $# -ge 1 ] || { echo "usage: $0 DIR [--bucket NAME] [--dump-headers] [--faults FILE]" >&2; exit 2; }
dir=$1; shift
bucket=tandem-test
dump=0
proxy_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bucket) bucket=$2; shift 2 ;;
    --dump-headers) dump=1; shift ;;
    --faults) proxy_extra+=(--faults "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
    --min-part-size) proxy_extra+=(--min-part-size "$2"); shift 2 ;;
    --if-match-missing) proxy_extra+=(--if-match-missing "$2"); shift 2 ;;
    *) echo "start.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

# Fixed test credentials (not secrets of anything real).
ACCESS_KEY=AKIDTANDEMTEST
SECRET_KEY=tandemTestSecretKey/5c1e9a7b3d2f4e60a8b1c9d7e2f0a3b4
STS_ACCESS_KEY=ASIATANDEMTESTSTS
STS_SECRET_KEY=tandemTestStsSecret/0f9e8d7c6b5a49382716a5b4c3d2e1f0
STS_TOKEN=tandemTestSessionToken/IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ
REGION=us-east-1

bash "$here/setup.sh"

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -f "$dir/pids" ]; then
  echo "start.sh: $dir/pids exists: already running? (tests/s3/stop.sh $dir)" >&2
  exit 1
fi
mkdir -p "$dir/data" "$dir/spool"
rm -f "$dir/env" "$dir/proxy.ready"

pids=()
cleanup_on_fail() {
  local st=$?
  if [ $st -ne 0 ]; then
    for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" 2>/dev/null || true; done
    rm -f "$dir/pids" "$dir/env"
    echo "start.sh: failed; logs in $dir" >&2
    for f in s3rver.log proxy.log; do
      [ -s "$dir/$f" ] && { echo "--- $f" >&2; tail -n 20 "$dir/$f" >&2; }
    done
  fi
  exit $st
}
trap cleanup_on_fail EXIT

# --- s3rver (Node; the legacy provider is needed for its DES continuation tokens)
s3rver_js="$root/build/s3rver/node_modules/s3rver/bin/s3rver.js"
# the log exists before the loop below reads it (the background job may open it late,
# and a sed on a missing file would end this script under pipefail)
: >"$dir/s3rver.log"
node --openssl-legacy-provider "$s3rver_js" -d "$dir/data" -a 127.0.0.1 -p 0 \
  --no-vhost-buckets --configure-bucket "$bucket" \
  >"$dir/s3rver.log" 2>&1 </dev/null &
pids+=($!)
echo "${pids[*]}" >"$dir/pids"
backend_port=""
for _ in $(seq 1 300); do
  backend_port=$(sed -n 's/^S3rver listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/s3rver.log" | head -n 1)
  [ -n "$backend_port" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "start.sh: s3rver exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$backend_port" ] || { echo "start.sh: s3rver did not start in 30 s" >&2; exit 1; }

# --- proxy
umask_old=$(umask); umask 077
cat >"$dir/credentials.json" <<EOF
{"region": "$REGION", "credentials": [
  {"access_key": "$ACCESS_KEY", "secret_key": "$SECRET_KEY"},
  {"access_key": "$STS_ACCESS_KEY", "secret_key": "$STS_SECRET_KEY", "session_token": "$STS_TOKEN"}
]}
EOF
umask "$umask_old"
dump_args=()
[ $dump -eq 1 ] && dump_args=(--dump-headers "$dir/headers.log")
/usr/bin/python3 "$here/proxy.py" --backend "127.0.0.1:$backend_port" --data-dir "$dir/data" \
  --credentials "$dir/credentials.json" --port 0 --control-port 0 \
  --ready-file "$dir/proxy.ready" --log "$dir/requests.log" --spool-dir "$dir/spool" \
  "${dump_args[@]+"${dump_args[@]}"}" "${proxy_extra[@]+"${proxy_extra[@]}"}" \
  >"$dir/proxy.log" 2>&1 </dev/null &
pids+=($!)
echo "${pids[*]}" >"$dir/pids"
for _ in $(seq 1 300); do
  [ -f "$dir/proxy.ready" ] && break
  kill -0 "${pids[1]}" 2>/dev/null || { echo "start.sh: proxy exited" >&2; exit 1; }
  sleep 0.1
done
[ -f "$dir/proxy.ready" ] || { echo "start.sh: proxy did not start in 30 s" >&2; exit 1; }
read -r port control_port < <(/usr/bin/python3 -c \
  'import json,sys; d=json.load(open(sys.argv[1])); print(d["port"], d["control_port"])' \
  "$dir/proxy.ready")

# --- ready? (the bucket exists and the whole chain answers)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$backend_port/$bucket" || true)
[ "$code" = 200 ] || { echo "start.sh: s3rver does not list bucket $bucket (HTTP $code)" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$control_port/health" || true)
[ "$code" = 200 ] || { echo "start.sh: proxy control port not answering (HTTP $code)" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/$bucket" || true)
[ "$code" = 403 ] || { echo "start.sh: proxy does not refuse anonymous requests (HTTP $code)" >&2; exit 1; }

: >"$dir/aws-credentials"
cat >"$dir/aws-config" <<EOF
[default]
region = $REGION
EOF
umask 077
cat >"$dir/env.tmp" <<EOF
# written by tests/s3/start.sh; source it: . $dir/env
export TANDEM_S3_DIR='$dir'
export TANDEM_S3_ENDPOINT='http://127.0.0.1:$port'
export TANDEM_S3_BACKEND='http://127.0.0.1:$backend_port'
export TANDEM_S3_CONTROL='http://127.0.0.1:$control_port'
export TANDEM_S3_BUCKET='$bucket'
export TANDEM_S3_REGION='$REGION'
export TANDEM_S3_DATA='$dir/data'
export TANDEM_S3_REQUEST_LOG='$dir/requests.log'
export TANDEM_S3_HEADER_DUMP='$( [ $dump -eq 1 ] && echo "$dir/headers.log" )'
export TANDEM_S3_STS_ACCESS_KEY_ID='$STS_ACCESS_KEY'
export TANDEM_S3_STS_SECRET_ACCESS_KEY='$STS_SECRET_KEY'
export TANDEM_S3_STS_SESSION_TOKEN='$STS_TOKEN'
export AWS_ACCESS_KEY_ID='$ACCESS_KEY'
export AWS_SECRET_ACCESS_KEY='$SECRET_KEY'
unset AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE
export AWS_REGION='$REGION'
export AWS_DEFAULT_REGION='$REGION'
export AWS_CONFIG_FILE='$dir/aws-config'
export AWS_SHARED_CREDENTIALS_FILE='$dir/aws-credentials'
export AWS_EC2_METADATA_DISABLED=true
export AWS_PAGER=''
EOF
mv "$dir/env.tmp" "$dir/env"
trap - EXIT
echo "s3: endpoint http://127.0.0.1:$port (s3rver 127.0.0.1:$backend_port, control 127.0.0.1:$control_port), bucket $bucket; env in $dir/env"
