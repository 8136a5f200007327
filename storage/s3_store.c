/* s3_store.c — the s3:// store: S3's REST API over libcurl, signed with SigV4.
 *
 * Every request is signed afresh (storage/sigv4.h) and retried with exponential backoff
 * and full jitter on 5xx, 429, connection failures, stalls and bodies that fail
 * verification; other 4xx answers are final. Connections are reused through a small
 * pool of curl handles. Objects larger than one part are written with a multipart upload
 * whose parts go up in parallel, and read with parallel ranged GETs.
 *
 * Integrity: every object tandem writes carries its SHA-256 as x-amz-meta-tandem-sha256
 * and every read is checked against it (objects written by other tools: against a
 * single-part ETag's MD5, else their length), so a truncated or corrupted transfer is
 * detected and retried. x-amz-content-sha256 is the real payload hash for bodies up to
 * 8 MiB; larger bodies (blob parts) are sent UNSIGNED-PAYLOAD and rely on the content
 * hashes above.
 *
 * Conditional writes: create-only is If-None-Match: *, compare-and-swap is If-Match on
 * the ETag. Whether the server honours them is probed once per store (a create-only PUT
 * accepted, then repeated, must fail with 412; a probe refused otherwise is an error, not
 * an answer); a server that ignores them gets the lease protocol of
 * docs/running.md instead (checked writes: read, compare, write — safe only with one
 * writer, which the lease enforces up to its race window).
 */
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
#include <sys/random.h>

#include "storage/s3_impl.h"
#include "storage/s3_resolve.h"
#include "storage/s3_xml.h"
#include "util/buf.h"
#include "util/meminfo.h"

/* ------------------------------------------------------------------ objects */

static s3_store *impl(store *st) { return st->impl; }

/* The SHA-256 (hex) of `key` under the store prefix, for META_KEY: the prefix is left out,
 * so a store copied under another prefix or bucket still reads. */
static void key_sha_hex(const char *key, char hex[SHA256_HEX_LEN + 1]) {
    sha256_digest d;
    sha256(key, strlen(key), &d);
    sha256_hex(&d, hex);
}

/* Whether an answer for `key` carries another object's key hash (0: it is the object, or
 * it carries none: written before META_KEY). */
static int other_key(const s3_resp *r, const char *key) {
    if (!r->meta_key[0]) return 0;
    char hex[SHA256_HEX_LEN + 1];
    key_sha_hex(key, hex);
    return strcasecmp(hex, r->meta_key) != 0;
}

/* PUT of one body (no multipart). cond: NULL, "*" (If-None-Match) or an ETag (If-Match). */
static int put_single(store *st, const char *key, const void *data, size_t n, const char *sha_hex,
                      const char *if_none, const char *if_match, s3_resp *r, tdm_err *e) {
    s3_req q = {.method = "PUT", .key = key, .body = data ? data : "", .body_len = n};
    char khex[SHA256_HEX_LEN + 1];
    key_sha_hex(key, khex);
    q.extra[q.nextra++] = (sigv4_header){META_SHA, sha_hex};
    q.extra[q.nextra++] = (sigv4_header){META_KEY, khex};
    if (if_none) q.extra[q.nextra++] = (sigv4_header){"If-None-Match", if_none};
    if (if_match) q.extra[q.nextra++] = (sigv4_header){"If-Match", if_match};
    if (n <= SIGNED_BODY_MAX) q.body_sha_hex = sha_hex; /* the object hash is the payload hash */
    return s3_request(impl(st), &q, r, NULL, NULL, e);
}

typedef struct part_job {
    store *st;
    const char *key, *upload_id;
    const char *data;
    size_t n, part;
    int nparts;
    int next; /* atomic: next part to take */
    char (*etags)[128];
    int rc;
    tdm_err e;
    pthread_mutex_t mu;
} part_job;

static void *part_worker(void *arg) {
    part_job *j = arg;
    for (;;) {
        int i = __atomic_fetch_add(&j->next, 1, __ATOMIC_SEQ_CST);
        if (i >= j->nparts) break;
        pthread_mutex_lock(&j->mu);
        int stop = j->rc;
        pthread_mutex_unlock(&j->mu);
        if (stop) break;
        size_t off = (size_t)i * j->part, len = j->n - off < j->part ? j->n - off : j->part;
        char query[1200];
        char *uid = sigv4_uri_encode(j->upload_id, 0);
        snprintf(query, sizeof query, "partNumber=%d&uploadId=%s", i + 1, uid ? uid : "");
        free(uid);
        s3_req q = {.method = "PUT", .key = j->key, .query = query, .body = j->data + off,
                    .body_len = len};
        s3_resp r = {0};
        tdm_err e = {0};
        int rc = s3_request(impl(j->st), &q, &r, NULL, NULL, &e);
        if (!rc && r.status / 100 != 2) rc = s3_status_error(j->st, &q, &r, &e);
        if (!rc && !r.etag[0]) rc = err_set(&e, ERR_STORE, "%s: part %d of %s: no ETag in the answer", store_url(j->st), i + 1, j->key);
        if (!rc) snprintf(j->etags[i], 128, "%s", r.etag);
        free(r.body);
        if (rc) {
            pthread_mutex_lock(&j->mu);
            if (!j->rc) j->rc = rc, j->e = e;
            pthread_mutex_unlock(&j->mu);
        }
    }
    return NULL;
}

