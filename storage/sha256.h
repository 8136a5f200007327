/* sha256.h — SHA-256 digests (OpenSSL EVP) and their hex form.
 *
 * Every object tandem stores is named or checked by a SHA-256: blobs are content
 * addressed, manifests and α records carry the digests of what they reference. */
#ifndef TANDEM_STORAGE_SHA256_H
#define TANDEM_STORAGE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32
#define SHA256_HEX_LEN 64

typedef struct sha256_digest {
    uint8_t b[SHA256_LEN];
} sha256_digest;

/* An incremental hasher; opaque. */
typedef struct sha256_ctx sha256_ctx;

sha256_ctx *sha256_begin(void);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
/* Writes the digest and frees the context. */
void sha256_end(sha256_ctx *c, sha256_digest *out);

void sha256(const void *data, size_t n, sha256_digest *out);

/* 64 lowercase hex characters plus NUL into out[65]. */
void sha256_hex(const sha256_digest *d, char out[SHA256_HEX_LEN + 1]);

/* Parses 64 hex characters; 0 on success, -1 if `hex` is not a digest. */
int sha256_parse_hex(const char *hex, sha256_digest *out);

int sha256_equal(const sha256_digest *a, const sha256_digest *b);

#endif
