/* repair.c — what a run cannot heal by itself: the plan and its carrying out; see
 * repair.h. */
#include "ledger/repair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger/audit.h"
#include "ledger/ckpt.h"
#include "ledger/keys.h"
#include "ledger/read.h"
#include "util/testhook.h"

static int plan_add(ledger_repair_plan *p, const char *key, const char *why) {
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->items[i].key, key)) return 0;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        ledger_repair_item *it = realloc(p->items, cap * sizeof *it);
        if (!it) return -1;
        p->items = it, p->cap = cap;
    }
    snprintf(p->items[p->n].key, sizeof p->items[p->n].key, "%s", key);
    snprintf(p->items[p->n].why, sizeof p->items[p->n].why, "%s", why);
    p->n++;
    return 0;
}

typedef struct good_state {
    uint64_t seq, alpha_records;
    char key[64];
    sha256_digest sha;
} good_state;

/* Copies key under quarantine/<epoch>/ and deletes it. */
static int set_aside(store *st, uint64_t epoch, const char *key, tdm_err *e) {
    void *data = NULL;
    size_t n = 0;
    int rc = store_get(st, key, &data, &n, NULL, e);
    if (rc == STORE_NOT_FOUND) return 0;
    if (rc) return rc;
    char dst[REC_KEY_MAX + 64];
    rc = ckpt_keep_aside(st, epoch, key, data, n, dst, sizeof dst, e);
    free(data);
    if (!rc) testhook_stop_at("repair-aside"); /* frozen or killed here by the tests: kept aside, */
    if (!rc) testhook_kill_at("repair-aside"); /* not yet deleted */
    if (!rc) rc = store_delete(st, key, e);
    return rc == STORE_NOT_FOUND ? 0 : rc;
}

/* Whether HEAD names `key` with the SHA-256 of data[0..n): its bytes are the ones HEAD
 * vouches for (a HEAD that cannot be read or decoded vouches for nothing). */
static int head_vouches(store *st, const char *key, const void *data, size_t n) {
    void *hd = NULL;
    size_t hn = 0;
    tdm_err ignore;
    if (store_get(st, LEDGER_HEAD, &hd, &hn, NULL, &ignore)) return 0;
    rec_head h;
    int ok = rec_head_decode(hd, hn, LEDGER_HEAD, &h, &ignore) == 0 && strcmp(h.state, key) == 0;
    free(hd);
    sha256_digest d;
    sha256(data, n, &d);
    return ok && sha256_equal(&d, &h.state_sha);
}

/* Whether a state cannot be loaded because a chunk it names is missing, corrupt or of the
 * wrong size (*why says which); 0 when every chunk verifies. A store that cannot be read
 * sets *rc (with e) and returns 0. */
static int chunk_fault(store *st, const rec_state *s, char *why, size_t cap, int *rc, tdm_err *e) {
    for (size_t t = 0; t < s->ntensors; t++) {
        const rec_tensor *rt = &s->tensors[t];
        uint64_t total = rt->shape[0] * 4;
        for (int d = 1; d < rt->ndim; d++) total *= rt->shape[d];
        for (size_t k = 0; k < rt->nchunks; k++) {
            char bkey[80];
            ledger_blob_key(bkey, sizeof bkey, &rt->chunks[k]);
            void *b = NULL;
            size_t bn = 0;
            int r = store_get_verified(st, bkey, &rt->chunks[k], &b, &bn, e);
            free(b);
            uint64_t off = k * rt->chunk_bytes;
            size_t want = (size_t)(total - off < rt->chunk_bytes ? total - off : rt->chunk_bytes);
            if (r == 0 && bn == want) continue;
            if (r && r != STORE_NOT_FOUND && r != STORE_CORRUPT) {
                *rc = r;
                return 0;
            }
            snprintf(why, cap, "cannot be loaded: %s (tensor %s chunk %zu) is %s", bkey, rt->name, k,
                     r == STORE_NOT_FOUND ? "missing" : r == STORE_CORRUPT ? "corrupt" : "the wrong size");
            return 1;
        }
    }
    return 0;
}

