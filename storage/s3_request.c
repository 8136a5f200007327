/* s3_request.c — one signed S3 request over libcurl, retried: the curl handle pool,
 * signing (storage/sigv4.h), retries with exponential backoff and full jitter on 5xx,
 * 429, connection failures, stalls and bodies that fail verification (a 429's or 503's
 * Retry-After waited instead, within bounds), and the checks of
 * a response body against the SHA-256 tandem stores with each object; s3_store.c's
 * header comment says why. */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "storage/s3_impl.h"
#include "storage/s3_creds.h"
#include "util/buf.h"
#include "storage/s3_xml.h"
#include "util/hex.h"

/* ------------------------------------------------------------------ curl handles */

static CURL *handle_take(s3_store *s) {
    pthread_mutex_lock(&s->mu);
    CURL *h = s->npool ? s->pool[--s->npool] : NULL;
    pthread_mutex_unlock(&s->mu);
    return h ? h : curl_easy_init();
}

static void handle_give(s3_store *s, CURL *h) {
    pthread_mutex_lock(&s->mu);
    if (s->npool < POOL_MAX) s->pool[s->npool++] = h, h = NULL;
    pthread_mutex_unlock(&s->mu);
    if (h) curl_easy_cleanup(h);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void s3_curl_init(void) { pthread_once(&curl_once, curl_init_once); }

/* ------------------------------------------------------------------ one request */



/* An error answer is S3's XML of a few hundred bytes; listings and the answers to PUT,
 * POST and DELETE are bounded too (a page of 1000 keys of 1 KiB is ~1.5 MB). */
#define S3_ERROR_BODY_MAX ((size_t)1 << 20)
#define S3_LIST_BODY_MAX ((size_t)64 << 20)
#define S3_SMALL_BODY_MAX ((size_t)1 << 20)
/* Bytes per second below which a transfer is stalled (see attempt()). */
#define S3_MIN_RATE 4096
/* An object's GET: 4x the largest object tandem writes (a 64 MiB chunk). A 200 that
 * ignored a Range, or a body that never ends, stops there instead of filling memory. */
#define S3_OBJECT_BODY_MAX ((size_t)STORE_OBJECT_MAX)

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    s3_resp *r = ud;
    size_t len = sz * n;
    size_t cap = r->hdr_status >= 300 ? S3_ERROR_BODY_MAX
                 : r->hdr_status == 206 && r->range_len ? r->range_len : r->body_max;
    if (cap && r->len + len > cap) {
        r->too_long = cap;
        return 0; /* curl stops the transfer */
    }
    if (r->into) {
        if (r->len + len > r->into_cap) {
            r->overflow = 1;
            return 0;
        }
        memcpy(r->into + r->len, p, len);
        r->len += len;
        return len;
    }
    /* the body grows as a util/buf string (NUL-terminated for the XML readers) */
    buf_t b = {.p = r->body, .n = r->len, .cap = r->cap};
    buf_putn(&b, p, len);
    if (b.oom) return 0; /* curl fails the transfer: "out of memory" reaches the caller */
    r->body = b.p;
    r->len = b.n;
    r->cap = b.cap;
    return len;
}

/* A header's value, trimmed, into out (cut at cap - 1 bytes); its whole trimmed length. */
static size_t header_value(const char *line, size_t n, size_t namelen, char *out, size_t cap) {
    const char *v = line + namelen;
    size_t vlen = n - namelen;
    while (vlen && (*v == ' ' || *v == '\t')) v++, vlen--;
    while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' ')) vlen--;
    size_t whole = vlen;
    if (vlen >= cap) vlen = cap - 1;
    memcpy(out, v, vlen);
    out[vlen] = '\0';
    return whole;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    s3_resp *r = ud;
    size_t len = sz * n;
    if (len > 5 && !strncasecmp(p, "HTTP/", 5)) { /* a new response (after a redirect/100) */
        r->etag[0] = r->meta_sha[0] = r->meta_key[0] = r->content_range[0] = r->date[0] = r->bucket_region[0] = '\0';
        r->last_modified[0] = '\0';
        r->retry_after[0] = '\0';
        r->etag_long = 0;
        r->content_length = -1;
        const char *sp = memchr(p, ' ', len);
        r->hdr_status = sp ? strtol(sp + 1, NULL, 10) : 0;
    } else if (len > 5 && !strncasecmp(p, "ETag:", 5)) {
        /* an ETag cut short would never match again: every compare-and-swap on it would
         * read as another writer's move ("fenced out") */
        r->etag_long = header_value(p, len, 5, r->etag, sizeof r->etag) >= sizeof r->etag;
    } else if (len > strlen(META_SHA) + 1 && !strncasecmp(p, META_SHA ":", strlen(META_SHA) + 1)) {
        header_value(p, len, strlen(META_SHA) + 1, r->meta_sha, sizeof r->meta_sha);
    } else if (len > strlen(META_KEY) + 1 && !strncasecmp(p, META_KEY ":", strlen(META_KEY) + 1)) {
        header_value(p, len, strlen(META_KEY) + 1, r->meta_key, sizeof r->meta_key);
    } else if (len > 20 && !strncasecmp(p, "x-amz-bucket-region:", 20)) {
        header_value(p, len, 20, r->bucket_region, sizeof r->bucket_region);
    } else if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) {
        header_value(p, len, 12, r->retry_after, sizeof r->retry_after);
    } else if (len > 5 && !strncasecmp(p, "Date:", 5)) {
        header_value(p, len, 5, r->date, sizeof r->date);
    } else if (len > 14 && !strncasecmp(p, "Last-Modified:", 14)) {
        header_value(p, len, 14, r->last_modified, sizeof r->last_modified);
    } else if (len > 14 && !strncasecmp(p, "Content-Range:", 14)) {
        header_value(p, len, 14, r->content_range, sizeof r->content_range);
    } else if (len > 15 && !strncasecmp(p, "Content-Length:", 15)) {
        char v[32];
        header_value(p, len, 15, v, sizeof v);
        r->content_length = atoll(v);
    }
    return len;
}

