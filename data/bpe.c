/* bpe.c — the BPE model and merge algorithm (bpe.h).
 *
 * Two open-addressing hash tables (bytes -> id, pair -> merge) and two merge loops: a
 * pieces of up to SHORT parts scan their pair ranks linearly (tiktoken's way, the fastest
 * for the short words that are most of the text); longer ones (a 10 kB run of spaces, a
 * base64 blob) use a heap of candidate merges over a linked list of parts, so a piece
 * costs O(n log n), not O(n^2). */
#include "data/bpe.h"

#include <stdlib.h>
#include <string.h>

#define SHORT 48
#define NO_ENTRY UINT64_MAX

int tok_ids_append(tok_ids *x, const uint32_t *ids, size_t k) {
    if (x->cap - x->n < k) {
        size_t cap = x->cap ? x->cap : 256;
        while (cap - x->n < k) cap *= 2;
        uint32_t *v = realloc(x->v, cap * sizeof *v);
        if (!v) return -1;
        x->v = v;
        x->cap = cap;
    }
    memcpy(x->v + x->n, ids, k * sizeof *ids);
    x->n += k;
    return 0;
}

void tok_ids_free(tok_ids *x) {
    free(x->v);
    memset(x, 0, sizeof *x);
}

/* A 64-bit hash of a byte string (FNV-1a on 8-byte words, then a finalizer). */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    h = (h ^ w) * 0x100000001B3ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_pair(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return k;
}

/* A slot keeps the hash's low bits beside the id, so a probe past other tokens rarely
 * has to read their bytes (the lookups are most of the encoding time). */
typedef struct map_slot {
    uint32_t id; /* BPE_NONE: empty */
    uint32_t h;
} map_slot;

struct bpe_map {
    map_slot *slot;
    size_t cap, n; /* cap a power of two */
};

typedef struct pair_slot {
    uint64_t key;  /* left << 32 | right */
    uint32_t rank; /* BPE_NONE: empty */
    uint32_t id;
} pair_slot;

struct bpe_pairs {
    pair_slot *slot;
    size_t cap, n;
};

const char *bpe_token(const bpe *m, uint32_t id, size_t *n) {
    if (id >= m->nids || m->entry[id] == NO_ENTRY) return NULL;
    *n = (size_t)(m->entry[id] & 0xFFFFFF);
    return m->blob + (m->entry[id] >> 24);
}

/* The slot of byte string s[0..n) (hash h): its own, or the empty one it would take. */
static size_t map_find(const bpe *m, const char *s, size_t n, uint64_t h) {
    const bpe_map *mp = m->bytes;
    size_t mask = mp->cap - 1, i = (size_t)h & mask;
    uint32_t h32 = (uint32_t)(h >> 32);
    for (;; i = (i + 1) & mask) {
        uint32_t id = mp->slot[i].id;
        if (id == BPE_NONE) return i;
        if (mp->slot[i].h != h32) continue;
        size_t tn = 0;
        const char *t = bpe_token(m, id, &tn);
        if (tn == n && !memcmp(t, s, n)) return i;
    }
}

uint32_t bpe_lookup(const bpe *m, const char *s, size_t n) {
    return m->bytes->slot[map_find(m, s, n, hash_bytes(s, n))].id;
}

static int map_grow(bpe *m) {
    bpe_map *mp = m->bytes, old = *mp;
    size_t cap = old.cap * 2;
    mp->slot = malloc(cap * sizeof *mp->slot);
    if (!mp->slot) {
        *mp = old;
        return -1;
    }
    memset(mp->slot, 0xFF, cap * sizeof *mp->slot);
    mp->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slot[i].id == BPE_NONE) continue;
        size_t tn = 0;
        const char *t = bpe_token(m, old.slot[i].id, &tn);
        mp->slot[map_find(m, t, tn, hash_bytes(t, tn))] = old.slot[i];
    }
    free(old.slot);
    return 0;
}

static size_t pairs_find(const bpe_pairs *p, uint64_t key) {
    size_t mask = p->cap - 1, i = (size_t)hash_pair(key) & mask;
    while (p->slot[i].rank != BPE_NONE && p->slot[i].key != key) i = (i + 1) & mask;
    return i;
}

