/* sigv4.c — AWS Signature Version 4 (see sigv4.h for the contract).
 *
 * The steps are AWS's: canonical request (method, canonical URI, canonical query,
 * canonical headers, signed-header list, payload hash), string to sign (algorithm, date,
 * credential scope, SHA-256 of the canonical request), signing key (an HMAC-SHA256
 * chain from "AWS4"+secret through date, region, service and "aws4_request"), and the
 * hex HMAC of the string to sign. Everything is built in growable buffers; a single
 * out-of-memory flag per buffer keeps the happy path free of checks.
 */
#include "storage/sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

#define ALGORITHM "AWS4-HMAC-SHA256"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/* Longest credential we accept; real ones are far shorter, and HMAC() takes an int. */
#define MAX_CRED_LEN 8192

/* ---- character classes and percent-encoding -------------------------------------- */

static int is_unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '~';
}

/* RFC 7230 tchar: what a header name or a method may be made of. */
static int is_tchar(unsigned char c) {
    return is_unreserved(c) || (c && strchr("!#$%&'*+^`|", c) != NULL);
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void encode_into(buf_t *b, const char *s, size_t n, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_unreserved(c) || (keep_slash && c == '/')) {
            buf_putc(b, (char)c);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            buf_putn(b, esc, 3);
        }
    }
}

/* Appends the canonical form of one wire-encoded component (a path segment, a query
 * name or value): decoded, then encoded again, so "%7e", "~" and "%7E" all sign as "~"
 * and "a b" as "a%20b" — what the server computes from the bytes it receives. Returns
 * -1 on a malformed escape ("%zz", a lone '%'), which no server would accept either. */
static int recode_into(buf_t *b, const char *s, size_t n, int keep_slash) {
    buf_t raw = {0};
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            buf_putc(&raw, s[i]);
            continue;
        }
        if (n - i < 3 || hexval((unsigned char)s[i + 1]) < 0 ||
            hexval((unsigned char)s[i + 2]) < 0) {
            buf_free(&raw);
            return -1;
        }
        buf_putc(&raw, (char)(hexval((unsigned char)s[i + 1]) << 4 |
                              hexval((unsigned char)s[i + 2])));
        i += 2;
    }
    if (raw.oom) {
        b->oom = 1;
    } else {
        encode_into(b, raw.p ? raw.p : "", raw.n, keep_slash);
    }
    buf_free(&raw);
    return 0;
}

char *sigv4_uri_encode(const char *s, int keep_slash) {
    buf_t b = {0};
    buf_reserve(&b, 0);
    encode_into(&b, s, strlen(s), keep_slash);
    return buf_take(&b);
}

int sigv4_amz_date(time_t t, char out[SIGV4_AMZ_DATE_LEN + 1]) {
    struct tm tm;
    out[0] = '\0';
    if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 1000 || tm.tm_year + 1900 > 9999)
        return -1;
    if (strftime(out, SIGV4_AMZ_DATE_LEN + 1, "%Y%m%dT%H%M%SZ", &tm) != SIGV4_AMZ_DATE_LEN) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

/* ---- input validation ------------------------------------------------------------ */

/* A credential-scope part or access key: printable, no space, no '/' (the scope's
 * separator) and no ',' (the Authorization header's). */
static int scope_part_ok(const char *s) {
    if (!s || !*s || strlen(s) > MAX_CRED_LEN) return 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c <= 0x20 || *c >= 0x7f || *c == '/' || *c == ',') return 0;
    return 1;
}

/* A header value we can sign and curl can send: no control bytes but HTAB, so no
 * CR/LF header injection. */
static int header_value_ok(const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if ((*c < 0x20 && *c != '\t') || *c == 0x7f) return 0;
    return 1;
}

static int amz_date_ok(const char *d) {
    if (!d || strlen(d) != SIGV4_AMZ_DATE_LEN || d[8] != 'T' || d[15] != 'Z') return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (d[i] < '0' || d[i] > '9')) return 0;
    return 1;
}

