/* run_identity.c — every rank of a data-parallel run checks, before any collective whose
 * size depends on the config, that it runs the same run as rank 0: its resolved config
 * (canonical, store included), its dataset's tokens (data.mp's digests) and the world
 * size. Ranks started with another optim.lr or dataset otherwise finished with bits
 * that no config gives (tcp), or crashed inside an all-reduce of another size (MPI). */
#include "runner/run_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/records.h"
#include "runner/data_source.h"
#include "storage/sha256.h"

/* "name=sha256(value)\n" per key of the canonical config, per domain and split of the
 * data, and the world: lines that name what differs without sending a value (a store
 * URL may hold a password). malloc'd; NULL with e set. */
static char *identity_lines(run_ctx *r, tdm_err *e) {
    config_kv *kv = NULL;
    size_t n = 0;
    if (config_canonical(&r->cfg, &kv, &n, e)) return NULL;
    rec_data *d = malloc(sizeof *d);
    if (!d || data_source_digest(&r->ds, d, e)) {
        if (!d) err_set(e, ERR_INTERNAL, "out of memory");
        free(kv);
        free(d);
        return NULL;
    }
    static const char *const SPLITS[REC_DATA_SPLITS] = {"train", "val", "test"};
    size_t cap = 64 + n * (CONFIG_KEY_MAX + SHA256_HEX_LEN + 4) +
                 (size_t)d->M * REC_DATA_SPLITS * (REC_DOMAIN_MAX + SHA256_HEX_LEN + 32);
    char *t = malloc(cap), hex[SHA256_HEX_LEN + 1];
    size_t len = 0;
    if (t) {
        len += (size_t)snprintf(t + len, cap - len, "ranks=%d\n", comm_world(r->comm));
        for (size_t i = 0; i < n; i++) {
            sha256_digest h;
            sha256(kv[i].value, strlen(kv[i].value), &h);
            sha256_hex(&h, hex);
            len += (size_t)snprintf(t + len, cap - len, "%s=%s\n", kv[i].key, hex);
        }
        len += (size_t)snprintf(t + len, cap - len, "data domains=%d\n", d->M);
        for (int m = 0; m < d->M; m++)
            for (int s = 0; s < REC_DATA_SPLITS; s++) {
                sha256_hex(&d->sha[m][s], hex);
                len += (size_t)snprintf(t + len, cap - len, "the %s tokens of domain %s=%s\n",
                                        SPLITS[s], d->domains[m], hex);
            }
    } else {
        err_set(e, ERR_INTERNAL, "out of memory");
    }
    free(kv);
    free(d);
    return t;
}

/* The names (before '=') of the lines of `mine` and `theirs` that differ, ", "-joined,
 * at most a few. */
static void name_differences(const char *mine, const char *theirs, char *out, size_t cap) {
    size_t len = 0;
    int shown = 0, more = 0;
    out[0] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        const char *a = pass ? theirs : mine, *b = pass ? mine : theirs;
        for (const char *l = a; *l;) {
            const char *nl = strchr(l, '\n'), *eq = memchr(l, '=', (size_t)(nl - l));
            size_t ll = (size_t)(nl - l) + 1, kl = eq ? (size_t)(eq - l) : ll - 1;
            /* the same line in b (names are unique), or only the same name */
            int same = 0, named = 0;
            for (const char *m = b; *m && !same;) {
                const char *mn = strchr(m, '\n');
                size_t ml = (size_t)(mn - m) + 1;
                if (ml == ll && !memcmp(m, l, ll)) same = 1;
                else if (ml > kl && !memcmp(m, l, kl) && m[kl] == '=') named = 1;
                m = mn + 1;
            }
            if (!same && !(pass && named)) { /* a name in both is said once */
                if (shown < 4 && len + kl + 3 < cap) {
                    len += (size_t)snprintf(out + len, cap - len, "%s%.*s", shown ? ", " : "", (int)kl, l);
                    shown++;
                } else {
                    more++;
                }
            }
            l = nl + 1;
        }
    }
    if (more && len + 24 < cap) snprintf(out + len, cap - len, " and %d more", more);
}

int run_agree_identity(run_ctx *r, tdm_err *e) {
    int R = comm_world(r->comm), me = r->rank;
    if (R == 1) return 0;
    char *mine = identity_lines(r, e);
    int rc = mine ? 0 : e->code;
    /* a rank that could not say who it is still takes part: the others must not wait */
    sha256_digest d = {0}, d0 = {0};
    if (mine) sha256(mine, strlen(mine), &d);
    d0 = d;
    tdm_err ce = {0};
    int crc = comm_bcast(r->comm, &d0, sizeof d0, &ce);
    double *differ = crc ? NULL : calloc((size_t)R, sizeof *differ);
    if (!crc && !differ) crc = err_set(&ce, ERR_INTERNAL, "out of memory");
    if (differ) {
        differ[me] = rc ? 2 : !sha256_equal(&d, &d0);
        crc = comm_allreduce_f64(r->comm, differ, (size_t)R, &ce);
    }
    int any = 0, failed = 0;
    char ranks[256] = "";
    size_t rl = 0;
    for (int q = 0; !crc && q < R; q++) {
        failed |= differ[q] == 2;
        if (differ[q] != 1) continue;
        if (!any++ || rl + 16 < sizeof ranks)
            rl += (size_t)snprintf(ranks + rl, sizeof ranks - rl, "%s%d", rl ? ", " : "", q);
    }
    char *theirs = NULL;
    uint64_t n0 = mine && me == 0 ? strlen(mine) : 0;
    /* rank 0's lines to every rank that differs, so that it can name the keys */
    if (!crc && any && !failed) crc = comm_bcast(r->comm, &n0, sizeof n0, &ce);
    if (!crc && any && !failed) {
        theirs = malloc(n0 + 1);
        if (theirs && me == 0) memcpy(theirs, mine, n0 + 1);
        crc = theirs ? comm_bcast(r->comm, theirs, n0, &ce) : err_set(&ce, ERR_INTERNAL, "out of memory");
        if (!crc) theirs[n0] = '\0';
    }
    if (!rc && crc) rc = (*e = ce, ce.code);
    if (!rc && failed) rc = err_set(e, ERR_INTERNAL, "another rank could not read its config or dataset "
                                    "to compare them with rank 0's (its log says why)");
    if (!rc && any && me != 0 && differ[me] == 1) {
        char keys[512];
        name_differences(mine, theirs, keys, sizeof keys);
        rc = err_set(e, ERR_USAGE, "rank %d's config or dataset differs from rank 0's (%s): start every "
                     "rank with the same config and data", me, keys);
    } else if (!rc && any) {
        rc = err_set(e, ERR_USAGE, "rank%s %s of %d ha%s another config or dataset than rank 0 (%s log "
                     "names the keys): start every rank with the same config and data",
                     any > 1 ? "s" : "", ranks, R, any > 1 ? "ve" : "s", any > 1 ? "their" : "its");
    }
    free(mine);
    free(theirs);
    free(differ);
    return rc;
}
