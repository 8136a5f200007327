#!/usr/bin/python3
"""hostile_s3.py MODE PORTFILE — an S3 endpoint on loopback that answers wrongly.

Listings that never end:
MODE repeat: every ListObjectsV2 page is truncated and hands back the token it was
             given (or "loop"), with one key: a client that follows it goes round forever,
             appending the same key.
MODE empty:  the first page of a listing holds one key under the prefix, and every later
             page is truncated, empty, with a new token each time.
MODE rising: every page is truncated and holds 1000 keys under the prefix, each above
             the last page's, with a new token each time: no token comes back and no page
             is empty, yet the listing never ends.
Ranged reads answered with a Content-Range that is not the range asked for (a listing is
one page holding PREFIX + "HEAD"; every ranged GET of a key is a 206 with ten bytes):
MODE range-huge:    "bytes 0-9/18446744073709551615" (a size no store holds; a client
                    that believes it allocates 16 EiB)
MODE range-garbage: "bytes 0-9/many"
MODE range-offset:  "bytes 5-14/100" (other bytes than the first ten)
MODE range-big:     "bytes 0-9/5497558138880" (5 TiB, the largest S3 object, more than
                    this machine can hold: it was allocated at once)
Answers without end (no Content-Length; the body goes on until the client hangs up):
MODE endless-error: every request is a 403 whose error XML never ends
MODE endless-list:  a listing whose XML never ends
MODE endless-range: a listing holds PREFIX + "HEAD"; a ranged GET is a 206 "bytes 0-9/10"
                    whose body never ends
MODE ignore-range-endless: a listing holds PREFIX + "HEAD"; a ranged GET is a 200 (the
                    Range ignored) whose body never ends
Listings whose keys S3 would never give (one page each):
MODE list-foreign: a key outside the prefix asked for beside one inside it
MODE list-dupes:   the same key twice
MODE list-flood:   1001 keys on a page although max-keys asked for at most 1000
MODE list-cut:     a page with one key, then the connection closed before the XML ends
                   (no Content-Length, no IsTruncated: read whole, it was the last page)
A write answered with an ETag no S3 gives:
MODE long-etag:    every PUT is a 200 with an ETag of 200 characters; a listing is empty
A bucket in another region, or an endpoint that redirects (every request, PUT included):
MODE redirect:     a 301 PermanentRedirect naming the bucket's region eu-central-1 in
                   x-amz-bucket-region (and <Endpoint>), as S3 answers a request signed
                   for another region (a HEAD gets the header alone)
MODE region-400:   a 400 AuthorizationHeaderMalformed with <Region>ap-south-1</Region>, as
                   S3 answers a request whose signature names another region
MODE redirect-elsewhere: a 307 to another host, no region (a load balancer, a moved
                   endpoint): not followed (the signed request would go there)
MODE region-echo:  a 400 whose <Region> is the X-Amz-Security-Token header: not printed
An endpoint that echoes what it was sent:
MODE echo-token:   every request is a 403 whose <Code> is the X-Amz-Security-Token header
MODE echo-token-piece: every request is a 403 whose <Code> is 100 characters from the middle
                   of that header and whose <Message> the next 300 (pieces a buffer holds)
MODE echo-token-escaped: the same pieces escaped: the <Code> percent-encoded, the <Message>
                   with every "/" as JSON writes it ("\\/")
MODE range-echo:   a listing holds PREFIX + "HEAD"; a ranged GET is a 206 whose
                   Content-Range ends in 90 characters from the middle of that header
A credential endpoint (container credentials) that echoes the token it was sent:
MODE creds-echo:   every GET is a 200 with credentials whose Expiration is 60 characters
                   from the middle of the Authorization header
Any other request is a 404 NoSuchKey. The chosen port is written to PORTFILE. Used by
tests/cli_store.sh: tandem must stop with an error naming the endpoint's fault (exit 3),
not run forever or blame memory."""
import http.server
import os
import sys
import urllib.parse

MODE, PORTFILE = sys.argv[1], sys.argv[2]
RANGES = {"range-huge": "bytes 0-9/18446744073709551615", "range-garbage": "bytes 0-9/many",
          "range-offset": "bytes 5-14/100", "range-big": "bytes 0-9/5497558138880"}


