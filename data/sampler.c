/* sampler.c — epoch windows, the Feistel visit order, and cursor arithmetic. */
#include "data/sampler.h"

#include <string.h>

#include "util/rng.h"

/* Luby-Rackoff needs 4 rounds for a pseudo-random permutation; 6 give visibly better
 * mixing on the tiny domains (a few bits per half) that small corpora produce. */
#define FEISTEL_ROUNDS 6

/* An epoch skipped for having no window costs one pass over the shards; past this many
 * in a row something is wrong with the inputs rather than unlucky. */
#define MAX_EMPTY_EPOCHS (1u << 20)

typedef struct {
    uint64_t w;    /* windows in the epoch: the permutation's range */
    unsigned half; /* bits per Feistel half; the network permutes [0, 2^(2*half)) */
    uint64_t mask;
    uint64_t key[FEISTEL_ROUNDS];
} perm;

static void perm_init(perm *p, uint64_t w, uint64_t seed, int domain, int split, uint64_t epoch) {
    unsigned bits = 0;
    while (bits < 64 && ((uint64_t)1 << bits) < w) bits++;
    bits += bits & 1; /* a balanced network needs equal halves */
    p->w = w;
    p->half = bits / 2;
    p->mask = p->half ? ((uint64_t)1 << p->half) - 1 : 0;
    rng_stream s;
    rng_stream_init(&s, seed, RNG_SAMPLER_PERM, (uint32_t)domain, (uint32_t)split, (uint32_t)epoch);
    for (int r = 0; r < FEISTEL_ROUNDS; r++) p->key[r] = rng_u64(&s);
}

/* The x-th window to visit, x < w. Cycle-walking: a value outside [0, w) is fed back in;
 * since the network is a permutation of the larger power-of-two range, the walk returns
 * into [0, w) and the composite is a permutation of [0, w). The range is < 4w, so the
 * expected walk is under 4 evaluations. */
static uint64_t perm_apply(const perm *p, uint64_t x) {
    if (p->half == 0) return x; /* w == 1 */
    do {
        uint64_t l = x >> p->half, r = x & p->mask;
        for (int i = 0; i < FEISTEL_ROUNDS; i++) {
            uint64_t t = l ^ (rng_mix64(r, p->key[i]) & p->mask);
            l = r;
            r = t;
        }
        x = (l << p->half) | r;
    } while (x >= p->w);
    return x;
}

static uint64_t epoch_shift(uint64_t seed, int domain, int split, int T, uint64_t epoch) {
    rng_stream s;
    rng_stream_init(&s, seed, RNG_SAMPLER_SHIFT, (uint32_t)domain, (uint32_t)split,
                    (uint32_t)epoch);
    return rng_below(&s, (uint64_t)T);
}

static uint64_t shard_windows(uint64_t n, uint64_t shift, uint64_t T) {
    return n >= shift + T + 1 ? (n - shift - T - 1) / T + 1 : 0;
}

static uint64_t split_windows(const dataset_split *sp, uint64_t shift, uint64_t T) {
    uint64_t w = 0;
    for (size_t i = 0; i < sp->n_shards; i++) w += shard_windows(sp->shards[i].n, shift, T);
    return w;
}

static int args_ok(const dataset *ds, int domain, int split, int T) {
    return ds && domain >= 0 && domain < ds->n_domains && split >= 0 && split < SPLIT_COUNT &&
           T >= 1;
}

int sampler_check(const dataset *ds, int domain, int split, int T, tdm_err *e) {
    if (!ds || domain < 0 || domain >= ds->n_domains)
        return err_set(e, ERR_USAGE,
                       "sampler: domain index %d is outside the dataset's %d "
                       "domains",
                       domain, ds ? ds->n_domains : 0);
    if (split < 0 || split >= SPLIT_COUNT)
        return err_set(e, ERR_USAGE, "sampler: split %d is not train, val or test", split);
    if (T < 1) return err_set(e, ERR_USAGE, "sampler: sequence length T=%d must be >= 1", T);
    const dataset_split *sp = &ds->domains[domain].split[split];
    if (split_windows(sp, 0, (uint64_t)T) > 0) return 0;
    uint64_t longest = 0;
    for (size_t i = 0; i < sp->n_shards; i++)
        if (sp->shards[i].n > longest) longest = sp->shards[i].n;
    return err_set(e, ERR_USAGE,
                   "%s: domain '%s' %s has no sequence of T+1 = %llu tokens: its %zu shard(s) "
                   "hold %llu tokens, the longest %llu, and sequences never cross shards; use "
                   "a smaller T or give the split a shard of at least %llu tokens",
                   ds->path, ds->domains[domain].name, dataset_split_name(split),
                   (unsigned long long)T + 1, sp->n_shards, (unsigned long long)sp->tokens,
                   (unsigned long long)longest, (unsigned long long)T + 1);
}

