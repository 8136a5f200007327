/* s3_impl.h — what the two halves of the s3:// store share: s3_request.c (curl
 * handles, one signed request, retries with backoff, body verification) and s3_store.c
 * (objects: put, conditional put, multipart, ranged get, list, delete; opening a store).
 * Only those two include it. */
#ifndef TANDEM_STORAGE_S3_IMPL_H
#define TANDEM_STORAGE_S3_IMPL_H

#include <curl/curl.h>
#include <pthread.h>

#include "storage/s3_config.h"
#include "storage/sha256.h"
#include "storage/sigv4.h"
#include "storage/store_impl.h"

#define POOL_MAX 64
#define S3_UNSETTLED_MAX 64
#define SIGNED_BODY_MAX ((size_t)8 << 20)
#define META_SHA "x-amz-meta-tandem-sha256"
/* the SHA-256 of the object's key under the store prefix: an answer carrying another
 * object (bytes and headers alike: a proxy or cache mixing up keys) is told from it */
#define META_KEY "x-amz-meta-tandem-key-sha256"

typedef struct s3_store {
    s3_config cfg;
    pthread_mutex_t mu;
    pthread_mutex_t creds_mu; /* the credentials while they are refreshed (s3_creds.h) */
    CURL *pool[POOL_MAX];
    int npool;
    int conditional; /* -1 unknown, 0 ignored by the server, 1 honoured */
    long requests, retries;
    /* writes given up without an answer (a timeout, a reset): the server may still apply
     * one later (a request held in a proxy or a queue lands after the retry that
     * succeeded). The newest S3_UNSETTLED_MAX, under `mu`; store_write_settled reads it */
    struct s3_unsettled {
        char key[160]; /* "" and all = 1: a key too long to keep (every key is unsettled) */
        int all;
        int prefix;    /* key ends with '/': every key under it */
        int del;       /* a DELETE of the object (store_delete_unsettled_s asks about these alone) */
        int inherited; /* another writer's, from its released lease: passed on, not waited for at the end */
        double t;      /* CLOCK_MONOTONIC seconds the window runs from (may be negative: a young node) */
    } unsettled[S3_UNSETTLED_MAX];
    size_t nunsettled; /* written so far (the ring's next slot is nunsettled % MAX) */
    double lost_del_t; /* the newest DELETE pushed out of the ring (-INFINITY: none) */
    double lost_all_t; /* another writer's writes (store_note_lost_writer): the latest window
                        * start, kept apart from the ring, whose oldest-entry rule assumes
                        * times only grow (a for_s window starts in the future) */
} s3_store;

/* Records that a write of `key` (PUT, POST, DELETE: `del`) got no answer and may still
 * land, for the settle window from now, or for for_s seconds (for_s > 0: a DELETE of an
 * earlier writer's that its released lease named, store_note_late_delete); NULL: a write
 * of any key may (another writer's, store_note_lost_writer; with `del`, a DELETE of any
 * key too), for the window or for for_s seconds, whichever of the notes so far ends last. */
void s3_note_unsettled(s3_store *s, const char *key, int del, double for_s);
/* The keys of the DELETEs counted unsettled now (s3_unsettled_s with deletes_only), each
 * followed by '\n', into out (cap bytes, always terminated); "*" where they cannot all be
 * named (one pushed out of the ring, a key too long to keep, another writer's of any key,
 * or more than out holds). The seconds until none can land; 0 and "" when none can. */
double s3_unsettled_delete_keys(s3_store *s, char *out, size_t cap);
/* Seconds until no write of `key` given up on (with deletes_only 1: no DELETE of it; 2:
 * no DELETE of this process's own, not those a released lease passed on; NULL key: of any
 * key) can still land (see s3_request.c); 0: settled. */
double s3_unsettled_s(s3_store *s, const char *key, int deletes_only);
/* How long a write given up on may still land after it was sent (the settle window). */
double s3_settle_window_s(const s3_store *s);

typedef struct s3_resp {
    long status;
    char *body; /* response body (malloc'd) unless `into` was given */
    size_t len, cap;
    char *into; /* write the body here instead (ranged GETs), at most into_cap bytes */
    size_t into_cap;
    int overflow;
    char etag[128];
    char meta_sha[SHA256_HEX_LEN + 1];
    char meta_key[SHA256_HEX_LEN + 1]; /* META_KEY, "" when the object has none (older tandem) */
    char content_range[128];
    char date[64]; /* the server's Date header (for a clock-skew diagnosis) */
    char last_modified[64]; /* the object's Last-Modified (store_age) */
    char bucket_region[64]; /* x-amz-bucket-region (S3 names it on a wrong-region answer) */
    char retry_after[64];   /* Retry-After (a 429's or 503's wait: seconds or an HTTP-date) */
    long long content_length;
    int uncertain; /* an earlier attempt got no definite answer: it may have been applied */
    /* how long an answer may be (attempt() sets them from the request): a body past its
     * bound is an endpoint answering wrongly, not memory to give it */
    long hdr_status;  /* the status line's code, known from the headers on */
    size_t range_len; /* a 206's bound: the length of the range asked for (0: none asked) */
    size_t body_max;  /* a 2xx's bound (an object's GET: S3_OBJECT_BODY_MAX) */
    size_t too_long;  /* the bound a body went past (the transfer was stopped), or 0 */
    int etag_long;    /* the ETag header did not fit etag[] (an endpoint answering wrongly) */
} s3_resp;

typedef struct s3_req {
    const char *method;
    const char *key;   /* object key under the store prefix; NULL: the bucket itself */
    const char *query; /* wire-form query, names and values encoded, sorted */
    const void *body;
    size_t body_len;
    const char *body_sha_hex; /* known SHA-256 of the body, or NULL to compute/unsigned */
    sigv4_header extra[6];    /* additional headers (signed when x-amz-*) */
    size_t nextra;
} s3_req;

typedef int (*verify_fn)(const s3_resp *r, void *ctx);

typedef struct expect_len {
    long long len; /* -1: unknown */
} expect_len;

/* curl_global_init, once per process. */
void s3_curl_init(void);

/* Sends a request with retries. Returns 0 with the final response (a non-retryable
 * status, which may be an error status) in *r, or ERR_STORE when every attempt failed
 * (then *r holds no body to free). */
int s3_request(s3_store *s, const s3_req *q, s3_resp *r, verify_fn verify, void *vctx,
               tdm_err *e);

/* An error for a final non-2xx status: names the key, the status and S3's code, with a
 * hint that matches the code (a skewed clock is not a credentials problem). */
int s3_status_error(store *st, const s3_req *q, const s3_resp *r, tdm_err *e);

/* A whole-object GET: length as announced, then SHA-256 from our metadata, else the MD5
 * of a single-part ETag. */
int s3_verify_whole(const s3_resp *r, void *ctx);

/* A ranged GET's part: exactly the length asked for (ctx: an expect_len). */
int s3_verify_len(const s3_resp *r, void *ctx);

/* Sleeps before retry `attempt_no`: exponential backoff with full jitter, never past a
 * stop's deadline (store_deadline). */
void s3_backoff(int attempt_no);

/* An HTTP-date (RFC 1123: "Sun, 06 Nov 1994 08:49:37 GMT") as unix seconds. 0, or -1 when
 * text is not one. */
int s3_http_time(const char *text, time_t *t);

/* The longest wait a Retry-After buys (seconds; TANDEM_S3_TIMEOUT when that is shorter). */
#define S3_RETRY_AFTER_MAX_S 30.0

/* The object's full key under the store prefix. */
void s3_object_key(const s3_store *s, const char *key, char *out, size_t cap);

#endif
