/* ckpt.c — commit, verified load, α records and the lease; see ckpt.h. */
#include "runner/ckpt.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner/retain.h"
#include "storage/sha256.h"
#include "util/testhook.h"

static const char *const TENSOR_NAMES[CKPT_TENSORS] = {"params", "adam_m", "adam_v"};

struct ckpt {
    store *st;
    const model_layout *lay;
    uint64_t chunk_bytes;
    float *host[CKPT_TENSORS];
    /* the lease and HEAD as this writer last saw them */
    uint64_t epoch;
    uint64_t commits; /* the run's full commits so far, as HEAD counts them */
    store_version lease_ver, head_ver;
    char host_name[REC_NAME_MAX];
    uint64_t attempt;
    /* chunks of the last committed or loaded state: known to be stored intact */
    sha256_digest *known;
    size_t nknown;
    /* the writer thread and its one-slot queue */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending, quit;
    int result; /* of the last background write */
    tdm_err result_err;
    rec_state snap; /* scalars of the state being written */
    double last_time;
    uint64_t last_seq;
    /* the config generation this writer computes under and where the newest change took
     * effect (ckpt_set_generation); legacy: the run began before states and α records
     * carried a generation and a self-digest, so this writer writes none either */
    uint64_t gen, change_seq;
    int legacy;
    long keep; /* retention after each commit (ckpt_set_retention); 0 = keep all */
    /* throughput of this writer's last completed commit (bytes it wrote over the seconds
     * the commit took, snapshot to HEAD), for ckpt_commit_estimate; 0 before any */
    double rate;
    atomic_int cancel; /* ckpt_cancel: the commit in flight stops before its next object */
    double commit_started; /* monotonic time the pending commit began (0: none pending) */
    /* the state the last ckpt_load chose, and whether HEAD names it as it is; head_note
     * says what was wrong with HEAD when that is news (empty when HEAD merely lags behind
     * a state whose commit was cut off before HEAD moved) */
    int loaded, head_current;
    uint64_t loaded_seq;
    char loaded_key[64];
    sha256_digest loaded_sha;
    char head_note[REC_KEY_MAX + 96];
    /* states the last load found unusable although their manifests decode (a chunk
     * missing or corrupt, another layout): not evidence for a replay that reaches them */
    uint64_t *rejected;
    size_t nrejected;
    /* streaming (ckpt_open_stream): no host copy of the state; each chunk crosses between
     * the backend's tensors and the store on its own, through a chunk-sized buffer per I/O
     * thread. dev_mu: one transfer at a time (a backend's stream is not shared between
     * threads) */
    int stream;
    const model_ops *ops;
    model_ctx *ctx;
    float *dev[CKPT_TENSORS];
    pthread_mutex_t dev_mu;
    /* ckpt_set_stop_check: asked before each chunk of a streamed commit */
    int (*stop_fn)(void *arg, double seconds_left);
    void *stop_arg;
    atomic_ullong done_bytes; /* of the commit in flight */
    atomic_int given_up;      /* the stop check gave the commit in flight up */
};

static double now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ckpt_test_hook(const char *label) {
    if (testhook_hit("TANDEM_TEST_KILL_AT", label)) raise(SIGKILL);
}

/* TANDEM_TEST_STOP_AT=label:n freezes the process (SIGSTOP) at the n-th passage of
 * `label`: a writer stopped between its lease check and its write, for a test to take the
 * run over meanwhile and then let it go (SIGCONT). */
static void stop_hook(const char *label) {
    if (testhook_hit("TANDEM_TEST_STOP_AT", label)) raise(SIGSTOP);
}

/* ------------------------------------------------------------------ open / close */

static void *writer_main(void *arg);

/* What ckpt_open and ckpt_open_stream share: the struct, the lease fields, the locks. */
static ckpt *open_common(store *st, const model_layout *lay, uint64_t chunk_bytes, tdm_err *e) {
    ckpt *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(e, ERR_INTERNAL, "out of memory");
        return NULL;
    }
    c->st = st;
    c->lay = lay;
    c->chunk_bytes = chunk_bytes / 4 * 4;
    if (c->chunk_bytes < 4) c->chunk_bytes = 4;
    c->last_seq = UINT64_MAX;
    c->last_time = now_mono();
    if (gethostname(c->host_name, sizeof c->host_name) != 0) snprintf(c->host_name, sizeof c->host_name, "unknown");
    c->host_name[sizeof c->host_name - 1] = '\0';
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->dev_mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}

static void free_common(ckpt *c) {
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->dev_mu);
    pthread_cond_destroy(&c->cv);
    for (int t = 0; t < CKPT_TENSORS; t++) free(c->host[t]);
    free(c->known);
    free(c->rejected);
    free(c);
}

ckpt *ckpt_open(store *st, const model_layout *lay, uint64_t chunk_bytes, tdm_err *e) {
    ckpt *c = open_common(st, lay, chunk_bytes, e);
    if (!c || !lay) return c; /* the lease alone (tandem repair): no buffers, no writer thread */
    for (int t = 0; t < CKPT_TENSORS; t++) {
        if (!(c->host[t] = malloc(lay->numel * sizeof(float)))) {
            err_set(e, ERR_INTERNAL, "out of memory for checkpoint buffers (3 x %zu parameters); "
                    "checkpoint.snapshot: stream commits without them", lay->numel);
            free_common(c);
            return NULL;
        }
        /* Touch every page now: a snapshot must cost a copy, not page faults. (A plain
         * memset to 0 after malloc may be turned into calloc, which touches nothing.) */
        volatile char *p = (volatile char *)c->host[t];
        for (size_t b = 0; b < lay->numel * sizeof(float); b += 4096) p[b] = 0;
    }
    if (pthread_create(&c->thread, NULL, writer_main, c) != 0) {
        err_set(e, ERR_INTERNAL, "cannot start the checkpoint writer thread");
        free_common(c);
        return NULL;
    }
    c->thread_started = 1;
    return c;
}

ckpt *ckpt_open_stream(store *st, const model_layout *lay, uint64_t chunk_bytes,
                       const model_ops *ops, model_ctx *ctx, float *const dev[CKPT_TENSORS],
                       tdm_err *e) {
    ckpt *c = open_common(st, lay, chunk_bytes, e);
    if (!c) return NULL;
    c->stream = 1;
    c->ops = ops;
    c->ctx = ctx;
    for (int t = 0; t < CKPT_TENSORS; t++) c->dev[t] = dev[t];
    return c;
}

int ckpt_streaming(const ckpt *c) { return c->stream; }

void ckpt_set_stop_check(ckpt *c, int (*stop)(void *arg, double seconds_left), void *arg) {
    c->stop_fn = stop;
    c->stop_arg = arg;
}

/* Streaming: whether the stop check wants the commit in flight given up, from the rest of
 * its bytes at the throughput it has had so far (before its first chunk: the last
 * commit's, or the unmeasured guess). Sets cancel, so that every I/O thread stops. */
