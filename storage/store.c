/* store.c — the store interface's calls, key rules and list helpers shared by the
 * backends. Opening (which backend a URL names) is storage/open.c. */
#include "storage/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/store_impl.h"

int store_key_valid(const char *key) {
    if (!key || !*key || strlen(key) > STORE_KEY_MAX || key[0] == '/') return 0;
    const char *seg = key;
    for (const char *p = key;; p++) {
        if (*p == '/' || *p == '\0') {
            size_t len = (size_t)(p - seg);
            if (len == 0) return 0; /* empty segment: "a//b" or trailing '/' */
            if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
                return 0;
            if (*p == '\0') return 1;
            seg = p + 1;
            continue;
        }
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
}

void store_close(store *s) {
    if (!s) return;
    store_settle_own_deletes(s, "tandem");
    s->b->close(s);
    free(s->url);
    free(s);
}

const char *store_url(const store *s) { return s->url; }

static int (*g_stop_pending)(void); /* store_set_stop_check */

/* store_wait_delete_settled's round for a write: gives up once a stop's deadline passed */
static int past_deadline(void *ctx, double left) {
    (void)ctx;
    (void)left;
    return store_clock_s() >= store_deadline();
}

static int bad_key(store *s, const char *key, tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "%s: invalid object key '%s'", s->url, key ? key : "(null)");
}

/* A write through a read-only handle is a bug in the command that opened it. */
static int read_only(store *s, const char *key, tdm_err *e) {
    return err_set(e, ERR_INTERNAL, "%s was opened read-only: refusing to write or delete %s",
                   s->url, key ? key : "(null)");
}

/* An object past STORE_OBJECT_MAX would be read back as damage (store.h): never written. */
static int too_large(store *s, const char *key, size_t n, tdm_err *e) {
    return err_set(e, ERR_STORE, "%s: %s would be %zu bytes, more than a store object may hold (%llu): for a "
                   "state manifest (a model in very many chunks), raise checkpoint.chunk_kib", s->url, key, n,
                   (unsigned long long)STORE_OBJECT_MAX);
}

/* A write of key waits until no DELETE of it that this process gave up on can land
 * (S3: a request held past TANDEM_S3_TIMEOUT, retried, the first one applied later), so
 * that such a DELETE never removes what is written now: a state manifest or α record a
 * run set aside (quarantine, supersede) and then wrote again, found by a race hunt on S3
 * (a run that exited 0 failed verify after the late DELETE landed). A stop's deadline
 * (store_deadline) ends the wait: the write is given up, an error naming the key. */
static int outlast_own_delete(store *s, const char *key, tdm_err *e) {
    if (store_outlast_delete(s, key, past_deadline, NULL) == 0) return 0;
    store_note_deadline();
    return err_set(e, ERR_STORE, "%s/%s: not written: a DELETE of it given up on could still land when the stop's "
                   "deadline came", s->url, key);
}

int store_put(store *s, const char *key, const void *data, size_t n, int mode, tdm_err *e) {
    int rc = outlast_own_delete(s, key, e);
    return rc ? rc : store_put_now(s, key, data, n, mode, e);
}

int store_put_now(store *s, const char *key, const void *data, size_t n, int mode, tdm_err *e) {
    if (!store_key_valid(key)) return bad_key(s, key, e);
    if (s->read_only) return read_only(s, key, e);
    if ((uint64_t)n > STORE_OBJECT_MAX) return too_large(s, key, n, e);
    return s->b->put(s, key, data, n, mode, e);
}

int store_put_if(store *s, const char *key, const void *data, size_t n,
                 const store_version *expected, store_version *out, tdm_err *e) {
    if (!store_key_valid(key)) return bad_key(s, key, e);
    if (s->read_only) return read_only(s, key, e);
    if ((uint64_t)n > STORE_OBJECT_MAX) return too_large(s, key, n, e);
    int rc = outlast_own_delete(s, key, e);
    return rc ? rc : s->b->put_if(s, key, data, n, expected, out, e);
}

int store_get(store *s, const char *key, void **data, size_t *n, store_version *ver, tdm_err *e) {
    if (!store_key_valid(key)) return bad_key(s, key, e);
    return s->b->get(s, key, data, n, ver, e);
}

int store_get_verified(store *s, const char *key, const sha256_digest *expect, void **data,
                       size_t *n, tdm_err *e) {
    if (!store_key_valid(key)) return bad_key(s, key, e);
    if (s->b->get_verified) return s->b->get_verified(s, key, expect, data, n, e);
    int rc = s->b->get(s, key, data, n, NULL, e);
    if (rc) return rc;
    sha256_digest d;
    sha256(*data, *n, &d);
    if (sha256_equal(&d, expect)) return 0;
    free(*data);
    *data = NULL;
    *n = 0;
    return STORE_CORRUPT;
}

int store_exists(store *s, const char *key, int *exists, tdm_err *e) {
    if (!store_key_valid(key)) return bad_key(s, key, e);
    return s->b->exists(s, key, exists, e);
}

int store_age(store *s, const char *key, double *age_s, tdm_err *e) {
    if (!store_key_valid(key)) return bad_key(s, key, e);
    *age_s = 0;
    return s->b->age ? s->b->age(s, key, age_s, e) : 1;
}

int store_list_prefix(store *s, const char *prefix, store_list *out, tdm_err *e) {
    out->keys = NULL;
    out->n = 0;
    int r = s->b->list(s, prefix ? prefix : "", out, e);
    if (r) store_list_free(out);
    else store_list_sort(out);
    return r;
}