static int pairs_grow(bpe_pairs *p) {
    bpe_pairs old = *p;
    size_t cap = old.cap * 2;
    p->slot = malloc(cap * sizeof *p->slot);
    if (!p->slot) {
        *p = old;
        return -1;
    }
    for (size_t i = 0; i < cap; i++) p->slot[i].rank = BPE_NONE;
    p->cap = cap;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slot[i].rank != BPE_NONE) p->slot[pairs_find(p, old.slot[i].key)] = old.slot[i];
    free(old.slot);
    return 0;
}

int bpe_init(bpe *m) {
    memset(m, 0, sizeof *m);
    m->bytes = calloc(1, sizeof *m->bytes);
    m->pairs = calloc(1, sizeof *m->pairs);
    if (!m->bytes || !m->pairs) goto fail;
    m->bytes->cap = 1024;
    m->bytes->slot = malloc(m->bytes->cap * sizeof(map_slot));
    m->pairs->cap = 1024;
    m->pairs->slot = malloc(m->pairs->cap * sizeof(pair_slot));
    if (!m->bytes->slot || !m->pairs->slot) goto fail;
    memset(m->bytes->slot, 0xFF, m->bytes->cap * sizeof(map_slot));
    for (size_t i = 0; i < m->pairs->cap; i++) m->pairs->slot[i].rank = BPE_NONE;
    for (int b = 0; b < 256; b++) m->byte_id[b] = BPE_NONE;
    return 0;
fail:
    bpe_free(m);
    return -1;
}

void bpe_free(bpe *m) {
    if (m->bytes) free(m->bytes->slot);
    if (m->pairs) free(m->pairs->slot);
    free(m->bytes);
    free(m->pairs);
    free(m->blob);
    free(m->entry);
    memset(m, 0, sizeof *m);
}

int bpe_set_token(bpe *m, uint32_t id, const char *s, size_t n, int mergeable) {
    if (n >= (1u << 24) || id == BPE_NONE) return BPE_TOO_LONG;
    if (id >= m->nids) {
        size_t cap = m->nids ? m->nids : 1024;
        while (cap <= id) cap *= 2;
        uint64_t *e = realloc(m->entry, cap * sizeof *e);
        if (!e) return -1;
        for (size_t i = m->nids; i < cap; i++) e[i] = NO_ENTRY;
        m->entry = e;
        m->nids = (uint32_t)cap;
    }
    if (m->entry[id] != NO_ENTRY) return 1;
    uint64_t h = hash_bytes(s, n);
    if (mergeable) {
        if ((m->bytes->n + 1) * 2 > m->bytes->cap && map_grow(m)) return -1;
        if (m->bytes->slot[map_find(m, s, n, h)].id != BPE_NONE) return 1;
    }
    if (m->blob_cap - m->blob_n < n) {
        size_t cap = m->blob_cap ? m->blob_cap : 1 << 16;
        while (cap - m->blob_n < n) cap *= 2;
        char *b = realloc(m->blob, cap);
        if (!b) return -1;
        m->blob = b;
        m->blob_cap = cap;
    }
    memcpy(m->blob + m->blob_n, s, n);
    m->entry[id] = (uint64_t)m->blob_n << 24 | n;
    m->blob_n += n;
    if (mergeable) {
        m->bytes->slot[map_find(m, s, n, h)] = (map_slot){id, (uint32_t)(h >> 32)};
        m->bytes->n++;
    }
    return 0;
}

int bpe_add_merge(bpe *m, uint32_t left, uint32_t right, uint32_t rank, uint32_t id) {
    bpe_pairs *p = m->pairs;
    if ((p->n + 1) * 2 > p->cap && pairs_grow(p)) return -1;
    uint64_t key = (uint64_t)left << 32 | right;
    pair_slot *s = &p->slot[pairs_find(p, key)];
    if (s->rank == BPE_NONE) {
        s->key = key;
        s->rank = rank;
        s->id = id;
        p->n++;
    } else if (rank < s->rank) {
        s->rank = rank;
        s->id = id;
    }
    return 0;
}

int bpe_put_merge(bpe *m, uint32_t left, uint32_t right, uint32_t rank, uint32_t id) {
    bpe_pairs *p = m->pairs;
    if ((p->n + 1) * 2 > p->cap && pairs_grow(p)) return -1;
    uint64_t key = (uint64_t)left << 32 | right;
    pair_slot *s = &p->slot[pairs_find(p, key)];
    if (s->rank == BPE_NONE) p->n++;
    s->key = key;
    s->rank = rank;
    s->id = id;
    return 0;
}