/* 64 lowercase hex digits, or an upper-case token like UNSIGNED-PAYLOAD or
 * STREAMING-AWS4-HMAC-SHA256-PAYLOAD. Every such token says PAYLOAD, which keeps an
 * upper-case hex digest (S3 wants lower case) from passing as a token. */
static int payload_hash_ok(const char *h) {
    size_t n = strlen(h);
    int hex = n == SHA256_HEX_LEN, token = n <= 64 && strstr(h, "PAYLOAD") != NULL;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) hex = 0;
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) token = 0;
    }
    return hex || token;
}

static int validate_params(const sigv4_params *p, tdm_err *e) {
    if (!scope_part_ok(p->access_key))
        return err_set(e, ERR_USAGE, "sigv4: the access key is empty or has a space, '/' "
                                     "or ',' in it; check the credentials");
    /* Never echo the secret or the token, not even in part. */
    if (!p->secret_key || !*p->secret_key || strlen(p->secret_key) > MAX_CRED_LEN)
        return err_set(e, ERR_USAGE, "sigv4: the secret key is empty or too long; check "
                                     "the credentials");
    if (p->session_token && *p->session_token) {
        for (const unsigned char *c = (const unsigned char *)p->session_token; *c; c++)
            if (*c <= 0x20 || *c >= 0x7f)
                return err_set(e, ERR_USAGE,
                               "sigv4: the session token has a space or control "
                               "character in it (a stray newline from a file?); check "
                               "the credentials");
    }
    if (!scope_part_ok(p->region))
        return err_set(e, ERR_USAGE, "sigv4: region '%.64s' is empty or has a space, '/' "
                                     "or ',' in it",
                       p->region ? p->region : "");
    if (!scope_part_ok(p->service))
        return err_set(e, ERR_USAGE, "sigv4: service '%.64s' is empty or has a space, '/' "
                                     "or ',' in it",
                       p->service ? p->service : "");
    if (!amz_date_ok(p->amz_date))
        return err_set(e, ERR_USAGE, "sigv4: amz_date '%.32s' is not YYYYMMDDTHHMMSSZ",
                       p->amz_date ? p->amz_date : "(null)");
    return 0;
}

/* ---- canonical URI --------------------------------------------------------------- */

typedef struct seg {
    const char *s;
    size_t n;
} seg;

static int put_segment(buf_t *b, const char *s, size_t n, int double_encode) {
    if (double_encode) {
        encode_into(b, s, n, 0);
        return 0;
    }
    return recode_into(b, s, n, 0);
}

/* Appends the canonical URI of `path` (see sigv4.h). Without normalisation every byte
 * of structure is kept ("//", "/./"): S3 keys may contain them and S3 signs them as
 * sent. With it, "." and empty segments go, ".." drops its parent, and a trailing '/'
 * stays when the path had one. */
static int canonical_uri(buf_t *b, const char *path, int normalize, int double_encode,
                         tdm_err *e) {
    if (!path || !*path) path = "/";
    if (path[0] != '/')
        return err_set(e, ERR_USAGE, "sigv4: path '%.200s' does not start with '/'", path);
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        if (*c < 0x20 || *c == 0x7f || *c == '?' || *c == '#')
            return err_set(e, ERR_USAGE, "sigv4: path '%.200s' has a control character, "
                                         "'?' or '#' in it (pass the query separately)",
                           path);
    size_t len = strlen(path);
    if (!normalize) {
        for (size_t i = 0; i < len;) {
            if (path[i] == '/') {
                buf_putc(b, '/');
                i++;
                continue;
            }
            size_t j = i;
            while (j < len && path[j] != '/') j++;
            if (put_segment(b, path + i, j - i, double_encode) != 0)
                return err_set(e, ERR_USAGE, "sigv4: path '%.200s' has a malformed "
                                             "percent escape",
                               path);
            i = j;
        }
        return 0;
    }
    /* Normalised: a stack of the segments that survive. */
    size_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += path[i] == '/';
    seg *st = malloc(cap * sizeof *st);
    if (!st) return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    size_t top = 0;
    for (size_t i = 0; i < len;) {
        if (path[i] == '/') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && path[j] != '/') j++;
        size_t n = j - i;
        if (n == 2 && path[i] == '.' && path[i + 1] == '.') {
            if (top) top--;
        } else if (!(n == 1 && path[i] == '.')) {
            st[top++] = (seg){path + i, n};
        }
        i = j;
    }
    for (size_t k = 0; k < top; k++) {
        buf_putc(b, '/');
        if (put_segment(b, st[k].s, st[k].n, double_encode) != 0) {
            free(st);
            return err_set(e, ERR_USAGE, "sigv4: path '%.200s' has a malformed percent "
                                         "escape",
                           path);
        }
    }
    if (top == 0 || path[len - 1] == '/') buf_putc(b, '/');
    free(st);
    return 0;
}

