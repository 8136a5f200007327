/* rng.h — counter-based random numbers (Philox4x32-10).
 *
 * DESIGN.md §4: every random choice is a pure function of (seed, purpose, coordinates),
 * never of mutable global state. A stream is keyed by (seed, purpose) and positioned by
 * three 32-bit coordinates (for example episode, step, domain); the fourth counter word
 * numbers the blocks inside the stream. Two streams with any differing input are
 * independent; the same inputs give the same numbers on every machine and backend.
 */
#ifndef TANDEM_UTIL_RNG_H
#define TANDEM_UTIL_RNG_H

#include <stdint.h>

/* What a stream is used for; part of the key so purposes never share numbers. */
enum {
    RNG_MODEL_INIT = 1,
    RNG_SAMPLER_PERM = 2,
    RNG_SAMPLER_SHIFT = 3,
    RNG_MIX_SAMPLE = 4,
    RNG_CORPUS = 5,
    RNG_TEST = 99,
};

/* One Philox4x32-10 block: out = philox(key, ctr). */
void rng_philox(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]);

typedef struct rng_stream {
    uint32_t key[2];
    uint32_t ctr[4]; /* ctr[0..2]: coordinates, ctr[3]: next block */
    uint32_t buf[4];
    int left; /* unread words in buf */
} rng_stream;

/* Positions a stream at block 0 of (seed, purpose, a, b, c). */
void rng_stream_init(rng_stream *s, uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b,
                     uint32_t c);

/* Moves a stream to the start of block `block` (words already buffered are dropped).
 * rng_normal reads exactly one block per call from a stream at a block boundary, so the
 * j-th normal of a stream is the first after rng_stream_seek(s, j): a long run of normals
 * can be drawn in parallel pieces with the same values. */
void rng_stream_seek(rng_stream *s, uint32_t block);

uint32_t rng_u32(rng_stream *s);
uint64_t rng_u64(rng_stream *s);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(rng_stream *s);
/* Uniform integer in [0, n) without modulo bias; n > 0. */
uint64_t rng_below(rng_stream *s, uint64_t n);
/* Standard normal (Box-Muller in double precision). */
double rng_normal(rng_stream *s);

/* A 64-bit mix of two words (splitmix64 finaliser); a cheap keyed hash. */
uint64_t rng_mix64(uint64_t a, uint64_t b);

#endif
