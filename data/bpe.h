/* bpe.h — the byte-pair-encoding model: token byte strings, the merge table and the
 * merge algorithm that turns one pre-tokenized piece into token ids.
 *
 * Both tokenizer families load into the same form: a merge is a pair of token ids
 * (left, right) with a rank and the id of their concatenation. A Hugging Face merges
 * list gives rank = its index; a tiktoken ranks file gives, for every token and every
 * split of it into two tokens, rank = the token's rank, so the lowest-rank merge of
 * adjacent parts is exactly tiktoken's "merge the adjacent pair whose concatenation has
 * the lowest rank". Ties (the same rank twice) go to the leftmost pair, as both
 * references do. */
#ifndef TANDEM_DATA_BPE_H
#define TANDEM_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

/* A growable vector of token ids. A zeroed tok_ids is empty and valid. */
typedef struct tok_ids {
    uint32_t *v;
    size_t n, cap;
} tok_ids;

/* Appends k ids; 0, or -1 when out of memory (the vector is left as it was). */
int tok_ids_append(tok_ids *x, const uint32_t *ids, size_t k);
void tok_ids_free(tok_ids *x);

#define BPE_NONE UINT32_MAX

typedef struct bpe_map bpe_map;     /* byte string -> id (opaque) */
typedef struct bpe_pairs bpe_pairs; /* (left, right) -> (rank, id) (opaque) */

typedef struct bpe {
    uint32_t nids; /* ids 0..nids-1 have a decode entry slot */
    char *blob;    /* every token's bytes */
    size_t blob_n, blob_cap;
    uint64_t *entry; /* per id: offset << 24 | length, or UINT64_MAX: no token */
    bpe_map *bytes;  /* the mergeable tokens (not the added ones) by bytes */
    bpe_pairs *pairs;
    uint32_t byte_id[256]; /* the token of each single byte */
    int whole_first;       /* a piece that is a token is that token (tiktoken, ignore_merges) */
} bpe;

/* An empty model; 0 or -1 (no memory). Free with bpe_free. */
int bpe_init(bpe *m);
void bpe_free(bpe *m);

/* Gives id the byte string s[0..n) (n < 2^24). `mergeable`: the merge algorithm may
 * produce it (it joins the bytes map); added tokens are decode-only. Returns 0; 1 when
 * the id already has bytes or (mergeable) the bytes already have an id; BPE_TOO_LONG when
 * n ≥ 2^24 (or id is BPE_NONE): nothing set; -1 no memory. */
#define BPE_TOO_LONG 2
int bpe_set_token(bpe *m, uint32_t id, const char *s, size_t n, int mergeable);

/* The id of mergeable byte string s[0..n), or BPE_NONE. */
uint32_t bpe_lookup(const bpe *m, const char *s, size_t n);

/* The bytes of id (NULL when the id has none). */
const char *bpe_token(const bpe *m, uint32_t id, size_t *n);

/* Adds merge (left, right) -> id at rank; a pair already present keeps its lower rank.
 * 0, or -1 when out of memory. */
int bpe_add_merge(bpe *m, uint32_t left, uint32_t right, uint32_t rank, uint32_t id);
/* The same, but a pair already present takes this rank and id: a tokenizer.json that
 * lists a merge twice means its last listing, as Hugging Face's tokenizers read it (their
 * merges are a map filled in file order). */
int bpe_put_merge(bpe *m, uint32_t left, uint32_t right, uint32_t rank, uint32_t id);

/* Derives the merges of a tiktoken ranks vocabulary: for every mergeable token of two
 * bytes or more, each split into two mergeable tokens is a merge at the token's rank
 * (rank = id there). 0, -1 (no memory) or -2 (more than BPE_DERIVED_PER_TOKEN splits a
 * token on average, plus 65536: a vocabulary built to exhaust memory). */
#define BPE_DERIVED_PER_TOKEN 64
int bpe_derive_merges(bpe *m);

/* Fills byte_id from the bytes map: 0, or the first byte (0..255) with no token + 1. */
int bpe_check_bytes(bpe *m);

/* A per-thread memo of recently encoded pieces (bounded, direct-mapped). */
typedef struct bpe_cache bpe_cache;
bpe_cache *bpe_cache_new(void);
void bpe_cache_free(bpe_cache *c);

/* The longest piece encoded: one pre-tokenizer piece (a run of letters, digits, spaces or
 * punctuation with no break) is merged whole, at ~40 bytes of memory per byte of it (ids,
 * links and a heap of candidates); 16 MiB takes ~700 MiB. Natural text has no piece near
 * it; a hostile one of 256 MiB (a .jsonl record's bound) would need ~10 GiB. */
#define BPE_PIECE_MAX ((size_t)16 << 20)
#define BPE_PIECE_MAX_TEXT "16 MiB"

/* Appends the ids of the piece s[0..n) (n >= 1) to out. cache may be NULL. 0, -1 when
 * out of memory, -2 when n > BPE_PIECE_MAX (nothing appended). */
int bpe_encode_piece(const bpe *m, const char *s, size_t n, bpe_cache *cache, tok_ids *out);

#endif
