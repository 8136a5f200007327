/* ckpt_commit.c — full commits: blobs (hashed and stored by a few threads), the manifest,
 * HEAD by compare-and-swap; the background writer; snapshots and streaming; see ckpt.h. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ledger/audit.h"
#include "ledger/ckpt_impl.h"
#include "ledger/keys.h"
#include "ledger/retain.h"
#include "storage/sha256.h"
#include "util/testhook.h"


/* Whether a blob of digests[0..n) is missing from the store (one that cannot be asked
 * about counts as there: only a manifest known to name blobs that are gone is taken
 * back). */
static int ckpt_blobs_missing(ckpt *c, const sha256_digest *digests, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char key[80];
        ckpt_blob_key(&digests[i], key);
        int exists = 1;
        tdm_err e;
        if (store_exists(c->st, key, &exists, &e) == 0 && !exists) return 1;
    }
    return 0;
}

static int ckpt_fenced(const ckpt *c) { return c->fenced; }

/* Whether a state of this writer's generation at run position seq belongs to the run as
 * the store records its config changes now (configs/ read again): a writer that took the
 * run over with a change may have ended this writer's generation before seq. One that
 * cannot be read counts as belonging (only a manifest known to be unsound is taken back). */
static int ckpt_belongs_now(ckpt *c, uint64_t seq) {
    if (c->legacy) return 1;
    ckpt_gens g;
    tdm_err ge;
    if (audit_generation(c->st, &g, &ge) != 0) {
        ckpt_gens_free(&g);
        return 1;
    }
    int ok = ckpt_gen_belongs(1, c->gens.n, seq, &g);
    ckpt_gens_free(&g);
    return ok;
}

/* A fenced-out writer's manifest at `key` (manifest, mn), which it had just created: this
 * writer was frozen between its lease check and the write, and a new writer may have run
 * on meanwhile. Taken back when it is not sound for the store as it now is — blobs it names
 * are gone (the new writer's retention deleted them, the key free again), or it was
 * computed under a config generation the store's changes have superseded at its position —
 * and only while the key still holds these very bytes (never a manifest the new writer
 * wrote over it). A sound one stays: the new writer may have adopted it (its replay of the
 * position gives the same bytes) and HEAD may name it. Best effort, said on stderr. */
static void take_back(ckpt *c, const char *key, const void *manifest, size_t mn, uint64_t seq,
                      const sha256_digest *digests, size_t n) {
    const char *why = ckpt_blobs_missing(c, digests, n) ? "whose blobs are gone"
                      : !ckpt_belongs_now(c, seq)      ? "whose config generation the run has superseded"
                                                        : NULL;
    if (!why) return;
    void *now = NULL;
    size_t nn = 0;
    tdm_err de;
    if (store_get(c->st, key, &now, &nn, NULL, &de) != 0) return;
    int ours = nn == mn && memcmp(now, manifest, mn) == 0;
    free(now);
    if (ours && store_delete(c->st, key, &de) == 0)
        fprintf(stderr, "tandem: %s/%s, which this fenced-out writer had just written and %s, was "
                "taken back\n", store_url(c->st), key, why);
}

/* ------------------------------------------------------------------ blobs */

void ckpt_blob_key(const sha256_digest *d, char key[8 + SHA256_HEX_LEN + 1]) {
    ledger_blob_key(key, 8 + SHA256_HEX_LEN + 1, d);
}

void ckpt_set_known(ckpt *c, sha256_digest *chunks, size_t n) {
    digest_set_free(&c->known);
    free(c->known_ok);
    c->known_ok = NULL;
    int ok = 1;
    for (size_t i = 0; ok && chunks && i < n; i++) ok = digest_set_add(&c->known, &chunks[i]) >= 0;
    free(chunks);
    if (ok && c->known.n) c->known_ok = calloc(c->known.n, sizeof *c->known_ok);
    if (!c->known_ok) digest_set_free(&c->known); /* out of memory: every chunk is stored again (create-only) */
}

/* Whether chunk d (its blob `key`) is one of the last state's and still in the store:
 * then this commit need not store it. The last state's chunks were stored intact, but
 * another process may have deleted one since — an older tandem's gc that could not read
 * this writer's lease (it took it for none), an object lifecycle rule, a hand — and a
 * commit that trusted the list named blobs that were gone in every later state (a finished
 * run with no state that loads, exit 0; found by a hunt across versions). So each is
 * looked for once per commit (a chunk that does not change, such as the moments of rows
 * no batch touches, is shared by every state): *skip set when it need not be stored. */
