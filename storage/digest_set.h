/* digest_set.h — a set of SHA-256 digests with constant-time lookups: the chunks a
 * store's states reference, counted, checked and collected by verify, status, gc and each
 * commit. A list scanned once per chunk made those quadratic in chunks (a hunt at scale:
 * verify of 92k blobs took 90 s, tripling them cost 8x; a commit of 3.3M chunks at
 * chunk_kib 4 hours). Members keep their insertion order (d[0..n)), so an index into d
 * can tag a member (ckpt's known_ok). */
#ifndef TANDEM_DIGEST_SET_H
#define TANDEM_DIGEST_SET_H

#include <stddef.h>
#include <stdint.h>

#include "storage/sha256.h"

typedef struct digest_set {
    sha256_digest *d; /* the members, in the order added */
    size_t n, cap;    /* members; room in d */
    uint32_t *slot;   /* open addressing: 1 + an index into d, 0 = empty */
    size_t nslot;     /* 0, or a power of two above twice n */
} digest_set;

/* Adds d: 1 when it was not a member, 0 when it was, -1 out of memory (nothing added). */
int digest_set_add(digest_set *s, const sha256_digest *d);

/* The index of d in s->d, or SIZE_MAX when it is no member. */
size_t digest_set_find(const digest_set *s, const sha256_digest *d);

/* Whether d is a member. */
int digest_set_has(const digest_set *s, const sha256_digest *d);

/* Frees what s holds and leaves it empty (a zeroed digest_set is an empty one). */
void digest_set_free(digest_set *s);

#endif