typedef struct body_src {
    const char *p;
    size_t left;
} body_src;

static size_t on_read(char *buf, size_t sz, size_t n, void *ud) {
    body_src *b = ud;
    size_t len = sz * n < b->left ? sz * n : b->left;
    memcpy(buf, b->p, len);
    b->p += len;
    b->left -= len;
    return len;
}

/* curl seeks back when it must resend a body (a reused connection that was closed). */
static int on_seek(void *ud, curl_off_t off, int origin) {
    (void)ud;
    (void)off;
    (void)origin;
    return CURL_SEEKFUNC_CANTSEEK;
}

/* The local clock as requests are signed with it. TANDEM_TEST_CLOCK_OFFSET_S (test-only)
 * shifts it, so that the suite can show what a skewed clock does. */
static time_t s3_now(void) {
    const char *v = getenv("TANDEM_TEST_CLOCK_OFFSET_S");
    return time(NULL) + (time_t)(v ? strtol(v, NULL, 10) : 0);
}

/* The object's full key under the store prefix. */
void s3_object_key(const s3_store *s, const char *key, char *out, size_t cap) {
    if (s->cfg.prefix[0]) snprintf(out, cap, "%s/%s", s->cfg.prefix, key);
    else snprintf(out, cap, "%s", key);
}

/* One attempt: signs, sends, receives. Returns 0 with resp filled (any HTTP status), or
 * the curl error code (> 0). */