/* Multipart upload with parallel parts; the conditional header goes on the completion. */
static int put_multipart(store *st, const char *key, const void *data, size_t n,
                         const char *sha_hex, const char *if_none, const char *if_match,
                         s3_resp *out, tdm_err *e) {
    s3_store *s = impl(st);
    s3_req q = {.method = "POST", .key = key, .query = "uploads="};
    char khex[SHA256_HEX_LEN + 1];
    key_sha_hex(key, khex);
    q.extra[q.nextra++] = (sigv4_header){META_SHA, sha_hex};
    q.extra[q.nextra++] = (sigv4_header){META_KEY, khex};
    s3_resp r = {0};
    int rc = s3_request(s, &q, &r, NULL, NULL, e);
    if (!rc && r.status / 100 != 2) rc = s3_status_error(st, &q, &r, e);
    char upload_id[1024];
    if (!rc && !(r.body && s3_xml_first(r.body, r.len, "UploadId", upload_id, sizeof upload_id)))
        rc = err_set(e, ERR_STORE, "%s: no UploadId in the answer to a multipart upload of %s",
                     store_url(st), key);
    free(r.body);
    if (rc) return rc;
    size_t part = s->cfg.part_bytes;
    int nparts = (int)((n + part - 1) / part);
    part_job j = {.st = st, .key = key, .upload_id = upload_id, .data = data, .n = n,
                  .part = part, .nparts = nparts};
    j.etags = calloc((size_t)nparts, sizeof *j.etags);
    pthread_mutex_init(&j.mu, NULL);
    int nthreads = s->cfg.concurrency < nparts ? s->cfg.concurrency : nparts;
    pthread_t tids[64];
    int created[64] = {0};
    if (!j.etags) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (int t = 1; !rc && t < nthreads; t++)
        created[t] = pthread_create(&tids[t], NULL, part_worker, &j) == 0;
    if (!rc) part_worker(&j);
    for (int t = 1; t < nthreads; t++)
        if (created[t]) pthread_join(tids[t], NULL);
    pthread_mutex_destroy(&j.mu);
    if (!rc && j.rc) rc = j.rc, *e = j.e;
    char *uid = sigv4_uri_encode(upload_id, 0);
    char query[1200];
    snprintf(query, sizeof query, "uploadId=%s", uid ? uid : "");
    free(uid);
    if (!rc) {
        /* the completion body grows as it needs: an ETag is the server's text, escaped up to
         * six bytes a character (a fixed estimate of the size overflowed on hostile ones) */
        buf_t xml = {0};
        buf_puts(&xml, "<CompleteMultipartUpload>");
        for (int i = 0; !rc && i < nparts; i++) {
            char esc[sizeof out->etag * 6 + 1];
            if (s3_xml_escape(j.etags[i], esc, sizeof esc))
                rc = err_set(e, ERR_STORE, "%s: part %d of %s came back with an ETag that is not one (the endpoint "
                             "answers uploads wrongly)", store_url(st), i + 1, key);
            else
                buf_printf(&xml, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i + 1, esc);
        }
        buf_puts(&xml, "</CompleteMultipartUpload>");
        if (!rc && xml.oom) rc = err_set(e, ERR_INTERNAL, "out of memory");
        if (!rc) {
            s3_req c = {.method = "POST", .key = key, .query = query, .body = xml.p, .body_len = xml.n};
            if (if_none) c.extra[c.nextra++] = (sigv4_header){"If-None-Match", if_none};
            if (if_match) c.extra[c.nextra++] = (sigv4_header){"If-Match", if_match};
            rc = s3_request(s, &c, out, NULL, NULL, e);
            /* S3 can answer 200 with an <Error> body for a failed completion */
            if (!rc && out->status == 200 && out->body && strstr(out->body, "<Error>")) {
                char code[128] = "";
                s3_xml_first(out->body, out->len, "Code", code, sizeof code);
                out->status = !strcmp(code, "PreconditionFailed") ? 412 : 500;
            }
            if (!rc && out->status / 100 == 2 && out->body)
                s3_xml_first(out->body, out->len, "ETag", out->etag, sizeof out->etag);
        }
        buf_free(&xml);
    }
    if (rc || out->status / 100 != 2) { /* abandon the upload so its parts do not linger */
        s3_req a = {.method = "DELETE", .key = key, .query = query};
        s3_resp ar = {0};
        tdm_err ignore;
        s3_request(s, &a, &ar, NULL, NULL, &ignore);
        free(ar.body);
    }
    free(j.etags);
    return rc;
}

/* Writes an object; the conditional headers as in put_single. */
static int put_object(store *st, const char *key, const void *data, size_t n, const char *if_none,
                      const char *if_match, s3_resp *r, tdm_err *e) {
    sha256_digest d;
    sha256(data, n, &d);
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(&d, hex);
    if (n > impl(st)->cfg.part_bytes)
        return put_multipart(st, key, data, n, hex, if_none, if_match, r, e);
    return put_single(st, key, data, n, hex, if_none, if_match, r, e);
}

/* HEAD: *present 1 (ETag into ver, our SHA-256 metadata into sha_hex when given) or 0. */
static int head_object_meta(store *st, const char *key, int *present, store_version *ver,
                            char *sha_hex, tdm_err *e) {
    s3_req q = {.method = "HEAD", .key = key};
    s3_resp r = {0};
    int rc = s3_request(impl(st), &q, &r, NULL, NULL, e);
    if (!rc) {
        if (r.status == 404) *present = 0;
        else if (r.status / 100 == 2) {
            *present = 1;
            if (ver) snprintf(ver->v, sizeof ver->v, "%s", r.etag);
            if (sha_hex) snprintf(sha_hex, SHA256_HEX_LEN + 1, "%s", r.meta_sha);
        } else rc = s3_status_error(st, &q, &r, e);
    }
    free(r.body);
    return rc;
}

/* store_age: a HEAD's Date less the object's Last-Modified, both the server's clock. */
static int s3_age(store *st, const char *key, double *age_s, tdm_err *e) {
    s3_req q = {.method = "HEAD", .key = key};
    s3_resp r = {0};
    int rc = s3_request(impl(st), &q, &r, NULL, NULL, e);
    if (!rc) {
        time_t now, modified;
        if (r.status == 404) rc = STORE_NOT_FOUND;
        else if (r.status / 100 != 2) rc = s3_status_error(st, &q, &r, e);
        else if (s3_http_time(r.date, &now) || s3_http_time(r.last_modified, &modified)) rc = 1;
        else *age_s = now > modified ? (double)(now - modified) : 0;
    }
    free(r.body);
    return rc;
}

