/* ckpt.c — opening and closing the checkpoint writer, the lease, config generations and
 * setting objects aside; see ckpt.h. Commits are ckpt_commit.c, loads ckpt_load.c, the
 * α records ckpt_alpha.c; ckpt_impl.h holds what they share. */
#include "ledger/ckpt.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ledger/ckpt_impl.h"
#include "ledger/keys.h"
#include "ledger/retain.h"
#include "storage/sha256.h"
#include "ledger/audit.h"
#include "util/pidns.h"
#include "util/term.h"
#include "util/testhook.h"

const char *const ckpt_tensor_names[CKPT_TENSORS] = {"params", "adam_m", "adam_v"};
double ckpt_now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* TANDEM_TEST_CLOCK_OFFSET_S (test-only; storage/s3_request.c signs with it too) shifts
 * it: a writer on a machine whose clock is off. */
double ckpt_now_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const char *v = getenv("TANDEM_TEST_CLOCK_OFFSET_S");
    return ts.tv_sec + ts.tv_nsec * 1e-9 + (v ? strtod(v, NULL) : 0);
}


/* ------------------------------------------------------------------ open / close */


/* What ckpt_open and ckpt_open_stream share: the struct, the lease fields, the locks. */
static ckpt *open_common(store *st, const ckpt_layout *lay, uint64_t chunk_bytes, tdm_err *e) {
    ckpt *c = calloc(1, sizeof *c);
    rec_view *views = lay && lay->nviews > 0 ? malloc((size_t)lay->nviews * sizeof *views) : NULL;
    if (!c || (lay && lay->nviews > 0 && !views)) {
        free(c);
        free(views);
        err_set(e, ERR_INTERNAL, "out of memory");
        return NULL;
    }
    c->st = st;
    if (lay) {
        if (views) memcpy(views, lay->views, (size_t)lay->nviews * sizeof *views);
        c->lay_own = *lay;
        c->lay_own.views = views;
        c->lay = &c->lay_own;
    }
    c->chunk_bytes = chunk_bytes / 4 * 4;
    if (c->chunk_bytes < 4) c->chunk_bytes = 4;
    c->last_seq = UINT64_MAX;
    c->last_time = ckpt_now_mono();
    const char *guess = getenv("TANDEM_TEST_UNMEASURED_RATE");
    c->unmeasured_rate = guess && atof(guess) > 0 ? atof(guess) : CKPT_UNMEASURED_RATE;
    if (gethostname(c->host_name, sizeof c->host_name) != 0) snprintf(c->host_name, sizeof c->host_name, "unknown");
    c->host_name[sizeof c->host_name - 1] = '\0';
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->dev_mu, NULL);
    /* on the monotonic clock, so ckpt_await_pace's timed waits ignore wall-clock steps */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    return c;
}

static void free_common(ckpt *c) {
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->dev_mu);
    pthread_cond_destroy(&c->cv);
    for (int t = 0; t < CKPT_TENSORS; t++) free(c->host[t]);
    free((void *)c->lay_own.views);
    digest_set_free(&c->known);
    free(c->known_ok);
    free(c->rejected);
    ckpt_gens_free(&c->gens);
    free(c);
}

ckpt *ckpt_open(store *st, const ckpt_layout *lay, uint64_t chunk_bytes, tdm_err *e) {
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
    int perr = pthread_create(&c->thread, NULL, ckpt_writer_main, c);
    if (perr != 0) {
        err_sys(e, ERR_INTERNAL, perr, "cannot start the checkpoint writer thread%s",
                perr == EAGAIN ? " (the limit on processes and threads, ulimit -u, or the system's: raise it)" : "");
        free_common(c);
        return NULL;
    }
    c->thread_started = 1;
    return c;
}

ckpt *ckpt_open_stream(store *st, const ckpt_layout *lay, uint64_t chunk_bytes,
                       const ckpt_tensor_io *io, float *const dev[CKPT_TENSORS], tdm_err *e) {
    ckpt *c = open_common(st, lay, chunk_bytes, e);
    if (!c) return NULL;
    c->stream = 1;
    c->io = *io;
    for (int t = 0; t < CKPT_TENSORS; t++) c->dev[t] = dev[t];
    return c;
}

int ckpt_streaming(const ckpt *c) { return c->stream; }

void ckpt_set_stop_check(ckpt *c, int (*stop)(void *arg, double seconds_left), void *arg) {
    c->stop_fn = stop;
    c->stop_arg = arg;
}

int ckpt_stop_outlasts(ckpt *c, double seconds_left) {
    if (!c->stop_fn || !c->stop_fn(c->stop_arg, seconds_left)) return 0;
    atomic_store(&c->given_up, 1);
    atomic_store(&c->cancel, 1);
    return 1;
}

/* Streaming: whether the stop check wants the commit in flight given up, from the rest of
 * its bytes at the throughput it has had so far (before its first chunk: the last
 * commit's, or the unmeasured guess). Sets cancel, so that every I/O thread stops. */
