#!/usr/bin/env bash
# tests/s3/selftest.sh — proves the S3 test front (s3rver + tests/s3/proxy.py) works,
# using only Debian's /usr/bin/aws and curl as clients. Starts its own servers in a
# temporary directory and stops them at the end. Prints "selftest: N passed, M failed".
#   bash tests/s3/selftest.sh [-v]        -v: keep the run directory and print its path
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
keep=0; [ "${1:-}" = "-v" ] && keep=1
AWS=/usr/bin/aws
pass=0; fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { # check DESCRIPTION COMMAND...
  local d=$1; shift
  if "$@"; then ok "$d"; else bad "$d"; fi
}

run=$(mktemp -d /tmp/tandem-s3-selftest.XXXXXX)
finish() {
  bash "$here/stop.sh" "$run/srv" >/dev/null 2>&1
  if [ $keep -eq 1 ]; then echo "run directory: $run"; else rm -rf "$run"; fi
}
trap finish EXIT
if ! bash "$here/start.sh" "$run/srv" --dump-headers >"$run/start.log" 2>&1; then
  cat "$run/start.log"
  echo "selftest: 0 passed, 1 failed"
  exit 1
fi
# shellcheck disable=SC1091
. "$run/srv/env"
B=$TANDEM_S3_BUCKET
EP=$TANDEM_S3_ENDPOINT
CTL=$TANDEM_S3_CONTROL
LOG=$TANDEM_S3_REQUEST_LOG

# The aws CLI's own config: small multipart threshold/chunks, few quick retries.
export AWS_CONFIG_FILE=$run/aws-config
$AWS configure set default.region "$AWS_REGION"
$AWS configure set default.s3.multipart_threshold 5MB
$AWS configure set default.s3.multipart_chunksize 5MB
$AWS configure set default.retry_mode standard
$AWS configure set default.max_attempts 4
aws_() { $AWS --endpoint-url "$EP" "$@"; }

