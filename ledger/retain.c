/* retain.c — the retention policy of tandem gc and checkpoint.keep; see retain.h. */
#include "ledger/retain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/audit.h"
#include "ledger/keys.h"
#include "storage/digest_set.h"
#include "util/testhook.h"

static int read_state(store *st, uint64_t seq, rec_state *s, tdm_err *e) {
    char key[64];
    ledger_state_key(key, sizeof key, seq);
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return err_set(e, ERR_STORE, "%s vanished during gc", key);
    if (rc) return rc;
    rc = rec_state_decode(data, n, key, s, e);
    free(data);
    return rc;
}

/* Every chunk of the state is present and hashes to its name. */
static int state_verifies(store *st, uint64_t seq) {
    rec_state s;
    tdm_err e;
    if (read_state(st, seq, &s, &e)) return 0;
    int ok = 1;
    for (size_t t = 0; ok && t < s.ntensors; t++)
        for (size_t k = 0; ok && k < s.tensors[t].nchunks; k++) {
            char key[80];
            ledger_blob_key(key, sizeof key, &s.tensors[t].chunks[k]);
            void *b = NULL;
            size_t n = 0;
            ok = store_get_verified(st, key, &s.tensors[t].chunks[k], &b, &n, &e) == 0;
            free(b);
        }
    rec_state_free(&s);
    return ok;
}