/* ---- canonical query ------------------------------------------------------------- */

typedef struct qparam {
    char *name, *value; /* canonical (encoded) forms */
} qparam;

typedef struct qlist {
    qparam *v;
    size_t n, cap;
} qlist;

static void qlist_free(qlist *q) {
    for (size_t i = 0; i < q->n; i++) {
        free(q->v[i].name);
        free(q->v[i].value);
    }
    free(q->v);
    *q = (qlist){0};
}

/* Takes ownership of name and value (either may be NULL after an allocation failure,
 * which is then reported). */
static int qlist_add(qlist *q, char *name, char *value, tdm_err *e) {
    if (!name || !value) {
        free(name);
        free(value);
        return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    }
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 8;
        qparam *v = realloc(q->v, cap * sizeof *v);
        if (!v) {
            free(name);
            free(value);
            return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
        }
        q->v = v;
        q->cap = cap;
    }
    q->v[q->n++] = (qparam){name, value};
    return 0;
}

/* Byte order of the encoded names, then of the encoded values, as AWS specifies. */
static int qparam_cmp(const void *a, const void *b) {
    const qparam *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

/* The presigning parameters; a caller's query must not carry them already. */
static const char *const presign_names[] = {
    "X-Amz-Algorithm", "X-Amz-Credential",     "X-Amz-Date",     "X-Amz-Expires",
    "X-Amz-SignedHeaders", "X-Amz-Security-Token", "X-Amz-Signature",
};

/* Splits the wire query on '&' into canonical name/value pairs ("a" and "a=" both
 * become "a="; empty pieces from "&&" are dropped). */
static int parse_query(qlist *q, const char *query, int presign, tdm_err *e) {
    if (!query) return 0;
    for (const unsigned char *c = (const unsigned char *)query; *c; c++)
        if (*c < 0x20 || *c == 0x7f || *c == '#')
            return err_set(e, ERR_USAGE, "sigv4: query '%.200s' has a control character "
                                         "or '#' in it",
                           query);
    for (const char *s = query; *s;) {
        const char *amp = strchr(s, '&');
        size_t n = amp ? (size_t)(amp - s) : strlen(s);
        if (n) {
            const char *eq = memchr(s, '=', n);
            size_t nn = eq ? (size_t)(eq - s) : n;
            buf_t name = {0}, value = {0};
            buf_reserve(&name, 0);
            buf_reserve(&value, 0);
            int bad = recode_into(&name, s, nn, 0);
            if (!bad && eq) bad = recode_into(&value, eq + 1, n - nn - 1, 0);
            if (bad) {
                buf_free(&name);
                buf_free(&value);
                return err_set(e, ERR_USAGE, "sigv4: query '%.200s' has a malformed "
                                             "percent escape",
                               query);
            }
            char *cn = buf_take(&name), *cv = buf_take(&value);
            if (presign && cn) {
                for (size_t i = 0; i < sizeof presign_names / sizeof *presign_names; i++) {
                    if (strcmp(cn, presign_names[i]) == 0) {
                        free(cn);
                        free(cv);
                        return err_set(e, ERR_USAGE, "sigv4: query already has %s; "
                                                     "presign the request without it",
                                       presign_names[i]);
                    }
                }
            }
            if (qlist_add(q, cn, cv, e) != 0) return ERR_INTERNAL;
        }
        s += n;
        if (*s == '&') s++;
    }
    return 0;
}

/* ---- canonical headers ----------------------------------------------------------- */

typedef struct hentry {
    char *name;   /* lower case */
    char *value;  /* trimmed, inner runs of blanks collapsed to one space */
    size_t order; /* input position, so repeated names keep their order */
} hentry;

/* Sort by name, then by position: values of a repeated header join in sending order. */
static int hentry_cmp(const void *a, const void *b) {
    const hentry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

static char *lower_dup(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    for (size_t i = 0; i <= n; i++)
        d[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    return d;
}

/* AWS: trim, and turn each run of blanks into one space. HTAB counts as a blank, as
 * it does in HTTP (and as curl sends it). */
static char *trim_collapse(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    size_t k = 0;
    int pending = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' || s[i] == '\t') {
            pending = k > 0;
            continue;
        }
        if (pending) d[k++] = ' ';
        pending = 0;
        d[k++] = s[i];
    }
    d[k] = '\0';
    return d;
}

typedef struct hlist {
    hentry *v;
    size_t n;
} hlist;

static void hlist_free(hlist *h) {
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].name);
        free(h->v[i].value);
    }
    free(h->v);
    *h = (hlist){0};
}