int ckpt_stream_should_stop(ckpt *c) {
    if (!c->stream || !c->stop_fn) return 0;
    double total = (double)CKPT_TENSORS * (double)c->lay->numel * 4.0;
    double done = (double)atomic_load(&c->done_bytes);
    double spent = ckpt_now_mono() - c->commit_started;
    double rate = done > 0 && spent > 0 ? done / spent : c->rate > 0 ? c->rate : c->unmeasured_rate;
    /* and a late DELETE's wait still ahead of the commit (ckpt_outlast_late_delete) */
    pthread_mutex_lock(&c->mu);
    double late = c->late_until - ckpt_now_mono();
    pthread_mutex_unlock(&c->mu);
    return ckpt_stop_outlasts(c, (total - done) / rate + (late > 0 ? late : 0));
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

double ckpt_last_commit_seconds(const ckpt *c) {
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    double t = c->last_seconds;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
    return t;
}

int ckpt_stopped_short(ckpt *c) { return atomic_load(&c->stopped_short); }

void ckpt_set_seed(ckpt *c, uint64_t seed) {
    c->has_seed = 1;
    c->seed = seed;
}

void ckpt_set_run(ckpt *c, const sha256_digest *run) {
    c->has_run = run != NULL;
    if (run) c->run = *run;
}

uint64_t ckpt_last_commit_seq(const ckpt *c) {
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    uint64_t s = c->last_seq;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
    return s;
}

/* ------------------------------------------------------------------ generations */

void ckpt_set_retention(ckpt *c, long keep) { c->keep = keep; }

void ckpt_set_reader(ckpt *c, const char *verb) { c->reader_verb = verb; }

int ckpt_set_generation(ckpt *c, const ckpt_gens *g, tdm_err *e) {
    ckpt_gens copy;
    if (ckpt_gens_copy(&copy, g)) return err_set(e, ERR_INTERNAL, "out of memory");
    ckpt_gens_free(&c->gens);
    c->gens = copy;
    return 0;
}

int ckpt_belongs(const ckpt *c, int has_gen, uint64_t gen, uint64_t seq) {
    return ckpt_gen_belongs(has_gen, gen, seq, &c->gens);
}

int ckpt_put_once(ckpt *c, const char *key, const void *data, size_t n, void **old, size_t *on,
                  store_version *ver, tdm_err *e) {
    *old = NULL;
    *on = 0;
    int rc = store_put(c->st, key, data, n, STORE_CREATE, e);
    if (rc != STORE_EXISTS) return rc;
    rc = store_get(c->st, key, old, on, ver, e);
    if (rc == STORE_NOT_FOUND) return store_put(c->st, key, data, n, STORE_CREATE, e); /* gone since */
    return rc ? rc : STORE_EXISTS;
}

int ckpt_keep_aside(store *st, uint64_t epoch, const char *key, const void *data, size_t n,
                    char *dst, size_t cap, tdm_err *e) {
    for (int i = 0; i < CKPT_ASIDE_COPIES; i++) {
        ledger_quarantine_key(dst, cap, epoch, key);
        if (i) snprintf(dst + strlen(dst), cap - strlen(dst), ".%d", i);
        int rc = store_put(st, dst, data, n, STORE_CREATE, e);
        if (rc != STORE_EXISTS) return rc;
        void *old = NULL;
        size_t on = 0;
        rc = store_get(st, dst, &old, &on, NULL, e);
        if (rc == STORE_NOT_FOUND) continue; /* deleted since: the next name */
        if (rc) return rc;
        int same = on == n && (n == 0 || memcmp(old, data, n) == 0);
        free(old);
        if (same) return 0; /* kept already (a set-aside retried) */
    }
    ledger_quarantine_key(dst, cap, epoch, key);
    return err_set(e, ERR_STORE, "%s/%s: %d different copies are kept there already (and as .1, .2, ...); "
                   "look at them (docs/audit.md) and delete the ones not wanted", store_url(st), dst,
                   CKPT_ASIDE_COPIES);
}

/* Keeps a copy of an object that cannot be part of the run under
 * quarantine/<epoch>/<key> (this writer's epoch: unique per writer life), says so, and
 * leaves the original for the caller to replace. Nothing is deleted: an operator can look
 * at what was set aside (docs/audit.md). */
int ckpt_quarantine(ckpt *c, const char *key, const void *data, size_t n, const char *why,
                    tdm_err *e) {
    char dst[REC_KEY_MAX + 64];
    int rc = ckpt_keep_aside(c->st, c->epoch, key, data, n, dst, sizeof dst, e);
    if (!rc)
        fprintf(stderr, "tandem: %s/%s %s; kept aside as %s and replaced\n", store_url(c->st), key,
                why, dst);
    return rc;
}


/* Replaces `key`, which holds `old` (read at version *ver) that cannot be part of the run,
 * by `data`: a copy of the old bytes is kept under quarantine/ first. Only while this
 * writer holds the lease, and only if the object is still the one that was read
 * (compare-and-swap): a writer let go after another took the run over never replaces what
 * the new writer wrote. */
int ckpt_replace_object(ckpt *c, const char *key, const void *old, size_t on,
                        const store_version *ver, const char *why, const void *data, size_t n,
                        tdm_err *e) {
    int rc = ckpt_check_lease(c, e);
    if (!rc) rc = ckpt_quarantine(c, key, old, on, why, e);
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
int ckpt_newer_generation(ckpt *c, const char *key, uint64_t gen, tdm_err *e) {
    return err_set(e, ERR_STORE,
                   "%s/%s was computed under config generation %llu, newer than this writer's "
                   "(%llu): another writer has taken the run over with a changed config, so this "
                   "one is fenced out and stops without writing more (if no other writer exists, "
                   "a configs/ change record is missing: run tandem verify)",
                   store_url(c->st), key, (unsigned long long)gen, (unsigned long long)c->gens.n);
}

int ckpt_judge_stored(ckpt *c, const char *key, const void *old, size_t on,
                      const store_version *ver, const char *damage, int has_gen, uint64_t gen,
                      uint64_t seq, const void *data, size_t n, int *rc, tdm_err *e) {
    char why[1200];
    if (damage) {
        snprintf(why, sizeof why, "is corrupt (%.1000s)", damage);
        *rc = ckpt_replace_object(c, key, old, on, ver, why, data, n, e);
        return 1;
    }
    if (has_gen && !c->legacy && gen > c->gens.n) {
        *rc = ckpt_newer_generation(c, key, gen, e);
        return 1;
    }
    if (!ckpt_belongs(c, has_gen, gen, seq)) {
        snprintf(why, sizeof why, "was computed under config generation %llu by a writer that "
                 "was fenced out or superseded (this run is at generation %llu)",
                 (unsigned long long)gen, (unsigned long long)c->gens.n);
        *rc = ckpt_replace_object(c, key, old, on, ver, why, data, n, e);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ lease */

/* The DELETEs a released lease names (late_deletes: keys, each followed by '\n', or "*")
 * may land for `kept` seconds more: this writer's writes of those keys (of any key, for
 * "*" or a name that is no key) wait until they cannot (store_put). A run stopped by a
 * signal ends without waiting for them; its requeued resume replays and writes again the
 * state or α record such a DELETE set aside, which the DELETE would then remove. */
static void note_late_deletes(ckpt *c, const rec_lease *old, double kept, int unreleased) {
    /* what a writer deletes and a later one may write again; "*" (too many to name, or some
     * unknown) and a damaged list cover these, never HEAD, the lease, RUN or configs/ (which
     * no run deletes: every write, the lease's own included, waited behind a "*": review) */
    static const char *const deletable[] = {LEDGER_STATES, LEDGER_ALPHA, LEDGER_METRICS, LEDGER_BLOBS,
                                            LEDGER_PINS, LEDGER_MIXTURE, LEDGER_DIVERGED};
    const char *p = old->late_deletes;
    int named = 0;
    while (*p) {
        size_t k = strcspn(p, "\n");
        char key[STORE_KEY_MAX + 1];
        int ok = k > 0 && k <= STORE_KEY_MAX;
        if (ok) {
            memcpy(key, p, k);
            key[k] = '\0';
            /* a prefix ("states/": every key under it) or a key */
            int pre = key[k - 1] == '/';
            if (pre) key[k - 1] = '\0';
            ok = store_key_valid(key);
            if (pre) key[k - 1] = '/';
        }
        if (!ok) { /* "*", or damage */
            for (size_t i = 0; i < sizeof deletable / sizeof *deletable; i++)
                store_note_late_delete(c->st, deletable[i], kept);
            named = -1;
            break;
        }
        store_note_late_delete(c->st, key, kept);
        named++;
        p += k + (p[k] == '\n');
    }
    if (unreleased && named)
        fprintf(stderr, "tandem: writer epoch %llu, which did not release the lease, had named DELETEs in it that "
                "may still land for %.0f s (%s): this writer waits until they cannot before it writes %s again\n",
                (unsigned long long)old->epoch, kept, named < 0 ? "more than it could list" : "what it set aside "
                "or superseded, or DELETEs it gave up on", named < 0 ? "a state, alpha record, "
                "metrics row, blob, pin or mixture.mp" : "those objects");
    else if (named < 0)
        fprintf(stderr, "tandem: writer epoch %llu gave up on DELETEs it could not name that may land for %.0f s: "
                "this writer waits until they cannot before it writes a state, alpha record, metrics row, blob, "
                "pin or mixture.mp\n", (unsigned long long)old->epoch, kept);
    else if (named > 0)
        fprintf(stderr, "tandem: writer epoch %llu gave up on %d DELETE%s that may land for %.0f s: this writer "
                "waits until they cannot before it writes %s again\n", (unsigned long long)old->epoch, named,
                named == 1 ? "" : "s", kept, named == 1 ? "that object" : "those objects");
}

/* Reads the lease into *l (*present = 0 when there is none) and its version into *ver. */
static int fetch_lease(ckpt *c, rec_lease *l, int *present, store_version *ver, tdm_err *e) {
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(c->st, LEDGER_LEASE, &data, &n, ver, e);
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

/* Writes this writer's lease (epoch, released or not) by compare-and-swap against
 * c->lease_ver, the version last read or written; STORE_CONFLICT when the lease changed
 * since (the callers judge it: a takeover reads it again, a release finds it taken). */
static int write_lease(ckpt *c, int released, tdm_err *e) {
    /* held: the time it was taken, kept by a rewrite (status says "held since") */
    rec_lease l = {.epoch = c->epoch, .pid = (uint64_t)getpid(), .attempt = c->attempt,
                   .time = !released && c->lease_time > 0 ? c->lease_time : ckpt_now_wall(), .released = released};
    /* writes given up on that may still land (S3): the next writer and gc keep what they
     * could recreate until then (a writer that was killed says nothing: ckpt_acquire) */
    double left = released ? store_unsettled_s(c->st) : 0;
    if (left > 0) l.has_settle = 1, l.settle_until = l.time + left;
    /* and which of them were DELETEs: the next writer waits before writing those keys
     * again (a run stopped by a signal does not wait for them itself) */
    double dleft = store_unsettled_delete_keys(c->st, l.late_deletes, sizeof l.late_deletes);
    if (dleft > 0 && l.late_deletes[0]) {
        l.has_late_deletes = 1;
        if (released && l.time + dleft > l.settle_until) l.has_settle = 1, l.settle_until = l.time + dleft;
    } else {
        l.late_deletes[0] = '\0';
    }
    /* held: and those it is about to send (a writer taking over after a kill reads them) */
    if (!released && c->announced[0]) {
        size_t have = strlen(l.late_deletes), add = strlen(c->announced);
        if (!strcmp(l.late_deletes, "*") || !strcmp(c->announced, "*") || have + add + 1 > sizeof l.late_deletes)
            snprintf(l.late_deletes, sizeof l.late_deletes, "*");
        else
            memcpy(l.late_deletes + have, c->announced, add + 1);
        l.has_late_deletes = 1;
    }
    /* how long a write of this writer's may land late, for whoever comes after a kill
     * (their own TANDEM_S3_TIMEOUT may be shorter) */
    double window = store_settle_window_s(c->st);
    if (window > 0) l.has_window = 1, l.settle_window = window;
    snprintf(l.host, sizeof l.host, "%s", c->host_name);
    /* what the pid means: a reader in another PID namespace or boot does not judge it */
    pidns_id me;
    pidns_self(&me);
    if (me.has_ns) l.has_pid_ns = 1, l.pid_ns = me.ns;
    if (me.has_boot) l.has_boot_id = 1, snprintf(l.boot_id, sizeof l.boot_id, "%s", me.boot);
    if (pidns_start_ticks(0, &l.start_ticks, NULL, 0) == 0) l.has_start = 1;
    size_t n;
    void *data = rec_lease_encode(&l, &n);
    int rc = store_put_if(c->st, LEDGER_LEASE, data, n, &c->lease_ver, &c->lease_ver, e);
    free(data);
    if (!rc && !released) c->lease_time = l.time;
    return rc; /* STORE_CONFLICT as it is: the callers judge it (a takeover reads again) */
}

int ckpt_announce_deletes(ckpt *c, const char *what, tdm_err *e) {
    if (!c->epoch || store_settle_window_s(c->st) <= 0) return 0; /* a file store's DELETE lands when it returns */
    size_t have = strlen(c->announced), add = strlen(what);
    if (!strcmp(c->announced, "*")) return 0; /* every kind named already */
    /* named already (a loop's every DELETE under one prefix): no lease write */
    for (const char *p = c->announced; (p = strstr(p, what)); p++)
        if ((p == c->announced || p[-1] == '\n') && p[add] == '\n') return 0;
    char was[sizeof c->announced];
    memcpy(was, c->announced, have + 1);
    if (!strcmp(what, "*") || have + add + 2 > sizeof c->announced) snprintf(c->announced, sizeof c->announced, "*");
    else snprintf(c->announced + have, sizeof c->announced - have, "%s\n", what);
    int rc = write_lease(c, 0, e);
    if (rc) memcpy(c->announced, was, have + 1); /* not named: its DELETEs are not sent either */
    if (rc == STORE_CONFLICT) {
        c->fenced = 1;
        rc = err_set(e, ERR_STORE, "%s: fenced out: the lease was taken over by another writer; this writer (epoch "
                     "%llu) stops without deleting what it was about to", store_url(c->st),
                     (unsigned long long)c->epoch);
    }
    return rc;
}

void ckpt_announce_settled(ckpt *c) {
    if (!c->announced[0]) return;
    c->announced[0] = '\0';
    tdm_err ignore;
    write_lease(c, 0, &ignore); /* a stale list only makes the next writer wait */
}

int ckpt_unvouched_at(const ckpt *c, uint64_t seq) { return c->has_unvouched && c->unvouched == seq; }

/* Whether the manifest data[0..n) at key is another run's: another seed, or another run's
 * identity (a damaged one is not judged here: the load sets those aside). */
static int foreign_manifest(const ckpt *c, const char *key, const void *data, size_t n) {
    rec_state s;
    tdm_err ignore;
    if (rec_state_decode(data, n, key, &s, &ignore)) return 0;
    int other = (c->has_seed && s.seed != c->seed) || (c->has_run && s.has_run && !sha256_equal(&s.run, &c->run));
    rec_state_free(&s);
    return other;
}

/* Keeps the state manifest at key (data[0..n)) aside under quarantine/ and removes it,
 * each under a lease check, saying "<store>/<key> <why>; kept aside as ... and removed".
 * 0 also where it is gone already. */
static int set_aside_state(ckpt *c, const char *key, const void *data, size_t n, const char *why, tdm_err *e) {
    int rc = ckpt_check_lease(c, e);
    char dst[REC_KEY_MAX + 64];
    if (!rc) rc = ckpt_keep_aside(c->st, c->epoch, key, data, n, dst, sizeof dst, e);
    if (!rc) fprintf(stderr, "tandem: %s/%s %s; kept aside as %s and removed\n", store_url(c->st), key, why, dst);
    if (!rc) rc = ckpt_check_lease(c, e);
    if (!rc) rc = store_delete(c->st, key, e);
    return rc == STORE_NOT_FOUND ? 0 : rc;
}

/* The states of another run (another seed, or another run's identity) that no commit of
 * this run replaced — past its end, off its cadence, or behind the state it resumed from —
 * kept aside and removed at the run's end, so that a finished run's store verifies (before,
 * verify named them for good, and neither a run nor repair had anything left to do). Every
 * state listed is read and judged again: one a commit replaced is this run's now. */
static int set_aside_foreign(ckpt *c, tdm_err *e) {
    if (!c->has_seed && !c->has_run) return 0; /* nothing to judge them by */
    store_list l = {0};
    int rc = store_list_prefix(c->st, LEDGER_STATES, &l, e);
    for (size_t i = 0; !rc && i < l.n; i++) {
        uint64_t seq;
        if (ledger_key_index(l.keys[i], LEDGER_STATES, &seq)) continue;
        char key[64];
        ledger_state_key(key, sizeof key, seq);
        void *data = NULL;
        size_t n = 0;
        rc = store_get(c->st, key, &data, &n, NULL, e);
        if (rc == STORE_NOT_FOUND) {
            rc = 0;
            continue;
        }
        if (!rc && foreign_manifest(c, key, data, n))
            rc = set_aside_state(c, key, data, n, "(another run's state) was not replaced by a commit of this run "
                                 "(past its end, off its cadence, or behind where it resumed)", e);
        free(data);
    }
    store_list_free(&l);
    return rc;
}

int ckpt_set_aside_unreached(ckpt *c, tdm_err *e) {
    int frc = set_aside_foreign(c, e);
    if (frc) return frc;
    uint64_t last = ckpt_last_commit_seq(c);
    if (!c->has_unvouched || (last != UINT64_MAX && last >= c->unvouched)) return 0; /* compared at its commit */
    char key[64];
    ledger_state_key(key, sizeof key, c->unvouched);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(c->st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 0;
    if (!rc) rc = set_aside_state(c, key, data, n, "lay past HEAD and past the run's end, where no commit of this run "
                                  "reaches: another run's state copied or synced in", e);
    free(data);
    if (!rc) c->has_unvouched = 0;
    return rc;
}

/* Whether lease l is this writer's: its epoch, and the pid and host write_lease puts there
 * (the epoch alone no longer vouches: see ckpt_check_lease). */
static int lease_is_ours(const ckpt *c, const rec_lease *l) {
    return l->epoch == c->epoch && l->pid == (uint64_t)getpid() && !strcmp(l->host, c->host_name);
}

/* The lease still carries our epoch; otherwise we were fenced out by a newer writer.
 * Called before every object a commit writes, from several upload threads at once:
 * touches nothing of *c but reads. */
int ckpt_check_lease(ckpt *c, tdm_err *e) {
    rec_lease l;
    int present;
    store_version ver;
    int rc = fetch_lease(c, &l, &present, &ver, e);
    if (rc) return rc;
    /* our epoch with another writer's pid or host: an older tandem that could not read
     * this writer's lease replaced it, going on from HEAD's epoch — with no HEAD yet, 1 —
     * and a writer after it took this writer's epoch again (a hunt across versions: both
     * wrote, verify found a manifest no HEAD names). The epoch alone no longer vouches. */
    int ours = present && lease_is_ours(c, &l);
    if (!present) {
        /* no lease at all: nobody took it — the store was moved or deleted under this
         * writer (a hunt moving stores: "belongs to writer epoch 0 (host ?, pid 0)") */
        c->fenced = 1;
        return err_set(e, ERR_STORE, "%s: fenced out: the lease is gone from the store (moved or deleted under this writer?): "
                       "this writer (epoch %llu) stops without writing more; resume the run where the store is now",
                       store_url(c->st), (unsigned long long)c->epoch);
    }
    if (!ours) {
        c->fenced = 1;
        return err_set(e, ERR_STORE,
                       "%s: fenced out: the lease now belongs to writer epoch %llu (host %s, pid "
                       "%llu); this writer (epoch %llu) stops without writing more",
                       store_url(c->st), present ? (unsigned long long)l.epoch : 0ULL,
                       present ? l.host : "?", present ? (unsigned long long)l.pid : 0ULL,
                       (unsigned long long)c->epoch);
    }
    return 0;
}

/* How often the HEAD stamp (and a HEAD move that an older writer's last commit overtook)
 * is tried again after a stale writer's last commit slipped in. */
enum { CKPT_STAMP_TRIES = 4 };
/* How often a takeover reads the lease again when it changed between the read and the
 * write (the old writer released it meanwhile, or another tandem started at the same
 * instant). */
enum { CKPT_LEASE_TRIES = 4 };

/* Reads the lease a takeover replaces into *old (*present = 0 when there is none, or
 * when it does not decode: then it is replaced, and *from_head is the epoch to go on
 * from, HEAD's). c->lease_ver gets its version, for the compare-and-swap of the write. */
static int read_for_takeover(ckpt *c, rec_lease *old, int *present, uint64_t *from_head, tdm_err *e) {
    *from_head = 0;
    int rc = read_lease(c, old, present, e);
    /* an epoch at the top of its range (the lease has no digest of its own: written by
     * hand) would wrap to 0 — the new writer below every older one, and 0 reads as "no
     * lease taken" at release. Replaced as an undecodable lease is */
    if (!rc && *present && old->epoch == UINT64_MAX)
        rc = err_set(e, ERR_STORE, "%s/lease records writer epoch %llu, past which no epoch can go (damage)",
                     store_url(c->st), (unsigned long long)old->epoch);
    if (rc == ERR_STORE && strstr(e->msg, "/lease")) {
        /* an undecodable lease is replaced: it only ever held a number. The epoch goes on
         * from HEAD's (stamped by every writer that took the lease), so that this writer's
         * quarantine/<epoch>/ is not an earlier writer's */
        fprintf(stderr, "tandem: %s; replacing it\n", e->msg);
        *present = 0;
        old->epoch = 0;
        void *d;
        size_t n;
        rc = store_get(c->st, LEDGER_LEASE, &d, &n, &c->lease_ver, e);
        if (rc == 0) free(d);
        if (rc == STORE_NOT_FOUND) rc = 0, c->lease_ver.v[0] = '\0';
        tdm_err ignore; /* no HEAD (or none that decodes): from epoch 0, as before */
        if (!rc && store_get(c->st, LEDGER_HEAD, &d, &n, NULL, &ignore) == 0) {
            rec_head h;
            if (rec_head_decode(d, n, LEDGER_HEAD, &h, &ignore) == 0 && h.epoch < UINT64_MAX) *from_head = h.epoch;
            free(d);
        }
    }
    return rc;
}

int ckpt_acquire(ckpt *c, uint64_t attempt, tdm_err *e) {
    rec_lease old;
    int present = 0, rc = 0;
    double lease_age = -1; /* the released lease's age on the store's clock, -1 unknown */
    c->attempt = attempt;
    /* The lease is replaced by compare-and-swap against the version read. A conflict is
     * the old writer releasing it between our read and our write, or another tandem
     * taking it at the same instant: read it again and take over what is there now (a
     * writer that took it meanwhile is fenced out at its next commit, as any other).
     * What is said of the lease replaced comes after the write, so that it is about the
     * lease that was there, not one read before it changed. */
    for (int tries = 0;; tries++) {
        uint64_t from_head = 0;
        rc = read_for_takeover(c, &old, &present, &from_head, e);
        if (rc) {
            c->epoch = 0; /* a retry's epoch was never ours (it may be the winner's): none to release */
            return rc;
        }
        /* read before this writer's lease replaces it (a newer one read as younger: the
         * window then counts as longer, the safe side) */
        tdm_err ae;
        lease_age = -1;
        if (present && old.released && old.has_settle && store_age(c->st, LEDGER_LEASE, &lease_age, &ae) != 0)
            lease_age = -1;
        c->epoch = (present ? old.epoch : from_head) + 1;
        testhook_stop_at("lease-put"); /* frozen here by the tests: the lease read, ours not written */
        rc = write_lease(c, 0, e);
        if (rc != STORE_CONFLICT) break;
        if (tries + 1 >= CKPT_LEASE_TRIES) {
            c->epoch = 0; /* none taken: nothing to release */
            return err_set(e, ERR_STORE, "%s: the lease changed %d times while this writer tried to take "
                           "it over (other tandems are starting on the store at the same moment); only "
                           "one tandem may run on a store: stop the others, then start this one again "
                           "(nothing was written)", store_url(c->st), tries + 1);
        }
    }
    if (rc) {
        c->epoch = 0;
        return rc;
    }
    if (present && !old.released) {
        char shown[64]; /* the store's text: its control characters as '?' (util/term.h) */
        term_copy(shown, sizeof shown, old.host);
        fprintf(stderr,
                "tandem: taking over the lease of writer epoch %llu (host %s, pid %llu, attempt "
                "%llu) that did not release it; if that process is still alive it will be "
                "fenced out at its next commit\n",
                (unsigned long long)old.epoch, shown, (unsigned long long)old.pid,
                (unsigned long long)old.attempt);
        /* a write it gave up on before it was killed may still land (S3: held in a proxy):
         * retention keeps what such a write could recreate until it cannot — for this
         * writer's window, or the killed one's where it said a longer one */
        store_note_lost_writer(c->st, 0);
        if (old.has_window && old.settle_window > store_settle_window_s(c->st))
            store_note_lost_writer(c->st, fmin(old.settle_window, CKPT_SETTLE_MAX_S));
        /* and the DELETEs it named before it sent them (ckpt_announce_deletes): when it was
         * killed is unknown, so they may land for a whole window from now */
        double w = store_settle_window_s(c->st);
        if (old.has_window && old.settle_window > w) w = old.settle_window;
        if (old.has_late_deletes && w > 0) note_late_deletes(c, &old, fmin(w, CKPT_SETTLE_MAX_S), 1);
    }
    /* a writer that released the lease with writes given up on said until when they may
     * land (an unreleased lease never says: above) */
    double left = present && old.has_settle ? audit_settle_left(&old, lease_age, ckpt_now_wall()) : 0;
    if (left > 0) {
        /* what is kept is at most CKPT_SETTLE_MAX_S: the message says that, not the
         * lease's own figure (a damaged one may say 1e300: 300 digits of seconds) */
        double kept = fmin(left, CKPT_SETTLE_MAX_S);
        if (left > CKPT_SETTLE_MAX_S)
            fprintf(stderr, "tandem: writes that writer epoch %llu gave up on may still land, its lease "
                    "says for more than %.0f s (the most this writer waits for): states they could "
                    "recreate are kept for %.0f s\n",
                    (unsigned long long)old.epoch, CKPT_SETTLE_MAX_S, kept);
        else
            fprintf(stderr, "tandem: writes that writer epoch %llu gave up on may still land for %.0f s; "
                    "states they could recreate are kept until then\n",
                    (unsigned long long)old.epoch, kept);
        store_note_lost_writer(c->st, kept);
        if (old.has_late_deletes) note_late_deletes(c, &old, kept, 0);
    }
    /* Stamp HEAD with our epoch: HEAD's version changes, so an older writer's next
     * compare-and-swap fails even if it checked the lease just before we took it.
     * Such a writer may still land the one commit it checked the lease for between our
     * read of HEAD and our stamp (the compare-and-swap then fails here): its next check
     * sees our lease, so it cannot move HEAD again — read HEAD again and stamp that. A
     * HEAD that keeps moving after that is a writer that ignores the lease.
     * Every stamp is preceded by a lease check, after the read of HEAD it replaces: a
     * newer writer that took the lease from us meanwhile (even its whole takeover between
     * our lease write and our read) has stamped HEAD or will read ours and stamp over it;
     * stamping its HEAD with our older epoch would fail its next compare-and-swap. */
    for (int tries = 0;; tries++) {
        void *data = NULL;
        size_t n = 0;
        rc = store_get(c->st, LEDGER_HEAD, &data, &n, &c->head_ver, e);
        if (rc == STORE_NOT_FOUND) {
            /* nothing to stamp: an older writer's last commit may still create HEAD, which
             * ckpt_put_head adopts when our first move of HEAD meets it */
            c->head_ver.v[0] = '\0';
            return 0;
        }
        if (rc) return rc;
        rec_head h;
        tdm_err ignore;
        if (rec_head_decode(data, n, LEDGER_HEAD, &h, &ignore) == 0) {
            c->commits = h.commits;
            h.epoch = c->epoch;
            if (tries == 0) testhook_stop_at("head-stamp");
            rc = ckpt_check_lease(c, e); /* fenced out: ERR_STORE, as at a commit */
            size_t hn;
            void *hd = rc ? NULL : rec_head_encode(&h, &hn);
            if (!rc) rc = store_put_if(c->st, LEDGER_HEAD, hd, hn, &c->head_ver, &c->head_ver, e);
            free(hd);
            if (rc == STORE_CONFLICT && tries < CKPT_STAMP_TRIES) {
                free(data);
                continue;
            }
            if (rc == STORE_CONFLICT)
                rc = err_set(e, ERR_STORE, "%s: HEAD changed %d times while taking the lease, after "
                             "this writer's lease was in place; a writer that ignores the lease is "
                             "active", store_url(c->st), tries + 1);
        }
        free(data);
        return rc;
    }
}

int ckpt_put_head(ckpt *c, rec_head *h, int bump, tdm_err *e) {
    for (int tries = 0;; tries++) {
        h->commits = c->commits + (uint64_t)bump;
        size_t hn;
        void *hd = rec_head_encode(h, &hn);
        int rc = store_put_if(c->st, LEDGER_HEAD, hd, hn, &c->head_ver, &c->head_ver, e);
        free(hd);
        if (rc != STORE_CONFLICT) return rc;
        if (tries >= CKPT_STAMP_TRIES) /* no fence (the lease is ours): say what it is */
            return err_set(e, ERR_STORE, "%s: HEAD was moved %d times by writers of older epochs while "
                           "this writer held the lease; a writer that ignores the lease is active",
                           store_url(c->st), tries + 1);
        /* HEAD changed since this writer last saw it. Written by an older epoch, it is
         * that writer's one commit in flight, whose lease check came before our
         * takeover — HEAD was missing then (nothing to stamp), or our stamp was
         * overtaken: legitimate, and it cannot move HEAD again (its next check sees our
         * lease). Anything else (a newer epoch, a HEAD that does not decode) is another
         * writer: the caller's conflict. The lease is checked after the read, as for
         * the stamp. */
        void *data = NULL;
        size_t n = 0;
        store_version ver;
        tdm_err ge;
        int grc = store_get(c->st, LEDGER_HEAD, &data, &n, &ver, &ge);
        if (grc == STORE_NOT_FOUND) /* HEAD deleted under a move: no writer does that */
            return err_set(e, ERR_STORE, "%s/HEAD was deleted while this writer moved it; another "
                           "program is changing the store", store_url(c->st));
        if (grc) { /* a store error reading it back: that error, not a fence */
            *e = ge;
            return grc;
        }
        rec_head seen;
        int older = rec_head_decode(data, n, LEDGER_HEAD, &seen, &ge) == 0 && seen.epoch < c->epoch;
        free(data);
        if (!older) return STORE_CONFLICT;
        rc = ckpt_check_lease(c, e);
        if (rc) return rc;
        fprintf(stderr, "tandem: %s/HEAD was moved to %s (run position %llu) by the last commit of "
                "writer epoch %llu, which checked the lease before this writer (epoch %llu) took it "
                "over; this writer moves it on from there\n", store_url(c->st), seen.state,
                (unsigned long long)seen.seq, (unsigned long long)seen.epoch, (unsigned long long)c->epoch);
        c->head_ver = ver;
        c->head_note[0] = '\0'; /* what the load found wrong with HEAD is no longer so */
        if (seen.commits > c->commits) c->commits = seen.commits;
    }
}

int ckpt_release(ckpt *c, tdm_err *e) {
    if (c->epoch == 0) return 0;
    testhook_stop_at("release"); /* frozen here by the tests: the work done, the lease not released */
    int was_fenced = c->fenced;
    rec_lease l;
    int present;
    store_version ver;
    int rc = fetch_lease(c, &l, &present, &ver, e);
    if (rc) return rc;
    /* The lease another writer's now (taken over after this writer's last write, or
     * between the read above and the write below): there is nothing of ours to release,
     * and the work this writer did is committed — a note, not a failure of the run. */
    if (present && lease_is_ours(c, &l)) { /* another writer that holds our epoch again: not ours to release */
        rc = write_lease(c, 1, e);
        if (rc != STORE_CONFLICT) return rc;
        tdm_err ignore; /* taken over between the read and the write: by whom, for the note */
        if (fetch_lease(c, &l, &present, &ver, &ignore)) present = 0;
    }
    c->fenced = 1;
    char shown[64] = "?"; /* the store's text: its control characters as '?' (util/term.h) */
    if (present) term_copy(shown, sizeof shown, l.host);
    if (!was_fenced && !present) /* not "taken over by writer epoch 0 (host ?, pid 0)": no writer (hunt) */
        fprintf(stderr, "tandem: %s/lease is gone from the store (moved or deleted under this writer, epoch %llu?); "
                "nothing to release (what this writer committed stands)\n", store_url(c->st),
                (unsigned long long)c->epoch);
    else if (!was_fenced)
        fprintf(stderr, "tandem: %s/lease was taken over by writer epoch %llu (host %s, pid %llu) after "
                "this writer's (epoch %llu) last write; nothing to release (what this writer "
                "committed stands)\n", store_url(c->st), (unsigned long long)l.epoch, shown,
                (unsigned long long)l.pid, (unsigned long long)c->epoch);
    return 0;
}