static int contains(const uint64_t *v, size_t n, uint64_t x) {
    for (size_t i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

/* Adds the chunks of the state manifest s to the set; -1 when out of memory. */
static int add_chunks(const rec_state *s, digest_set *set) {
    for (size_t t = 0; t < s->ntensors; t++)
        for (size_t k = 0; k < s->tensors[t].nchunks; k++)
            if (digest_set_add(set, &s->tensors[t].chunks[k]) < 0) return -1;
    return 0;
}

/* Adds the chunks of state seq to the set; 0, or -1 with e set when the manifest cannot
 * be read or memory runs out (the caller then deletes no blob). */
static int add_refs(store *st, uint64_t seq, digest_set *set, tdm_err *e) {
    rec_state s;
    if (read_state(st, seq, &s, e)) return -1;
    int rc = add_chunks(&s, set);
    if (rc) err_set(e, ERR_INTERNAL, "out of memory");
    rec_state_free(&s);
    return rc;
}

/* Adds the chunks of every state manifest set aside under quarantine/ that decodes (a
 * state repair or a run set aside whole: another trajectory's, or one whose α chain
 * broke) to the set ref: gc keeps the blobs a set-aside state needs, so that a copy kept for an
 * audit can still be loaded. One that does not decode is damage and references nothing;
 * one gone since the listing, nothing. -1 with e set when the listing or a read fails or
 * memory runs out (the caller then deletes nothing). */
int retain_quarantined_refs(store *st, digest_set *ref, tdm_err *e) {
    store_list l;
    if (store_list_prefix(st, LEDGER_QUARANTINE, &l, e)) return -1;
    int rc = 0;
    for (size_t i = 0; !rc && i < l.n; i++) {
        if (!strstr(l.keys[i], "/" LEDGER_STATES)) continue;
        void *data = NULL;
        size_t dn = 0;
        int g = store_get(st, l.keys[i], &data, &dn, NULL, e);
        if (g == STORE_NOT_FOUND) continue;
        if (g) {
            rc = -1;
            break;
        }
        rec_state s;
        tdm_err ignore;
        int bad = rec_state_decode(data, dn, l.keys[i], &s, &ignore);
        free(data);
        if (bad) continue;
        if (add_chunks(&s, ref)) rc = -1, err_set(e, ERR_INTERNAL, "out of memory");
        rec_state_free(&s);
    }
    store_list_free(&l);
    return rc;
}

static int collect(store *st, long keep, int verify_fallback, int dry, int only_from_deleted,
                   const retain_guard *guard, FILE *log, retain_report *out, tdm_err *e);

int retain_collect(store *st, long keep, int verify_fallback, int dry, const retain_guard *guard,
                   FILE *log, retain_report *out, tdm_err *e) {
    return collect(st, keep, verify_fallback, dry, 0, guard, log, out, e);
}

int retain_after_commit(store *st, long keep, retain_report *out, tdm_err *e) {
    return collect(st, keep, 0, 0, 1, NULL, NULL, out, e);
}

/* Puts key back (create-only: a copy written meanwhile, the run's own, stays) at once —
 * a run that took the lease may be using it — and, where this process gave up on a DELETE
 * of it that may still land (S3: a request held past TANDEM_S3_TIMEOUT, retried, the
 * first one applied later), waits until it cannot, then puts it back again if that DELETE
 * took it: a put-back that came before the late DELETE was undone by it (found by a race
 * hunt on S3: a pinned state, and a blob a starting run used, gone after gc said it had
 * put them back). 0 when key holds an object at the end (put back or there again), or the
 * store's error. */
static int put_back_settled(store *st, const char *key, const void *data, size_t n, int *was_there, tdm_err *e) {
    int rc = store_put_now(st, key, data, n, STORE_CREATE, e);
    *was_there = rc == STORE_EXISTS;
    if (rc && rc != STORE_EXISTS) return rc;
    if (store_delete_unsettled_s(st, key) <= 0) return 0;
    rc = store_put(st, key, data, n, STORE_CREATE, e); /* store_put waits the DELETE out first */
    return rc == STORE_EXISTS ? 0 : rc;
}

/* Whether every chunk the state manifest data[0..n) names is stored: 0 when one is
 * missing; 1 when all are, or when that cannot be told (it does not decode, the store
 * fails: the put-back goes ahead, as it always did). A manifest put back without its blobs
 * is a state that cannot be loaded (verify's fault), which a put-back must not make: a
 * live run's retention deletes the states gc raced, and their blobs (a hunt). */
static int state_blobs_there(store *st, const char *key, const void *data, size_t n) {
    uint64_t seq;
    if (ledger_key_index(key, LEDGER_STATES, &seq)) return 1; /* not a state: a blob's own bytes */
    rec_state s;
    tdm_err e;
    if (rec_state_decode(data, n, key, &s, &e)) return 1;
    /* a sample, evenly spread, ends included, per tensor: a retention pass deletes a
     * state's blobs together, and one existence check per chunk of a large state (one
     * round trip each on S3) held a put-back for minutes (a review) */
    enum { SAMPLE = 8 };
    int all = 1;
    for (int t = 0; all && t < (int)s.ntensors; t++) {
        size_t nc = s.tensors[t].nchunks, step = nc > SAMPLE ? (nc - 1) / (SAMPLE - 1) : 1;
        for (size_t k = 0; all && k < nc; k = k + step < nc - 1 || k == nc - 1 ? k + step : nc - 1) {
            char bkey[80];
            int there = 1;
            ledger_blob_key(bkey, sizeof bkey, &s.tensors[t].chunks[k]);
            if (store_exists(st, bkey, &there, &e) == 0 && !there) all = 0;
        }
    }
    rec_state_free(&s);
    return all;
}

/* Deletes one key unless the guard says stop; a key already gone is no error. back (nb
 * bytes; NULL: none) is the object as read before: the guard is checked again right after
 * the deletion, and when it fails then (a run took the lease between the check before and
 * the deletion, and may have found the object stored and used it) the object is put back
 * (create-only) and named in out->put_back. out->last_deleted keeps the key of a deletion
 * no passing check has followed yet (retain.h). */
static int delete_guarded(store *st, const char *key, const void *back, size_t nb, const retain_guard *guard,
                          int *did, retain_report *out, tdm_err *e) {
    int checked = guard && guard->check;
    *did = 0;
    /* a stop signal (gc: store_set_stop_check) ends the pass before a deletion, never
     * between a deletion and its check (which would put back what a stop need not) */
    if (guard && store_stop_pending())
        return err_set(e, ERR_STOPPED, "stopped by a signal before deleting %s", key);
    if (checked) {
        int rc = guard->check(st, guard->ctx, e);
        if (rc) return rc;
        out->last_deleted[0] = '\0'; /* the deletion before this check landed before it */
    }
    /* TANDEM_TEST_STOP_AT=gc-delete:n: frozen between the guard's check and the deletion */
    testhook_stop_at("gc-delete");
    testhook_kill_at("gc");
    int r = store_delete(st, key, e);
    if (r == STORE_NOT_FOUND) return 0; /* another's deletion (a second gc, a run's retention): not counted */
    if (r) return r;
    *did = 1;
    snprintf(out->last_deleted, sizeof out->last_deleted, "%s", key);
    if (!checked || !back) return 0;
    int g = guard->check(st, guard->ctx, e);
    if (!g) {
        out->last_deleted[0] = '\0';
        return 0;
    }
    tdm_err pe;
    int there = 0;
    if (!state_blobs_there(st, key, back, nb)) {
        /* the run's retention took the state and its blobs: it no longer uses the state */
        out->last_deleted[0] = '\0';
        snprintf(out->not_put_back, sizeof out->not_put_back, "%s", key);
        return g;
    }
    int p = put_back_settled(st, key, back, nb, &there, &pe);
    if (p == 0 && !there) {
        out->last_deleted[0] = '\0';
        snprintf(out->put_back, sizeof out->put_back, "%s", key);
        /* its blobs may have gone between the look above and the put-back */
        out->put_back_broken = !state_blobs_there(st, key, back, nb);
    } else if (p == 0) {
        /* there again, written by the run itself (its upload, or its own manifest of that
         * position): nothing of gc's to name, neither put back nor missing */
        out->last_deleted[0] = '\0';
    } else {
        err_append(e, "; putting %s back failed (%s)", key, pe.msg);
    }
    return g;
}

static int pinned_now(store *st, uint64_t seq, int *pinned, tdm_err *e) {
    char key[64];
    ledger_pin_key(key, sizeof key, seq);
    return store_exists(st, key, pinned, e);
}

/* Deletes state manifest `key` (seq) unless it is pinned, judged at the deletion, not
 * from the pins read when collecting began: `tandem pin` may pin it meanwhile and then
 * says "pinned". A pin that appears while the manifest goes puts it back (its bytes were
 * read first); `tandem pin` waits for that before it answers, and says the state is gone
 * when it stays gone. *kept = 1 when the state stays. */
static int delete_unless_pinned(store *st, uint64_t seq, const char *key, const retain_guard *guard,
                                int *kept, int *did, retain_report *out, tdm_err *e) {
    int pinned = 0;
    *kept = 0, *did = 0;
    int rc = pinned_now(st, seq, &pinned, e);
    if (rc || pinned) {
        *kept = pinned;
        return rc;
    }
    void *data = NULL;
    size_t n = 0;
    rc = store_get(st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 0; /* gone already */
    /* a slow store, for the tests: before each state's deletion only (the blobs after them
     * go at full speed, so that a test's gc is slow where it races a pin or a run) */
    testhook_sleep("TANDEM_TEST_GC_DELAY_MS");
    if (!rc) rc = delete_guarded(st, key, data, n, guard, did, out, e);
    /* pinned meanwhile: put back, also when another gc's deletion took it (create-only: a
     * copy there stays) */
    if (!rc) rc = pinned_now(st, seq, &pinned, e);
    /* frozen here by the tests: deleted, the pin seen, not yet put back (a second gc now) */
    if (!rc && pinned) testhook_stop_at("gc-put-back");
    if (!rc && pinned && state_blobs_there(st, key, data, n)) {
        int there;
        rc = put_back_settled(st, key, data, n, &there, e);
        if (*did) out->pinned_late++;
        *kept = 1, *did = 0;
    } else if (!rc && pinned) { /* its blobs gone (another gc's): a manifest without them is no state */
        snprintf(out->pinned_lost, sizeof out->pinned_lost, "%s", key);
    }
    free(data);
    return rc;
}

/* retain_collect and retain_after_commit (only_from_deleted: the blobs of the deleted
 * manifests, read before they go, are the only candidates). */
static int collect(store *st, long keep, int verify_fallback, int dry, int only_from_deleted,
                   const retain_guard *guard, FILE *log, retain_report *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    int rc = 0;
    uint64_t *seqs = NULL, *pins = NULL, *keepv = NULL;
    size_t ns = 0, np = 0, nk = 0;
    if (!rc) rc = audit_state_seqs(st, &seqs, &ns, e);
    rec_head h;
    rec_state hs;
    int have = 0;
    if (!rc && (rc = audit_head(st, &h, &hs, &have, e)) == ERR_STORE)
        err_prefix(e, "refusing to collect garbage: ");
    uint64_t vouched = have ? hs.alpha_records : 0;
    if (have) rec_state_free(&hs);
    /* a full gc on a store whose α chain is broken below what HEAD vouches for: repair
     * rolls such a run back to the newest state from before the break, and those are the
     * states gc would delete (kept: the newest `keep`, HEAD's, one older that verifies) —
     * after it the run could only start over from its seed, or, with its config changed
     * since, not at all. Nothing is deleted then */
    if (!rc && !only_from_deleted && vouched > 0) {
        audit_chain chain;
        memset(&chain, 0, sizeof chain);
        rc = audit_chain_read(st, &chain, e);
        /* a chain whose end is gone reads as whole (ok, n records): broken at alpha/<n>.mp */
        size_t bad = chain.ok ? chain.n : chain.bad;
        if (!rc && chain.ok && bad < vouched)
            snprintf(chain.problem, sizeof chain.problem, "alpha/%zu.mp is missing (the records end there)", bad);
        if (!rc && bad < vouched)
            rc = err_set(e, ERR_STORE, "refusing to collect garbage: %s; HEAD's state vouches for %llu alpha "
                         "records, so the run must go back to a state from before the break, and those are "
                         "the states gc would delete: run tandem repair first (tandem verify shows the damage); "
                         "nothing was deleted",
                         chain.problem, (unsigned long long)vouched);
        audit_chain_free(&chain);
    }
    /* the listing of states/ is all that keeps a state's blobs: one that misses HEAD's own
     * state (an index that lags, an endpoint that lists wrongly) may miss others, whose
     * blobs would go. Nothing is deleted then: gc says so; the pass after a commit waits
     * for the next commit (a HEAD naming a state that is gone is repair's to mend) */
    if (!rc && have && !contains(seqs, ns, h.seq)) {
        free(seqs);
        if (only_from_deleted) return 0;
        return err_set(e, ERR_STORE, "refusing to collect garbage: HEAD names %s, which the listing of %s does "
                       "not hold: the store's listing is incomplete (an index that lags behind, or an endpoint "
                       "that lists wrongly), or that state is gone (tandem verify says which; tandem repair mends "
                       "a HEAD naming a missing state); nothing was deleted",
                       h.state, LEDGER_STATES);
    }
    if (!rc) {
        store_list l;
        rc = store_list_prefix(st, LEDGER_PINS, &l, e);
        if (!rc) {
            if (!(pins = calloc(l.n + 1, sizeof *pins))) rc = err_set(e, ERR_INTERNAL, "out of memory");
            for (size_t i = 0; !rc && i < l.n; i++) {
                uint64_t v;
                if (ledger_key_index(l.keys[i], LEDGER_PINS, &v) == 0) pins[np++] = v;
            }
            store_list_free(&l);
        }
    }
    if (!rc && !(keepv = calloc(ns + np + 2, sizeof *keepv))) rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc) {
        /* never a state newer than HEAD: another writer's commit may be on its way there */
        size_t below = ns;
        while (have && below > 0 && seqs[below - 1] > h.seq) below--;
        for (size_t i = below > (size_t)keep ? below - (size_t)keep : 0; i < below; i++) keepv[nk++] = seqs[i];
        for (size_t i = below; i < ns; i++) keepv[nk++] = seqs[i];
        if (have && !contains(keepv, nk, h.seq)) keepv[nk++] = h.seq;
        /* the newest older state that verifies; without HEAD (a run heals it from the
         * newest state that verifies) the newest that verifies, whatever the newest
         * `keep` are: they may be the damage HEAD's loss came with */
        for (size_t i = ns; verify_fallback && i-- > 0;)
            if ((!have || seqs[i] < h.seq) && state_verifies(st, seqs[i])) {
                if (!contains(keepv, nk, seqs[i])) keepv[nk++] = seqs[i];
                break;
            }
        for (size_t i = 0; i < np; i++)
            if (contains(seqs, ns, pins[i]) && !contains(keepv, nk, pins[i])) keepv[nk++] = pins[i];
    }
    size_t deleted_states = 0, deleted_blobs = 0;
    /* the chunks of the states set aside under quarantine/, read before anything goes: a
     * full gc judges every blob, a pass after a commit the blobs of the states it deletes
     * (when it deletes none, nothing is read). If they cannot be read, nothing is deleted:
     * gc stops with the error, and the pass after a commit is retried at the next one */
    /* held: the chunks of what is kept (the quarantined, then the kept states); cand: the
     * deleted manifests' (only_from_deleted), each once; gone: those of the states a full
     * gc deletes. Sets: lists scanned per candidate made gc, and the pass after every
     * commit, quadratic in chunks (a hunt at scale: gc of 92k blobs 111 s, 3x the blobs
     * 6.4x the time) */
    digest_set held = {0}, cand = {0}, gone = {0};
    int deleting = !only_from_deleted;
    for (size_t i = 0; !deleting && i < ns; i++) deleting = !contains(keepv, nk, seqs[i]);
    if (!rc && deleting && retain_quarantined_refs(st, &held, e)) {
        rc = e->code ? e->code : ERR_STORE;
        err_prefix(e, "refusing to collect garbage (the states set aside under quarantine/ keep their blobs): ");
    }
    /* the candidates' chunks, read before their manifests go (only_from_deleted) */
    int cand_ok = 1;
    for (size_t i = 0; only_from_deleted && !rc && i < ns; i++)
        if (!contains(keepv, nk, seqs[i])) {
            tdm_err ce;
            if (add_refs(st, seqs[i], &cand, &ce)) cand_ok = 0;
        }
    /* the chunks of the states this pass deletes (full gc): the blobs that are not orphans */
    for (size_t i = 0; !rc && i < ns; i++) {
        if (contains(keepv, nk, seqs[i])) continue;
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        /* a write of its manifest given up on may still land (S3: a request held past the
         * client's time limit): deleted now, it would come back without its blobs. Kept,
         * blobs and all, until a later pass */
        if (!store_write_settled(st, key)) { /* a dry run says it too */
            if (log)
                fprintf(log, "keep %s for now: a write of it got no answer and may still land (this "
                        "process's, or an earlier writer's)\n", key);
            keepv[nk++] = seqs[i];
            continue;
        }
        if (!dry) {
            int kept = 0;
            tdm_err ge; /* unreadable: its blobs count as orphans (read before they go) */
            if (!only_from_deleted) add_refs(st, seqs[i], &gone, &ge); /* short: more blobs read first */
            int did = 0;
            rc = delete_unless_pinned(st, seqs[i], key, guard, &kept, &did, out, e);
            if (!rc && kept) keepv[nk++] = seqs[i]; /* its blobs stay with it */
            if (rc || kept || !did) continue;
        }
        if (log) fprintf(log, "%s %s\n", dry ? "would delete" : "delete", key);
        deleted_states++;
    }
    /* a stop signal (gc) before the blobs are judged: the states' reads can be long */
    if (!rc && guard && store_stop_pending())
        rc = err_set(e, ERR_STOPPED, "stopped by a signal before judging the blobs");
    /* blobs referenced by what is kept; if a kept manifest cannot be read, keep all blobs */
    int keep_all_blobs = only_from_deleted && !cand_ok; /* a deleted manifest unreadable */
    for (size_t i = 0; !rc && !keep_all_blobs && i < nk; i++) {
        tdm_err se;
        if (add_refs(st, keepv[i], &held, &se)) {
            if (log) fprintf(log, "%s; keeping every blob\n", se.msg);
            keep_all_blobs = 1;
        }
    }
    /* the pins again, before any blob goes: a state pinned since they were read, and not
     * kept, keeps its blobs; one whose manifest is not there may be between another gc's
     * deletion and its put-back, and its blobs, unreferenced now, would go with this pass
     * (a hunt: two gcs and a pin, the pinned state lost its blobs for good). Then no
     * unreferenced blob goes. The pass after a commit judges only the states it lists
     * (its candidates are theirs): a pin of a state long gone does not hold its blobs */
    if (!rc && !keep_all_blobs && (!only_from_deleted || cand.n)) {
        store_list pl;
        rc = store_list_prefix(st, LEDGER_PINS, &pl, e);
        for (size_t i = 0; !rc && !keep_all_blobs && i < pl.n; i++) {
            uint64_t v;
            tdm_err pe;
            if (ledger_key_index(pl.keys[i], LEDGER_PINS, &v) || contains(keepv, nk, v)) continue;
            if (!contains(seqs, ns, v) && only_from_deleted) continue;
            if (contains(seqs, ns, v) && add_refs(st, v, &held, &pe) == 0) continue; /* its chunks held */
            if (log)
                fprintf(log, "keep unreferenced blobs: %s%llu pins a state that is not there (another gc may be "
                        "putting it back); if that state is gone for good, remove the pin (tandem pin STORE %llu "
                        "--remove)\n", LEDGER_PINS, (unsigned long long)v, (unsigned long long)v);
            keep_all_blobs = 1;
        }
        if (!rc) store_list_free(&pl);
    }
    /* every blob in the store is a candidate only while no manifest write may still land: an
     * unreferenced blob may be one of a commit whose manifest is on its way */
    if (!rc && !keep_all_blobs && !only_from_deleted && store_unsettled_s(st) > 0) {
        if (log) fprintf(log, "keep unreferenced blobs for now: a manifest that refers to them may still land\n");
        keep_all_blobs = 1;
    }
    /* a full gc lists states/ again before any blob goes: a state the first listing missed
     * (a listing that is not the same twice) would lose its blobs */
    if (!rc && !keep_all_blobs && !only_from_deleted) {
        uint64_t *again = NULL;
        size_t na = 0;
        testhook_stop_at("gc-relist"); /* frozen here by the tests: a run may commit meanwhile */
        rc = audit_state_seqs(st, &again, &na, e);
        for (size_t i = 0; !rc && !keep_all_blobs && i < na; i++)
            if (!contains(seqs, ns, again[i]) && !contains(keepv, nk, again[i])) {
                char key[64];
                ledger_state_key(key, sizeof key, again[i]);
                /* a dry run deletes nothing to refuse: it says what it cannot list (it exited
                 * 3 "refusing to delete blobs" beside a live run: a hunt) */
                if (dry) {
                    if (log) fprintf(log, "keep unreferenced blobs: %s is listed now but was not when gc began (a run "
                                     "committed meanwhile); a gc now would delete none of them\n", key);
                    keep_all_blobs = 1;
                } else {
                    rc = err_set(e, ERR_STORE, "refusing to delete blobs: %s is listed now but was not when gc "
                                 "began (a run committed meanwhile, or the store's listing is not the same twice); no "
                                 "blob was deleted: run tandem gc again later", key);
                }
            }
        free(again);
    }
    /* the candidates: the deleted manifests' chunks, or every blob in the store */
    store_list l = {0};
    if (!rc && !keep_all_blobs && !only_from_deleted) rc = store_list_prefix(st, LEDGER_BLOBS, &l, e);
    size_t ncands = keep_all_blobs ? 0 : only_from_deleted ? cand.n : l.n;
    for (size_t i = 0; !rc && i < ncands; i++) {
        sha256_digest d;
        char key[80];
        if (only_from_deleted) {
            d = cand.d[i];
            ledger_blob_key(key, sizeof key, &d);
        } else {
            snprintf(key, sizeof key, "%s", l.keys[i]);
            if (sha256_parse_hex(l.keys[i] + 6, &d)) continue; /* not ours to judge */
        }
        if (digest_set_has(&held, &d)) continue;
        if (dry) {
            if (log) fprintf(log, "would delete %s\n", key);
        } else {
            /* an orphan (no manifest gc listed names it: a commit cut off before its
             * manifest) is what a run starting now may find stored and use as its replay
             * computes that commit again: read (verified) first, so that a deletion that
             * raced such a run is put back (delete_guarded). Not a blob of a state this pass
             * deleted: content a resumed run does not compute again */
            void *back = NULL;
            size_t nb = 0;
            int orphan = !only_from_deleted && guard && guard->check;
            if (orphan) orphan = !digest_set_has(&gone, &d);
            tdm_err ge;
            if (orphan && store_get_verified(st, key, &d, &back, &nb, &ge) != 0) back = NULL;
            int did = 0;
            rc = delete_guarded(st, key, back, nb, guard, &did, out, e);
            free(back);
            if (rc) break;
            if (!did) continue; /* gone already: another's deletion */
        }
        deleted_blobs++;
    }
    if (!only_from_deleted) store_list_free(&l);
    digest_set_free(&held);
    digest_set_free(&cand);
    digest_set_free(&gone);
    out->states = ns;
    out->deleted_states = deleted_states;
    out->deleted_blobs = deleted_blobs;
    out->kept = nk;
    out->pinned = np + out->pinned_late;
    free(seqs);
    free(pins);
    free(keepv);
    return rc;
}