static int stream_should_stop(ckpt *c) {
    if (!c->stream || !c->stop_fn) return 0;
    double total = (double)CKPT_TENSORS * (double)c->lay->numel * 4.0;
    double done = (double)atomic_load(&c->done_bytes);
    double spent = now_mono() - c->commit_started;
    double rate = done > 0 && spent > 0 ? done / spent : c->rate > 0 ? c->rate : CKPT_UNMEASURED_RATE;
    if (!c->stop_fn(c->stop_arg, (total - done) / rate)) return 0;
    atomic_store(&c->given_up, 1);
    atomic_store(&c->cancel, 1);
    return 1;
}

void ckpt_close(ckpt *c) {
    if (!c) return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->mu);
        c->quit = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    rec_state_free(&c->snap);
    free_common(c);
}

float *ckpt_host(ckpt *c, int tensor) { return c->host[tensor]; }
uint64_t ckpt_epoch(const ckpt *c) { return c->epoch; }
double ckpt_last_commit_time(const ckpt *c) {
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    double t = c->last_time;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
    return t;
}

uint64_t ckpt_last_commit_seq(const ckpt *c) {
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    uint64_t s = c->last_seq;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
    return s;
}

/* ------------------------------------------------------------------ generations */

void ckpt_set_retention(ckpt *c, long keep) { c->keep = keep; }

void ckpt_set_generation(ckpt *c, uint64_t gen, uint64_t change_seq) {
    c->gen = gen;
    c->change_seq = change_seq;
}

/* Whether an object computed under generation `gen` at run position `seq` belongs to the
 * run as it stands: the current generation, or an older one before the newest change
 * took effect. Anything else was written by a writer that was fenced out or whose config
 * was superseded (a stale writer still running, typically): never part of the run. */
int ckpt_gen_belongs(int has_gen, uint64_t gen, uint64_t seq, uint64_t cur, uint64_t change_seq) {
    if (!has_gen) return 1; /* written before generations existed */
    if (gen == cur) return 1;
    return gen < cur && seq <= change_seq;
}

static int gen_belongs(const ckpt *c, int has_gen, uint64_t gen, uint64_t seq) {
    return ckpt_gen_belongs(has_gen, gen, seq, c->gen, c->change_seq);
}

/* Keeps a copy of an object that cannot be part of the run under
 * quarantine/<epoch>/<key> (this writer's epoch: unique per writer life), says so, and
 * leaves the original for the caller to replace. Nothing is deleted: an operator can look
 * at what was set aside (docs/audit.md). */
static int quarantine(ckpt *c, const char *key, const void *data, size_t n, const char *why,
                      tdm_err *e) {
    char dst[REC_KEY_MAX + 64];
    snprintf(dst, sizeof dst, "quarantine/%llu/%s", (unsigned long long)c->epoch, key);
    int rc = store_put(c->st, dst, data, n, STORE_OVERWRITE, e);
    if (!rc)
        fprintf(stderr, "tandem: %s/%s %s; kept aside as %s and replaced\n", store_url(c->st), key,
                why, dst);
    return rc;
}

static int check_lease(ckpt *c, tdm_err *e);

/* Replaces `key`, which holds `old` (read at version *ver) that cannot be part of the run,
 * by `data`: a copy of the old bytes is kept under quarantine/ first. Only while this
 * writer holds the lease, and only if the object is still the one that was read
 * (compare-and-swap): a writer let go after another took the run over never replaces what
 * the new writer wrote. */
static int replace_object(ckpt *c, const char *key, const void *old, size_t on,
                          const store_version *ver, const char *why, const void *data, size_t n,
                          tdm_err *e) {
    int rc = check_lease(c, e);
    if (!rc) rc = quarantine(c, key, old, on, why, e);
    if (!rc) rc = store_put_if(c->st, key, data, n, ver, NULL, e);
    if (rc == STORE_CONFLICT)
        rc = err_set(e, ERR_STORE, "%s/%s changed while this writer (epoch %llu) replaced it: "
                     "another writer is active; fenced out, this one stops without writing more",
                     store_url(c->st), key, (unsigned long long)c->epoch);
    return rc;
}

/* An object computed under a newer config generation than this writer's: another writer
 * has taken the run over with a changed config, so this one is stale (or a change record
 * was lost: verify says which). ERR_STORE; nothing is written. */
static int newer_generation(ckpt *c, const char *key, uint64_t gen, tdm_err *e) {
    return err_set(e, ERR_STORE,
                   "%s/%s was computed under config generation %llu, newer than this writer's "
                   "(%llu): another writer has taken the run over with a changed config, so this "
                   "one is fenced out and stops without writing more (if no other writer exists, "
                   "a configs/ change record is missing: run tandem verify)",
                   store_url(c->st), key, (unsigned long long)gen, (unsigned long long)c->gen);
}

/* ------------------------------------------------------------------ lease */

/* Reads the lease into *l (*present = 0 when there is none) and its version into *ver. */
static int fetch_lease(ckpt *c, rec_lease *l, int *present, store_version *ver, tdm_err *e) {
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(c->st, "lease", &data, &n, ver, e);
    *present = 0;
    if (rc == STORE_NOT_FOUND) {
        ver->v[0] = '\0';
        return 0;
    }
    if (rc) return rc;
    char what[600];
    snprintf(what, sizeof what, "%s/lease", store_url(c->st));
    rc = rec_lease_decode(data, n, what, l, e);
    free(data);
    if (rc) return rc;
    *present = 1;
    return 0;
}

static int read_lease(ckpt *c, rec_lease *l, int *present, tdm_err *e) {
    return fetch_lease(c, l, present, &c->lease_ver, e);
}

static int write_lease(ckpt *c, int released, tdm_err *e) {
    rec_lease l = {.epoch = c->epoch, .pid = (uint64_t)getpid(), .attempt = c->attempt,
                   .time = now_wall(), .released = released};
    snprintf(l.host, sizeof l.host, "%s", c->host_name);
    size_t n;
    void *data = rec_lease_encode(&l, &n);
    int rc = store_put_if(c->st, "lease", data, n, &c->lease_ver, &c->lease_ver, e);
    free(data);
    if (rc == STORE_CONFLICT)
        return err_set(e, ERR_STORE, "%s: another writer changed the lease at the same moment; "
                       "only one tandem may run on a store", store_url(c->st));
    return rc;
}

/* The lease still carries our epoch; otherwise we were fenced out by a newer writer.
 * Called before every object a commit writes, from several upload threads at once:
 * touches nothing of *c but reads. */
static int check_lease(ckpt *c, tdm_err *e) {
    rec_lease l;
    int present;
    store_version ver;
    int rc = fetch_lease(c, &l, &present, &ver, e);
    if (rc) return rc;
    if (!present || l.epoch != c->epoch)
        return err_set(e, ERR_STORE,
                       "%s: fenced out: the lease now belongs to writer epoch %llu (host %s, pid "
                       "%llu); this writer (epoch %llu) stops without writing more",
                       store_url(c->st), present ? (unsigned long long)l.epoch : 0ULL,
                       present ? l.host : "?", present ? (unsigned long long)l.pid : 0ULL,
                       (unsigned long long)c->epoch);
    return 0;
}

