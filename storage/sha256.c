/* sha256.c — SHA-256 through OpenSSL's EVP interface. */
#include "storage/sha256.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"

struct sha256_ctx {
    EVP_MD_CTX *md;
};

/* OpenSSL only fails here when out of memory; a digest we cannot compute would make every
 * integrity guarantee void, so that is fatal rather than an error to carry. */
static void die_openssl(const char *what) {
    fprintf(stderr, "tandem: OpenSSL %s failed (out of memory?)\n", what);
    abort();
}

sha256_ctx *sha256_begin(void) {
    sha256_ctx *c = malloc(sizeof *c);
    if (!c || !(c->md = EVP_MD_CTX_new())) die_openssl("EVP_MD_CTX_new");
    if (EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1) die_openssl("EVP_DigestInit_ex");
    return c;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    if (n && EVP_DigestUpdate(c->md, data, n) != 1) die_openssl("EVP_DigestUpdate");
}

void sha256_end(sha256_ctx *c, sha256_digest *out) {
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(c->md, out->b, &len) != 1 || len != SHA256_LEN)
        die_openssl("EVP_DigestFinal_ex");
    EVP_MD_CTX_free(c->md);
    free(c);
}

void sha256(const void *data, size_t n, sha256_digest *out) {
    sha256_ctx *c = sha256_begin();
    sha256_update(c, data, n);
    sha256_end(c, out);
}

void sha256_hex(const sha256_digest *d, char out[SHA256_HEX_LEN + 1]) {
    hex_lower(d->b, SHA256_LEN, out);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int sha256_parse_hex(const char *hex, sha256_digest *out) {
    if (strlen(hex) != SHA256_HEX_LEN) return -1;
    for (int i = 0; i < SHA256_LEN; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out->b[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int sha256_equal(const sha256_digest *a, const sha256_digest *b) {
    return memcmp(a->b, b->b, SHA256_LEN) == 0;
}
