#!/usr/bin/python3
"""S3 test front: a SigV4-verifying, fault-injecting reverse proxy in front of s3rver.

Run with Debian's Python (/usr/bin/python3, which has python3-botocore):

    /usr/bin/python3 tests/s3/proxy.py --backend 127.0.0.1:4568 --data-dir DIR/data \
        --credentials DIR/credentials.json --port 0 --control-port 0 --ready-file DIR/ready.json

Normally started by tests/s3/start.sh; see tests/s3/README.md for the whole interface.

What it does for every request on --port (path-style S3 only: /bucket/key):
  * verifies the AWS SigV4 signature (Authorization header, or a presigned query) by
    recomputing it with botocore's S3SigV4Auth from the received method, path, query,
    signed headers and x-amz-content-sha256; checks the payload hash, Content-MD5 and
    x-amz-checksum-{crc32,sha1,sha256} against the received body;
  * injects faults chosen by rules set over the control port (--control-port);
  * serialises writes per key and implements what s3rver lacks or gets wrong:
    conditional PUT / CompleteMultipartUpload / DELETE (If-None-Match: *, If-Match),
    conditional GET/HEAD, Range edge cases, multipart ETags ("<md5 of md5s>-N"),
    part validation on Complete, AbortMultipartUpload, ListParts, ListMultipartUploads,
    encoding-type=url on listings, torn reads during overwrites;
  * forwards the rest, unsigned, to s3rver and relays the answer;
  * writes a JSON-lines request log (no header values, no secrets) and optionally a
    raw dump of request lines and headers.
"""

import argparse
import base64
import binascii
import calendar
import contextlib
import email.utils
import hashlib
import hmac
import html
import http.client
import http.server
import itertools
import json
import os
import random
import re
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET
import zlib
from urllib.parse import quote, quote_plus, unquote, urlsplit

import botocore.auth
import botocore.credentials
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders

CHUNK = 1 << 20
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
              "trailer", "upgrade", "expect", "proxy-authorization", "proxy-authenticate"}
# Headers never forwarded to s3rver: auth is ours, and the conditionals are evaluated here.
STRIP_TO_BACKEND = HOP_BY_HOP | {"authorization", "x-amz-security-token", "if-match",
                                 "if-none-match", "if-modified-since", "if-unmodified-since",
                                 "content-md5", "range"}
PRESIGN_PARAMS = {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                  "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"}
FAULT_KINDS = ("500", "503", "429", "reset", "close", "reset_after", "stall", "truncate", "other_object", "bare_200",
               "list_hide", "put_drop", "403", "412", "no_etag", "400", "400_conditional")
STREAMING_PREFIX = "STREAMING-"
UNSIGNED = "UNSIGNED-PAYLOAD"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class ClientGone(Exception):
    """The client went away (mid-body, or while we were answering)."""


class BackendError(Exception):
    pass


class S3Err(Exception):
    def __init__(self, status, code, message, **detail):
        super().__init__(message)
        self.status, self.code, self.message, self.detail = status, code, message, detail
        self.close = False   # close the connection after answering
        self.headers = {}


def xml_escape(s):
    return html.escape(str(s), quote=False)


def s3_quote(s):
    """URI-encode as SigV4 wants it: everything but A-Z a-z 0-9 - _ . ~ (UTF-8)."""
    return quote(s, safe="-_.~")


def parse_http_date(value):
    try:
        t = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if t is None:
        return None
    return t.timestamp()


def fix_namespace(data):
    """s3rver's XML answers carry xmlns="http://doc.s3.amazonaws.com/2006-03-01/";
    S3's namespace is http://s3.amazonaws.com/doc/2006-03-01/."""
    return data.replace(b"http://doc.s3.amazonaws.com/2006-03-01/", S3_NS.encode())


def strip_etag(v):
    v = v.strip()
    if v.startswith("W/"):
        v = v[2:]
    return v.strip('"')


def etag_list_matches(header, current):
    """If-Match / If-None-Match value against the current (quoted or bare) ETag."""
    if current is None:
        return False
    cur = strip_etag(current)
    for item in header.split(","):
        item = item.strip()
        if item == "*" or strip_etag(item) == cur:
            return True
    return False


# --------------------------------------------------------------------------- SigV4

class ExactS3SigV4Auth(botocore.auth.S3SigV4Auth):
    """botocore's S3 signer, told exactly which headers (and values) the client signed.

    botocore itself decides which headers to sign (it drops e.g. User-Agent and Expect);
    a server must use the client's SignedHeaders list instead, so only that selection is
    overridden. Canonical request, string to sign and the HMAC chain stay botocore's.
    """

    def __init__(self, credentials, service, region, signed_pairs):
        super().__init__(credentials, service, region)
        self._signed_pairs = signed_pairs

    def headers_to_sign(self, request):
        m = HTTPHeaders()
        for name, value in self._signed_pairs:
            m[name] = value
        return m


def canonical_path(raw_path):
    # S3 does not normalise the path ('//' and '.' segments stay) but a correct signer
    # URI-encodes every byte of each segment except unreserved characters.
    return "/".join(s3_quote(unquote(seg)) for seg in raw_path.split("/"))


def canonical_query(pairs):
    return "&".join(f"{s3_quote(k)}={s3_quote(v)}" for k, v in pairs)


def split_query(raw_query):
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        if part == "":
            continue
        k, _, v = part.partition("=")
        pairs.append((unquote(k), unquote(v)))
    return pairs


class Credentials:
    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        self.keys = {}
        self.expiry = {}  # access key -> unix time after which it is refused (ExpiredToken)
        for ent in data["credentials"]:
            self.keys[ent["access_key"]] = (ent["secret_key"], ent.get("session_token"))
        self.region = data.get("region", "us-east-1")


