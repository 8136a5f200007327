#!/usr/bin/python3
"""hostile_list.py MODE PORTFILE — an S3 endpoint on loopback whose listings never end.

MODE repeat: every ListObjectsV2 page is truncated and hands back the token it was
             given (or "loop"), with one key: a client that follows it goes round forever,
             appending the same key.
MODE empty:  the first page of a listing holds one key under the prefix, and every later
             page is truncated, empty, with a new token each time.
Any other request is a 404 NoSuchKey. The chosen port is written to PORTFILE. Used by
tests/cli_store.sh: tandem must stop such a listing with an error naming the endpoint's
fault, not run forever."""
import http.server
import sys
import urllib.parse

MODE, PORTFILE = sys.argv[1], sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    pages = 0

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if q.get("list-type") != "2":
            return self.answer(404, b"<Error><Code>NoSuchKey</Code><Message>none</Message></Error>")
        Handler.pages += 1
        prefix = q.get("prefix", "")
        token = q.get("continuation-token")
        key = (prefix + "x").encode()
        if MODE == "repeat":
            contents, nxt = b"<Contents><Key>" + key + b"</Key></Contents>", (token or "loop").encode()
        elif token is None:
            contents, nxt = b"<Contents><Key>" + key + b"</Key></Contents>", b"t0"
        else:
            contents, nxt = b"", b"t%d" % Handler.pages
        self.answer(200, b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>' + contents +
                    b"<IsTruncated>true</IsTruncated><NextContinuationToken>" + nxt +
                    b"</NextContinuationToken></ListBucketResult>")

    do_HEAD = do_GET


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
