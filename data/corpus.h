/* corpus.h — synthetic multi-domain corpora with known entropy (`tandem gen-corpus`).
 *
 * Domain m (0-based, of M) is an order-k Markov source (k = 1 by default, or 2):
 *
 *   alphabet: A = min(vocab, 128) tokens. The first A/2 are shared by every domain (so
 *       what a model learns on one domain transfers in part), the other A - A/2 are drawn
 *       per domain from the rest of the vocabulary (when vocab > A; otherwise all tokens
 *       are shared).
 *   successors: each context (the last k alphabet tokens) has b_m distinct possible
 *       next tokens, drawn from the alphabet by Philox(seed, RNG_CORPUS; m, context).
 *   probabilities: the j-th successor has probability ∝ 1/(j+1) (Zipf, exponent 1).
 *   b_m = round(2 r^m) with r = min(2, (A/2)^(1/(M-1))): 2, 4, 8, ... while that fits in
 *       the alphabet, otherwise spread geometrically from 2 to A; made strictly increasing
 *       where A allows, so the domains' entropies differ and grow with m.
 *
 * Every context has the same successor probabilities (only the successors differ), so the
 * source's entropy rate is exactly H(b_m) = -Σ p_j log2 p_j: the best loss any model can
 * reach on that domain (times ln 2 for nats). Each split is one chain started from a
 * random context; train, val and test chains are independent, so the split sizes do not
 * change each other's tokens. Everything is a pure function of the options.
 *
 * Output under `out`: per domain <name>/train_NNN.bin, val_NNN.bin, test_NNN.bin (llm.c
 * shards of at most shard_tokens tokens, numbered with enough digits to sort) and
 * out/dataset.yaml describing them (see data/dataset.h).
 */
#ifndef TANDEM_DATA_CORPUS_H
#define TANDEM_DATA_CORPUS_H

#include <stdint.h>
#include <stdio.h>

#include "util/err.h"

#define CORPUS_MAX_ALPHABET 128

typedef struct corpus_opts {
    const char *out;              /* output directory, created if missing */
    int n_domains;                /* 1..64 */
    const char *const *names;     /* n_domains names, or NULL for d0, d1, ... */
    const uint64_t *train_tokens; /* n_train counts: 1 (every domain) or n_domains */
    int n_train;                  /* 0: the default count */
    uint64_t val_tokens;          /* >= 1 */
    uint64_t test_tokens;         /* 0: no test split */
    uint64_t shard_tokens;        /* 1..SHARD_MAX_TOKENS */
    int vocab;                    /* 1..65536 */
    const int *successors;        /* n_domains branching factors b_m (2..alphabet), or NULL
                                     for the default growing sequence */
    int order;                    /* 1 or 2: the context is the last `order` tokens. Order 1
                                     (A contexts) is learnable by a small model in minutes;
                                     order 2 (A^2 contexts) needs far more data and capacity */
    uint64_t seed;
    FILE *report; /* one summary line per domain; NULL: silent */
} corpus_opts;

#define CORPUS_DEFAULT_DOMAINS 3
#define CORPUS_DEFAULT_TRAIN 1000000
#define CORPUS_DEFAULT_VAL 100000
#define CORPUS_DEFAULT_TEST 100000
#define CORPUS_DEFAULT_SHARD 100000000 /* llm.c's shard size */
#define CORPUS_DEFAULT_VOCAB 256
#define CORPUS_DEFAULT_SEED 1
#define CORPUS_DEFAULT_ORDER 1

/* Fills `o` with the defaults above (out NULL, report stdout). */
void corpus_opts_init(corpus_opts *o);

/* b_m: successors per context of domain m of n_domains for a vocabulary of `vocab`. */
int corpus_branching(int n_domains, int vocab, int m);

/* Entropy rate in bits/token of a source with b successors per context. */
double corpus_entropy_bits(int b);

/* Writes the corpus described by `o`. Validates the options first (ERR_USAGE naming the
 * option), and refuses to mix with an older corpus: a train/val/test shard already in a
 * domain directory that this run would not overwrite is an error, since the dataset's
 * globs would pick it up. */
int corpus_generate(const corpus_opts *o, tdm_err *e);

#endif