static int plan_once(store *st, const char *url, ledger_repair_plan *p, tdm_err *e);

/* A plan is only as good as the store it read: a run committing meanwhile (a new state,
 * then HEAD moved to it) made HEAD name a state the listing had not seen, and repair
 * planned to move HEAD back ("move HEAD to states/500.mp" on a healthy store; --apply then
 * fenced the live run out, exit 3). So HEAD must be the same before and after the plan;
 * a few tries, then the store is said to be busy. */
int ledger_repair_plan_make(store *st, const char *url, ledger_repair_plan *p, tdm_err *e) {
    for (int attempt = 0; attempt < 3; attempt++) {
        sha256_digest before, after;
        tdm_err he; /* a HEAD that cannot be read is the plan's to judge (damaged: moved) */
        audit_head_digest(st, &before, &he);
        int rc = plan_once(st, url, p, e);
        audit_head_digest(st, &after, &he);
        if (rc || sha256_equal(&before, &after)) return rc;
        ledger_repair_free(p);
    }
    memset(p, 0, sizeof *p);
    return err_set(e, ERR_STORE, "%s: HEAD moved while repair read the store, three times: a run is writing to it; "
                   "nothing was changed: stop the run (its lease: tandem status) and run tandem repair again",
                   url);
}

static int plan_once(store *st, const char *url, ledger_repair_plan *p, tdm_err *e) {
    memset(p, 0, sizeof *p);
    int rc = 0;
    good_state *good = NULL;
    size_t ngood = 0;
    uint64_t *seqs = NULL, gen = 0;
    ckpt_gens gens = {0};
    size_t ns = 0;
    audit_chain chain;
    memset(&chain, 0, sizeof chain);
    if (!rc) rc = audit_generation(st, &gens, e);
    gen = gens.n;
    if (!rc) rc = audit_state_seqs(st, &seqs, &ns, e);
    testhook_stop_at("audit"); /* frozen here by the tests: the states listed, none read */
    if (!rc && !(good = calloc(ns ? ns : 1, sizeof *good))) rc = err_set(e, ERR_INTERNAL, "out of memory");
    /* 1. the states a run would never use */
    for (size_t i = 0; !rc && i < ns; i++) {
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        void *data = NULL;
        size_t n = 0;
        int r = store_get(st, key, &data, &n, NULL, e);
        if (r == STORE_NOT_FOUND) continue;
        if (r) {
            rc = r;
            break;
        }
        rec_state s;
        tdm_err de;
        char why[400];
        int bad = ledger_decode(REC_KIND_STATE, data, n, key, &s, &de) != 0;
        testhook_stop_at("state-read"); /* frozen here by the tests: a manifest read, its blobs not yet */
        unsigned long long newer = bad && head_vouches(st, key, data, n) ? rec_format_newer(data, n) : 0;
        if (newer) {
            /* a newer tandem's state (HEAD's, its hash matching: no damaged format byte):
             * not this binary's to set aside, as a run's load refuses it too */
            rc = err_set(e, ERR_STORE, "%s: %s was written by a newer tandem (record format %llu; this one "
                         "reads %d): run the newer tandem's repair on this store (nothing was changed)",
                         url, key, newer, REC_FORMAT_MAX);
        } else if (bad) {
            snprintf(why, sizeof why, "damaged: %.300s", de.msg);
            rc = plan_add(p, key, why) ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
        } else {
            if (s.has_gen && s.gen > gen) {
                /* a lost change record: setting the state aside would resume under the old
                 * config; only the record itself repairs this */
                rc = err_set(e, ERR_STORE,
                             "%s: %s was computed under config generation %llu, but the store "
                             "records only %llu config changes: configs/%llu.mp is missing. "
                             "tandem repair cannot rebuild it: restore it from a copy of the store",
                             url, key, (unsigned long long)s.gen, (unsigned long long)gen,
                             (unsigned long long)gen);
            } else if (!ckpt_gen_belongs(s.has_gen, s.gen, s.seq, &gens)) {
                snprintf(why, sizeof why, "computed under config generation %llu by a writer that "
                         "was fenced out or superseded (the run is at generation %llu)",
                         (unsigned long long)s.gen, (unsigned long long)gen);
                rc = plan_add(p, key, why) ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
            } else if (chunk_fault(st, &s, why, sizeof why, &rc, e)) {
                /* unless the manifest went meanwhile: a live run's retention deletes a
                 * state's manifest, then its blobs, after its HEAD move (which the re-plan
                 * does not see): blobs missing from a state that is gone are no damage, and
                 * --apply took the live run's lease for them (a hunt: the run fenced out) */
                int still = 1;
                tdm_err xe;
                if (!rc && store_exists(st, key, &still, &xe) == 0 && !still) {
                    rec_state_free(&s);
                    free(data);
                    continue;
                }
                rc = plan_add(p, key, why) ? err_set(e, ERR_INTERNAL, "out of memory") : rc;
            } else if (!rc) {
                good_state *g = &good[ngood++];
                g->seq = s.seq, g->alpha_records = s.alpha_records;
                snprintf(g->key, sizeof g->key, "%s", key);
                sha256(data, n, &g->sha);
            }
            rec_state_free(&s);
        }
        free(data);
    }
    /* 2. the α chain: the first bad record, and every state that vouches for it or later */
    if (!rc) rc = audit_chain_read(st, &chain, e);
    uint64_t newest_records = 0;
    for (size_t i = 0; i < ngood; i++)
        if (good[i].alpha_records > newest_records) newest_records = good[i].alpha_records;
    /* a chain whose end is gone reads as whole (ok, n records) while a state vouches for
     * more: broken at alpha/<n>.mp as much as a hole there */
    size_t bad = chain.ok ? chain.n : chain.bad;
    if (!rc && chain.ok && chain.n < newest_records)
        snprintf(chain.problem, sizeof chain.problem, "alpha/%zu.mp is missing (the records end at "
                 "alpha/%zu.mp, and a state vouches for %llu)", chain.n, chain.n ? chain.n - 1 : 0,
                 (unsigned long long)newest_records);
    /* the records from the break on also where no state vouches for them any more: a
     * repair cut off after it set aside the states, before the records, left a hole with
     * records past it, which verify calls a fault and the plan passed over ("nothing to
     * repair"; a hunt) — as an uninterrupted repair would have set them aside */
    if (!rc && (bad < newest_records || !chain.ok)) {
        for (size_t i = 0; i < ngood && !rc; i++)
            if (good[i].alpha_records > bad) {
                char why[400];
                snprintf(why, sizeof why, "vouches for alpha/%zu.mp and later, and the chain is "
                         "broken at alpha/%zu.mp (%.200s): the run goes back to before it",
                         bad, bad, chain.problem);
                rc = plan_add(p, good[i].key, why) ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
                good[i].seq = UINT64_MAX; /* no longer a candidate for HEAD */
            }
        store_list l;
        if (!rc) rc = store_list_prefix(st, LEDGER_ALPHA, &l, e);
        for (size_t i = 0; !rc && i < l.n; i++) {
            uint64_t t;
            if (ledger_key_index(l.keys[i], LEDGER_ALPHA, &t) || t < bad) continue;
            char why[400];
            snprintf(why, sizeof why, "at or after the break of the chain at alpha/%zu.mp: the "
                     "replay re-derives it", bad);
            if (plan_add(p, l.keys[i], why)) rc = err_set(e, ERR_INTERNAL, "out of memory");
        }
        if (!rc) store_list_free(&l);
    }
    /* 3. HEAD: the newest state that remains */
    good_state *head_to = NULL;
    for (size_t i = 0; i < ngood; i++)
        if (good[i].seq != UINT64_MAX && (!head_to || good[i].seq > head_to->seq)) head_to = &good[i];
    rec_head h;
    rec_state hs;
    int have = 0, head_bad = 0;
    if (!rc) {
        tdm_err he;
        if (audit_head(st, &h, &hs, &have, &he) != 0) head_bad = 1;
        else if (have) rec_state_free(&hs);
        if (have) {
            int kept = 0;
            for (size_t i = 0; i < ngood; i++)
                if (good[i].seq != UINT64_MAX && !strcmp(good[i].key, h.state)) kept = 1;
            if (!kept) head_bad = 1;
        } else if (ngood) {
            head_bad = 1;
        }
    }
    /* a plan that leaves no state in a run whose config changed past its start strands
     * it: the run cannot be replayed from its seed under the changed config (ckpt_load
     * refuses). Only a copy of what is damaged can repair that. */
    if (!rc && !head_to && p->n > 0 && ckpt_gens_newest(&gens) > 0) {
        char what[160];
        if (bad < newest_records) snprintf(what, sizeof what, "alpha/%zu.mp", bad);
        else snprintf(what, sizeof what, "%s", p->items[0].key);
        rc = err_set(e, ERR_STORE,
                     "%s: setting aside what is damaged (%s: %.300s) would leave no state, and the "
                     "run's config was changed at run position %llu, so it could not be replayed from "
                     "its seed. tandem repair cannot heal this: restore %s from a copy of the store "
                     "(then check with tandem verify); nothing was changed",
                     url, p->items[0].key, p->items[0].why, (unsigned long long)ckpt_gens_newest(&gens), what);
    }
    /* 4. diverged.mp that does not decode: status cannot say whether the run diverged (a
     * readable one is left as it is: the next run's start removes it) */
    if (!rc) {
        rec_diverged dv;
        tdm_err de;
        int r = ledger_read(st, REC_KIND_DIVERGED, LEDGER_DIVERGED, NULL, &dv, &de);
        char why[400];
        if (r == STORE_CORRUPT) {
            snprintf(why, sizeof why, "damaged: %.300s (tandem status cannot say whether the run diverged)", de.msg);
            rc = plan_add(p, LEDGER_DIVERGED, why) ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
        } else if (r && r != STORE_NOT_FOUND) {
            rc = r, *e = de;
        }
    }
    p->head_bad = !rc && head_bad;
    p->move_head = !rc && head_bad && head_to;
    if (p->move_head) {
        snprintf(p->head_key, sizeof p->head_key, "%s", head_to->key);
        p->head_seq = head_to->seq;
        p->head_sha = head_to->sha;
    }
    p->commits = have ? h.commits : 0;
    audit_chain_free(&chain);
    free(good);
    free(seqs);
    ckpt_gens_free(&gens);
    return rc;
}