/* Appends one header; `v` has room (sized by the caller). Does not name the value in
 * errors: it may be a token. */
static int hlist_add(hlist *h, const char *name, const char *value, tdm_err *e) {
    char *ln = lower_dup(name), *cv = trim_collapse(value);
    if (!ln || !cv) {
        free(ln);
        free(cv);
        return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    }
    h->v[h->n] = (hentry){ln, cv, h->n};
    h->n++;
    return 0;
}

/* Names the signer sets itself; the caller passing one would sign it twice. */
static int header_reserved(const char *lname, const sigv4_params *p, int presign,
                           int has_token) {
    if (strcmp(lname, "authorization") == 0 || strcmp(lname, "x-amz-date") == 0) return 1;
    if (has_token && strcmp(lname, "x-amz-security-token") == 0) return 1;
    if (!presign && p->content_sha256_header && strcmp(lname, "x-amz-content-sha256") == 0)
        return 1;
    return 0;
}

/* Collects the caller's headers and, for header signing, the ones the signer adds,
 * checks them, and sorts them into canonical order. */
static int collect_headers(hlist *h, const sigv4_request *r, const sigv4_params *p,
                           const char *payload, int presign, int has_token, tdm_err *e) {
    if (r->nheaders && !r->headers)
        return err_set(e, ERR_USAGE, "sigv4: %zu headers but no header array", r->nheaders);
    h->v = calloc(r->nheaders + 3, sizeof *h->v);
    if (!h->v) return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    int host = 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *name = r->headers[i].name, *value = r->headers[i].value;
        if (!name || !*name)
            return err_set(e, ERR_USAGE, "sigv4: header %zu has no name", i);
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
            if (!is_tchar(*c))
                return err_set(e, ERR_USAGE, "sigv4: header name '%.100s' is not an HTTP "
                                             "token",
                               name);
        if (!value || !header_value_ok(value))
            return err_set(e, ERR_USAGE, "sigv4: the value of header '%.100s' is missing "
                                         "or has a control character (CR/LF?) in it",
                           name);
        if (hlist_add(h, name, value, e) != 0) return e ? e->code : ERR_INTERNAL;
        const char *ln = h->v[h->n - 1].name;
        if (header_reserved(ln, p, presign, has_token))
            return err_set(e, ERR_USAGE, "sigv4: header '%.100s' is set by the signer; "
                                         "do not pass it",
                           name);
        host |= strcmp(ln, "host") == 0;
    }
    if (!host)
        return err_set(e, ERR_USAGE, "sigv4: no Host header to sign (pass exactly the "
                                     "Host that curl sends, with :port if not default)");
    if (!presign) {
        if (hlist_add(h, "x-amz-date", p->amz_date, e) != 0) return ERR_INTERNAL;
        if (has_token && !p->omit_session_token &&
            hlist_add(h, "x-amz-security-token", p->session_token, e) != 0)
            return ERR_INTERNAL;
        if (p->content_sha256_header && hlist_add(h, "x-amz-content-sha256", payload, e) != 0)
            return ERR_INTERNAL;
    }
    qsort(h->v, h->n, sizeof *h->v, hentry_cmp);
    return 0;
}