static void known_and_there(ckpt *c, const sha256_digest *d, const char *key, int *skip) {
    *skip = 0;
    size_t i = digest_set_find(&c->known, d);
    if (i == SIZE_MAX) return;
    if (atomic_load(&c->known_ok[i]) == c->known_gen) {
        *skip = 1;
        return;
    }
    int there = 0;
    tdm_err xe;
    /* an answer that did not come: stored again (create-only: a blob there is compared, not
     * overwritten), rather than fail a commit over a chunk that needed no request (review) */
    if (store_exists(c->st, key, &there, &xe)) return;
    if (there) {
        atomic_store(&c->known_ok[i], c->known_gen);
        *skip = 1;
        return;
    }
    fprintf(stderr, "tandem: %s/%s, a chunk the last state shares with this one, is gone from the store "
            "(deleted by another process since: an older tandem's gc, a lifecycle rule); storing it again\n",
            store_url(c->st), key);
}

/* The error of a commit given up before its next object (a cancel, or the stop check). */
static int given_up(ckpt *c, tdm_err *e) {
    return err_set(e, ERR_STORE, "%s: the commit was given up (no time left before the stop)",
                   store_url(c->st));
}

/* outlast_late_delete's round: keeps the grace decision's estimate of the wait current,
 * and gives the wait up on a cancel or the stop check — for a commit of any kind: a stop
 * that came while the run waited on its last commit (an α record's write or the end of the
 * run wait for it, no safe point between) held the run through the whole wait, past its
 * grace, and the lease was never given back (the store's deadline had passed). */
static int late_delete_round(void *ctx, double left) {
    ckpt *c = ctx;
    pthread_mutex_lock(&c->mu);
    if (ckpt_now_mono() + left > c->late_until) c->late_until = ckpt_now_mono() + left;
    pthread_mutex_unlock(&c->mu);
    if (atomic_load(&c->cancel)) return 1;
    return c->stream ? ckpt_stream_should_stop(c) : ckpt_stop_outlasts(c, left);
}

/* A commit that the stop check gave up (given_up) is not a failure: the last full state
 * stands, said on stderr; rc otherwise. */
static int given_up_ok(ckpt *c, int rc) {
    if (!rc || !atomic_load(&c->given_up)) return rc;
    uint64_t last = ckpt_last_commit_seq(c); /* UINT64_MAX: none yet (a resume starts from the seed) */
    char stands[64] = "none yet: the resume starts from the beginning";
    if (last != UINT64_MAX) snprintf(stands, sizeof stands, "run position %llu", (unsigned long long)last);
    fprintf(stderr, "tandem: the commit of run position %llu was given up for the stop (the rest would not "
            "finish in time); the last full state (%s) stands\n", (unsigned long long)c->snap.seq, stands);
    atomic_store(&c->cancel, 0);
    atomic_store(&c->given_up, 0);
    atomic_store(&c->stopped_short, 1);
    return 0;
}

/* The same round for a record written outside a commit (an α record, a metrics row, from
 * the run's own thread): the stop check alone, which touches no commit's flags (it gave a
 * commit in flight up, and the record's write exited 3, not 75: review). */
static int record_late_delete_round(void *ctx, double left) {
    ckpt *c = ctx;
    return c->stop_fn && c->stop_fn(c->stop_arg, left);
}

int ckpt_outlast_late_delete_record(ckpt *c, const char *key, tdm_err *e) {
    if (store_delete_unsettled_s(c->st, key) <= 0) return 0;
    if (!store_outlast_delete(c->st, key, record_late_delete_round, c)) return 0;
    /* given up for the stop, as a request given up at the stop's deadline is: a requeue
     * (exit 75), the records up to it standing */
    store_note_deadline();
    return err_set(e, ERR_STORE, "%s/%s: not written: a DELETE of it given up on could still land, and the wait "
                   "would outlast the grace period after the stop", store_url(c->st), key);
}

