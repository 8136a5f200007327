/* data_source.c — data.mp: the dataset a run started from, by content; see data_source.h. */
#include "runner/data_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/run_config.h"
#include "data/shard.h"
#include "ledger/keys.h"
#include "ledger/read.h"
#include "storage/sha256.h"
#include "util/testhook.h"

/* a domain name fits a record's field whole (a 64-character one was cut to 63) */
_Static_assert(DATASET_NAME_MAX + 1 == REC_DOMAIN_MAX, "domain names in records vs datasets");

static const char *const SPLIT_NAMES[REC_DATA_SPLITS] = {"train", "val", "test"};

/* One shard's digest: its token count (u64 LE), then its token bytes as stored; kept in
 * the shard (a memo: only this function writes it, each shard from one thread). */
static int shard_digest(const shard *cs, sha256_digest *out) {
    shard *s = (shard *)cs;
    _Static_assert(sizeof s->digest == sizeof out->b, "a shard's digest memo holds a SHA-256");
    if (s->digested) {
        memcpy(out->b, s->digest, sizeof out->b);
        return 0;
    }
    sha256_ctx *c = sha256_begin();
    if (!c) return -1;
    unsigned char le[8];
    for (int b = 0; b < 8; b++) le[b] = (unsigned char)((uint64_t)s->n >> (8 * b));
    sha256_update(c, le, sizeof le);
    if (s->n) sha256_update(c, (const unsigned char *)s->map + SHARD_HEADER_BYTES, s->n * (size_t)s->width);
    sha256_end(c, out);
    memcpy(s->digest, out->b, sizeof s->digest);
    s->digested = 1;
    return 0;
}