/* A polynomial hash of byte strings modulo the prime 2^61 - 1 (base RH_BASE, each byte
 * counted as byte + 1), whose hashes of every prefix and suffix of a string come in O(1)
 * each from the string's own (rh_*). bpe_derive_merges filters its splits with it: a split
 * whose halves are not both tokens costs no hash of the halves' bytes. */
#define RH_P ((1ULL << 61) - 1)
#define RH_BASE 1000003ULL

static uint64_t rh_mul(uint64_t a, uint64_t b) {
    unsigned __int128 p = (unsigned __int128)a * b;
    uint64_t r = (uint64_t)(p & RH_P) + (uint64_t)(p >> 61);
    return r >= RH_P ? r - RH_P : r;
}

static uint64_t rh_add(uint64_t a, uint64_t b) { return a + b >= RH_P ? a + b - RH_P : a + b; }

static uint64_t rh_pow(uint64_t b, uint64_t e) {
    uint64_t r = 1;
    for (; e; e >>= 1, b = rh_mul(b, b))
        if (e & 1) r = rh_mul(r, b);
    return r;
}

static uint64_t rh_of(const char *s, size_t n) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = rh_add(rh_mul(h, RH_BASE), (uint64_t)(unsigned char)s[i] + 1);
    return h;
}

/* The tokens by (rolling hash, length): an open-addressing table (h 0 marks an empty
 * slot, so a hash of 0 is kept as 1). bpe_derive_merges finds both halves of a split
 * here in O(1), without hashing or comparing their bytes: the cost of a token is its
 * length, however many of its splits are tokens (a vocabulary of a, aa, ..., a^9800 made
 * every split a lookup of its bytes: O(N^3)). Two tokens of one length and one 61-bit
 * hash would be taken for each other — a crafted vocabulary may so get a wrong merge,
 * never a hang; the reference vocabularies agree token for token (test_tokenizer). */
typedef struct rh_entry {
    uint64_t h;
    uint32_t len, id;
} rh_entry;

typedef struct rh_map {
    rh_entry *v;
    size_t mask;
} rh_map;

static uint64_t rh_key(uint64_t h) { return h ? h : 1; }

static size_t rh_slot(const rh_map *m, uint64_t h, uint32_t len) {
    size_t i = (size_t)((h ^ len) * 0x9e3779b97f4a7c15ULL >> 20) & m->mask;
    while (m->v[i].h && (m->v[i].h != h || m->v[i].len != len)) i = (i + 1) & m->mask;
    return i;
}

/* The id of the token of length len and hash h, or BPE_NONE. */
static uint32_t rh_find(const rh_map *m, uint64_t h, size_t len) {
    if (len > UINT32_MAX) return BPE_NONE;
    const rh_entry *x = &m->v[rh_slot(m, rh_key(h), (uint32_t)len)];
    return x->h ? x->id : BPE_NONE;
}

