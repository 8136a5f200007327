/* ckpt_load.c — verified loads (the newest state whose every chunk verifies, else an
 * older one), HEAD settled to the state the run resumes from; see ckpt.h. */
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

/* ------------------------------------------------------------------ load */

static int cmp_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

/* Checks that a decoded manifest describes this model (the pinned config guarantees
 * it unless the object is damaged). */
static int matches_layout(const ckpt *c, const rec_state *r, char *why, size_t cap) {
    if (r->ntensors != CKPT_TENSORS || r->nviews != (size_t)c->lay->nviews) {
        snprintf(why, cap, "it has %zu tensors and %zu views, not 3 and %d", r->ntensors,
                 r->nviews, c->lay->nviews);
        return 0;
    }
    for (int t = 0; t < CKPT_TENSORS; t++) {
        const rec_tensor *rt = &r->tensors[t];
        if (strcmp(rt->name, ckpt_tensor_names[t]) || rt->ndim != 1 || rt->shape[0] != c->lay->numel) {
            snprintf(why, cap, "tensor %d is %s with %llu elements, not %s with %zu", t, rt->name,
                     (unsigned long long)rt->shape[0], ckpt_tensor_names[t], c->lay->numel);
            return 0;
        }
    }
    for (int i = 0; i < c->lay->nviews; i++) {
        const rec_view *v = &r->views[i];
        const rec_view *mt = &c->lay->views[i];
        if (strcmp(v->name, mt->name) || v->rows != mt->rows || v->cols != mt->cols || v->offset != mt->offset) {
            snprintf(why, cap, "view %s does not match the model's tensor %s", v->name, mt->name);
            return 0;
        }
    }
    return 1;
}

/* Whether something that is no object stands at <prefix><t>.mp (store_obstacle): asked
 * only of the record a read stopped at (t < n; the records before it read). Asking every
 * key below a state's count stat'ed 2^32 of them for a state claiming so many records,
 * deaf to SIGTERM. */
static int ckpt_obstacle_at(ckpt *c, uint64_t t, uint64_t n, const char *prefix) {
    if (t >= n) return 0;
    char key[64];
    snprintf(key, sizeof key, "%s%llu.mp", prefix, (unsigned long long)t);
    return store_obstacle(c->st, key);
}

/* Whether the newest of the states seqs[0..n) (newest first) that decodes carries a seal:
 * a store whose states are sealed from some point on has every later one sealed. */
static int ckpt_older_sealed(ckpt *c, const uint64_t *seqs, size_t n) {
    for (size_t j = 0; j < n; j++) {
        char key[64];
        ledger_state_key(key, sizeof key, seqs[j]);
        void *data = NULL;
        size_t len = 0;
        tdm_err e;
        if (store_get(c->st, key, &data, &len, NULL, &e)) continue;
        rec_state r;
        int ok = rec_state_decode(data, len, key, &r, &e) == 0;
        free(data);
        if (!ok) continue;
        int sealed = r.has_gen;
        rec_state_free(&r);
        return sealed;
    }
    return 0;
}

/* Reads and verifies every chunk of the three tensors into the host buffers. Chunks are
 * fetched by CKPT_IO_THREADS threads (object stores serve parallel reads much faster);
 * the first failure (by chunk order) is the one reported. */