class Sts:
    """A loopback STS for AssumeRoleWithWebIdentity (the wire format of
    https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html):
    a form POST answered with the Credentials XML. Configured over the control port
    (POST /sts/config {"token", "role_arn", "duration_s"}); each answer issues a new
    identity that the S3 side accepts until it expires (then 400 ExpiredToken)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.token = None
        self.role_arn = None
        self.duration = 900.0
        self.calls = self.issued = self.refused = 0

    container_token = None   # the Authorization value the container endpoint wants
    imds_role = None         # the instance role IMDS names (None: no instance profile)
    container_issued = imds_issued = process_issued = 0

    def configure(self, doc):
        with self.lock:
            self.token = doc.get("token", self.token)
            self.role_arn = doc.get("role_arn", self.role_arn)
            self.duration = float(doc.get("duration_s", self.duration))
            # an issuer whose clock is ahead: the Expiration it states lies that far past
            # the moment S3 refuses the key (the client, trusting it, renews too late)
            self.clock_ahead = float(doc.get("clock_ahead_s", getattr(self, "clock_ahead", 0.0)))
            self.container_token = doc.get("container_token", self.container_token)
            self.imds_role = doc.get("imds_role", self.imds_role)
            self.imds_tokens = getattr(self, "imds_tokens", set())

    def snapshot(self):
        with self.lock:
            return {"sts_calls": self.calls, "sts_issued": self.issued, "sts_refused": self.refused,
                    "sts_assumed": getattr(self, "assumed", 0),
                    "container_issued": self.container_issued, "imds_issued": self.imds_issued,
                    "process_issued": self.process_issued}

    def assume_role(self, creds, form, caller, token=None):
        """(status, xml) for a verified AssumeRole by the access key `caller`; a refusal
        echoes the caller's session token (`token`), as a hostile or careless STS might, so
        that the tests see the client keep it out of its error text."""
        with self.lock:
            self.calls += 1
            role = self.role_arn
        if not form.get("RoleArn") or not form.get("RoleSessionName"):
            return 400, "<ErrorResponse><Error><Code>MissingParameter</Code></Error></ErrorResponse>"
        if role is not None and form["RoleArn"] != role:
            with self.lock:
                self.refused += 1
            return 403, ("<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>"
                         f"User {html.escape(caller)} is not authorized to perform: sts:AssumeRole"
                         + (f" (session token {html.escape(token)})" if token else "")
                         + "</Message></Error></ErrorResponse>")
        d = json.loads(self.issue_json(creds))
        with self.lock:
            self.issued += 1
            self.assumed = getattr(self, "assumed", 0) + 1
        return 200, ("<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleResult>"
                     f"<AssumedRoleUser><Arn>{html.escape(form['RoleArn'])}</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser>"
                     f"<Credentials><AccessKeyId>{d['AccessKeyId']}</AccessKeyId><SecretAccessKey>{d['SecretAccessKey']}"
                     f"</SecretAccessKey><SessionToken>{d['Token']}</SessionToken><Expiration>{d['Expiration']}"
                     "</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>")

    def issue_json(self, creds):
        """New credentials as the container endpoint and IMDS give them (JSON)."""
        ak = "ASIA" + binascii.hexlify(os.urandom(8)).decode().upper()
        sk = base64.b64encode(os.urandom(30)).decode()
        st = base64.b64encode(os.urandom(96)).decode()
        with self.lock:
            expires = time.time() + self.duration
        creds.keys[ak] = (sk, st)
        creds.expiry[ak] = expires
        stated = expires + getattr(self, "clock_ahead", 0.0)
        return json.dumps({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": ak,
                           "SecretAccessKey": sk, "Token": st,
                           "LastUpdated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stated))})

    def answer(self, creds, form):
        """(status, xml) for a request's form fields."""
        def err(status, code, msg):
            with self.lock:
                self.refused += 1
            return status, ("<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                            f"<Error><Type>Sender</Type><Code>{code}</Code><Message>{html.escape(msg)}"
                            "</Message></Error><RequestId>tandem-test</RequestId></ErrorResponse>")
        with self.lock:
            self.calls += 1
            token, role, duration = self.token, self.role_arn, self.duration
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15":
            return err(400, "InvalidAction", "expected Action=AssumeRoleWithWebIdentity, Version=2011-06-15")
        for f in ("RoleArn", "RoleSessionName", "WebIdentityToken"):
            if not form.get(f):
                return err(400, "MissingParameter", f"{f} is required")
        if not re.fullmatch(r"[\w+=,.@-]{2,64}", form["RoleSessionName"]):
            return err(400, "ValidationError", "RoleSessionName does not match [\\w+=,.@-]{2,64}")
        if token is None or form["WebIdentityToken"] != token:
            return err(400, "InvalidIdentityToken", "The web identity token is not valid")
        if role is not None and form["RoleArn"] != role:
            return err(403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
        ak = "ASIA" + binascii.hexlify(os.urandom(8)).decode().upper()
        sk = base64.b64encode(os.urandom(30)).decode()
        st = base64.b64encode(os.urandom(96)).decode()
        expires = time.time() + duration
        creds.keys[ak] = (sk, st)
        creds.expiry[ak] = expires
        with self.lock:
            self.issued += 1
        exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
        return 200, ("<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                     "<AssumeRoleWithWebIdentityResult>"
                     "<SubjectFromWebIdentityToken>system:serviceaccount:ml:tandem</SubjectFromWebIdentityToken>"
                     "<Audience>sts.amazonaws.com</Audience>"
                     f"<AssumedRoleUser><Arn>{html.escape(form['RoleArn'])}/{form['RoleSessionName']}</Arn>"
                     "<AssumedRoleId>AROATEST:tandem</AssumedRoleId></AssumedRoleUser>"
                     f"<Credentials><SessionToken>{st}</SessionToken><SecretAccessKey>{sk}</SecretAccessKey>"
                     f"<Expiration>{exp}</Expiration><AccessKeyId>{ak}</AccessKeyId></Credentials>"
                     "<Provider>oidc.test</Provider></AssumeRoleWithWebIdentityResult>"
                     "<ResponseMetadata><RequestId>tandem-test</RequestId></ResponseMetadata>"
                     "</AssumeRoleWithWebIdentityResponse>")


def verify_sigv4(cfg, method, raw_path, raw_query, headers, now=None, want_service="s3"):
    """Returns the access key on success, raises S3Err otherwise."""
    now = time.time() if now is None else now
    pairs = split_query(raw_query)
    qdict = {}
    for k, v in pairs:
        qdict.setdefault(k, v)
    auth = headers.get("Authorization")
    presigned = "X-Amz-Algorithm" in qdict
    if auth is not None and (presigned or "Signature" in qdict):
        raise S3Err(400, "InvalidArgument", "Only one auth mechanism allowed; only the "
                    "X-Amz-Algorithm query parameter, Signature query string parameter or the "
                    "Authorization header should be specified")
    if auth is None and not presigned:
        if "Signature" in qdict or "AWSAccessKeyId" in qdict:
            raise S3Err(400, "InvalidRequest", "Signature Version 2 is not supported by this "
                        "test server; use AWS4-HMAC-SHA256.")
        raise S3Err(403, "AccessDenied", "Access Denied")

    if presigned:
        if qdict["X-Amz-Algorithm"] != "AWS4-HMAC-SHA256":
            raise S3Err(400, "AuthorizationQueryParametersError",
                        "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
        try:
            credential = qdict["X-Amz-Credential"]
            signed_list = qdict["X-Amz-SignedHeaders"]
            provided = qdict["X-Amz-Signature"]
            amz_date = qdict["X-Amz-Date"]
            expires = int(qdict.get("X-Amz-Expires", "604800"))
        except (KeyError, ValueError):
            raise S3Err(400, "AuthorizationQueryParametersError",
                        "Query-string authentication version 4 requires the X-Amz-Algorithm, "
                        "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, "
                        "and X-Amz-Expires parameters.")
        token = qdict.get("X-Amz-Security-Token")
        sign_pairs = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]
        payload_hash = UNSIGNED
    else:
        m = re.match(r"^\s*AWS4-HMAC-SHA256\s+(.*)$", auth, re.S)
        if not m:
            if auth.startswith("AWS "):
                raise S3Err(400, "InvalidRequest", "Signature Version 2 is not supported by "
                            "this test server; use AWS4-HMAC-SHA256.")
            raise S3Err(400, "InvalidArgument", "Unsupported Authorization Type",
                        ArgumentName="Authorization")
        fields = {}
        for comp in m.group(1).split(","):
            k, _, v = comp.strip().partition("=")
            fields[k.strip()] = v.strip()
        try:
            credential = fields["Credential"]
            signed_list = fields["SignedHeaders"]
            provided = fields["Signature"]
        except KeyError:
            raise S3Err(400, "AuthorizationHeaderMalformed",
                        "The authorization header is malformed; the authorization header "
                        "requires three components: Credential, SignedHeaders, and Signature.")
        amz_date = headers.get("X-Amz-Date")
        if amz_date is None and headers.get("Date") is not None:
            ts = parse_http_date(headers["Date"])
            amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(ts)) if ts else None
        if amz_date is None:
            raise S3Err(403, "AccessDenied", "AWS authentication requires a valid Date or "
                        "x-amz-date header")
        expires = None
        token = headers.get("X-Amz-Security-Token")
        sign_pairs = pairs
        payload_hash = headers.get("X-Amz-Content-SHA256")
        if payload_hash is None:
            raise S3Err(400, "InvalidRequest",
                        "Missing required header for this request: x-amz-content-sha256")
        if not (payload_hash == UNSIGNED or payload_hash.startswith(STREAMING_PREFIX)
                or re.fullmatch(r"[0-9a-f]{64}", payload_hash)):
            raise S3Err(400, "InvalidArgument",
                        "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-..., "
                        "or a valid sha256 value.", ArgumentName="x-amz-content-sha256",
                        ArgumentValue=payload_hash)

    cparts = credential.split("/")
    if len(cparts) != 5 or cparts[4] != "aws4_request":
        raise S3Err(400, "AuthorizationHeaderMalformed",
                    "The authorization header is malformed; the Credential is mal-formed; "
                    f"expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
    access_key, scope_date, region, service = cparts[:4]
    if access_key not in cfg.creds.keys:
        raise S3Err(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not "
                    "exist in our records.", AWSAccessKeyId=access_key)
    secret, want_token = cfg.creds.keys[access_key]
    expiry = cfg.creds.expiry.get(access_key)
    if expiry is not None and now > expiry:
        raise S3Err(400, "ExpiredToken", "The provided token has expired.")
    if want_token is not None and token != want_token:
        raise S3Err(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
    if want_token is None and token is not None:
        raise S3Err(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
    if not re.fullmatch(r"\d{8}T\d{6}Z", amz_date or ""):
        raise S3Err(403, "AccessDenied", "AWS authentication requires a valid Date or "
                    "x-amz-date header")
    if scope_date != amz_date[:8]:
        raise S3Err(403, "SignatureDoesNotMatch", "Date in Credential scope does not match "
                    "YYYYMMDD from ISO-8601 version of date from HTTP.")
    if region != cfg.creds.region:
        raise S3Err(400, "AuthorizationHeaderMalformed",
                    f"The authorization header is malformed; the region '{region}' is wrong; "
                    f"expecting '{cfg.creds.region}'", Region=cfg.creds.region)
    if service != want_service:
        raise S3Err(400, "AuthorizationHeaderMalformed", "The authorization header is "
                    f"malformed; incorrect service \"{service}\". This endpoint belongs to \"s3\".")
    req_time = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    if presigned:
        if expires < 1 or expires > 604800:
            raise S3Err(400, "AuthorizationQueryParametersError",
                        "X-Amz-Expires must be between 1 and 604800 seconds")
        if now > req_time + expires:
            raise S3Err(403, "AccessDenied", "Request has expired", XAmzExpires=expires)
        if req_time > now + cfg.max_skew:
            raise S3Err(403, "AccessDenied", "Request is not valid yet")
    elif abs(now - req_time) > cfg.max_skew:
        raise S3Err(403, "RequestTimeTooSkewed", "The difference between the request time and "
                    "the current time is too large.", RequestTime=amz_date,
                    ServerTime=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                    MaxAllowedSkewMilliseconds=int(cfg.max_skew * 1000))

    signed_names = [n for n in signed_list.split(";") if n]
    if signed_names != sorted(set(signed_names)) or any(n != n.lower() for n in signed_names):
        raise S3Err(403, "SignatureDoesNotMatch", "SignedHeaders must be lower-case, sorted "
                    "and unique.")
    if "host" not in signed_names:
        raise S3Err(400, "AuthorizationHeaderMalformed", "The authorization header is "
                    "malformed; SignedHeaders must include host.")
    # Real S3: every x-amz-* header (except the signature itself) must be signed.
    present = {k.lower() for k in headers.keys()}
    unsigned = sorted(h for h in present if h.startswith("x-amz-") and h not in signed_names
                      and not (presigned and h == "x-amz-content-sha256"))
    if unsigned:
        raise S3Err(403, "AccessDenied", "There were headers present in the request which "
                    "were not signed", HeadersNotSigned=", ".join(unsigned))
    signed_pairs = []
    for name in signed_names:
        values = headers.get_all(name) or [""]
        for v in values:
            signed_pairs.append((name, v))

    host = headers.get("Host", "localhost")
    url = "http://" + host + canonical_path(raw_path)
    cq = canonical_query(sign_pairs)
    if cq:
        url += "?" + cq
    request = AWSRequest(method=method, url=url, headers={"X-Amz-Content-SHA256": payload_hash})
    request.context["timestamp"] = amz_date
    signer = ExactS3SigV4Auth(botocore.credentials.Credentials(access_key, secret, want_token),
                              service, region, signed_pairs)
    creq = signer.canonical_request(request)
    sts = signer.string_to_sign(request, creq)
    expected = signer.signature(sts, request)
    if not hmac.compare_digest(expected, provided):
        raise S3Err(403, "SignatureDoesNotMatch", "The request signature we calculated does not "
                    "match the signature you provided. Check your key and signing method.",
                    AWSAccessKeyId=access_key, StringToSign=sts, SignatureProvided=provided,
                    CanonicalRequest=creq)
    return access_key


# --------------------------------------------------------------------------- faults

class Faults:
    """Fault rules, a seeded RNG, and counters. Set/read over the control port."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.seed = 0
        self.rng = random.Random(0)
        self.injected = {k: 0 for k in FAULT_KINDS}
        self.truncate_skipped = 0

    @staticmethod
    def _check_rule(r, i):
        if not isinstance(r, dict):
            raise ValueError(f"rule {i}: not an object")
        known = {"fault", "probability", "methods", "path_regex", "max_count", "skip",
                 "stall_seconds", "truncate_fraction", "truncate_bytes", "other_key", "retry_after"}
        bad = set(r) - known
        if bad:
            raise ValueError(f"rule {i}: unknown fields {sorted(bad)}")
        fault = str(r.get("fault"))
        if fault not in FAULT_KINDS:
            raise ValueError(f"rule {i}: fault must be one of {', '.join(FAULT_KINDS)}")
        p = float(r.get("probability", 1.0))
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"rule {i}: probability must be in [0, 1]")
        methods = r.get("methods")
        if methods is not None:
            if isinstance(methods, str):
                methods = [methods]
            methods = [str(m).upper() for m in methods]
        regex = r.get("path_regex")
        retry_after = r.get("retry_after")
        if retry_after is not None:
            if fault not in ("503", "429"):
                raise ValueError(f"rule {i}: retry_after goes with the 503 and 429 faults")
            if isinstance(retry_after, bool) or not isinstance(retry_after, (int, str)):
                raise ValueError(f"rule {i}: retry_after must be a number of seconds or a text (an HTTP-date)")
            retry_after = str(retry_after)
            if not retry_after or any(c in retry_after for c in "\r\n"):
                raise ValueError(f"rule {i}: retry_after must be one line, not empty")
        return {
            "fault": fault, "probability": p, "methods": methods,
            "path_regex": regex, "_re": re.compile(regex) if regex else None,
            "max_count": None if r.get("max_count") is None else int(r["max_count"]),
            "skip": int(r.get("skip", 0)),
            "stall_seconds": float(r.get("stall_seconds", 5.0)),
            "truncate_fraction": float(r.get("truncate_fraction", 0.5)),
            "truncate_bytes": None if r.get("truncate_bytes") is None else int(r["truncate_bytes"]),
            "other_key": str(r.get("other_key", "")),
            "retry_after": retry_after,
            "matched": 0, "injected": 0,
        }

    def configure(self, doc):
        if isinstance(doc, list):
            doc = {"rules": doc}
        rules = [self._check_rule(r, i) for i, r in enumerate(doc.get("rules", []))]
        seed = int(doc.get("seed", 0))
        with self.lock:
            self.rules = rules
            self.seed = seed
            self.rng = random.Random(seed)

    def reset_counters(self):
        with self.lock:
            self.injected = {k: 0 for k in FAULT_KINDS}
            self.truncate_skipped = 0
            for r in self.rules:
                r["matched"] = r["injected"] = 0

    def draw(self, method, target):
        """First rule that matches and fires, or None. One RNG draw per eligible rule."""
        with self.lock:
            for r in self.rules:
                if r["methods"] and method not in r["methods"]:
                    continue
                if r["_re"] is not None and not r["_re"].search(target):
                    continue
                if r["max_count"] is not None and r["injected"] >= r["max_count"]:
                    continue
                r["matched"] += 1
                if r["matched"] <= r["skip"]:
                    continue
                if r["probability"] < 1.0 and self.rng.random() >= r["probability"]:
                    continue
                r["injected"] += 1
                self.injected[r["fault"]] += 1
                return dict(r)
        return None

    def undo_truncate(self):
        with self.lock:
            self.injected["truncate"] -= 1
            self.truncate_skipped += 1

    def snapshot(self):
        with self.lock:
            return {
                "seed": self.seed,
                "rules": [{k: v for k, v in r.items() if not k.startswith("_")}
                          for r in self.rules],
                "injected": dict(self.injected),
                "truncate_skipped": self.truncate_skipped,
            }


class EtagMap:
    """bucket/key -> (md5 that s3rver reports, multipart ETag "<md5 of part md5s>-N").
    s3rver gives a multipart object the MD5 of its bytes; S3 does not. Kept in a JSON
    file beside s3rver's buckets (a plain file there is not taken for a bucket), so a
    restarted proxy still answers the same ETags."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.map = {}
        try:
            with open(path) as f:
                self.map = {k: tuple(v) for k, v in json.load(f).items()}
        except (OSError, ValueError):
            pass

    def get(self, name, default=None):
        return self.map.get(name, default)

    def __bool__(self):
        return bool(self.map)

    def _save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.map, f)
        os.replace(tmp, self.path)

    def set(self, name, value):
        with self.lock:
            self.map[name] = tuple(value)
            self._save()

    def pop(self, name, default=None):
        with self.lock:
            if name not in self.map:
                return default
            v = self.map.pop(name)
            self._save()
            return v


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.by_status = {}
        self.by_method = {}

    def add(self, method, status):
        with self.lock:
            self.requests += 1
            self.by_status[str(status)] = self.by_status.get(str(status), 0) + 1
            self.by_method[method] = self.by_method.get(method, 0) + 1

    def reset(self):
        with self.lock:
            self.requests = 0
            self.by_status = {}
            self.by_method = {}

    def snapshot(self):
        with self.lock:
            return {"requests": self.requests, "by_status": dict(self.by_status),
                    "by_method": dict(self.by_method)}


# --------------------------------------------------------------------------- key locks

class _RW:
    def __init__(self):
        self.cond = threading.Condition()
        self.readers = 0
        self.writer = False
        self.waiting_writers = 0
        self.refs = 0

    def acquire(self, exclusive):
        with self.cond:
            if exclusive:
                self.waiting_writers += 1
                while self.writer or self.readers:
                    self.cond.wait()
                self.waiting_writers -= 1
                self.writer = True
            else:
                while self.writer or self.waiting_writers:
                    self.cond.wait()
                self.readers += 1

    def release(self, exclusive):
        with self.cond:
            if exclusive:
                self.writer = False
            else:
                self.readers -= 1
            self.cond.notify_all()


class KeyLocks:
    """Per-object reader/writer locks: writes to a key are serialised (so a conditional
    write's HEAD-then-PUT is atomic) and reads never see s3rver's in-place overwrite."""

    def __init__(self):
        self.mu = threading.Lock()
        self.locks = {}

    @contextlib.contextmanager
    def hold(self, name, exclusive):
        with self.mu:
            ent = self.locks.get(name)
            if ent is None:
                ent = self.locks[name] = _RW()
            ent.refs += 1
        try:
            ent.acquire(exclusive)
            try:
                yield
            finally:
                ent.release(exclusive)
        finally:
            with self.mu:
                ent.refs -= 1
                if ent.refs == 0:
                    del self.locks[name]


# --------------------------------------------------------------------------- logs

class JsonLog:
    def __init__(self, path):
        self.lock = threading.Lock()
        self.f = open(path, "a", buffering=1) if path else None

    def write(self, obj):
        if self.f is None:
            return
        line = json.dumps(obj, separators=(",", ":"), sort_keys=True)
        with self.lock:
            self.f.write(line + "\n")


class RawDump:
    def __init__(self, path):
        self.lock = threading.Lock()
        self.f = open(path, "ab", buffering=0) if path else None

    def write(self, requestline, headers):
        if self.f is None:
            return
        out = [requestline.rstrip("\r\n")]
        for k, v in headers.items():
            out.append(f"{k}: {v}")
        data = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1", "replace")
        with self.lock:
            self.f.write(data)


# --------------------------------------------------------------------------- body

class Body:
    """A received request body, in memory or spooled to a temporary file."""

    def __init__(self):
        self.mem = None
        self.file = None
        self.length = 0

    def chunks(self):
        if self.file is not None:
            self.file.seek(0)
            while True:
                b = self.file.read(CHUNK)
                if not b:
                    return
                yield b
        elif self.mem is not None and self.length:
            yield memoryview(self.mem)

    def data(self):
        if self.file is not None:
            self.file.seek(0)
            return self.file.read()
        return bytes(self.mem or b"")

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None
        self.mem = None


# --------------------------------------------------------------------------- server

class Cfg:
    pass


_tls = threading.local()
_conn_ids = itertools.count(1)


class S3Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AmazonS3"
    sys_version = ""
    disable_nagle_algorithm = True
    timeout = 300          # idle keep-alive connections are dropped after this
    cfg = None             # set by main()

    def version_string(self):
        return "AmazonS3"

    # -- plumbing ----------------------------------------------------------------

    def setup(self):
        super().setup()
        self.conn_id = next(_conn_ids)

    def log_message(self, fmt, *args):
        if self.cfg.verbose:
            sys.stderr.write("proxy: %s %s\n" % (self.address_string(), fmt % args))

    def log_request(self, code="-", size="-"):
        pass

    def handle_expect_100(self):
        # Answer "100 Continue" only once the headers (and so the signature) are checked.
        self._expect_continue = True
        return True

    def do_GET(self):
        self.handle_s3()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def _backend_conn(self):
        conn = getattr(_tls, "conn", None)
        if conn is not None and time.monotonic() - _tls.last > 2.0:
            # Node closes idle keep-alive connections after 5 s; don't race it.
            conn.close()
            conn = None
        fresh = conn is None
        if fresh:
            conn = http.client.HTTPConnection(self.cfg.backend_host, self.cfg.backend_port,
                                              timeout=self.cfg.backend_timeout)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _tls.conn = conn
        return conn, fresh

    def _backend_drop(self):
        conn = getattr(_tls, "conn", None)
        if conn is not None:
            conn.close()
        _tls.conn = None

    def backend(self, method, path, headers, body=None):
        """Sends one request to s3rver; returns the HTTPResponse (read it to the end, or
        call _backend_drop)."""
        for attempt in (0, 1):
            conn, fresh = self._backend_conn()
            try:
                conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
                for k, v in headers:
                    conn.putheader(k, v)
                conn.endheaders()
                if body is not None:
                    for chunk in body.chunks():
                        conn.send(chunk)
                resp = conn.getresponse()
                _tls.last = time.monotonic()
                return resp
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.BadStatusLine) as e:
                self._backend_drop()
                if fresh or attempt:
                    raise BackendError(f"backend connection failed: {e!r}")
            except OSError as e:
                self._backend_drop()
                raise BackendError(f"backend connection failed: {e!r}")
        raise BackendError("unreachable")

    def _finish_backend(self, resp):
        if resp.will_close:
            self._backend_drop()
        else:
            _tls.last = time.monotonic()

    def backend_simple(self, method, path, headers=()):
        hdrs = [("Host", self.headers.get("Host", "localhost")), ("Content-Length", "0")]
        hdrs += list(headers)
        resp = self.backend(method, path, hdrs)
        data = resp.read()
        self._finish_backend(resp)
        return resp, data

    # -- responses ---------------------------------------------------------------

    def _write(self, data):
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError) as e:
            raise ClientGone(str(e))
        self.bytes_out += len(data)

    def _end_headers(self):
        try:
            self.end_headers()
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError) as e:
            raise ClientGone(str(e))

    def send_s3_error(self, err):
        body = b""
        if self.command != "HEAD":
            parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<Error>',
                     f"<Code>{xml_escape(err.code)}</Code>",
                     f"<Message>{xml_escape(err.message)}</Message>"]
            for k, v in err.detail.items():
                parts.append(f"<{k}>{xml_escape(v)}</{k}>")
            if self.resource:
                parts.append(f"<Resource>{xml_escape(self.resource)}</Resource>")
            parts.append(f"<RequestId>{self.request_id}</RequestId>")
            parts.append(f"<HostId>{self.host_id}</HostId></Error>")
            body = "".join(parts).encode()
        self.status = err.status
        self.err_code = err.code
        self.send_response(err.status)
        self.send_header("x-amz-request-id", self.request_id)
        self.send_header("x-amz-id-2", self.host_id)
        for k, v in err.headers.items():
            self.send_header(k, v)
        if body:
            self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        if err.close or self.body_pending:
            self.send_header("Connection", "close")
            self.close_connection = True
        self._end_headers()
        if body:
            self._write(body)

    def send_xml(self, status, xml_text, extra_headers=()):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n' + xml_text).encode()
        self.status = status
        self.send_response(status)
        self.send_header("x-amz-request-id", self.request_id)
        self.send_header("x-amz-id-2", self.host_id)
        for k, v in extra_headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self._end_headers()
        self._write(body)

    def send_empty(self, status, extra_headers=()):
        self.status = status
        self.send_response(status)
        self.send_header("x-amz-request-id", self.request_id)
        self.send_header("x-amz-id-2", self.host_id)
        for k, v in extra_headers:
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self._end_headers()

    def abort_connection(self, rst):
        """Close without answering: RST (SO_LINGER 0) or an orderly FIN."""
        self.close_connection = True
        try:
            if rst:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
            self.connection.close()
        except OSError:
            pass

    # -- request pipeline --------------------------------------------------------

    def handle_s3(self):
        cfg = self.cfg
        t0 = time.monotonic()
        self.request_id = uuid.uuid4().hex[:16].upper()
        self.host_id = base64.b64encode(os.urandom(24)).decode()
        self.status = None
        self.err_code = None
        self.fault = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.access_key = None
        self.resource = None
        self.body_pending = False
        expect = getattr(self, "_expect_continue", False)
        self._expect_continue = False
        cfg.dump.write(self.requestline, self.headers)
        try:
            self._handle(expect)
        except ClientGone:
            self.close_connection = True
            if self.status is None:
                self.status = "client-gone"
            else:
                self.status = f"{self.status}+client-gone"
        except S3Err as e:
            try:
                self.send_s3_error(e)
            except ClientGone:
                self.close_connection = True
        except BackendError as e:
            sys.stderr.write(f"proxy: {self.command} {self.path}: {e}\n")
            self._backend_drop()
            try:
                err = S3Err(502, "BadGateway", "s3rver did not answer")
                err.close = True
                self.send_s3_error(err)
            except ClientGone:
                self.close_connection = True
        except Exception as e:  # a bug here must not kill the server
            import traceback
            traceback.print_exc()
            self._backend_drop()
            try:
                err = S3Err(500, "InternalError", f"proxy error: {e!r}")
                err.close = True
                self.send_s3_error(err)
            except Exception:
                self.close_connection = True
        finally:
            cfg.stats.add(self.command, self.status)
            path, _, query = self.path.partition("?")
            if query:
                query = re.sub(r"(X-Amz-Security-Token|X-Amz-Signature)=[^&]*",
                               r"\1=REDACTED", query)
            cfg.log.write({
                "t": round(time.time(), 6), "id": self.request_id, "conn": self.conn_id,
                "method": self.command, "path": path, "query": query,
                "status": self.status, "error": self.err_code, "fault": self.fault,
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                "ms": round((time.monotonic() - t0) * 1000, 3), "access_key": self.access_key,
            })

    def _handle(self, expect):
        cfg = self.cfg
        raw_path, _, raw_query = self.path.partition("?")
        if raw_path.startswith("http://") or raw_path.startswith("https://"):
            raw_path = urlsplit(raw_path).path or "/"
        self.raw_path, self.raw_query = raw_path, raw_query
        decoded = unquote(raw_path)
        self.resource = decoded
        bucket, _, key = decoded.lstrip("/").partition("/")
        self.bucket, self.key = bucket, key
        self.query = split_query(raw_query)
        self.q = {}
        for k, v in self.query:
            self.q.setdefault(k, v)
        # What s3rver gets: the same target less any presigned-URL auth parameters.
        self.fwd_path = self.path
        if "X-Amz-Algorithm" in self.q:
            kept = [part for part in raw_query.split("&")
                    if unquote(part.partition("=")[0]) not in PRESIGN_PARAMS]
            self.fwd_path = raw_path + ("?" + "&".join(kept) if kept else "")

        # -- framing
        te = self.headers.get("Transfer-Encoding")
        cl = self.headers.get("Content-Length")
        length = 0
        if te is not None:
            self.body_pending = True
            if "aws-chunked" in (self.headers.get("Content-Encoding") or "") or \
                    self.headers.get("X-Amz-Decoded-Content-Length"):
                raise S3Err(501, "NotImplemented", "aws-chunked uploads are not supported by "
                            "this test server", Header="Transfer-Encoding")
            raise S3Err(411, "MissingContentLength", "You must provide the Content-Length "
                        "HTTP header.")
        if cl is not None:
            try:
                length = int(cl)
                if length < 0:
                    raise ValueError
            except ValueError:
                self.body_pending = True
                raise S3Err(400, "InvalidArgument", "Invalid Content-Length",
                            ArgumentName="Content-Length")
        elif self.command == "PUT":
            raise S3Err(411, "MissingContentLength", "You must provide the Content-Length "
                        "HTTP header.")
        self.body_pending = length > 0

        # -- authentication (headers only: the payload hash is the header's value)
        self.access_key = verify_sigv4(cfg, self.command, raw_path, raw_query, self.headers)
        payload_hash = self.headers.get("X-Amz-Content-SHA256", UNSIGNED)
        if payload_hash.startswith(STREAMING_PREFIX):
            raise S3Err(501, "NotImplemented", "Streaming (aws-chunked) payload signing is not "
                        "supported by this test server", Header="x-amz-content-sha256")
        if length > cfg.max_body:
            raise S3Err(400, "EntityTooLarge", "Your proposed upload exceeds the maximum "
                        "allowed size", ProposedSize=length, MaxSizeAllowed=cfg.max_body)

        # -- body
        if expect and length > 0:
            try:
                self.send_response_only(100)
                self.end_headers()
            except OSError as e:
                raise ClientGone(str(e))
        body = self._read_body(length, payload_hash)
        self.body_pending = False
        try:
            # -- faults
            rule = cfg.faults.draw(self.command, self.path)
            if rule is not None:
                self.fault = rule["fault"]
                kind = rule["fault"]
                if kind == "stall":
                    time.sleep(rule["stall_seconds"])
                elif kind == "500":
                    raise S3Err(500, "InternalError", "We encountered an internal error. "
                                "Please try again.")
                elif kind in ("503", "429"):
                    err = S3Err(int(kind), "SlowDown" if kind == "503" else "TooManyRequests",
                                "Please reduce your request rate.")
                    if rule["retry_after"] is not None:
                        err.headers["Retry-After"] = rule["retry_after"]
                    raise err
                elif kind == "403":
                    raise S3Err(403, "AccessDenied", "Access Denied")
                elif kind == "400" or (kind == "400_conditional" and
                                       (self.headers.get("If-None-Match") or self.headers.get("If-Match"))):
                    # 400_conditional: an endpoint that refuses the conditional headers themselves
                    raise S3Err(400, "InvalidArgument", "Unsupported header")
                elif kind == "412":
                    # refused as if the condition failed, whatever is there (nothing is applied)
                    raise S3Err(412, "PreconditionFailed", "At least one of the pre-conditions you "
                                "specified did not hold",
                                Condition="If-Match" if self.headers.get("If-Match") else "If-None-Match")
                elif kind in ("reset", "close"):
                    self.status = kind
                    self.abort_connection(rst=(kind == "reset"))
                    return
                elif kind == "put_drop" and self.command == "PUT" and self.key:
                    # answered as stored, and not stored (a proxy or server losing writes)
                    self.status = 200
                    self.send_response(200)
                    self.send_header("ETag", '"' + hashlib.md5(body.data()).hexdigest() + '"')
                    self.send_header("Content-Length", "0")
                    self._end_headers()
                    return
                elif kind == "bare_200" and self.command == "GET" and self.key:
                    # a page with 200 and none of the object's headers (a captive portal's)
                    page = b"<html><body>please log in</body></html>"
                    self.status = 200
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self._end_headers()
                    self._write(page)
                    return
                elif kind == "other_object" and self.command in ("GET", "HEAD") and self.key:
                    # another object's answer, bytes and headers: a cache or proxy mixing up keys
                    self.key = rule["other_key"]
                    self.fwd_path = self._backend_path() + ("?" + self.raw_query if self.raw_query else "")
            self.rule = rule
            self._dispatch(body)
        finally:
            body.close()

    def _read_body(self, length, payload_hash):
        body = Body()
        body.length = length
        want_sha = None if payload_hash == UNSIGNED else payload_hash
        md5_b64 = self.headers.get("Content-MD5")
        md5_want = None
        if md5_b64 is not None:
            try:
                md5_want = base64.b64decode(md5_b64, validate=True)
            except binascii.Error:
                md5_want = b""
            if len(md5_want) != 16:
                self.body_pending = length > 0
                raise S3Err(400, "InvalidDigest", "The Content-MD5 you specified was invalid.",
                            **{"Content-MD5": md5_b64})
        checks = []
        for algo, mk in (("sha256", hashlib.sha256), ("sha1", hashlib.sha1), ("crc32", None)):
            v = self.headers.get(f"x-amz-checksum-{algo}")
            if v is not None:
                checks.append((algo, v, mk() if mk else [0]))
        sha = hashlib.sha256() if want_sha else None
        md5 = hashlib.md5() if md5_want else None

        def update(mv):
            if sha:
                sha.update(mv)
            if md5:
                md5.update(mv)
            for algo, _, h in checks:
                if algo == "crc32":
                    h[0] = zlib.crc32(mv, h[0])
                else:
                    h.update(mv)

        pos = 0
        if length <= self.cfg.spool_threshold:
            buf = bytearray(length)
            mv = memoryview(buf)
            body.mem = buf
            while pos < length:
                try:
                    n = self.rfile.readinto(mv[pos:min(pos + CHUNK, length)])
                except OSError as e:
                    raise ClientGone(str(e))
                if not n:
                    raise ClientGone("EOF in request body")
                update(mv[pos:pos + n])
                pos += n
                self.bytes_in = pos
        else:
            body.file = tempfile.TemporaryFile(dir=self.cfg.spool_dir)
            buf = bytearray(CHUNK)
            mv = memoryview(buf)
            while pos < length:
                want = min(CHUNK, length - pos)
                try:
                    n = self.rfile.readinto(mv[:want])
                except OSError as e:
                    raise ClientGone(str(e))
                if not n:
                    raise ClientGone("EOF in request body")
                update(mv[:n])
                body.file.write(mv[:n])
                pos += n
                self.bytes_in = pos
        if sha is not None:
            got = sha.hexdigest()
            if got != want_sha:
                raise S3Err(400, "XAmzContentSHA256Mismatch", "The provided "
                            "'x-amz-content-sha256' header does not match what was computed.",
                            ClientComputedContentSHA256=want_sha,
                            S3ComputedContentSHA256=got)
        if md5 is not None and md5.digest() != md5_want:
            raise S3Err(400, "BadDigest", "The Content-MD5 you specified did not match what we "
                        "received.", ExpectedDigest=md5_b64,
                        CalculatedDigest=base64.b64encode(md5.digest()).decode())
        for algo, want, h in checks:
            got = (struct.pack(">I", h[0]) if algo == "crc32" else h.digest())
            if base64.b64encode(got).decode() != want:
                raise S3Err(400, "BadDigest", f"The {algo.upper()} you specified did not match "
                            "the calculated checksum.")
        return body

    # -- dispatch ----------------------------------------------------------------

    def _dispatch(self, body):
        cfg = self.cfg
        m, b, k, q = self.command, self.bucket, self.key, self.q
        if not b:
            return self._forward(body)
        if k:
            name = b + "/" + k
            if m in ("GET", "HEAD") and "uploadId" in q:
                return self._list_parts()
            if m in ("GET", "HEAD") and not (set(q) & {"acl", "tagging", "torrent", "retention",
                                                        "legal-hold"}):
                with cfg.locks.hold(name, exclusive=False):
                    return self._get_object(body)
            if m == "PUT" and "uploadId" in q:
                return self._upload_part(body)
            if m == "PUT" and "tagging" not in q and "acl" not in q:
                with cfg.locks.hold(name, exclusive=True):
                    err = self._write_preconditions() or self._copy_source_preconditions()
                    if err:
                        raise err
                    return self._forward(body, on_success=lambda: cfg.etags.pop(name, None))
            if m == "POST" and "uploadId" in q:
                with cfg.locks.hold(name, exclusive=True):
                    return self._complete_multipart(body)
            if m == "DELETE" and "uploadId" in q:
                return self._abort_multipart()
            if m == "DELETE" and not q:
                with cfg.locks.hold(name, exclusive=True):
                    if self.headers.get("If-Match") is not None:
                        cur = self._current_etag()
                        if cur is None:
                            raise S3Err(404, "NoSuchKey", "The specified key does not exist.",
                                        Key=k)
                        if not etag_list_matches(self.headers["If-Match"], cur):
                            raise S3Err(412, "PreconditionFailed", "At least one of the "
                                        "pre-conditions you specified did not hold",
                                        Condition="If-Match")
                    return self._forward(body, on_success=lambda: cfg.etags.pop(name, None))
            return self._forward(body)
        # bucket level
        if m == "GET" and "uploads" in q:
            return self._list_uploads()
        if m == "GET" and not (set(q) - {"list-type", "prefix", "delimiter", "max-keys",
                                          "continuation-token", "start-after", "fetch-owner",
                                          "encoding-type", "marker"}):
            return self._list_objects(body)
        if m == "POST" and "delete" in q:
            try:
                root = ET.fromstring(body.data())
                for el in root.iter():
                    if el.tag.endswith("Key") and el.text:
                        cfg.etags.pop(b + "/" + el.text, None)
            except ET.ParseError:
                pass
        return self._forward(body)

    # -- helpers -------------------------------------------------------------------

    def _backend_path(self, bucket=None, key=None):
        bucket = self.bucket if bucket is None else bucket
        key = self.key if key is None else key
        return "/" + quote(bucket, safe="") + "/" + quote(key, safe="/~")

    def _public_etag(self, backend_etag, name=None):
        if backend_etag is None:
            return None
        name = name or (self.bucket + "/" + self.key)
        ent = self.cfg.etags.get(name)
        if ent is not None and ent[0] == strip_etag(backend_etag):
            return '"' + ent[1] + '"'
        return backend_etag

    def _head(self):
        resp, _ = self.backend_simple("HEAD", self._backend_path())
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise BackendError(f"HEAD {self._backend_path()} -> {resp.status}")
        return resp

    def _current_etag(self):
        resp = self._head()
        return None if resp is None else self._public_etag(resp.getheader("ETag"))

    def _write_preconditions(self):
        inm = self.headers.get("If-None-Match")
        im = self.headers.get("If-Match")
        if inm is None and im is None:
            return None
        if inm is not None and inm.strip() != "*":
            return S3Err(501, "NotImplemented", "A header you provided implies functionality "
                         "that is not implemented", Header="If-None-Match")
        cur = self._current_etag()
        if inm is not None and cur is not None:
            return S3Err(412, "PreconditionFailed", "At least one of the pre-conditions you "
                         "specified did not hold", Condition="If-None-Match")
        if im is not None:
            if cur is None:
                if self.cfg.if_match_missing == 404:
                    return S3Err(404, "NoSuchKey", "The specified key does not exist.",
                                 Key=self.key)
                return S3Err(412, "PreconditionFailed", "At least one of the pre-conditions "
                             "you specified did not hold", Condition="If-Match")
            if not etag_list_matches(im, cur):
                return S3Err(412, "PreconditionFailed", "At least one of the pre-conditions "
                             "you specified did not hold", Condition="If-Match")
        return None

    def _copy_source_preconditions(self):
        """x-amz-copy-source-if-(none-)match / -if-(un)modified-since, which s3rver ignores."""
        src = self.headers.get("x-amz-copy-source")
        if src is None:
            return None
        conds = {h: self.headers.get("x-amz-copy-source-" + h) for h in
                 ("if-match", "if-none-match", "if-modified-since", "if-unmodified-since")}
        if all(v is None for v in conds.values()):
            return None
        sb, _, sk = unquote(src.split("?")[0]).lstrip("/").partition("/")
        resp, _ = self.backend_simple("HEAD", self._backend_path(sb, sk))
        if resp.status != 200:
            return S3Err(404, "NoSuchKey", "The specified key does not exist.", Key=sk)
        etag = self._public_etag(resp.getheader("ETag"), sb + "/" + sk)
        lm = parse_http_date(resp.getheader("Last-Modified") or "")
        ok = True
        if conds["if-match"] is not None:
            ok = etag_list_matches(conds["if-match"], etag)
        elif conds["if-unmodified-since"] is not None:
            t = parse_http_date(conds["if-unmodified-since"])
            ok = t is None or lm is None or lm <= t
        if ok and conds["if-none-match"] is not None:
            ok = not etag_list_matches(conds["if-none-match"], etag)
        elif ok and conds["if-modified-since"] is not None:
            t = parse_http_date(conds["if-modified-since"])
            ok = t is None or lm is None or lm > t
        if ok:
            return None
        return S3Err(412, "PreconditionFailed", "At least one of the pre-conditions you "
                     "specified did not hold", Condition="x-amz-copy-source-If-Match")

    def _forward_headers(self, body_len, extra=()):
        out = []
        for k, v in self.headers.items():
            lk = k.lower()
            if lk in STRIP_TO_BACKEND or lk == "content-length" or lk == "host":
                continue
            out.append((k, v))
        out.append(("Host", self.headers.get("Host", "localhost")))
        out.append(("Content-Length", str(body_len)))
        out.extend(extra)
        return out

    def _relay(self, resp, rewrite=None, etag_name=None, status=None):
        """Relays a backend response (status, headers, body) with the truncate and
        reset_after faults applied. rewrite(bytes) -> bytes edits a (small) body."""
        rule = self.rule
        kind = rule["fault"] if rule else None
        status = resp.status if status is None else status
        headers = []
        for k, v in resp.getheaders():
            lk = k.lower()
            if lk in HOP_BY_HOP or lk in ("content-length", "date", "server"):
                continue
            if lk == "etag":
                if kind == "no_etag":
                    continue   # applied, answered without its ETag
                v = self._public_etag(v, etag_name)
                if getattr(self, "part_etag_suffix", ""):  # an UploadPart under /part-etags
                    v = '"' + strip_etag(v) + self.part_etag_suffix + '"'
            headers.append((k, v))
        self.err_code = resp.getheader("x-amz-error-code")
        no_body = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
        clen = resp.getheader("Content-Length")
        data = None
        if rewrite is not None or clen is None or kind == "reset_after":
            data = resp.read()
            self._finish_backend(resp)
            if rewrite is not None and data and 200 <= status < 300:
                data = rewrite(data)
            length = 0 if no_body else len(data)
        else:
            length = 0 if no_body else int(clen)
        if kind == "reset_after":
            self.status = "reset_after"
            self.abort_connection(rst=True)
            return
        truncate_to = None
        if kind == "truncate":
            if length > 0:
                truncate_to = rule["truncate_bytes"]
                if truncate_to is None:
                    truncate_to = int(length * rule["truncate_fraction"])
                truncate_to = max(0, min(truncate_to, length - 1))
            else:
                self.cfg.faults.undo_truncate()
                self.fault = "truncate-skipped"
        self.status = status
        self.send_response(status)
        if not any(k.lower() == "x-amz-request-id" for k, _ in headers):
            self.send_header("x-amz-request-id", self.request_id)
        for k, v in headers:
            self.send_header(k, v)
        if self.command == "HEAD" and clen is not None:
            self.send_header("Content-Length", clen)
        else:
            self.send_header("Content-Length", str(length))
        if truncate_to is not None:
            self.send_header("Connection", "close")
            self.close_connection = True
        self._end_headers()
        if no_body:
            if data is None:
                resp.read()
                self._finish_backend(resp)
            return
        limit = length if truncate_to is None else truncate_to
        if data is not None:
            self._write(bytes(memoryview(data)[:limit]))
        else:
            sent = 0
            buf = bytearray(CHUNK)
            mv = memoryview(buf)
            try:
                while sent < length:
                    n = resp.readinto(mv[:min(CHUNK, length - sent)])
                    if not n:
                        raise BackendError("backend body ended early")
                    if sent < limit:
                        self._write(mv[:min(n, limit - sent)])
                    sent += n
                    if sent >= limit and truncate_to is not None:
                        break
                if truncate_to is None:
                    resp.read()   # nothing left; marks the response closed
            except (ClientGone, BackendError):
                self._backend_drop()
                raise
            if truncate_to is not None:
                self._backend_drop()
            else:
                self._finish_backend(resp)
        if truncate_to is not None:
            self.status = f"{status}+truncated"
            try:
                self.wfile.flush()
            except OSError:
                pass
            self.abort_connection(rst=False)

    def _forward(self, body, on_success=None, path=None, extra_headers=(), rewrite=None):
        """Forwards a request that is not a GET/HEAD of object data (those go through
        _get_object), so an XML answer here is S3's own and may be edited."""
        resp = self.backend(self.command, path or self.fwd_path,
                            self._forward_headers(body.length, extra_headers), body)
        if on_success is not None and 200 <= resp.status < 300:
            on_success()
        if rewrite is None and "xml" in (resp.getheader("Content-Type") or ""):
            rewrite = fix_namespace
        return self._relay(resp, rewrite=rewrite)

    # -- GET / HEAD object -------------------------------------------------------------

    def _get_object(self, body):
        h = self.headers
        extra = []
        rng = h.get("Range")
        if rng is not None:
            head = self._head()
            if head is None:
                raise S3Err(404, "NoSuchKey", "The specified key does not exist.", Key=self.key)
            size = int(head.getheader("Content-Length"))
            m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", rng)
            if m and (m.group(1) or m.group(2)):
                a, z = m.group(1), m.group(2)
                start = end = None
                bad = False
                if a == "":
                    n = int(z)
                    bad = n == 0 or size == 0
                    start, end = max(0, size - n), size - 1
                elif z != "" and int(z) < int(a):
                    pass   # syntactically invalid range: ignored (whole object), as S3 does
                else:
                    start = int(a)
                    bad = start >= size
                    end = min(int(z), size - 1) if z else size - 1
                if bad:
                    err = S3Err(416, "InvalidRange", "The requested range is not satisfiable",
                                RangeRequested=rng, ActualObjectSize=size)
                    err.headers["Content-Range"] = f"bytes */{size}"
                    raise err
                if start is not None:
                    extra.append(("Range", f"bytes={start}-{end}"))
            # anything else (multiple ranges, garbage) is ignored: whole object, 200
        resp = self.backend(self.command, self.fwd_path, self._forward_headers(0, extra))
        if resp.status not in (200, 206):
            return self._relay(resp)
        etag = self._public_etag(resp.getheader("ETag"))
        lm = parse_http_date(resp.getheader("Last-Modified") or "")
        fail = None
        im, ius = h.get("If-Match"), h.get("If-Unmodified-Since")
        inm, ims = h.get("If-None-Match"), h.get("If-Modified-Since")
        if im is not None:
            if not etag_list_matches(im, etag):
                fail = (412, "If-Match")
        elif ius is not None:
            t = parse_http_date(ius)
            if t is not None and lm is not None and lm > t:
                fail = (412, "If-Unmodified-Since")
        if fail is None:
            if inm is not None:
                if etag_list_matches(inm, etag):
                    fail = (304, None)
            elif ims is not None:
                t = parse_http_date(ims)
                if t is not None and lm is not None and lm <= t:
                    fail = (304, None)
        if fail is None:
            return self._relay(resp)
        self._backend_drop()   # abandon the body
        if fail[0] == 412:
            raise S3Err(412, "PreconditionFailed", "At least one of the pre-conditions you "
                        "specified did not hold", Condition=fail[1])
        hdrs = [("ETag", etag)]
        if resp.getheader("Last-Modified"):
            hdrs.append(("Last-Modified", resp.getheader("Last-Modified")))
        self.send_empty(304, hdrs)

    # -- multipart -------------------------------------------------------------------

    def _upload_dir(self, upload_id):
        if not re.fullmatch(r"[0-9A-Za-z._-]+", upload_id or ""):
            return None
        return os.path.join(self.cfg.data_dir, self.bucket, "._S3rver_uploads", upload_id)

    def _check_upload(self):
        upload_id = self.q.get("uploadId", "")
        d = self._upload_dir(upload_id)
        try:
            with open(os.path.join(d, "key"), encoding="utf-8") as f:
                key = f.read()
        except (OSError, TypeError):
            key = None
        if key is None or key != self.key:
            raise S3Err(404, "NoSuchUpload", "The specified upload does not exist. The upload "
                        "ID may be invalid, or the upload may have been aborted or completed.",
                        UploadId=upload_id)
        return d

    def _upload_part(self, body):
        if "x-amz-copy-source" in {k.lower() for k in self.headers.keys()}:
            raise S3Err(501, "NotImplemented", "UploadPartCopy is not supported by this test "
                        "server", Header="x-amz-copy-source")
        pn = self.q.get("partNumber", "")
        if not re.fullmatch(r"\d+", pn) or not 1 <= int(pn) <= 10000:
            raise S3Err(400, "InvalidArgument", "Part number must be an integer between 1 and "
                        "10000, inclusive", ArgumentName="partNumber", ArgumentValue=pn)
        self._check_upload()
        self.part_etag_suffix = self.cfg.part_etag_suffix  # this answer only (keep-alive)
        try:
            return self._forward(body)
        finally:
            self.part_etag_suffix = ""

    def _parts_on_disk(self, d):
        parts = {}
        for name in os.listdir(d):
            if re.fullmatch(r"\d+", name):
                p = os.path.join(d, name)
                try:
                    with open(p + ".md5") as f:
                        md5 = f.read().strip()
                    st = os.stat(p)
                except OSError:
                    continue
                parts[int(name)] = (md5, st.st_size, st.st_mtime)
        return parts

    def _complete_multipart(self, body):
        d = self._check_upload()
        try:
            root = ET.fromstring(body.data())
        except ET.ParseError:
            raise S3Err(400, "MalformedXML", "The XML you provided was not well-formed or did "
                        "not validate against our published schema")
        wanted = []
        for el in root:
            if not el.tag.endswith("Part"):
                continue
            num = etag = None
            for c in el:
                if c.tag.endswith("PartNumber"):
                    num = (c.text or "").strip()
                elif c.tag.endswith("ETag"):
                    etag = (c.text or "").strip()
            if num is None or etag is None or not num.isdigit():
                raise S3Err(400, "MalformedXML", "The XML you provided was not well-formed or "
                            "did not validate against our published schema")
            etag = strip_etag(etag)
            sfx = self.cfg.part_etag_suffix
            if sfx:  # the parts were answered with ETags ending in sfx: they must come back whole
                if not etag.endswith(sfx):
                    raise S3Err(400, "InvalidPart", "One or more of the specified parts could "
                                "not be found.  The part may not have been uploaded, or the "
                                "specified entity tag may not match the part's entity tag.",
                                UploadId=self.q["uploadId"], PartNumber=num, ETag=etag)
                etag = etag[:-len(sfx)]
            wanted.append((int(num), etag))
        if not wanted:
            raise S3Err(400, "MalformedXML", "The XML you provided was not well-formed or did "
                        "not validate against our published schema")
        nums = [n for n, _ in wanted]
        if nums != sorted(nums) or len(set(nums)) != len(nums):
            raise S3Err(400, "InvalidPartOrder", "The list of parts was not in ascending order. "
                        "Parts must be ordered by part number.", UploadId=self.q["uploadId"])
        have = self._parts_on_disk(d)
        for i, (n, etag) in enumerate(wanted):
            if n not in have or have[n][0] != etag:
                raise S3Err(400, "InvalidPart", "One or more of the specified parts could not "
                            "be found.  The part may not have been uploaded, or the specified "
                            "entity tag may not match the part's entity tag.",
                            UploadId=self.q["uploadId"], PartNumber=n, ETag=etag)
            if i < len(wanted) - 1 and have[n][1] < self.cfg.min_part_size:
                raise S3Err(400, "EntityTooSmall", "Your proposed upload is smaller than the "
                            "minimum allowed object size.", ProposedSize=have[n][1],
                            MinSizeAllowed=self.cfg.min_part_size, PartNumber=n, ETag=etag)
        err = self._write_preconditions()
        if err:
            raise err
        mp = hashlib.md5(b"".join(binascii.unhexlify(e) for _, e in wanted)).hexdigest()
        mp_etag = f"{mp}-{len(wanted)}"
        name = self.bucket + "/" + self.key
        holder = {}

        def rewrite(data):
            text = data.decode("utf-8")
            m = re.search(r"<ETag>(.*?)</ETag>", text, re.S)
            if m:
                holder["md5"] = strip_etag(html.unescape(m.group(1)))
                text = text[:m.start(1)] + "&quot;" + mp_etag + "&quot;" + text[m.end(1):]
            return text.encode("utf-8")

        resp = self.backend("POST", self.fwd_path, self._forward_headers(body.length), body)
        if resp.status == 200:
            data = resp.read()
            self._finish_backend(resp)
            new = rewrite(data)
            if "md5" in holder:
                self.cfg.etags.set(name, (holder["md5"], mp_etag))
            fake = _Canned(resp, fix_namespace(new))
            return self._relay(fake)
        return self._relay(resp)

    def _abort_multipart(self):
        d = self._check_upload()
        shutil.rmtree(d, ignore_errors=True)
        self.send_empty(204)

    def _list_parts(self):
        d = self._check_upload()
        parts = self._parts_on_disk(d)
        out = [f'<ListPartsResult xmlns="{S3_NS}">',
               f"<Bucket>{xml_escape(self.bucket)}</Bucket><Key>{xml_escape(self.key)}</Key>",
               f"<UploadId>{xml_escape(self.q['uploadId'])}</UploadId>",
               "<PartNumberMarker>0</PartNumberMarker>",
               f"<NextPartNumberMarker>{max(parts) if parts else 0}</NextPartNumberMarker>",
               "<MaxParts>1000</MaxParts><IsTruncated>false</IsTruncated>"]
        for n in sorted(parts):
            md5, size, mtime = parts[n]
            out.append(f"<Part><PartNumber>{n}</PartNumber><LastModified>"
                       f"{time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(mtime))}"
                       f"</LastModified><ETag>&quot;{md5}&quot;</ETag><Size>{size}</Size></Part>")
        out.append("<StorageClass>STANDARD</StorageClass></ListPartsResult>")
        self.send_xml(200, "".join(out))

    def _list_uploads(self):
        base = os.path.join(self.cfg.data_dir, self.bucket)
        if not os.path.isdir(base):
            raise S3Err(404, "NoSuchBucket", "The specified bucket does not exist",
                        BucketName=self.bucket)
        prefix = self.q.get("prefix", "")
        ups = []
        root = os.path.join(base, "._S3rver_uploads")
        for uid in (os.listdir(root) if os.path.isdir(root) else []):
            try:
                with open(os.path.join(root, uid, "key"), encoding="utf-8") as f:
                    key = f.read()
                mtime = os.stat(os.path.join(root, uid, "key")).st_mtime
            except OSError:
                continue
            if key.startswith(prefix):
                ups.append((key, mtime, uid))
        ups.sort()
        out = [f'<ListMultipartUploadsResult xmlns="{S3_NS}">',
               f"<Bucket>{xml_escape(self.bucket)}</Bucket><KeyMarker></KeyMarker>",
               "<UploadIdMarker></UploadIdMarker><NextKeyMarker></NextKeyMarker>",
               f"<Prefix>{xml_escape(prefix)}</Prefix>",
               "<NextUploadIdMarker></NextUploadIdMarker><MaxUploads>1000</MaxUploads>",
               "<IsTruncated>false</IsTruncated>"]
        for key, mtime, uid in ups:
            out.append(f"<Upload><Key>{xml_escape(key)}</Key><UploadId>{uid}</UploadId>"
                       f"<Initiated>{time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(mtime))}"
                       f"</Initiated><StorageClass>STANDARD</StorageClass></Upload>")
        out.append("</ListMultipartUploadsResult>")
        self.send_xml(200, "".join(out))

    # -- listing -----------------------------------------------------------------------

    def _list_objects(self, body):
        url_enc = self.q.get("encoding-type") == "url"
        if "encoding-type" in self.q and not url_enc:
            raise S3Err(400, "InvalidArgument", "Invalid Encoding Method specified in Request",
                        ArgumentName="encoding-type", ArgumentValue=self.q["encoding-type"])
        etags = self.cfg.etags
        bucket = self.bucket

        hide = self.rule["other_key"] if self.rule and self.rule["fault"] == "list_hide" else None

        def fix_contents(m):
            block = m.group(0)
            km = re.search(r"<Key>(.*?)</Key>", block, re.S)
            if hide and km and re.search(hide, html.unescape(km.group(1))):
                return ""   # fault list_hide: a listing that leaves the key out
            em = re.search(r"<ETag>(.*?)</ETag>", block, re.S)
            if km and em and etags:
                name = bucket + "/" + html.unescape(km.group(1))
                pub = self._public_etag(html.unescape(em.group(1)), name)
                block = block[:em.start(1)] + xml_escape(pub).replace('"', "&quot;") + \
                    block[em.end(1):]
            return block

        def rewrite(data):
            text = data.decode("utf-8")
            text = re.sub(r"<Contents>.*?</Contents>", fix_contents, text, flags=re.S)
            if url_enc:
                def enc(m):
                    v = quote_plus(html.unescape(m.group(2)), safe="/")
                    return f"<{m.group(1)}>{v}</{m.group(1)}>"
                text = re.sub(r"<(Key|Prefix|Delimiter|StartAfter|Marker|NextMarker)>(.*?)</\1>",
                              enc, text, flags=re.S)
                if "<EncodingType>" not in text:
                    text = re.sub(r"(<ListBucketResult[^>]*>)", r"\1<EncodingType>url</EncodingType>",
                                  text, count=1)
            return fix_namespace(text.encode("utf-8"))

        return self._forward(body, rewrite=rewrite)