int bpe_derive_merges(bpe *m) {
    size_t ntok = 0, cap = 16;
    for (uint32_t id = 0; id < m->nids; id++) {
        size_t n;
        ntok += bpe_token(m, id, &n) != NULL;
    }
    while (cap < 2 * ntok + 2) cap *= 2;
    rh_map map = {calloc(cap, sizeof(rh_entry)), cap - 1};
    if (!map.v) return -1;
    for (uint32_t id = 0; id < m->nids; id++) {
        size_t n;
        const char *t = bpe_token(m, id, &n);
        if (!t || n > UINT32_MAX || bpe_lookup(m, t, n) != id) continue; /* the token's own id */
        uint64_t h = rh_key(rh_of(t, n));
        rh_entry *x = &map.v[rh_slot(&map, h, (uint32_t)n)];
        if (!x->h) *x = (rh_entry){h, (uint32_t)n, id};
    }
    const uint64_t inv_base = rh_pow(RH_BASE, RH_P - 2); /* Fermat: RH_P is prime */
    int rc = 0;
    /* the splits whose halves are both tokens: ~2.3 per token in gpt2, cl100k and o200k;
     * a vocabulary built to have thousands (a, aa, ..., a^7000: 24.5M pairs, 1.7 GB from
     * a 33 MB file) is no BPE vocabulary, refused before its pairs fill memory */
    uint64_t pairs = 0, most = (uint64_t)ntok * BPE_DERIVED_PER_TOKEN + 65536;
    for (uint32_t id = 0; id < m->nids && !rc; id++) {
        size_t n;
        const char *t = bpe_token(m, id, &n);
        if (!t || n < 2 || bpe_lookup(m, t, n) != id) continue;
        /* prefix t[0..k) and suffix t[k..n): whole = pre * B^(n-k) + suf */
        uint64_t whole = rh_of(t, n), pre = 0, pw = rh_pow(RH_BASE, n - 1);
        for (size_t k = 1; k < n && !rc; k++, pw = rh_mul(pw, inv_base)) {
            pre = rh_add(rh_mul(pre, RH_BASE), (uint64_t)(unsigned char)t[k - 1] + 1);
            uint64_t suf = rh_add(whole, RH_P - rh_mul(pre, pw)); /* pw = B^(n-k) */
            uint32_t a = rh_find(&map, pre, k), b = a == BPE_NONE ? BPE_NONE : rh_find(&map, suf, n - k);
            if (b != BPE_NONE && bpe_add_merge(m, a, b, id, id)) rc = -1;
            if (b != BPE_NONE && ++pairs > most) rc = -2;
        }
    }
    free(map.v);
    return rc;
}

int bpe_check_bytes(bpe *m) {
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        m->byte_id[b] = bpe_lookup(m, &c, 1);
        if (m->byte_id[b] == BPE_NONE) return b + 1;
    }
    return 0;
}

/* The merge of (left, right): its rank (BPE_NONE if none) and result id. */
static inline uint32_t pair_rank(const bpe *m, uint32_t left, uint32_t right, uint32_t *id) {
    const pair_slot *s = &m->pairs->slot[pairs_find(m->pairs, (uint64_t)left << 32 | right)];
    *id = s->id;
    return s->rank;
}

#define CACHE_SLOTS 16384
#define CACHE_KEY 40
#define CACHE_IDS 14

typedef struct cache_slot {
    uint8_t klen, nids; /* klen 0: empty */
    char key[CACHE_KEY];
    uint32_t ids[CACHE_IDS];
} cache_slot;

struct bpe_cache {
    cache_slot slot[CACHE_SLOTS];
};

bpe_cache *bpe_cache_new(void) { return calloc(1, sizeof(bpe_cache)); }
void bpe_cache_free(bpe_cache *c) { free(c); }

/* Merges parts ids[0..n) in place, shortest form (SHORT parts or fewer); returns the
 * number of parts left. rk[i]/res[i]: the merge of parts i and i+1. */
static size_t merge_short(const bpe *m, uint32_t *ids, size_t n) {
    uint32_t rk[SHORT], res[SHORT];
    for (size_t i = 0; i + 1 < n; i++) rk[i] = pair_rank(m, ids[i], ids[i + 1], &res[i]);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rk[i] < rk[best]) best = i;
        if (rk[best] == BPE_NONE) break;
        ids[best] = res[best];
        memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof *ids);
        memmove(rk + best + 1, rk + best + 2, (n - best - 2) * sizeof *rk);
        memmove(res + best + 1, res + best + 2, (n - best - 2) * sizeof *res);
        n--;
        if (best > 0) rk[best - 1] = pair_rank(m, ids[best - 1], ids[best], &res[best - 1]);
        if (best + 1 < n) rk[best] = pair_rank(m, ids[best], ids[best + 1], &res[best]);
    }
    return n;
}

typedef struct cand {
    uint32_t rank, pos;
} cand;