# curl signs with its own SigV4 (--aws-sigv4); the credentials go in a 0600 config file,
# never on a command line. curl 7.88 does not add x-amz-content-sha256 itself (S3
# requires it), so we send it and curl signs it along.
umask 077
printf 'user = "%s:%s"\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$run/curl-good"
printf 'user = "%s:%s"\n' "$AWS_ACCESS_KEY_ID" "not-the-secret" >"$run/curl-bad"
umask 022
EMPTY_SHA=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
CURLCFG=$run/curl-good
# s3c METHOD KEY [FILE [curl args...]]: body in $run/body, HTTP status in $run/code, curl's
# exit status in $run/curlexit. SHA=... overrides the x-amz-content-sha256 sent (and signed).
s3c() {
  local m=$1 key=$2 file=${3:-} sha=$EMPTY_SHA data=()
  shift 2; [ $# -gt 0 ] && shift
  if [ -n "$file" ]; then sha=$(sha256sum "$file" | cut -d' ' -f1); data=(--data-binary "@$file"); fi
  sha=${SHA:-$sha}
  local mflag=(-X "$m"); [ "$m" = HEAD ] && mflag=(-I)
  curl -sS --max-time 30 -K "$CURLCFG" --aws-sigv4 "aws:amz:$AWS_REGION:s3" "${mflag[@]}" \
    -H "x-amz-content-sha256: $sha" "${data[@]+"${data[@]}"}" "$@" \
    -o "$run/body" -w '%{http_code}' "$EP/$B/$key" >"$run/code" 2>"$run/curlerr"
  local st=$?
  echo "$st" >"$run/curlexit"
  return 0
}
code() { cat "$run/code"; }
body_has() { grep -q -e "$1" "$run/body"; }
ctl() { curl -sS --max-time 10 -X "$1" ${2:+--data-binary "$2"} "$CTL/$3"; }
faults() { ctl POST "$1" faults >/dev/null; }
injected() { ctl GET "" counters | /usr/bin/python3 -c \
  'import json,sys; print(json.load(sys.stdin)["injected"][sys.argv[1]])' "$1"; }
etag_of() { aws_ s3api head-object --bucket "$B" --key "$1" --query ETag --output text; }

head -c 1234 /dev/urandom >"$run/small"
head -c $((20 << 20)) /dev/urandom >"$run/big"

# --- 1. basic round trip through aws s3 cp ---------------------------------------------
aws_ s3 cp --quiet "$run/small" "s3://$B/t/small" && aws_ s3 cp --quiet "s3://$B/t/small" "$run/small.back"
check "aws s3 cp small up/down round-trips" cmp -s "$run/small" "$run/small.back"

# --- 2. multipart upload (20 MiB, 5 MiB parts) and ranged multipart download ----------
aws_ s3 cp --quiet "$run/big" "s3://$B/t/big"
parts=$(grep '"method":"PUT"' "$LOG" | grep -c '"path":"/'"$B"'/t/big","query":"[^"]*partNumber=' || true)
check "aws s3 cp 20 MiB used multipart ($parts UploadPart requests)" [ "$parts" -ge 4 ]
et=$(etag_of t/big)
check "multipart object has an S3-style multipart ETag ($et)" grep -Eq '^"[0-9a-f]{32}-4"$' <<<"$et"
aws_ s3 cp --quiet "s3://$B/t/big" "$run/big.back"
check "20 MiB download (ranged GETs) is identical" cmp -s "$run/big" "$run/big.back"
rgets=$(grep '"method":"GET"' "$LOG" | grep -c '"path":"/'"$B"'/t/big"' || true)
check "download was split into ranged GETs ($rgets)" [ "$rgets" -ge 2 ]

et=$(aws_ s3api list-objects-v2 --bucket "$B" --prefix t/big --query 'Contents[0].ETag' --output text)
check "listings show the same multipart ETag ($et)" [ "$et" = "$(etag_of t/big)" ]

# --- 3. listing with pagination --------------------------------------------------------
mkdir "$run/list"; for i in $(seq -w 1 25); do printf '%s' "$i" >"$run/list/k$i"; done
aws_ s3 cp --quiet --recursive "$run/list" "s3://$B/list/"
l0=$(grep -c '"query":"list-type=2[^"]*prefix=list' "$LOG" || true)
cnt=$(aws_ s3 ls --page-size 10 "s3://$B/list/" | wc -l)
l1=$(grep -c '"query":"list-type=2[^"]*prefix=list' "$LOG" || true)
check "aws s3 ls --page-size 10 lists 25 keys ($cnt)" [ "$cnt" -eq 25 ]
check "... in 3 pages ($((l1 - l0)) ListObjectsV2 requests)" [ $((l1 - l0)) -eq 3 ]
cnt=$(aws_ s3api list-objects-v2 --bucket "$B" --prefix list/ --page-size 10 --query 'Contents[].Key' --output text | wc -w)
check "aws s3api list-objects-v2 --page-size 10 returns 25 keys ($cnt)" [ "$cnt" = 25 ]

mkdir "$run/odd"; printf 'odd' >"$run/odd/sp ace+plus=eq&amp;%25~ü(1)*.txt"
aws_ s3 cp --quiet --recursive "$run/odd" "s3://$B/odd/"
k=$(aws_ s3 ls "s3://$B/odd/" | awk '{ $1 = $2 = $3 = ""; sub(/^ +/, ""); print }')
check "odd key names survive a listing with encoding-type=url ($k)" [ "$k" = 'sp ace+plus=eq&amp;%25~ü(1)*.txt' ]
out=$(aws_ s3 cp "s3://$B/odd/sp ace+plus=eq&amp;%25~ü(1)*.txt" - 2>&1)
check "... and read back" [ "$out" = odd ]
s3c GET "?list-type=2&prefix=odd%2F"
check "listing XML has S3's namespace" body_has 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'

# --- 4. signatures -------------------------------------------------------------------
out=$(AWS_SECRET_ACCESS_KEY=wrong-secret-for-test aws_ s3api list-objects-v2 --bucket "$B" 2>&1)
check "aws with a wrong secret is refused: SignatureDoesNotMatch" grep -q SignatureDoesNotMatch <<<"$out"
out=$(AWS_ACCESS_KEY_ID=AKIDNOSUCHKEY aws_ s3api list-objects-v2 --bucket "$B" 2>&1)
check "aws with an unknown access key is refused: InvalidAccessKeyId" grep -q InvalidAccessKeyId <<<"$out"
out=$(AWS_ACCESS_KEY_ID=$TANDEM_S3_STS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$TANDEM_S3_STS_SECRET_ACCESS_KEY \
      AWS_SESSION_TOKEN=$TANDEM_S3_STS_SESSION_TOKEN aws_ s3 cp --quiet "s3://$B/t/small" - 2>&1 | cmp -s - "$run/small" && echo same)
check "session-token credentials work" [ "$out" = same ]
out=$(AWS_ACCESS_KEY_ID=$TANDEM_S3_STS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$TANDEM_S3_STS_SECRET_ACCESS_KEY \
      AWS_SESSION_TOKEN=wrong-token aws_ s3api list-objects-v2 --bucket "$B" 2>&1)
check "a wrong session token is refused: InvalidToken" grep -q InvalidToken <<<"$out"
out=$(AWS_ACCESS_KEY_ID=$TANDEM_S3_STS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$TANDEM_S3_STS_SECRET_ACCESS_KEY \
      aws_ s3api list-objects-v2 --bucket "$B" 2>&1)
check "a missing session token is refused: InvalidToken" grep -q InvalidToken <<<"$out"

s3c GET t/small
check "curl --aws-sigv4 GET: 200 and the right bytes" eval '[ "$(code)" = 200 ] && cmp -s "$run/body" "$run/small"'
CURLCFG=$run/curl-bad s3c GET t/small
check "curl --aws-sigv4 with a wrong secret: 403 SignatureDoesNotMatch" eval '[ "$(code)" = 403 ] && body_has SignatureDoesNotMatch'
s3c GET t/small "" -H "x-amz-meta-late: added-after-signing" --aws-sigv4 "aws:amz:$AWS_REGION:s3"
check "curl --aws-sigv4 GET with extra signed x-amz-meta header: 200" [ "$(code)" = 200 ]
SHA=$EMPTY_SHA s3c PUT t/hashcheck "$run/small"
check "body not matching x-amz-content-sha256: 400 XAmzContentSHA256Mismatch" eval '[ "$(code)" = 400 ] && body_has XAmzContentSHA256Mismatch'
s3c PUT t/md5check "$run/small" -H "Content-MD5: AAAAAAAAAAAAAAAAAAAAAA=="
check "wrong Content-MD5: 400 BadDigest" eval '[ "$(code)" = 400 ] && body_has BadDigest'
c=$(curl -s -o "$run/body" -w '%{http_code}' "$EP/$B/t/small")
check "anonymous request: 403 AccessDenied" eval '[ "$c" = 403 ] && body_has AccessDenied'
url=$(aws_ s3 presign "s3://$B/t/small" --expires-in 300)
c=$(curl -s -o "$run/body" -w '%{http_code}' "$url")
check "presigned URL (aws s3 presign) GET: 200" eval '[ "$c" = 200 ] && cmp -s "$run/body" "$run/small"'
c=$(curl -s -o "$run/body" -w '%{http_code}' "${url/X-Amz-Signature=/X-Amz-Signature=0}")
check "tampered presigned URL: 403" [ "$c" = 403 ]
url=$(aws_ s3 presign "s3://$B/t/small" --expires-in 1); sleep 2
c=$(curl -s -o "$run/body" -w '%{http_code}' "$url")
check "expired presigned URL: 403" eval '[ "$c" = 403 ] && body_has "Request has expired"'

# --- 5. conditional writes -----------------------------------------------------------
printf 'version one' >"$run/v1"; printf 'version two' >"$run/v2"
s3c PUT t/cond "$run/v1" -H "If-None-Match: *"
check "If-None-Match: * on a new key: 200" [ "$(code)" = 200 ]
s3c PUT t/cond "$run/v2" -H "If-None-Match: *"
check "If-None-Match: * on an existing key: 412 PreconditionFailed" eval '[ "$(code)" = 412 ] && body_has PreconditionFailed'
et1=$(etag_of t/cond)
s3c PUT t/cond "$run/v2" -H "If-Match: $et1"
check "If-Match with the current ETag: 200" [ "$(code)" = 200 ]
s3c PUT t/cond "$run/v1" -H "If-Match: $et1"
check "If-Match with a stale ETag: 412" eval '[ "$(code)" = 412 ] && body_has PreconditionFailed'
s3c PUT t/cond-missing "$run/v1" -H 'If-Match: "0123456789abcdef0123456789abcdef"'
check "If-Match on a missing key: 412" [ "$(code)" = 412 ]
s3c GET t/cond
check "object holds the If-Match write, not the refused ones" cmp -s "$run/body" "$run/v2"
# eight racing creators: exactly one wins
for i in 1 2 3 4 5 6 7 8; do
  printf 'racer %s' "$i" >"$run/racer$i"
  ( sha=$(sha256sum "$run/racer$i" | cut -d' ' -f1)
    curl -s -K "$run/curl-good" --aws-sigv4 "aws:amz:$AWS_REGION:s3" -X PUT -H "If-None-Match: *" \
      -H "x-amz-content-sha256: $sha" --data-binary "@$run/racer$i" -o /dev/null -w '%{http_code}\n' \
      "$EP/$B/t/race" >"$run/race$i" ) &
done; wait
wins=$(cat "$run"/race? | grep -c '^200$'); lost=$(cat "$run"/race? | grep -c '^412$')
check "8 concurrent If-None-Match: * PUTs: one 200, seven 412 ($wins/$lost)" [ "$wins" = 1 ] && [ "$lost" = 7 ]
# conditional CompleteMultipartUpload
uid=$(aws_ s3api create-multipart-upload --bucket "$B" --key t/cond --query UploadId --output text)
pet=$(aws_ s3api upload-part --bucket "$B" --key t/cond --upload-id "$uid" --part-number 1 --body "$run/small" --query ETag --output text)
printf '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part></CompleteMultipartUpload>' "$pet" >"$run/complete.xml"
s3c POST "t/cond?uploadId=$uid" "$run/complete.xml" -H "If-None-Match: *"
check "CompleteMultipartUpload with If-None-Match: * on an existing key: 412" [ "$(code)" = 412 ]
s3c POST "t/cond?uploadId=$uid" "$run/complete.xml" -H 'If-Match: "ffffffffffffffffffffffffffffffff"'
check "CompleteMultipartUpload with a stale If-Match: 412" [ "$(code)" = 412 ]
et2=$(etag_of t/cond)
s3c POST "t/cond?uploadId=$uid" "$run/complete.xml" -H "If-Match: $et2"
check "CompleteMultipartUpload with the current If-Match: 200" eval '[ "$(code)" = 200 ] && body_has "-1&quot;"'
# part checks on Complete
uid=$(aws_ s3api create-multipart-upload --bucket "$B" --key t/parts --query UploadId --output text)
e1=$(aws_ s3api upload-part --bucket "$B" --key t/parts --upload-id "$uid" --part-number 1 --body "$run/small" --query ETag --output text)
e2=$(aws_ s3api upload-part --bucket "$B" --key t/parts --upload-id "$uid" --part-number 2 --body "$run/small" --query ETag --output text)
out=$(aws_ s3api complete-multipart-upload --bucket "$B" --key t/parts --upload-id "$uid" \
      --multipart-upload "{\"Parts\": [{\"PartNumber\": 1, \"ETag\": $e1}, {\"PartNumber\": 2, \"ETag\": $e2}]}" 2>&1)
check "Complete with a non-final part under 5 MiB: EntityTooSmall" grep -q EntityTooSmall <<<"$out"
out=$(aws_ s3api complete-multipart-upload --bucket "$B" --key t/parts --upload-id "$uid" \
      --multipart-upload '{"Parts": [{"PartNumber": 1, "ETag": "\"00000000000000000000000000000000\""}]}' 2>&1)
check "Complete with a wrong part ETag: InvalidPart" grep -q InvalidPart <<<"$out"
aws_ s3api abort-multipart-upload --bucket "$B" --key t/parts --upload-id "$uid"
# conditional copy
out=$(aws_ s3api copy-object --bucket "$B" --key t/copy --copy-source "$B/t/small" --copy-source-if-match '"0000"' 2>&1)
check "CopyObject with a stale x-amz-copy-source-if-match: 412" grep -q PreconditionFailed <<<"$out"
out=$(aws_ s3api copy-object --bucket "$B" --key t/copy --copy-source "$B/t/small" --copy-source-if-match "$(etag_of t/small)" 2>&1)
check "CopyObject with the current x-amz-copy-source-if-match: copied" eval '[ "$(etag_of t/copy)" = "$(etag_of t/small)" ]'
# abort + list uploads
uid=$(aws_ s3api create-multipart-upload --bucket "$B" --key t/aborted --query UploadId --output text)
n=$(aws_ s3api list-multipart-uploads --bucket "$B" --prefix t/aborted --query 'Uploads[].UploadId' --output text | wc -w)
check "ListMultipartUploads shows an open upload ($n)" [ "$n" = 1 ]
check "AbortMultipartUpload succeeds" aws_ s3api abort-multipart-upload --bucket "$B" --key t/aborted --upload-id "$uid"
n=$(aws_ s3api list-multipart-uploads --bucket "$B" --prefix t/aborted --query 'Uploads[].UploadId' --output text)
check "... and the upload is gone ($n)" eval '[ "$n" = None ] || [ -z "$n" ]'
out=$(aws_ s3api upload-part --bucket "$B" --key t/aborted --upload-id "$uid" --part-number 1 --body "$run/small" 2>&1)
check "UploadPart to an aborted upload: NoSuchUpload" grep -q NoSuchUpload <<<"$out"

# --- 6. conditional / ranged reads ---------------------------------------------------
s3c GET t/cond "" -H 'If-Match: "0000"'
check "GET If-Match with a stale ETag: 412" [ "$(code)" = 412 ]
s3c GET t/cond "" -H "If-None-Match: $(etag_of t/cond)"
check "GET If-None-Match with the current ETag: 304" [ "$(code)" = 304 ]
s3c GET t/small "" -H "Range: bytes=-10"
check "suffix Range bytes=-10: 206 and the last 10 bytes" eval '[ "$(code)" = 206 ] && cmp -s "$run/body" <(tail -c 10 "$run/small")'
s3c GET t/small "" -H "Range: bytes=5000-"
check "Range past the end: 416 InvalidRange" eval '[ "$(code)" = 416 ] && body_has InvalidRange'

# --- 7. fault injection --------------------------------------------------------------
ctl POST "" reset >/dev/null
faults '{"rules": [{"fault": "500", "max_count": 1}]}'
s3c GET t/small
check "fault 500: 500 InternalError, counter 1" eval '[ "$(code)" = 500 ] && body_has InternalError && [ "$(injected 500)" = 1 ]'
faults '{"rules": [{"fault": "503", "max_count": 1}]}'
s3c GET t/small
check "fault 503: 503 SlowDown" eval '[ "$(code)" = 503 ] && body_has SlowDown && [ "$(injected 503)" = 1 ]'
faults '{"rules": [{"fault": "429", "max_count": 1}]}'
s3c GET t/small
check "fault 429: 429" eval '[ "$(code)" = 429 ] && [ "$(injected 429)" = 1 ]'
faults '{"rules": [{"fault": "reset", "max_count": 1}]}'
s3c GET t/small
check "fault reset: connection reset, no response (curl exit $(cat "$run/curlexit"))" \
  eval '[ "$(cat "$run/curlexit")" = 56 ] || [ "$(cat "$run/curlexit")" = 52 ]'
faults '{"rules": [{"fault": "close", "max_count": 1}]}'
s3c GET t/small
check "fault close: empty reply (curl exit $(cat "$run/curlexit"))" [ "$(cat "$run/curlexit")" = 52 ]
faults '{"rules": [{"fault": "stall", "stall_seconds": 1.5, "max_count": 1}]}'
t0=$(date +%s.%N); s3c GET t/small; t1=$(date +%s.%N)
check "fault stall 1.5 s: answered after $(printf %.2f "$(echo "$t1 - $t0" | bc)") s" \
  eval '[ "$(code)" = 200 ] && [ "$(echo "$t1 - $t0 >= 1.5" | bc)" = 1 ]'
faults '{"rules": [{"fault": "stall", "stall_seconds": 5, "max_count": 1}]}'
s3c GET t/small "" --max-time 1
check "fault stall 5 s vs a 1 s client timeout: curl times out (exit $(cat "$run/curlexit"))" [ "$(cat "$run/curlexit")" = 28 ]
faults '{"rules": [{"fault": "truncate", "max_count": 1, "methods": ["GET"]}]}'
s3c GET t/small
check "fault truncate: partial body (curl exit $(cat "$run/curlexit") = 18, $(stat -c %s "$run/body") of 1234 bytes)" \
  eval '[ "$(cat "$run/curlexit")" = 18 ] && [ "$(stat -c %s "$run/body")" -lt 1234 ]'
faults '{"rules": [{"fault": "reset_after", "max_count": 1, "methods": ["PUT"]}]}'
s3c PUT t/applied "$run/v1"
s3c GET t/applied
check "fault reset_after: PUT gets no answer but was applied" eval '[ "$(code)" = 200 ] && cmp -s "$run/body" "$run/v1"'
faults '{"rules": [{"fault": "500", "methods": ["PUT"]}]}'
s3c GET t/small
check "method filter: a PUT-only rule leaves GET alone" [ "$(code)" = 200 ]
faults '{"rules": [{"fault": "503", "max_count": 2, "methods": ["PUT"], "path_regex": "/t/retried$"}]}'
aws_ s3 cp --quiet "$run/small" "s3://$B/t/retried"; rc=$?
check "aws retries through 2 injected 503s and succeeds" eval '[ $rc = 0 ] && [ "$(injected 503)" = 3 ]'
faults '{"rules": [{"fault": "truncate", "methods": ["GET"], "skip": 1, "max_count": 1}]}'
aws_ s3 cp --quiet "s3://$B/t/big" "$run/big.back2"
check "aws download survives a truncated ranged GET (retried)" cmp -s "$run/big" "$run/big.back2"
pattern() {
  local p=""
  faults '{"seed": 42, "rules": [{"fault": "500", "probability": 0.5, "methods": ["HEAD"]}]}'
  for _ in $(seq 1 16); do s3c HEAD t/small; p+=$(code | cut -c1); done
  echo "$p"
}
p1=$(pattern); p2=$(pattern)
check "seeded probability 0.5: same pattern twice ($p1)" eval '[ "$p1" = "$p2" ] && grep -q 5 <<<"$p1" && grep -q 2 <<<"$p1"'
ctl DELETE "" faults >/dev/null
s3c GET t/small
check "DELETE /faults clears the rules" [ "$(code)" = 200 ]
check "control /counters reports requests and statuses" eval 'ctl GET "" counters | grep -q "\"by_status\""'

# --- 8. logs -------------------------------------------------------------------------
check "request log has method, path, status of each request" grep -q '"method":"PUT".*"path":"/'"$B"'/t/cond".*"status":412' "$LOG"
check "request log has no secret" eval '! grep -qF "$AWS_SECRET_ACCESS_KEY" "$LOG"'
check "header dump has the Authorization headers" grep -q '^Authorization: AWS4-HMAC-SHA256' "$TANDEM_S3_HEADER_DUMP"
check "header dump has no secret" eval '! grep -qF "$AWS_SECRET_ACCESS_KEY" "$TANDEM_S3_HEADER_DUMP"'
check "proxy log shows no tracebacks" eval '! grep -q Traceback "$TANDEM_S3_DIR/proxy.log"'

echo "selftest: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
