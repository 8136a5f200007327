/* sigv4.h — AWS Signature Version 4: signed headers and presigned URLs.
 *
 * The S3 client signs each request it sends with sigv4_sign(), or builds a presigned URL
 * with sigv4_presign(). The signer is pure: it does no I/O, reads no clock and keeps no
 * state, so it is safe from any thread and deterministic under test. It is checked byte
 * for byte against AWS's SigV4 test suite and the worked S3 examples of the AWS docs.
 *
 * What the caller passes and what comes back:
 *  - `path` is the path exactly as it goes on the wire (the request target up to '?'),
 *    percent-encoded by the caller with sigv4_uri_encode(key, 1). For S3
 *    (double_encode_path = 0) each segment is decoded and encoded again, which leaves a
 *    correctly encoded path unchanged and makes a stray unencoded byte ('$', ' ') sign
 *    the way S3 canonicalises it. Other services (double_encode_path = 1) encode the
 *    wire path once more, as AWS specifies ("%20" signs as "%2520").
 *  - `query` is the query string as it goes on the wire, without '?'. Each name and
 *    value is decoded and encoded again, so build it with sigv4_uri_encode(x, 0) on
 *    every name and value: a literal '+' means '+' here (it signs as %2B), never space.
 *  - `headers` are the headers to sign, in the order they are sent. Host is required
 *    and must be byte-identical to what curl sends (with ":port" for a non-default
 *    port). The signer adds X-Amz-Date, X-Amz-Security-Token and x-amz-content-sha256
 *    itself and refuses them (and Authorization) in `headers`.
 *  - The output lists the headers the caller must add to the request, Authorization
 *    last; for a presigned URL, the parameters to append to the query instead.
 *
 * Credentials never appear in error messages. The session token is, by the protocol,
 * part of the canonical request and of the headers or query the caller sends; the
 * secret key appears in no output at all.
 */
#ifndef TANDEM_STORAGE_SIGV4_H
#define TANDEM_STORAGE_SIGV4_H

#include <stddef.h>
#include <time.h>

#include "storage/sha256.h"
#include "util/err.h"

/* "20150830T123600Z" */
#define SIGV4_AMZ_DATE_LEN 16
/* The payload hash for a body the signature does not cover (presigned PUTs). */
#define SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
/* AWS's upper bound on X-Amz-Expires: seven days. */
#define SIGV4_MAX_EXPIRES 604800
/* Headers sigv4_sign() can ask the caller to add: token, date, content hash, auth. */
#define SIGV4_MAX_ADDED_HEADERS 4

typedef struct sigv4_header {
    const char *name;
    const char *value;
} sigv4_header;

typedef struct sigv4_request {
    const char *method;        /* "GET", "PUT", "HEAD", "DELETE", "POST" */
    const char *path;          /* wire form, percent-encoded, starts with '/' (see above) */
    const char *query;         /* wire form without '?'; NULL or "" for none */
    const sigv4_header *headers; /* to sign; Host required; names case-insensitive;
                                  * a repeated name is signed as "v1,v2" in order */
    size_t nheaders;
    /* 64 lowercase hex digits of SHA-256 of the body, or an upper-case *PAYLOAD* token
     * (SIGV4_UNSIGNED_PAYLOAD, STREAMING-...); NULL means the empty body (GET, HEAD). */
    const char *payload_sha256_hex;
} sigv4_request;

typedef struct sigv4_params {
    const char *access_key;
    const char *secret_key;
    const char *session_token; /* NULL or "" for long-term credentials */
    const char *region;        /* "us-east-1"; MinIO and friends accept any fixed name */
    const char *service;       /* "s3" */
    const char *amz_date;      /* "YYYYMMDDTHHMMSSZ", from sigv4_amz_date(time(NULL)) */
    /* S3: all four 0 except content_sha256_header = 1. */
    int normalize_path;        /* drop "." and ".." segments and empty ones ("//") */
    int double_encode_path;    /* encode the wire path again (every service but S3) */
    int content_sha256_header; /* add and sign x-amz-content-sha256 (S3 requires it);
                                * ignored by sigv4_presign() */
    int omit_session_token;    /* send the token unsigned (a few services want that) */
} sigv4_params;

/* What a signing produced. Every pointer is owned by the output and valid until
 * sigv4_output_free(); on error everything is NULL/empty, and freeing is harmless. */
typedef struct sigv4_output {
    char *canonical_request; /* for diagnosis: S3 returns its own in SignatureDoesNotMatch */
    char *string_to_sign;
    char signature[SHA256_HEX_LEN + 1];
    /* sigv4_sign(): headers to add to the request in this order, Authorization last;
     * sigv4_presign(): none. */
    sigv4_header headers[SIGV4_MAX_ADDED_HEADERS];
    size_t nheaders;
    char *authorization; /* sigv4_sign(): the Authorization value; else NULL */
    /* sigv4_presign(): "X-Amz-Algorithm=...&X-Amz-Signature=<hex>", to append to the
     * request's query (after '&' when it has one); else NULL. */
    char *query;
    char *store_; /* private: backing storage of the added headers' values */
} sigv4_output;

/* Signs `r` for the Authorization header. On success returns 0 and fills `out`; the
 * caller sends r's headers plus out->headers. Errors: ERR_USAGE for malformed input
 * (the message names the field, never a credential), ERR_INTERNAL when out of memory. */
int sigv4_sign(const sigv4_request *r, const sigv4_params *p, sigv4_output *out,
               tdm_err *e);

/* Presigns `r` (query-string authentication) for `expires_s` seconds (1 to
 * SIGV4_MAX_EXPIRES). The URL is the request's plus out->query appended to its query.
 * For S3 pass payload SIGV4_UNSIGNED_PAYLOAD and headers {Host} only. */
int sigv4_presign(const sigv4_request *r, const sigv4_params *p, long expires_s,
                  sigv4_output *out, tdm_err *e);

/* Frees what a signing returned and clears `out`; NULL is allowed. */
void sigv4_output_free(sigv4_output *out);

/* Percent-encodes `s` per RFC 3986 the way SigV4 wants it: A-Z a-z 0-9 - _ . ~ stay,
 * every other byte becomes %XX (upper-case hex; UTF-8 byte by byte, space is %20, '+'
 * is %2B); '/' stays when `keep_slash` (object keys in paths), else %2F (query names
 * and values). Returns a malloc'd string the caller frees, or NULL when out of memory. */
char *sigv4_uri_encode(const char *s, int keep_slash);

/* Formats `t` (UTC) as "YYYYMMDDTHHMMSSZ" into out[SIGV4_AMZ_DATE_LEN + 1]. Returns 0,
 * or -1 (out set to "") when the time does not fit in four-digit years. */
int sigv4_amz_date(time_t t, char out[SIGV4_AMZ_DATE_LEN + 1]);

#endif