int ckpt_outlast_late_delete(ckpt *c, const char *key, tdm_err *e) {
    if (store_delete_unsettled_s(c->st, key) <= 0) return 0;
    double t0 = ckpt_now_mono();
    int rc = store_outlast_delete(c->st, key, late_delete_round, c) ? given_up(c, e) : 0;
    pthread_mutex_lock(&c->mu);
    double waited = ckpt_now_mono() - t0; /* the I/O threads wait side by side: the longest counts */
    if (waited > c->late_waited) c->late_waited = waited;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Stores one chunk unless it is already stored intact; repairs a corrupt copy.
 * (TANDEM_TEST_BLOB_DELAY_MS slows every write: a throttled store, for the tests.) */
static int put_blob(ckpt *c, const sha256_digest *d, const void *data, size_t n, tdm_err *e) {
    char key[80];
    ckpt_blob_key(d, key);
    int skip;
    known_and_there(c, d, key, &skip);
    if (skip) return 0;
    testhook_kill_at("blob");
    testhook_sleep("TANDEM_TEST_BLOB_DELAY_MS");
    if (atomic_load(&c->cancel) || ckpt_stream_should_stop(c)) return given_up(c, e);
    int rc = ckpt_outlast_late_delete(c, key, e);
    if (!rc) rc = ckpt_check_lease(c, e); /* a fenced-out writer writes nothing more */
    if (rc) return rc;
    void *old = NULL;
    size_t on = 0;
    rc = ckpt_put_once(c, key, data, n, &old, &on, NULL, e);
    if (rc == 0) atomic_fetch_add(&c->blobs_created, 1);
    if (rc != STORE_EXISTS) return rc;
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

static int fill_views(rec_state *r, const ckpt_layout *lay, tdm_err *e) {
    r->nviews = (size_t)lay->nviews;
    r->views = calloc(r->nviews ? r->nviews : 1, sizeof *r->views);
    if (!r->views) return err_set(e, ERR_INTERNAL, "out of memory");
    if (r->nviews) memcpy(r->views, lay->views, r->nviews * sizeof *r->views);
    return 0;
}


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
int ckpt_transfer(ckpt *c, int t, uint64_t off, size_t len, uint8_t *buf, int down, tdm_err *e) {
    float *d = c->dev[t] + off / sizeof(float);
    pthread_mutex_lock(&c->dev_mu);
    int rc = down ? c->io.download(c->io.ctx, (float *)buf, d, len / sizeof(float), e)
                  : c->io.upload(c->io.ctx, d, (const float *)buf, len / sizeof(float), e);
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
            if ((j->rc = ckpt_transfer(j->c, (int)t, off, len, j->buf, 1, &j->e))) break;
            data = j->buf;
        }
        sha256(data, len, &rt->chunks[k]);
        j->rc = put_blob(j->c, &rt->chunks[k], data, len, &j->e);
        if (atomic_fetch_add(&j->c->done_bytes, (unsigned long long)len) == 0) {
            /* the commit's first bytes: a stop waiting in ckpt_await_pace can now judge its pace */
            pthread_mutex_lock(&j->c->mu);
            pthread_cond_broadcast(&j->c->cv);
            pthread_mutex_unlock(&j->c->mu);
        }
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
    testhook_kill_at("retain");
    if (ckpt_check_lease(c, &re) == 0 && retain_after_commit(c->st, c->keep, &rep, &re) != 0)
        fprintf(stderr, "tandem: keeping the newest %ld states after the commit failed (%s); the "
                "commit holds, the next one tries again\n", c->keep, re.msg);
}

static int commit(ckpt *c, tdm_err *e) {
    rec_state *r = &c->snap;
    size_t nchunks = chunk_count(c), numel = c->lay->numel;
    atomic_store(&c->blobs_created, 0);
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
        snprintf(rt->name, sizeof rt->name, "%s", ckpt_tensor_names[t]);
        snprintf(rt->dtype, sizeof rt->dtype, "f32");
        rt->ndim = 1;
        rt->shape[0] = numel;
        rt->chunk_bytes = c->chunk_bytes;
        rt->nchunks = nchunks;
        rt->chunks = calloc(nchunks, sizeof *rt->chunks);
        if (!rt->chunks) rc = err_set(e, ERR_INTERNAL, "out of memory");
    }
    size_t total = CKPT_TENSORS * nchunks;
    size_t nthreads = total < CKPT_IO_THREADS ? total : CKPT_IO_THREADS;
    upload_job jobs[CKPT_IO_THREADS];
    pthread_t tids[CKPT_IO_THREADS];
    int created[CKPT_IO_THREADS] = {0};
    uint8_t *bufs[CKPT_IO_THREADS] = {0};
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
    for (size_t w = 0; w < CKPT_IO_THREADS; w++) free(bufs[w]);
    for (int t = 0; !rc && t < CKPT_TENSORS; t++)
        memcpy(all + t * nchunks, r->tensors[t].chunks, nchunks * sizeof *all);
    if (rc) {
        free(all);
        return rc;
    }
    r->has_gen = !c->legacy;
    r->gen = c->gens.n;
    r->has_run = c->has_run && !c->legacy && !c->legacy_run;
    if (r->has_run) r->run = c->run;
    size_t mn;
    void *manifest = rec_state_encode(r, &mn);
    sha256_digest msha;
    sha256(manifest, mn, &msha);
    char key[64];
    ledger_state_key(key, sizeof key, r->seq);
    testhook_kill_at("manifest");
    rc = ckpt_outlast_late_delete(c, key, e); /* before the lease check: the wait may be long */
    if (!rc) rc = ckpt_check_lease(c, e);
    if (!rc) testhook_stop_at("manifest-put");
    /* TANDEM_TEST_FAIL_AT=state-put:n: the n-th manifest write fails, as a store that
     * turned unwritable (a background commit's failure, noticed at the next step) */
    if (!rc && testhook_hit("TANDEM_TEST_FAIL_AT", "state-put"))
        rc = err_set(e, ERR_STORE, "%s/%s: the store refused the write (TANDEM_TEST_FAIL_AT)",
                     store_url(c->st), key);
    void *old = NULL;
    size_t on = 0;
    store_version ver;
    if (!rc) rc = ckpt_put_once(c, key, manifest, mn, &old, &on, &ver, e);
    int made = rc == 0; /* this writer's manifest, new under its key */
    if (rc == STORE_EXISTS) {
        /* a replay of this position: the stored manifest must be ours, byte for byte */
        rc = 0;
        /* or as a version before "seen", or before "run", wrote it: that manifest stays,
         * HEAD names it (pn: its length then). And the other way round: a writer resumed
         * from a state without "run" writes none, where this run's replay from its seed had
         * written it with one (review) */
        size_t pn = 0;
        for (int v = 1; v < 4 && !pn && !(on == mn && memcmp(old, manifest, mn) == 0); v++) {
            if (((v & 1) && !r->has_seen) || ((v & 2) && !r->has_run && !c->has_run)) continue;
            rec_state q = *r;
            if (v & 1) q.has_seen = 0;
            if (v & 2) q.has_run = !r->has_run, q.run = c->run;
            void *plain = rec_state_encode(&q, &pn);
            if (plain && pn == on && memcmp(old, plain, pn) == 0) sha256(old, on, &msha);
            else pn = 0;
            free(plain);
        }
        /* the replay agrees with the stored manifest, yet stored blobs it names that were
         * not there: that state was missing them (deleted since), now whole again — said,
         * as verify said it (a chaos case: a blob of the state past HEAD deleted, which the
         * run, resuming from HEAD's state, mended without a word) */
        unsigned long long healed = atomic_load(&c->blobs_created);
        if ((pn || (on == mn && memcmp(old, manifest, mn) == 0)) && healed)
            fprintf(stderr, "tandem: %s/%s named %llu blob%s missing from the store; the replay stored %s again\n",
                    store_url(c->st), key, healed, healed == 1 ? "" : "s", healed == 1 ? "it" : "them");
        if (!pn && !(on == mn && memcmp(old, manifest, mn) == 0)) {
            rec_state probe;
            tdm_err de;
            int rejected = 0;
            for (size_t i = 0; i < c->nrejected; i++) rejected |= c->rejected[i] == r->seq;
            /* damaged (its own digest says so, or it does not decode): not evidence */
            int bad = rec_state_decode(old, on, key, &probe, &de) != 0;
            int has_gen = bad ? 0 : probe.has_gen;
            uint64_t gen = bad ? 0 : probe.gen, seq = bad ? 0 : probe.seq;
            if (!bad) rec_state_free(&probe);
            if (ckpt_judge_stored(c, key, old, on, &ver, bad ? de.msg : NULL, has_gen, gen, seq,
                                  manifest, mn, &rc, e)) {
                /* settled: replaced, or fenced out */
            } else if (c->has_unvouched && c->unvouched == r->seq) {
                /* the one state past HEAD the load went past: not this run's cut-off commit,
                 * which the replay would have reproduced byte for byte */
                rc = ckpt_replace_object(c, key, old, on, &ver,
                                         "lay past HEAD and is not what the replay computes: another run's "
                                         "state copied or synced in (or, if no copy was made, a nondeterministic "
                                         "replay: compare the copy kept aside)",
                                         manifest, mn, e);
            } else if (rejected) {
                /* the load found it unusable (a chunk missing or corrupt): what it says of
                 * tensors nobody can read is no evidence of anything */
                rc = ckpt_replace_object(c, key, old, on, &ver,
                                         "was passed over at the load (a chunk it names missing or "
                                         "corrupt, another run's, or past HEAD with others: see above)",
                                         manifest, mn, e);
            } else {
                sha256_digest od;
                sha256(old, on, &od);
                char h1[65], h2[65];
                sha256_hex(&msha, h1);
                sha256_hex(&od, h2);
                rc = err_set(e, ERR_NONDET,
                             "nondeterminism at run position %llu (episode %llu): the replayed "
                             "state hashes to %s but %s holds %s; nothing was overwritten. %s",
                             (unsigned long long)r->seq, (unsigned long long)r->episode, h1, key,
                             h2, CKPT_NONDET_HINT);
            }
        }
        free(old);
    }
    if (!rc) {
        testhook_kill_at("head");
        rc = ckpt_check_lease(c, e);
        /* fenced out after its manifest went in: this writer was frozen between its lease
         * check and the write, and a new writer may have run on and deleted that position's
         * blobs (its retention) — the manifest, created under a key that was free again,
         * names blobs that are gone. Taken back then, and only then: with its blobs all
         * there it is a sound state the new writer may have adopted (its replay gives the
         * same bytes) and HEAD may name; a lease that could not be read is no fence */
        if (rc && made && ckpt_fenced(c))
            take_back(c, key, manifest, mn, r->seq, all, (size_t)CKPT_TENSORS * nchunks);
    }
    if (!rc) {
        testhook_stop_at("head-put");
        rec_head h = {.seq = r->seq, .state_sha = msha, .epoch = c->epoch, .time = ckpt_now_wall()};
        snprintf(h.state, sizeof h.state, "%s", key);
        rc = ckpt_put_head(c, &h, 1, e); /* goes on over an older writer's last commit */
        if (rc == STORE_CONFLICT) {
            c->fenced = 1; /* as a lease check would: its release then says nothing more */
            rc = err_set(e, ERR_STORE,
                         "%s: fenced out: HEAD was moved by another writer; this writer (epoch "
                         "%llu) stops without moving it",
                         store_url(c->st), (unsigned long long)c->epoch);
        }
        if (!rc) c->commits++;
    }
    free(manifest);
    if (rc) {
        free(all);
        return rc;
    }
    ckpt_set_known(c, all, CKPT_TENSORS * nchunks);
    pthread_mutex_lock(&c->mu);
    c->last_time = ckpt_now_mono();
    c->last_seq = r->seq;
    if (c->commit_started > 0 && c->last_time > c->commit_started) {
        c->last_seconds = c->last_time - c->commit_started;
        /* the pace of its writes: a late DELETE's wait (outlast_late_delete) is no measure of it */
        double writing = c->last_seconds - c->late_waited;
        if (writing > 0) c->rate = (double)CKPT_TENSORS * (double)numel * 4.0 / writing;
    }
    pthread_mutex_unlock(&c->mu);
    retain_now(c);
    return 0;
}