static int head_object(store *st, const char *key, int *present, store_version *ver, tdm_err *e) {
    return head_object_meta(st, key, present, ver, NULL, e);
}

/* After a refused conditional write (412) or a completion that finds its upload gone
 * (404 NoSuchUpload): if an earlier attempt of ours was applied and only its answer was
 * lost, the object now holds exactly our bytes (same SHA-256 metadata). 1 if so, with
 * its ETag in ver. */
static int write_was_ours(store *st, const char *key, const void *data, size_t n,
                          store_version *ver) {
    char want[SHA256_HEX_LEN + 1], have[SHA256_HEX_LEN + 1] = "";
    sha256_digest d;
    sha256(data, n, &d);
    sha256_hex(&d, want);
    int present = 0;
    tdm_err ignore;
    if (head_object_meta(st, key, &present, ver, have, &ignore) || !present) return 0;
    return strcasecmp(want, have) == 0;
}

/* Probes once whether the server honours If-None-Match: a create-only PUT of a new probe
 * key must be accepted (2xx), and the same PUT again refused with 412 (honoured) or
 * accepted (ignored: the lease protocol, docs/running.md). A 501 NotImplemented to either
 * is a server without conditional writes too, and so is a 400 to the first that the same
 * PUT without the condition does not get (the header refused). Any other answer is an error naming the
 * probe key and the status: a probe refused (a 403 from a policy, a 400) said nothing
 * about conditional writes, and was taken for "ignores them". -1 with *e set on an error. */
static int conditional_supported(store *st, tdm_err *e) {
    s3_store *s = impl(st);
    if (s->conditional >= 0) return s->conditional;
    char key[96];
    /* drawn from the kernel: a seed of time and pid is the same for two writers started in
     * one second as PID 1 of their containers, whose probes then met on one key (the
     * second's first PUT a 412: an error now) */
    uint64_t draw[2] = {0, 0};
    if (getrandom(draw, sizeof draw, 0) != (ssize_t)sizeof draw) {
        unsigned seed = (unsigned)(time(NULL) ^ getpid() ^ (uintptr_t)&draw);
        draw[0] = ((uint64_t)rand_r(&seed) << 32) ^ (uint64_t)rand_r(&seed);
        draw[1] = (uint64_t)clock();
    }
    snprintf(key, sizeof key, ".tandem-probe/%016llx%016llx", (unsigned long long)draw[0],
             (unsigned long long)draw[1]);
    static const char *const which[2] = {"first", "second"};
    long status[2] = {0, 0};
    int rc = 0, wrote = 0;
    for (int i = 0; !rc && i < 2; i++) {
        s3_resp r = {0};
        rc = put_object(st, key, "probe", 5, "*", NULL, &r, e);
        status[i] = r.status;
        /* the first PUT's answer lost and its retry refused: our own write (as s3_put) */
        if (!rc && i == 0 && r.uncertain && r.status == 412 && write_was_ours(st, key, "probe", 5, NULL))
            status[i] = 200;
        wrote |= !rc && status[i] / 100 == 2;
        if (rc) {
            err_append(e, " (the %s PUT of the conditional-write probe %s)", which[i], key);
        } else if (status[i] == 501) {
            free(r.body);
            break; /* no conditional writes: the lease protocol */
        } else if (i == 0 && status[i] == 400) {
            /* a 400 may be the conditional header refused, or any bad request: the same PUT
             * without it tells them apart (accepted: no conditional writes here) */
            s3_resp pr = {0};
            tdm_err pe;
            if (put_object(st, key, "probe", 5, NULL, NULL, &pr, &pe) == 0 && pr.status / 100 == 2) {
                wrote = 1, status[0] = 400, status[1] = 400;
                free(pr.body);
                free(r.body);
                break;
            }
            free(pr.body);
            s3_req q = {.method = "PUT", .key = key};
            rc = s3_status_error(st, &q, &r, e);
            err_append(e, ": the first create-only PUT (If-None-Match: *) of the conditional-write probe was "
                       "refused, and the same PUT without the condition too, so whether the endpoint honours "
                       "conditional writes is unknown; tandem writes and deletes %s once per store to learn it: "
                       "allow PUT and DELETE under the store's prefix, or check the endpoint (AWS_ENDPOINT_URL)",
                       key);
        } else if (status[i] / 100 != 2 && (i == 0 || status[i] != 412)) {
            s3_req q = {.method = "PUT", .key = key};
            rc = s3_status_error(st, &q, &r, e);
            err_append(e, ": the %s create-only PUT (If-None-Match: *) of the conditional-write probe was "
                       "refused, so whether the endpoint honours conditional writes is unknown; tandem writes "
                       "and deletes %s once per store to learn it: allow PUT and DELETE under the store's "
                       "prefix, or check the endpoint (AWS_ENDPOINT_URL)", which[i], key);
        }
        free(r.body);
    }
    if (wrote) {
        s3_req d = {.method = "DELETE", .key = key};
        s3_resp dr = {0};
        tdm_err ignore;
        s3_request(s, &d, &dr, NULL, NULL, &ignore);
        free(dr.body);
    }
    if (rc) return -1;
    s->conditional = status[1] == 412;
    if (!s->conditional)
        fprintf(stderr, "tandem: %s %s conditional writes (If-None-Match); using the lease "
                "protocol without server-side compare-and-swap (docs/running.md)\n", store_url(st),
                status[0] == 501 || status[1] == 501 ? "does not implement (HTTP 501)"
                : status[0] == 400 ? "refuses (HTTP 400) the header of" : "ignores");
    return s->conditional;
}

/* A create-only write (If-None-Match: *) refused with 412 while a read-back (HEAD) finds no
 * object there: 1 (0 when the object is there, or the HEAD failed: the 412 stands). */