uint64_t sampler_windows(const dataset *ds, int domain, int split, int T, uint64_t seed,
                         uint64_t epoch) {
    if (!args_ok(ds, domain, split, T)) return 0;
    return split_windows(&ds->domains[domain].split[split],
                         epoch_shift(seed, domain, split, T, epoch), (uint64_t)T);
}

/* sampler_locate plus the epoch's window count, which advancing needs. */
static int locate(const dataset *ds, int domain, int split, int T, uint64_t seed,
                  sampler_cursor *cur, size_t *shard_index, uint64_t *offset, uint64_t *w_out,
                  tdm_err *e) {
    int rc = sampler_check(ds, domain, split, T, e);
    if (rc) return rc;
    const dataset_split *sp = &ds->domains[domain].split[split];
    uint64_t t = (uint64_t)T, shift = 0, w = 0;
    for (unsigned skipped = 0;; skipped++) {
        shift = epoch_shift(seed, domain, split, T, cur->epoch);
        w = split_windows(sp, shift, t);
        if (w > 0) break;
        if (cur->pos != 0 || skipped == MAX_EMPTY_EPOCHS)
            return err_set(e, ERR_USAGE,
                           "%s: sampler cursor (epoch %llu, pos %llu) of domain '%s' %s does "
                           "not fit the data at T=%d (saved for another dataset or T?)",
                           ds->path, (unsigned long long)cur->epoch, (unsigned long long)cur->pos,
                           ds->domains[domain].name, dataset_split_name(split), T);
        cur->epoch++;
    }
    if (cur->pos >= w)
        return err_set(e, ERR_USAGE,
                       "%s: sampler cursor (epoch %llu, pos %llu) of domain '%s' %s is past "
                       "the epoch's %llu windows at T=%d (saved for another dataset or T?)",
                       ds->path, (unsigned long long)cur->epoch, (unsigned long long)cur->pos,
                       ds->domains[domain].name, dataset_split_name(split), (unsigned long long)w,
                       T);
    perm p;
    perm_init(&p, w, seed, domain, split, cur->epoch);
    uint64_t idx = perm_apply(&p, cur->pos);
    for (size_t i = 0; i < sp->n_shards; i++) {
        uint64_t k = shard_windows(sp->shards[i].n, shift, t);
        if (idx < k) {
            *shard_index = i;
            *offset = shift + idx * t;
            *w_out = w;
            return 0;
        }
        idx -= k;
    }
    return err_set(e, ERR_INTERNAL, "sampler: window index beyond the split (a bug)");
}

int sampler_locate(const dataset *ds, int domain, int split, int T, uint64_t seed,
                   sampler_cursor *cur, size_t *shard_index, uint64_t *offset, tdm_err *e) {
    uint64_t w;
    return locate(ds, domain, split, T, seed, cur, shard_index, offset, &w, e);
}

int sampler_next(const dataset *ds, int domain, int split, int T, uint64_t seed,
                 sampler_cursor *cur, uint32_t *out, tdm_err *e) {
    sampler_cursor c = *cur;
    size_t si;
    uint64_t off, w;
    int rc = locate(ds, domain, split, T, seed, &c, &si, &off, &w, e);
    if (rc) return rc;
    const shard *sh = &ds->domains[domain].split[split].shards[si];
    if ((rc = shard_copy(sh, (size_t)off, (size_t)T + 1, out, e))) return rc;
    if (++c.pos == w) {
        c.epoch++;
        c.pos = 0;
    }
    *cur = c;
    return 0;
}

int sampler_batch_per_domain(const dataset *ds, int split, int T, int B, uint64_t seed,
                             sampler_cursor *cursors, uint32_t *tokens, int32_t *domain_ids,
                             tdm_err *e) {
    int m_count = ds ? ds->n_domains : 0;
    if (m_count < 1 || m_count > DATASET_MAX_DOMAINS)
        return err_set(e, ERR_USAGE, "sampler: dataset has no domains");
    if (B < m_count)
        return err_set(e, ERR_USAGE,
                       "sampler: batch size B=%d is smaller than the %d domains (each batch holds "
                       "at least one sequence per domain)",
                       B, m_count);
    sampler_cursor next[DATASET_MAX_DOMAINS];
    memcpy(next, cursors, (size_t)m_count * sizeof *next);
    int per = B / m_count, extra = B % m_count;
    size_t row_len = (size_t)T + 1, row = 0;
    for (int m = 0; m < m_count; m++)
        for (int j = 0; j < per + (m < extra); j++, row++) {
            int rc = sampler_next(ds, m, split, T, seed, &next[m], tokens + row * row_len, e);
            if (rc) return rc;
            domain_ids[row] = m;
        }
    memcpy(cursors, next, (size_t)m_count * sizeof *next);
    return 0;
}