int data_source_digest(const dataset *ds, rec_data *out, tdm_err *e) {
    memset(out, 0, sizeof *out);
    int M = dataset_n_domains(ds);
    if (M < 1 || M > REC_MAX_DOMAINS)
        return err_set(e, ERR_USAGE, "%s: %d domains (1 to %d can be pinned)", ds->path, M, REC_MAX_DOMAINS);
    out->M = M;
    /* every shard of every split, flattened: hashed in parallel (a large domain is many
     * shards), then each split's digest over its shards' in order */
    size_t n = 0;
    double bytes = 0;
    for (int m = 0; m < M; m++) {
        snprintf(out->domains[m], REC_DOMAIN_MAX, "%s", dataset_domain_name(ds, m));
        for (int s = 0; s < SPLIT_COUNT; s++) {
            const dataset_split *sp = &ds->domains[m].split[s];
            n += sp->n_shards;
            for (size_t i = 0; i < sp->n_shards; i++) /* what is still to hash */
                bytes += sp->shards[i].digested ? 0 : (double)sp->shards[i].n * sp->shards[i].width;
        }
    }
    if (bytes > 2e9) /* ~1 s a GB a thread: worth a word */
        fprintf(stderr, "tandem: hashing the dataset's %.1f GB of tokens (data.mp pins them)\n", bytes / 1e9);
    const shard **all = malloc((n ? n : 1) * sizeof *all);
    sha256_digest *dig = malloc((n ? n : 1) * sizeof *dig);
    if (!all || !dig) {
        free(all);
        free(dig);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    size_t k = 0;
    for (int m = 0; m < M; m++)
        for (int s = 0; s < SPLIT_COUNT; s++)
            for (size_t i = 0; i < ds->domains[m].split[s].n_shards; i++) all[k++] = &ds->domains[m].split[s].shards[i];
    int failed = 0;
    /* the shards are mapped read-only: the threads only read */
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
    for (long j = 0; j < (long)n; j++) failed |= shard_digest(all[j], &dig[j]) != 0;
    k = 0;
    for (int m = 0; !failed && m < M; m++)
        for (int s = 0; !failed && s < SPLIT_COUNT; s++) {
            sha256_ctx *c = sha256_begin();
            if (!c) {
                failed = 1;
                break;
            }
            for (size_t i = 0; i < ds->domains[m].split[s].n_shards; i++, k++) sha256_update(c, dig[k].b, sizeof dig[k].b);
            sha256_end(c, &out->sha[m][s]);
        }
    free(all);
    free(dig);
    return failed ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
}

/* Where ds differs from the pinned `was`: an ERR_USAGE naming it (the domains, or a train
 * or val split); a test split that differs is only said. */
static int differs(const store *st, const dataset *ds, const rec_data *was, const rec_data *now, tdm_err *e) {
    const char *advice = "A resume, a replay or an evaluation would read other tokens than the run did: restore the "
                         "dataset the run started with (then run again), start a new run in another store, or, to "
                         "go on with the new data deliberately, point data.dataset at a copy of it with "
                         "--allow-change data.dataset (recorded)";
    int same_names = was->M == now->M;
    for (int m = 0; same_names && m < now->M; m++) same_names = !strcmp(was->domains[m], now->domains[m]);
    if (!same_names) {
        char a[1024] = "", b[1024] = "";
        for (int m = 0; m < was->M; m++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%s", m ? ", " : "", was->domains[m]);
        for (int m = 0; m < now->M; m++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%s", m ? ", " : "", now->domains[m]);
        return err_set(e, ERR_USAGE, "data.dataset: %s has the domains %s, but the run started with %s "
                       "(%s/%s). %s", ds->path, b, a, store_url((store *)st), LEDGER_DATA, advice);
    }
    for (int m = 0; m < now->M; m++)
        for (int s = 0; s < REC_DATA_SPLITS; s++) {
            if (sha256_equal(&was->sha[m][s], &now->sha[m][s])) continue;
            const dataset_split *sp = &ds->domains[m].split[s];
            if (s == SPLIT_TEST) { /* never trained on: an evaluation scores today's, said */
                fprintf(stderr, "tandem: note: the test split of domain '%s' in %s is not the one the run started "
                        "with (%s/%s); an evaluation scores today's\n", now->domains[m], ds->path,
                        store_url((store *)st), LEDGER_DATA);
                continue;
            }
            char hw[SHA256_HEX_LEN + 1], hn[SHA256_HEX_LEN + 1];
            sha256_hex(&was->sha[m][s], hw);
            sha256_hex(&now->sha[m][s], hn);
            return err_set(e, ERR_USAGE,
                           "data.dataset: the %s tokens of domain '%s' in %s (%zu shard%s, %llu tokens, "
                           "sha256 %.12s...) are not those the run started with (%s/%s pins sha256 "
                           "%.12s...): the corpus was rebuilt, edited or its shards swapped since. %s",
                           SPLIT_NAMES[s], now->domains[m], ds->path, sp->n_shards, sp->n_shards == 1 ? "" : "s",
                           (unsigned long long)sp->tokens, hn, store_url((store *)st), LEDGER_DATA, hw, advice);
        }
    return 0;
}

/* Writes data.mp (mode STORE_CREATE or STORE_OVERWRITE) once ld's lease is checked. */
static int put_data(store *st, const rec_data *d, int mode, ledger *ld, tdm_err *e) {
    size_t len;
    void *enc = rec_data_encode(d, &len);
    int rc = !enc ? err_set(e, ERR_INTERNAL, "out of memory") : ld ? ledger_check_lease(ld, e) : 0;
    /* a test freezes a writer here: its lease checked, data.mp not yet written */
    if (!rc) testhook_stop_at("data-put");
    if (!rc) rc = store_put(st, LEDGER_DATA, enc, len, mode, e);
    free(enc);
    return rc;
}

int data_source_fingerprint(store *st, const dataset *ds, pin_mode mode, int repin, ledger *ld, tdm_err *e) {
    int write = mode != PIN_READ, dry = mode == PIN_CHECK;
    rec_data *now = malloc(sizeof *now), *was = malloc(sizeof *was);
    int rc = now && was ? data_source_digest(ds, now, e) : err_set(e, ERR_INTERNAL, "out of memory");
    for (int attempt = 0; !rc && attempt < 2; attempt++) {
        tdm_err de;
        rc = ledger_read(st, REC_KIND_DATA, LEDGER_DATA, NULL, was, &de);
        if (rc == 0) {
            rc = differs(st, ds, was, now, e);
            if (rc != ERR_USAGE || !write) break;
            /* other domain names, or the same in another order: the run's state (α, data
             * cursors, tokens seen, the overfitting record), its α records, metrics and RUN
             * are indexed by the domains in order, so a change cannot take them on — the
             * state went to the wrong domains by position, silently (a hunt of odd configs:
             * loss_a showed b's loss, and mixture.mp named the new order) */
            int same_names = was->M == now->M;
            for (int m = 0; same_names && m < now->M; m++) same_names = !strcmp(was->domains[m], now->domains[m]);
            if (!same_names && repin && !run_config_nothing_computed(st)) {
                char b[1024] = "";
                for (int m = 0; m < was->M; m++)
                    snprintf(b + strlen(b), sizeof b - strlen(b), "%s%s", m ? ", " : "", was->domains[m]);
                rc = err_set(e, ERR_USAGE, "data.dataset: %s lists other domains, or the same in another order, than "
                             "the run computed with (%s, in this order; %s/%s): the run's state and records are kept "
                             "per domain in that order, so --allow-change data.dataset cannot take this on. List the "
                             "same domain names in the same order in the new dataset, or start a new run in another "
                             "store", ds->path, b, store_url(st), LEDGER_DATA);
                break;
            }
            /* the pin follows the data when the change is recorded now (--allow-change
             * data.dataset), or when nothing was computed from the pinned data yet (a first
             * start that failed before its first commit, the data then fixed) */
            if (!repin && !run_config_nothing_computed(st)) break;
            rc = 0;
            if (dry) break; /* written under the lease */
            fprintf(stderr, "tandem: %s/%s now pins %s (%s)\n", store_url(st), LEDGER_DATA, ds->path,
                    repin ? "data.dataset changes, recorded" : "the data it pinned had nothing computed from it");
            rc = put_data(st, now, STORE_OVERWRITE, ld, e);
            break;
        }
        if (rc == STORE_CORRUPT && !dry) /* damaged: said, and replaced by today's digests when writing */
            fprintf(stderr, "tandem: %s/%s could not be read (%s)%s\n", store_url(st), LEDGER_DATA, de.msg,
                    write ? "; written again from the dataset" : "");
        else if (rc != STORE_NOT_FOUND && rc != STORE_CORRUPT) {
            *e = de;
            break;
        }
        if (!write || dry) { /* a run from before data.mp, or not started: nothing to compare */
            rc = 0;
            break;
        }
        rc = put_data(st, now, rc == STORE_CORRUPT ? STORE_OVERWRITE : STORE_CREATE, ld, e);
        if (rc != STORE_EXISTS) break; /* written, or an error */
        /* another writer created it since the read: compared on the next pass. (The loop's
         * condition ended the loop here, and STORE_EXISTS (-2) left the process as exit
         * status 254, under the message an earlier step had left in e.) */
        rc = 0;
        if (attempt == 1) rc = STORE_EXISTS;
    }
    /* created by another writer and gone again before it could be read (twice): a pin this
     * start cannot judge; never a store outcome passed up as an exit status */
    if (rc == STORE_EXISTS)
        rc = err_set(e, ERR_STORE, "%s/%s: another writer wrote and removed it while this one pinned the dataset; "
                     "only one tandem may run on a store: run again", store_url(st), LEDGER_DATA);
    free(now);
    free(was);
    return rc;
}
