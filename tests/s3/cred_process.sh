#!/bin/sh
# cred_process.sh — a credential_process for tests/test_s3.c: mints credentials through the
# test proxy's container endpoint (TANDEM_S3_CONTROL, token TANDEM_TEST_CREDS_TOKEN) and
# prints them in credential_process's format (Version 1, SessionToken, Expiration). The
# proxy counts them apart from the container endpoint's own (?via=process).
set -e
curl -sf -H "Authorization: $TANDEM_TEST_CREDS_TOKEN" "$TANDEM_S3_CONTROL/container-creds?via=process" |
  /usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin)
print(json.dumps({"Version": 1, "AccessKeyId": d["AccessKeyId"], "SecretAccessKey": d["SecretAccessKey"],
                  "SessionToken": d["Token"], "Expiration": d["Expiration"]}))'