void *ckpt_writer_main(void *arg) {
    ckpt *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->pending && !c->quit) pthread_cond_wait(&c->cv, &c->mu);
        if (!c->pending) break;
        pthread_mutex_unlock(&c->mu);
        tdm_err e = {0};
        int rc = given_up_ok(c, commit(c, &e));
        pthread_mutex_lock(&c->mu);
        c->result = rc;
        c->result_err = e;
        atomic_store(&c->bg_failed, rc != 0);
        c->pending = 0;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

double ckpt_commit_estimate(ckpt *c, double *inflight_out) {
    double bytes = (double)CKPT_TENSORS * (double)c->lay->numel * 4.0;
    pthread_mutex_lock(&c->mu);
    double rate = c->rate;
    /* what is left of a commit in flight, at the pace it has kept so far once it has
     * written something (else at the last commit's, or the guess) */
    double inflight = 0;
    if (c->pending && c->commit_started > 0) {
        double done = (double)atomic_load(&c->done_bytes), spent = ckpt_now_mono() - c->commit_started;
        double pace = done > 0 && spent > 0 ? done / spent : 0;
        double r = pace > 0 ? pace : rate > 0 ? rate : c->unmeasured_rate;
        inflight = (bytes - done) / r;
        if (inflight < 0) inflight = 0;
        /* a late DELETE's wait still ahead of it (outlast_late_delete) */
        double late = c->late_until - ckpt_now_mono();
        if (late > 0) inflight += late;
        /* a first commit's pace is a measurement too: better than the guess */
        if (rate <= 0) rate = pace;
    }
    if (rate <= 0) rate = c->unmeasured_rate;
    pthread_mutex_unlock(&c->mu);
    if (inflight_out) *inflight_out = inflight;
    return inflight + bytes / rate;
}