/* "name:v1,v2\n" lines into `canon`, "name;name2" into `signed_list`. */
static void write_headers(const hlist *h, buf_t *canon, buf_t *signed_list) {
    for (size_t i = 0; i < h->n; i++) {
        int first = i == 0 || strcmp(h->v[i].name, h->v[i - 1].name) != 0;
        int last = i + 1 == h->n || strcmp(h->v[i].name, h->v[i + 1].name) != 0;
        if (first) {
            if (i) buf_putc(signed_list, ';');
            buf_puts(signed_list, h->v[i].name);
            buf_puts(canon, h->v[i].name);
            buf_putc(canon, ':');
        } else {
            buf_putc(canon, ',');
        }
        buf_puts(canon, h->v[i].value);
        if (last) buf_putc(canon, '\n');
    }
}

/* ---- keys and signature ---------------------------------------------------------- */

static int hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n,
                       unsigned char out[SHA256_LEN]) {
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), key, (int)keylen, msg, n, out, &len) || len != SHA256_LEN)
        return -1;
    return 0;
}

/* signature = hex(HMAC(kSigning, sts)), kSigning derived from the secret through the
 * credential scope. The intermediate keys are as good as the secret for a day, so
 * they are wiped before returning. */
static int compute_signature(const sigv4_params *p, const char *date8, const char *sts,
                             char hex[SHA256_HEX_LEN + 1]) {
    size_t sl = strlen(p->secret_key);
    unsigned char *k0 = malloc(sl + 4);
    unsigned char k[SHA256_LEN], sig[SHA256_LEN];
    int rc = -1;
    if (!k0) return -1;
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, p->secret_key, sl);
    if (hmac_sha256(k0, sl + 4, date8, 8, k) == 0 &&
        hmac_sha256(k, SHA256_LEN, p->region, strlen(p->region), k) == 0 &&
        hmac_sha256(k, SHA256_LEN, p->service, strlen(p->service), k) == 0 &&
        hmac_sha256(k, SHA256_LEN, "aws4_request", 12, k) == 0 &&
        hmac_sha256(k, SHA256_LEN, sts, strlen(sts), sig) == 0) {
        sha256_digest d;
        memcpy(d.b, sig, SHA256_LEN);
        sha256_hex(&d, hex);
        rc = 0;
    }
    OPENSSL_cleanse(k0, sl + 4);
    OPENSSL_cleanse(k, sizeof k);
    free(k0);
    return rc;
}

/* ---- the signer ------------------------------------------------------------------ */

/* Checks what sign_impl cannot sign: parameters, method, payload hash, expiry. Sets
 * *payload to the payload hash to sign (the empty body's when the request gives none). */
