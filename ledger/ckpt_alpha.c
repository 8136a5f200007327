/* ckpt_alpha.c — the α records: written as they are computed, compared on a replay,
 * hash-chained; the chain checked on a resume; records set aside after a config change; see ckpt.h. */
#include <errno.h>
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
#include "util/testhook.h"

/* Which generations a supersede moves: the ones this writer's newest change ended, i.e.
 * every record older than the writer's own generation (and, in a run begun before records
 * carried one, every record: a legacy writer's own carry none either). A record of the
 * writer's own generation is the replay's own; one of a NEWER generation was written by a
 * writer that recorded a further change after this one, so this writer has been taken
 * over (ERR_STORE, fenced out): moving it would strand that writer's run (a finished run
 * whose α chain lost its records to superseded/). 1: move it; 0: leave it; <0: fenced. */
static int supersedes(ckpt *c, const rec_alpha *a, const char *key, tdm_err *e) {
    if (!a->has_gen) return 1;
    if (a->gen > c->gens.n) {
        ckpt_newer_generation(c, key, a->gen, e);
        return -1;
    }
    if (c->legacy) return 1; /* a sealed record where this writer seals none: not its own */
    return a->gen < c->gens.n;
}

/* Contract (ckpt.h): records past `after` of the generations before this writer's are
 * copied to superseded/<change>/ and deleted. The lease is checked before each move (a
 * writer that lost the lease moves and deletes nothing: the one that took it over may be
 * at a further generation whose records lie exactly here), and a record of a newer
 * generation fences this writer out even where the check came too early to see the new
 * lease. What remains is the window between a check and its delete, one record wide. */
int ckpt_supersede_alpha_after(ckpt *c, uint64_t after, uint64_t change, int *moved, tdm_err *e) {
    *moved = 0;
    /* TANDEM_TEST_STOP_AT=supersede:1: frozen before the listing (a takeover overtakes it) */
    testhook_stop_at("supersede");
    store_list l;
    int rc = store_list_prefix(c->st, LEDGER_ALPHA, &l, e);
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
        int move = rec_alpha_decode(data, n, key, &a, &de) == 0 && a.seq > after ? supersedes(c, &a, key, e) : 0;
        if (move < 0) rc = ERR_STORE;
        if (move > 0) rc = ckpt_check_lease(c, e);
        if (move > 0 && !rc) {
            testhook_stop_at("supersede-put"); /* after the lease check, before the move */
            char dst[128];
            ledger_superseded_key(dst, sizeof dst, change, key);
            rc = store_put(c->st, dst, data, n, STORE_OVERWRITE, e);
            testhook_kill_at("supersede");
            /* checked again before the delete: taken over after the first check, the new
             * writer may have replaced this record with its own by now */
            if (!rc) rc = ckpt_check_lease(c, e);
            /* the replay under the new config writes these keys again (ckpt_announce_deletes) */
            if (!rc) rc = ckpt_announce_deletes(c, LEDGER_ALPHA, e);
            if (!rc) rc = store_delete(c->st, key, e);
            if (rc == STORE_NOT_FOUND) rc = 0;
            if (!rc) (*moved)++;
        }
        free(data);
    }
    store_list_free(&l);
    ckpt_announce_settled(c);
    return rc;
}

/* ------------------------------------------------------------------ α records */

int ckpt_check_chain(ckpt *c, uint64_t records, const sha256_digest *head, tdm_err *e) {
    uint64_t bad;
    return ckpt_check_chain_at(c, records, head, &bad, e);
}