int ckpt_rate_measured(ckpt *c) {
    pthread_mutex_lock(&c->mu);
    int measured = c->rate > 0 || (c->pending && atomic_load(&c->done_bytes) > 0);
    pthread_mutex_unlock(&c->mu);
    return measured;
}

void ckpt_await_pace(ckpt *c, double seconds) {
    double until = ckpt_now_mono() + seconds;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        double now = ckpt_now_mono(), pace_at = c->commit_started + CKPT_PACE_S;
        if (!c->pending || c->rate > 0 || now >= until) break;
        if (atomic_load(&c->done_bytes) > 0 && now >= pace_at) break;
        /* woken by the commit's end or its first bytes (both broadcast cv), else at the
         * pace mark or the end of the wait, whichever comes first */
        double wake = now < pace_at && pace_at < until ? pace_at : until;
        struct timespec ts = {(time_t)wake, (long)((wake - (double)(time_t)wake) * 1e9)};
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
}

void ckpt_cancel(ckpt *c) {
    atomic_store(&c->cancel, 1);
    tdm_err ignore;
    ckpt_wait(c, &ignore); /* the writer stops before its next object */
    atomic_store(&c->cancel, 0);
    pthread_mutex_lock(&c->mu);
    c->result = 0; /* a given-up commit is not a failure of the run */
    atomic_store(&c->bg_failed, 0);
    pthread_mutex_unlock(&c->mu);
}