static int refused_over_nothing(store *st, const char *key) {
    int present = 1;
    tdm_err ignore;
    return head_object(st, key, &present, NULL, &ignore) == 0 && !present;
}

/* The error for a create-only write the endpoint keeps refusing with 412 over no object. */
static int refused_over_nothing_error(store *st, const char *key, tdm_err *e) {
    return err_set(e, ERR_STORE, "%s: PUT %s: the endpoint refused the create-only write (If-None-Match: *) "
                   "with HTTP 412 Precondition Failed twice, as if %s were there, but a read-back (HEAD) "
                   "after each refusal found no object: it does not evaluate conditional writes correctly "
                   "(a gateway or proxy in front of the store?); nothing was written. Check the endpoint "
                   "(AWS_ENDPOINT_URL) and what lies between it and tandem",
                   store_url(st), key, key);
}

/* A write answered 2xx without an ETag, where the next compare-and-swap needs one (the
 * store's versions are ETags; "" means "no object"): the HEAD that asks for it found none. */
static int no_etag_error(store *st, const char *key, const char *what, int present, tdm_err *e) {
    return err_set(e, ERR_STORE, "%s: PUT %s: the endpoint answered the %s without an ETag, and %s: it "
                   "may not support conditional writes (the next compare-and-swap of the object needs its "
                   "ETag). Check the endpoint (AWS_ENDPOINT_URL) and any proxy in front of it (it must pass "
                   "the ETag header on)", store_url(st), key, what,
                   present ? "a HEAD of the object gave none either" : "a HEAD finds no object there");
}

/* One PUT (If-None-Match / If-Match as given) with what both writers need around it: a
 * 412 or 404 to a retried attempt, where a read-back finds our own bytes, is our earlier
 * attempt applied and only its answer lost (r->status 200, that object's ETag in
 * r->etag); a create-only write refused with 412 over no object is written once more
 * (deleted since), and refused again it is an endpoint that answers conditional writes
 * wrongly (the error). 0 with *r as answered (the caller frees r->body), or an error. */
static int put_settled(store *st, const char *key, const void *data, size_t n, const char *if_none,
                       const char *if_match, s3_resp *r, tdm_err *e) {
    for (int round = 0;; round++) {
        memset(r, 0, sizeof *r);
        int rc = put_object(st, key, data, n, if_none, if_match, r, e);
        store_version mine = {{0}};
        if (!rc && r->uncertain && (r->status == 412 || r->status == 404) &&
            write_was_ours(st, key, data, n, &mine)) {
            r->status = 200;
            snprintf(r->etag, sizeof r->etag, "%s", mine.v);
        }
        if (!rc && r->status == 412 && if_none && refused_over_nothing(st, key)) {
            free(r->body);
            r->body = NULL;
            if (round == 0) continue;
            return refused_over_nothing_error(st, key, e);
        }
        return rc;
    }
}

static int s3_put(store *st, const char *key, const void *data, size_t n, int mode, tdm_err *e) {
    const char *if_none = NULL;
    if (mode == STORE_CREATE) {
        int cond = conditional_supported(st, e);
        if (cond < 0) return ERR_STORE;
        if (cond) if_none = "*";
        else {
            int present = 0;
            int rc = head_object(st, key, &present, NULL, e);
            if (rc) return rc;
            if (present) return STORE_EXISTS;
        }
    }
    s3_resp r;
    int rc = put_settled(st, key, data, n, if_none, NULL, &r, e);
    if (!rc && r.status == 412) rc = STORE_EXISTS;
    else if (!rc && r.status / 100 != 2) {
        s3_req q = {.method = "PUT", .key = key};
        rc = s3_status_error(st, &q, &r, e);
    }
    free(r.body);
    return rc;
}

static int s3_put_if(store *st, const char *key, const void *data, size_t n,
                     const store_version *expected, store_version *out, tdm_err *e) {
    int cond = conditional_supported(st, e);
    if (cond < 0) return ERR_STORE;
    if (!cond) { /* checked write: compare the current ETag, then write */
        int present = 0;
        store_version cur = {{0}};
        int rc = head_object(st, key, &present, &cur, e);
        if (rc) return rc;
        if (present ? strcmp(cur.v, expected->v) != 0 : expected->v[0] != '\0')
            return STORE_CONFLICT;
    }
    const char *if_none = cond && !expected->v[0] ? "*" : NULL;
    s3_resp r;
    int rc = put_settled(st, key, data, n, if_none, cond && expected->v[0] ? expected->v : NULL, &r, e);
    if (!rc && r.status == 412) rc = STORE_CONFLICT;
    else if (!rc && r.status / 100 != 2) {
        s3_req q = {.method = "PUT", .key = key};
        rc = s3_status_error(st, &q, &r, e);
    } else if (!rc && out) {
        if (r.etag[0]) snprintf(out->v, sizeof out->v, "%s", r.etag);
        else { /* some servers omit it on completion: ask */
            int present = 0;
            rc = head_object(st, key, &present, out, e);
            /* none there either: an empty version would read as "no object", and the next
             * compare-and-swap on it fail as if another writer had moved the object. Under
             * the lease protocol (no conditional writes) the lease's epoch keeps writers
             * apart and "" compares with "" as before: such an endpoint keeps working */
            if (!rc && cond && (!present || !out->v[0]))
                rc = no_etag_error(st, key, if_none ? "create-only write (If-None-Match: *)" : "conditional write (If-Match)",
                                   present, e);
        }
    }
    free(r.body);
    return rc;
}

typedef struct range_job {
    store *st;
    const char *key;
    char *buf;   /* receives bytes [base, base + total) of the object */
    size_t base, total, part;
    int nparts, next;
    int rc;
    tdm_err e;
    pthread_mutex_t mu;
} range_job;

