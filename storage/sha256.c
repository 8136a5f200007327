/* sha256.c — SHA-256 through OpenSSL's EVP interface. */
#include "storage/sha256.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/hex.h"
#include "util/testhook.h"

struct sha256_ctx {
    EVP_MD_CTX *md;
};

/* OpenSSL only fails here when out of memory (an address-space limit, ulimit -v, reached
 * by threads the memory plan did not foresee; a cgroup's limit). A digest we cannot compute
 * would make every integrity guarantee void, and the callers (37 of them, upload threads
 * among them) have no error path, so the process ends here — with exit 3 (a runtime error,
 * docs/running.md) and the cause said, not abort(): a SIGABRT and a core file read as a
 * crash of tandem. _exit, not exit: another thread may be inside a commit, and atexit
 * handlers racing it could leave worse than a crash does (a commit is whole or absent; the
 * lease is taken over at the next start). */
static void die_openssl(const char *what) {
    fprintf(stderr, "tandem: out of memory computing a SHA-256 digest (OpenSSL's %s failed): the "
                    "address-space limit (ulimit -v) or the memory limit is reached; what was "
                    "committed is safe: raise the limit (or lower run.threads) and run again\n",
            what);
    _exit(3);
}

sha256_ctx *sha256_begin(void) {
    sha256_ctx *c = malloc(sizeof *c);
    /* TANDEM_TEST_FAIL_AT=sha256:n: the n-th context cannot be allocated, as under a
     * reached address-space limit */
    if (c && testhook_hit("TANDEM_TEST_FAIL_AT", "sha256")) free(c), c = NULL;
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