typedef struct read_job {
    ckpt *c;
    const rec_state *r;
    size_t first, stride, total, nchunks;
    size_t bad;       /* lowest failing chunk index seen by this job, or SIZE_MAX */
    char why[1200];
    int store_rc;     /* the backend's error at chunk `bad` (0: the chunk is at fault) */
    tdm_err store_err;
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
        ckpt_blob_key(&rt->chunks[k], bkey);
        void *data = NULL;
        size_t n = 0;
        int rc = store_get_verified(j->c->st, bkey, &rt->chunks[k], &data, &n, &e);
        if (rc && rc != STORE_NOT_FOUND && rc != STORE_CORRUPT && store_obstacle(j->c->st, bkey)) {
            /* no chunk there to judge: something that is no object stands in its place */
            j->store_rc = rc;
            j->store_err = e;
        }
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
            int urc = ckpt_transfer(j->c, (int)t, off, n, data, 0, &e);
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

/* 0 when every chunk verifies; -1 with *why when one is missing, corrupt, of the wrong
 * size or unreadable (the state cannot be used: an older one is tried); the backend's
 * error (> 0, e set) when something that is no object stands in the first failing chunk's
 * place (store_obstacle): the run stops there, for the user to remove it. */
static int read_tensors(ckpt *c, const rec_state *r, char *why, size_t cap, tdm_err *e) {
    size_t nchunks = r->tensors[0].nchunks;
    for (int t = 1; t < CKPT_TENSORS; t++)
        if (r->tensors[t].nchunks != nchunks) {
            snprintf(why, cap, "its tensors are chunked differently");
            return -1;
        }
    size_t total = CKPT_TENSORS * nchunks;
    size_t nthreads = total < CKPT_IO_THREADS ? total : CKPT_IO_THREADS;
    read_job jobs[CKPT_IO_THREADS];
    pthread_t tids[CKPT_IO_THREADS];
    int created[CKPT_IO_THREADS] = {0};
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
    if (jobs[at].store_rc) {
        *e = jobs[at].store_err;
        return jobs[at].store_rc;
    }
    snprintf(why, cap, "%s", jobs[at].why);
    return -1;
}

int ckpt_load_seq(ckpt *c, uint64_t seq, rec_state *rec, tdm_err *e) {
    memset(rec, 0, sizeof *rec);
    char key[64], why[1200];
    ledger_state_key(key, sizeof key, seq);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(c->st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND)
        return err_set(e, ERR_USAGE, "%s/%s does not exist: `tandem status %s` lists the run positions of the "
                       "kept states",
                       store_url(c->st), key, store_url(c->st));
    if (rc) return rc;
    rc = rec_state_decode(data, n, key, rec, e);
    free(data);
    if (rc) return rc;
    int trc = 0;
    if (!matches_layout(c, rec, why, sizeof why) || (trc = read_tensors(c, rec, why, sizeof why, e))) {
        rec_state_free(rec);
        return trc > 0 ? trc : err_set(e, ERR_STORE, "%s/%s: %s", store_url(c->st), key, why);
    }
    return 0;
}

/* Whether a run with no usable state can be replayed from its seed: only when no config
 * change was ever recorded (a replay would compute the whole run under today's config) and
 * its α records are of this version's kind (a run begun before generations wrote records
 * a replay would not reproduce byte for byte). 1 or 0; -1 with *e set when its first α
 * record could not be read (a 403, an endpoint gone): that tells nothing of which tandem
 * began the run, and was reported as "an older tandem". */
static int ckpt_seed_replay_ok(ckpt *c, tdm_err *e) {
    if (c->gens.n != 0) return 0;
    void *data = NULL;
    size_t n = 0;
    char key[64];
    ledger_alpha_key(key, sizeof key, 0);
    int rc = store_get(c->st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 1; /* a fixed run, or none yet */
    if (rc) return -1;
    rec_alpha a;
    tdm_err de;
    int ok = rec_alpha_decode(data, n, key, &a, &de) != 0 || a.has_gen;
    free(data);
    return ok;
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
    int rc = store_get(c->st, LEDGER_HEAD, &data, &n, &c->head_ver, e);
    int head_missing = rc == STORE_NOT_FOUND;
    if (head_missing) {
        c->head_ver.v[0] = '\0';
    } else if (rc) {
        return rc;
    } else {
        tdm_err he;
        if (rec_head_decode(data, n, LEDGER_HEAD, &head, &he) == 0) have_head = 1, c->commits = head.commits;
        else fprintf(stderr, "tandem: %s/%s; looking for states by listing\n", url, he.msg);
        free(data);
    }
    store_list l;
    rc = store_list_prefix(c->st, LEDGER_STATES, &l, e);
    if (rc) return rc;
    /* the listed positions, and after them (order) the order the load tries them in */
    size_t cap = l.n ? l.n : 1;
    uint64_t *seqs = calloc(2 * cap + 1, sizeof *seqs);
    size_t ns = 0;
    for (size_t i = 0; seqs && i < l.n; i++)
        if (ledger_key_index(l.keys[i], LEDGER_STATES, &seqs[ns]) == 0) ns++;
    store_list_free(&l);
    if (!seqs) return err_set(e, ERR_INTERNAL, "out of memory");
    qsort(seqs, ns, sizeof *seqs, cmp_desc);
    testhook_stop_at("audit"); /* frozen here by the tests: the states listed, none read */
    if (head_missing && ns > 0)
        fprintf(stderr, "tandem: %s/HEAD is missing; looking for states by listing\n", url);
    /* whether HEAD names a state that is there (HEAD merely behind the newest state is
     * the trace of a commit cut off before HEAD moved, not damage) */
    int head_listed = 0;
    for (size_t i = 0; have_head && i < ns; i++) {
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        head_listed |= strcmp(head.state, key) == 0 && head.seq == seqs[i];
    }
    free(c->rejected);
    c->rejected = calloc(ns ? ns : 1, sizeof *c->rejected);
    c->nrejected = 0;
    c->loaded = 0;
    c->seed_replay = 0;
    if (!c->rejected) {
        free(seqs);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    /* A run leaves at most one state past HEAD — the commit cut off before its HEAD move:
     * the next commit waits for that move, and a resume moves HEAD first (ledger_start).
     * More are another writer's or another run's: a sibling run of the same seed and shape
     * copied or synced into this store (a hunt moving stores: an `aws s3 sync` into a
     * prefix that held an earlier attempt with another optim.lr) vouches for α records
     * byte for byte this run's under the default α step, so nothing in them tells them
     * apart, and the resume went on from them, exit 0, verify clean. None of them is
     * trusted then: the run goes on from HEAD's state, and its replay replaces those that
     * differ (keeping a copy) and keeps those it reproduces. */
    size_t past = 0;
    for (size_t i = 0; have_head && head_listed && i < ns; i++) past += seqs[i] > head.seq;
    int distrust_past = past >= 2;
    if (distrust_past)
        fprintf(stderr, "tandem: %s: %zu states lie past HEAD (run position %llu), where a run leaves at most one "
                "(a commit cut off before HEAD moved): another writer's or another run's (a copy or a sync into "
                "this store?); going on from HEAD's state, the replay replacing those that differ\n", url, past,
                (unsigned long long)head.seq);
    /* Exactly one past HEAD is what a run's commit cut off before its HEAD move leaves, and
     * also what one sibling state copied in leaves (nothing in it names its run: a hunt
     * moving stores). A writer therefore goes on from HEAD's state and lets the replay
     * judge it: the run's own is reproduced byte for byte (one episode recomputed, and
     * the commit that follows finds it there), another run's is replaced, a copy kept
     * aside. Its manifest is judged first as any other (damage, a lost seal, another seed
     * are said and set aside), and the state tried last, when no state at or behind HEAD
     * can be resumed from, rather than strand a run. A reader (export, evaluate) reads the
     * newest that verifies. */
    c->has_unvouched = 0;
    /* Not where a config change took effect at HEAD or past it: a state past such a
     * change of the current generation is this run's own (another run's is of another
     * generation, passed over below), and a change recorded at it (by a tandem that
     * recorded changes past HEAD) makes it the run's position — the replay from HEAD
     * would compute the stretch before it under the new config, and ledger_start's change
     * path drop it (review) */
    int defer_past = !distrust_past && past == 1 && c->epoch && !c->reader_verb &&
                     !(c->gens.n && ckpt_gens_newest(&c->gens) >= head.seq);
    uint64_t *order = seqs + cap; /* indices into seqs; seqs[0] is the one past HEAD */
    size_t nord = ns;
    int deferred = 0; /* its manifest held, and it waits behind the others */
    for (size_t j = 0; j < ns; j++) order[j] = j;
    size_t foreign = 0, own_seed = 0; /* states made with another seed than the pinned one, and with it */
    size_t foreign_run = 0; /* of the pinned seed, but carrying another run's identity */
    uint64_t foreign_seed = 0;
    for (size_t j = 0; j < nord; j++) {
        size_t i = (size_t)order[j];
        int deferring = defer_past && j == 0;
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        if (deferred && j == nord - 1 && i == 0) {
            /* nothing at or behind HEAD loads: a replay from the seed, where one may be made,
             * rather than a state nothing vouches for (its commit then compares it: review) */
            tdm_err re;
            if (ckpt_seed_replay_ok(c, &re) == 1) {
                c->rejected[c->nrejected++] = seqs[i];
                c->has_unvouched = 1, c->unvouched = seqs[i];
                continue;
            }
        }
        if (distrust_past && seqs[i] > head.seq) {
            c->rejected[c->nrejected++] = seqs[i];
            continue;
        }
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
        int other_seed = 0, other_run = 0;
        if (have_head && strcmp(head.state, key) == 0 && !sha256_equal(&d, &head.state_sha))
            snprintf(why, sizeof why, "does not match the SHA-256 that HEAD records (corrupt)");
        else if (rec_state_decode(data, n, key, rec, &de) != 0) {
            /* a newer tandem's state (its bytes the ones HEAD vouches for, so the format
             * field is no damaged byte): not this binary's to set aside */
            unsigned long long v = have_head && strcmp(head.state, key) == 0 ? rec_format_newer(data, n) : 0;
            if (v) {
                free(data);
                free(seqs);
                return err_set(e, ERR_STORE,
                               "%s/%s was written by a newer tandem (record format %llu; this one reads %d): "
                               "run the newer tandem on this store (nothing was changed)",
                               url, key, v, REC_FORMAT_MAX);
            }
            snprintf(why, sizeof why, "cannot be used: %.1100s", de.msg);
        }
        else if (c->has_seed && rec->seed != c->seed) {
            other_seed = 1; /* first: its generation and seal are another run's too (review) */
        }
        else if (c->has_run && rec->has_run && !sha256_equal(&rec->run, &c->run)) {
            other_run = 1; /* the same seed, another pinned config: a sibling run's (a hunt moving stores) */
        }
        else if (!rec->has_gen && ckpt_older_sealed(c, seqs + i + 1, ns - i - 1)) {
            /* a run that seals its states seals every later one: this one lost its seal to
             * damage or an edit (past HEAD nothing else vouches for it), and a resume from it
             * went on silently from whatever it held */
            snprintf(why, sizeof why, "has no seal (gen, self) although an older state has one: damaged or edited");
            rec_state_free(rec);
        }
        else if (rec->has_gen && rec->gen > c->gens.n) {
            /* generations only grow and change records are never removed: a state of a
             * generation the store has no record of means a change record was lost, and
             * the run cannot know the config it was computed with */
            uint64_t g = rec->gen;
            rec_state_free(rec);
            free(data);
            free(seqs);
            /* or a writer that took the lease over recorded it after this one read
             * configs/: then this one is fenced out, and "restore it" would be false advice */
            if (c->epoch && ckpt_check_lease(c, e)) return ERR_STORE;
            return err_set(e, ERR_STORE,
                           "%s/%s was computed under config generation %llu, but the store "
                           "records only %llu config changes: %s/configs/%llu.mp is missing. "
                           "Restore it from a copy of the store (then check with tandem verify); "
                           "the run cannot go on without the config it was computed with",
                           url, key, (unsigned long long)g, (unsigned long long)c->gens.n, url,
                           (unsigned long long)c->gens.n);
        } else if (!ckpt_belongs(c, rec->has_gen, rec->gen, rec->seq)) {
            snprintf(why, sizeof why, "was computed under config generation %llu by a writer that "
                     "was fenced out or superseded (this run is at generation %llu)",
                     (unsigned long long)rec->gen, (unsigned long long)c->gens.n);
            rec_state_free(rec);
        }
        if (other_seed) {
            /* another run's state (copied or synced in from another run's store): passed
             * over, and replaced (a copy kept aside) when the replay reaches its position;
             * a run that exited 3 on it ("made with seed 2, not 1") named no object and no
             * way on, and repair had nothing to do (a hunt moving stores) */
            fprintf(stderr, "tandem: %s/%s was made with run.seed %llu, not this run's %llu: another run's state "
                    "(copied in from another run's store?); passed over\n", url, key,
                    (unsigned long long)rec->seed, (unsigned long long)c->seed);
            foreign++, foreign_seed = rec->seed;
            rec_state_free(rec);
            free(data);
            c->rejected[c->nrejected++] = seqs[i];
            continue;
        }
        if (other_run && have_head && strcmp(head.state, key) == 0 && sha256_equal(&d, &head.state_sha)) {
            /* the state HEAD vouches for: RUN is the odd one out (changed, its config_sha256
             * made to match, or damaged), or HEAD came with another run's state — nothing
             * here says which run is this one: said, nothing changed */
            rec_state_free(rec);
            free(data);
            free(seqs);
            return err_set(e, ERR_STORE, "%s/%s, the state HEAD names, was computed under another config than %s/RUN "
                           "pins (the same run.seed, another run identity): RUN was changed or damaged, or HEAD and its "
                           "state are another run's; restore RUN, or HEAD and states/, from a copy of the store (nothing "
                           "was changed)", url, key, url);
        }
        if (other_run) {
            /* the same seed and shape, made under another pinned config (another optim.lr,
             * say): a sibling run's, copied or synced in. Passed over as another seed's is,
             * HEAD there or not (before, with HEAD lost, the newest such state was resumed
             * from, exit 0, on the sibling's weights) */
            fprintf(stderr, "tandem: %s/%s was made by another run (the same run.seed, but not the config %s/RUN "
                    "pins): copied in from another run's store?; passed over\n", url, key, url);
            foreign_run++;
            rec_state_free(rec);
            free(data);
            c->rejected[c->nrejected++] = seqs[i];
            continue;
        }
        if (c->has_seed && !why[0]) own_seed++;
        if (why[0]) {
            /* the manifest itself is bad: keep a copy aside and take it out of states/, so
             * that neither this load nor the replay that reaches its position trusts it */
            tdm_err qe;
            /* a writer's own: every write and delete preceded by a lease check, so that a
             * writer that lost the lease moves nothing (what it judges bad may be the new
             * writer's finished states, judged by a config generation that is not the
             * run's any more); fenced out: ERR_STORE, nothing moved. A reader (no lease
             * taken) tries as before, on a store it opened read-only */
            int qrc = c->epoch ? ckpt_check_lease(c, &qe) : 0;
            if (!qrc) qrc = ckpt_quarantine(c, key, data, n, why, &qe);
            if (!qrc && c->epoch) qrc = ckpt_check_lease(c, &qe);
            /* the replay writes this key again: named in the lease first (S3), for a writer
             * that takes over should this one be killed with the DELETE in flight */
            if (!qrc) qrc = ckpt_announce_deletes(c, key, &qe);
            if (!qrc) {
                qrc = store_delete(c->st, key, &qe);
                ckpt_announce_settled(c);
            }
            if (qrc && c->fenced) {
                *e = qe;
                free(data);
                free(seqs);
                return qrc;
            }
            if (qrc && qrc != STORE_NOT_FOUND)
                fprintf(stderr, "tandem: %s/%s %s, and could not be set aside (%s)\n", url, key,
                        why, qe.msg);
            fprintf(stderr, "tandem: falling back to an older state\n");
            free(data);
            continue;
        }
        free(data);
        if (deferring) { /* its manifest holds: tried again after the others */
            rec_state_free(rec);
            order[nord++] = 0, deferred = 1;
            continue;
        }
        /* A state whose α records are not all there or intact cannot be resumed from (the
         * run would go on from a chain with a hole). The run goes back to an older state
         * whose chain holds, or to the seed, and the replay re-derives the missing records
         * while it checks the ones that are there against its own (exit 4 on any
         * difference) — as verify, which reports the hole, expects. For a state past HEAD
         * (a commit cut off before HEAD moved) this is not even damage. Issue 26: a deleted
         * last record used to strand the run (exit 3, and repair had nothing to do). */
        tdm_err ce;
        uint64_t bad_at;
        rc = ckpt_check_chain_at(c, rec->alpha_records, &rec->alpha_head, &bad_at, &ce);
        if (rc && ckpt_obstacle_at(c, bad_at, rec->alpha_records, LEDGER_ALPHA)) {
            /* something that is no object in a record's place (a directory, a FIFO): the
             * replay's writes would meet it too — said, nothing changed, exit 3, for the
             * user to remove (a record that cannot be read otherwise, damaged on S3 or an
             * unreachable store, falls back below as before) */
            *e = ce;
            rec_state_free(rec);
            free(seqs);
            return rc;
        }
        if (rc) {
            int past = have_head && head_listed && seqs[i] > head.seq;
            char *advice = strstr(ce.msg, ", inside the part of the"); /* the refusal's advice */
            if (advice) *advice = '\0';
            fprintf(stderr, "tandem: %s/%s %svouches for %llu α records, not all of them there or "
                    "intact (%.600s); falling back to an older state (the replay re-derives them)\n",
                    url, key, past ? "lies past HEAD (a commit cut off before HEAD moved) and " : "",
                    (unsigned long long)rec->alpha_records, ce.msg);
            rec_state_free(rec);
            c->rejected[c->nrejected++] = seqs[i];
            continue;
        }
        int trc = 0;
        if (rec->has_gen && !matches_layout(c, rec, why, sizeof why)) {
            /* a sealed state is intact (its own digest holds): a model other than the one
             * the pinned config describes means RUN was changed (its config_sha256 made to
             * match) or damaged — every state would be passed over and the seed replay end
             * in "nondeterminism"; said, nothing changed */
            rec_state_free(rec);
            free(seqs);
            return err_set(e, ERR_STORE,
                           "%s/%s is intact (its seal holds) but does not hold the model the config %s/RUN pins "
                           "describes (%s): RUN was changed or damaged; restore it from a copy of the store "
                           "(nothing was changed)",
                           url, key, url, why);
        }
        if (!matches_layout(c, rec, why, sizeof why) || (trc = read_tensors(c, rec, why, sizeof why, e))) {
            if (trc > 0) { /* an obstacle in a chunk's place: as for the α records above */
                rec_state_free(rec);
                free(seqs);
                return trc;
            }
            /* a reader beside a live run: a state its retention deleted while this load read
             * it is no damage, and nothing to say (the run's words claimed damage on a
             * healthy store: a hunt) */
            int still = 1;
            tdm_err xe;
            if (!c->reader_verb || store_exists(c->st, key, &still, &xe) || still)
                fprintf(stderr, "tandem: %s/%s: %s; falling back to an older state\n", url, key, why);
            rec_state_free(rec);
            c->rejected[c->nrejected++] = seqs[i];
            continue;
        }
        /* a run begun before states carried a generation goes on writing without one, so
         * that its replays compare byte for byte with what it wrote then */
        c->legacy = !rec->has_gen;
        c->legacy_run = !rec->has_run;
        /* every chunk of this state is now known to be stored intact */
        size_t total = 0, n = 0; /* the state's own chunking, which may differ from this writer's */
        for (int t = 0; t < CKPT_TENSORS; t++) total += rec->tensors[t].nchunks;
        sha256_digest *chunks = calloc(total ? total : 1, sizeof *chunks);
        for (int t = 0; chunks && t < CKPT_TENSORS; t++)
            for (size_t k = 0; k < rec->tensors[t].nchunks; k++) chunks[n++] = rec->tensors[t].chunks[k];
        ckpt_set_known(c, chunks, n);
        if (i == 0 && have_head && head.seq < seqs[i] && c->reader_verb)
            fprintf(stderr, "tandem: the state to %s is %s (run position %llu), newer than HEAD's %s: a commit "
                    "in flight, or one cut off before its HEAD move\n", c->reader_verb, key, (unsigned long long)seqs[i],
                    head.state);
        else if ((i > 0 || (have_head && head.seq != seqs[i])) && c->reader_verb)
            fprintf(stderr, "tandem: the state to %s is %s (run position %llu), the newest that verifies%s%s\n",
                    c->reader_verb, key, (unsigned long long)seqs[i], have_head ? "; HEAD names " : "",
                    have_head ? head.state : "");
        else if (deferred && i > 0) {
            char past_key[64];
            ledger_state_key(past_key, sizeof past_key, seqs[0]);
            fprintf(stderr, "tandem: resuming from %s (run position %llu)%s; %s lies past HEAD (a commit cut off "
                    "before HEAD moved, or another run's state copied in): the replay reproduces it byte for "
                    "byte or replaces it\n", key, (unsigned long long)seqs[i],
                    have_head && head.seq == seqs[i] ? ", which HEAD names" : "", past_key);
            c->has_unvouched = 1, c->unvouched = seqs[0];
        } else if (i > 0 || (have_head && head.seq != seqs[i]))
            fprintf(stderr, "tandem: resuming from %s (run position %llu)\n", key,
                    (unsigned long long)seqs[i]);
        c->loaded = 1;
        c->loaded_seq = seqs[i];
        snprintf(c->loaded_key, sizeof c->loaded_key, "%s", key);
        c->loaded_sha = d;
        c->head_current = have_head && strcmp(head.state, key) == 0 && head.seq == seqs[i] &&
                          sha256_equal(&head.state_sha, &d);
        c->head_at_load = c->head_current;
        c->head_note[0] = '\0';
        if (!have_head)
            snprintf(c->head_note, sizeof c->head_note, "was %s", head_missing ? "missing" : "damaged");
        else if (!c->head_current && !(head_listed && head.seq < seqs[i]))
            snprintf(c->head_note, sizeof c->head_note, "named %.128s (run position %llu), which "
                     "is not a state this run can use", head.state, (unsigned long long)head.seq);
        c->last_seq = seqs[i];
        c->last_time = ckpt_now_mono();
        *found = 1;
        free(seqs);
        return 0;
    }
    free(seqs);
    /* every state that could be read made with another seed than RUN pins: RUN is the odd
     * one out (another run's, or damaged), not the states — nothing set aside (verify says
     * the same) */
    if (foreign && !own_seed)
        return err_set(e, ERR_STORE, "%s/RUN pins run.seed = %llu, but every state was made with seed %llu: RUN is "
                       "not this run's pinned config (another run's RUN, or a damaged one), or this run's states are "
                       "gone and another run's were copied in; restore RUN, or states/ and HEAD, from a copy of the "
                       "store (nothing was changed)", url, (unsigned long long)c->seed,
                       (unsigned long long)foreign_seed);
    /* the same with the seed agreeing: every state that names its run names another than
     * RUN's config (RUN replaced by another run's of the same seed: resumed under its
     * config before, silently) */
    if (foreign_run && !own_seed && !foreign)
        return err_set(e, ERR_STORE, "%s/RUN does not pin the config any of its %zu states that name their run was "
                       "computed under (the same run.seed, another config): RUN is not this run's (another run's RUN, "
                       "or a damaged one), or this run's states are gone and another run's were copied in; restore "
                       "RUN, or states/ and HEAD, from a copy of the store (nothing was changed)", url, foreign_run);
    /* HEAD there (or damaged) but no state listed: every state was deleted */
    int lost = ns == 0 && !head_missing;
    tdm_err re;
    int replay_ok = ns > 0 || lost ? ckpt_seed_replay_ok(c, &re) : 0;
    if (replay_ok < 0)
        return err_set(e, ERR_STORE, "%s: %s, and whether the run can be replayed from its seed is unknown: "
                       "its first alpha record could not be read (%s). Mend that (the credentials, the "
                       "bucket policy, the endpoint) and start the run again",
                       url, lost ? "HEAD is there but no state is (deleted)" : "no state can be resumed from (see "
                       "the messages above)", re.msg);
    if (replay_ok) {
        /* no state to resume from, but the run's whole trajectory follows from its pinned
         * config and seed: replay it from the start, bit for bit, checked against the α
         * records that are there (a difference is exit 4, nothing overwritten) */
        if (lost)
            fprintf(stderr, "tandem: %s: HEAD %s%s, but no state is there (deleted); a run replays it "
                    "from its seed, checked against its alpha records\n", url,
                    have_head ? "names " : "is damaged", have_head ? head.state : "");
        else if (!c->reader_verb) /* a reader's caller says what it could not read */
            fprintf(stderr, "tandem: %s: none of its %zu states can be resumed from (see above); a run "
                    "replays it from its seed, checked against its alpha records\n", url, ns);
        c->seed_replay = 1;
        c->legacy_run = 0;
        return 0;
    }
    if (lost)
        return err_set(e, ERR_STORE,
                       "%s: HEAD is there but no state is (deleted), and the run cannot be replayed "
                       "from its seed (%s). Restore the states from a copy of the store",
                       url, c->gens.n ? "its config was changed along the way" : "it was begun by an "
                       "older tandem whose records a replay would not reproduce");
    if (ns > 0)
        return err_set(e, ERR_STORE,
                       "%s: none of its %zu states verifies (see the messages above), and the run "
                       "cannot be replayed from its seed (%s). Restore the store from a copy, or "
                       "run `tandem repair %s` (a dry run; then --apply)",
                       url, ns, c->gens.n ? "its config was changed along the way" : "it was begun by an "
                       "older tandem whose records a replay would not reproduce", url);
    /* Neither HEAD nor a state, yet a config change that took effect past the start: the
     * run computed something (under the config before the change) that is gone. Starting
     * from the seed would compute it all under today's config, and pass it off as the run. */
    char why[1200];
    if (audit_stranded(c->st, &c->gens, why, sizeof why)) return err_set(e, ERR_STORE, "%s has %s", url, why);
    return 0;
}

int ckpt_settle_head(ckpt *c, tdm_err *e) {
    if (!c->loaded || c->head_current) return 0;
    int rc = ckpt_check_lease(c, e);
    if (rc) return rc;
    rec_head h = {.seq = c->loaded_seq, .state_sha = c->loaded_sha, .epoch = c->epoch,
                  .time = ckpt_now_wall()};
    snprintf(h.state, sizeof h.state, "%s", c->loaded_key);
    /* an older writer's last commit may have moved HEAD since the load read it (created
     * it where it was missing): that commit's manifest was in place before our lease, so
     * this load listed it and chose it or a newer state — or found it unusable (another
     * config generation) and fell back; either way HEAD goes to what this writer loaded */
    rc = ckpt_put_head(c, &h, 0, e);
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

int ckpt_head_named_loaded(const ckpt *c) { return c->loaded && c->head_at_load; }

int ckpt_seed_replay(const ckpt *c) { return c->seed_replay; }