int ckpt_check_chain_at(ckpt *c, uint64_t records, const sha256_digest *head, uint64_t *bad, tdm_err *e) {
    const char *url = store_url(c->st);
    sha256_digest prev = {0};
    int sealed = 0; /* the record before carried a seal: so must this one (audit.c) */
    *bad = records;
    for (uint64_t t = 0; t < records; t++) {
        char key[64];
        ledger_alpha_key(key, sizeof key, t);
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
            *bad = t; /* unreadable (something that is no object there?): the caller asks */
            return rc;
        } else if (rec_alpha_decode(data, n, key, &a, &de) != 0) {
            snprintf(why, sizeof why, "is damaged (%.1000s)", de.msg);
            problem = why;
        } else if (a.t != t || !sha256_equal(&a.prev, &prev)) {
            problem = "does not link to the record before it";
        } else if (sealed && !a.has_gen) {
            problem = "has no seal (gen, self) although the record before it has one: damaged or edited";
        } else {
            sealed = a.has_gen;
            rec_alpha_hash(&a, &prev);
            if (t + 1 == records && !sha256_equal(&prev, head))
                problem = "is not the record the newest state vouches for";
        }
        free(data);
        if (problem) *bad = t;
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

/* Sets aside α record `key`, which lies at or past the run's last episode: kept under
 * quarantine/, then removed (only while this writer holds the lease). */
static int set_aside_past_end(ckpt *c, const char *key, uint64_t episodes, tdm_err *e) {
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(c->st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 0;
    char why[160];
    snprintf(why, sizeof why, "lies past the run's last episode (run.episodes = %llu): no episode writes it, and "
             "the chain would end there", (unsigned long long)episodes);
    if (!rc) rc = ckpt_check_lease(c, e);
    if (!rc) rc = ckpt_quarantine(c, key, data, n, why, e);
    free(data);
    if (!rc) rc = store_delete(c->st, key, e);
    return rc == STORE_NOT_FOUND ? 0 : rc;
}

/* The most gaps said one by one; the rest are counted. */
#define HOLE_LINES 8

int ckpt_report_alpha_holes(ckpt *c, uint64_t records, uint64_t episodes, tdm_err *e) {
    store_list l;
    int rc = store_list_prefix(c->st, LEDGER_ALPHA, &l, e);
    if (rc) return rc;
    uint64_t *ts = calloc(l.n ? l.n : 1, sizeof *ts);
    size_t n = 0;
    for (size_t i = 0; !rc && ts && i < l.n; i++) {
        uint64_t t;
        if (ledger_key_index(l.keys[i], LEDGER_ALPHA, &t) != 0 || t < records) continue;
        /* (a state past the run's end is refused after this, as it stands: nothing moved) */
        if (episodes && t >= episodes && records <= episodes) rc = set_aside_past_end(c, l.keys[i], episodes, e);
        else ts[n++] = t;
    }
    store_list_free(&l);
    if (!ts && !rc) rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (rc) {
        free(ts);
        return rc;
    }
    qsort(ts, n, sizeof *ts, cmp_asc);
    /* one line per gap (a record far past the others made one line per missing index:
     * 156 million lines, and no stop signal heard meanwhile) */
    uint64_t want = records, gaps = 0, missing = 0;
    for (size_t i = 0; i < n; i++) {
        if (want < ts[i]) {
            if (gaps < HOLE_LINES) {
                if (ts[i] - want == 1)
                    fprintf(stderr, "tandem: %s/alpha/%llu.mp is missing", store_url(c->st), (unsigned long long)want);
                else
                    fprintf(stderr, "tandem: %s/alpha/%llu.mp to alpha/%llu.mp are missing (%llu records)",
                            store_url(c->st), (unsigned long long)want, (unsigned long long)(ts[i] - 1),
                            (unsigned long long)(ts[i] - want));
                fprintf(stderr, " (a hole in the alpha chain past the newest state, which vouches for %llu "
                        "records); the replay re-derives it\n", (unsigned long long)records);
            }
            gaps++;
            missing += ts[i] - want;
        }
        want = ts[i] + 1;
    }
    if (gaps > HOLE_LINES)
        fprintf(stderr, "tandem: %s: %llu more holes in the alpha chain past the newest state (%llu records "
                "missing in all); the replay re-derives them\n", store_url(c->st),
                (unsigned long long)(gaps - HOLE_LINES), (unsigned long long)missing);
    free(ts);
    return 0;
}

int ckpt_alpha_record(ckpt *c, const rec_alpha *in, sha256_digest *hash, tdm_err *e) {
    rec_alpha a = *in;
    a.has_gen = !c->legacy;
    a.gen = c->gens.n;
    rec_alpha_hash(&a, hash);
    size_t n;
    void *data = rec_alpha_encode(&a, &n);
    char key[64];
    ledger_alpha_key(key, sizeof key, a.t);
    testhook_kill_at("alpha");
    int rc = ckpt_outlast_late_delete_record(c, key, e); /* before the lease check: the wait may be long */
    if (!rc) rc = ckpt_check_lease(c, e);
    if (!rc) testhook_stop_at("alpha-put");
    void *old = NULL;
    size_t on = 0;
    store_version ver;
    if (!rc) rc = ckpt_put_once(c, key, data, n, &old, &on, &ver, e);
    if (rc == STORE_EXISTS) {
        /* a replay of this episode: the stored record must be ours */
        rec_alpha stored;
        tdm_err de;
        sha256_digest sh;
        /* damaged (its own digest says so, or it does not decode): re-derived; so is one
         * without a seal where this writer seals (a run's records are all sealed since it
         * began sealing them, c->legacy says otherwise): its seal was lost to damage or an
         * edit, and an "intact" record that differs would be called nondeterminism */
        int bad = rec_alpha_decode(old, on, key, &stored, &de) != 0;
        rec_alpha plain = a; /* ours as a version before "seen" wrote it */
        plain.has_seen = 0;
        sha256_digest ph;
        rec_alpha_hash(&plain, &ph);
        if (!bad && (rec_alpha_hash(&stored, &sh), sha256_equal(&sh, hash))) {
            rc = 0; /* the replay agrees */
        } else if (!bad && !stored.has_seen && sha256_equal(&sh, &ph)) {
            rc = 0; /* it agrees with a record written before tokens seen were recorded: */
            *hash = sh; /* that record stays, and the chain goes on from its hash */
        } else if (!bad && !stored.has_gen && !c->legacy) {
            /* an unsealed record where this writer seals (c->legacy says its run's records are
             * sealed) that the replay does not reproduce: its seal was lost to damage or an
             * edit, and it was called nondeterminism (exit 4, no way back) — replaced */
            snprintf(de.msg, sizeof de.msg, "%s: has no seal (gen, self) although this run's records carry one: "
                     "damaged or edited", key);
            ckpt_judge_stored(c, key, old, on, &ver, de.msg, 0, 0, stored.seq, data, n, &rc, e);
        } else if (ckpt_judge_stored(c, key, old, on, &ver, bad ? de.msg : NULL, stored.has_gen,
                                     stored.gen, stored.seq, data, n, &rc, e)) {
            /* settled: replaced, or fenced out */
        } else if (stored.t != a.t || stored.seq != a.seq || !sha256_equal(&stored.prev, &a.prev)) {
            /* intact, but not a continuation of this run's verified chain (it links to
             * another record before it, or sits at another position): another run's
             * record, or one whose predecessor was itself replaced. The replay's
             * inputs are not the ones it was computed from, so it proves nothing */
            rc = ckpt_replace_object(c, key, old, on, &ver,
                                     "does not continue this run's alpha chain (it links "
                                     "to another record before it, or holds another run "
                                     "position)",
                                     data, n, e);
        } else {
            char h1[65], h2[65];
            sha256_hex(hash, h1);
            sha256_hex(&sh, h2);
            rc = err_set(e, ERR_NONDET,
                         "nondeterminism in episode %llu: the replay's alpha record "
                         "hashes to %s but %s/%s holds %s (intact, same config); nothing was "
                         "overwritten. %s",
                         (unsigned long long)a.t, h1, store_url(c->st), key, h2, CKPT_NONDET_HINT);
        }
        free(old);
    }
    free(data);
    return rc;
}