static inline int cand_less(cand a, cand b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(cand *h, size_t *hn, cand c) {
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(c, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *hn) {
    cand top = h[0], last = h[--*hn];
    size_t i = 0, n = *hn;
    for (;;) {
        size_t l = 2 * i + 1, s = i;
        cand sc = last;
        if (l < n && cand_less(h[l], sc)) s = l, sc = h[l];
        if (l + 1 < n && cand_less(h[l + 1], sc)) s = l + 1;
        if (s == i) break;
        h[i] = h[s];
        i = s;
    }
    if (n) h[i] = last;
    return top;
}

/* The heap form for long pieces: parts as a linked list (next/prev by index, a part's
 * index is its first byte's, so index order is text order), candidates (rank, pos) in
 * a min-heap, stale ones skipped when popped (the pair at pos no longer has that rank).
 * Writes the result to out. 0 or -1 (no memory). */
static int merge_long(const bpe *m, const uint32_t *start, size_t n, tok_ids *out) {
    uint32_t *id = malloc(n * sizeof *id), *nx = malloc(n * sizeof *nx),
             *pv = malloc(n * sizeof *pv);
    cand *h = malloc(n * 3 * sizeof *h); /* n-1 initial + at most 2 per merge */
    int rc = -1;
    if (!id || !nx || !pv || !h) goto done;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        id[i] = start[i];
        nx[i] = i + 1 < n ? (uint32_t)(i + 1) : BPE_NONE;
        pv[i] = i ? (uint32_t)(i - 1) : BPE_NONE;
    }
    uint32_t r;
    for (size_t i = 0; i + 1 < n; i++)
        if ((r = pair_rank(m, id[i], id[i + 1], &(uint32_t){0})) != BPE_NONE)
            heap_push(h, &hn, (cand){r, (uint32_t)i});
    while (hn) {
        cand c = heap_pop(h, &hn);
        uint32_t i = c.pos, j = nx[i], res;
        if (id[i] == BPE_NONE || j == BPE_NONE || pair_rank(m, id[i], id[j], &res) != c.rank)
            continue;
        id[i] = res;
        id[j] = BPE_NONE;
        nx[i] = nx[j];
        if (nx[j] != BPE_NONE) pv[nx[j]] = i;
        if (pv[i] != BPE_NONE && (r = pair_rank(m, id[pv[i]], id[i], &(uint32_t){0})) != BPE_NONE)
            heap_push(h, &hn, (cand){r, pv[i]});
        if (nx[i] != BPE_NONE && (r = pair_rank(m, id[i], id[nx[i]], &(uint32_t){0})) != BPE_NONE)
            heap_push(h, &hn, (cand){r, i});
    }
    rc = 0;
    for (uint32_t i = 0; i != BPE_NONE && !rc; i = nx[i]) rc = tok_ids_append(out, &id[i], 1);
done:
    free(id);
    free(nx);
    free(pv);
    free(h);
    return rc;
}

int bpe_encode_piece(const bpe *m, const char *s, size_t n, bpe_cache *cache, tok_ids *out) {
    if (n == 1) return tok_ids_append(out, &m->byte_id[(unsigned char)s[0]], 1);
    /* the memo first: it answers most pieces, whole-token ones included */
    cache_slot *slot = NULL;
    uint64_t h = hash_bytes(s, n);
    if (cache && n <= CACHE_KEY) {
        slot = &cache->slot[(h >> 40) & (CACHE_SLOTS - 1)];
        if (slot->klen == n && !memcmp(slot->key, s, n))
            return tok_ids_append(out, slot->ids, slot->nids);
    }
    if (m->whole_first) {
        uint32_t id = m->bytes->slot[map_find(m, s, n, h)].id;
        if (id != BPE_NONE) {
            if (slot) {
                slot->klen = (uint8_t)n;
                slot->nids = 1;
                memcpy(slot->key, s, n);
                slot->ids[0] = id;
            }
            return tok_ids_append(out, &id, 1);
        }
    }
    if (n > BPE_PIECE_MAX) return -2;
    if (n > SHORT) {
        uint32_t *ids = malloc(n * sizeof *ids);
        if (!ids) return -1;
        for (size_t i = 0; i < n; i++) ids[i] = m->byte_id[(unsigned char)s[i]];
        int rc = merge_long(m, ids, n, out);
        free(ids);
        return rc;
    }
    uint32_t ids[SHORT];
    for (size_t i = 0; i < n; i++) ids[i] = m->byte_id[(unsigned char)s[i]];
    size_t k = merge_short(m, ids, n);
    if (slot && k <= CACHE_IDS) {
        slot->klen = (uint8_t)n;
        slot->nids = (uint8_t)k;
        memcpy(slot->key, s, n);
        memcpy(slot->ids, ids, k * sizeof *ids);
    }
    return tok_ids_append(out, ids, k);
}