static int check_request(const sigv4_request *r, const sigv4_params *p, int presign,
                         long expires_s, const char **payload, tdm_err *e) {
    if (!r || !p) return err_set(e, ERR_USAGE, "sigv4: no request or no parameters");
    int rc = validate_params(p, e);
    if (rc) return rc;
    if (!r->method || !*r->method)
        return err_set(e, ERR_USAGE, "sigv4: the request has no method");
    for (const unsigned char *c = (const unsigned char *)r->method; *c; c++)
        if (!is_tchar(*c))
            return err_set(e, ERR_USAGE, "sigv4: method '%.32s' is not an HTTP token",
                           r->method);
    *payload = r->payload_sha256_hex ? r->payload_sha256_hex : EMPTY_SHA256;
    if (!payload_hash_ok(*payload))
        return err_set(e, ERR_USAGE, "sigv4: payload hash '%.80s' is neither 64 lowercase "
                                     "hex digits nor a token like UNSIGNED-PAYLOAD",
                       *payload);
    if (presign && (expires_s < 1 || expires_s > SIGV4_MAX_EXPIRES))
        return err_set(e, ERR_USAGE, "sigv4: presigned URLs live 1 to %d seconds, not %ld",
                       SIGV4_MAX_EXPIRES, expires_s);
    return 0;
}

/* The presigned form's own query parameters, added to q before it is sorted: algorithm,
 * credential (*cred: "<access key>/<scope>", encoded), date, expiry (*expires), signed
 * headers and the session token unless it is left out of the signature. */
static int add_presign_params(qlist *q, const sigv4_params *p, const buf_t *scope,
                              const buf_t *signed_h, long expires_s, int has_token, char **cred,
                              char **expires, tdm_err *e) {
    buf_t tmp = {0};
    buf_puts(&tmp, p->access_key);
    buf_putc(&tmp, '/');
    buf_putn(&tmp, scope->p ? scope->p : "", scope->n);
    char *c = buf_take(&tmp);
    *cred = c ? sigv4_uri_encode(c, 0) : NULL;
    free(c);
    char num[32];
    snprintf(num, sizeof num, "%ld", expires_s);
    *expires = strdup(num);
    if (!*cred || !*expires || scope->oom || signed_h->oom)
        return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    int rc;
    if ((rc = qlist_add(q, strdup("X-Amz-Algorithm"), strdup(ALGORITHM), e)) ||
        (rc = qlist_add(q, strdup("X-Amz-Credential"), strdup(*cred), e)) ||
        (rc = qlist_add(q, strdup("X-Amz-Date"), strdup(p->amz_date), e)) ||
        (rc = qlist_add(q, strdup("X-Amz-Expires"), strdup(*expires), e)) ||
        (rc = qlist_add(q, strdup("X-Amz-SignedHeaders"), sigv4_uri_encode(signed_h->p, 0), e)))
        return rc;
    if (has_token && !p->omit_session_token &&
        (rc = qlist_add(q, strdup("X-Amz-Security-Token"), sigv4_uri_encode(p->session_token, 0),
                        e)))
        return rc;
    return 0;
}

/* The canonical request: six lines; the header block ends with its own newline, so a
 * blank line separates it from the signed-header list. */
static void canonical_request(buf_t *creq, const char *method, const buf_t *uri, const qlist *q,
                              const buf_t *canon_h, const buf_t *signed_h, const char *payload) {
    buf_puts(creq, method);
    buf_putc(creq, '\n');
    buf_putn(creq, uri->p ? uri->p : "", uri->n);
    buf_putc(creq, '\n');
    for (size_t i = 0; i < q->n; i++) {
        if (i) buf_putc(creq, '&');
        buf_puts(creq, q->v[i].name);
        buf_putc(creq, '=');
        buf_puts(creq, q->v[i].value);
    }
    buf_putc(creq, '\n');
    buf_putn(creq, canon_h->p ? canon_h->p : "", canon_h->n);
    buf_putc(creq, '\n');
    buf_putn(creq, signed_h->p ? signed_h->p : "", signed_h->n);
    buf_putc(creq, '\n');
    buf_puts(creq, payload);
}