int ckpt_failed(ckpt *c, tdm_err *e) {
    if (!atomic_load(&c->bg_failed)) return 0;
    pthread_mutex_lock(&c->mu);
    int rc = c->pending ? 0 : c->result;
    if (rc && e) *e = c->result_err;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int ckpt_wait(ckpt *c, tdm_err *e) {
    pthread_mutex_lock(&c->mu);
    while (c->pending) pthread_cond_wait(&c->cv, &c->mu);
    int rc = c->result;
    if (rc && e) *e = c->result_err;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int ckpt_snapshot(ckpt *c, const rec_state *rec, const ckpt_tensor_io *io, float *const dev[CKPT_TENSORS],
                  int async, tdm_err *e) {
    int rc = ckpt_wait(c, e);
    if (rc) return rc;
    atomic_store(&c->cancel, 0); /* no commit in flight: a new one starts with neither set */
    atomic_store(&c->given_up, 0);
    c->commit_started = ckpt_now_mono();
    pthread_mutex_lock(&c->mu);
    c->late_until = c->late_waited = 0; /* this commit's own late-DELETE wait, if any */
    pthread_mutex_unlock(&c->mu);
    if (++c->known_gen == 0) c->known_gen = 1; /* each known chunk looked for again (known_and_there) */
    atomic_store(&c->stopped_short, 0);
    atomic_store(&c->done_bytes, 0);
    rec_state_free(&c->snap);
    c->snap = *rec;
    c->snap.views = NULL;
    c->snap.tensors = NULL;
    c->snap.nviews = c->snap.ntensors = 0;
    if (c->stream) {
        /* no copy to take: the commit reads the tensors chunk by chunk, before returning */
        c->io = *io;
        for (int t = 0; t < CKPT_TENSORS; t++) c->dev[t] = dev[t];
        atomic_store(&c->done_bytes, 0);
        atomic_store(&c->given_up, 0);
        rc = given_up_ok(c, commit(c, e)); /* given up for the stop: nothing moved */
        c->result = rc;
        if (rc) c->result_err = *e;
        return rc;
    }
    for (int t = 0; !c->stream && t < CKPT_TENSORS; t++)
        if ((rc = io->download(io->ctx, c->host[t], dev[t], c->lay->numel, e))) return rc;
    if (!async) {
        rc = given_up_ok(c, commit(c, e));
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