/* curl's progress callback (about once a second, also while nothing moves): a transfer
 * still going at a stop's deadline (store_deadline) is given up. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)ud, (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return store_clock_s() >= store_deadline();
}

static int attempt(s3_store *s, const s3_req *q, s3_resp *resp, char *why, size_t whycap) {
    s3_config *c = &s->cfg; /* not const: temporary credentials are refreshed */
    char okey[1400] = "";
    if (q->key) s3_object_key(s, q->key, okey, sizeof okey);
    char *enc = sigv4_uri_encode(okey, 1);
    if (!enc) {
        snprintf(why, whycap, "out of memory");
        return CURLE_OUT_OF_MEMORY;
    }
    char path[3200];
    if (c->path_style) snprintf(path, sizeof path, "/%s%s%s", c->bucket, q->key ? "/" : "", enc);
    else snprintf(path, sizeof path, "/%s", enc);
    free(enc);
    char url[16000]; /* base_url, path and a listing's query (s3_list) */
    const char *hostpart = strstr(c->base_url, "://") + 3;
    const char *slash = strchr(hostpart, '/');
    size_t originlen = slash ? (size_t)(slash - c->base_url) : strlen(c->base_url);
    if (snprintf(url, sizeof url, "%.*s%s%s%s", (int)originlen, c->base_url, path,
                 q->query && *q->query ? "?" : "", q->query ? q->query : "") >= (int)sizeof url) {
        snprintf(why, whycap, "the request's URL is longer than %zu bytes", sizeof url);
        return CURLE_URL_MALFORMAT; /* never sent cut: it would name another key */
    }

    char payload[SHA256_HEX_LEN + 1];
    const char *payload_hash = NULL;
    if (q->body_sha_hex) payload_hash = q->body_sha_hex;
    else if (q->body && q->body_len > SIGNED_BODY_MAX) payload_hash = SIGV4_UNSIGNED_PAYLOAD;
    else if (q->body) {
        sha256_digest d;
        sha256(q->body, q->body_len, &d);
        sha256_hex(&d, payload);
        payload_hash = payload;
    }
    sigv4_header hs[8];
    size_t nh = 0;
    hs[nh++] = (sigv4_header){"Host", c->host};
    for (size_t i = 0; i < q->nextra; i++)
        if (!strncasecmp(q->extra[i].name, "x-amz-", 6)) hs[nh++] = q->extra[i];
    char date[SIGV4_AMZ_DATE_LEN + 1];
    sigv4_amz_date(s3_now(), date);
    sigv4_request sr = {.method = q->method, .path = path, .query = q->query, .headers = hs,
                        .nheaders = nh, .payload_sha256_hex = payload_hash};
    /* the credentials of this moment: temporary ones are refreshed before they expire */
    char ak[256], sk[256], tok[4096];
    tdm_err se;
    if (s3_creds_current(c, &s->creds_mu, ak, sizeof ak, sk, sizeof sk, tok, sizeof tok, &se)) {
        snprintf(why, whycap, "credentials: %.400s", se.msg);
        return CURLE_LOGIN_DENIED;
    }
    sigv4_params sp = {.access_key = ak, .secret_key = sk, .session_token = tok,
                       .region = c->region, .service = "s3", .amz_date = date,
                       .content_sha256_header = 1};
    sigv4_output so;
    int signed_rc = sigv4_sign(&sr, &sp, &so, &se);
    volatile char *wk = sk, *wt = tok;
    for (size_t i = 0; i < sizeof sk; i++) wk[i] = 0;
    for (size_t i = 0; i < sizeof tok; i++) wt[i] = 0;
    if (signed_rc) {
        snprintf(why, whycap, "signing failed: %.200s", se.msg);
        return CURLE_BAD_FUNCTION_ARGUMENT;
    }
    struct curl_slist *hl = NULL;
    char line[8192];
    for (size_t i = 0; i < nh; i++) {
        snprintf(line, sizeof line, "%s: %s", hs[i].name, hs[i].value);
        hl = curl_slist_append(hl, line);
    }
    for (size_t i = 0; i < q->nextra; i++)
        if (strncasecmp(q->extra[i].name, "x-amz-", 6)) {
            snprintf(line, sizeof line, "%s: %s", q->extra[i].name, q->extra[i].value);
            hl = curl_slist_append(hl, line);
        }
    for (size_t i = 0; i < so.nheaders; i++) {
        snprintf(line, sizeof line, "%s: %s", so.headers[i].name, so.headers[i].value);
        hl = curl_slist_append(hl, line);
    }
    hl = curl_slist_append(hl, "Expect:"); /* no 100-continue round trip */
    if (!q->body && (!strcmp(q->method, "PUT") || !strcmp(q->method, "POST")))
        hl = curl_slist_append(hl, "Content-Length: 0");
    volatile char *wipe = line;
    for (size_t i = 0; i < sizeof line; i++) wipe[i] = 0;

    CURL *h = handle_take(s);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    /* a transfer slower than S3_MIN_RATE for timeout_s is stalled (a body dripped at 2 KiB/s
     * held a request for hours at the 1 KiB/s this was); per request, and a commit has up to
     * 16 in flight, so the link needs 64 KiB/s (0.5 Mbit/s) in all */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)S3_MIN_RATE);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->timeout_s);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    body_src src = {q->body, q->body_len};
    if (!strcmp(q->method, "GET")) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (!strcmp(q->method, "HEAD")) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(q->method, "PUT")) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &src);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
    } else if (!strcmp(q->method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body ? (const char *)q->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
    }
    resp->content_length = -1;
    resp->range_len = 0;
    for (size_t i = 0; i < q->nextra; i++) {
        unsigned long long a, b;
        if (!strcasecmp(q->extra[i].name, "Range") && sscanf(q->extra[i].value, "bytes=%llu-%llu", &a, &b) == 2 &&
            b >= a)
            resp->range_len = (size_t)(b - a + 1);
    }
    /* a whole request is bounded too, however it trickles (a body dripped just above the
     * stall rate never stalled): twice the stall time (at least 60 s) plus its bytes at that
     * same rate, so whatever does not stall can finish (a 16 MiB part: 70 minutes) */
    size_t bytes = q->body_len > resp->range_len ? q->body_len : resp->range_len;
    long limit = (2 * c->timeout_s > 60 ? 2 * c->timeout_s : 60) + (long)(bytes / S3_MIN_RATE);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, limit);
    resp->body_max = strcmp(q->method, "GET") ? S3_SMALL_BODY_MAX
                     : q->query && strstr(q->query, "list-type=") ? S3_LIST_BODY_MAX : S3_OBJECT_BODY_MAX;
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    else snprintf(why, whycap, "%s", curl_easy_strerror(rc));
    curl_slist_free_all(hl);
    sigv4_output_free(&so);
    if (rc == CURLE_OK) handle_give(s, h);
    else curl_easy_cleanup(h); /* do not reuse a connection in an unknown state */
    return (int)rc;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double settle_s(const s3_store *s);