static void *range_worker(void *arg) {
    range_job *j = arg;
    for (;;) {
        int i = __atomic_fetch_add(&j->next, 1, __ATOMIC_SEQ_CST);
        if (i >= j->nparts) break;
        size_t off = (size_t)i * j->part, len = j->total - off < j->part ? j->total - off : j->part;
        char range[96];
        snprintf(range, sizeof range, "bytes=%zu-%zu", j->base + off, j->base + off + len - 1);
        s3_req q = {.method = "GET", .key = j->key};
        q.extra[q.nextra++] = (sigv4_header){"Range", range};
        s3_resp r = {.into = j->buf + off, .into_cap = len};
        expect_len x = {(long long)len};
        tdm_err e = {0};
        int rc = s3_request(impl(j->st), &q, &r, s3_verify_len, &x, &e);
        if (!rc && r.status != 206) rc = s3_status_error(j->st, &q, &r, &e);
        free(r.body);
        if (rc) {
            pthread_mutex_lock(&j->mu);
            if (!j->rc) j->rc = rc, j->e = e;
            pthread_mutex_unlock(&j->mu);
            break;
        }
    }
    return NULL;
}

/* The object's size from the Content-Range of a 206 answering a GET of its first bytes:
 * "bytes 0-<got-1>/<size>", digits only, size ≥ got and at most S3's largest object
 * (5 TiB). Anything else (another range, "*", a size no store holds) returns -1: an
 * endpoint that says so answers ranged reads wrongly, and believing it would read the
 * wrong bytes or allocate the size it claims. */