int ckpt_acquire(ckpt *c, uint64_t attempt, tdm_err *e) {
    rec_lease old;
    int present;
    c->attempt = attempt;
    int rc = read_lease(c, &old, &present, e);
    if (rc == ERR_STORE && strstr(e->msg, "/lease")) {
        /* an undecodable lease is replaced: it only ever held a number */
        fprintf(stderr, "tandem: %s; replacing it\n", e->msg);
        present = 0;
        old.epoch = 0;
        void *d;
        size_t n;
        rc = store_get(c->st, "lease", &d, &n, &c->lease_ver, e);
        if (rc == 0) free(d);
        if (rc == STORE_NOT_FOUND) rc = 0, c->lease_ver.v[0] = '\0';
    }
    if (rc) return rc;
    if (present && !old.released)
        fprintf(stderr,
                "tandem: taking over the lease of writer epoch %llu (host %s, pid %llu, attempt "
                "%llu) that did not release it; if that process is still alive it will be "
                "fenced out at its next commit\n",
                (unsigned long long)old.epoch, old.host, (unsigned long long)old.pid,
                (unsigned long long)old.attempt);
    c->epoch = (present ? old.epoch : 0) + 1;
    rc = write_lease(c, 0, e);
    if (rc) return rc;
    /* Stamp HEAD with our epoch: HEAD's version changes, so an older writer's next
     * compare-and-swap fails even if it checked the lease just before we took it. */
    void *data = NULL;
    size_t n = 0;
    rc = store_get(c->st, "HEAD", &data, &n, &c->head_ver, e);
    if (rc == STORE_NOT_FOUND) {
        c->head_ver.v[0] = '\0';
        return 0;
    }
    if (rc) return rc;
    rec_head h;
    tdm_err ignore;
    if (rec_head_decode(data, n, "HEAD", &h, &ignore) == 0) {
        c->commits = h.commits;
        h.epoch = c->epoch;
        size_t hn;
        void *hd = rec_head_encode(&h, &hn);
        rc = store_put_if(c->st, "HEAD", hd, hn, &c->head_ver, &c->head_ver, e);
        free(hd);
        if (rc == STORE_CONFLICT)
            rc = err_set(e, ERR_STORE, "%s: HEAD changed while taking the lease; another writer "
                         "is active", store_url(c->st));
    }
    free(data);
    return rc;
}

int ckpt_release(ckpt *c, tdm_err *e) {
    if (c->epoch == 0) return 0;
    int rc = check_lease(c, e);
    if (!rc) rc = write_lease(c, 1, e);
    return rc;
}

/* ------------------------------------------------------------------ blobs */

static void blob_key(const sha256_digest *d, char key[8 + SHA256_HEX_LEN + 1]) {
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(d, hex);
    snprintf(key, 8 + SHA256_HEX_LEN + 1, "blobs/%s", hex);
}

static int is_known(const ckpt *c, const sha256_digest *d) {
    for (size_t i = 0; i < c->nknown; i++)
        if (sha256_equal(&c->known[i], d)) return 1;
    return 0;
}

/* Test-only: TANDEM_TEST_BLOB_DELAY_MS slows every blob write, a throttled store. */
static void blob_test_delay(void) {
    static long ms = -1;
    if (ms < 0) {
        const char *v = getenv("TANDEM_TEST_BLOB_DELAY_MS");
        ms = v ? atol(v) : 0;
    }
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Stores one chunk unless it is already stored intact; repairs a corrupt copy. */
static int put_blob(ckpt *c, const sha256_digest *d, const void *data, size_t n, tdm_err *e) {
    if (is_known(c, d)) return 0;
    char key[80];
    blob_key(d, key);
    ckpt_test_hook("blob");
    blob_test_delay();
    if (atomic_load(&c->cancel) || stream_should_stop(c))
        return err_set(e, ERR_STORE, "%s: the commit was given up (no time left before the stop)",
                       store_url(c->st));
    int rc = check_lease(c, e); /* a fenced-out writer writes nothing more */
    if (rc) return rc;
    rc = store_put(c->st, key, data, n, STORE_CREATE, e);
    if (rc != STORE_EXISTS) return rc;
    void *old = NULL;
    size_t on = 0;
    rc = store_get(c->st, key, &old, &on, NULL, e);
    if (rc) return rc == STORE_NOT_FOUND ? store_put(c->st, key, data, n, STORE_CREATE, e) : rc;
    sha256_digest od;
    sha256(old, on, &od);
    free(old);
    if (sha256_equal(&od, d)) return 0;
    fprintf(stderr, "tandem: %s/%s was corrupt (its content does not hash to its name); rewriting it\n",
            store_url(c->st), key);
    return store_put(c->st, key, data, n, STORE_OVERWRITE, e);
}

static size_t chunk_count(const ckpt *c) {
    uint64_t bytes = (uint64_t)c->lay->numel * 4;
    return (size_t)((bytes + c->chunk_bytes - 1) / c->chunk_bytes);
}

/* ------------------------------------------------------------------ commit */

static int fill_views(rec_state *r, const model_layout *lay, tdm_err *e) {
    r->nviews = (size_t)lay->n;
    r->views = calloc(r->nviews, sizeof *r->views);
    if (!r->views) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int i = 0; i < lay->n; i++) {
        snprintf(r->views[i].name, REC_NAME_MAX, "%s", lay->t[i].name);
        r->views[i].rows = (uint64_t)lay->t[i].shape[0];
        r->views[i].cols = (uint64_t)lay->t[i].shape[1];
        r->views[i].offset = lay->t[i].offset;
    }
    return 0;
}

/* Chunks are hashed and uploaded (and read back) by a few threads: hashing (~1.5 GB/s) and the store's
 * writes (fsync-bound) then overlap, and chunk k's work never depends on another's. */
#define IO_THREADS 4

typedef struct upload_job {
    ckpt *c;
    rec_state *r;
    size_t nchunks, first, stride;
    uint8_t *buf; /* streaming: this job's chunk buffer */
    int rc;
    tdm_err e;
} upload_job;

/* Streaming: chunk `k` of tensor `t` (len bytes at byte offset off) between the backend's
 * tensor and buf, in the direction `down` (device to host) or up. */
static int transfer(ckpt *c, int t, uint64_t off, size_t len, uint8_t *buf, int down, tdm_err *e) {
    float *d = c->dev[t] + off / sizeof(float);
    pthread_mutex_lock(&c->dev_mu);
    int rc = down ? c->ops->download(c->ctx, (float *)buf, d, len / sizeof(float), e)
                  : c->ops->upload(c->ctx, d, (const float *)buf, len / sizeof(float), e);
    pthread_mutex_unlock(&c->dev_mu);
    return rc;
}