class Handler(http.server.BaseHTTPRequestHandler):
    pages = 0

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def listing(self, contents, truncated, nxt=b""):
        self.answer(200, b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>' + contents +
                    b"<IsTruncated>" + (b"true" if truncated else b"false") + b"</IsTruncated>" +
                    (b"<NextContinuationToken>" + nxt + b"</NextContinuationToken>" if truncated else b"") +
                    b"</ListBucketResult>")

    def head_listing(self, q):
        """A listing of one page holding PREFIX + "HEAD" (a store a command opens)."""
        key = (q.get("prefix", "") + "HEAD").encode()
        return self.listing(b"<Contents><Key>" + key + b"</Key></Contents>", False)

    def endless(self, status, head, unit, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        try:
            self.wfile.write(head)
            for _ in range(1 << 22):  # 4M units: gigabytes, far past any bound
                self.wfile.write(unit * 1024)
        except OSError:
            pass  # the client hung up, as it should

    def elsewhere(self):
        """The region modes' answer to any request, or None in the other modes."""
        if MODE == "redirect":
            return self.answer(301, b"<Error><Code>PermanentRedirect</Code><Message>The bucket you are attempting "
                               b"to access must be addressed using the specified endpoint.</Message><Endpoint>"
                               b"bucket.s3.eu-central-1.amazonaws.com</Endpoint><Bucket>bucket</Bucket></Error>",
                               [("x-amz-bucket-region", "eu-central-1")])
        if MODE == "region-400":
            return self.answer(400, b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>The authorization "
                               b"header is malformed; the region 'us-east-1' is wrong; expecting 'ap-south-1'"
                               b"</Message><Region>ap-south-1</Region></Error>")
        if MODE == "redirect-elsewhere":
            return self.answer(307, b"", [("Location", "http://elsewhere.invalid/bucket")])
        if MODE == "region-echo":
            tok = self.headers.get("X-Amz-Security-Token", "none").encode()
            return self.answer(400, b"<Error><Code>AuthorizationHeaderMalformed</Code><Region>" + tok +
                               b"</Region></Error>")
        return None

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if MODE in ("redirect", "region-400", "redirect-elsewhere", "region-echo"):
            return self.elsewhere()
        if MODE == "endless-error":
            return self.endless(403, b"<Error><Code>AccessDenied</Code><Message>", b"no ")
        if MODE == "creds-echo":
            tok = self.headers.get("Authorization", "none")
            body = ('{"AccessKeyId": "ASIAHOSTILE", "SecretAccessKey": "hostile-secret-key-0123456789", '
                    '"Token": "hostile-session-token-0123456789", "Expiration": "%s"}' % tok[40:100])
            return self.answer(200, body.encode())
        if MODE == "echo-token-piece":
            tok = self.headers.get("X-Amz-Security-Token", "none").encode()
            return self.answer(403, b"<Error><Code>" + tok[30:130] + b"</Code><Message>" + tok[130:430] +
                               b"</Message></Error>")
        if MODE == "echo-token-escaped":
            tok = self.headers.get("X-Amz-Security-Token", "none")
            code = urllib.parse.quote(tok[30:130], safe="")
            msg = tok[130:430].replace("/", "\\/")
            return self.answer(403, ("<Error><Code>" + code + "</Code><Message>" + msg +
                                     "</Message></Error>").encode())
        if MODE == "range-echo":
            if q.get("list-type") == "2":
                return self.head_listing(q)
            if self.command == "GET" and "Range" in self.headers:
                tok = self.headers.get("X-Amz-Security-Token", "none")
                return self.answer(206, b"0123456789", [("Content-Range", "bytes 0-9/" + tok[40:130]),
                                                         ("ETag", '"e"')])
        if MODE == "echo-token":
            tok = self.headers.get("X-Amz-Security-Token", "none").encode()
            return self.answer(403, b"<Error><Code>" + tok + b"</Code><Message>" + tok + b"</Message></Error>")
        if MODE == "endless-list" and q.get("list-type") == "2":
            return self.endless(200, b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>',
                                b"<Contents><Key>k</Key></Contents>")
        if MODE == "endless-range":
            if q.get("list-type") == "2":
                return self.head_listing(q)
            if self.command == "GET" and "Range" in self.headers:
                return self.endless(206, b"", b"0123456789", [("Content-Range", "bytes 0-9/10")])
        if MODE == "ignore-range-endless":
            if q.get("list-type") == "2":
                return self.head_listing(q)
            if self.command == "GET":
                return self.endless(200, b"", b"0123456789")
        if MODE == "list-cut" and q.get("list-type") == "2":
            key = (q.get("prefix", "") + "HEAD").encode()
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.write(b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Contents><Key>' + key +
                             b"</Key></Contents><Contents><Ke")
            return None
        if MODE.startswith("list-") and q.get("list-type") == "2":
            p = q.get("prefix", "").encode()
            keys = {"list-foreign": [p + b"a", b"zzz/elsewhere"], "list-dupes": [p + b"x", p + b"x"],
                    "list-flood": [p + b"k%04d" % i for i in range(1001)]}[MODE]
            return self.listing(b"".join(b"<Contents><Key>" + k + b"</Key></Contents>" for k in keys), False)
        if MODE in RANGES:
            if q.get("list-type") == "2":
                return self.head_listing(q)
            if self.command == "GET" and "Range" in self.headers:
                return self.answer(206, b"0123456789", [("Content-Range", RANGES[MODE]), ("ETag", '"e"')])
        if MODE == "long-etag" and q.get("list-type") == "2":
            return self.listing(b"", False)
        if q.get("list-type") != "2":
            return self.answer(404, b"<Error><Code>NoSuchKey</Code><Message>none</Message></Error>")
        Handler.pages += 1
        prefix = q.get("prefix", "")
        token = q.get("continuation-token")
        key = (prefix + "x").encode()
        if MODE == "rising":
            base = Handler.pages * 1000
            keys = b"".join(b"<Contents><Key>" + (prefix + "k%012d" % (base + i)).encode() + b"</Key></Contents>"
                            for i in range(1000))
            return self.listing(keys, True, b"t%d" % Handler.pages)
        if MODE == "repeat":
            self.listing(b"<Contents><Key>" + key + b"</Key></Contents>", True, (token or "loop").encode())
        elif token is None:
            self.listing(b"<Contents><Key>" + key + b"</Key></Contents>", True, b"t0")
        else:
            self.listing(b"", True, b"t%d" % Handler.pages)

    do_HEAD = do_GET

    def do_PUT(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        if length:
            self.rfile.read(length)
        if MODE in ("redirect", "region-400", "redirect-elsewhere", "region-echo"):
            return self.elsewhere()
        if MODE == "long-etag":
            return self.answer(200, b"", [("ETag", '"' + "e" * 198 + '"')])
        return self.answer(501, b"<Error><Code>NotImplemented</Code><Message>no</Message></Error>")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