static int content_range_total(const char *cr, size_t got, size_t *total) {
    const unsigned long long most = 5ULL << 40;
    if (strncmp(cr, "bytes 0-", 8) != 0 || got == 0) return -1;
    const char *p = cr + 8;
    unsigned long long last = 0, size = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((last = last * 10 + (unsigned)(*p - '0')) > most) return -1;
    if (*p++ != '/' || *p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((size = size * 10 + (unsigned)(*p - '0')) > most) return -1;
    if (*p || last + 1 != got || size < got) return -1;
    *total = (size_t)size;
    return 0;
}

/* One GET of the whole object, or for large objects a first ranged GET (which tells the
 * size and the metadata) and parallel ranged GETs for the rest; the whole is verified. */
static int get_once(store *st, const char *key, const char *expect, void **data, size_t *n,
                    store_version *ver, tdm_err *e) {
    s3_store *s = impl(st);
    size_t part = s->cfg.part_bytes;
    char range[96];
    snprintf(range, sizeof range, "bytes=0-%zu", part - 1);
    s3_req q = {.method = "GET", .key = key};
    q.extra[q.nextra++] = (sigv4_header){"Range", range};
    s3_resp r = {0};
    int rc = s3_request(s, &q, &r, s3_verify_len, NULL, e);
    if (rc) return rc;
    if (r.status == 404) {
        free(r.body);
        return STORE_NOT_FOUND;
    }
    if (r.status == 416) { /* an empty object: no byte 0 */
        free(r.body);
        s3_req whole = {.method = "GET", .key = key};
        s3_resp w = {0};
        rc = s3_request(s, &whole, &w, s3_verify_whole, (void *)expect, e);
        if (!rc && w.status == 200 && other_key(&w, key)) {
            free(w.body);
            return -101; /* another object's answer: read again */
        }
        if (!rc && w.status == 404) rc = STORE_NOT_FOUND;
        else if (!rc && w.status != 200) rc = s3_status_error(st, &whole, &w, e);
        if (!rc) {
            *data = w.body ? w.body : calloc(1, 1);
            *n = w.len;
            if (ver) snprintf(ver->v, sizeof ver->v, "%s", w.etag);
            return 0;
        }
        free(w.body);
        return rc;
    }
    if (r.status != 200 && r.status != 206) {
        rc = s3_status_error(st, &q, &r, e);
        free(r.body);
        return rc;
    }
    size_t total = r.len;
    if (r.status == 206 && content_range_total(r.content_range, r.len, &total)) {
        char shown[sizeof r.content_range]; /* the endpoint's text: printable, no secret it echoes */
        snprintf(shown, sizeof shown, "%s", r.content_range);
        pthread_mutex_lock(&s->creds_mu);
        s3_config_redact(&s->cfg, NULL, shown, sizeof shown);
        pthread_mutex_unlock(&s->creds_mu);
        free(r.body);
        return err_set(e, ERR_STORE, "%s: %s: a GET of its first %zu bytes came back as %zu bytes with "
                       "Content-Range '%s', not 'bytes 0-%zu/SIZE' with SIZE at most 5 TiB: the "
                       "endpoint answers ranged reads wrongly (check the endpoint or a proxy in "
                       "front of it)", store_url(st), key, part, r.len, shown, r.len ? r.len - 1 : 0);
    }
    /* the whole object is read into memory: a size past what this process may allocate
     * (an endpoint claiming terabytes, or a manifest too large for this machine) is said
     * before the allocation, which overcommit may grant and the OOM killer answer */
    const char *src = NULL;
    double avail = total > r.len ? mem_available(&src) : 0; /* only for a read in parts */
    if (avail > 0 && (double)total > avail) {
        free(r.body);
        return err_set(e, ERR_STORE, "%s: %s: the endpoint gives its size as %zu bytes, more than this "
                       "process may allocate (%.0f MiB, %s): a store object tandem wrote is never that "
                       "large on a machine that wrote it; check the endpoint, or read the store from a "
                       "machine with more memory", store_url(st), key, total, avail / 1048576.0,
                       src ? src : "?");
    }
    s3_resp whole = r;
    if (total > r.len) {
        char *buf = malloc(total);
        if (!buf) {
            free(r.body);
            return err_set(e, ERR_INTERNAL, "out of memory for %s (%zu bytes)", key, total);
        }
        memcpy(buf, r.body, r.len);
        free(r.body);
        range_job j = {.st = st, .key = key, .buf = buf + r.len, .base = r.len,
                       .total = total - r.len, .part = part};
        j.nparts = (int)((j.total + part - 1) / part);
        pthread_mutex_init(&j.mu, NULL);
        int nthreads = s->cfg.concurrency < j.nparts ? s->cfg.concurrency : j.nparts;
        pthread_t tids[64];
        int created[64] = {0};
        for (int t = 1; t < nthreads; t++) created[t] = pthread_create(&tids[t], NULL, range_worker, &j) == 0;
        range_worker(&j);
        for (int t = 1; t < nthreads; t++)
            if (created[t]) pthread_join(tids[t], NULL);
        pthread_mutex_destroy(&j.mu);
        if (j.rc) {
            free(buf);
            *e = j.e;
            return j.rc;
        }
        whole.body = buf;
        whole.len = total;
    }
    whole.content_length = (long long)total;
    /* another object's answer (its bytes and its headers, which verify as themselves) is
     * read again, never judged as this object: a proxy mixing up keys once made repair
     * set every state aside */
    if (other_key(&whole, key)) {
        free(whole.body);
        return -101; /* another object's answer: the caller reads again */
    }
    int v = s3_verify_whole(&whole, (void *)expect);
    if (v) {
        free(whole.body);
        return v == -2 ? STORE_CORRUPT : -100; /* -100: the caller retries the whole read */
    }
    *data = whole.body ? whole.body : calloc(1, 1);
    *n = total;
    if (ver) snprintf(ver->v, sizeof ver->v, "%s", whole.etag);
    return 0;
}

/* A read checked against the object's own SHA-256 metadata, or `expect` when given; a
 * failed check is retried (a transfer error) until the attempts run out. */
static int get_checked(store *st, const char *key, const char *expect, void **data, size_t *n,
                       store_version *ver, tdm_err *e) {
    s3_store *s = impl(st);
    int others = 0, tries = 0;
    for (int a = 0; a < s->cfg.retries; a++, tries++) {
        if (a > 0) s3_backoff(a);
        int rc = get_once(st, key, expect, data, n, ver, e);
        if (rc != -100 && rc != -101) return rc;
        others += rc == -101;
        __atomic_add_fetch(&s->retries, 1, __ATOMIC_RELAXED);
    }
    /* every answer another key's object, whose own hash verified: most often one copied
     * within the store (aws s3 cp/mv between s3:// keys keeps tandem's metadata, which
     * names the source), not damage in transit (a hunt moving stores: the message blamed
     * the content hash and named no way on) */
    if (expect) return STORE_CORRUPT; /* a blob: its content is its name, damage either way */
    if (others == tries && tries > 0)
        return err_set(e, ERR_STORE, "%s: %s: every answer was an object whose tandem metadata names another "
                       "key: a copy made within the store (aws s3 cp or mv between s3:// keys keeps the source's "
                       "x-amz-meta-tandem-* headers) or an endpoint answering with other keys' objects. To use the "
                       "copy, write it again without that metadata (through a local file, or aws s3 cp with "
                       "--metadata-directive REPLACE), or delete it; then check with tandem verify",
                       store_url(st), key);
    return err_set(e, ERR_STORE, "%s: %s: every read failed verification against its content "
                   "hash (corrupted in transit or in the store)", store_url(st), key);
}

static int s3_get(store *st, const char *key, void **data, size_t *n, store_version *ver,
                  tdm_err *e) {
    int rc = get_checked(st, key, NULL, data, n, ver, e);
    if (!rc && ver && !ver->v[0] && impl(st)->conditional != 0) { /* lease protocol: as s3_put_if */
        /* a version asked for is one to compare-and-swap on: "" would read as "no object",
         * and the swap fail as if another writer had moved it */
        free(*data);
        *data = NULL;
        return err_set(e, ERR_STORE, "%s: GET %s: the endpoint answered without an ETag: it may not support "
                       "conditional writes (the next compare-and-swap of the object needs its ETag). Check the "
                       "endpoint (AWS_ENDPOINT_URL) and any proxy in front of it (it must pass the ETag header "
                       "on)", store_url(st), key);
    }
    return rc;
}

static int s3_get_verified(store *st, const char *key, const sha256_digest *expect, void **data,
                           size_t *n, tdm_err *e) {
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(expect, hex);
    return get_checked(st, key, hex, data, n, NULL, e);
}

static int s3_exists(store *st, const char *key, int *exists, tdm_err *e) {
    return head_object(st, key, exists, NULL, e);
}

typedef struct list_ctx {
    store_list *out;
    size_t strip; /* length of "prefix/" to remove */
    const char *asked; /* the full prefix asked for: every key must start with it */
    char *last;        /* the previous key of the listing (malloc'd), or NULL */
    size_t page_keys;  /* keys on the current page */
    int oom;
    int bad;           /* 1 a key outside the prefix, 2 not after the one before */
} list_ctx;

/* One key of a listing page. S3 lists the keys under the prefix asked, each once, in
 * ascending byte order across pages: a key outside the prefix (stripping it would read past
 * the key, or make another key of it), a key twice or out of order (a duplicate listed index
 * reads as a missing record, and repair would roll a sound run back) is an endpoint
 * answering listings wrongly, refused whole. */
static int on_key(void *ctx, const char *text) {
    list_ctx *l = ctx;
    l->page_keys++;
    if (strncmp(text, l->asked, strlen(l->asked)) != 0 || strlen(text) < l->strip) {
        l->bad = 1;
        return 1;
    }
    if (l->last && strcmp(text, l->last) <= 0) {
        l->bad = 2;
        return 1;
    }
    free(l->last);
    if (!(l->last = strdup(text))) {
        l->oom = 1;
        return 1;
    }
    const char *k = text + l->strip;
    if (!store_key_valid(k)) return 0; /* foreign objects under the prefix */
    if (store_list_append(l->out, k)) {
        l->oom = 1;
        return 1;
    }
    return 0;
}

/* Pages in a row without a key that a listing follows before it calls the server's answers
 * a loop: S3 fills every page but the last (or says so with IsTruncated false). */
#define S3_LIST_EMPTY_PAGES 1000

/* Whether the continuation token was given before in this listing (digests in *seen, n of
 * them); else records it. -1 when out of memory. A token that comes back would make the
 * listing go round forever, appending the same keys: a server that answers so (a bug, or
 * a hostile endpoint) gets an error instead of a process that never ends. */
static int token_seen(sha256_digest **seen, size_t *n, const char *token) {
    sha256_digest d;
    sha256(token, strlen(token), &d);
    for (size_t i = 0; i < *n; i++)
        if (sha256_equal(&(*seen)[i], &d)) return 1;
    if ((*n & (*n - 1)) == 0) { /* grows at 1, 2, 4, ...: n is a power of two or 0 */
        sha256_digest *g = realloc(*seen, (*n ? 2 * *n : 1) * sizeof *g);
        if (!g) return -1;
        *seen = g;
    }
    (*seen)[(*n)++] = d;
    return 0;
}

/* Keys a listing follows before it calls the server's answers endless: a store holds a
 * few records per episode and a few chunks per state (~10^5 keys in a long run at the
 * default 64 MiB chunks; at checkpoint.chunk_kib's smallest, 4 KiB, three states of a
 * 1B-parameter model hold ~10^7). 2^25 bounds a listing whose keys keep rising, page
 * after page with new tokens (which the token and empty-page checks do not catch), to
 * hours of pages and a bounded memory instead of all there is. TANDEM_TEST_LIST_MAX_KEYS
 * (test-only) lowers it. */
#define S3_LIST_KEYS_MAX ((size_t)1 << 25)

static size_t list_keys_max(void) {
    const char *v = getenv("TANDEM_TEST_LIST_MAX_KEYS");
    long long n = v ? atoll(v) : 0;
    return n > 0 && (size_t)n < S3_LIST_KEYS_MAX ? (size_t)n : S3_LIST_KEYS_MAX;
}

static int s3_list(store *st, const char *prefix, store_list *out, tdm_err *e) {
    s3_store *s = impl(st);
    char full[1400];
    s3_object_key(s, prefix, full, sizeof full);
    if (!*prefix && s->cfg.prefix[0]) snprintf(full, sizeof full, "%s/", s->cfg.prefix);
    char *enc = sigv4_uri_encode(full, 0);
    char token[2048] = "";
    list_ctx l = {.out = out, .strip = s->cfg.prefix[0] ? strlen(s->cfg.prefix) + 1 : 0, .asked = full};
    int rc = enc ? 0 : err_set(e, ERR_INTERNAL, "out of memory");
    sha256_digest *seen = NULL;
    size_t nseen = 0, empty = 0, listed = 0, most = list_keys_max();
    for (int page = 0; !rc; page++) {
        char query[10000]; /* the token (< 2048) and the prefix (< 1024), each byte %XX at most */
        char *tenc = token[0] ? sigv4_uri_encode(token, 0) : NULL;
        /* sorted by name, as the canonical query needs */
        if (tenc)
            snprintf(query, sizeof query, "continuation-token=%s&list-type=2&max-keys=%d&prefix=%s",
                     tenc, s->cfg.list_max, enc);
        else
            snprintf(query, sizeof query, "list-type=2&max-keys=%d&prefix=%s", s->cfg.list_max, enc);
        free(tenc);
        s3_req q = {.method = "GET", .query = query};
        s3_resp r = {0};
        rc = s3_request(s, &q, &r, s3_verify_len, NULL, e);
        if (!rc && r.status != 200) rc = s3_status_error(st, &q, &r, e);
        if (!rc && (!r.body || !strstr(r.body, "ListBucketResult")))
            rc = err_set(e, ERR_STORE, "%s: the listing answer is not a ListBucketResult", store_url(st));
        /* a page cut short (a connection closed mid-body, no Content-Length to tell) would
         * read as a whole one: without IsTruncated, as the listing's last */
        if (!rc && !strstr(r.body, "</ListBucketResult>"))
            rc = err_set(e, ERR_STORE, "%s: a listing page of '%s' ends before </ListBucketResult> (page %d): "
                         "the answer was cut short; check the endpoint or a proxy in front of it",
                         store_url(st), prefix, page + 1);
        l.page_keys = 0;
        if (!rc && s3_xml_each(r.body, r.len, "Key", on_key, &l) != 0)
            rc = l.oom ? err_set(e, ERR_INTERNAL, "out of memory")
                 : l.bad ? err_set(e, ERR_STORE, "%s: the listing of '%s' holds %s (page %d): the endpoint "
                                   "answers listings wrongly; check AWS_ENDPOINT_URL and the server",
                                   store_url(st), prefix, l.bad == 1 ? "a key outside the prefix asked for"
                                                                     : "a key twice, or keys out of order", page + 1)
                 : err_set(e, ERR_STORE, "%s: malformed key in a listing", store_url(st));
        if (!rc && l.page_keys > (size_t)s->cfg.list_max)
            rc = err_set(e, ERR_STORE, "%s: a listing page of '%s' holds %zu keys, more than the %d asked for: the "
                         "endpoint answers listings wrongly; check AWS_ENDPOINT_URL and the server", store_url(st),
                         prefix, l.page_keys, s->cfg.list_max);
        char trunc[16] = "";
        if (!rc && r.body) s3_xml_first(r.body, r.len, "IsTruncated", trunc, sizeof trunc);
        int more = !strcmp(trunc, "true");
        if (!rc && more && !s3_xml_first(r.body, r.len, "NextContinuationToken", token, sizeof token))
            rc = err_set(e, ERR_STORE, "%s: a truncated listing without a continuation token", store_url(st));
        free(r.body);
        if (!more) break;
        int again = rc ? 0 : token_seen(&seen, &nseen, token);
        if (again < 0) rc = err_set(e, ERR_INTERNAL, "out of memory");
        else if (again)
            rc = err_set(e, ERR_STORE, "%s: the listing of '%s' does not advance: page %d hands back a "
                         "continuation token it gave before (the endpoint answers listings wrongly; check "
                         "AWS_ENDPOINT_URL and the server)", store_url(st), prefix, page + 1);
        listed += l.page_keys; /* foreign keys too: they cost pages, if not memory */
        if (!rc && listed > most)
            rc = err_set(e, ERR_STORE, "%s: the listing of '%s' goes on past %zu keys (page %d, still "
                         "truncated), more than any tandem store holds: the endpoint answers listings "
                         "wrongly (check AWS_ENDPOINT_URL and the server), or the prefix holds other data "
                         "(give the run a prefix of its own)", store_url(st), prefix, most, page + 1);
        empty = l.page_keys || page == 0 ? 0 : empty + 1; /* keys tandem skips (foreign) count too */
        if (!rc && empty >= S3_LIST_EMPTY_PAGES)
            rc = err_set(e, ERR_STORE, "%s: the listing of '%s' goes on without keys (%zu truncated pages "
                         "in a row hold none): the endpoint answers listings wrongly; check "
                         "AWS_ENDPOINT_URL and the server", store_url(st), prefix, empty);
    }
    free(seen);
    free(enc);
    free(l.last);
    return rc;
}

static int s3_del(store *st, const char *key, tdm_err *e) {
    s3_req q = {.method = "DELETE", .key = key};
    s3_resp r = {0};
    int rc = s3_request(impl(st), &q, &r, NULL, NULL, e);
    if (!rc && r.status == 404) rc = STORE_NOT_FOUND;
    else if (!rc && r.status / 100 != 2) rc = s3_status_error(st, &q, &r, e);
    free(r.body);
    return rc; /* S3 answers 204 for absent keys too: absence is not always reported */
}

static void s3_close(store *st) {
    s3_store *s = impl(st);
    if (!s) return;
    for (int i = 0; i < s->npool; i++) curl_easy_cleanup(s->pool[i]);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->creds_mu);
    s3_config_wipe(&s->cfg);
    free(s);
}