int store_delete(store *s, const char *key, tdm_err *e) {
    if (!store_key_valid(key)) return bad_key(s, key, e);
    if (s->read_only) return read_only(s, key, e);
    return s->b->del(s, key, e);
}

int store_write_settled(store *s, const char *key) {
    return s->b->unsettled ? s->b->unsettled(s, key, 0) <= 0 : 1;
}

double store_unsettled_s(store *s) { return s->b->unsettled ? s->b->unsettled(s, NULL, 0) : 0; }

int store_obstacle(store *s, const char *key) { return s->b->obstacle ? s->b->obstacle(s, key) : 0; }

double store_settle_window_s(store *s) { return s->b->settle_window ? s->b->settle_window(s) : 0; }

void store_note_lost_writer(store *s, double for_s) {
    if (s->b->lost_writer) s->b->lost_writer(s, for_s);
}

double store_unsettled_delete_keys(store *s, char *out, size_t cap) {
    if (cap) out[0] = '\0';
    return s->b->late_deletes ? s->b->late_deletes(s, out, cap) : 0;
}

void store_note_late_delete(store *s, const char *key, double for_s) {
    if (s->b->late_delete && for_s > 0) s->b->late_delete(s, key, for_s);
}

double store_delete_unsettled_s(store *s, const char *key) {
    return s->b->unsettled ? s->b->unsettled(s, key, 1) : 0;
}

/* Seconds until no DELETE of key (NULL: any) can land: mode 1 any, 2 this process's own
 * (not those another writer's released lease passed on: they are its to have waited for,
 * and this process passes them on in turn). */
static double deletes_unsettled(store *s, const char *key, int mode) {
    return s->b->unsettled ? s->b->unsettled(s, key, mode) : 0;
}

static int wait_deletes(store *s, const char *key, int mode, int (*each_round)(void *ctx, double left), void *ctx) {
    for (double left = deletes_unsettled(s, key, mode); left > 0; left = deletes_unsettled(s, key, mode)) {
        int rc = each_round ? each_round(ctx, left) : 0;
        if (rc) return rc;
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int store_wait_delete_settled(store *s, const char *key, int (*each_round)(void *ctx, double left), void *ctx) {
    return wait_deletes(s, key, 1, each_round, ctx);
}

int store_outlast_delete(store *s, const char *key, int (*each_round)(void *ctx, double left), void *ctx) {
    double left = store_delete_unsettled_s(s, key);
    if (left <= 0) return 0;
    fprintf(stderr, "tandem: %s/%s: a DELETE of it given up on may still land; waiting until it cannot "
            "(%.0f s), then writing it\n", s->url, key, left);
    return store_wait_delete_settled(s, key, each_round, ctx);
}

/* store_settle_own_deletes' round, and its test before it begins: a stop is pending */
static int stop_pending(void *ctx, double left) {
    (void)ctx;
    (void)left;
    return (g_stop_pending && g_stop_pending()) || isfinite(store_deadline());
}

void store_settle_own_deletes(store *s, const char *who) {
    if (s->read_only || stop_pending(NULL, 0)) return;
    /* this process's own: a previous writer's (its lease's late_deletes) are passed on in
     * this one's lease, not waited for here (a short resume waited them out: review) */
    double left = deletes_unsettled(s, NULL, 2);
    if (left <= 0) return;
    fprintf(stderr, "%s: %s: a DELETE given up on may still land for %.0f s; waiting until it cannot, so that it "
            "removes nothing written after this\n", who, s->url, left);
    if (wait_deletes(s, NULL, 2, stop_pending, NULL))
        fprintf(stderr, "%s: %s: stopped waiting (a stop): a DELETE given up on may still land\n", who, s->url);
}

int store_sweep_temporaries(store *s, double min_age_s, size_t *n, uint64_t *bytes, tdm_err *e) {
    *n = 0;
    *bytes = 0;
    if (!s->b->sweep) return 0;
    if (s->read_only) return read_only(s, ".tmp-*", e);
    return s->b->sweep(s, min_age_s, n, bytes, e);
}

void store_list_free(store_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->keys[i]);
    free(l->keys);
    l->keys = NULL;
    l->n = 0;
}

int store_list_append(store_list *l, const char *key) {
    /* capacity is 16, then doubles whenever n reaches a power of two ≥ 16 */
    if (l->n == 0 || (l->n >= 16 && (l->n & (l->n - 1)) == 0)) {
        size_t cap = l->n ? l->n * 2 : 16;
        char **k = realloc(l->keys, cap * sizeof *k);
        if (!k) return -1;
        l->keys = k;
    }
    if (!(l->keys[l->n] = strdup(key))) return -1;
    l->n++;
    return 0;
}

static int cmp_keys(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void store_list_sort(store_list *l) {
    if (l->n > 1) qsort(l->keys, l->n, sizeof *l->keys, cmp_keys);
}

static store_deadline_fn g_deadline;

void store_set_deadline(store_deadline_fn fn) { g_deadline = fn; }

void store_set_stop_check(int (*pending)(void)) { g_stop_pending = pending; }
int store_stop_pending(void) { return g_stop_pending && g_stop_pending(); }

double store_deadline(void) { return g_deadline ? g_deadline() : INFINITY; }

double store_clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int g_gave_up; /* set by request threads, read after they end */

void store_note_deadline(void) { __atomic_store_n(&g_gave_up, 1, __ATOMIC_RELAXED); }

int store_gave_up_at_deadline(void) { return __atomic_load_n(&g_gave_up, __ATOMIC_RELAXED); }