class _Canned:
    """A finished backend response with a replaced body, for _relay."""

    def __init__(self, resp, data):
        self.status = resp.status
        self._headers = [(k, v) for k, v in resp.getheaders() if k.lower() != "content-length"]
        self._headers.append(("Content-Length", str(len(data))))
        self._data = data
        self.will_close = False

    def getheaders(self):
        return list(self._headers)

    def getheader(self, name, default=None):
        for k, v in self._headers:
            if k.lower() == name.lower():
                return v
        return default

    def read(self, amt=None):
        d, self._data = self._data, b""
        return d

    def readinto(self, mv):
        n = min(len(mv), len(self._data))
        mv[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


class ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cfg = None

    def log_message(self, fmt, *args):
        pass

    def _reply(self, status, obj):
        data = (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _state(self):
        c = self.cfg
        out = c.faults.snapshot()
        out.update(c.stats.snapshot())
        out.update(c.sts.snapshot())
        return out

    def _text(self, status, text, ctype="application/json"):
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        sts = self.cfg.sts
        if path == "/container-creds":  # ECS / EKS Pod Identity container credentials
            if sts.container_token is None or self.headers.get("Authorization") != sts.container_token:
                return self._text(401, '{"Code": "Unauthorized"}')
            with sts.lock:  # ?via=process: minted for tests/s3/cred_process.sh
                if "via=process" in self.path:
                    sts.process_issued += 1
                else:
                    sts.container_issued += 1
            return self._text(200, sts.issue_json(self.cfg.creds))
        if path.startswith("/latest/meta-data/iam/security-credentials"):  # IMDSv2
            if self.headers.get("X-aws-ec2-metadata-token") not in getattr(sts, "imds_tokens", set()):
                return self._text(401, "", "text/plain")
            rest = path[len("/latest/meta-data/iam/security-credentials"):].strip("/")
            if sts.imds_role is None:
                return self._text(404, "", "text/plain")
            if not rest:
                return self._text(200, sts.imds_role, "text/plain")
            if rest != sts.imds_role:
                return self._text(404, "", "text/plain")
            with sts.lock:
                sts.imds_issued += 1
            return self._text(200, sts.issue_json(self.cfg.creds))
        if path in ("", "/health"):
            return self._reply(200, {"ok": True})
        if path in ("/faults", "/counters"):
            return self._reply(200, self._state())
        return self._reply(404, {"error": "no such endpoint"})

    def do_POST(self):
        path = self.path.split("?")[0].rstrip("/")
        raw = self._body()
        try:
            if path == "/latest/api/token" and self.command == "PUT":  # IMDSv2's session token
                if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._text(400, "", "text/plain")
                tok = base64.b64encode(os.urandom(24)).decode()
                sts = self.cfg.sts
                if not hasattr(sts, "imds_tokens"):
                    sts.imds_tokens = set()
                sts.imds_tokens.add(tok)
                return self._text(200, tok, "text/plain")
            if path == "/sts":  # the loopback STS (a form POST, as AWS's)
                form = {k: v for k, v in split_query(raw.decode("utf-8", "replace"))}
                if form.get("Action") == "AssumeRole":  # signed with the caller's keys
                    try:
                        raw_path, _, raw_query = self.path.partition("?")
                        caller = verify_sigv4(self.cfg, "POST", raw_path, raw_query, self.headers,
                                              want_service="sts")
                        if hashlib.sha256(raw).hexdigest() != self.headers.get("X-Amz-Content-SHA256"):
                            raise S3Err(400, "XAmzContentSHA256Mismatch", "body hash")
                        status, xml = self.cfg.sts.assume_role(self.cfg.creds, form, caller,
                                                               self.headers.get("X-Amz-Security-Token"))
                    except S3Err as err:
                        status, xml = err.status, f"<ErrorResponse><Error><Code>{err.code}</Code></Error></ErrorResponse>"
                else:
                    status, xml = self.cfg.sts.answer(self.cfg.creds, form)
                data = xml.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            if path == "/sts/config":
                self.cfg.sts.configure(json.loads(raw or b"{}"))
                return self._reply(200, self._state())
            if path == "/faults":
                doc = json.loads(raw or b"{}")
                self.cfg.faults.configure(doc)
                if isinstance(doc, dict) and doc.get("reset_counters"):
                    self.cfg.faults.reset_counters()
                    self.cfg.stats.reset()
                return self._reply(200, self._state())
            if path == "/part-etags":  # UploadPart answers ETags ending in this text
                self.cfg.part_etag_suffix = str(json.loads(raw or b"{}").get("suffix", ""))
                return self._reply(200, self._state())
            if path == "/reset":
                self.cfg.part_etag_suffix = ""
                self.cfg.faults.configure({})
                self.cfg.faults.reset_counters()
                self.cfg.stats.reset()
                return self._reply(200, self._state())
            if path == "/counters/reset":
                self.cfg.faults.reset_counters()
                self.cfg.stats.reset()
                return self._reply(200, self._state())
        except (ValueError, TypeError, re.error) as e:
            return self._reply(400, {"error": str(e)})
        return self._reply(404, {"error": "no such endpoint"})

    do_PUT = do_POST

    def do_DELETE(self):
        path = self.path.split("?")[0].rstrip("/")
        if path == "/faults":
            self._body()
            self.cfg.faults.configure({})
            return self._reply(200, self._state())
        return self._reply(404, {"error": "no such endpoint"})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", required=True, help="s3rver address, HOST:PORT")
    ap.add_argument("--data-dir", required=True, help="s3rver's data directory (-d)")
    ap.add_argument("--credentials", required=True,
                    help='JSON: {"region": ..., "credentials": [{"access_key", "secret_key", '
                         '"session_token"?}]}')
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="S3 port (0: any free port)")
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--ready-file", help="written (JSON with the ports) once listening")
    ap.add_argument("--log", help="request log, JSON lines")
    ap.add_argument("--dump-headers", help="raw request lines and headers, appended")
    ap.add_argument("--faults", help="initial fault rules (JSON, as POST /faults)")
    ap.add_argument("--spool-dir", default=None, help="where large bodies are spooled")
    ap.add_argument("--spool-threshold", type=int, default=64 << 20)
    ap.add_argument("--max-body", type=int, default=5 << 30)
    ap.add_argument("--min-part-size", type=int, default=5 << 20,
                    help="smallest non-final multipart part accepted (S3: 5 MiB)")
    ap.add_argument("--max-skew", type=float, default=900.0,
                    help="seconds of clock skew accepted (S3: 15 min)")
    ap.add_argument("--if-match-missing", type=int, choices=(404, 412), default=412,
                    help="status for a write with If-Match on a missing key")
    ap.add_argument("--backend-timeout", type=float, default=300.0)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()

    cfg = Cfg()
    cfg.backend_host, _, port = a.backend.rpartition(":")
    cfg.backend_port = int(port)
    cfg.data_dir = a.data_dir
    cfg.creds = Credentials(a.credentials)
    cfg.max_skew = a.max_skew
    cfg.spool_dir = a.spool_dir
    cfg.spool_threshold = a.spool_threshold
    cfg.max_body = a.max_body
    cfg.min_part_size = a.min_part_size
    cfg.if_match_missing = a.if_match_missing
    cfg.backend_timeout = a.backend_timeout
    cfg.verbose = a.verbose
    cfg.faults = Faults()
    if a.faults:
        with open(a.faults) as f:
            cfg.faults.configure(json.load(f))
    cfg.stats = Stats()
    cfg.sts = Sts()
    cfg.locks = KeyLocks()
    cfg.part_etag_suffix = ""
    cfg.etags = EtagMap(os.path.join(a.data_dir, ".tandem-proxy-etags.json"))
    cfg.log = JsonLog(a.log)
    cfg.dump = RawDump(a.dump_headers)
    S3Handler.cfg = cfg
    ControlHandler.cfg = cfg

    s3 = Server((a.host, a.port), S3Handler)
    ctl = Server((a.host, a.control_port), ControlHandler)
    threading.Thread(target=ctl.serve_forever, daemon=True).start()
    if a.ready_file:
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"port": s3.server_address[1], "control_port": ctl.server_address[1],
                       "pid": os.getpid()}, f)
        os.replace(tmp, a.ready_file)
    sys.stderr.write(f"proxy: S3 on {a.host}:{s3.server_address[1]}, control on "
                     f"{a.host}:{ctl.server_address[1]}, backend {a.backend}\n")
    import signal
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        s3.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
