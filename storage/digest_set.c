/* digest_set.c — a set of SHA-256 digests by open addressing; see digest_set.h. */
#include "storage/digest_set.h"

#include <stdlib.h>
#include <string.h>

/* A 64-bit finaliser (MurmurHash3's fmix64): every input bit reaches every output bit. */
static uint64_t fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* A digest's bytes are uniform, but every one is mixed in, so that digests in a hostile
 * store's manifests that share most of their bytes do not all land in one run of slots
 * (a review: a multiply alone left each word's high bytes out of the slot). */
static size_t home(const sha256_digest *d, size_t nslot) {
    uint64_t w[4], h = 0;
    memcpy(w, d->b, sizeof w);
    for (int i = 0; i < 4; i++) h = fmix64(h ^ w[i]);
    return (size_t)h & (nslot - 1);
}

size_t digest_set_find(const digest_set *s, const sha256_digest *d) {
    if (!s->nslot) return SIZE_MAX;
    for (size_t i = home(d, s->nslot);; i = (i + 1) & (s->nslot - 1)) {
        uint32_t v = s->slot[i];
        if (!v) return SIZE_MAX;
        if (sha256_equal(&s->d[v - 1], d)) return v - 1;
    }
}

int digest_set_has(const digest_set *s, const sha256_digest *d) { return digest_set_find(s, d) != SIZE_MAX; }

/* Room for one more member: the slots at most half full, d with a free place. */
static int grow(digest_set *s) {
    if (s->n >= UINT32_MAX - 1) return -1;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        sha256_digest *nd = realloc(s->d, cap * sizeof *nd);
        if (!nd) return -1;
        s->d = nd;
        s->cap = cap;
    }
    if (2 * (s->n + 1) <= s->nslot) return 0;
    size_t nslot = s->nslot ? 2 * s->nslot : 128;
    uint32_t *slot = calloc(nslot, sizeof *slot);
    if (!slot) return -1;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = home(&s->d[k], nslot);
        while (slot[i]) i = (i + 1) & (nslot - 1);
        slot[i] = (uint32_t)(k + 1);
    }
    free(s->slot);
    s->slot = slot;
    s->nslot = nslot;
    return 0;
}

int digest_set_add(digest_set *s, const sha256_digest *d) {
    if (digest_set_has(s, d)) return 0;
    if (grow(s)) return -1;
    size_t i = home(d, s->nslot);
    while (s->slot[i]) i = (i + 1) & (s->nslot - 1);
    s->d[s->n] = *d;
    s->slot[i] = (uint32_t)(++s->n);
    return 1;
}

void digest_set_free(digest_set *s) {
    free(s->d);
    free(s->slot);
    memset(s, 0, sizeof *s);
}