static void *upload_main(void *arg) {
    upload_job *j = arg;
    uint64_t bytes = (uint64_t)j->c->lay->numel * 4;
    size_t total = CKPT_TENSORS * j->nchunks;
    for (size_t i = j->first; i < total && !j->rc; i += j->stride) {
        size_t t = i / j->nchunks, k = i % j->nchunks;
        rec_tensor *rt = &j->r->tensors[t];
        uint64_t off = k * j->c->chunk_bytes;
        size_t len = (size_t)(bytes - off < j->c->chunk_bytes ? bytes - off : j->c->chunk_bytes);
        const uint8_t *data = (const uint8_t *)j->c->host[t] + off;
        if (j->c->stream) {
            if ((j->rc = transfer(j->c, (int)t, off, len, j->buf, 1, &j->e))) break;
            data = j->buf;
        }
        sha256(data, len, &rt->chunks[k]);
        j->rc = put_blob(j->c, &rt->chunks[k], data, len, &j->e);
        atomic_fetch_add(&j->c->done_bytes, (unsigned long long)len);
    }
    return NULL;
}

/* checkpoint.keep after a commit: best effort (the commit holds either way; the next
 * pass, or tandem gc, finishes what a failure leaves), and never by a writer that has
 * lost the lease since. */
static void retain_now(ckpt *c) {
    if (c->keep <= 0) return;
    tdm_err re;
    retain_report rep;
    ckpt_test_hook("retain");
    if (check_lease(c, &re) == 0 && retain_after_commit(c->st, c->keep, &rep, &re) != 0)
        fprintf(stderr, "tandem: keeping the newest %ld states after the commit failed (%s); the "
                "commit holds, the next one tries again\n", c->keep, re.msg);
}