int ledger_repair_needed(const ledger_repair_plan *p) { return p->n > 0 || p->head_bad; }

/* Whether two plans set aside the same objects and leave HEAD the same way. */
static int plans_equal(const ledger_repair_plan *a, const ledger_repair_plan *b) {
    if (a->n != b->n || a->head_bad != b->head_bad || a->move_head != b->move_head) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i].key, b->items[i].key)) return 0;
    return !a->move_head || (a->head_seq == b->head_seq && !strcmp(a->head_key, b->head_key) &&
                             sha256_equal(&a->head_sha, &b->head_sha));
}

int ledger_repair_apply(store *st, const char *url, const ledger_repair_plan *p, uint64_t *epoch,
                        tdm_err *e) {
    ckpt *ck = ckpt_open(st, NULL, 0, e);
    int rc = ck ? 0 : e->code;
    if (!rc) rc = ckpt_acquire(ck, 0, e);
    *epoch = ck ? ckpt_epoch(ck) : 0;
    if (!rc) testhook_sleep("TANDEM_TEST_REPAIR_DELAY_MS"); /* a slow store, for the tests */
    if (!rc && store_stop_pending()) /* the lease taken, nothing done: released below */
        rc = err_set(e, ERR_STOPPED, "%s: stopped by a signal before carrying the plan out; nothing changed", url);
    /* The plan shown was made before the lease was taken: a run (or another repair) may
     * have written since, healing the store or moving it on. Carried out then, the old plan
     * rolled a run that had just finished back to an older state. So it is made again
     * under the lease and must be the same. */
    ledger_repair_plan now;
    memset(&now, 0, sizeof now);
    store_version head_ver;
    memset(&head_ver, 0, sizeof head_ver);
    if (!rc) rc = ledger_repair_plan_make(st, url, &now, e);
    if (!rc && !plans_equal(p, &now))
        rc = err_set(e, ERR_STORE, "%s: the store changed since the plan was made (a run or another "
                     "repair wrote to it): nothing was set aside; run tandem repair again for the "
                     "plan as the store stands now", url);
    ledger_repair_free(&now);
    if (!rc) { /* HEAD's version now: it is replaced only if no one moved it since */
        void *d = NULL;
        size_t n = 0;
        int g = store_get(st, LEDGER_HEAD, &d, &n, &head_ver, e);
        free(d);
        if (g && g != STORE_NOT_FOUND) rc = g;
    }
    /* what the next run writes again (the states and α records its replay re-derives),
     * named in the lease before the DELETEs go (S3): a run that takes over from a repair
     * killed meanwhile waits until they cannot land (ckpt_announce_deletes; "*" past the
     * lease's room, HEAD never) */
    char named[REC_LATE_DELETES_MAX] = "";
    for (size_t i = 0, used = 0; i < p->n; i++) {
        size_t k = strlen(p->items[i].key);
        if (!strcmp(p->items[i].key, LEDGER_HEAD)) continue;
        if (used + k + 2 > sizeof named - 1) {
            snprintf(named, sizeof named, "*"); /* ckpt_announce_deletes names every kind */
            break;
        }
        used += (size_t)snprintf(named + used, sizeof named - used, "%s%s", used ? "\n" : "", p->items[i].key);
    }
    if (!rc && named[0]) rc = ckpt_announce_deletes(ck, named, e);
    /* every deletion under the lease: a run that takes it over stops the repair there */
    for (size_t i = 0; !rc && i < p->n; i++) {
        /* a stop signal (cmd_repair: store_set_stop_check) ends it between two set-asides:
         * the lease released below, and a second repair finishes what this one began */
        if (store_stop_pending())
            rc = err_set(e, ERR_STOPPED, "%s: stopped by a signal after setting aside %zu of %zu (under "
                         "quarantine/%llu/); HEAD not yet moved: run tandem repair --apply again to finish",
                         url, i, p->n, (unsigned long long)*epoch);
        if (!rc && (rc = ckpt_check_lease(ck, e)) && i > 0) /* fenced: say what it did (a hunt: two repairs) */
            err_append(e, "; this repair had set aside %zu of the %zu objects of its plan (under quarantine/%llu/): "
                       "run tandem repair again once the other writer has stopped", i, p->n,
                       (unsigned long long)*epoch);
        if (!rc) rc = set_aside(st, *epoch, p->items[i].key, e);
    }
    ckpt_announce_settled(ck);
    if (!rc) rc = ckpt_check_lease(ck, e);
    if (!rc && p->move_head) {
        rec_head nh = {.seq = p->head_seq, .state_sha = p->head_sha, .epoch = *epoch, .time = (double)time(NULL),
                       .commits = p->commits};
        snprintf(nh.state, sizeof nh.state, "%s", p->head_key);
        size_t n;
        void *d = rec_head_encode(&nh, &n);
        rc = d ? store_put_if(st, LEDGER_HEAD, d, n, &head_ver, NULL, e) : err_set(e, ERR_INTERNAL, "out of memory");
        if (rc == STORE_CONFLICT)
            rc = err_set(e, ERR_STORE, "%s: HEAD was moved by another writer while repair worked: HEAD "
                         "left as that writer wrote it; run tandem repair again", url);
        free(d);
    } else if (!rc && p->head_bad) {
        rc = set_aside(st, *epoch, LEDGER_HEAD, e);
    }
    if (!rc) store_settle_own_deletes(st, "tandem repair"); /* before the lease goes: see store.h */
    if (!rc) rc = ckpt_release(ck, e);
    tdm_err scratch;
    if (rc && ck && ckpt_check_lease(ck, &scratch) == 0) ckpt_release(ck, &scratch); /* still ours */
    if (ck) ckpt_close(ck);
    return rc;
}

void ledger_repair_free(ledger_repair_plan *p) {
    free(p->items);
    memset(p, 0, sizeof *p);
}