/* The string to sign: algorithm, date, scope and the canonical request's SHA-256. */
static void string_to_sign(buf_t *sts, const sigv4_params *p, const buf_t *scope,
                           const buf_t *creq) {
    sha256_digest d;
    char creq_hex[SHA256_HEX_LEN + 1];
    sha256(creq->p, creq->n, &d);
    sha256_hex(&d, creq_hex);
    buf_puts(sts, ALGORITHM "\n");
    buf_puts(sts, p->amz_date);
    buf_putc(sts, '\n');
    buf_putn(sts, scope->p, scope->n);
    buf_putc(sts, '\n');
    buf_puts(sts, creq_hex);
}

/* The presigned URL's parameters into out->query, in the order AWS's suite prints them
 * (any order verifies: the signature is over the sorted form). The token goes in even
 * when it is left out of the signature. */
static int finish_presigned(sigv4_output *out, const sigv4_params *p, const char *cred,
                            const buf_t *signed_h, const char *expires, int has_token,
                            tdm_err *e) {
    buf_t tmp = {0};
    buf_puts(&tmp, "X-Amz-Algorithm=" ALGORITHM "&X-Amz-Credential=");
    buf_puts(&tmp, cred);
    buf_puts(&tmp, "&X-Amz-Date=");
    buf_puts(&tmp, p->amz_date);
    buf_puts(&tmp, "&X-Amz-SignedHeaders=");
    encode_into(&tmp, signed_h->p, signed_h->n, 0);
    buf_puts(&tmp, "&X-Amz-Expires=");
    buf_puts(&tmp, expires);
    if (has_token) {
        buf_puts(&tmp, "&X-Amz-Security-Token=");
        encode_into(&tmp, p->session_token, strlen(p->session_token), 0);
    }
    buf_puts(&tmp, "&X-Amz-Signature=");
    buf_puts(&tmp, out->signature);
    if (!(out->query = buf_take(&tmp))) return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    return 0;
}

/* The header form: the Authorization value, and the headers the caller adds (token,
 * date, content hash when asked for, Authorization last), their values in one block. */
static int finish_headers(sigv4_output *out, const sigv4_params *p, const buf_t *scope,
                          const buf_t *signed_h, const char *payload, int has_token,
                          tdm_err *e) {
    buf_t tmp = {0};
    buf_puts(&tmp, ALGORITHM " Credential=");
    buf_puts(&tmp, p->access_key);
    buf_putc(&tmp, '/');
    buf_putn(&tmp, scope->p, scope->n);
    buf_puts(&tmp, ", SignedHeaders=");
    buf_putn(&tmp, signed_h->p, signed_h->n);
    buf_puts(&tmp, ", Signature=");
    buf_puts(&tmp, out->signature);
    if (!(out->authorization = buf_take(&tmp)))
        return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    size_t tl = has_token ? strlen(p->session_token) : 0, pl = strlen(payload);
    out->store_ = malloc(tl + 1 + SIGV4_AMZ_DATE_LEN + 1 + pl + 1);
    if (!out->store_) return err_set(e, ERR_INTERNAL, "sigv4: out of memory");
    char *tok = out->store_, *date = tok + tl + 1, *hash = date + SIGV4_AMZ_DATE_LEN + 1;
    memcpy(tok, has_token ? p->session_token : "", tl + 1);
    memcpy(date, p->amz_date, SIGV4_AMZ_DATE_LEN + 1);
    memcpy(hash, payload, pl + 1);
    /* Names spelled as AWS's suite spells them; HTTP names are case-insensitive. */
    if (has_token) out->headers[out->nheaders++] = (sigv4_header){"X-Amz-Security-Token", tok};
    out->headers[out->nheaders++] = (sigv4_header){"X-Amz-Date", date};
    if (p->content_sha256_header)
        out->headers[out->nheaders++] = (sigv4_header){"x-amz-content-sha256", hash};
    out->headers[out->nheaders++] = (sigv4_header){"Authorization", out->authorization};
    return 0;
}