void s3_note_unsettled(s3_store *s, const char *key, int del, double for_s) {
    pthread_mutex_lock(&s->mu);
    /* the window counted from t: for_s from now where given (t may lie ahead) */
    double t = mono_s() + (for_s > 0 ? for_s - settle_s(s) : 0);
    if (!key) { /* another writer's: every key, for as long as the latest note says */
        if (t > s->lost_all_t) s->lost_all_t = t;
        if (del && t > s->lost_del_t) s->lost_del_t = t;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    struct s3_unsettled *u = &s->unsettled[s->nunsettled % S3_UNSETTLED_MAX];
    /* a DELETE pushed out is remembered by its time alone: until it is old, no DELETE of
     * any key counts as settled (a PUT pushed out is judged by the oldest entry, below) */
    if (s->nunsettled >= S3_UNSETTLED_MAX && u->del && u->t > s->lost_del_t) s->lost_del_t = u->t;
    s->nunsettled++;
    u->all = !key || strlen(key) >= sizeof u->key;
    u->del = del;
    snprintf(u->key, sizeof u->key, "%s", u->all ? "" : key);
    u->prefix = !u->all && key[0] && key[strlen(key) - 1] == '/';
    u->inherited = for_s > 0; /* for_s is given for another writer's, passed on */
    u->t = t; /* the window runs from t (a write of this process's: for_s is 0, t now) */
    pthread_mutex_unlock(&s->mu);
}

/* Whether ring entry u covers key (NULL: any). */
static int covers(const struct s3_unsettled *u, const char *key) {
    if (!key || u->all) return 1;
    return u->prefix ? strncmp(key, u->key, strlen(u->key)) == 0 : strcmp(u->key, key) == 0;
}

/* Whether list[0..used) (keys, each followed by '\n') names key (k bytes). */
static int named(const char *list, size_t used, const char *key, size_t k) {
    for (size_t at = 0; at < used;) {
        const char *nl = memchr(list + at, '\n', used - at);
        size_t len = nl ? (size_t)(nl - (list + at)) : used - at;
        if (len == k && !memcmp(list + at, key, k)) return 1;
        at += len + 1;
    }
    return 0;
}

double s3_unsettled_delete_keys(s3_store *s, char *out, size_t cap) {
    if (!cap) return 0;
    out[0] = '\0';
    double left = s3_unsettled_s(s, NULL, 1);
    if (left <= 0) return 0;
    double since = mono_s() - settle_s(s); /* an entry from before this has settled (negative on a young node) */
    size_t used = 0;
    pthread_mutex_lock(&s->mu);
    int all = s->lost_del_t > since;
    size_t n = s->nunsettled < S3_UNSETTLED_MAX ? s->nunsettled : S3_UNSETTLED_MAX;
    for (size_t i = 0; i < n && !all; i++) {
        const struct s3_unsettled *u = &s->unsettled[i];
        if (!u->del || u->t <= since) continue;
        size_t k = strlen(u->key);
        if (!u->all && named(out, used, u->key, k)) continue; /* noted twice */
        if (u->all || used + k + 2 > cap) {
            all = 1;
            break;
        }
        memcpy(out + used, u->key, k);
        used += k;
        out[used++] = '\n';
        out[used] = '\0';
    }
    pthread_mutex_unlock(&s->mu);
    if (all) snprintf(out, cap, "*");
    return left;
}

/* How long a write given up on may still land: an answer-less attempt is retried after
 * the request's own time limit, so twice that limit plus a minute covers a request held
 * as long again in a proxy or the server's queue (a guess no server promises; measured:
 * the test proxy's stall, 3 s past a 1 s limit). */
static double settle_s(const s3_store *s) {
    const char *t = getenv("TANDEM_TEST_SETTLE_S"); /* test-only: a shorter window */
    double v = t && *t ? atof(t) : 0;
    return v > 0 ? v : 60.0 + 2.0 * (double)s->cfg.timeout_s;
}

double s3_settle_window_s(const s3_store *s) { return settle_s(s); }

double s3_unsettled_s(s3_store *s, const char *key, int deletes_only) {
    /* the newest matching entry's time; -INFINITY: none (a time may be negative: on a node
     * booted after a note's window began, CLOCK_MONOTONIC counts from the boot — with 0 for
     * "none", a previous writer's late DELETE read as settled on a fresh node: review) */
    double now = mono_s(), within = settle_s(s), young = -INFINITY;
    pthread_mutex_lock(&s->mu);
    size_t n = s->nunsettled < S3_UNSETTLED_MAX ? s->nunsettled : S3_UNSETTLED_MAX;
    for (size_t i = 0; i < n; i++) {
        const struct s3_unsettled *u = &s->unsettled[i];
        if (deletes_only == 2 && u->inherited) continue;
        if ((u->del || !deletes_only) && covers(u, key) && u->t > young) young = u->t;
    }
    if (!deletes_only && s->lost_all_t > young) young = s->lost_all_t;
    if (deletes_only) {
        if (s->lost_del_t > young) young = s->lost_del_t;
    } else if (s->nunsettled > S3_UNSETTLED_MAX) {
        /* older entries pushed out of the ring: unknown, so unsettled while they could be young */
        const struct s3_unsettled *oldest = &s->unsettled[s->nunsettled % S3_UNSETTLED_MAX];
        if (oldest->t > young) young = oldest->t;
    }
    pthread_mutex_unlock(&s->mu);
    double left = isfinite(young) ? young + within - now : 0;
    return left > 0 ? left : 0;
}

/* Whether q writes an object (PUT, POST, DELETE of a key): such a request, unanswered,
 * may still land (s3_note_unsettled). */
static int writes_key(const s3_req *q) { return q->key && strcmp(q->method, "GET") && strcmp(q->method, "HEAD"); }

/* Whether q deletes the object itself (a multipart upload's abort, DELETE ?uploadId=, does
 * not: it removes parts, never a completed object). */
static int deletes_object(const s3_req *q) { return !strcmp(q->method, "DELETE") && !(q->query && *q->query); }

static int retryable_status(long st) { return st == 429 || st == 500 || st == 502 || st == 503 || st == 504; }

/* Sleeps d seconds, or until a stop's deadline (store_deadline) if that comes first; a
 * deadline that appears while it sleeps (a stop signal) ends it too, as it is asked for again
 * every 100 ms. */
static void sleep_within_deadline(double d) {
    double end = store_clock_s() + d;
    for (;;) {
        double now = store_clock_s(), until = fmin(end, store_deadline());
        if (!(now < until)) return;
        double slice = fmin(until - now, 0.1);
        struct timespec ts = {(time_t)slice, (long)((slice - (double)(time_t)slice) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

void s3_backoff(int attempt_no) {
    double cap = 5.0, base = 0.05 * (double)(1u << (attempt_no < 16 ? attempt_no : 16));
    if (base > cap) base = cap;
    unsigned seed = (unsigned)(time(NULL) ^ (getpid() << 8) ^ (unsigned)attempt_no ^
                               (unsigned)(size_t)pthread_self());
    sleep_within_deadline(base * ((double)rand_r(&seed) / RAND_MAX)); /* full jitter */
}

static int server_time(const s3_resp *r, time_t *t);

/* The wait a 429 or 503 asks for in its Retry-After header (RFC 9110 10.2.3): a number of
 * seconds, or an HTTP-date counted from the answer's Date (the server's clock: a skewed
 * local clock does not stretch it), else from the local clock. -1 when there is none, or
 * it is neither (then the usual backoff). */
static double retry_after_s(const s3_resp *r) {
    const char *v = r->retry_after;
    if (!*v) return -1;
    if (*v >= '0' && *v <= '9') {
        double n = 0;
        for (; *v >= '0' && *v <= '9'; v++)
            if (n < 1e9) n = n * 10 + (*v - '0');
        return *v ? -1 : n;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end) return -1;
    time_t at = timegm(&tm), now;
    if (server_time(r, &now)) now = s3_now();
    double d = difftime(at, now);
    return d > 0 ? d : 0;
}

static void resp_reset(s3_resp *r) {
    char *into = r->into;
    size_t cap = r->into_cap;
    free(r->body);
    memset(r, 0, sizeof *r);
    r->into = into;
    r->into_cap = cap;
}

/* Verification of a GET body: 0 when it matches what the headers promise. */

/* Sends a request with retries. Returns 0 with the final response (a non-retryable
 * status, which may be an error status) in *r, or ERR_STORE when every attempt failed. */
int s3_request(s3_store *s, const s3_req *q, s3_resp *r, verify_fn verify, void *vctx,
               tdm_err *e) {
    char why[512] = "";
    double wait = -1; /* what the last answer's Retry-After asked for (-1: the backoff) */
    int a, too_long = 0, renewed = 0;
    for (a = 0; a < s->cfg.retries; a++) {
        if (a > 0) {
            __atomic_add_fetch(&s->retries, 1, __ATOMIC_RELAXED);
            if (wait >= 0) sleep_within_deadline(wait);
            else s3_backoff(a);
        }
        wait = -1;
        /* a stop's deadline passed (store_deadline): no attempt more, the process must
         * exit before SIGKILL (the last full state stands) */
        if (store_clock_s() >= store_deadline()) {
            resp_reset(r);
            store_note_deadline();
            return err_set(e, ERR_STORE, "s3://%s%s%s: %s %s: given up at the stop's deadline (the end of the "
                           "grace period after a stop signal)%s%s", s->cfg.bucket, s->cfg.prefix[0] ? "/" : "",
                           s->cfg.prefix, q->method, q->key ? q->key : "(bucket)", why[0] ? ": " : "", why);
        }
        resp_reset(r);
        r->uncertain = a > 0;
        __atomic_add_fetch(&s->requests, 1, __ATOMIC_RELAXED);
        int rc = attempt(s, q, r, why, sizeof why);
        if (rc == CURLE_LOGIN_DENIED) /* the credentials' source refused: one clear error */
            return err_set(e, ERR_STORE, "s3://%s%s%s: %s %s: %s", s->cfg.bucket, s->cfg.prefix[0] ? "/" : "",
                           s->cfg.prefix, q->method,
                           q->key ? q->key : "(bucket)", why);
        if (rc == CURLE_BAD_FUNCTION_ARGUMENT || rc == CURLE_OUT_OF_MEMORY) {
            a++;
            break;
        }
        if (rc && r->too_long) { /* retried once: a proxy's glitch, or the endpoint's fault */
            snprintf(why, sizeof why, "the endpoint answered wrongly: a body (HTTP %ld) longer than the "
                     "%zu bytes such an answer holds", r->hdr_status, r->too_long);
            /* the same twice is the endpoint's: each attempt read up to the bound (256 MiB
             * for a record; all 8 read 2 GiB, 13 s here and past a minute under ASan) */
            if (++too_long >= 2) {
                a++;
                break;
            }
            continue;
        }
        if (rc && r->overflow) { /* on_body stopped it: more bytes than the buffer asked for */
            snprintf(why, sizeof why, "the body is longer than the range asked for (more than %zu bytes: the endpoint ignored the Range header?)",
                     r->into_cap);
            continue;
        }
        if (rc) { /* reset, timeout, refused: retry */
            if (writes_key(q)) s3_note_unsettled(s, q->key, deletes_object(q), 0);
            continue;
        }
        if (retryable_status(r->status)) {
            snprintf(why, sizeof why, "HTTP %ld", r->status);
            /* a 429 or 503 that says how long to wait (Retry-After) is waited that long
             * instead of the backoff: up to S3_RETRY_AFTER_MAX_S, or TANDEM_S3_TIMEOUT where
             * that is shorter (an endpoint asking for an hour does not hold a run for one),
             * and never past a stop's deadline (sleep_within_deadline) */
            double asked = r->status == 429 || r->status == 503 ? retry_after_s(r) : -1;
            if (asked >= 0) {
                double most = fmin(S3_RETRY_AFTER_MAX_S, (double)s->cfg.timeout_s);
                wait = fmin(asked, most);
                char cut[48] = "";
                if (asked > most) snprintf(cut, sizeof cut, ", cut to %.0f s", most);
                snprintf(why, sizeof why, "HTTP %ld (Retry-After %.0f s%s)", r->status, asked, cut);
            }
            /* a 500, 502 or 504 may come from a gateway whose upstream still holds the
             * write (429 and 503 refuse it): it may land later too */
            if (r->status != 429 && r->status != 503 && writes_key(q))
                s3_note_unsettled(s, q->key, deletes_object(q), 0);
            continue;
        }
        /* credentials the endpoint says expired while this process thought them fresh (the
         * issuer's clock ahead of this machine's, or a clock stepped at the fetch): a
         * refreshing source is asked again, once, and the request sent again (before: exit
         * 3 "renew them" from a source that renews itself). A HEAD's answer has no body to
         * name its code: a 400 or 403 to one renews them too (a real refusal comes back) */
        if ((r->status == 400 || r->status == 403) && !renewed) {
            char code[64] = "";
            if (r->body && r->len) s3_xml_first(r->body, r->len, "Code", code, sizeof code);
            int head = !strcmp(q->method, "HEAD") && !code[0];
            if ((head || !strcmp(code, "ExpiredToken")) && s3_creds_expire(&s->cfg, &s->creds_mu)) {
                renewed = 1;
                snprintf(why, sizeof why, "HTTP %ld %s (renewing the credentials)", r->status,
                         head ? "to a HEAD" : "ExpiredToken");
                wait = 0;
                a--; /* the renewal is no attempt of its own: the request is sent again */
                continue;
            }
        }
        if (r->etag_long && r->status / 100 == 2)
            return err_set(e, ERR_STORE, "s3://%s%s%s: %s %s: the endpoint's ETag is longer than %zu bytes (no S3 ETag "
                           "is): it answers wrongly; check AWS_ENDPOINT_URL and the server", s->cfg.bucket,
                           s->cfg.prefix[0] ? "/" : "", s->cfg.prefix, q->method,
                           q->key ? q->key : "(bucket)", sizeof r->etag - 1);
        if (verify && r->status / 100 == 2 && verify(r, vctx)) {
            snprintf(why, sizeof why, "the body failed verification (truncated or corrupted)");
            continue;
        }
        return 0;
    }
    resp_reset(r); /* no response to hand back: the last attempt's body is freed here */
    return err_set(e, ERR_STORE, "s3://%s%s%s: %s %s failed after %d attempt%s: %s", s->cfg.bucket,
                   s->cfg.prefix[0] ? "/" : "", s->cfg.prefix,
                   q->method, q->key ? q->key : "(bucket)", a, a == 1 ? "" : "s", why);
}

int s3_http_time(const char *text, time_t *t) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = text && text[0] ? strptime(text, "%a, %d %b %Y %H:%M:%S", &tm) : NULL;
    if (!end) return -1;
    *t = timegm(&tm);
    return 0;
}

/* The server's clock from an answer: its Date header (RFC 1123), else the ServerTime of
 * a RequestTimeTooSkewed body (ISO 8601). 0 with *t set, -1 when neither is there. */
static int server_time(const s3_resp *r, time_t *t) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = r->date[0] ? strptime(r->date, "%a, %d %b %Y %H:%M:%S", &tm) : NULL;
    char iso[64] = "";
    if (!end && r->body && r->len && s3_xml_first(r->body, r->len, "ServerTime", iso, sizeof iso)) {
        memset(&tm, 0, sizeof tm);
        end = strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm);
    }
    if (!end) return -1;
    *t = timegm(&tm);
    return 0;
}

/* Whether text looks like an AWS region name ("eu-west-1", "us-gov-east-1"): lower-case
 * letters, digits and '-', 4 to 32 of them, a '-' inside and a digit at the end. An
 * endpoint's header or <Region> is printed only when it does (and only after the
 * credentials were redacted from it: a hostile endpoint may echo them back). */
static int region_name_ok(const char *text) {
    size_t n = strlen(text);
    if (n < 4 || n > 32 || !strchr(text + 1, '-') || text[n - 1] < '0' || text[n - 1] > '9') return 0;
    for (size_t i = 0; i < n; i++)
        if (!((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= '0' && text[i] <= '9') || text[i] == '-'))
            return 0;
    return 1;
}

/* An error for a final non-2xx status: names the key, the status and S3's code, with a
 * hint that matches the code (a skewed clock is not a credentials problem, a bucket in
 * another region says which). */
int s3_status_error(store *st, const s3_req *q, const s3_resp *r, tdm_err *e) {
    char code[128] = "", region[64] = "";
    if (r->body && r->len) s3_xml_first(r->body, r->len, "Code", code, sizeof code);
    /* the bucket's region, where the answer names it (see below) */
    if (r->bucket_region[0]) snprintf(region, sizeof region, "%s", r->bucket_region);
    else if (r->body && r->len) s3_xml_first(r->body, r->len, "Region", region, sizeof region);
    s3_store *s = st->impl;
    pthread_mutex_lock(&s->creds_mu); /* a refresh may be rewriting them */
    s3_config_redact(&s->cfg, NULL, code, sizeof code);
    s3_config_redact(&s->cfg, NULL, region, sizeof region);
    pthread_mutex_unlock(&s->creds_mu);
    const char *what = q->key ? q->key : "(list)";
    if (!strcmp(code, "RequestTimeTooSkewed")) {
        time_t server, local = s3_now();
        if (server_time(r, &server) == 0)
            return err_set(e, ERR_STORE,
                           "%s: %s %s: HTTP %ld RequestTimeTooSkewed: this machine's clock is "
                           "%+lld s off the server's (local %lld, server %lld, unix seconds); "
                           "S3 refuses requests signed more than 15 minutes off its clock: fix "
                           "this machine's clock (NTP: timedatectl, chronyc tracking), not the "
                           "credentials",
                           store_url(st), q->method, what, r->status,
                           (long long)(local - server), (long long)local, (long long)server);
        return err_set(e, ERR_STORE,
                       "%s: %s %s: HTTP %ld RequestTimeTooSkewed: this machine's clock is too "
                       "far from the server's (the answer did not say by how much): fix this "
                       "machine's clock (NTP: timedatectl, chronyc tracking), not the credentials",
                       store_url(st), q->method, what, r->status);
    }
    /* the bucket is in another region than the one requests are signed for: S3 answers a
     * 301 PermanentRedirect (no body for a HEAD), or a 400 AuthorizationHeaderMalformed
     * with <Region>; both name the bucket's region in x-amz-bucket-region or <Region> */
    int region_code = !code[0] || !strcmp(code, "PermanentRedirect") ||
                      !strcmp(code, "AuthorizationHeaderMalformed") || !strcmp(code, "IllegalLocationConstraintException");
    if (region_name_ok(region) && strcmp(region, s->cfg.region) != 0 && region_code &&
        (r->status / 100 == 3 || r->status == 400))
        return err_set(e, ERR_STORE,
                       "%s: %s %s: HTTP %ld %s: the bucket is in region %s, and the requests are "
                       "signed for %s: set AWS_REGION=%s (it comes before AWS_DEFAULT_REGION and the "
                       "profile's `region`)",
                       store_url(st), q->method, what, r->status, code[0] ? code : "(no code)", region,
                       s->cfg.region, region);
    if (r->status / 100 == 3)
        return err_set(e, ERR_STORE,
                       "%s: %s %s: HTTP %ld%s%s: the endpoint redirects elsewhere, and tandem does "
                       "not follow redirects (a signed request must not go to another host): check "
                       "the endpoint (AWS_ENDPOINT_URL, the profile's endpoint_url) and the region",
                       store_url(st), q->method, what, r->status, code[0] ? " " : "", code);
    if (!strcmp(code, "NoSuchBucket"))
        return err_set(e, ERR_STORE,
                       "%s: %s %s: HTTP %ld NoSuchBucket: there is no bucket '%s' at %s: check the "
                       "bucket's name in the store URL and the endpoint, or create the bucket (tandem "
                       "creates objects in a bucket, never the bucket)",
                       store_url(st), q->method, what, r->status, s->cfg.bucket, s->cfg.endpoint);
    const char *hint = !strcmp(code, "ExpiredToken")
                           ? " (the credentials have expired: renew them; keys given in the environment "
                             "or a profile are used as they are, only the refreshing sources are renewed)"
                       : r->status == 403 ? " (check the credentials and the bucket policy)"
                                          : "";
    return err_set(e, ERR_STORE, "%s: %s %s: HTTP %ld %s%s", store_url(st), q->method, what,
                   r->status, code, hint);
}

/* ------------------------------------------------------------------ verification */


static int hex_digest(const char *alg, const void *data, size_t n, char *hex, size_t cap) {
    unsigned char md[64];
    unsigned int mdlen = 0;
    const EVP_MD *m = !strcmp(alg, "md5") ? EVP_md5() : EVP_sha256();
    if (EVP_Digest(data, n, md, &mdlen, m, NULL) != 1 || cap < 2 * mdlen + 1) return -1;
    hex_lower(md, mdlen, hex);
    return 0;
}

/* A whole-object GET: length as announced, then SHA-256 from our metadata, else the MD5
 * of a single-part ETag. */
int s3_verify_whole(const s3_resp *r, void *ctx) {
    const char *expect = ctx; /* the caller's expected SHA-256 hex, or NULL */
    const char *data = r->into ? r->into : r->body;
    size_t n = r->len;
    if (r->content_length >= 0 && (size_t)r->content_length != n) return -1;
    char hex[129];
    if (expect && r->meta_sha[0] && strcasecmp(expect, r->meta_sha) != 0) return -2; /* another object */
    if (expect || r->meta_sha[0]) {
        if (hex_digest("sha256", data ? data : "", n, hex, sizeof hex)) return -1;
        return strcasecmp(hex, expect ? expect : r->meta_sha) ? -1 : 0;
    }
    size_t el = strlen(r->etag);
    if (el == 34 && r->etag[0] == '"' && !strchr(r->etag, '-')) {
        if (hex_digest("md5", data ? data : "", n, hex, sizeof hex)) return -1;
        return strncasecmp(hex, r->etag + 1, 32) ? -1 : 0;
    }
    /* neither our hash nor an ETag: no S3 object is served so (a captive portal's or a
     * proxy's page with 200 is): read again, never judged as the object's bytes */
    return el ? 0 : -1;
}

int s3_verify_len(const s3_resp *r, void *ctx) {
    expect_len *x = ctx;
    if (r->content_length >= 0 && (size_t)r->content_length != r->len) return -1;
    return x && x->len >= 0 && (long long)r->len != x->len ? -1 : 0;
}