static double s3_unsettled(store *st, const char *key, int deletes_only) {
    return s3_unsettled_s(st->impl, key, deletes_only);
}

static void s3_lost_writer(store *st, double for_s) { s3_note_unsettled(st->impl, NULL, 0, for_s); }
static void s3_late_delete(store *st, const char *key, double for_s) { s3_note_unsettled(st->impl, key, 1, for_s); }
static double s3_late_deletes(store *st, char *out, size_t cap) { return s3_unsettled_delete_keys(st->impl, out, cap); }

static double s3_settle_window(store *st) { return s3_settle_window_s(st->impl); }

static const store_backend s3_backend = {
    .scheme = "s3",
    .put = s3_put,
    .put_if = s3_put_if,
    .get = s3_get,
    .get_verified = s3_get_verified,
    .exists = s3_exists,
    .age = s3_age,
    .list = s3_list,
    .del = s3_del,
    .unsettled = s3_unsettled,
    .lost_writer = s3_lost_writer,
    .late_delete = s3_late_delete,
    .late_deletes = s3_late_deletes,
    .settle_window = s3_settle_window,
    .close = s3_close,
};

store *s3_store_open(const char *url, int must_exist, int *absent, tdm_err *e) {
    s3_curl_init();
    store *st = calloc(1, sizeof *st);
    s3_store *s = calloc(1, sizeof *s);
    char *u = strdup(url);
    if (!st || !s || !u) {
        free(st);
        free(s);
        free(u);
        err_set(e, ERR_INTERNAL, "out of memory");
        return NULL;
    }
    s->lost_del_t = s->lost_all_t = -INFINITY; /* none: a time may be negative on a young node */
    if (s3_config_resolve(url, &s->cfg, e)) {
        s3_config_wipe(&s->cfg);
        free(st);
        free(s);
        free(u);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->creds_mu, NULL);
    s->conditional = -1;
    st->b = &s3_backend;
    st->url = u;
    st->impl = s;
    /* reachability and credentials now, so a bad store fails at start, not at a commit;
     * for an existing store, the same request asks whether anything is under the prefix */
    char query[4096] = "list-type=2&max-keys=1"; /* a prefix of S3_PREFIX_MAX bytes, each %XX */
    if (must_exist && s->cfg.prefix[0]) {
        char full[1100];
        snprintf(full, sizeof full, "%s/", s->cfg.prefix);
        char *enc = sigv4_uri_encode(full, 0);
        if (enc) snprintf(query, sizeof query, "list-type=2&max-keys=1&prefix=%s", enc);
        free(enc);
    }
    s3_req q = {.method = "GET", .query = query};
    s3_resp r = {0};
    int rc = s3_request(s, &q, &r, NULL, NULL, e);
    if (!rc && r.status != 200) rc = s3_status_error(st, &q, &r, e);
    /* a 200 that is not a listing (an <Error> body, HTML from a proxy) is not "no store" */
    if (!rc && (!r.body || !strstr(r.body, "ListBucketResult")))
        rc = err_set(e, ERR_STORE, "the listing answer is not a ListBucketResult (the endpoint answers wrongly; "
                     "check AWS_ENDPOINT_URL and the server)");
    if (!rc && must_exist) {
        char key[1100] = ""; /* S3 keys are at most 1024 bytes */
        if (!r.body || !s3_xml_first(r.body, r.len, "Key", key, sizeof key)) {
            if (absent) *absent = 1;
            rc = err_set(e, ERR_STORE, "no store at %s", url);
        }
    }
    free(r.body);
    if (rc) {
        if (!absent || !*absent) err_prefix(e, "cannot use store %s: ", url);
        store_close(st);
        return NULL;
    }
    return st;
}

void s3_store_stats(store *st, long *requests, long *retries) {
    s3_store *s = impl(st);
    *requests = __atomic_load_n(&s->requests, __ATOMIC_RELAXED);
    *retries = __atomic_load_n(&s->retries, __ATOMIC_RELAXED);
}