static int commit(ckpt *c, tdm_err *e) {
    rec_state *r = &c->snap;
    size_t nchunks = chunk_count(c), numel = c->lay->numel;
    int rc = fill_views(r, c->lay, e);
    if (rc) return rc;
    r->ntensors = CKPT_TENSORS;
    r->tensors = calloc(CKPT_TENSORS, sizeof *r->tensors);
    sha256_digest *all = calloc(CKPT_TENSORS * nchunks, sizeof *all);
    if (!r->tensors || !all) {
        free(all);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    for (int t = 0; t < CKPT_TENSORS && !rc; t++) {
        rec_tensor *rt = &r->tensors[t];
        snprintf(rt->name, sizeof rt->name, "%s", TENSOR_NAMES[t]);
        snprintf(rt->dtype, sizeof rt->dtype, "f32");
        rt->ndim = 1;
        rt->shape[0] = numel;
        rt->chunk_bytes = c->chunk_bytes;
        rt->nchunks = nchunks;
        rt->chunks = calloc(nchunks, sizeof *rt->chunks);
        if (!rt->chunks) rc = err_set(e, ERR_INTERNAL, "out of memory");
    }
    size_t total = CKPT_TENSORS * nchunks;
    size_t nthreads = total < IO_THREADS ? total : IO_THREADS;
    upload_job jobs[IO_THREADS];
    pthread_t tids[IO_THREADS];
    int created[IO_THREADS] = {0};
    uint8_t *bufs[IO_THREADS] = {0};
    for (size_t w = 0; c->stream && !rc && w < nthreads; w++)
        if (!(bufs[w] = malloc(c->chunk_bytes < (uint64_t)numel * 4 ? c->chunk_bytes
                                                                    : (uint64_t)numel * 4)))
            rc = err_set(e, ERR_INTERNAL, "out of memory for a checkpoint chunk buffer");
    for (size_t w = 0; !rc && w < nthreads; w++) {
        jobs[w] = (upload_job){.c = c, .r = r, .nchunks = nchunks, .first = w, .stride = nthreads,
                               .buf = bufs[w]};
        if (w > 0) created[w] = pthread_create(&tids[w], NULL, upload_main, &jobs[w]) == 0;
    }
    if (!rc) {
        upload_main(&jobs[0]);
        for (size_t w = 1; w < nthreads; w++) {
            if (created[w]) pthread_join(tids[w], NULL);
            else upload_main(&jobs[w]); /* no thread: do its share here */
        }
        for (size_t w = 0; w < nthreads; w++)
            if (jobs[w].rc) {
                rc = jobs[w].rc;
                if (e) *e = jobs[w].e;
                break;
            }
    }
    for (size_t w = 0; w < IO_THREADS; w++) free(bufs[w]);
    for (int t = 0; !rc && t < CKPT_TENSORS; t++)
        memcpy(all + t * nchunks, r->tensors[t].chunks, nchunks * sizeof *all);
    if (rc) {
        free(all);
        return rc;
    }
    r->has_gen = !c->legacy;
    r->gen = c->gen;
    size_t mn;
    void *manifest = rec_state_encode(r, &mn);
    sha256_digest msha;
    sha256(manifest, mn, &msha);
    char key[64];
    snprintf(key, sizeof key, "states/%llu.mp", (unsigned long long)r->seq);
    ckpt_test_hook("manifest");
    rc = check_lease(c, e);
    if (!rc) stop_hook("manifest-put");
    if (!rc) rc = store_put(c->st, key, manifest, mn, STORE_CREATE, e);
    if (rc == STORE_EXISTS) {
        /* a replay of this position: the stored manifest must be ours, byte for byte */
        void *old = NULL;
        size_t on = 0;
        store_version ver;
        rc = store_get(c->st, key, &old, &on, &ver, e);
        if (rc == STORE_NOT_FOUND) /* gone since: write ours */
            rc = store_put(c->st, key, manifest, mn, STORE_CREATE, e);
        else if (rc == 0 && !(on == mn && memcmp(old, manifest, mn) == 0)) {
            rec_state probe;
            tdm_err de;
            int rejected = 0;
            for (size_t i = 0; i < c->nrejected; i++) rejected |= c->rejected[i] == r->seq;
            if (rec_state_decode(old, on, key, &probe, &de) != 0) {
                /* damaged (its own digest says so, or it does not decode): not evidence */
                char why[1200];
                snprintf(why, sizeof why, "is corrupt (%.1000s)", de.msg);
                rc = replace_object(c, key, old, on, &ver, why, manifest, mn, e);
            } else if (probe.has_gen && !c->legacy && probe.gen > c->gen) {
                rec_state_free(&probe);
                rc = newer_generation(c, key, probe.gen, e);
            } else if (!gen_belongs(c, probe.has_gen, probe.gen, probe.seq)) {
                char why[200];
                snprintf(why, sizeof why, "was computed under config generation %llu by a "
                         "writer that was fenced out or superseded (this run is at generation %llu)",
                         (unsigned long long)probe.gen, (unsigned long long)c->gen);
                rec_state_free(&probe);
                rc = replace_object(c, key, old, on, &ver, why, manifest, mn, e);
            } else if (rejected) {
                /* the load found it unusable (a chunk missing or corrupt): what it says of
                 * tensors nobody can read is no evidence of anything */
                rec_state_free(&probe);
                rc = replace_object(c, key, old, on, &ver,
                                    "could not be loaded (a chunk it names is missing or "
                                    "corrupt, see above)", manifest, mn, e);
            } else {
                rec_state_free(&probe);
                sha256_digest od;
                sha256(old, on, &od);
                char h1[65], h2[65];
                sha256_hex(&msha, h1);
                sha256_hex(&od, h2);
                rc = err_set(e, ERR_NONDET,
                             "nondeterminism at run position %llu (episode %llu): the replayed "
                             "state hashes to %s but %s holds %s; nothing was overwritten",
                             (unsigned long long)r->seq, (unsigned long long)r->episode, h1, key,
                             h2);
            }
        }
        free(old);
    }
    if (!rc) {
        ckpt_test_hook("head");
        rc = check_lease(c, e);
    }
    if (!rc) {
        rec_head h = {.seq = r->seq, .state_sha = msha, .epoch = c->epoch, .time = now_wall(),
                      .commits = c->commits + 1};
        snprintf(h.state, sizeof h.state, "%s", key);
        size_t hn;
        void *hd = rec_head_encode(&h, &hn);
        rc = store_put_if(c->st, "HEAD", hd, hn, &c->head_ver, &c->head_ver, e);
        free(hd);
        if (rc == STORE_CONFLICT)
            rc = err_set(e, ERR_STORE,
                         "%s: fenced out: HEAD was moved by another writer; this writer (epoch "
                         "%llu) stops without moving it",
                         store_url(c->st), (unsigned long long)c->epoch);
        if (!rc) c->commits++;
    }
    free(manifest);
    if (rc) {
        free(all);
        return rc;
    }
    free(c->known);
    c->known = all;
    c->nknown = CKPT_TENSORS * nchunks;
    pthread_mutex_lock(&c->mu);
    c->last_time = now_mono();
    c->last_seq = r->seq;
    if (c->commit_started > 0 && c->last_time > c->commit_started)
        c->rate = (double)CKPT_TENSORS * (double)numel * 4.0 / (c->last_time - c->commit_started);
    pthread_mutex_unlock(&c->mu);
    retain_now(c);
    return 0;
}

static void *writer_main(void *arg) {
    ckpt *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->pending && !c->quit) pthread_cond_wait(&c->cv, &c->mu);
        if (!c->pending) break;
        pthread_mutex_unlock(&c->mu);
        tdm_err e = {0};
        int rc = commit(c, &e);
        pthread_mutex_lock(&c->mu);
        c->result = rc;
        c->result_err = e;
        c->pending = 0;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

double ckpt_commit_estimate(ckpt *c, double *inflight_out) {
    double bytes = (double)CKPT_TENSORS * (double)c->lay->numel * 4.0;
    pthread_mutex_lock(&c->mu);
    double rate = c->rate > 0 ? c->rate : CKPT_UNMEASURED_RATE;
    /* what is left of a commit in flight: its whole time minus what has passed, at least
     * nothing */
    double inflight = 0;
    if (c->pending && c->commit_started > 0) {
        inflight = bytes / rate - (now_mono() - c->commit_started);
        if (inflight < 0) inflight = 0;
    }
    pthread_mutex_unlock(&c->mu);
    if (inflight_out) *inflight_out = inflight;
    return inflight + bytes / rate;
}

void ckpt_cancel(ckpt *c) {
    atomic_store(&c->cancel, 1);
    tdm_err ignore;
    ckpt_wait(c, &ignore); /* the writer stops before its next object */
    atomic_store(&c->cancel, 0);
    pthread_mutex_lock(&c->mu);
    c->result = 0; /* a given-up commit is not a failure of the run */
    pthread_mutex_unlock(&c->mu);
}

int ckpt_wait(ckpt *c, tdm_err *e) {
    pthread_mutex_lock(&c->mu);
    while (c->pending) pthread_cond_wait(&c->cv, &c->mu);
    int rc = c->result;
    if (rc && e) *e = c->result_err;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int ckpt_snapshot(ckpt *c, const rec_state *rec, const model_ops *ops, model_ctx *ctx,
                  float *const dev[CKPT_TENSORS], int async, tdm_err *e) {
    int rc = ckpt_wait(c, e);
    if (rc) return rc;
    c->commit_started = now_mono();
    rec_state_free(&c->snap);
    c->snap = *rec;
    c->snap.views = NULL;
    c->snap.tensors = NULL;
    c->snap.nviews = c->snap.ntensors = 0;
    if (c->stream) {
        /* no copy to take: the commit reads the tensors chunk by chunk, before returning */
        c->ops = ops;
        c->ctx = ctx;
        for (int t = 0; t < CKPT_TENSORS; t++) c->dev[t] = dev[t];
        atomic_store(&c->done_bytes, 0);
        atomic_store(&c->given_up, 0);
        rc = commit(c, e);
        if (rc && atomic_load(&c->given_up)) {
            /* not a failure: the stop came and the rest would not fit; nothing moved */
            fprintf(stderr, "tandem: the streamed commit of run position %llu was given up for "
                    "the stop (the rest would not finish in time); the last full state stands\n",
                    (unsigned long long)c->snap.seq);
            atomic_store(&c->cancel, 0);
            atomic_store(&c->given_up, 0);
            rc = 0;
        }
        c->result = rc;
        if (rc) c->result_err = *e;
        return rc;
    }
    for (int t = 0; !c->stream && t < CKPT_TENSORS; t++)
        if ((rc = ops->download(ctx, c->host[t], dev[t], c->lay->numel, e))) return rc;
    if (!async) {
        rc = commit(c, e);
        c->result = rc;
        if (rc) c->result_err = *e;
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    c->pending = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* ------------------------------------------------------------------ load */

static int cmp_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

/* Checks that a decoded manifest describes this model (the pinned config guarantees
 * it unless the object is damaged). */
static int matches_layout(const ckpt *c, const rec_state *r, char *why, size_t cap) {
    if (r->ntensors != CKPT_TENSORS || r->nviews != (size_t)c->lay->n) {
        snprintf(why, cap, "it has %zu tensors and %zu views, not 3 and %d", r->ntensors,
                 r->nviews, c->lay->n);
        return 0;
    }
    for (int t = 0; t < CKPT_TENSORS; t++) {
        const rec_tensor *rt = &r->tensors[t];
        if (strcmp(rt->name, TENSOR_NAMES[t]) || rt->ndim != 1 || rt->shape[0] != c->lay->numel) {
            snprintf(why, cap, "tensor %d is %s with %llu elements, not %s with %zu", t, rt->name,
                     (unsigned long long)rt->shape[0], TENSOR_NAMES[t], c->lay->numel);
            return 0;
        }
    }
    for (int i = 0; i < c->lay->n; i++) {
        const rec_view *v = &r->views[i];
        const model_tensor *mt = &c->lay->t[i];
        if (strcmp(v->name, mt->name) || v->rows != (uint64_t)mt->shape[0] ||
            v->cols != (uint64_t)mt->shape[1] || v->offset != mt->offset) {
            snprintf(why, cap, "view %s does not match the model's tensor %s", v->name, mt->name);
            return 0;
        }
    }
    return 1;
}

/* Reads and verifies every chunk of the three tensors into the host buffers. Chunks are
 * fetched by IO_THREADS threads (object stores serve parallel reads much faster);
 * the first failure (by chunk order) is the one reported. */
typedef struct read_job {
    ckpt *c;
    const rec_state *r;
    size_t first, stride, total, nchunks;
    size_t bad;       /* lowest failing chunk index seen by this job, or SIZE_MAX */
    char why[1200];
} read_job;

static void *read_main(void *arg) {
    read_job *j = arg;
    tdm_err e;
    for (size_t i = j->first; i < j->total && j->bad == SIZE_MAX; i += j->stride) {
        size_t t = i / j->nchunks, k = i % j->nchunks;
        const rec_tensor *rt = &j->r->tensors[t];
        uint64_t bytes = rt->shape[0] * 4, off = k * rt->chunk_bytes;
        size_t want = (size_t)(bytes - off < rt->chunk_bytes ? bytes - off : rt->chunk_bytes);
        char bkey[80];
        blob_key(&rt->chunks[k], bkey);
        void *data = NULL;
        size_t n = 0;
        int rc = store_get_verified(j->c->st, bkey, &rt->chunks[k], &data, &n, &e);
        if (rc || n != want) {
            snprintf(j->why, sizeof j->why, "%s (tensor %s chunk %zu) is %.500s", bkey, rt->name, k,
                     rc == STORE_NOT_FOUND ? "missing"
                     : rc == STORE_CORRUPT ? "corrupt: its content does not match its SHA-256"
                     : rc ? e.msg : "corrupt: wrong size");
            free(data);
            j->bad = i;
            break;
        }
        if (j->c->stream) {
            int urc = transfer(j->c, (int)t, off, n, data, 0, &e);
            if (urc) {
                snprintf(j->why, sizeof j->why, "tensor %s chunk %zu could not be copied to the "
                         "model: %.900s", rt->name, k, e.msg);
                free(data);
                j->bad = i;
                break;
            }
        } else {
            memcpy((uint8_t *)j->c->host[t] + off, data, n);
        }
        free(data);
    }
    return NULL;
}

static int read_tensors(ckpt *c, const rec_state *r, char *why, size_t cap) {
    size_t nchunks = r->tensors[0].nchunks;
    for (int t = 1; t < CKPT_TENSORS; t++)
        if (r->tensors[t].nchunks != nchunks) {
            snprintf(why, cap, "its tensors are chunked differently");
            return -1;
        }
    size_t total = CKPT_TENSORS * nchunks;
    size_t nthreads = total < IO_THREADS ? total : IO_THREADS;
    read_job jobs[IO_THREADS];
    pthread_t tids[IO_THREADS];
    int created[IO_THREADS] = {0};
    for (size_t w = 0; w < nthreads; w++) {
        jobs[w] = (read_job){.c = c, .r = r, .first = w, .stride = nthreads, .total = total,
                             .nchunks = nchunks, .bad = SIZE_MAX};
        if (w > 0) created[w] = pthread_create(&tids[w], NULL, read_main, &jobs[w]) == 0;
    }
    if (nthreads) read_main(&jobs[0]);
    for (size_t w = 1; w < nthreads; w++) {
        if (created[w]) pthread_join(tids[w], NULL);
        else read_main(&jobs[w]);
    }
    size_t worst = SIZE_MAX, at = 0;
    for (size_t w = 0; w < nthreads; w++)
        if (jobs[w].bad < worst) worst = jobs[w].bad, at = w;
    if (worst == SIZE_MAX) return 0;
    snprintf(why, cap, "%s", jobs[at].why);
    return -1;
}

int ckpt_load_seq(ckpt *c, uint64_t seq, rec_state *rec, tdm_err *e) {
    memset(rec, 0, sizeof *rec);
    char key[64], why[1200];
    snprintf(key, sizeof key, "states/%llu.mp", (unsigned long long)seq);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(c->st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND)
        return err_set(e, ERR_USAGE, "%s/%s does not exist (tandem status lists the kept states)",
                       store_url(c->st), key);
    if (rc) return rc;
    rc = rec_state_decode(data, n, key, rec, e);
    free(data);
    if (rc) return rc;
    if (!matches_layout(c, rec, why, sizeof why) || read_tensors(c, rec, why, sizeof why)) {
        rec_state_free(rec);
        return err_set(e, ERR_STORE, "%s/%s: %s", store_url(c->st), key, why);
    }
    return 0;
}

int ckpt_load(ckpt *c, rec_state *rec, int *found, tdm_err *e) {
    *found = 0;
    memset(rec, 0, sizeof *rec);
    const char *url = store_url(c->st);
    /* HEAD: its version is what our first compare-and-swap expects */
    rec_head head;
    int have_head = 0;
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(c->st, "HEAD", &data, &n, &c->head_ver, e);
    int head_missing = rc == STORE_NOT_FOUND;
    if (head_missing) {
        c->head_ver.v[0] = '\0';
    } else if (rc) {
        return rc;
    } else {
        tdm_err he;
        if (rec_head_decode(data, n, "HEAD", &head, &he) == 0) have_head = 1, c->commits = head.commits;
        else fprintf(stderr, "tandem: %s/%s; looking for states by listing\n", url, he.msg);
        free(data);
    }
    store_list l;
    rc = store_list_prefix(c->st, "states/", &l, e);
    if (rc) return rc;
    uint64_t *seqs = calloc(l.n ? l.n : 1, sizeof *seqs);
    size_t ns = 0;
    for (size_t i = 0; seqs && i < l.n; i++)
        if (rec_key_index(l.keys[i], "states/", &seqs[ns]) == 0) ns++;
    store_list_free(&l);
    if (!seqs) return err_set(e, ERR_INTERNAL, "out of memory");
    qsort(seqs, ns, sizeof *seqs, cmp_desc);
    if (head_missing && ns > 0)
        fprintf(stderr, "tandem: %s/HEAD is missing; looking for states by listing\n", url);
    /* whether HEAD names a state that is there (HEAD merely behind the newest state is
     * the trace of a commit cut off before HEAD moved, not damage) */
    int head_listed = 0;
    for (size_t i = 0; have_head && i < ns; i++) {
        char key[64];
        snprintf(key, sizeof key, "states/%llu.mp", (unsigned long long)seqs[i]);
        head_listed |= strcmp(head.state, key) == 0 && head.seq == seqs[i];
    }
    free(c->rejected);
    c->rejected = calloc(ns ? ns : 1, sizeof *c->rejected);
    c->nrejected = 0;
    c->loaded = 0;
    if (!c->rejected) {
        free(seqs);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < ns; i++) {
        char key[64];
        snprintf(key, sizeof key, "states/%llu.mp", (unsigned long long)seqs[i]);
        rc = store_get(c->st, key, &data, &n, NULL, e);
        if (rc == STORE_NOT_FOUND) continue;
        if (rc) {
            free(seqs);
            return rc;
        }
        sha256_digest d;
        sha256(data, n, &d);
        tdm_err de;
        char why[1200];
        why[0] = '\0';
        if (have_head && strcmp(head.state, key) == 0 && !sha256_equal(&d, &head.state_sha))
            snprintf(why, sizeof why, "does not match the SHA-256 that HEAD records (corrupt)");
        else if (rec_state_decode(data, n, key, rec, &de) != 0)
            snprintf(why, sizeof why, "cannot be used: %.1100s", de.msg);
        else if (rec->has_gen && rec->gen > c->gen) {
            /* generations only grow and change records are never removed: a state of a
             * generation the store has no record of means a change record was lost, and
             * the run cannot know the config it was computed with */
            uint64_t g = rec->gen;
            rec_state_free(rec);
            free(data);
            free(seqs);
            return err_set(e, ERR_STORE,
                           "%s/%s was computed under config generation %llu, but the store "
                           "records only %llu config changes: %s/configs/%llu.mp is missing. "
                           "Restore it from a copy of the store (then check with tandem verify); "
                           "the run cannot go on without the config it was computed with",
                           url, key, (unsigned long long)g, (unsigned long long)c->gen, url,
                           (unsigned long long)c->gen);
        } else if (!gen_belongs(c, rec->has_gen, rec->gen, rec->seq)) {
            snprintf(why, sizeof why, "was computed under config generation %llu by a writer that "
                     "was fenced out or superseded (this run is at generation %llu)",
                     (unsigned long long)rec->gen, (unsigned long long)c->gen);
            rec_state_free(rec);
        }
        if (why[0]) {
            /* the manifest itself is bad: keep a copy aside and take it out of states/, so
             * that neither this load nor the replay that reaches its position trusts it */
            tdm_err qe;
            int qrc = quarantine(c, key, data, n, why, &qe);
            if (!qrc) qrc = store_delete(c->st, key, &qe);
            if (qrc && qrc != STORE_NOT_FOUND)
                fprintf(stderr, "tandem: %s/%s %s, and could not be set aside (%s)\n", url, key,
                        why, qe.msg);
            fprintf(stderr, "tandem: falling back to an older state\n");
            free(data);
            continue;
        }
        free(data);
        if (!matches_layout(c, rec, why, sizeof why) || read_tensors(c, rec, why, sizeof why)) {
            fprintf(stderr, "tandem: %s/%s: %s; falling back to an older state\n", url, key, why);
            rec_state_free(rec);
            c->rejected[c->nrejected++] = seqs[i];
            continue;
        }
        /* a run begun before states carried a generation goes on writing without one, so
         * that its replays compare byte for byte with what it wrote then */
        c->legacy = !rec->has_gen;
        /* every chunk of this state is now known to be stored intact */
        free(c->known);
        c->nknown = 0;
        size_t total = 0; /* the state's own chunking, which may differ from this writer's */
        for (int t = 0; t < CKPT_TENSORS; t++) total += rec->tensors[t].nchunks;
        c->known = calloc(total ? total : 1, sizeof *c->known);
        for (int t = 0; c->known && t < CKPT_TENSORS; t++)
            for (size_t k = 0; k < rec->tensors[t].nchunks; k++)
                c->known[c->nknown++] = rec->tensors[t].chunks[k];
        if (i > 0 || (have_head && head.seq != seqs[i]))
            fprintf(stderr, "tandem: resuming from %s (run position %llu)\n", key,
                    (unsigned long long)seqs[i]);
        c->loaded = 1;
        c->loaded_seq = seqs[i];
        snprintf(c->loaded_key, sizeof c->loaded_key, "%s", key);
        c->loaded_sha = d;
        c->head_current = have_head && strcmp(head.state, key) == 0 && head.seq == seqs[i] &&
                          sha256_equal(&head.state_sha, &d);
        c->head_note[0] = '\0';
        if (!have_head)
            snprintf(c->head_note, sizeof c->head_note, "was %s", head_missing ? "missing" : "damaged");
        else if (!c->head_current && !(head_listed && head.seq < seqs[i]))
            snprintf(c->head_note, sizeof c->head_note, "named %.128s (run position %llu), which "
                     "is not a state this run can use", head.state, (unsigned long long)head.seq);
        c->last_seq = seqs[i];
        c->last_time = now_mono();
        *found = 1;
        free(seqs);
        return 0;
    }
    free(seqs);
    if (ns > 0)
        return err_set(e, ERR_STORE,
                       "%s: none of its %zu states verifies (see the messages above); the run "
                       "cannot be resumed as it is. Restore the store from a copy, or run "
                       "`tandem repair %s` (a dry run; then --apply) to set the unusable states "
                       "aside, so that the run replays from its seed (bit for bit, checked "
                       "against its alpha records)",
                       url, ns, url);
    return 0;
}

int ckpt_settle_head(ckpt *c, tdm_err *e) {
    if (!c->loaded || c->head_current) return 0;
    int rc = check_lease(c, e);
    if (rc) return rc;
    rec_head h = {.seq = c->loaded_seq, .state_sha = c->loaded_sha, .epoch = c->epoch,
                  .time = now_wall(), .commits = c->commits};
    snprintf(h.state, sizeof h.state, "%s", c->loaded_key);
    size_t n;
    void *data = rec_head_encode(&h, &n);
    rc = store_put_if(c->st, "HEAD", data, n, &c->head_ver, &c->head_ver, e);
    free(data);
    if (rc == STORE_CONFLICT)
        return err_set(e, ERR_STORE, "%s: fenced out: HEAD was moved by another writer; this "
                       "writer (epoch %llu) stops without moving it",
                       store_url(c->st), (unsigned long long)c->epoch);
    if (rc) return rc;
    if (c->head_note[0])
        fprintf(stderr, "tandem: %s/HEAD %s; it now names %s (run position %llu), the newest "
                "state that verifies\n", store_url(c->st), c->head_note, c->loaded_key,
                (unsigned long long)c->loaded_seq);
    c->head_current = 1;
    return 0;
}

int ckpt_drop_states_after(ckpt *c, uint64_t after, tdm_err *e) {
    store_list l;
    int rc = store_list_prefix(c->st, "states/", &l, e);
    for (size_t i = 0; !rc && i < l.n; i++) {
        uint64_t s;
        if (rec_key_index(l.keys[i], "states/", &s) == 0 && s > after) {
            rc = store_delete(c->st, l.keys[i], e);
            if (rc == STORE_NOT_FOUND) rc = 0;
        }
    }
    store_list_free(&l);
    return rc;
}

int ckpt_supersede_alpha_after(ckpt *c, uint64_t after, uint64_t change, int *moved, tdm_err *e) {
    *moved = 0;
    store_list l;
    int rc = store_list_prefix(c->st, "alpha/", &l, e);
    for (size_t i = 0; !rc && i < l.n; i++) {
        const char *key = l.keys[i];
        void *data = NULL;
        size_t n = 0;
        rc = store_get(c->st, key, &data, &n, NULL, e);
        if (rc == STORE_NOT_FOUND) { /* moved by an earlier, interrupted call */
            rc = 0;
            continue;
        }
        if (rc) break;
        rec_alpha a;
        tdm_err de;
        /* an unreadable record is left where it is: the replay rewrites it (reported); one
         * computed under the current generation already is the replay's own */
        if (rec_alpha_decode(data, n, key, &a, &de) == 0 && a.seq > after &&
            !(a.has_gen && !c->legacy && a.gen == c->gen)) {
            char dst[128];
            snprintf(dst, sizeof dst, "superseded/%llu/%s", (unsigned long long)change, key);
            rc = store_put(c->st, dst, data, n, STORE_OVERWRITE, e);
            ckpt_test_hook("supersede");
            if (!rc) rc = store_delete(c->st, key, e);
            if (rc == STORE_NOT_FOUND) rc = 0;
            if (!rc) (*moved)++;
        }
        free(data);
    }
    store_list_free(&l);
    return rc;
}

/* ------------------------------------------------------------------ α records */

int ckpt_check_chain(ckpt *c, uint64_t records, const sha256_digest *head, tdm_err *e) {
    const char *url = store_url(c->st);
    sha256_digest prev = {0};
    for (uint64_t t = 0; t < records; t++) {
        char key[64];
        snprintf(key, sizeof key, "alpha/%llu.mp", (unsigned long long)t);
        void *data = NULL;
        size_t n = 0;
        int rc = store_get(c->st, key, &data, &n, NULL, e);
        const char *problem = NULL;
        char why[1100];
        rec_alpha a;
        tdm_err de;
        if (rc == STORE_NOT_FOUND) {
            problem = "is missing: the audit trail has a hole";
        } else if (rc) {
            return rc;
        } else if (rec_alpha_decode(data, n, key, &a, &de) != 0) {
            snprintf(why, sizeof why, "is damaged (%.1000s)", de.msg);
            problem = why;
        } else if (a.t != t || !sha256_equal(&a.prev, &prev)) {
            problem = "does not link to the record before it";
        } else {
            rec_alpha_hash(&a, &prev);
            if (t + 1 == records && !sha256_equal(&prev, head))
                problem = "is not the record the newest state vouches for";
        }
        free(data);
        if (problem)
            return err_set(e, ERR_STORE,
                           "%s/%s %s, inside the part of the α chain that the newest state "
                           "vouches for (%llu records). Restore it from a copy of the store, or "
                           "run `tandem repair %s` (a dry run; then --apply) to roll the run back "
                           "to before it",
                           url, key, problem, (unsigned long long)records, url);
    }
    return 0;
}

static int cmp_asc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int ckpt_report_alpha_holes(ckpt *c, uint64_t records, tdm_err *e) {
    store_list l;
    int rc = store_list_prefix(c->st, "alpha/", &l, e);
    if (rc) return rc;
    uint64_t *ts = calloc(l.n ? l.n : 1, sizeof *ts);
    size_t n = 0;
    for (size_t i = 0; ts && i < l.n; i++)
        if (rec_key_index(l.keys[i], "alpha/", &ts[n]) == 0 && ts[n] >= records) n++;
    store_list_free(&l);
    if (!ts) return err_set(e, ERR_INTERNAL, "out of memory");
    qsort(ts, n, sizeof *ts, cmp_asc);
    uint64_t want = records;
    for (size_t i = 0; i < n; i++) {
        for (; want < ts[i]; want++)
            fprintf(stderr, "tandem: %s/alpha/%llu.mp is missing (a hole in the alpha chain past "
                    "the newest state, which vouches for %llu records); the replay re-derives it\n",
                    store_url(c->st), (unsigned long long)want, (unsigned long long)records);
        want = ts[i] + 1;
    }
    free(ts);
    return 0;
}

int ckpt_alpha_record(ckpt *c, const rec_alpha *in, sha256_digest *hash, tdm_err *e) {
    rec_alpha a = *in;
    a.has_gen = !c->legacy;
    a.gen = c->gen;
    rec_alpha_hash(&a, hash);
    size_t n;
    void *data = rec_alpha_encode(&a, &n);
    char key[64];
    snprintf(key, sizeof key, "alpha/%llu.mp", (unsigned long long)a.t);
    ckpt_test_hook("alpha");
    int rc = check_lease(c, e);
    if (!rc) stop_hook("alpha-put");
    if (!rc) rc = store_put(c->st, key, data, n, STORE_CREATE, e);
    if (rc == STORE_EXISTS) {
        void *old = NULL;
        size_t on = 0;
        store_version ver;
        rc = store_get(c->st, key, &old, &on, &ver, e);
        if (rc == STORE_NOT_FOUND) /* gone since: write ours */
            rc = store_put(c->st, key, data, n, STORE_CREATE, e);
        else if (rc == 0) {
            rec_alpha stored;
            tdm_err de;
            sha256_digest sh;
            if (rec_alpha_decode(old, on, key, &stored, &de) != 0) {
                /* damaged (its own digest says so, or it does not decode): re-derived */
                char why[1200];
                snprintf(why, sizeof why, "is corrupt (%.1000s)", de.msg);
                rc = replace_object(c, key, old, on, &ver, why, data, n, e);
            } else if (rec_alpha_hash(&stored, &sh), sha256_equal(&sh, hash)) {
                rc = 0; /* the replay agrees */
            } else if (stored.has_gen && !c->legacy && stored.gen > c->gen) {
                rc = newer_generation(c, key, stored.gen, e);
            } else if (!gen_belongs(c, stored.has_gen, stored.gen, stored.seq)) {
                char why[200];
                snprintf(why, sizeof why, "was computed under config generation %llu by a "
                         "writer that was fenced out or superseded (this run is at generation %llu)",
                         (unsigned long long)stored.gen, (unsigned long long)c->gen);
                rc = replace_object(c, key, old, on, &ver, why, data, n, e);
            } else if (stored.t != a.t || stored.seq != a.seq || !sha256_equal(&stored.prev, &a.prev)) {
                /* intact, but not a continuation of this run's verified chain (it links to
                 * another record before it, or sits at another position): another run's
                 * record, or one whose predecessor was itself replaced. The replay's
                 * inputs are not the ones it was computed from, so it proves nothing */
                rc = replace_object(c, key, old, on, &ver,
                                    "does not continue this run's alpha chain (it links to "
                                    "another record before it, or holds another run position)",
                                    data, n, e);
            } else {
                char h1[65], h2[65];
                sha256_hex(hash, h1);
                sha256_hex(&sh, h2);
                rc = err_set(e, ERR_NONDET,
                             "nondeterminism in episode %llu: the replay's alpha record "
                             "hashes to %s but %s/%s holds %s (intact, same config); nothing was "
                             "overwritten",
                             (unsigned long long)a.t, h1, store_url(c->st), key, h2);
            }
        }
        free(old);
    }
    free(data);
    return rc;
}