/* Shared body of sigv4_sign and sigv4_presign; `presign` selects where the signature
 * goes (Authorization header, or query parameters). */
static int sign_impl(const sigv4_request *r, const sigv4_params *p, int presign,
                     long expires_s, sigv4_output *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    const char *payload = NULL;
    int rc = check_request(r, p, presign, expires_s, &payload, e);
    if (rc) return rc;
    int has_token = p->session_token && *p->session_token;
    char date8[9];
    memcpy(date8, p->amz_date, 8);
    date8[8] = '\0';

    buf_t scope = {0}, uri = {0}, canon_h = {0}, signed_h = {0}, creq = {0}, sts = {0};
    hlist h = {0};
    qlist q = {0};
    char *cred = NULL, *expires = NULL;
    buf_puts(&scope, date8);
    buf_putc(&scope, '/');
    buf_puts(&scope, p->region);
    buf_putc(&scope, '/');
    buf_puts(&scope, p->service);
    buf_puts(&scope, "/aws4_request");

    if ((rc = canonical_uri(&uri, r->path, p->normalize_path, p->double_encode_path, e)))
        goto done;
    if ((rc = collect_headers(&h, r, p, payload, presign, has_token, e))) goto done;
    write_headers(&h, &canon_h, &signed_h);
    if ((rc = parse_query(&q, r->query, presign, e))) goto done;
    if (presign && (rc = add_presign_params(&q, p, &scope, &signed_h, expires_s, has_token, &cred,
                                            &expires, e)))
        goto done;
    if (q.n) qsort(q.v, q.n, sizeof *q.v, qparam_cmp); /* q.v is NULL when empty */
    canonical_request(&creq, r->method, &uri, &q, &canon_h, &signed_h, payload);
    if (creq.oom || scope.oom || uri.oom || canon_h.oom || signed_h.oom) {
        rc = err_set(e, ERR_INTERNAL, "sigv4: out of memory");
        goto done;
    }
    string_to_sign(&sts, p, &scope, &creq);
    if (sts.oom) {
        rc = err_set(e, ERR_INTERNAL, "sigv4: out of memory");
        goto done;
    }
    if (compute_signature(p, date8, sts.p, out->signature) != 0) {
        rc = err_set(e, ERR_INTERNAL, "sigv4: HMAC-SHA256 failed (OpenSSL; out of memory?)");
        goto done;
    }
    rc = presign ? finish_presigned(out, p, cred, &signed_h, expires, has_token, e)
                 : finish_headers(out, p, &scope, &signed_h, payload, has_token, e);
    if (rc) goto done;
    out->canonical_request = buf_take(&creq);
    out->string_to_sign = buf_take(&sts);
    if (!out->canonical_request || !out->string_to_sign)
        rc = err_set(e, ERR_INTERNAL, "sigv4: out of memory");

done:
    if (rc) sigv4_output_free(out);
    buf_free(&scope);
    buf_free(&uri);
    buf_free(&canon_h);
    buf_free(&signed_h);
    buf_free(&creq);
    buf_free(&sts);
    hlist_free(&h);
    qlist_free(&q);
    free(cred);
    free(expires);
    return rc;
}

int sigv4_sign(const sigv4_request *r, const sigv4_params *p, sigv4_output *out,
               tdm_err *e) {
    return sign_impl(r, p, 0, 0, out, e);
}

int sigv4_presign(const sigv4_request *r, const sigv4_params *p, long expires_s,
                  sigv4_output *out, tdm_err *e) {
    return sign_impl(r, p, 1, expires_s, out, e);
}

void sigv4_output_free(sigv4_output *out) {
    if (!out) return;
    free(out->canonical_request);
    free(out->string_to_sign);
    free(out->authorization);
    free(out->query);
    /* The block starts with the copy of the session token (empty without one). */
    if (out->store_) OPENSSL_cleanse(out->store_, strlen(out->store_));
    free(out->store_);
    memset(out, 0, sizeof *out);
}
