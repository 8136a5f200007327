/* rng.c — Philox4x32-10 (Salmon et al., SC'11) and helpers built on it. */
#include "util/rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void rng_philox(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]) {
    uint32_t k0 = key[0], k1 = key[1];
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint64_t rng_mix64(uint64_t a, uint64_t b) {
    uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_stream_init(rng_stream *s, uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b,
                     uint32_t c) {
    uint64_t k = rng_mix64(seed, purpose);
    s->key[0] = (uint32_t)k;
    s->key[1] = (uint32_t)(k >> 32);
    s->ctr[0] = a;
    s->ctr[1] = b;
    s->ctr[2] = c;
    s->ctr[3] = 0;
    s->left = 0;
}

void rng_stream_seek(rng_stream *s, uint32_t block) {
    s->ctr[3] = block;
    s->left = 0;
}

uint32_t rng_u32(rng_stream *s) {
    if (s->left == 0) {
        rng_philox(s->key, s->ctr, s->buf);
        s->ctr[3]++;
        s->left = 4;
    }
    return s->buf[4 - s->left--];
}

uint64_t rng_u64(rng_stream *s) {
    uint64_t hi = rng_u32(s);
    return (hi << 32) | rng_u32(s);
}

double rng_uniform(rng_stream *s) {
    return (double)(rng_u64(s) >> 11) * 0x1.0p-53;
}

uint64_t rng_below(rng_stream *s, uint64_t n) {
    /* Rejection from the largest multiple of n below 2^64. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n + 1) % n;
    for (;;) {
        uint64_t x = rng_u64(s);
        if (x <= limit) return x % n;
    }
}

double rng_normal(rng_stream *s) {
    /* One normal per call keeps the stream position a simple function of the call count. */
    double u1 = 1.0 - rng_uniform(s); /* (0, 1] so log is finite */
    double u2 = rng_uniform(s);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
